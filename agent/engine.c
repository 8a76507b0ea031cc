/*
 * engine.c - the action state machine (see engine.h): what to do for a
 * change, one attempt at a time, retries, min-interval, commit on success.
 */
#include "agent/engine.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "actions/exec.h"
#include "base/backoff.h"
#include "base/log.h"
#include "agent/metrics.h"
#include "actions/proc.h"
#include "actions/restart.h"
#include "actions/rollout.h"

#define MAX_TARGETS 64
#define BIT(a) (1u << (a))
#define ENGINE_FILES_MAX (64 * 1024)
#define INPLACE_MASK (BIT(ACTION_SIGNAL) | BIT(ACTION_HTTP) | BIT(ACTION_EXEC))

struct engine {
    uv_loop_t *loop;
    const struct config *cfg;
    struct httpc *hc; /* the http action's client, created on first use */
    uv_timer_t timer; /* retry backoff or min-interval wait */
    struct hash_manifest applied;
    struct hash_manifest observed;
    struct hash_manifest inflight_target;
    unsigned failed_mask; /* actions of the failed job awaiting retry */
    int inflight;
    unsigned inflight_mask;
    int parts_left;   /* actions of the current attempt still running */
    int parts_failed;
    int attempt;
    int started;
    int have_last_start;
    uint64_t last_start_ms;
    uint64_t attempt_start_ns;
    const char *last_action;
    const char *last_result;
    char last_error[512];
    struct exec_job *job; /* the exec action's process, while it runs */
    struct kube *kube;    /* NULL outside a cluster */
    struct rollout *ro;   /* NULL without a Kubernetes client */
    struct kevents *ev;   /* NULL when Events are off */
    int permanent;        /* the failing part said a retry cannot help */
    pid_t sig_pid;        /* --pid-file target of the last signal ... */
    int sig_pidfd;        /* ... and its pidfd, kept open: -1 if none */
    struct stat sig_pf;   /* the pid file as stat'ed before sig_pid was read from it */
    struct ra_rng *rng; /* the retry jitter's generator */
    int closing;
    void (*done)(void *);
    void *done_ud;
};

/* An option for a message: the configuration may have changed (live
 * annotations) while the action ran, and the new one may not set it. */
static const char *opt_str(const char *s) { return s && *s ? s : "(unset)"; }

int engine_action_for(const struct config *cfg, const char *path)
{
    for (size_t i = 0; i < cfg->nrules; i++)
        if (fnmatch(cfg->rules[i].glob, path, 0) == 0) return cfg->rules[i].action;
    return cfg->action;
}

/* Strongest action set for a mask of required actions. */
static unsigned strongest(unsigned mask)
{
    if (mask & BIT(ACTION_ROLLOUT)) return BIT(ACTION_ROLLOUT);
    if (mask & BIT(ACTION_RESTART)) return BIT(ACTION_RESTART);
    if (mask & INPLACE_MASK) return mask & INPLACE_MASK;
    return mask ? BIT(ACTION_NONE) : 0;
}

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
        for (size_t i = 0; i < ns[l]; i++) mask |= BIT(engine_action_for(e->cfg, lists[l][i]));
    hash_diff_free(&d);
    /* Content differs but only ignored files: nothing differs in the manifest. */
    return mask ? mask : BIT(ACTION_NONE);
}

static void schedule(struct engine *e);
static void on_timer_closed(uv_handle_t *h);
static void pod_event(struct engine *e, int action, int ok, const char *err);

static void on_timer(uv_timer_t *t) { schedule(t->data); }

static void set_error(struct engine *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(struct engine *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->last_error, sizeof e->last_error, fmt, ap);
    va_end(ap);
}

static void log_action(struct engine *e, int action, int ok, double secs, const char *err)
{
    char hex[HASH_HEX_LEN + 1];
    struct log_rec r;
    hash_hex(e->inflight_target.total, hex);
    if (log_rec_begin(&r, ok ? RA_LOG_INFO : RA_LOG_WARN, "action")) {
        log_rec_str(&r, "action", cfg_action_name(action));
        log_rec_str(&r, "result", ok ? "success" : "failure");
        log_rec_int(&r, "attempt", e->attempt);
        log_rec_str(&r, "hash", hex);
        log_rec_num(&r, "duration_ms", secs * 1000.0);
        if (e->cfg->dry_run) log_rec_bool(&r, "dry_run", 1);
        if (!ok) log_rec_str(&r, "error", err);
        log_rec_end(&r, "%s %s%s%s", cfg_action_name(action), ok ? "succeeded" : "failed",
                    ok ? "" : ": ", ok ? "" : err);
    }
}

/* One action of the current attempt finished. */
static void part_done(struct engine *e, int action, int ok, const char *err)
{
    double secs = (double)(uv_hrtime() - e->attempt_start_ns) / 1e9;
    metrics_action(action, ok, secs);
    log_action(e, action, ok, secs, err ? err : "");
    if (action != ACTION_NONE && action != ACTION_ROLLOUT && !e->cfg->dry_run) pod_event(e, action, ok, err);
    e->last_action = cfg_action_name(action);
    if (!ok) {
        e->parts_failed++;
        set_error(e, "%s: %s", cfg_action_name(action), err ? err : "failed");
    }
    if (--e->parts_left > 0) return;

    e->inflight = 0;
    if (e->parts_failed == 0) {
        e->last_result = "success";
        hash_manifest_free(&e->applied);
        e->applied = e->inflight_target;
        memset(&e->inflight_target, 0, sizeof e->inflight_target);
        e->failed_mask = 0;
        e->attempt = 0;
        if (e->closing) goto closing;
        schedule(e); /* the content may have moved on meanwhile */
        return;
    }
    e->last_result = "failure";
    e->failed_mask = e->inflight_mask;
    hash_manifest_free(&e->inflight_target);
    if (e->closing) goto closing;
    if (e->permanent) {
        /* Retrying cannot help (no workload to roll, pods disagree): wait
         * for the next change instead of retrying on a timer. */
        e->permanent = 0;
        log_warn("not retrying %s until the content changes",
                 cfg_action_name(ACTION_ROLLOUT));
        return;
    }
    struct backoff policy = {ra_ms_of_ns(e->cfg->retry_initial_ns), ra_ms_of_ns(e->cfg->retry_max_ns),
                             BACKOFF_JITTER_EQUAL};
    uint64_t delay = backoff_next(&policy, e->attempt, e->rng);
    metrics_retry();
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_INFO, "retry")) {
        log_rec_int(&r, "delay_ms", (long long)delay);
        log_rec_int(&r, "attempt", e->attempt + 1);
        log_rec_end(&r, "retrying in %llums", (unsigned long long)delay);
    }
    uv_timer_start(&e->timer, on_timer, delay, 0);
    return;
closing:
    uv_close((uv_handle_t *)&e->timer, on_timer_closed);
}

/* ---- the actions: each ends in exactly one part_done ---- */

/* 1 if a and b are the same version of one file (same inode, size,
 * modification and change time). */
static int same_file_version(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Keeps st as the pid file version sig_pid was read from, unless the file
 * changed less than a second ago: file times are coarse (a clock tick), so
 * a rewrite within the same tick could look unchanged; such a file is
 * read again next time (as git treats "racily clean" files). */
static void remember_pid_file(struct engine *e, const struct stat *st)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (st->st_ino != 0 && st->st_ctim.tv_sec + 1 < now.tv_sec) e->sig_pf = *st;
    else e->sig_pf = (struct stat){0};
}

/* With --pid-file, the pidfd of the last target is kept: while the file
 * names the same PID and that process is alive (one poll on the pidfd, which
 * can never refer to a reused PID), the signal goes straight through it.
 * A pid file whose stat is unchanged since the PID was read from it is not
 * read again; any change (even a touch) re-reads it. pf is the pid file's
 * stat, taken before anything reads it (zeroed if the stat failed). */
static int signal_cached(struct engine *e, const struct stat *pf)
{
    const struct config *c = e->cfg;
    pid_t pid;
    if (e->sig_pidfd < 0) return -ENOENT;
    if (pf->st_ino != 0 &&
        (same_file_version(pf, &e->sig_pf) ||
         (proc_pid_file_read(c->pid_file, &pid) == 0 && pid == e->sig_pid)) &&
        proc_pidfd_alive(e->sig_pidfd) == 1 && proc_pidfd_signal(e->sig_pidfd, c->signal) == 0) {
        remember_pid_file(e, pf);
        return 0;
    }
    close(e->sig_pidfd);
    e->sig_pidfd = -1;
    return -ESRCH;
}

static void do_signal(struct engine *e)
{
    const struct config *c = e->cfg;
    int by_file = c->pid_file && *c->pid_file;
    struct proc_target t = {.pid_file = c->pid_file, .name = c->process, .all = c->signal_all};
    struct proc_match m[MAX_TARGETS];
    struct proc_scan_info info = {0};
    const char *who = by_file                        ? c->pid_file
                      : c->process && *c->process ? c->process
                                                  : "(no --process or --pid-file configured)";
    /* stat'ed before it is read: a change in between is seen next time */
    struct stat pf = {0};
    if (by_file && stat(c->pid_file, &pf) != 0) pf = (struct stat){0};
    if (by_file && signal_cached(e, &pf) == 0) {
        part_done(e, ACTION_SIGNAL, 1, NULL);
        return;
    }
    int n = proc_find(&t, m, MAX_TARGETS, &info);
    if (n <= 0) {
        char buf[512];
        snprintf(buf, sizeof buf, "no target process for %s: %s", who,
                 proc_hint(n == 0 ? -ESRCH : n, &info));
        part_done(e, ACTION_SIGNAL, 0, buf);
        return;
    }
    for (int i = 0; i < n; i++) {
        int rc, fd = by_file ? proc_pidfd(&m[i]) : -1;
        if (fd >= 0) {
            rc = proc_pidfd_signal(fd, c->signal);
            if (rc == 0) {
                e->sig_pid = m[i].pid;
                e->sig_pidfd = fd;
                remember_pid_file(e, &pf);
            } else {
                close(fd);
            }
        } else {
            rc = proc_signal(&m[i], c->signal); /* also the no-pidfd (old kernel) path */
        }
        if (rc < 0) {
            char buf[512];
            snprintf(buf, sizeof buf, "cannot signal PID %d (%s): %s", (int)m[i].pid, who,
                     proc_hint(rc, &info));
            part_done(e, ACTION_SIGNAL, 0, buf);
            return;
        }
        log_debug("sent signal %d to PID %d", c->signal, (int)m[i].pid);
    }
    part_done(e, ACTION_SIGNAL, 1, NULL);
}

static void http_done(void *ud, const struct httpc_result *res)
{
    struct engine *e = ud;
    char buf[512];
    if (!res->ok) {
        snprintf(buf, sizeof buf, "%s %s: %s", opt_str(e->cfg->http_method), opt_str(e->cfg->http_url),
                 res->error ? res->error : "request failed");
        part_done(e, ACTION_HTTP, 0, buf);
    } else if (!cfg_status_expected(e->cfg, res->status)) {
        snprintf(buf, sizeof buf, "%s %s: unexpected status %ld", opt_str(e->cfg->http_method),
                 opt_str(e->cfg->http_url), res->status);
        part_done(e, ACTION_HTTP, 0, buf);
    } else {
        part_done(e, ACTION_HTTP, 1, NULL);
    }
}

static void do_http(struct engine *e)
{
    const struct config *c = e->cfg;
    if (!c->http_url || !*c->http_url) {
        part_done(e, ACTION_HTTP, 0, "no --http-url is configured");
        return;
    }
    struct httpc_req req = {
        .method = c->http_method,
        .url = c->http_url,
        .headers = (const char *const *)c->http_header.v,
        .nheaders = c->http_header.n,
        .timeout_ms = ra_ms_of_ns(c->http_timeout_ns),
        .max_body = 64 * 1024,
    };
    int rc = e->hc ? 0 : httpc_create(e->loop, &e->hc);
    if (rc < 0) {
        part_done(e, ACTION_HTTP, 0, "cannot create the HTTP client (libcurl could not be loaded)");
        return;
    }
    rc = httpc_request(e->hc, &req, http_done, e, NULL);
    if (rc < 0) {
        char buf[256];
        snprintf(buf, sizeof buf, "cannot start the request: %s", strerror(-rc));
        part_done(e, ACTION_HTTP, 0, buf);
    }
}

static void exec_finished(void *ud, const struct exec_result *res)
{
    struct engine *e = ud;
    char buf[512];
    e->job = NULL;
    if (res->spawn_error)
        snprintf(buf, sizeof buf, "cannot run \"%s\": %s", opt_str(e->cfg->exec_command),
                 uv_strerror(res->spawn_error));
    else if (res->timed_out)
        snprintf(buf, sizeof buf, "\"%s\" timed out and was killed", opt_str(e->cfg->exec_command));
    else if (res->term_signal)
        snprintf(buf, sizeof buf, "\"%s\" was killed by signal %d", opt_str(e->cfg->exec_command),
                 res->term_signal);
    else if (res->exit_status != 0)
        snprintf(buf, sizeof buf, "\"%s\" exited with status %lld", opt_str(e->cfg->exec_command),
                 (long long)res->exit_status);
    else {
        part_done(e, ACTION_EXEC, 1, NULL);
        return;
    }
    part_done(e, ACTION_EXEC, 0, buf);
}

static void do_exec(struct engine *e)
{
    if (!e->cfg->exec_command || !*e->cfg->exec_command) { /* e.g. a retry after a live change */
        part_done(e, ACTION_EXEC, 0, "no --exec-command is configured");
        return;
    }
    int rc = exec_start(e->loop, e->cfg->exec_command, ra_ms_of_ns(e->cfg->exec_timeout_ns), exec_finished,
                        e, &e->job);
    if (rc < 0) {
        char buf[512];
        snprintf(buf, sizeof buf, "cannot parse --exec-command \"%s\"", e->cfg->exec_command);
        part_done(e, ACTION_EXEC, 0, buf);
    }
}

/* Normal Reloaded / Warning ReloadFailed on the agent's own pod. */
static void pod_event(struct engine *e, int action, int ok, const char *err)
{
    const struct owner_info *o = e->ro ? rollout_owner(e->ro) : NULL;
    if (!e->ev || !e->kube || !e->cfg->events) return; /* --events=false applies live */
    struct kev_object obj = {"v1", "Pod", kube_pod_name(e->kube), kube_namespace(e->kube),
                             o && o->have_pod ? o->pod.uid : NULL};
    char msg[700];
    char hex[HASH_HEX_LEN + 1];
    hash_hex(e->inflight_target.total, hex);
    if (ok) snprintf(msg, sizeof msg, "%s reload for content hash %.12s", cfg_action_name(action), hex);
    else snprintf(msg, sizeof msg, "%s reload failed: %s", cfg_action_name(action), err ? err : "");
    kev_post(e->ev, &obj, ok ? "Normal" : "Warning", ok ? "Reloaded" : "ReloadFailed", msg);
}

static void rollout_finished(void *ud, enum rollout_result r, const char *err)
{
    struct engine *e = ud;
    e->permanent = r == ROLLOUT_BLOCKED;
    part_done(e, ACTION_ROLLOUT, r == ROLLOUT_PATCHED || r == ROLLOUT_ALREADY_CURRENT, err);
}

/* The files annotation: rollout-class path -> 16 hex of its digest. */
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
    if (strlen(s) > ENGINE_FILES_MAX) { /* too big for an annotation: leave it out */
        free(s);
        return NULL;
    }
    return s;
}

static void do_rollout(struct engine *e)
{
    char hex[HASH_HEX_LEN + 1];
    if (!e->ro) {
        part_done(e, ACTION_ROLLOUT, 0, "no Kubernetes API client (internal error)");
        return;
    }
    hash_hex(e->inflight_target.sub, hex);
    char *files = files_json(&e->inflight_target);
    struct rollout_params p = {
        .hash_annotation = e->cfg->hash_annotation,
        .jitter_ms = ra_ms_of_ns(e->cfg->rollout_jitter_ns),
        .min_interval_ms = ra_ms_of_ns(e->cfg->min_interval_ns),
        .events = e->cfg->events,
    };
    int rc = rollout_apply(e->ro, &p, hex, files, rollout_finished, e);
    free(files);
    if (rc < 0) part_done(e, ACTION_ROLLOUT, 0, "cannot start the rollout");
}

static void restart_finished(void *ud, int ok, const char *err)
{
    part_done(ud, ACTION_RESTART, ok, err);
}

static void do_restart(struct engine *e)
{
    const struct config *c = e->cfg;
    struct proc_target t = {.pid_file = c->pid_file, .name = c->process, .all = 0};
    if (restart_start(e->loop, &t, c->restart_signal, ra_ms_of_ns(c->restart_timeout_ns),
                      restart_finished, e, NULL) < 0)
        ra_oom();
}

/* Starts an attempt of the actions in mask on the observed state. */
static void start_attempt(struct engine *e, unsigned mask)
{
    e->inflight = 1;
    e->inflight_mask = mask;
    e->attempt++;
    e->parts_failed = 0;
    e->parts_left = 0;
    for (int a = 0; a < ACTION__COUNT; a++)
        if (mask & BIT(a)) e->parts_left++;
    hash_manifest_free(&e->inflight_target);
    if (hash_manifest_copy(&e->observed, &e->inflight_target) < 0) ra_oom();
    e->have_last_start = 1;
    uv_update_time(e->loop); /* hashing may have run since the loop cached its time */
    e->last_start_ms = uv_now(e->loop);
    e->attempt_start_ns = uv_hrtime();
    for (int a = 0; a < ACTION__COUNT; a++) {
        if (!(mask & BIT(a))) continue;
        if (a == ACTION_NONE || e->cfg->dry_run) {
            part_done(e, a, 1, NULL);
            continue;
        }
        switch (a) {
        case ACTION_SIGNAL: do_signal(e); break;
        case ACTION_HTTP: do_http(e); break;
        case ACTION_EXEC: do_exec(e); break;
        case ACTION_RESTART: do_restart(e); break;
        case ACTION_ROLLOUT: do_rollout(e); break;
        default: part_done(e, a, 0, "action not implemented in this version"); break;
        }
    }
}

static void schedule(struct engine *e)
{
    if (e->inflight || e->closing || !e->started) return;
    unsigned mask = strongest(needed_mask(e));
    if (!mask) return;
    if (memcmp(e->applied.total, e->observed.total, HASH_LEN) == 0 && !e->failed_mask) return;
    uv_update_time(e->loop);
    uint64_t now = uv_now(e->loop), gap = ra_ms_of_ns(e->cfg->min_interval_ns);
    if (e->have_last_start && gap && now < e->last_start_ms + gap) {
        uv_timer_start(&e->timer, on_timer, e->last_start_ms + gap - now, 0);
        return;
    }
    uv_timer_stop(&e->timer);
    start_attempt(e, mask);
}

int engine_create(uv_loop_t *loop, const struct config *cfg, struct engine **out)
{
    struct engine *e = calloc(1, sizeof *e);
    if (!e) return -ENOMEM;
    e->loop = loop;
    e->cfg = cfg;
    e->last_action = e->last_result = "";
    e->sig_pidfd = -1;
    e->rng = ra_rng_process();
    hash_empty(e->applied.total);
    hash_empty(e->observed.total);
    uv_timer_init(loop, &e->timer);
    e->timer.data = e;
    *out = e;
    return 0;
}

void engine_start(struct engine *e, const struct hash_manifest *baseline)
{
    hash_manifest_free(&e->observed);
    if (hash_manifest_copy(baseline, &e->observed) < 0) ra_oom();
    if (e->cfg->on_start != ON_START_RELOAD) {
        hash_manifest_free(&e->applied);
        if (hash_manifest_copy(baseline, &e->applied) < 0) ra_oom();
    }
    e->started = 1;
    schedule(e);
}

void engine_observe(struct engine *e, const struct hash_manifest *cur)
{
    hash_manifest_free(&e->observed);
    if (hash_manifest_copy(cur, &e->observed) < 0) ra_oom();
    if (!e->inflight) {
        /* A newer change supersedes a pending retry: attempt it now. */
        e->attempt = e->failed_mask ? e->attempt : 0;
        uv_timer_stop(&e->timer);
    }
    schedule(e);
}

void engine_set_kube(struct engine *e, struct kube *k, struct rollout *ro, struct kevents *ev)
{
    e->kube = k;
    e->ro = ro;
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
        log_rec_end(&r, "%s", !pod_hash || !*pod_hash ? "the pod carries no rollout hash: "
                                                         "nothing to reconcile"
                              : differ ? "the pod was created from other content: rolling"
                                       : "the pod runs the current content");
    }
    if (!differ) return;
    e->failed_mask |= BIT(ACTION_ROLLOUT); /* forces a rollout of the current content */
    schedule(e);
}

void engine_config_changed(struct engine *e)
{
    /* A failed action that the new configuration no longer uses is not
     * retried; the files it was for are still unapplied, so the diff maps
     * them to whatever action the new rules give them. */
    unsigned used = BIT(e->cfg->action);
    for (size_t i = 0; i < e->cfg->nrules; i++) used |= BIT(e->cfg->rules[i].action);
    e->failed_mask &= used;
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
}

static void on_timer_closed(uv_handle_t *h)
{
    struct engine *e = h->data;
    void (*done)(void *) = e->done;
    void *ud = e->done_ud;
    hash_manifest_free(&e->applied);
    hash_manifest_free(&e->observed);
    hash_manifest_free(&e->inflight_target);
    if (e->hc) httpc_close(e->hc, NULL, NULL);
    if (e->sig_pidfd >= 0) close(e->sig_pidfd);
    free(e);
    if (done) done(ud);
}

void engine_close(struct engine *e, void (*done)(void *), void *ud)
{
    e->closing = 1;
    e->done = done;
    e->done_ud = ud;
    uv_timer_stop(&e->timer);
    /* The abort ends the attempt synchronously: part_done then closes the
     * timer itself, so it must not be closed again here. */
    if (e->inflight && (e->inflight_mask & BIT(ACTION_ROLLOUT)) && e->ro) rollout_abort(e->ro);
    if (!e->inflight && !uv_is_closing((uv_handle_t *)&e->timer))
        uv_close((uv_handle_t *)&e->timer, on_timer_closed);
    /* else: part_done closes the timer when the attempt ends */
}
