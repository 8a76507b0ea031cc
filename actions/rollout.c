/*
 * rollout.c - one apply at a time: resolve owner, jitter, GET, compare,
 * per-owner min-interval, oscillation guard, PATCH (see rollout.h).
 *
 * Every kube request carries a small context with the apply generation, so
 * a reply that arrives after rollout_abort() is ignored.
 */
#include "actions/rollout.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    rollout_cb cb;
    void *ud;
    /* startup resolution */
    void (*rcb)(void *, const struct owner_info *);
    void *rud;
    int resolving;
    /* oscillation guard */
    char last_set[65];
    time_t flips[ROLLOUT_FLIP_LIMIT];
    size_t nflips;
    int blocked;
    int warned_not_possible;
    void (*close_done)(void *); /* rollout_close's callback */
    void *close_ud;
};

struct req_ctx {
    struct rollout *r;
    unsigned gen;
};

const char *rollout_result_name(enum rollout_result r)
{
    static const char *const n[] = {"patched", "already-current", "failed", "blocked"};
    return (unsigned)r < 4 ? n[r] : "?";
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

const struct owner_info *rollout_owner(const struct rollout *r) { return r->owner; }

static void owner_event(struct rollout *r, const char *type, const char *reason, const char *msg)
{
    if (!r->ev || !r->owner || (r->have_params && !r->p.events)) return;
    struct kev_object o = {r->owner->api_version, r->owner->kind, r->owner->name,
                           r->owner->namespace_, r->owner->uid};
    kev_post(r->ev, &o, type, reason, msg);
}

static void log_rollout(struct rollout *r, enum rollout_result res, const char *err)
{
    char owner[300];
    struct log_rec rec;
    snprintf(owner, sizeof owner, "%s/%s", r->owner ? r->owner->kind : "?",
             r->owner ? r->owner->name : "?");
    if (log_rec_begin(&rec, res >= ROLLOUT_FAILED ? RA_LOG_WARN : RA_LOG_INFO, "rollout")) {
        log_rec_str(&rec, "owner", owner);
        log_rec_str(&rec, "hash", r->hash);
        log_rec_str(&rec, "result", res == ROLLOUT_BLOCKED ? "failed" : rollout_result_name(res));
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

static void finish(struct rollout *r, enum rollout_result res, const char *err)
{
    rollout_cb cb = r->cb;
    void *ud = r->ud;
    log_rollout(r, res, err);
    if (res == ROLLOUT_PATCHED) {
        char msg[256];
        snprintf(msg, sizeof msg, "reload-agent patched the pod template: content hash %.12s",
                 r->hash);
        owner_event(r, "Normal", "RolloutTriggered", msg);
    } else if (res == ROLLOUT_BLOCKED) {
        owner_event(r, "Warning", "RolloutSkipped", err ? err : "rollout not possible");
    }
    r->busy = 0;
    r->gen++;
    free(r->files);
    r->files = NULL;
    cb(ud, res, err);
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

/* ---- annotations helpers ---- */

static char *files_key(const char *hash_key)
{
    size_t n = strlen(hash_key);
    char *k = malloc(n + 8);
    if (!k) ra_oom();
    if (n > 5 && strcmp(hash_key + n - 5, "-hash") == 0)
        snprintf(k, n + 8, "%.*s-files", (int)(n - 5), hash_key);
    else
        snprintf(k, n + 8, "%s-files", hash_key);
    return k;
}

static char *last_key(const char *hash_key)
{
    const char *slash = strchr(hash_key, '/');
    size_t plen = slash ? (size_t)(slash - hash_key) + 1 : 0;
    char *k = malloc(plen + 16);
    if (!k) ra_oom();
    snprintf(k, plen + 16, "%.*slast-rollout", (int)plen, hash_key);
    return k;
}

static const char *json_str(const cJSON *obj, const char *const *path, size_t n)
{
    for (size_t i = 0; i < n && obj; i++) obj = cJSON_GetObjectItemCaseSensitive(obj, path[i]);
    return cJSON_IsString(obj) ? obj->valuestring : NULL;
}

/* Names the paths whose digests differ between our files map and the
 * owner's. */
static void differing_paths(const char *ours, const char *theirs, char *out, size_t outlen)
{
    cJSON *a = ours ? cJSON_Parse(ours) : NULL, *b = theirs ? cJSON_Parse(theirs) : NULL;
    size_t len = 0;
    out[0] = '\0';
    const cJSON *e;
    cJSON_ArrayForEach(e, a)
    {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(b, e->string);
        if (!o || !cJSON_IsString(o) || !cJSON_IsString(e) ||
            strcmp(o->valuestring, e->valuestring) != 0)
            len += (size_t)snprintf(out + len, len < outlen ? outlen - len : 0, "%s%s",
                                    len ? ", " : "", e->string);
    }
    cJSON_ArrayForEach(e, b)
    {
        if (!cJSON_GetObjectItemCaseSensitive(a, e->string))
            len += (size_t)snprintf(out + len, len < outlen ? outlen - len : 0, "%s%s",
                                    len ? ", " : "", e->string);
    }
    if (!out[0]) snprintf(out, outlen, "unknown (no file list on the owner)");
    cJSON_Delete(a);
    cJSON_Delete(b);
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
    snprintf(r->last_set, sizeof r->last_set, "%s", r->hash);
    finish(r, ROLLOUT_PATCHED, NULL);
}

static void do_patch(struct rollout *r)
{
    char when[32], q[700];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    char *fk = files_key(r->p.hash_annotation), *lk = last_key(r->p.hash_annotation);
    cJSON *p = cJSON_CreateObject();
    cJSON *mda = cJSON_AddObjectToObject(cJSON_AddObjectToObject(p, "metadata"), "annotations");
    cJSON_AddStringToObject(mda, lk, when);
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
    struct kube_req req = {.verb = "patch", .resource = r->owner->resource,
                           .group = r->owner->group, .method = "PATCH", .path = q,
                           .content_type = r->owner->patch_type, .body = body,
                           .body_len = strlen(body)};
    if (request(r, &req, on_patched) < 0) finish(r, ROLLOUT_FAILED, "cannot start the PATCH");
    free(body);
}

static void do_get(struct rollout *r);
static void on_timer(uv_timer_t *t) { do_get(t->data); }

/* Records that someone changed the annotation away from what we set. */
static int flipped_too_often(struct rollout *r)
{
    time_t now = time(NULL);
    size_t keep = 0;
    for (size_t i = 0; i < r->nflips; i++)
        if (now - r->flips[i] < ROLLOUT_FLIP_WINDOW_S) r->flips[keep++] = r->flips[i];
    r->nflips = keep;
    if (r->nflips < ROLLOUT_FLIP_LIMIT) r->flips[r->nflips++] = now;
    return r->nflips >= ROLLOUT_FLIP_LIMIT;
}

static void on_got(void *ud, const struct kube_resp *resp)
{
    struct rollout *r = reply_owner(ud);
    if (!r) return;
    if (!resp->ok || resp->status >= 300) {
        finish(r, ROLLOUT_FAILED, resp->error ? resp->error : "GET of the owner failed");
        return;
    }
    cJSON *obj = cJSON_ParseWithLength(resp->body, resp->body_len);
    if (!obj) {
        finish(r, ROLLOUT_FAILED, "the owner's GET reply is not JSON");
        return;
    }
    char *fk = files_key(r->p.hash_annotation), *lk = last_key(r->p.hash_annotation);
    const char *hp[] = {"spec", "template", "metadata", "annotations", r->p.hash_annotation};
    const char *fp[] = {"spec", "template", "metadata", "annotations", fk};
    const char *lp[] = {"metadata", "annotations", lk};
    const char *cur = json_str(obj, hp, 5), *their_files = json_str(obj, fp, 5);
    const char *last = json_str(obj, lp, 3);
    cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
    const char *strat[] = {"updateStrategy", "type"};
    const char *st = json_str(spec, strat, 2);
    int is_paused = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(spec, "paused"));
    if ((is_paused || (st && strcmp(st, "OnDelete") == 0)) && !r->warned_not_possible) {
        char msg[300];
        snprintf(msg, sizeof msg, "%s/%s: %s", r->owner->kind, r->owner->name,
                 is_paused ? "spec.paused is true: a template patch will not roll pods until "
                             "`kubectl rollout resume`"
                           : "updateStrategy OnDelete: a template patch will not replace running "
                             "pods; delete them to pick up the change");
        log_warn("%s", msg);
        owner_event(r, "Warning", "RolloutSkipped", msg);
        r->warned_not_possible = 1;
    }

    if (cur && strcmp(cur, r->hash) == 0) {
        cJSON_Delete(obj);
        free(fk);
        free(lk);
        finish(r, ROLLOUT_ALREADY_CURRENT, NULL);
        return;
    }
    /* Someone replaced the hash we set with another one: pods disagree. */
    if (cur && r->last_set[0] && strcmp(cur, r->last_set) != 0 && flipped_too_often(r)) {
        char paths[1024], msg[1400];
        differing_paths(r->files, their_files, paths, sizeof paths);
        snprintf(msg, sizeof msg,
                 "the pod template hash keeps flipping between replicas (%.12s vs %.12s): pods "
                 "see different content; differing paths: %s. Not rolling again.",
                 r->hash, cur, paths);
        r->blocked = 1;
        cJSON_Delete(obj);
        free(fk);
        free(lk);
        finish(r, ROLLOUT_BLOCKED, msg);
        return;
    }
    /* --min-interval per owner, shared by all replicas through the owner. */
    uint64_t gap_ms = r->p.min_interval_ms;
    if (last && gap_ms) {
        struct tm tm = {0};
        if (strptime(last, "%Y-%m-%dT%H:%M:%SZ", &tm)) {
            time_t at = timegm(&tm), now = time(NULL);
            if ((uint64_t)(now - at) * 1000 < gap_ms) {
                uint64_t wait = gap_ms - (uint64_t)(now - at) * 1000;
                log_info("%s/%s was rolled %lds ago; waiting %llums (--min-interval)",
                         r->owner->kind, r->owner->name, (long)(now - at),
                         (unsigned long long)wait);
                cJSON_Delete(obj);
                free(fk);
                free(lk);
                uv_timer_start(&r->timer, on_timer, wait, 0);
                return;
            }
        }
    }
    cJSON_Delete(obj);
    free(fk);
    free(lk);
    do_patch(r);
}

static void do_get(struct rollout *r)
{
    struct kube_req req = {.verb = "get", .resource = r->owner->resource, .group = r->owner->group,
                           .method = "GET", .path = r->owner->path};
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
        log_warn("cannot find a workload to roll: %s", o->error ? o->error : "unknown error");
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
        owner_info_free(o);
        finish(r, res, err);
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

int rollout_apply(struct rollout *r, const struct rollout_params *p, const char *hash,
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
    r->cb = cb;
    r->ud = ud;
    snprintf(r->hash, sizeof r->hash, "%s", hash);
    r->files = files_json ? strdup(files_json) : NULL;
    if (r->blocked && strcmp(r->last_set, hash) != 0) r->blocked = 0; /* new content: try again */
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

void rollout_abort(struct rollout *r)
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
    struct action_result r = {ok ? 0 : -EIO, res == ROLLOUT_BLOCKED, ok ? NULL : err};
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
    };
    if (!env->ro) err = "no Kubernetes API client (internal error)";
    else if (rollout_apply(env->ro, &rp, p->rollout_hash, p->rollout_files, rollout_run_done,
                           run) < 0)
        err = "cannot start the rollout";
    if (err) {
        free(run);
        struct action_result r = {-EIO, 0, err};
        done(ud, ACTION_ROLLOUT, &r);
    }
}

static void rollout_action_abort(struct action_env *env)
{
    if (env->ro) rollout_abort(env->ro);
}

const struct action_ops action__rollout_ops = {rollout_action_start, rollout_action_abort, NULL};

const struct owner_info *action_env_owner(const struct action_env *env)
{
    return env->ro ? rollout_owner(env->ro) : NULL;
}
