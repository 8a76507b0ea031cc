/*
 * safeflow.c - the steps of one change around the action (issue 26,
 * docs/safe-reload.md), on the engine's state (run/engine_int.h):
 *
 *   storm check (schedule) -> validate the new content (with
 *   --keep-last-good: copied into DIR/candidate, which the validator reads
 *   at the app's path; the app still reads DIR/live) -> stage acquire ->
 *   swap the copies into DIR/live -> the action -> verify -> stage
 *   release -> commit.
 *
 *   rejected      no action; Event ConfigRejected with the checker's first
 *                 lines; the content is never retried (a later different
 *                 one is acted on); the stage halts it for the workload.
 *   verify fails  with --keep-last-good: live/ back to the previous copy,
 *                 the action again, Event ConfigRolledBack, the content
 *                 never retried; without: Event ConfigVerifyFailed (the app
 *                 runs it: it is applied).
 *   storm         more than --storm-limit actions in the window: Event
 *                 ReloadStormHalted, no action until the content has been
 *                 stable for the window, then one action on what it is.
 *
 * --dry-run logs what each step would do and runs none (the checker and
 * the verification included: nothing is copied, run or swapped).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/backoff.h"
#include "base/log.h"
#include "config/safeopts.h"
#include "net/httpc.h"
#include "run/engine_int.h"
#include "run/metrics.h"
#include "run/safestate.h"
#include "run/stage.h"
#include "run/verify.h"

/* The actions --verify follows: not rollout (the pod is replaced) nor
 * restart-pod (the agent ends). */
#define NOT_VERIFIED (ACTION_BIT(ACTION_ROLLOUT) | ACTION_BIT(ACTION_RESTART_POD))

/* A stage acquire's context: it outlives the engine if the engine closes
 * first (the gate answers later; e is NULL then). */
struct safeflow_ticket {
    struct engine *e;
};

/* snprintf, where a cut message is fine (and said by no warning). */
static void fmt(char *out, size_t n, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *out, size_t n, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    vsnprintf(out, n, f, ap);
    va_end(ap);
}

static void target_hex(const struct engine *e, char hex[HASH_HEX_LEN + 1])
{
    hash_hex(e->inflight_target.total, hex);
}

static void mark_bad(struct engine *e)
{
    memcpy(e->bad, e->inflight_target.total, HASH_LEN);
    e->have_bad = 1;
    e->have_validated = 0;
}

int safeflow_is_bad(const struct engine *e, const unsigned char h[HASH_LEN])
{
    return e->have_bad && memcmp(e->bad, h, HASH_LEN) == 0;
}

/* The log record of a step: event name, hash, the message. */
static void step_log(struct engine *e, enum log_level lvl, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void step_log(struct engine *e, enum log_level lvl, const char *event, const char *fmt, ...)
{
    char msg[1400], hex[HASH_HEX_LEN + 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    target_hex(e, hex);
    struct log_rec r;
    if (log_rec_begin(&r, lvl, event)) {
        log_rec_str(&r, "hash", hex);
        if (e->cfg->dry_run) log_rec_bool(&r, "dry_run", 1);
        log_rec_end(&r, "%s", msg);
    }
}

static void stage_release_if(struct engine *e, int ok, const char *reason)
{
    char hex[HASH_HEX_LEN + 1];
    if (!e->stage) return;
    target_hex(e, hex);
    stage_release(e->stage, hex, ok, reason);
    e->acquired = 0;
}

/* ---- the copies (--keep-last-good) ---- */

static void lkg_setup(struct engine *e)
{
    const struct strlist *l = &e->cfg->keep_last_good;
    e->lkg_set = 1;
    if (!l->n) return;
    e->lkg = calloc(l->n, sizeof *e->lkg);
    if (!e->lkg) ra_oom();
    for (size_t i = 0; i < l->n; i++) {
        struct engine_lkg *k = &e->lkg[e->nlkg];
        if (safeopts_split_lkg(l->v[i], &k->src, &k->dir) < 0) continue; /* judged by cfg_build */
        k->live = ra_asprintf("%s/" LASTGOOD_LIVE, k->dir);
        k->cand = ra_asprintf("%s/" LASTGOOD_CANDIDATE, k->dir);
        e->nlkg++;
        if (e->cfg->dry_run) continue;                  /* nothing is written */
        if (mkdir(k->dir, 0755) < 0 && errno != EEXIST) /* the emptyDir, usually there */
            log_warn("keep-last-good: cannot create %s: %s", k->dir, strerror(errno));
        lastgood_tidy(k->live);
        lastgood_tidy(k->cand);
    }
}

/* Copies the target's entries of each root from its source (the watched
 * root, or the validated candidate) into the candidate, or into live. For
 * live, the previous version is kept for a rollback; when one is kept
 * already (an attempt that failed and was superseded), that older one stays
 * the version to roll back to: it is the last one the app was verified on. */
static int lkg_write(struct engine *e, int to_live, char *err, size_t errlen)
{
    int validated_copy = to_live && e->cfg->validate && *e->cfg->validate;
    for (size_t i = 0; i < e->nlkg; i++) {
        struct engine_lkg *k = &e->lkg[i];
        const char *from = validated_copy ? k->cand : k->src, *to = to_live ? k->live : k->cand;
        char was[LASTGOOD_TS_MAX] = "";
        int rc = lastgood_write(&e->inflight_target, k->src, from, to, to_live ? was : NULL,
                                sizeof was, err, errlen);
        if (rc == 0 && to_live) {
            if (!k->old_ts[0])
                fmt(k->old_ts, sizeof k->old_ts, "%s", was);
            else
                lastgood_drop(k->live, was);
        }
        if (rc < 0) {
            while (to_live && i-- > 0) { /* the roots already swapped go back */
                char why[512];
                if (lastgood_restore(e->lkg[i].live, e->lkg[i].old_ts, why, sizeof why) < 0)
                    log_warn("keep-last-good: %s", why);
                e->lkg[i].old_ts[0] = '\0';
            }
            return rc;
        }
    }
    if (to_live) e->swapped = 1;
    return 0;
}

/* The attempt is over for good: the kept previous versions go. */
static void lkg_commit(struct engine *e)
{
    for (size_t i = 0; i < e->nlkg; i++) {
        lastgood_drop(e->lkg[i].live, e->lkg[i].old_ts);
        e->lkg[i].old_ts[0] = '\0';
    }
    e->swapped = 0;
}

static void became_ready(struct engine *e)
{
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_INFO, "copies-ready"))
        log_rec_end(&r, "the --keep-last-good copies hold validated content: the app may start");
    if (e->ready_cb) e->ready_cb(e->ready_ud);
}

/* ---- the storm breaker ---- */

static void storm_save(struct engine *e);

/* The actions run on a new target: counted once per content (a retry of
 * the same content is not another action). */
static void run_counted(struct engine *e)
{
    if (memcmp(e->counted, e->inflight_target.total, HASH_LEN) != 0) {
        memcpy(e->counted, e->inflight_target.total, HASH_LEN);
        storm_note_action(&e->storm, storm_now_ms());
        storm_save(e);
    }
    engine__run_actions(e);
}

static void storm_save(struct engine *e)
{
    char err[512];
    const char *dir = e->cfg->state_dir;
    if (!dir || !*dir || e->cfg->dry_run) return;
    if (safestate_save_storm(dir, e->storm.t, e->storm.n, err, sizeof err) < 0)
        log_warn("%s; a restarted agent counts the storm breaker's actions afresh", err);
}

static void on_storm_timer(uv_timer_t *t)
{
    struct engine *e = t->data;
    int64_t now = storm_now_ms();
    if (!storm_try_resume(&e->storm, now)) {
        int64_t at = storm_resume_at(&e->storm);
        uv_timer_start(&e->storm_timer, on_storm_timer, at > now ? (uint64_t)(at - now) : 1, 0);
        return;
    }
    metrics_storm(0);
    storm_save(e);
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_INFO, "storm-resumed"))
        log_rec_end(&r, "the content has been stable for the storm window: acting again");
    engine__schedule(e);
}

static void storm_arm(struct engine *e)
{
    int64_t now = storm_now_ms(), at = storm_resume_at(&e->storm);
    uv_timer_start(&e->storm_timer, on_storm_timer, at > now ? (uint64_t)(at - now) : 1, 0);
}

int safeflow_storm_allows(struct engine *e)
{
    int64_t now = storm_now_ms();
    if (storm_allows(&e->storm, now)) return 1;
    if (e->storm.halted) return 0; /* already said; the timer resumes */
    storm_trip(&e->storm, now);
    metrics_storm(1);
    storm_arm(e);
    char win[32], msg[600];
    snprintf(win, sizeof win, "%llds", (long long)(e->storm.window_ms / 1000));
    fmt(msg, sizeof msg,
        "%zu actions within %s (--storm-limit %d/%s): not acting on further changes until "
        "the content has been stable for %s, then once on the content of that time",
        storm_count(&e->storm, now), win, e->storm.max, win, win);
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_WARN, "storm-halted")) {
        log_rec_int(&r, "actions", (long long)storm_count(&e->storm, now));
        log_rec_int(&r, "window_ms", (long long)e->storm.window_ms);
        log_rec_end(&r, "%s", msg);
    }
    engine__event(e, "Warning", "ReloadStormHalted", msg);
    engine__notify(e, "storm-halted", 0, msg);
    return 0;
}

/* The rollout found the workload rolled --storm-limit times within the
 * window by its replicas (the workload got the Event): this agent's
 * breaker holds as if it had counted them, until the content is stable. */
static void storm_held(struct engine *e)
{
    int64_t now = storm_now_ms();
    if (!e->storm.halted) {
        storm_trip(&e->storm, now);
        metrics_storm(1);
        step_log(e, RA_LOG_WARN, "storm-halted",
                 "%s; not acting on further changes until the content has been stable for "
                 "%llds",
                 e->last_error, (long long)(e->storm.window_ms / 1000));
        engine__notify(e, "storm-halted", 0, e->last_error);
    }
    storm_arm(e);
    engine__end(e, END_DROP);
}

void safeflow_observed(struct engine *e)
{
    storm_content_changed(&e->storm, storm_now_ms());
    if (e->storm.halted) storm_arm(e);
}

static void storm_configure_from(struct engine *e)
{
    int was = e->storm.halted;
    storm_configure(&e->storm, e->cfg->storm_max, e->cfg->storm_window_ns / 1000000);
    if (was && !e->storm.halted) {
        uv_timer_stop(&e->storm_timer);
        metrics_storm(0);
    }
}

void safeflow_config_changed(struct engine *e) { storm_configure_from(e); }

static void storm_start(struct engine *e)
{
    int64_t *t;
    size_t n;
    char err[512];
    const char *dir = e->cfg->state_dir;
    storm_configure_from(e);
    if (!dir || !*dir) return;
    int rc = safestate_load_storm(dir, &t, &n, err, sizeof err);
    if (rc < 0) log_warn("%s; counting the storm breaker's actions afresh", err);
    if (rc <= 0) return;
    storm_load(&e->storm, t, n);
    free(t);
}

/* ---- the start ---- */

void safeflow_start(struct engine *e, const struct hash_manifest *baseline, int had_record)
{
    char err[700];
    if (!e->lkg_set) lkg_setup(e);
    storm_start(e);
    for (size_t i = 0; i < e->nlkg; i++)
        if (!lastgood_has_copy(e->lkg[i].live)) e->filling = 1;
    if (e->filling) {
        /* nothing is applied yet: the app has not started on a copy */
        hash_manifest_free(&e->applied);
        hash_empty(e->applied.total);
        struct log_rec r;
        if (log_rec_begin(&r, RA_LOG_INFO, "copies-empty"))
            log_rec_end(&r, "a --keep-last-good copy is empty: it is filled with the current "
                            "content once validated, and the agent is ready then");
        return;
    }
    /* no record of what was applied (and not a start that acts anyway, nor
     * one after restart-pod, where every container read the copies): the
     * copies say what the app reads */
    int from_copies = !had_record && !e->pod_restarted && e->cfg->on_start != ON_START_RELOAD;
    for (size_t i = 0; from_copies && i < e->nlkg; i++) {
        struct hash_manifest m;
        if (lastgood_manifest(&e->applied, e->lkg[i].src, e->lkg[i].live, &m, err, sizeof err) <
            0) {
            log_warn("keep-last-good: %s", err);
            continue;
        }
        hash_manifest_free(&e->applied);
        e->applied = m;
    }
    (void)baseline;
}

/* ---- validate ---- */

static void stage_go(struct engine *e);

static void rejected(struct engine *e, const struct validate_outcome *o)
{
    char hex[HASH_HEX_LEN + 1], msg[1100];
    target_hex(e, hex);
    fmt(e->rejected_hex, sizeof e->rejected_hex, "%s", hex);
    fmt(e->rejected_reason, sizeof e->rejected_reason, "%s%s%s", o->summary,
        o->lines[0] ? ": " : "", o->lines);
    fmt(msg, sizeof msg, "content %.12s rejected by `%s` (%s), not acted on%s: %s", hex,
        e->cfg->validate, o->summary, e->nlkg ? "; the app keeps the last good copy" : "",
        o->lines[0] ? o->lines : "no output");
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_WARN, "config-rejected")) {
        log_rec_str(&r, "hash", hex);
        log_rec_str(&r, "verdict", o->summary);
        log_rec_str(&r, "output", o->lines);
        log_rec_num(&r, "duration_ms", o->seconds * 1000.0);
        log_rec_end(&r, "%s", msg);
    }
    engine__event(e, "Warning", "ConfigRejected", msg);
    engine__notify(e, "rejected", 0, e->rejected_reason);
    stage_release_if(e, 0, msg);
    mark_bad(e);
    fmt(e->last_error, sizeof e->last_error, "validate: %s", o->summary);
    engine__end(e, END_DROP);
}

static void on_validated(void *ud, const struct validate_outcome *o)
{
    struct engine *e = ud;
    e->val = NULL;
    metrics_validation(o->verdict == VALIDATE_ACCEPTED   ? 0
                       : o->verdict == VALIDATE_REJECTED ? 1
                                                         : 2,
                       o->seconds);
    if (o->verdict == VALIDATE_REJECTED) {
        rejected(e, o);
        return;
    }
    if (o->verdict == VALIDATE_ERROR) {
        step_log(e, RA_LOG_WARN, "validate-error",
                 "cannot validate the new content: %s; not acting, trying again", o->summary);
        fmt(e->last_error, sizeof e->last_error, "validate: %s", o->summary);
        engine__end(e, END_FAILED);
        return;
    }
    struct log_rec r;
    char hex[HASH_HEX_LEN + 1];
    target_hex(e, hex);
    if (log_rec_begin(&r, RA_LOG_INFO, "config-accepted")) {
        log_rec_str(&r, "hash", hex);
        log_rec_num(&r, "duration_ms", o->seconds * 1000.0);
        log_rec_end(&r, "content %.12s accepted by `%s`", hex, e->cfg->validate);
    }
    stage_go(e);
}

static void on_stage(void *ud, enum stage_verdict v);
static void stage_verdict(struct engine *e, enum stage_verdict v);

/* Validated (or nothing to validate): the stage gate, then the swap. */
static void stage_go(struct engine *e)
{
    char hex[HASH_HEX_LEN + 1];
    memcpy(e->validated, e->inflight_target.total, HASH_LEN);
    e->have_validated = 1;
    if (!e->stage || e->filling) {
        stage_verdict(e, STAGE_GO);
        return;
    }
    struct safeflow_ticket *t = calloc(1, sizeof *t);
    if (!t) ra_oom();
    t->e = e;
    e->ticket = t;
    e->phase = PHASE_STAGE;
    target_hex(e, hex);
    stage_acquire(e->stage, hex, on_stage, t);
}

/* The copies show the target: the action, or (filling) nothing more. */
static void swap_and_act(struct engine *e)
{
    char err[700];
    int rc = e->nlkg ? lkg_write(e, 1, err, sizeof err) : 0;
    if (rc < 0) {
        step_log(e, RA_LOG_WARN, "keep-last-good", "cannot update the copy the app reads: %s", err);
        fmt(e->last_error, sizeof e->last_error, "keep-last-good: %s", err);
        stage_release_if(e, 0, err);
        engine__end(e, END_FAILED);
        return;
    }
    if (e->filling) {
        e->filling = 0;
        lkg_commit(e);
        step_log(e, RA_LOG_INFO, "copies-filled", "the copies the app reads were filled");
        engine__end(e, END_COMMIT);
        became_ready(e);
        return;
    }
    run_counted(e);
}

/* The gate's verdict on the target (STAGE_GO at once without a gate). */
static void stage_verdict(struct engine *e, enum stage_verdict v)
{
    if (v == STAGE_HALTED) {
        char hex[HASH_HEX_LEN + 1];
        target_hex(e, hex);
        fmt(e->halted_hex, sizeof e->halted_hex, "%s", hex);
        step_log(e, RA_LOG_WARN, "stage-halted",
                 "the change to %.12s is halted for the workload (a replica rejected it or "
                 "failed to verify it): not applied here; a later change is",
                 hex);
        fmt(e->last_error, sizeof e->last_error, "stage: the change was halted");
        engine__notify(e, "stage-halted", 0,
                       "a replica rejected the change or failed to verify it");
        mark_bad(e);
        engine__end(e, END_DROP);
        return;
    }
    e->acquired = e->stage && !e->filling;
    swap_and_act(e);
}

static void on_stage(void *ud, enum stage_verdict v)
{
    struct safeflow_ticket *t = ud;
    struct engine *e = t->e;
    free(t);
    if (!e) return; /* the engine closed meanwhile */
    e->ticket = NULL;
    stage_verdict(e, v);
}

/* ---- begin ---- */

static void dry_run_steps(struct engine *e)
{
    const struct config *c = e->cfg;
    if (c->validate && *c->validate)
        step_log(e, RA_LOG_INFO, "validate", "would validate the new content with `%s`",
                 c->validate);
    for (size_t i = 0; i < e->nlkg; i++)
        step_log(e, RA_LOG_INFO, "keep-last-good", "would copy %s into %s, then swap it into %s",
                 e->lkg[i].src, e->lkg[i].cand, e->lkg[i].live);
    if (c->verify && *c->verify && !(e->inflight_mask & NOT_VERIFIED))
        step_log(e, RA_LOG_INFO, "verify", "would verify the action with %s (within %llds)",
                 verify_is_url(c->verify) ? "a GET of the --verify URL" : c->verify,
                 (long long)(c->verify_timeout_ns / 1000000000));
}

void safeflow_begin(struct engine *e)
{
    const struct config *c = e->cfg;
    char err[700];
    if (c->dry_run) {
        dry_run_steps(e);
        if (e->filling) { /* nothing is copied in a dry run: ready at once */
            e->filling = 0;
            engine__end(e, END_COMMIT);
            became_ready(e);
            return;
        }
        run_counted(e);
        return;
    }
    if (e->have_validated && !memcmp(e->validated, e->inflight_target.total, HASH_LEN)) {
        engine__run_actions(e); /* a retry: validated and swapped already */
        return;
    }
    int validate = c->validate && *c->validate;
    if (validate && e->nlkg) {
        int rc = lkg_write(e, 0, err, sizeof err);
        if (rc < 0) {
            step_log(e, RA_LOG_WARN, "keep-last-good", "cannot prepare the candidate copy: %s",
                     err);
            fmt(e->last_error, sizeof e->last_error, "keep-last-good: %s", err);
            engine__end(e, END_FAILED);
            return;
        }
    }
    if (!validate) {
        stage_go(e);
        return;
    }
    e->phase = PHASE_VALIDATE;
    if (validate_start(e->loop, c->validate, ra_ms_of_ns(c->validate_timeout_ns),
                       c->validator_socket && *c->validator_socket ? c->validator_socket : NULL,
                       on_validated, e, &e->val) < 0) {
        fmt(e->last_error, sizeof e->last_error, "validate: cannot split the command");
        engine__end(e, END_FAILED);
    }
}

/* ---- after the action: verify, roll back ---- */

/* The target is applied (and verified where that applies). */
static void finish_ok(struct engine *e)
{
    /* restart-pod: the agent ends with the action; its stage turn is kept
     * (run.c: stage_keep_turn) and the agent of the restarted pod ends it */
    if (e->inflight_mask & ACTION_BIT(ACTION_RESTART_POD))
        e->acquired = 0;
    else
        stage_release_if(e, 1, "");
    lkg_commit(e);
    engine__end(e, END_COMMIT);
}

static void rolled_back(struct engine *e, int ok)
{
    char hex[HASH_HEX_LEN + 1], was[HASH_HEX_LEN + 1], msg[1200];
    target_hex(e, hex);
    hash_hex(e->applied.total, was);
    fmt(e->rolled_back_hex, sizeof e->rolled_back_hex, "%s", hex);
    char acts[96] = "";
    for (int a = 0, n = 0; a < ACTION__COUNT; a++)
        if (e->inflight_mask & ACTION_BIT(a))
            n += snprintf(acts + n, sizeof acts - (size_t)n, "%s%s", n ? "+" : "", action_name(a));
    fmt(msg, sizeof msg,
        "content %.12s failed verification (%s): restored the last good copy %.12s and "
        "repeated %s%s%s",
        hex, e->verify_detail, was, acts, ok ? "" : ", which failed: ", ok ? "" : e->last_error);
    metrics_rollback();
    struct log_rec r;
    if (log_rec_begin(&r, ok ? RA_LOG_WARN : RA_LOG_ERROR, "config-rolled-back")) {
        log_rec_str(&r, "hash", hex);
        log_rec_str(&r, "restored", was);
        log_rec_bool(&r, "action_ok", ok);
        log_rec_end(&r, "%s", msg);
    }
    engine__event(e, "Warning", "ConfigRolledBack", msg);
    engine__notify(e, "rollback", 0, msg);
    stage_release_if(e, 0, msg);
    mark_bad(e);
    e->swapped = 0;
    engine__end(e, END_DROP);
}

/* Verification failed with copies to go back to: live/ shows the previous
 * version again, and the same actions run on it. */
static void roll_back(struct engine *e)
{
    char err[700];
    for (size_t i = 0; i < e->nlkg; i++) {
        struct engine_lkg *k = &e->lkg[i];
        if (!k->old_ts[0]) continue;
        if (lastgood_restore(k->live, k->old_ts, err, sizeof err) < 0)
            log_error("keep-last-good: cannot roll back: %s", err);
        k->old_ts[0] = '\0';
    }
    e->phase = PHASE_ROLLBACK;
    engine__run_actions(e);
}

static void verify_failed(struct engine *e, const char *detail)
{
    char hex[HASH_HEX_LEN + 1], msg[1100];
    target_hex(e, hex);
    fmt(e->verify_failed_hex, sizeof e->verify_failed_hex, "%s", hex);
    fmt(e->verify_error, sizeof e->verify_error, "%s", detail);
    fmt(e->verify_detail, sizeof e->verify_detail, "%s", detail);
    fmt(e->last_error, sizeof e->last_error, "verify: %s", detail);
    if (e->swapped && e->nlkg) {
        roll_back(e);
        return;
    }
    fmt(msg, sizeof msg,
        "content %.12s was applied but failed verification within %llds: %s (no "
        "--keep-last-good copy to roll back to)",
        hex, (long long)(e->cfg->verify_timeout_ns / 1000000000), detail);
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_WARN, "config-verify-failed")) {
        log_rec_str(&r, "hash", hex);
        log_rec_str(&r, "error", detail);
        log_rec_end(&r, "%s", msg);
    }
    engine__event(e, "Warning", "ConfigVerifyFailed", msg);
    engine__notify(e, "verify-failed", 0, msg);
    stage_release_if(e, 0, msg);
    lkg_commit(e);
    engine__end(e, END_COMMIT); /* the app runs it: it is applied */
}

static void on_verified(void *ud, int ok, const char *detail, double secs, int tries)
{
    struct engine *e = ud;
    e->ver = NULL;
    metrics_verification(ok);
    if (!ok) {
        verify_failed(e, detail);
        return;
    }
    struct log_rec r;
    char hex[HASH_HEX_LEN + 1];
    target_hex(e, hex);
    if (log_rec_begin(&r, RA_LOG_INFO, "verified")) {
        log_rec_str(&r, "hash", hex);
        log_rec_int(&r, "tries", tries);
        log_rec_num(&r, "duration_ms", secs * 1000.0);
        log_rec_end(&r, "content %.12s verified", hex);
    }
    finish_ok(e);
}

static void start_verify(struct engine *e)
{
    const struct config *c = e->cfg;
    if (verify_is_url(c->verify) && !e->verify_hc && httpc_create(e->loop, &e->verify_hc) < 0) {
        e->verify_hc = NULL;
        verify_failed(e, "cannot create the HTTP client (libcurl could not be initialised)");
        return;
    }
    struct verify_opts o = {
        .target = c->verify,
        .timeout_ms = ra_ms_of_ns(c->verify_timeout_ns),
        .socket = c->validator_socket && *c->validator_socket ? c->validator_socket : NULL,
        .hc = e->verify_hc,
    };
    e->phase = PHASE_VERIFY;
    if (verify_start(e->loop, &o, on_verified, e, &e->ver) < 0)
        verify_failed(e, "cannot start: the --verify command does not split into words");
}

void safeflow_actions_done(struct engine *e, int ok)
{
    const struct config *c = e->cfg;
    if (e->phase == PHASE_ROLLBACK) {
        rolled_back(e, ok);
        return;
    }
    if (!ok && e->held && !e->closing) {
        storm_held(e);
        return;
    }
    if (!ok) {
        if (e->acquired) stage_release_if(e, 0, e->last_error);
        engine__end(e, END_FAILED); /* the copies keep the target: a retry acts on it */
        return;
    }
    int verify = c->verify && *c->verify && !c->dry_run && !(e->inflight_mask & NOT_VERIFIED);
    if (verify && e->closing) { /* not verified: not committed either */
        engine__end(e, END_CLOSED);
        return;
    }
    if (verify) {
        start_verify(e);
        return;
    }
    finish_ok(e);
}

/* ---- close, status ---- */

int safeflow_cancel(struct engine *e)
{
    if (e->phase != PHASE_VALIDATE && e->phase != PHASE_STAGE && e->phase != PHASE_VERIFY) return 0;
    if (e->val) validate_cancel(e->val);
    e->val = NULL;
    if (e->ver) verify_cancel(e->ver);
    e->ver = NULL;
    if (e->ticket) e->ticket->e = NULL; /* the gate answers into the void */
    e->ticket = NULL;
    engine__end(e, END_CLOSED);
    return 1;
}

void safeflow_free(struct engine *e)
{
    if (e->verify_hc) httpc_close(e->verify_hc, NULL, NULL);
    e->verify_hc = NULL;
    for (size_t i = 0; i < e->nlkg; i++) {
        free(e->lkg[i].src);
        free(e->lkg[i].dir);
        free(e->lkg[i].live);
        free(e->lkg[i].cand);
    }
    free(e->lkg);
    e->lkg = NULL;
    e->nlkg = 0;
    storm_free(&e->storm);
}

void safeflow_status(const struct engine *e, struct engine_status *st)
{
    int64_t now = storm_now_ms(), at = storm_resume_at(&e->storm);
    st->rejected_hash = e->rejected_hex;
    st->rejected_reason = e->rejected_reason;
    st->verify_failed_hash = e->verify_failed_hex;
    st->verify_error = e->verify_error;
    st->rolled_back_hash = e->rolled_back_hex;
    st->halted_hash = e->halted_hex;
    st->keep_last_good = e->nlkg > 0;
    st->copies_ready = e->nlkg > 0 && !e->filling;
    st->storm_limit = e->storm.max;
    st->storm_window_ms = (uint64_t)e->storm.window_ms;
    st->storm_actions = (int)storm_count(&e->storm, now);
    st->storm_halted = e->storm.halted;
    st->storm_resume_in_ms = e->storm.halted && at > now ? (uint64_t)(at - now) : 0;
}
