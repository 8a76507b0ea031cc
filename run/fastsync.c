/*
 * fastsync.c - watch the pod's ConfigMaps and Secrets, nudge the kubelet
 * with an annotation patch of the agent's own pod, confirm by the content
 * hash, re-nudge or fall back (contract in fastsync.h).
 *
 * The states of one change: IDLE (nothing pending) -> PENDING (a nudge is
 * in flight or its confirmation window runs) -> IDLE when the monitor
 * reports a content change, or FALLBACK after FASTSYNC_MAX_NUDGES
 * windows without one (the kubelet's periodic sync will deliver it; the
 * next content change or object change leaves FALLBACK). A newer change
 * during PENDING starts the count again. Every PATCH goes through
 * request_nudge, which keeps the floor between two. One uv_timer_t serves
 * the window, the floor and the retry of the pod GET.
 *
 * kube_request cannot cancel one request, so each request carries a small
 * context whose pointer back to f is cleared when f closes: a late reply,
 * or kube_destroy's on_cancel, frees only the context.
 */
#include "run/fastsync.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/backoff.h"
#include "base/log.h"
#include "base/text.h"
#include "config/config.h"
#include "kube/kwatch.h"
#include "kube/podrefs.h"
#include "run/metrics.h"

#define POD_RETRY_BASE_MS 2000
#define POD_RETRY_CAP_MS 60000
#define RV_MAX 128

enum fs_state { FS_STARTING, FS_IDLE, FS_PENDING, FS_FALLBACK };
static const char *const STATE_NAMES[] = {"starting", "idle", "syncing", "fallback"};

struct fs_obj {
    struct fastsync *f;
    struct kwatch *w;
    enum podref_kind kind;
    char *name;
    char rv[RV_MAX];
    int exists, listed;
    char error[1024];
};

struct fs_req {
    struct fastsync *f; /* NULL once f is closed */
};

struct fastsync {
    struct kube *k;
    uv_timer_t timer;
    struct fs_obj *objs;
    size_t nobjs;
    struct fs_req *req; /* the request in flight (pod GET or PATCH), or NULL */
    int pod_attempt;
    uint64_t confirm_ms, watch_timeout_s;
    int max_nudges;
    enum fs_state state;
    /* the change being synced */
    char change_rv[RV_MAX];
    char change_obj[300];
    int nudges;         /* sent for it */
    int renudge;        /* a newer change came while a PATCH was in flight */
    uint64_t change_at; /* uv_now */
    /* the budget */
    int held;               /* a nudge waits for the floor (the timer runs on_floor) */
    int nudged;             /* a PATCH was sent (last_nudge_at is set) */
    uint64_t last_nudge_at; /* uv_now of the last PATCH sent */
    unsigned budget_hits[METRICS_FS__COUNT];
    unsigned budget_unlogged[METRICS_FS__COUNT]; /* hits since the last budget line */
    uint64_t budget_logged_at[METRICS_FS__COUNT];
    int budget_logged[METRICS_FS__COUNT];
    /* totals and the last outcome */
    unsigned nudges_total, synced, fallbacks, patch_errors;
    char last_result[32], last_rv[RV_MAX], last_obj[300];
    int last_nudges;
    uint64_t last_ms;
    char last_error[1536];
    /* closing */
    int closing;
    size_t closes_pending;
    void (*done)(void *);
    void *done_ud;
};

static uint64_t now_ms(const struct fastsync *f) { return uv_now(kube__loop(f->k)); }

static void set_error(struct fastsync *f, const char *msg)
{
    ra_one_line(f->last_error, sizeof f->last_error, msg);
}

/* ---- the budget ---- */

/* The budget held a request back (limit): counted in /metrics and
 * /status, and said at warn, at most once per FASTSYNC_BUDGET_LOG_MS per
 * limit (the next line says how many were not). what is the object,
 * detail the line's message after it. */
static void budget_hit(struct fastsync *f, enum metrics_fs_limit l, const char *what,
                       const char *detail)
{
    uint64_t now = now_ms(f);
    metrics_fast_sync_budget_hit(l);
    f->budget_hits[l]++;
    if (f->budget_logged[l] && now - f->budget_logged_at[l] < FASTSYNC_BUDGET_LOG_MS) {
        f->budget_unlogged[l]++;
        return;
    }
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_WARN, "fast-sync-budget")) {
        log_rec_str(&r, "limit", metrics_fs_limit_name(l));
        log_rec_str(&r, "object", what);
        log_rec_int(&r, "unlogged", f->budget_unlogged[l]);
        char more[64] = "";
        if (f->budget_unlogged[l])
            snprintf(more, sizeof more, " (%u more since the last such line)",
                     f->budget_unlogged[l]);
        log_rec_end(&r, "fast sync: API budget: %s %s%s", what, detail, more);
    }
    f->budget_logged[l] = 1;
    f->budget_logged_at[l] = now;
    f->budget_unlogged[l] = 0;
}

/* ---- the nudge ---- */

static void nudge(struct fastsync *f);

static void on_floor(uv_timer_t *t)
{
    struct fastsync *f = t->data;
    f->held = 0;
    if (f->state == FS_PENDING && !f->req) nudge(f);
}

/* Every PATCH starts here: one in flight at most (a change meanwhile is
 * nudged after its reply), and FASTSYNC_NUDGE_FLOOR_MS between two (a
 * change sooner waits, and the changes until then make one nudge, for
 * the newest). */
static void request_nudge(struct fastsync *f)
{
    if (f->req) {
        f->renudge = 1;
        return;
    }
    uint64_t since = now_ms(f) - f->last_nudge_at;
    if (!f->nudged || since >= FASTSYNC_NUDGE_FLOOR_MS) {
        nudge(f);
        return;
    }
    uint64_t wait = FASTSYNC_NUDGE_FLOOR_MS - since;
    if (!f->held) {
        f->held = 1;
        uv_timer_start(&f->timer, on_floor, wait, 0);
    }
    char detail[200];
    snprintf(detail, sizeof detail,
             "needs a nudge %llu ms after the last one: it waits %llu ms (at least %d ms "
             "between two), and the changes until then make one nudge, for the newest",
             (unsigned long long)since, (unsigned long long)wait, FASTSYNC_NUDGE_FLOOR_MS);
    budget_hit(f, METRICS_FS_NUDGE_FLOOR, f->change_obj, detail);
}

static void on_request_cancel(void *ud) { free(ud); }

/* The change ends (synced, or fell back): stop its window, keep its outcome
 * for /status and move to state. */
static void end_change(struct fastsync *f, enum fs_state state, const char *result)
{
    uv_timer_stop(&f->timer);
    f->held = 0;
    f->state = state;
    snprintf(f->last_result, sizeof f->last_result, "%s", result);
    snprintf(f->last_rv, sizeof f->last_rv, "%s", f->change_rv);
    snprintf(f->last_obj, sizeof f->last_obj, "%s", f->change_obj);
    f->last_nudges = f->nudges;
    f->last_ms = now_ms(f) - f->change_at;
}

static void fall_back(struct fastsync *f, const char *why)
{
    end_change(f, FS_FALLBACK, "fell back");
    f->fallbacks++;
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_WARN, "fast-sync-fallback")) {
        log_rec_str(&r, "object", f->change_obj);
        log_rec_str(&r, "resource_version", f->change_rv);
        log_rec_int(&r, "nudges", f->nudges);
        log_rec_str(&r, "reason", why);
        log_rec_end(&r,
                    "fast sync: %s changed (resourceVersion %s) but %s; falling back to the "
                    "kubelet's periodic sync (60-90 s)",
                    f->change_obj, f->change_rv, why);
    }
}

static void on_window(uv_timer_t *t)
{
    struct fastsync *f = t->data;

    if (f->state != FS_PENDING || f->req) return;
    if (f->nudges < f->max_nudges) {
        request_nudge(f);
        return;
    }
    char why[160];
    snprintf(why, sizeof why,
             "the content did not change within %d nudges (a lagging kubelet cache, or an edit "
             "of metadata only)",
             f->nudges);
    fall_back(f, why);
}

static void start_window(struct fastsync *f)
{
    static const struct backoff base = {0, FASTSYNC_CONFIRM_CAP_MS, BACKOFF_JITTER_NONE};
    struct backoff p = base;
    p.base_ms = f->confirm_ms;
    uv_timer_start(&f->timer, on_window, backoff_next(&p, f->nudges, NULL), 0);
}

static void on_patch_reply(void *ud, const struct kube_resp *r)
{
    struct fs_req *q = ud;
    struct fastsync *f = q->f;

    free(q);
    if (!f) return;
    f->req = NULL;
    if (!r->ok || r->status >= 300) {
        char msg[2048];
        f->patch_errors++;
        snprintf(msg, sizeof msg, "cannot patch the pod's annotation %s: %s", CFG_ANNOT_SYNC,
                 r->error ? r->error : "no response");
        set_error(f, msg);
        struct log_rec rec;
        if (log_rec_begin(&rec, RA_LOG_ERROR, "fast-sync-error")) {
            log_rec_str(&rec, "error", f->last_error);
            log_rec_end(&rec, "fast sync: %s", f->last_error);
        }
        /* refused (RBAC, the policy, a pod that is gone): nudging again cannot help */
        if (r->ok &&
            (r->status == 403 || r->status == 404 || r->status == 422 || r->status == 400)) {
            f->renudge = 0;
            if (f->state == FS_PENDING) fall_back(f, "the nudge was refused");
            return;
        }
    }
    if (f->renudge && f->state == FS_PENDING) {
        f->renudge = 0;
        request_nudge(f);
        return;
    }
    f->renudge = 0;
    if (f->state == FS_PENDING) start_window(f);
}

static void nudge(struct fastsync *f)
{
    char value[RV_MAX + 16], path[512], body[512];

    uv_timer_stop(&f->timer);
    f->held = 0;
    f->nudged = 1;
    f->last_nudge_at = now_ms(f);
    /* a new value each time: an unchanged annotation is no update, and no pod sync */
    if (f->nudges == 0)
        snprintf(value, sizeof value, "%s", f->change_rv);
    else
        snprintf(value, sizeof value, "%s.%d", f->change_rv, f->nudges + 1);
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", kube_namespace(f->k),
             kube_pod_name(f->k));
    snprintf(body, sizeof body, "{\"metadata\":{\"annotations\":{\"%s\":\"%s\"}}}", CFG_ANNOT_SYNC,
             value);
    struct fs_req *q = calloc(1, sizeof *q);
    if (!q) ra_oom();
    q->f = f;
    struct kube_req req = {.verb = "patch",
                           .resource = "pods",
                           .group = "",
                           .method = "PATCH",
                           .path = path,
                           .content_type = "application/merge-patch+json",
                           .body = body,
                           .body_len = strlen(body),
                           .on_cancel = on_request_cancel,
                           .role = KUBE_ROLE_FAST_SYNC};
    f->nudges++;
    f->nudges_total++;
    struct log_rec r;
    if (log_rec_begin(&r, f->nudges == 1 ? RA_LOG_DEBUG : RA_LOG_INFO, "fast-sync-nudge")) {
        log_rec_str(&r, "object", f->change_obj);
        log_rec_str(&r, "value", value);
        log_rec_int(&r, "nudge", f->nudges);
        log_rec_end(&r, "fast sync: nudging the kubelet (%s: %s)", CFG_ANNOT_SYNC, value);
    }
    int rc = kube_request(f->k, &req, on_patch_reply, q);
    if (rc < 0) {
        free(q);
        char msg[160];
        snprintf(msg, sizeof msg, "cannot start the pod patch: %s", strerror(-rc));
        set_error(f, msg);
        start_window(f); /* the window's end tries again */
        return;
    }
    f->req = q;
}

/* An object changed (kwatch says so: a new resourceVersion): nudge, within
 * the budget (request_nudge). */
static void on_object_changed(struct fs_obj *o, const char *rv)
{
    struct fastsync *f = o->f;

    snprintf(f->change_rv, sizeof f->change_rv, "%s", rv);
    snprintf(f->change_obj, sizeof f->change_obj, "%s/%s",
             o->kind == PODREF_SECRET ? "secret" : "configmap", o->name);
    f->nudges = 0;
    f->change_at = now_ms(f);
    f->state = FS_PENDING;
    request_nudge(f);
}

void fastsync_content_changed(struct fastsync *f)
{
    if (!f || f->closing) return;
    if (f->state == FS_FALLBACK) {
        log_debug("fast sync: the content changed after the fallback (the kubelet's own sync)");
        f->state = FS_IDLE;
        return;
    }
    if (f->state != FS_PENDING) return;
    end_change(f, FS_IDLE, "synced");
    f->renudge = 0;
    f->synced++;
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_INFO, "fast-sync-synced")) {
        log_rec_str(&r, "object", f->change_obj);
        log_rec_str(&r, "resource_version", f->change_rv);
        log_rec_int(&r, "nudges", f->nudges);
        log_rec_int(&r, "ms", (long long)f->last_ms);
        log_rec_end(&r,
                    "fast sync: %s (resourceVersion %s) reached the volume %llu ms after the "
                    "watch event, %d nudge%s",
                    f->change_obj, f->change_rv, (unsigned long long)f->last_ms, f->nudges,
                    f->nudges == 1 ? "" : "s");
    }
}

/* ---- the watches ---- */

/* A watch failed: said once per distinct error (a first 410 at info: it
 * is how the API server says "relist"), and a repeated failure, which the
 * backoff holds back, is a budget hit. */
static void on_watch_error(struct fs_obj *o, const struct kwatch_event *ev)
{
    if (strcmp(o->error, ev->error) != 0) {
        struct log_rec r;
        enum log_level lvl = ev->gone && ev->failures == 1 ? RA_LOG_INFO : RA_LOG_WARN;
        if (log_rec_begin(&r, lvl, "fast-sync-error")) {
            log_rec_str(&r, "error", ev->error);
            log_rec_int(&r, "failures", ev->failures);
            log_rec_int(&r, "retry_ms", (long long)ev->retry_ms);
            log_rec_end(&r, "fast sync: %s (retrying in %llu ms)", ev->error,
                        (unsigned long long)ev->retry_ms);
        }
    }
    ra_one_line(o->error, sizeof o->error, ev->error);
    if (ev->failures < 2) return;
    char what[300], detail[2300];
    snprintf(what, sizeof what, "%s/%s", podrefs_resource(o->kind), o->name);
    snprintf(detail, sizeof detail,
             "failed %d times in a row (%s): its next request waits %llu ms (the backoff grows "
             "to %d s)",
             ev->failures, ev->error, (unsigned long long)ev->retry_ms, KWATCH_RETRY_CAP_MS / 1000);
    budget_hit(o->f, METRICS_FS_BACKOFF, what, detail);
}

static void on_watch(void *ud, const struct kwatch_event *ev)
{
    struct fs_obj *o = ud;

    if (o->f->closing) return;
    if (ev->what == KWATCH_ERROR) {
        on_watch_error(o, ev);
        return;
    }
    o->error[0] = '\0';
    snprintf(o->rv, sizeof o->rv, "%s", ev->rv);
    o->exists = ev->exists;
    if (ev->initial) {
        o->listed = 1;
        log_debug("fast sync: %s %s listed at resourceVersion %s", podrefs_resource(o->kind),
                  o->name,
                  ev->exists ? (ev->rv_unknown ? "(a Table: not said)" : ev->rv) : "(absent)");
        return;
    }
    /* A deleted object leaves the volume as it is, and a relist of an
     * unchanged one is no change: kwatch says which are. */
    if (ev->changed) on_object_changed(o, ev->rv);
}

static void start_watches(struct fastsync *f, const struct podrefs *refs)
{
    f->objs = calloc(refs->n ? refs->n : 1, sizeof *f->objs);
    if (!f->objs) ra_oom();
    const char *names[PODREFS_MAX];
    char buf[PODREFS_MAX][300];
    for (size_t i = 0; i < refs->n; i++) {
        struct fs_obj *o = &f->objs[i];
        o->f = f;
        o->kind = refs->v[i].kind;
        o->name = ra_strdup(refs->v[i].name);
        struct kwatch_opts wo = {.resource = podrefs_resource(o->kind),
                                 .name = o->name,
                                 .watch_timeout_s = f->watch_timeout_s,
                                 .role = KUBE_ROLE_FAST_SYNC};
        if (kwatch_start(f->k, &wo, on_watch, o, &o->w) < 0) {
            o->w = NULL; /* cannot happen: the name was checked */
            continue;
        }
        f->nobjs = i + 1;
        snprintf(buf[i], sizeof buf[i], "%s/%s", o->kind == PODREF_SECRET ? "secret" : "configmap",
                 o->name);
        names[i] = buf[i];
    }
    f->nobjs = refs->n;
    f->state = FS_IDLE;
    struct log_rec r;
    if (log_rec_begin(&r, refs->n ? RA_LOG_INFO : RA_LOG_WARN, "fast-sync-start")) {
        log_rec_strv(&r, "objects", names, refs->n);
        if (refs->skipped) log_rec_int(&r, "skipped", (long long)refs->skipped);
        if (refs->n)
            log_rec_end(&r, "fast sync: watching %zu object%s (metadata only)", refs->n,
                        refs->n == 1 ? "" : "s");
        else
            log_rec_end(&r, "fast sync: the pod names no ConfigMap or Secret; nothing to watch");
    }
}

/* ---- the pod, when the objects are not given ---- */

static int read_pod(struct fastsync *f);

static void on_pod_retry(uv_timer_t *t)
{
    struct fastsync *f = t->data;
    if (read_pod(f) < 0) {
        static const struct backoff p = {POD_RETRY_BASE_MS, POD_RETRY_CAP_MS,
                                         BACKOFF_JITTER_SPREAD};
        uv_timer_start(&f->timer, on_pod_retry,
                       backoff_next(&p, ++f->pod_attempt, ra_rng_process()), 0);
    }
}

static void on_pod_reply(void *ud, const struct kube_resp *r)
{
    struct fs_req *q = ud;
    struct fastsync *f = q->f;
    char err[512];

    free(q);
    if (!f) return;
    f->req = NULL;
    struct podrefs refs = {0};
    if (r->ok && r->status == 200 &&
        podrefs_from_pod(r->body, r->body_len, &refs, err, sizeof err) == 0) {
        start_watches(f, &refs);
        podrefs_free(&refs);
        return;
    }
    podrefs_free(&refs);
    char msg[2048];
    snprintf(msg, sizeof msg, "cannot read the pod's ConfigMaps and Secrets: %s",
             r->ok && r->status == 200 ? err
             : r->error                ? r->error
                                       : "no response");
    set_error(f, msg);
    struct log_rec rec;
    if (log_rec_begin(&rec, RA_LOG_ERROR, "fast-sync-error")) {
        log_rec_str(&rec, "error", f->last_error);
        log_rec_end(&rec, "fast sync: %s (retrying)", f->last_error);
    }
    static const struct backoff p = {POD_RETRY_BASE_MS, POD_RETRY_CAP_MS, BACKOFF_JITTER_SPREAD};
    uv_timer_start(&f->timer, on_pod_retry, backoff_next(&p, ++f->pod_attempt, ra_rng_process()),
                   0);
}

static int read_pod(struct fastsync *f)
{
    char path[512];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", kube_namespace(f->k),
             kube_pod_name(f->k));
    struct fs_req *q = calloc(1, sizeof *q);
    if (!q) ra_oom();
    q->f = f;
    struct kube_req req = {.verb = "get",
                           .resource = "pods",
                           .group = "",
                           .method = "GET",
                           .path = path,
                           .on_cancel = on_request_cancel,
                           .role = KUBE_ROLE_FAST_SYNC};
    int rc = kube_request(f->k, &req, on_pod_reply, q);
    if (rc < 0) {
        free(q);
        return rc;
    }
    f->req = q;
    return 0;
}

/* ---- public ---- */

int fastsync_start(struct kube *k, const struct fastsync_opts *o, struct fastsync **out, char *err,
                   size_t errlen)
{
    struct podrefs refs = {0};
    for (size_t i = 0; i < o->nobjects; i++) {
        char why[400];
        if (podrefs_add_spec(&refs, o->objects[i], why, sizeof why) < 0) {
            snprintf(err, errlen, "--fast-sync-objects: %s", why);
            podrefs_free(&refs);
            return -EINVAL;
        }
    }
    struct fastsync *f = calloc(1, sizeof *f);
    if (!f) ra_oom();
    f->k = k;
    f->confirm_ms = o->confirm_ms ? o->confirm_ms : FASTSYNC_CONFIRM_MS;
    f->max_nudges = o->max_nudges > 0 ? o->max_nudges : FASTSYNC_MAX_NUDGES;
    f->watch_timeout_s = o->watch_timeout_s;
    f->state = FS_STARTING;
    uv_timer_init(kube__loop(k), &f->timer);
    f->timer.data = f;
    if (o->nobjects) {
        start_watches(f, &refs);
    } else if (read_pod(f) < 0) {
        uv_timer_start(&f->timer, on_pod_retry, POD_RETRY_BASE_MS, 0);
    }
    podrefs_free(&refs);
    *out = f;
    return 0;
}

void fastsync_status(const struct fastsync *f, cJSON *root)
{
    cJSON *fs = cJSON_AddObjectToObject(root, "fast_sync");
    cJSON_AddStringToObject(fs, "state", STATE_NAMES[f->state]);
    cJSON_AddBoolToObject(fs, "fallback", f->state == FS_FALLBACK);
    cJSON *objs = cJSON_AddArrayToObject(fs, "objects");
    for (size_t i = 0; i < f->nobjs; i++) {
        const struct fs_obj *o = &f->objs[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "resource", podrefs_resource(o->kind));
        cJSON_AddStringToObject(j, "name", o->name);
        cJSON_AddBoolToObject(j, "listed", o->listed);
        cJSON_AddBoolToObject(j, "exists", o->exists);
        cJSON_AddStringToObject(j, "resource_version", o->rv);
        if (o->w) {
            struct kwatch_stats st;
            kwatch_get_stats(o->w, &st);
            cJSON_AddBoolToObject(j, "streaming", st.streaming);
            cJSON_AddNumberToObject(j, "lists", st.lists);
            cJSON_AddNumberToObject(j, "watches", st.watches);
            cJSON_AddNumberToObject(j, "events", st.events);
            cJSON_AddNumberToObject(j, "bookmarks", st.bookmarks);
            cJSON_AddNumberToObject(j, "gone", st.gone);
            cJSON_AddNumberToObject(j, "resyncs", st.resyncs);
            cJSON_AddNumberToObject(j, "failures", st.failures);
        }
        cJSON_AddStringToObject(j, "error", o->error);
        cJSON_AddItemToArray(objs, j);
    }
    cJSON_AddNumberToObject(fs, "nudges", f->nudges_total);
    cJSON_AddNumberToObject(fs, "synced", f->synced);
    cJSON_AddNumberToObject(fs, "fallbacks", f->fallbacks);
    cJSON_AddNumberToObject(fs, "patch_errors", f->patch_errors);
    cJSON *b = cJSON_AddObjectToObject(fs, "budget_hits");
    for (int l = 0; l < METRICS_FS__COUNT; l++)
        cJSON_AddNumberToObject(b, metrics_fs_limit_name((enum metrics_fs_limit)l),
                                f->budget_hits[l]);
    if (f->state == FS_PENDING) {
        cJSON *p = cJSON_AddObjectToObject(fs, "pending");
        cJSON_AddStringToObject(p, "object", f->change_obj);
        cJSON_AddStringToObject(p, "resource_version", f->change_rv);
        cJSON_AddNumberToObject(p, "nudges", f->nudges);
    }
    if (f->last_result[0]) {
        cJSON *l = cJSON_AddObjectToObject(fs, "last");
        cJSON_AddStringToObject(l, "result", f->last_result);
        cJSON_AddStringToObject(l, "object", f->last_obj);
        cJSON_AddStringToObject(l, "resource_version", f->last_rv);
        cJSON_AddNumberToObject(l, "nudges", f->last_nudges);
        cJSON_AddNumberToObject(l, "ms", (double)f->last_ms);
    }
    cJSON_AddStringToObject(fs, "last_error", f->last_error);
}

static void closed_one(struct fastsync *f)
{
    if (--f->closes_pending > 0) return;
    void (*done)(void *) = f->done;
    void *ud = f->done_ud;
    for (size_t i = 0; i < f->nobjs; i++) free(f->objs[i].name);
    free(f->objs);
    free(f);
    if (done) done(ud);
}

static void on_watch_closed(void *ud) { closed_one(ud); }
static void on_timer_closed(uv_handle_t *h) { closed_one(h->data); }

void fastsync_close(struct fastsync *f, void (*done)(void *), void *ud)
{
    if (!f || f->closing) return;
    f->closing = 1;
    f->done = done;
    f->done_ud = ud;
    if (f->req) f->req->f = NULL; /* its reply, or kube's on_cancel, frees it */
    f->req = NULL;
    f->closes_pending = 1;
    for (size_t i = 0; i < f->nobjs; i++)
        if (f->objs[i].w) {
            f->closes_pending++;
            kwatch_close(f->objs[i].w, on_watch_closed, f);
            f->objs[i].w = NULL;
        }
    uv_close((uv_handle_t *)&f->timer, on_timer_closed);
}
