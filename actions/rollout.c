/*
 * rollout.c - one apply at a time: resolve owner, jitter, GET, compare,
 * per-owner min-interval, oscillation guard, PATCH (see rollout.h).
 *
 * Every kube request carries a small context with the apply generation, so
 * a reply that arrives after abort_apply() is ignored.
 */
#include "actions/rollout.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actions/rollout_decide.h"
#include "actions/action.h"
#include "base/backoff.h"
#include "base/log.h"

struct rollout {
    uv_loop_t *loop;
    struct kube *k;
    struct kevents *ev;
    uv_timer_t timer;
    struct owner_info *owner;
    unsigned gen; /* bumped by every apply start and abort */
    /* the current apply */
    int busy;
    struct rollout_params p; /* copied at apply; p.hash_annotation is owned */
    int have_params;
    char hash[65];
    char *files;
    char *recent; /* the owner's recent-rollouts annotation, as last read */
    rollout_cb cb;
    void *ud;
    /* startup resolution */
    void (*rcb)(void *, const struct owner_info *);
    void *rud;
    int resolving;
    struct rollout_guard guard; /* oscillation guard */
    int flip_counted;           /* this apply recorded a flip (then waited) */
    void (*close_done)(void *); /* rollout_close's callback */
    void *close_ud;
};

struct req_ctx {
    struct rollout *r;
    unsigned gen;
};

/* Name of a result: "patched", "already-current", "failed", "blocked". */
static const char *result_name(enum rollout_result r)
{
    static const char *const n[] = {"patched", "already-current", "failed", "blocked", "storm"};
    return (unsigned)r < 5 ? n[r] : "?";
}

int rollout_create(uv_loop_t *loop, struct kube *k, struct kevents *ev, struct rollout **out)
{
    struct rollout *r = calloc(1, sizeof *r);
    if (!r) return -ENOMEM;
    r->loop = loop;
    r->k = k;
    r->ev = ev;
    uv_timer_init(loop, &r->timer);
    r->timer.data = r;
    *out = r;
    return 0;
}

/* The resolved owner, or NULL before the first successful resolution. */
static const struct owner_info *current_owner(const struct rollout *r) { return r->owner; }

/* Events go to the pod's workload: the owner, or the Rollout whose
 * spec.workloadRef named it (o may be a failed resolution that found it). */
static void owner_event(struct rollout *r, const struct owner_info *o, const char *type,
                        const char *reason, const char *msg)
{
    if (!r->ev || !o || (r->have_params && !r->p.events)) return;
    struct kev_object obj = {o->api_version, o->kind, o->name, o->namespace_, o->uid};
    if (o->via_kind)
        obj = (struct kev_object){o->via_api_version, o->via_kind, o->via_name,
                                  kube_namespace(r->k), o->via_uid};
    else if (o->status != OWNER_OK)
        return;
    kev_post(r->ev, &obj, type, reason, msg);
}

static void log_rollout(struct rollout *r, const struct owner_info *o, enum rollout_result res,
                        const char *err)
{
    char owner[300], via[300] = "";
    struct log_rec rec;
    snprintf(owner, sizeof owner, "%s/%s", o && o->kind ? o->kind : "?",
             o && o->name ? o->name : "?");
    if (o && o->via_kind) snprintf(via, sizeof via, "%s/%s", o->via_kind, o->via_name);
    if (log_rec_begin(&rec, res >= ROLLOUT_FAILED ? RA_LOG_WARN : RA_LOG_INFO, "rollout")) {
        log_rec_str(&rec, "owner", owner);
        if (via[0]) log_rec_str(&rec, "via", via);
        log_rec_str(&rec, "hash", r->hash);
        log_rec_str(&rec, "result", res == ROLLOUT_BLOCKED ? "failed" : result_name(res));
        if (res == ROLLOUT_BLOCKED) log_rec_bool(&rec, "blocked", 1);
        if (err) log_rec_str(&rec, "error", err);
        if (res == ROLLOUT_PATCHED)
            log_rec_end(&rec, "patched the pod template of %s: the workload rolls", owner);
        else if (res == ROLLOUT_ALREADY_CURRENT)
            log_rec_end(&rec, "%s already carries this hash (another replica patched it)", owner);
        else
            log_rec_end(&rec, "rollout of %s failed: %s", owner, err ? err : "");
    }
}

/* Ends the apply; o is what the result is about (r->owner, or a failed
 * resolution). */
static void finish_about(struct rollout *r, const struct owner_info *o, enum rollout_result res,
                         const char *err)
{
    rollout_cb cb = r->cb;
    void *ud = r->ud;
    log_rollout(r, o, res, err);
    if (res == ROLLOUT_PATCHED) {
        char msg[600];
        if (o && o->via_kind)
            snprintf(msg, sizeof msg,
                     "reload-agent patched the pod template of %s %s (this "
                     "%s's spec.workloadRef): content hash %.12s",
                     o->kind, o->name, o->via_kind, r->hash);
        else
            snprintf(msg, sizeof msg, "reload-agent patched the pod template: content hash %.12s",
                     r->hash);
        owner_event(r, o, "Normal", "RolloutTriggered", msg);
    } else if (res == ROLLOUT_BLOCKED) {
        owner_event(r, o, "Warning", "RolloutSkipped", err ? err : "rollout not possible");
    } else if (res == ROLLOUT_STORM) {
        owner_event(r, o, "Warning", "ReloadStormHalted", err ? err : "too many rollouts");
    }
    r->busy = 0;
    r->gen++;
    free(r->files);
    r->files = NULL;
    cb(ud, res, err);
}

static void finish(struct rollout *r, enum rollout_result res, const char *err)
{
    finish_about(r, r->owner, res, err);
}

static int request(struct rollout *r, const struct kube_req *req, kube_cb cb)
{
    struct req_ctx *c = malloc(sizeof *c);
    if (!c) return -ENOMEM;
    c->r = r;
    c->gen = r->gen;
    struct kube_req q = *req;
    q.on_cancel = free;
    int rc = kube_request(r->k, &q, cb, c);
    if (rc < 0) free(c);
    return rc;
}

/* Takes the context of a reply; returns the rollout if still current. */
static struct rollout *reply_owner(void *ud)
{
    struct req_ctx *c = ud;
    struct rollout *r = c->r;
    unsigned gen = c->gen;
    free(c);
    return r->gen == gen && r->busy ? r : NULL;
}

/* ---- the apply steps ---- */

static void on_patched(void *ud, const struct kube_resp *resp)
{
    struct rollout *r = reply_owner(ud);
    if (!r) return;
    if (!resp->ok || resp->status >= 300) {
        finish(r, ROLLOUT_FAILED, resp->error ? resp->error : "PATCH failed");
        return;
    }
    snprintf(r->guard.last_set, sizeof r->guard.last_set, "%s", r->hash);
    finish(r, ROLLOUT_PATCHED, NULL);
}

static void do_patch(struct rollout *r)
{
    char when[32], q[700];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    char *fk = rollout__files_key(r->p.hash_annotation);
    char *lk = rollout__last_key(r->p.hash_annotation);
    cJSON *p = cJSON_CreateObject();
    cJSON *mda = cJSON_AddObjectToObject(cJSON_AddObjectToObject(p, "metadata"), "annotations");
    cJSON_AddStringToObject(mda, lk, when);
    if (r->p.storm_max > 0) { /* the workload's count of rollouts, for every replica */
        char *rk = rollout__recent_key(r->p.hash_annotation);
        char *list = rollout__recent_list(r->recent, now, r->p.storm_max,
                                          (int64_t)(r->p.storm_window_ms / 1000));
        cJSON_AddStringToObject(mda, rk, list);
        free(rk);
        free(list);
    }
    cJSON *ta = cJSON_AddObjectToObject(
        cJSON_AddObjectToObject(
            cJSON_AddObjectToObject(cJSON_AddObjectToObject(p, "spec"), "template"), "metadata"),
        "annotations");
    cJSON_AddStringToObject(ta, r->p.hash_annotation, r->hash);
    if (r->files) cJSON_AddStringToObject(ta, fk, r->files);
    char *body = cJSON_PrintUnformatted(p);
    cJSON_Delete(p);
    free(fk);
    free(lk);
    if (!body) ra_oom();
    snprintf(q, sizeof q, "%s?fieldManager=reload-agent", r->owner->path);
    struct kube_req req = {.verb = "patch",
                           .resource = r->owner->resource,
                           .group = r->owner->group,
                           .method = "PATCH",
                           .path = q,
                           .content_type = r->owner->patch_type,
                           .body = body,
                           .body_len = strlen(body)};
    if (request(r, &req, on_patched) < 0) finish(r, ROLLOUT_FAILED, "cannot start the PATCH");
    free(body);
}

static void do_get(struct rollout *r);
static void on_timer(uv_timer_t *t) { do_get(t->data); }

/* Warns that the patch lands but rolls nothing until the user acts. */
static void warn_not_rolling(struct rollout *r, const char *why)
{
    char msg[800];
    snprintf(msg, sizeof msg, "%s/%s: %s", r->owner->kind, r->owner->name, why);
    log_warn("%s", msg);
    owner_event(r, r->owner, "Warning", "RolloutSkipped", msg);
}

/* The owner's GET reply: parse it, decide, act on the decision. */
static void on_got(void *ud, const struct kube_resp *resp)
{
    struct rollout *r = reply_owner(ud);
    if (!r) return;
    if (!resp->ok || resp->status >= 300) {
        struct owner_info *gone = NULL;
        if (resp->ok && resp->status == 404) { /* deleted: resolve the owner again next time */
            gone = r->owner;
            r->owner = NULL;
        }
        finish_about(r, gone ? gone : r->owner, ROLLOUT_FAILED,
                     resp->error ? resp->error : "GET of the owner failed");
        owner_info_free(gone);
        return;
    }
    struct rollout_state st;
    if (rollout__parse_state(resp->body, resp->body_len, r->p.hash_annotation, &st) < 0) {
        finish(r, ROLLOUT_FAILED, "the owner's GET reply is not a JSON object");
        return;
    }
    struct rollout_input in = {.kind = r->owner->ki,
                               .hash = r->hash,
                               .files = r->files,
                               .min_interval_ms = r->p.min_interval_ms,
                               .now = time(NULL),
                               .guard = &r->guard,
                               .flip_counted = r->flip_counted,
                               .storm_max = r->p.storm_max,
                               .storm_window_s = (int64_t)(r->p.storm_window_ms / 1000)};
    free(r->recent);
    r->recent = ra_strdup(st.recent);
    struct rollout_decision *d = malloc(sizeof *d);
    if (!d) ra_oom();
    rollout__decide(&st, &in, d);
    rollout__state_free(&st);
    if (d->flipped) {
        rollout__guard_flip(&r->guard, in.now);
        r->flip_counted = 1; /* a GET after a --min-interval wait sees it again */
    }
    switch (d->verdict) {
    case ROLLOUT_V_CURRENT: finish(r, ROLLOUT_ALREADY_CURRENT, NULL); break;
    case ROLLOUT_V_STORM: finish(r, ROLLOUT_STORM, d->reason); break;
    case ROLLOUT_V_BLOCKED:
        if (d->owner_blocks) { /* resolve the owner again at the next apply */
            struct owner_info *o = r->owner;
            char err[sizeof d->reason + 600];
            snprintf(err, sizeof err, "%s/%s: %s", o->kind, o->name, d->reason);
            r->owner = NULL;
            finish_about(r, o, ROLLOUT_BLOCKED, err);
            owner_info_free(o);
        } else {
            finish(r, ROLLOUT_BLOCKED, d->reason);
        }
        break;
    case ROLLOUT_V_WAIT:
        log_info("%s/%s was rolled recently; waiting %llums (--min-interval)", r->owner->kind,
                 r->owner->name, (unsigned long long)d->wait_ms);
        uv_timer_start(&r->timer, on_timer, d->wait_ms, 0);
        break;
    case ROLLOUT_V_PATCH:
        if (d->warning) warn_not_rolling(r, d->warning);
        do_patch(r);
        break;
    }
    free(d);
}

static void do_get(struct rollout *r)
{
    struct kube_req req = {.verb = "get",
                           .resource = r->owner->resource,
                           .group = r->owner->group,
                           .method = "GET",
                           .path = r->owner->path};
    if (request(r, &req, on_got) < 0) finish(r, ROLLOUT_FAILED, "cannot start the GET");
}

static void start_jitter(struct rollout *r)
{
    uint64_t j = r->p.jitter_ms;
    uint64_t wait = ra_rng_below(ra_rng_process(), j);
    uv_timer_start(&r->timer, on_timer, wait, 0);
}

static void resolved(void *ud, struct owner_info *o)
{
    struct rollout *r = ud;
    r->resolving = 0;
    if (o->status == OWNER_OK) {
        if (r->owner) owner_info_free(r->owner);
        r->owner = o;
    } else {
        struct log_rec rec;
        if (log_rec_begin(&rec, RA_LOG_WARN, "owner-error")) {
            log_rec_str(&rec, "error", o->error ? o->error : "unknown error");
            log_rec_end(&rec, "cannot find a workload to roll: %s",
                        o->error ? o->error : "unknown error");
        }
    }
    if (r->rcb) {
        void (*rcb)(void *, const struct owner_info *) = r->rcb;
        r->rcb = NULL;
        rcb(r->rud, o);
    }
    if (r->busy && !r->owner) {
        char err[1024];
        enum rollout_result res = o->status == OWNER_NO_ROLLOUT ? ROLLOUT_BLOCKED : ROLLOUT_FAILED;
        snprintf(err, sizeof err, "%s", o->error ? o->error : "owner resolution failed");
        finish_about(r, o, res, err);
        owner_info_free(o);
        return;
    }
    if (o != r->owner) owner_info_free(o);
    if (r->busy) start_jitter(r);
}

static int resolve(struct rollout *r)
{
    if (r->resolving) return 0;
    r->resolving = 1;
    int rc = owner_resolve(r->k, resolved, r);
    if (rc < 0) r->resolving = 0;
    return rc;
}

int rollout_resolve(struct rollout *r, void (*cb)(void *, const struct owner_info *), void *ud)
{
    r->rcb = cb;
    r->rud = ud;
    return resolve(r);
}

/* Starts one apply of hash (64 hex) with files_json (a JSON object, or
 * NULL). p is copied. cb runs exactly once, later. Returns 0, or -EBUSY if
 * an apply is already running, or -ENOMEM (cb never runs). */
static int apply(struct rollout *r, const struct rollout_params *p, const char *hash,
                 const char *files_json, rollout_cb cb, void *ud)
{
    if (r->busy) return -EBUSY;
    char *ann = strdup(p->hash_annotation);
    if (!ann) return -ENOMEM;
    r->busy = 1;
    r->gen++;
    free((char *)r->p.hash_annotation);
    r->p = *p;
    r->p.hash_annotation = ann;
    r->have_params = 1;
    r->flip_counted = 0;
    r->cb = cb;
    r->ud = ud;
    snprintf(r->hash, sizeof r->hash, "%s", hash);
    r->files = files_json ? strdup(files_json) : NULL;
    if (r->owner) {
        start_jitter(r);
        return 0;
    }
    if (resolve(r) < 0) {
        r->busy = 0;
        free(r->files);
        r->files = NULL;
        return -EIO;
    }
    return 0;
}

/* Ends a running apply now: its callback runs synchronously with
 * ROLLOUT_FAILED ("the agent is stopping"); later replies are ignored. */
static void abort_apply(struct rollout *r)
{
    if (!r->busy) return;
    uv_timer_stop(&r->timer);
    finish(r, ROLLOUT_FAILED, "the agent is stopping");
}

static void on_closed(uv_handle_t *h)
{
    struct rollout *r = h->data;
    void (*done)(void *) = r->close_done;
    void *ud = r->close_ud;
    if (r->owner) owner_info_free(r->owner);
    free(r->files);
    free(r->recent);
    free((char *)r->p.hash_annotation);
    free(r);
    if (done) done(ud);
}

void rollout_close(struct rollout *r, void (*done)(void *), void *ud)
{
    r->gen++; /* replies still on their way are ignored */
    r->busy = 0;
    r->rcb = NULL;
    r->close_done = done;
    r->close_ud = ud;
    uv_timer_stop(&r->timer);
    uv_close((uv_handle_t *)&r->timer, on_closed);
}

/* ---- the rollout action (actions/action.h) ---- */

struct rollout_run {
    action_done done;
    void *ud;
};

static void rollout_run_done(void *ud, enum rollout_result res, const char *err)
{
    struct rollout_run run = *(struct rollout_run *)ud;
    free(ud);
    int ok = res == ROLLOUT_PATCHED || res == ROLLOUT_ALREADY_CURRENT;
    struct action_result r = {ok ? 0 : -EIO, res == ROLLOUT_BLOCKED || res == ROLLOUT_STORM,
                              ok ? NULL : err, res == ROLLOUT_STORM};
    run.done(run.ud, ACTION_ROLLOUT, &r);
}

static void rollout_action_start(struct action_env *env, const struct action_params *p,
                                 action_done done, void *ud)
{
    const char *err = NULL;
    struct rollout_run *run = malloc(sizeof *run);
    if (!run) ra_oom();
    *run = (struct rollout_run){done, ud};
    struct rollout_params rp = {
        .hash_annotation = p->hash_annotation,
        .jitter_ms = p->rollout_jitter_ms,
        .min_interval_ms = p->min_interval_ms,
        .events = p->events,
        .storm_max = p->storm_max,
        .storm_window_ms = p->storm_window_ms,
    };
    if (!env->ro)
        err = "no Kubernetes API client (internal error)";
    else if (apply(env->ro, &rp, p->rollout_hash, p->rollout_files, rollout_run_done, run) < 0)
        err = "cannot start the rollout";
    if (err) {
        free(run);
        struct action_result r = {-EIO, 0, err, 0};
        done(ud, ACTION_ROLLOUT, &r);
    }
}

static void rollout_action_abort(struct action_env *env)
{
    if (env->ro) abort_apply(env->ro);
}

const struct action_ops action__rollout_ops = {rollout_action_start, rollout_action_abort, NULL};

const struct owner_info *action_env_owner(const struct action_env *env)
{
    return env->ro ? current_owner(env->ro) : NULL;
}
