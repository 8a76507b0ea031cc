/*
 * service.c - the sync service's composition (sync/service.h): one loop,
 * the API client, three collection watches per namespace (or, with
 * --all-namespaces, one pod watch and sync/nswatch.c's per-namespace
 * ones), the index, the elector and the nudger; the recent changes a new
 * leader replays.
 */
#include "sync/service.h"

#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "base/log.h"
#include "config/config.h"
#include "kube/kcwatch.h"
#include "kube/kube.h"
#include "net/httpc.h"
#include "sync/elect.h"
#include "sync/index.h"
#include "sync/nswatch.h"
#include "sync/nudge.h"

#define RECENT 4096 /* changes remembered for a new leader */

enum res { RES_CONFIGMAP, RES_SECRET, RES_POD, NRES };
static const char *const RES_NAME[NRES] = {"configmaps", "secrets", "pods"};

struct change {
    enum sync_kind kind;
    char ns[64], name[254], rv[64];
    uint64_t at;
};

struct svc;

struct wctx {
    struct svc *s;
    enum res res;
    struct kcwatch *w;
};

struct svc {
    const struct sync_opts *o;
    uv_loop_t loop;
    uv_signal_t sigterm, sigint;
    struct httpc *hc;
    struct kube *k;
    struct sync_index *ix;
    struct elect *el;
    struct nudger *nu;
    struct wctx w[SYNC_MAX_NAMESPACES][NRES];
    struct wctx allpods; /* --all-namespaces: the one pod watch */
    struct nswatch *nsw; /* --all-namespaces: the namespaces' other watches */
    int refused;         /* a namespace with pods was refused at the limit */
    struct change *recent;
    size_t nrecent, next;
    unsigned long changes;
};

/* ---- the nudges ---- */

struct fan {
    struct svc *s;
    const char *rv;
    char value[400];
    size_t nudged;
};

static void nudge_one(void *ud, const char *ns, const char *pod)
{
    struct fan *f = ud;
    if (sync_index_synced_since(f->s->ix, ns, pod, f->rv)) return; /* it shows this one */
    nudge_pod(f->s->nu, ns, pod, f->value);
    f->nudged++;
}

/* The annotation value of a nudge for object k/name at rv. */
static void nudge_value(char *buf, size_t n, enum sync_kind k, const char *name, const char *rv)
{
    snprintf(buf, n, "%s/%s@%s", sync_kind_name(k), name, rv);
}

static size_t fan_out(struct svc *s, enum sync_kind k, const char *ns, const char *name,
                      const char *rv)
{
    struct fan f = {.s = s, .rv = rv};
    nudge_value(f.value, sizeof f.value, k, name, rv);
    sync_index_pods_of(s->ix, k, ns, name, nudge_one, &f);
    return f.nudged;
}

static void remember(struct svc *s, enum sync_kind k, const char *ns, const char *name,
                     const char *rv)
{
    struct change *c = &s->recent[s->next];
    c->kind = k;
    snprintf(c->ns, sizeof c->ns, "%s", ns);
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->rv, sizeof c->rv, "%s", rv);
    c->at = uv_now(&s->loop);
    s->next = (s->next + 1) % RECENT;
    if (s->nrecent < RECENT) s->nrecent++;
}

static void nudge_behind(void *ud, const char *ns, const char *pod, enum sync_kind k,
                         const char *name, const char *rv)
{
    struct svc *s = ud;
    char value[400];
    nudge_value(value, sizeof value, k, name, rv);
    nudge_pod(s->nu, ns, pod, value);
}

/* A new leader: the changes of the last lease duration (and a margin) again,
 * for the pods that do not show them; then every pod whose last nudge is
 * older than a version of an object it names (a change this replica took
 * for its baseline because it started after it: no leader nudged it). */
static void replay(struct svc *s)
{
    uint64_t now = uv_now(&s->loop), window = s->o->lease_ms + 2 * s->o->lease_retry_ms;
    size_t n = 0;
    for (size_t i = 0; i < s->nrecent; i++) {
        const struct change *c = &s->recent[(s->next + RECENT - s->nrecent + i) % RECENT];
        if (c->at + window >= now) n += fan_out(s, c->kind, c->ns, c->name, c->rv);
    }
    size_t behind = sync_index_behind(s->ix, nudge_behind, s);
    log_info("sync: leading: %zu pods nudged for the changes of the last %llu ms, %zu whose last "
             "nudge is older than an object they name",
             n, (unsigned long long)window, behind);
}

static void on_leader(void *ud, int leader)
{
    struct svc *s = ud;
    if (leader)
        replay(s);
    else
        nudge_drop_all(s->nu);
}

/* ---- the watches ---- */

static const char *annotation(const cJSON *meta, const char *key)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* --all-namespaces: a namespace's pod count went from before to now. */
static void ns_pods(struct svc *s, const char *ns, size_t before);

/* A PATCH said 404: the pod is gone (its DELETED event may not come when
 * the pod watch started over from 0). */
static void on_gone(void *ud, const char *ns, const char *pod)
{
    struct svc *s = ud;
    size_t before = sync_index_pods_in(s->ix, ns);
    sync_index_remove_pod(s->ix, ns, pod);
    if (s->nsw) ns_pods(s, ns, before);
}

static void on_pod(struct wctx *c, const struct kcwatch_event *ev)
{
    struct sync_index *ix = c->s->ix;
    size_t before = sync_index_pods_in(ix, ev->ns);
    if (ev->what == KCWATCH_DELETED) {
        sync_index_remove_pod(ix, ev->ns, ev->name);
        nudge_forget(c->s->nu, ev->ns, ev->name);
    } else {
        int bad =
            sync_index_set_pod(ix, ev->ns, ev->name, annotation(ev->meta, CFG_ANNOT_SYNC_OBJECTS));
        if (bad)
            log_info("sync: pod %s/%s: %d entries of %s are not configmap/NAME or secret/NAME: "
                     "left out",
                     ev->ns, ev->name, bad, CFG_ANNOT_SYNC_OBJECTS);
        const char *synced = annotation(ev->meta, CFG_ANNOT_SYNC);
        const char *at = synced ? strrchr(synced, '@') : NULL;
        sync_index_set_synced(ix, ev->ns, ev->name, at ? at + 1 : NULL);
    }
    if (c->s->nsw) ns_pods(c->s, ev->ns, before);
}

static void on_object(struct svc *s, enum sync_kind k, const struct kcwatch_event *ev)
{
    if (ev->what == KCWATCH_DELETED) {
        sync_index_object_deleted(s->ix, k, ev->ns, ev->name);
        return;
    }
    if (sync_index_object_seen(s->ix, k, ev->ns, ev->name, ev->rv) != SYNC_SEEN_CHANGED) return;
    s->changes++;
    remember(s, k, ev->ns, ev->name, ev->rv);
    if (!elect_is_leader(s->el)) return;
    size_t n = fan_out(s, k, ev->ns, ev->name, ev->rv);
    if (n)
        log_info("sync: %s %s/%s at %s: %zu pods to nudge", sync_kind_name(k), ev->ns, ev->name,
                 ev->rv, n);
}

static int watch_error(const struct kcwatch_event *ev)
{
    if (ev->what != KCWATCH_ERROR) return 0;
    log_info("sync: %s (failure %d, next try in %llu ms)", ev->error, ev->failures,
             (unsigned long long)ev->retry_ms);
    return 1;
}

static void on_event(void *ud, const struct kcwatch_event *ev)
{
    struct wctx *c = ud;
    if (watch_error(ev)) return;
    if (c->res == RES_POD)
        on_pod(c, ev);
    else
        on_object(c->s, c->res == RES_SECRET ? SYNC_SECRET : SYNC_CONFIGMAP, ev);
}

/* ---- --all-namespaces: a namespace's watches while it has pods ---- */

static void on_ns_event(void *ud, enum sync_kind k, const struct kcwatch_event *ev)
{
    if (!watch_error(ev)) on_object(ud, k, ev);
}

static size_t max_watched(const struct svc *s)
{
    return s->o->max_watched_ns ? s->o->max_watched_ns : SYNC_MAX_WATCHED_NS;
}

/* A namespace that has pods but no watches (refused at the limit) gets
 * them if a place is free now. */
static void offer(void *ud, const char *ns, size_t pods)
{
    struct svc *s = ud;
    enum nswatch_result r = nswatch_update(s->nsw, ns, pods);
    if (r == NSWATCH_FULL) s->refused = 1;
    if (r == NSWATCH_OPENED)
        log_info("sync: namespace %s: %zu pods: watching its configmaps and secrets now (%zu of "
                 "%zu namespaces)",
                 ns, pods, nswatch_count(s->nsw), max_watched(s));
}

static void ns_pods(struct svc *s, const char *ns, size_t before)
{
    size_t now = sync_index_pods_in(s->ix, ns);
    if ((before == 0) == (now == 0)) return; /* no namespace came or went */
    switch (nswatch_update(s->nsw, ns, now)) {
    case NSWATCH_OPENED:
        log_info("sync: namespace %s: watching its configmaps and secrets (%zu of %zu namespaces)",
                 ns, nswatch_count(s->nsw), max_watched(s));
        break;
    case NSWATCH_FULL:
        s->refused = 1;
        log_warn("sync: namespace %s is not served: %zu namespaces are watched, the limit "
                 "(--max-namespaces %zu); it will be once a watched one has no pod left",
                 ns, nswatch_count(s->nsw), max_watched(s));
        break;
    case NSWATCH_CLOSED: {
        size_t n = sync_index_forget_ns(s->ix, ns);
        log_info("sync: namespace %s: no pod left: its watches closed, %zu objects forgotten", ns,
                 n);
        if (!s->refused) break;
        s->refused = 0;
        sync_index_each_ns(s->ix, offer, s);
        break;
    }
    case NSWATCH_SAME: break;
    }
}

/* ---- start and stop ---- */

static void stop(struct svc *s)
{
    for (size_t i = 0; i < s->o->nns; i++)
        for (int r = 0; r < NRES; r++) kcwatch_close(s->w[i][r].w);
    kcwatch_close(s->allpods.w);
    nswatch_free(s->nsw);
    s->nsw = NULL;
    elect_close(s->el);
    nudge_close(s->nu);
    if (s->k) kube_destroy(s->k);
    s->k = NULL;
    if (s->hc) httpc_close(s->hc, NULL, NULL);
    s->hc = NULL;
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    uv_close((uv_handle_t *)&s->sigint, NULL);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct svc *s = h->data;
    log_info("sync: signal %d: stopping", signum);
    stop(s);
}

static int start_watches(struct svc *s, char *err, size_t errlen)
{
    for (size_t i = 0; i < s->o->nns; i++)
        for (int r = 0; r < NRES; r++) {
            struct wctx *c = &s->w[i][r];
            struct kcwatch_opts wo = {.resource = RES_NAME[r],
                                      .ns = s->o->namespaces[i],
                                      .watch_timeout_s = s->o->watch_timeout_s,
                                      .retry_base_ms = s->o->watch_retry_base_ms,
                                      .retry_cap_ms = s->o->watch_retry_cap_ms};
            *c = (struct wctx){.s = s, .res = (enum res)r};
            if (kcwatch_start(s->k, &wo, on_event, c, &c->w) < 0) {
                snprintf(err, errlen, "cannot watch %s in namespace \"%s\"", RES_NAME[r],
                         s->o->namespaces[i]);
                return -1;
            }
        }
    return 0;
}

/* --all-namespaces: the pod watch across the cluster; the namespaces'
 * watches come with their pods. */
static int start_all(struct svc *s, char *err, size_t errlen)
{
    struct nswatch_opts no = {.max = max_watched(s),
                              .watch_timeout_s = s->o->watch_timeout_s,
                              .retry_base_ms = s->o->watch_retry_base_ms,
                              .retry_cap_ms = s->o->watch_retry_cap_ms};
    struct kcwatch_opts wo = {.resource = "pods",
                              .ns = NULL,
                              .watch_timeout_s = s->o->watch_timeout_s,
                              .retry_base_ms = s->o->watch_retry_base_ms,
                              .retry_cap_ms = s->o->watch_retry_cap_ms};
    s->nsw = nswatch_new(s->k, &no, on_ns_event, s);
    s->allpods = (struct wctx){.s = s, .res = RES_POD};
    if (kcwatch_start(s->k, &wo, on_event, &s->allpods, &s->allpods.w) < 0) {
        snprintf(err, errlen, "cannot watch pods in all namespaces");
        return -1;
    }
    return 0;
}

static int setup(struct svc *s, char *err, size_t errlen)
{
    const struct sync_opts *o = s->o;
    char host[128] = "sync", idbuf[200];
    const char *id = o->identity ? o->identity : getenv("POD_NAME");
    if (!id || !id[0]) {
        gethostname(host, sizeof host - 1);
        snprintf(idbuf, sizeof idbuf, "%s-%ld", host, (long)getpid());
        id = idbuf;
    }
    /* the client's pod name is only this replica's name (it reads no pod of its own) */
    struct kube_config kc = {.api = o->api,
                             .token_file = o->token_file,
                             .ca_file = o->ca_file,
                             .namespace_ = o->namespace_,
                             .pod_name = id};
    if (httpc_create(&s->loop, &s->hc) < 0) {
        snprintf(err, errlen, "cannot start the HTTP client");
        return -1;
    }
    if (kube_create(&s->loop, s->hc, &kc, &s->k, err, errlen) < 0) return -1;
    s->ix = sync_index_new();
    struct nudge_opts no = {.qps = o->qps, .burst = o->burst, .coalesce_ms = o->coalesce_ms};
    s->nu = nudge_new(&s->loop, s->k, &no, on_gone, s);
    if ((o->all_namespaces ? start_all(s, err, errlen) : start_watches(s, err, errlen)) < 0)
        return -1;
    struct elect_opts eo = {.lease = o->lease,
                            .identity = id,
                            .duration_ms = o->lease_ms,
                            .retry_ms = o->lease_retry_ms};
    s->el = elect_start(&s->loop, s->k, &eo, on_leader, s);
    if (o->all_namespaces)
        log_info("sync: serving all namespaces (at most %zu watched at once) as %s (Lease %s/%s)",
                 max_watched(s), id, kube_namespace(s->k), o->lease);
    else
        log_info("sync: serving %zu namespace(s) as %s (Lease %s/%s)", o->nns, id,
                 kube_namespace(s->k), o->lease);
    return 0;
}

int sync_run(const struct sync_opts *o)
{
    struct svc *s = calloc(1, sizeof *s);
    char err[1024] = "";
    if (!s || !(s->recent = calloc(RECENT, sizeof *s->recent))) ra_oom();
    s->o = o;
    uv_loop_init(&s->loop);
    uv_signal_init(&s->loop, &s->sigterm);
    uv_signal_init(&s->loop, &s->sigint);
    s->sigterm.data = s->sigint.data = s;
    uv_signal_start(&s->sigterm, on_signal, SIGTERM);
    uv_signal_start(&s->sigint, on_signal, SIGINT);
    int rc = setup(s, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "reload-agent sync: %s\n", err);
        stop(s);
    }
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
    sync_index_free(s->ix);
    free(s->recent);
    free(s);
    return rc < 0 ? 1 : 0;
}
