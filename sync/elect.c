/*
 * elect.c - the sync service's leader election on a Lease (sync/elect.h):
 * a timer every retry period, one GET of the Lease, then a create, a renew
 * or a take-over as a compare-and-swap, or nothing.
 */
#include "sync/elect.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "kube/lease.h"

struct elect {
    uv_loop_t *loop;
    struct kube *k;
    char *lease, *identity;
    uint64_t duration_ms, retry_ms;
    void (*cb)(void *, int);
    void *ud;
    uv_timer_t timer;
    int leader, busy, closing;
    uint64_t renewed_ms;  /* our last successful write */
    char seen[512];       /* the holder and renewTime last read */
    uint64_t observed_ms; /* when they last changed */
    long transitions;
    char rv[128]; /* the Lease's version after our last write ("" = read first) */
};

enum elect__do elect__decide(const char *me, const char *holder, uint64_t observed_ms,
                             uint64_t now_ms, uint64_t duration_ms)
{
    if (holder[0] && !strcmp(holder, me)) return ELECT__RENEW;
    if (!holder[0] || now_ms >= observed_ms + duration_ms) return ELECT__TAKE;
    return ELECT__WAIT;
}

static void set_leader(struct elect *e, int leader)
{
    if (e->leader == leader) return;
    e->leader = leader;
    log_info("sync: %s the leader (Lease %s, identity %s)", leader ? "became" : "is no longer",
             e->lease, e->identity);
    e->cb(e->ud, leader);
}

/* The leader steps down when it could not renew in time. */
static void check_deadline(struct elect *e)
{
    if (e->leader && uv_now(e->loop) > e->renewed_ms + e->duration_ms * 2 / 3) set_leader(e, 0);
}

static void micro_time(char *out, size_t n)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    char s[32];
    strftime(s, sizeof s, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, n, "%s.%06ldZ", s, ts.tv_nsec / 1000);
}

/* The spec this replica writes as holder; take: a new holder. */
static cJSON *holder_spec(struct elect *e, int take)
{
    char now[64];
    micro_time(now, sizeof now);
    cJSON *spec = cJSON_CreateObject();
    cJSON_AddStringToObject(spec, "holderIdentity", e->identity);
    cJSON_AddNumberToObject(spec, "leaseDurationSeconds", (double)(e->duration_ms / 1000));
    cJSON_AddStringToObject(spec, "renewTime", now);
    if (take) {
        cJSON_AddStringToObject(spec, "acquireTime", now);
        cJSON_AddNumberToObject(spec, "leaseTransitions", (double)e->transitions);
    }
    return spec;
}

static void on_write(void *ud, const struct kube_resp *r)
{
    struct elect *e = ud;
    e->busy = 0;
    e->rv[0] = '\0';
    if (r->ok && (r->status == 200 || r->status == 201)) {
        cJSON *j = cJSON_ParseWithLength(r->body, r->body_len);
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "metadata");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, "resourceVersion");
        if (cJSON_IsString(v)) snprintf(e->rv, sizeof e->rv, "%s", v->valuestring);
        cJSON_Delete(j);
        e->renewed_ms = uv_now(e->loop);
        set_leader(e, 1);
        return;
    }
    if (!(r->ok && r->status == 409))
        log_info("sync: cannot write Lease %s: %s", e->lease, r->error ? r->error : "no answer");
    check_deadline(e);
}

static void on_cancel(void *ud) { (void)ud; }

/* One attempt per request, bounded by a third of the lease duration: the
 * next tick is the retry (as client-go's election does). kube_request's
 * own retries (up to KUBE_MAX_TRIES, each up to KUBE_TIMEOUT_MS) kept a
 * request busy for up to a minute after an API server came back, and the
 * election blind meanwhile. */
static uint64_t attempt_ms(const struct elect *e) { return e->duration_ms / 3; }

/* Sends o (consumed) as a POST of a new Lease (rv NULL) or a merge patch
 * that carries rv (a compare-and-swap); cb gets the answer. Sets e->busy. */
static void send_lease(struct elect *e, cJSON *o, const char *rv, kube_cb cb)
{
    char *body = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!body) ra_oom();
    char *path =
        rv ? lease_path(e->k, e->lease)
           : ra_asprintf("/apis/coordination.k8s.io/v1/namespaces/%s/leases", kube_namespace(e->k));
    struct kube_req req = {.verb = rv ? "patch" : "create",
                           .resource = "leases",
                           .group = LEASE_GROUP,
                           .method = rv ? "PATCH" : "POST",
                           .path = path,
                           .content_type = rv ? "application/merge-patch+json" : "application/json",
                           .body = body,
                           .body_len = strlen(body),
                           .on_cancel = on_cancel,
                           .max_tries = 1,
                           .timeout_ms = attempt_ms(e)};
    e->busy = kube_request(e->k, &req, cb, e) == 0;
    free(path);
    free(body);
}

/* POST (rv NULL: a new Lease) or a CAS PATCH at rv. */
static void write_lease(struct elect *e, const char *rv, int take)
{
    cJSON *o = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(o, "metadata");
    if (rv) {
        cJSON_AddStringToObject(meta, "resourceVersion", rv);
    } else {
        cJSON_AddStringToObject(o, "apiVersion", "coordination.k8s.io/v1");
        cJSON_AddStringToObject(o, "kind", "Lease");
        cJSON_AddStringToObject(meta, "name", e->lease);
    }
    cJSON_AddItemToObject(o, "spec", holder_spec(e, take));
    send_lease(e, o, rv, on_write);
}

static const char *str_at(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The Lease as read: who holds it, since when (by our clock), then act. */
static void on_lease(struct elect *e, const char *body, size_t len)
{
    cJSON *j = cJSON_ParseWithLength(body, len);
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(j, "spec");
    const char *rv = str_at(cJSON_GetObjectItemCaseSensitive(j, "metadata"), "resourceVersion");
    const char *holder = str_at(spec, "holderIdentity"), *renew = str_at(spec, "renewTime");
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(spec, "leaseTransitions");
    char seen[512];
    uint64_t now = uv_now(e->loop);
    if (!rv) {
        log_info("sync: Lease %s: a reply without metadata.resourceVersion", e->lease);
        cJSON_Delete(j);
        return;
    }
    snprintf(seen, sizeof seen, "%s|%s", holder ? holder : "", renew ? renew : "");
    if (strcmp(seen, e->seen) != 0) {
        snprintf(e->seen, sizeof e->seen, "%s", seen);
        e->observed_ms = now;
    }
    e->transitions = cJSON_IsNumber(tr) ? (long)tr->valuedouble : 0;
    enum elect__do d =
        elect__decide(e->identity, holder ? holder : "", e->observed_ms, now, e->duration_ms);
    if (d == ELECT__WAIT) set_leader(e, 0);
    if (d == ELECT__TAKE) e->transitions++;
    if (d != ELECT__WAIT) write_lease(e, rv, d == ELECT__TAKE);
    cJSON_Delete(j);
}

static void on_read(void *ud, const struct kube_resp *r)
{
    struct elect *e = ud;
    e->busy = 0;
    if (r->ok && r->status == 200)
        on_lease(e, r->body, r->body_len);
    else if (r->ok && r->status == 404)
        write_lease(e, NULL, 1);
    else
        log_info("sync: cannot read Lease %s: %s", e->lease, r->error ? r->error : "no answer");
    check_deadline(e);
}

static void on_tick(uv_timer_t *t)
{
    struct elect *e = t->data;
    check_deadline(e);
    if (e->busy) return;
    if (e->leader && e->rv[0]) { /* a renewal at the version we wrote: no read */
        write_lease(e, e->rv, 0);
        return;
    }
    char *path = lease_path(e->k, e->lease);
    struct kube_req req = {.verb = "get",
                           .resource = "leases",
                           .group = LEASE_GROUP,
                           .method = "GET",
                           .path = path,
                           .on_cancel = on_cancel,
                           .max_tries = 1,
                           .timeout_ms = attempt_ms(e)};
    e->busy = kube_request(e->k, &req, on_read, e) == 0;
    free(path);
}

struct elect *elect_start(uv_loop_t *loop, struct kube *k, const struct elect_opts *o,
                          void (*cb)(void *ud, int leader), void *ud)
{
    struct elect *e = calloc(1, sizeof *e);
    if (!e) ra_oom();
    e->loop = loop;
    e->k = k;
    e->lease = ra_strdup(o->lease);
    e->identity = ra_strdup(o->identity);
    e->duration_ms = o->duration_ms;
    e->retry_ms = o->retry_ms;
    e->cb = cb;
    e->ud = ud;
    uv_timer_init(loop, &e->timer);
    e->timer.data = e;
    uv_timer_start(&e->timer, on_tick, 0, o->retry_ms);
    return e;
}

int elect_is_leader(const struct elect *e) { return e->leader; }

static void on_closed(uv_handle_t *h)
{
    struct elect *e = h->data;
    free(e->lease);
    free(e->identity);
    free(e);
}

void elect_close(struct elect *e)
{
    if (!e || e->closing) return;
    e->closing = 1;
    uv_close((uv_handle_t *)&e->timer, on_closed);
}
