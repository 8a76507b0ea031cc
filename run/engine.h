/*
 * engine.h - deciding and performing actions on content changes.
 *
 * The engine keeps the last *applied* manifest (the state an action last
 * succeeded on) and the latest *observed* one. The changed files are the
 * diff between the two; each maps to an action by the first matching --rule
 * (else --action), and the strongest required action runs once: none <
 * signal = http = exec < restart < restart-pod < rollout (several distinct
 * in-place actions of equal strength all run). The applied state is committed only when the
 * action succeeded (and saved into --state-dir, run/statedir.h; not for
 * restart-pod, whose success is an exit: the agent that starts again and
 * takes its record commits it). A failure is retried with capped exponential backoff
 * and jitter; a newer change supersedes the pending retry and is diffed
 * against the applied state, keeping the failed actions in the set, so a
 * failed reload is retried even if the content reverts. --min-interval
 * spaces attempts. restart and restart-pod are held --restart-delay after
 * the change that first needs them and then act on the content of that
 * time, so a burst of edits costs one restart; a retry of a failed one on
 * the same content is not held, but a change after the failure is held,
 * and never starts one before the retry's backoff. No call blocks the
 * loop.
 *
 * The actions are looked up in the table of actions/action.h; each attempt
 * runs on its own copy of the options its actions read, so a live
 * configuration change applies to the next attempt, never to one in flight.
 *
 * Around the action, the safe-reload steps of docs/safe-reload.md
 * (run/safeflow.c): the storm breaker, --validate (a rejected content is
 * never acted on nor retried), the stage gate (run/stage.h), the swap of
 * the --keep-last-good copies, --verify, and the rollback.
 */
#ifndef RA_ENGINE_H
#define RA_ENGINE_H

#include <stdint.h>
#include <uv.h>

#include "config/config.h"
#include "hash/hash.h"

struct engine;

struct engine_status {
    const char *last_action; /* e.g. "signal", "" if none yet */
    const char *last_result; /* "success", "failure", "" */
    const char *last_error;  /* "" if none */
    int attempt;             /* attempts of the pending job so far, 0 if none */
    int inflight;            /* an action is running */
    int retry_pending;       /* a retry timer is armed */
    uint64_t retry_in_ms;    /* time until it fires */
    char applied[HASH_HEX_LEN + 1];
    const char *phase; /* "idle", "validate", "stage", "action", "verify", "rollback" */
    /* safe reload: "" when none */
    const char *rejected_hash;      /* the last content --validate rejected */
    const char *rejected_reason;    /* the checker's verdict and first lines */
    const char *verify_failed_hash; /* the last content whose --verify failed */
    const char *verify_error;
    const char *rolled_back_hash; /* ... and was rolled back (--keep-last-good) */
    const char *halted_hash;      /* the stage gate halted it for the workload */
    int keep_last_good;           /* copies are kept */
    int copies_ready;             /* ... and hold validated content */
    int storm_limit;              /* --storm-limit N (0: off) */
    uint64_t storm_window_ms;
    int storm_actions; /* actions within the window */
    int storm_halted;
    uint64_t storm_resume_in_ms; /* while halted: at the earliest, if the content stays */
};

/* Creates the engine. cfg must stay valid (the caller updates it in place
 * and calls engine_config_changed). The http action's client (libcurl) is
 * created on first use, so agents without HTTP actions never load it. */
int engine_create(uv_loop_t *loop, const struct config *cfg, struct engine **out);

/* Tells the engine about the baseline at start: with --on-start skip it
 * becomes the applied state; with reload the engine acts on it once, except
 * for its restart-pod-class files (taken as applied: every container read
 * them at its start, and acting would restart the pod at every start). */
void engine_start(struct engine *e, const struct hash_manifest *baseline);

/* Call before engine_start when this agent's start is a pod restart the
 * previous agent made (its record, run/statedir.h): the baseline is
 * taken as applied whatever --on-start says (every container has just
 * started with it). */
void engine_pod_restarted(struct engine *e);

/* How an action asks the daemon to exit with a status (restart-pod): fn
 * runs once, on the loop, after the action's result was taken. Without it
 * restart-pod fails. */
void engine_set_exit(struct engine *e, void (*fn)(void *ud, int code), void *ud);

/* A new observed state (after a real change). The manifest is copied. */
void engine_observe(struct engine *e, const struct hash_manifest *cur);

struct kube;
struct rollout;
struct kevents;

/* Gives the engine the Kubernetes client: the rollout action and Events
 * (ev may be NULL). Call before engine_start. */
void engine_set_kube(struct engine *e, struct kube *k, struct rollout *ro, struct kevents *ev);

/* Startup reconcile (--on-start reconcile): pod_hash is the rollout hash
 * the pod was created with (its template annotation), NULL or "" if absent.
 * When it differs from the current rollout hash, a rollout is scheduled (it
 * patches only if the owner does not carry the current hash already); an
 * absent annotation counts as agreement, so a first deployment never rolls. */
void engine_reconcile(struct engine *e, const char *pod_hash);

/* Call after the configuration changed (rules or action may differ). */
void engine_config_changed(struct engine *e);

void engine_get_status(const struct engine *e, struct engine_status *st);

struct notify;

/* Gives the engine the notifier (run/notify.h; NULL: none, the default):
 * one notification after each attempt's actions and each rejection,
 * rollback, failed verification, storm halt and stage halt. n must outlive
 * the engine. */
void engine_set_notify(struct engine *e, struct notify *n);

struct stage;

/* Gives the engine the stage gate (run/stage.h; NULL: no staging, the
 * default). Call before engine_start. */
void engine_set_stage(struct engine *e, struct stage *s);

/* 1 once the engine is ready: always, except with --keep-last-good while a
 * copy the app reads is still empty (the first accepted content fills it).
 * fn(ud) runs once when a not-ready engine becomes ready. */
int engine_is_ready(const struct engine *e);
void engine_set_ready_cb(struct engine *e, void (*fn)(void *ud), void *ud);

/* Stops scheduling. An action in flight that has an abort (the rollout) ends
 * now; the others finish or time out (bounded by --http-timeout /
 * --exec-timeout / --restart-timeout). Then the handles close, e is freed
 * and done(ud) runs (done may be NULL). */
void engine_close(struct engine *e, void (*done)(void *), void *ud);

#endif
