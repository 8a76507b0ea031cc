/*
 * engine_int.h - the engine's state, shared by its two files (internal:
 * nothing outside run/engine.c, run/safeflow.c and run/enginenotify.c
 * includes it):
 *   engine.c    what to do for a change and when: the diff, the rules, the
 *               strongest action, --min-interval, --restart-delay, retries,
 *               the attempt's parameters, the actions, the commit;
 *   safeflow.c  the steps around the action of issue 26: validate, stage,
 *               swap the copy the app reads, verify, roll back, and the
 *               storm breaker (docs/safe-reload.md);
 *   enginenotify.c  the notifications of both (--notify-url, run/notify.h).
 * The cross-file calls carry the engine__ marker (engine.c's) or the
 * safeflow_ prefix (safeflow.c's).
 */
#ifndef RA_ENGINE_INT_H
#define RA_ENGINE_INT_H

#include <limits.h>
#include <stdint.h>
#include <uv.h>

#include "actions/action.h"
#include "config/config.h"
#include "hash/hash.h"
#include "run/engine.h"
#include "run/lastgood.h"
#include "run/storm.h"
#include "run/validate.h"

/* Where the attempt in flight is (safeflow.c moves it along). */
enum engine_phase {
    PHASE_IDLE = 0,
    PHASE_VALIDATE, /* the checker runs on the new content */
    PHASE_STAGE,    /* waiting for the stage gate */
    PHASE_ACTION,   /* the actions run */
    PHASE_VERIFY,   /* --verify is being tried */
    PHASE_ROLLBACK, /* the actions run again on the restored copy */
};

/* How an attempt ends (engine__end). */
enum engine_end {
    END_COMMIT, /* the target is applied: commit, look for the next change */
    END_FAILED, /* a failure a retry may fix: back off, try again */
    END_DROP,   /* never retried: rejected, halted, rolled back (a later change is acted on) */
    END_CLOSED, /* the engine is closing: nothing more */
};

/* One --keep-last-good root. */
struct engine_lkg {
    char *src;                    /* the --watch root (logical root of its manifest entries) */
    char *dir;                    /* DIR */
    char *live;                   /* DIR/live: what the app reads */
    char *cand;                   /* DIR/candidate: what the validator reads */
    char old_ts[LASTGOOD_TS_MAX]; /* live's previous version while the attempt may roll back */
};

struct stage;
struct httpc;
struct verify;
struct safeflow_ticket;
struct notify;

struct engine {
    uv_loop_t *loop;
    const struct config *cfg;
    struct action_env env;  /* the actions' shared state */
    uv_timer_t timer;       /* retry backoff or min-interval wait */
    uv_timer_t storm_timer; /* the storm breaker's resume */
    int open_handles;
    struct hash_manifest applied;
    struct hash_manifest observed;
    struct hash_manifest inflight_target;
    struct action_params params; /* the attempt in flight's copy */
    unsigned failed_mask;        /* actions of the failed job awaiting retry */
    int inflight;
    unsigned inflight_mask;
    enum engine_phase phase;
    int parts_left; /* actions of the current attempt still running */
    int parts_failed;
    int permanent; /* a failing part said a retry cannot help */
    int held;      /* a part was held back by the replicas' storm limit (rollout) */
    int attempt;
    int started;
    int have_last_start;
    uint64_t last_start_ms;
    /* --restart-delay (restart, restart-pod): the content first needed one
     * at hold_since_ms (loop time) since the last attempt. */
    int holding;
    uint64_t hold_since_ms;
    /* the last failed attempt: its content, and when its retry is due
     * (loop ms; 0 when none is armed) */
    unsigned char failed_total[HASH_LEN];
    uint64_t retry_at_ms;
    int pod_restarted; /* engine_pod_restarted: every container started with the baseline */
    int state_read;    /* the first engine_start read --state-dir's applied state */
    int state_warned;  /* a failed save of the applied state was logged */
    uint64_t attempt_start_ns;
    const char *last_action;
    const char *last_result;
    char last_error[512];
    struct kube *kube;     /* NULL outside a cluster */
    struct kevents *ev;    /* NULL when Events are off */
    struct ra_rng *rng;    /* the retry jitter's generator */
    struct notify *notify; /* --notify-url, NULL if none (engine_set_notify) */
    int closing;
    void (*done)(void *);
    void *done_ud;

    /* ---- safe reload (safeflow.c) ---- */
    struct engine_lkg *lkg; /* --keep-last-good, fixed at the first start (restart-only) */
    size_t nlkg;
    int lkg_set; /* lkg was read from the configuration */
    int filling; /* a copy is empty: the next accepted content fills it, without action */
    void (*ready_cb)(void *ud);
    void *ready_ud;
    struct validate *val;
    struct verify *ver;
    struct httpc *verify_hc;
    struct stage *stage;
    struct safeflow_ticket *ticket;    /* the stage acquire in flight */
    int acquired;                      /* the stage gave this attempt's target a slot */
    int swapped;                       /* the copies show the target; old_ts kept */
    unsigned char validated[HASH_LEN]; /* accepted and swapped in: a retry skips the steps */
    int have_validated;
    unsigned char counted[HASH_LEN]; /* the last content whose actions the storm breaker counted */
    unsigned char bad[HASH_LEN];     /* rejected, halted or rolled back: not retried */
    int have_bad;
    char verify_detail[700]; /* why the verification failed (rollback in progress) */
    struct storm storm;
    int storm_loaded;
    /* for /status */
    char rejected_hex[HASH_HEX_LEN + 1];
    char rejected_reason[VALIDATE_LINES_BYTES + 200];
    char verify_failed_hex[HASH_HEX_LEN + 1];
    char verify_error[700];
    char rolled_back_hex[HASH_HEX_LEN + 1];
    char halted_hex[HASH_HEX_LEN + 1];
};

/* ---- engine.c, for safeflow.c ---- */

/* Runs the actions of e->inflight_mask with e->params (PHASE_ACTION, or
 * PHASE_ROLLBACK as set by the caller); safeflow_actions_done follows. */
void engine__run_actions(struct engine *e);

/* Ends the attempt in flight (see enum engine_end). */
void engine__end(struct engine *e, enum engine_end how);

/* Posts an Event on the agent's own pod (nothing without a client, with
 * --events false, or in a dry run). */
void engine__event(struct engine *e, const char *type, const char *reason, const char *msg);

/* ---- enginenotify.c, for both ---- */

/* Queues a notification (nothing without --notify-url): event is "reload"
 * (ok: every action passed), "rejected", "rollback", "verify-failed",
 * "storm-halted" or "stage-halted"; detail the error or the reason (may be
 * NULL). Made from the attempt in flight, else from the observed content.
 * Never waits. */
void engine__notify(struct engine *e, const char *event, int ok, const char *detail);

/* Re-evaluates what to do (after the storm breaker resumed). */
void engine__schedule(struct engine *e);

/* ---- safeflow.c, for engine.c ---- */

/* The first start's part (from engine_start, after the applied state was
 * chosen): the --keep-last-good copies (empty ones are filled before
 * anything else; without an applied-state record the copies say what the
 * app has), the storm breaker's record. */
void safeflow_start(struct engine *e, const struct hash_manifest *baseline, int had_record);

/* An attempt starts on e->inflight_target with e->params set: validate,
 * stage, swap, then engine__run_actions, or engine__end. */
void safeflow_begin(struct engine *e);

/* The actions of the attempt finished (ok: all passed). */
void safeflow_actions_done(struct engine *e, int ok);

/* 1 if content h must not be acted on again (rejected, halted, rolled back). */
int safeflow_is_bad(const struct engine *e, const unsigned char h[HASH_LEN]);

/* 1 if an action may start now; else the breaker holds (it reports, and
 * its timer calls engine__schedule when the content has been stable). */
int safeflow_storm_allows(struct engine *e);

/* A new observed content (the storm breaker's stability clock). */
void safeflow_observed(struct engine *e);

/* The configuration changed (the storm limit). */
void safeflow_config_changed(struct engine *e);

/* Closing: the step in flight is given up (no callback follows). Returns 1
 * if the attempt was ended here (then engine__end(END_CLOSED) ran). */
int safeflow_cancel(struct engine *e);

/* Frees what the safe flow holds (after the handles closed). */
void safeflow_free(struct engine *e);

/* The safe flow's part of /status. */
void safeflow_status(const struct engine *e, struct engine_status *st);

#endif
