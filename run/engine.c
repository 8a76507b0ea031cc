/*
 * engine.c - the action state machine (see engine.h): what to do for a
 * change, one attempt at a time, retries, min-interval, commit on success.
 *
 * What an action is lives in actions/action.h: the engine looks actions up
 * in that table (strength, pod Events, start, abort) and includes no single
 * action. It reads the configuration only when scheduling (rules,
 * --min-interval, the retry policy); an attempt runs on a copy of the
 * parameters its actions read (struct action_params), made when it starts.
 */
#include "run/engine.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actions/action.h"
#include "run/engine_int.h"
#include "run/metrics.h"
#include "run/statedir.h"
#include "base/backoff.h"
#include "base/log.h"
#include "kube/kevents.h"
#include "kube/kube.h"
#include "kube/owner.h"

#define ENGINE_FILES_MAX (64 * 1024)

/* Actions needed to go from the applied state to the observed one. */
static unsigned needed_mask(struct engine *e)
{
    struct hash_diff d;
    unsigned mask = e->failed_mask;
    if (memcmp(e->applied.total, e->observed.total, HASH_LEN) == 0) return mask;
    if (hash_diff(&e->applied, &e->observed, &d) < 0) ra_oom();
    const char **lists[] = {d.added, d.removed, d.modified};
    size_t ns[] = {d.nadded, d.nremoved, d.nmodified};
    for (int l = 0; l < 3; l++)
        for (size_t i = 0; i < ns[l]; i++) {
            /* an ignored file is not in a manifest the monitor made, but an
             * --ignore added live meets manifests made before it */
            int a = cfg_action_for(e->cfg, lists[l][i]);
            if (a != CFG_ACTION_IGNORED) mask |= ACTION_BIT(a);
        }
    hash_diff_free(&d);
    /* Content differs but only ignored files: nothing differs in the manifest. */
    return mask ? mask : ACTION_BIT(ACTION_NONE);
}

static void schedule(struct engine *e);
static void close_handles(struct engine *e);

#define RESTART_CLASS (ACTION_BIT(ACTION_RESTART) | ACTION_BIT(ACTION_RESTART_POD))

static void on_timer(uv_timer_t *t) { schedule(t->data); }

static void log_action(struct engine *e, int action, int ok, double secs, const char *err)
{
    char hex[HASH_HEX_LEN + 1];
    struct log_rec r;
    /* a rollback acts on the restored copy: the applied content */
    hash_hex(e->phase == PHASE_ROLLBACK ? e->applied.total : e->inflight_target.total, hex);
    if (log_rec_begin(&r, ok ? RA_LOG_INFO : RA_LOG_WARN, "action")) {
        log_rec_str(&r, "action", action_name(action));
        if (e->phase == PHASE_ROLLBACK) log_rec_bool(&r, "rollback", 1);
        log_rec_str(&r, "result", ok ? "success" : "failure");
        log_rec_int(&r, "attempt", e->attempt);
        log_rec_str(&r, "hash", hex);
        log_rec_num(&r, "duration_ms", secs * 1000.0);
        if (e->params.dry_run) log_rec_bool(&r, "dry_run", 1);
        if (!ok) log_rec_str(&r, "error", err);
        log_rec_end(&r, "%s %s%s%s", action_name(action), ok ? "succeeded" : "failed",
                    ok ? "" : ": ", ok ? "" : err);
    }
}

void engine__event(struct engine *e, const char *type, const char *reason, const char *msg)
{
    const struct owner_info *o = action_env_owner(&e->env);
    if (!e->ev || !e->kube || !e->cfg->events || e->cfg->dry_run) return;
    struct kev_object obj = {"v1", "Pod", kube_pod_name(e->kube), kube_namespace(e->kube),
                             o && o->have_pod ? o->pod.uid : NULL};
    kev_post(e->ev, &obj, type, reason, msg);
}

/* Normal Reloaded / Warning ReloadFailed on the agent's own pod. */
static void pod_event(struct engine *e, int action, int ok, const char *err)
{
    char msg[700];
    char hex[HASH_HEX_LEN + 1];
    if (!e->params.events) return;
    hash_hex(e->inflight_target.total, hex);
    if (e->phase == PHASE_ROLLBACK)
        snprintf(msg, sizeof msg, "%s reload of the restored copy %s%s", action_name(action),
                 ok ? "" : "failed: ", ok ? "" : (err ? err : ""));
    else if (ok)
        snprintf(msg, sizeof msg, "%s reload for content hash %.12s", action_name(action), hex);
    else
        snprintf(msg, sizeof msg, "%s reload failed: %s", action_name(action), err ? err : "");
    engine__event(e, ok ? "Normal" : "Warning", ok ? "Reloaded" : "ReloadFailed", msg);
}

/* The attempt failed: retry after the backoff, unless a part said a retry
 * cannot help (then the next content change tries again). */
static void arm_retry(struct engine *e)
{
    e->retry_at_ms = 0;
    if (e->permanent) {
        log_warn("not retrying %s until the content changes", e->last_action);
        return;
    }
    struct backoff policy = {ra_ms_of_ns(e->cfg->retry_initial_ns),
                             ra_ms_of_ns(e->cfg->retry_max_ns), BACKOFF_JITTER_EQUAL};
    uint64_t delay = backoff_next(&policy, e->attempt, e->rng);
    metrics_retry();
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_INFO, "retry")) {
        log_rec_int(&r, "delay_ms", (long long)delay);
        log_rec_int(&r, "attempt", e->attempt + 1);
        log_rec_end(&r, "retrying in %llums", (unsigned long long)delay);
    }
    uv_update_time(e->loop);
    e->retry_at_ms = uv_now(e->loop) + delay;
    uv_timer_start(&e->timer, on_timer, delay, 0);
}

/* One action of the current attempt finished (action_done). */
static void save_state(struct engine *e);

static void part_done(void *ud, enum action action, const struct action_result *res)
{
    struct engine *e = ud;
    int ok = res->status == 0;
    const char *err = ok ? NULL : res->error ? res->error : "failed";
    double secs = (double)(uv_hrtime() - e->attempt_start_ns) / 1e9;
    metrics_action(action, ok, secs);
    log_action(e, action, ok, secs, err ? err : "");
    if (action_posts_pod_events(action) && !e->params.dry_run) pod_event(e, action, ok, err);
    e->last_action = action_name(action);
    if (!ok) {
        e->parts_failed++;
        e->permanent |= res->permanent;
        e->held |= res->held;
        snprintf(e->last_error, sizeof e->last_error, "%s: %s", action_name(action), err);
    }
    if (--e->parts_left > 0) return;
    if (e->phase != PHASE_ROLLBACK) /* a rollback's actions: the rollback's notification */
        engine__notify(e, "reload", e->parts_failed == 0, e->parts_failed ? e->last_error : NULL);
    safeflow_actions_done(e, e->parts_failed == 0);
}

void engine__end(struct engine *e, enum engine_end how)
{
    /* The attempt is over: its parameters go. A restart-pod that succeeded
     * is an exit: the pod restart applies the content, and the agent that
     * starts again and takes its record commits it (issue 24 U3). */
    int exiting = (e->inflight_mask & ACTION_BIT(ACTION_RESTART_POD)) && !e->params.dry_run;
    e->inflight = 0;
    e->phase = PHASE_IDLE;
    action_params_free(&e->params);
    if (how == END_COMMIT) {
        e->last_result = "success";
        hash_manifest_free(&e->applied);
        e->applied = e->inflight_target;
        memset(&e->inflight_target, 0, sizeof e->inflight_target);
        if (!exiting) save_state(e);
        e->failed_mask = 0;
        e->attempt = 0;
    } else if (how == END_FAILED) {
        e->last_result = "failure";
        e->failed_mask = e->inflight_mask;
        memcpy(e->failed_total, e->inflight_target.total, HASH_LEN);
        hash_manifest_free(&e->inflight_target);
    } else {
        if (how == END_DROP) e->last_result = "failure";
        e->failed_mask = 0;
        e->attempt = 0;
        hash_manifest_free(&e->inflight_target);
    }
    if (e->closing) {
        close_handles(e);
        return;
    }
    if (how == END_FAILED)
        arm_retry(e);
    else
        schedule(e); /* the content may have moved on meanwhile */
}

/* The files annotation: rollout-class path -> 16 hex of its digest; NULL
 * when too big for an annotation. */
static char *files_json(const struct hash_manifest *m)
{
    cJSON *o = cJSON_CreateObject();
    char hex[HASH_HEX_LEN + 1];
    for (size_t i = 0; i < m->n; i++) {
        if (!(m->v[i].classes & HASH_CLASS_SUB)) continue;
        hash_hex(m->v[i].digest, hex);
        hex[16] = '\0';
        cJSON_AddStringToObject(o, m->v[i].path, hex);
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) ra_oom();
    if (strlen(s) > ENGINE_FILES_MAX) {
        free(s);
        return NULL;
    }
    return s;
}

/* The changed files (applied -> the attempt's target) whose action is a,
 * ", "-joined, at most 20 named; NULL if none. */
static char *changed_files(struct engine *e, enum action a)
{
    struct hash_diff d;
    char buf[2048];
    size_t len = 0, named = 0, more = 0;
    if (hash_diff(&e->applied, &e->inflight_target, &d) < 0) ra_oom();
    const char **lists[] = {d.added, d.removed, d.modified};
    size_t ns[] = {d.nadded, d.nremoved, d.nmodified};
    buf[0] = '\0';
    for (int l = 0; l < 3; l++)
        for (size_t i = 0; i < ns[l]; i++) {
            if (cfg_action_for(e->cfg, lists[l][i]) != (int)a) continue;
            if (named == 20 || len + strlen(lists[l][i]) + 3 >= sizeof buf) {
                more++;
                continue;
            }
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", named ? ", " : "",
                                    lists[l][i]);
            named++;
        }
    hash_diff_free(&d);
    if (more) snprintf(buf + len, sizeof buf - len, " and %zu more", more);
    return named ? ra_strdup(buf) : NULL;
}

/* Copies what the actions of mask read from the configuration and the
 * target content into p (owned by the attempt). */
static void build_params(struct engine *e, unsigned mask, struct action_params *p)
{
    const struct config *c = e->cfg;
    *p = (struct action_params){
        .dry_run = c->dry_run,
        .events = c->events,
        .signal = c->signal,
        .process = ra_strdup(c->process),
        .pid_file = ra_strdup(c->pid_file),
        .signal_all = c->signal_all,
        .http_url = ra_strdup(c->http_url),
        .http_method = ra_strdup(c->http_method),
        .http_headers = action_strv_dup(c->http_header.v, c->http_header.n),
        .nhttp_headers = c->http_header.n,
        .http_expect = action_strv_dup(c->http_expect_status.v, c->http_expect_status.n),
        .nhttp_expect = c->http_expect_status.n,
        .http_timeout_ms = ra_ms_of_ns(c->http_timeout_ns),
        .exec_command = ra_strdup(c->exec_command),
        .exec_timeout_ms = ra_ms_of_ns(c->exec_timeout_ns),
        .restart_signal = c->restart_signal,
        .restart_timeout_ms = ra_ms_of_ns(c->restart_timeout_ns),
        .hash_annotation = ra_strdup(c->hash_annotation),
        .rollout_jitter_ms = ra_ms_of_ns(c->rollout_jitter_ns),
        .storm_max = c->storm_max,
        .storm_window_ms = ra_ms_of_ns(c->storm_window_ns),
        .min_interval_ms = ra_ms_of_ns(c->min_interval_ns),
        .restart_pod_exit_code = c->restart_pod_exit_code,
        .state_dir = c->state_dir && *c->state_dir ? ra_strdup(c->state_dir) : NULL,
    };
    hash_hex(e->inflight_target.total, p->content_hash);
    if (mask & ACTION_BIT(ACTION_RESTART_POD)) {
        p->restart_pod_files = changed_files(e, ACTION_RESTART_POD);
        p->restart_pod_record_name = STATEDIR_RESTART_POD;
        p->restart_pod_record = statedir_restart_render(c->pod_name, p->restart_pod_exit_code,
                                                        p->content_hash, p->restart_pod_files);
    }
    if (mask & ACTION_BIT(ACTION_ROLLOUT)) {
        hash_hex(e->inflight_target.sub, p->rollout_hash);
        p->rollout_files = files_json(&e->inflight_target);
    }
}

/* Starts an attempt of the actions in mask on the observed state: the
 * safe flow's steps, then the actions (engine__run_actions). */
static void start_attempt(struct engine *e, unsigned mask)
{
    e->held = 0;
    e->inflight = 1;
    e->inflight_mask = mask;
    e->attempt++;
    e->parts_failed = 0;
    e->permanent = 0;
    e->parts_left = 0;
    hash_manifest_free(&e->inflight_target);
    if (hash_manifest_copy(&e->observed, &e->inflight_target) < 0) ra_oom();
    build_params(e, mask, &e->params);
    safeflow_begin(e);
}

void engine__run_actions(struct engine *e)
{
    unsigned mask = e->inflight_mask;
    if (e->phase != PHASE_ROLLBACK) e->phase = PHASE_ACTION;
    e->parts_failed = 0;
    e->permanent = 0;
    e->parts_left = 0;
    for (int a = 0; a < ACTION__COUNT; a++)
        if (mask & ACTION_BIT(a)) e->parts_left++;
    e->have_last_start = 1;
    uv_update_time(e->loop); /* hashing may have run since the loop cached its time */
    e->last_start_ms = uv_now(e->loop);
    e->attempt_start_ns = uv_hrtime();
    /* A part may finish inside action_start. Only the last part to finish
     * ends the attempt (and may start the next one), and no part after the
     * last started one is left to start by then. */
    for (int a = 0; a < ACTION__COUNT; a++)
        if (mask & ACTION_BIT(a)) action_start(&e->env, (enum action)a, &e->params, part_done, e);
}

/* --restart-delay: the time (loop ms) a restart-class attempt may start,
 * or 0 when it may start now. The first call of a job notes the time and
 * says so in the log. The attempt then acts on the content of its own
 * time, so every change until then costs the same restart, and two
 * restarts are at least the delay apart. A retry of a failed restart on
 * the content it failed on is not held (the backoff spaces it); a change
 * after the failure is (issue 24 G12: it restarted at once). */
static uint64_t restart_due(struct engine *e, unsigned mask, uint64_t now)
{
    uint64_t hold = ra_ms_of_ns(e->cfg->restart_delay_ns);
    if (!(mask & RESTART_CLASS) || !hold) return 0;
    if ((e->failed_mask & RESTART_CLASS) &&
        memcmp(e->failed_total, e->observed.total, HASH_LEN) == 0)
        return 0;
    if (!e->holding) {
        const char *a = action_name(mask & ACTION_BIT(ACTION_RESTART_POD) ? ACTION_RESTART_POD
                                                                          : ACTION_RESTART);
        struct log_rec r;
        e->holding = 1;
        e->hold_since_ms = now;
        if (log_rec_begin(&r, RA_LOG_INFO, "restart-delay")) {
            log_rec_str(&r, "action", a);
            log_rec_int(&r, "delay_ms", (long long)hold);
            log_rec_end(&r,
                        "%s in %llums (--restart-delay): changes until then cost the same "
                        "restart",
                        a, (unsigned long long)hold);
        }
    }
    return e->hold_since_ms + hold > now ? e->hold_since_ms + hold : 0;
}

static void schedule(struct engine *e)
{
    if (e->inflight || e->closing || !e->started) return;
    unsigned mask = action_strongest(needed_mask(e));
    if (!mask || (memcmp(e->applied.total, e->observed.total, HASH_LEN) == 0 && !e->failed_mask) ||
        (safeflow_is_bad(e, e->observed.total) && !e->failed_mask)) {
        e->holding = 0; /* nothing to do (the content may have reverted, or was refused) */
        return;
    }
    if (e->filling) { /* an empty copy is filled at once: no action, nothing to space */
        uv_timer_stop(&e->timer);
        start_attempt(e, mask);
        return;
    }
    uv_update_time(e->loop);
    uint64_t now = uv_now(e->loop), gap = ra_ms_of_ns(e->cfg->min_interval_ns);
    uint64_t due = restart_due(e, mask, now);
    /* a failed restart's backoff holds for every change that comes before
     * its retry (the other actions' retries give way to a new change) */
    if ((e->failed_mask & RESTART_CLASS) && e->retry_at_ms > due) due = e->retry_at_ms;
    if (e->have_last_start && gap && now < e->last_start_ms + gap && due < e->last_start_ms + gap)
        due = e->last_start_ms + gap;
    if (due > now) {
        uv_timer_start(&e->timer, on_timer, due - now, 0);
        return;
    }
    uv_timer_stop(&e->timer);
    if (!safeflow_storm_allows(e)) return;
    e->holding = 0;
    start_attempt(e, mask);
}

void engine__schedule(struct engine *e) { schedule(e); }

int engine_create(uv_loop_t *loop, const struct config *cfg, struct engine **out)
{
    struct engine *e = calloc(1, sizeof *e);
    if (!e) return -ENOMEM;
    e->loop = loop;
    e->cfg = cfg;
    e->env.loop = loop;
    e->last_action = e->last_result = "";
    e->rng = ra_rng_process();
    hash_empty(e->applied.total);
    hash_empty(e->observed.total);
    uv_timer_init(loop, &e->timer);
    uv_timer_init(loop, &e->storm_timer);
    e->timer.data = e->storm_timer.data = e;
    e->open_handles = 2;
    *out = e;
    return 0;
}

/* The baseline's restart-pod-class files, as an applied state (the
 * reload at start acts on the others). */
static void applied_restart_pod_files(struct engine *e, const struct hash_manifest *baseline)
{
    struct hash_entry *v = calloc(baseline->n ? baseline->n : 1, sizeof *v);
    size_t n = 0;
    if (!v) ra_oom();
    for (size_t i = 0; i < baseline->n; i++)
        if (cfg_action_for(e->cfg, baseline->v[i].path) == ACTION_RESTART_POD)
            v[n++] = baseline->v[i];
    hash_manifest_free(&e->applied);
    if (hash_manifest_from_entries(v, n, &e->applied) < 0) ra_oom();
    free(v);
}

/* --state-dir's applied state, at the first start of this process: 1 when
 * the previous agent of this pod left one, now e->applied (its diff to the
 * baseline is what changed while no agent watched), else 0. Not after a
 * pod restart (every container started with the baseline) nor with
 * --on-start reload (which acts on the baseline anyway). */
static int read_state(struct engine *e, const struct hash_manifest *baseline)
{
    const char *dir = e->cfg->state_dir;
    int first = !e->state_read;
    e->state_read = 1;
    if (!first || !dir || !*dir || e->pod_restarted || e->cfg->on_start == ON_START_RELOAD)
        return 0;
    struct hash_manifest rec;
    char err[4600];
    int rc = statedir_applied_load(dir, e->cfg->pod_name, &rec, err, sizeof err);
    if (rc < 0) log_warn("%s; taking the content found at start as applied", err);
    if (rc <= 0) return 0;
    /* A record is only as good as the agent's saves: where this agent cannot
     * write, the previous one could not either, and what it left may be
     * older than what it applied (issue 24 G10). */
    if (statedir_applied_save(dir, e->cfg->pod_name, &rec, err, sizeof err) < 0) {
        log_warn("%s; the record found there is not used (an agent that cannot write its state "
                 "may have left a stale one): taking the content found at start as applied",
                 err);
        e->state_warned = 1;
        hash_manifest_free(&rec);
        return 0;
    }
    hash_manifest_free(&e->applied);
    e->applied = rec;
    if (memcmp(rec.total, baseline->total, HASH_LEN) != 0) {
        char was[HASH_HEX_LEN + 1], now[HASH_HEX_LEN + 1];
        hash_hex(rec.total, was);
        hash_hex(baseline->total, now);
        struct log_rec r;
        if (log_rec_begin(&r, RA_LOG_INFO, "applied-state")) {
            log_rec_str(&r, "applied", was);
            log_rec_str(&r, "hash", now);
            log_rec_end(&r,
                        "the content changed while no agent watched it (the previous agent of "
                        "this pod applied %.12s, found %.12s): acting on the change",
                        was, now);
        }
    }
    return 1;
}

/* Writes the applied state into --state-dir (when set), for the agent that
 * may start again in this pod. A failure is logged once; the old record
 * went with it (ra_record_write), so a later agent never acts again on a
 * change this one applied: it takes what it finds as applied. */
static void save_state(struct engine *e)
{
    const char *dir = e->cfg->state_dir;
    char err[4400];
    if (!dir || !*dir) return;
    if (statedir_applied_save(dir, e->cfg->pod_name, &e->applied, err, sizeof err) < 0) {
        if (!e->state_warned)
            log_warn("%s: an agent restarted in this pod takes the content it finds as applied "
                     "(it may miss a change made meanwhile, never acts twice on one)",
                     err);
        e->state_warned = 1;
    } else {
        e->state_warned = 0;
    }
}

void engine_start(struct engine *e, const struct hash_manifest *baseline)
{
    int first = !e->state_read, had_record = 0;
    hash_manifest_free(&e->observed);
    if (hash_manifest_copy(baseline, &e->observed) < 0) ra_oom();
    if ((had_record = read_state(e, baseline))) { /* and saved it again */
        /* applied is the previous agent's; the diff decides */
    } else if (e->cfg->on_start != ON_START_RELOAD || e->pod_restarted) {
        hash_manifest_free(&e->applied);
        if (hash_manifest_copy(baseline, &e->applied) < 0) ra_oom();
    } else {
        /* --on-start reload never restarts the pod: every container read the
         * content found at start when it started (a new pod, or one this
         * agent restarted); restarting would only loop */
        applied_restart_pod_files(e, baseline);
    }
    if (first) safeflow_start(e, baseline, had_record);
    if (!had_record) save_state(e);
    e->started = 1;
    schedule(e);
}

void engine_pod_restarted(struct engine *e) { e->pod_restarted = 1; }

void engine_set_exit(struct engine *e, void (*fn)(void *ud, int code), void *ud)
{
    e->env.exit_request = fn;
    e->env.exit_ud = ud;
}

void engine_observe(struct engine *e, const struct hash_manifest *cur)
{
    hash_manifest_free(&e->observed);
    if (hash_manifest_copy(cur, &e->observed) < 0) ra_oom();
    safeflow_observed(e);
    if (!e->inflight) {
        /* A newer change supersedes a pending retry: attempt it now (a
         * restart's retry keeps its time: schedule). */
        e->attempt = e->failed_mask ? e->attempt : 0;
        uv_timer_stop(&e->timer);
    }
    schedule(e);
}

void engine_set_kube(struct engine *e, struct kube *k, struct rollout *ro, struct kevents *ev)
{
    e->kube = k;
    e->env.ro = ro;
    e->ev = ev;
}

void engine_reconcile(struct engine *e, const char *pod_hash)
{
    char hex[HASH_HEX_LEN + 1];
    hash_hex(e->observed.sub, hex);
    struct log_rec r;
    int differ = pod_hash && *pod_hash && strcmp(pod_hash, hex) != 0;
    if (log_rec_begin(&r, RA_LOG_INFO, "reconcile")) {
        log_rec_str(&r, "pod_hash", pod_hash ? pod_hash : "");
        log_rec_str(&r, "hash", hex);
        log_rec_bool(&r, "rollout", differ);
        log_rec_end(&r, "%s",
                    !pod_hash || !*pod_hash ? "the pod carries no rollout hash: "
                                              "nothing to reconcile"
                    : differ                ? "the pod was created from other content: rolling"
                                            : "the pod runs the current content");
    }
    if (!differ) return;
    e->failed_mask |= ACTION_BIT(ACTION_ROLLOUT); /* forces a rollout of the current content */
    schedule(e);
}

void engine_config_changed(struct engine *e)
{
    /* A failed action that the new configuration no longer uses is not
     * retried; the files it was for are still unapplied, so the diff maps
     * them to whatever action the new rules give them. */
    e->failed_mask &= cfg_used_actions(e->cfg);
    safeflow_config_changed(e);
    if (!e->inflight) schedule(e);
}

void engine_get_status(const struct engine *e, struct engine_status *st)
{
    memset(st, 0, sizeof *st);
    st->last_action = e->last_action;
    st->last_result = e->last_result;
    st->last_error = e->last_error;
    st->attempt = e->attempt;
    st->inflight = e->inflight;
    st->retry_pending = uv_is_active((const uv_handle_t *)&e->timer);
    st->retry_in_ms = st->retry_pending ? uv_timer_get_due_in(&e->timer) : 0;
    hash_hex(e->applied.total, st->applied);
    static const char *const phases[] = {"idle",   "validate", "stage",
                                         "action", "verify",   "rollback"};
    st->phase = phases[e->phase];
    safeflow_status(e, st);
}

void engine_set_stage(struct engine *e, struct stage *s) { e->stage = s; }

int engine_is_ready(const struct engine *e) { return !e->filling; }

void engine_set_ready_cb(struct engine *e, void (*fn)(void *ud), void *ud)
{
    e->ready_cb = fn;
    e->ready_ud = ud;
}

static void on_handle_closed(uv_handle_t *h)
{
    struct engine *e = h->data;
    if (--e->open_handles > 0) return;
    void (*done)(void *) = e->done;
    void *ud = e->done_ud;
    hash_manifest_free(&e->applied);
    hash_manifest_free(&e->observed);
    hash_manifest_free(&e->inflight_target);
    action_params_free(&e->params);
    action_env_release(&e->env);
    safeflow_free(e);
    free(e);
    if (done) done(ud);
}

static void close_handles(struct engine *e)
{
    if (uv_is_closing((uv_handle_t *)&e->timer)) return;
    uv_close((uv_handle_t *)&e->timer, on_handle_closed);
    uv_close((uv_handle_t *)&e->storm_timer, on_handle_closed);
}

void engine_close(struct engine *e, void (*done)(void *), void *ud)
{
    e->closing = 1;
    e->done = done;
    e->done_ud = ud;
    uv_timer_stop(&e->timer);
    uv_timer_stop(&e->storm_timer);
    /* A step of the safe flow in flight (validate, stage, verify) is given
     * up now. Actions that can be aborted end now: their part_done runs
     * inside the abort and, for the last part, ends the attempt, which
     * closes the handles. The others finish or time out on their own. */
    if (e->inflight && safeflow_cancel(e)) return;
    for (int a = 0; a < ACTION__COUNT && e->inflight; a++)
        if (e->inflight_mask & ACTION_BIT(a)) action_abort(&e->env, (enum action)a);
    if (!e->inflight) close_handles(e);
}
