/*
 * nudge.c - the sync service's queue of pod PATCHes (sync/nudge.h): one
 * entry per pod, a FIFO of the queued ones, one timer for the coalescing
 * window, the floor, the token bucket and the retries.
 */
#include "sync/nudge.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "config/config.h"

#define RETRY_BASE_MS 1000
#define RETRY_CAP_MS 30000

struct entry {
    struct entry *hnext, *qnext; /* hash chain; queue */
    char *ns, *pod, *value;
    uint64_t due, last_sent;
    int queued, inflight, again, tries;
};

struct nudger {
    uv_loop_t *loop;
    struct kube *k;
    struct nudge_opts o;
    void (*gone)(void *, const char *, const char *);
    void *ud;
    uv_timer_t timer;
    struct entry **b;
    size_t nb, n;
    struct entry *qhead, *qtail;
    double tokens;
    uint64_t refilled;
    unsigned inflight;
    int closing;
    struct nudge_stats st;
};

struct req {
    struct nudger *n;
    struct entry *e;
};

static uint64_t now_ms(const struct nudger *n) { return uv_now(n->loop); }

static size_t hash_of(const char *ns, const char *pod, size_t nb)
{
    uint64_t h = 14695981039346656037ULL;
    for (const char *s = ns; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    h = (h ^ '/') * 1099511628211ULL;
    for (const char *s = pod; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (size_t)(h % nb);
}

static struct entry *entry_get(struct nudger *n, const char *ns, const char *pod)
{
    if (n->nb) {
        for (struct entry *e = n->b[hash_of(ns, pod, n->nb)]; e; e = e->hnext)
            if (!strcmp(e->ns, ns) && !strcmp(e->pod, pod)) return e;
    }
    if (n->n + 1 > n->nb) { /* grow */
        size_t nb = n->nb ? n->nb * 2 : 256;
        struct entry **b = calloc(nb, sizeof *b);
        if (!b) ra_oom();
        for (size_t i = 0; i < n->nb; i++)
            for (struct entry *e = n->b[i], *next; e; e = next) {
                next = e->hnext;
                size_t j = hash_of(e->ns, e->pod, nb);
                e->hnext = b[j];
                b[j] = e;
            }
        free(n->b);
        n->b = b;
        n->nb = nb;
    }
    struct entry *e = calloc(1, sizeof *e);
    if (!e) ra_oom();
    e->ns = ra_strdup(ns);
    e->pod = ra_strdup(pod);
    size_t j = hash_of(ns, pod, n->nb);
    e->hnext = n->b[j];
    n->b[j] = e;
    n->n++;
    return e;
}

static void enqueue(struct nudger *n, struct entry *e, uint64_t due)
{
    e->due = due;
    e->queued = 1;
    e->qnext = NULL;
    if (n->qtail)
        n->qtail->qnext = e;
    else
        n->qhead = e;
    n->qtail = e;
    n->st.pending++;
}

static void schedule(struct nudger *n);

static void on_reply(void *ud, const struct kube_resp *r)
{
    struct req *q = ud;
    struct nudger *n = q->n;
    struct entry *e = q->e;
    free(q);
    n->inflight--;
    e->inflight = 0;
    if (r->ok && r->status < 300) {
        n->st.ok++;
        e->tries = 0;
    } else if (r->ok && r->status == 404) {
        n->st.dropped++;
        e->again = 0;
        log_info("sync: pod %s/%s is gone (404): forgotten", e->ns, e->pod);
        if (n->gone) n->gone(n->ud, e->ns, e->pod);
    } else {
        n->st.failed++;
        log_info("sync: cannot patch pod %s/%s: %s", e->ns, e->pod,
                 r->error ? r->error : "no answer");
        if (++e->tries < NUDGE_MAX_TRIES) {
            uint64_t wait = RETRY_BASE_MS << (e->tries - 1);
            enqueue(n, e, now_ms(n) + (wait > RETRY_CAP_MS ? RETRY_CAP_MS : wait));
        } else {
            n->st.dropped++;
            e->tries = 0;
            log_info("sync: gave up on pod %s/%s after %d tries", e->ns, e->pod, NUDGE_MAX_TRIES);
        }
    }
    if (e->again && !e->queued) { /* a change came while the PATCH was in flight */
        uint64_t floor = e->last_sent + NUDGE_FLOOR_MS;
        enqueue(n, e, floor > now_ms(n) ? floor : now_ms(n));
    }
    e->again = 0;
    schedule(n);
}

static void on_cancel(void *ud) { free(ud); }

static void send_patch(struct nudger *n, struct entry *e)
{
    cJSON *body = cJSON_CreateObject();
    cJSON *an = cJSON_AddObjectToObject(cJSON_AddObjectToObject(body, "metadata"), "annotations");
    cJSON_AddStringToObject(an, CFG_ANNOT_SYNC, e->value);
    char *text = cJSON_PrintUnformatted(body);
    cJSON_Delete(body);
    if (!text) ra_oom();
    char *path = ra_asprintf("/api/v1/namespaces/%s/pods/%s", e->ns, e->pod);
    struct req *q = calloc(1, sizeof *q);
    if (!q) ra_oom();
    q->n = n;
    q->e = e;
    struct kube_req req = {.verb = "patch",
                           .resource = "pods",
                           .group = "",
                           .method = "PATCH",
                           .path = path,
                           .content_type = "application/merge-patch+json",
                           .body = text,
                           .body_len = strlen(text),
                           .on_cancel = on_cancel};
    e->inflight = 1;
    e->last_sent = now_ms(n);
    n->inflight++;
    n->st.sent++;
    if (kube_request(n->k, &req, on_reply, q) < 0) {
        free(q);
        e->inflight = 0;
        n->inflight--;
        n->st.failed++;
    }
    free(path);
    free(text);
}

/* Sends what is due while tokens and room last; the timer for the rest. */
static void pump(struct nudger *n)
{
    uint64_t now = now_ms(n);
    n->tokens += (double)(now - n->refilled) * n->o.qps / 1000.0;
    if (n->tokens > n->o.burst) n->tokens = n->o.burst;
    n->refilled = now;
    struct entry **pp = &n->qhead, *prev = NULL;
    while (*pp && n->tokens >= 1.0 && n->inflight < NUDGE_MAX_INFLIGHT) {
        struct entry *e = *pp;
        if (e->due > now || e->inflight) {
            prev = e;
            pp = &e->qnext;
            continue;
        }
        *pp = e->qnext;
        if (n->qtail == e) n->qtail = prev;
        e->queued = 0;
        n->st.pending--;
        n->tokens -= 1.0;
        send_patch(n, e);
    }
}

static void on_timer(uv_timer_t *t)
{
    pump(t->data);
    schedule(t->data);
}

/* The timer for the next entry due, or the next token. */
static void schedule(struct nudger *n)
{
    if (n->closing || !n->qhead) return;
    uint64_t now = now_ms(n), next = UINT64_MAX;
    for (struct entry *e = n->qhead; e; e = e->qnext)
        if (!e->inflight && e->due < next) next = e->due;
    if (next == UINT64_MAX) return; /* all in flight: their replies schedule */
    uint64_t wait = next > now ? next - now : 0;
    if (n->tokens < 1.0) {
        uint64_t t = (uint64_t)((1.0 - n->tokens) * 1000.0 / n->o.qps) + 1;
        if (t > wait) wait = t;
    }
    if (n->inflight >= NUDGE_MAX_INFLIGHT) return; /* a reply schedules */
    uv_timer_start(&n->timer, on_timer, wait, 0);
}

struct nudger *nudge_new(uv_loop_t *loop, struct kube *k, const struct nudge_opts *o,
                         void (*gone)(void *ud, const char *ns, const char *pod), void *ud)
{
    struct nudger *n = calloc(1, sizeof *n);
    if (!n) ra_oom();
    n->loop = loop;
    n->k = k;
    n->o = *o;
    n->gone = gone;
    n->ud = ud;
    n->tokens = o->burst;
    n->refilled = uv_now(loop);
    uv_timer_init(loop, &n->timer);
    n->timer.data = n;
    return n;
}

void nudge_pod(struct nudger *n, const char *ns, const char *pod, const char *value)
{
    struct entry *e = entry_get(n, ns, pod);
    n->st.queued++;
    free(e->value);
    e->value = ra_strdup(value);
    e->tries = 0;
    if (e->queued) {
        n->st.coalesced++;
        return;
    }
    if (e->inflight) {
        e->again = 1;
        return;
    }
    uint64_t now = now_ms(n), due = now + n->o.coalesce_ms;
    if (e->last_sent && e->last_sent + NUDGE_FLOOR_MS > due) due = e->last_sent + NUDGE_FLOOR_MS;
    enqueue(n, e, due);
    schedule(n);
}

void nudge_forget(struct nudger *n, const char *ns, const char *pod)
{
    if (!n->nb) return;
    for (struct entry **pp = &n->b[hash_of(ns, pod, n->nb)]; *pp; pp = &(*pp)->hnext) {
        struct entry *e = *pp;
        if (strcmp(e->ns, ns) != 0 || strcmp(e->pod, pod) != 0) continue;
        if (e->queued || e->inflight) return;
        *pp = e->hnext;
        n->n--;
        free(e->ns);
        free(e->pod);
        free(e->value);
        free(e);
        return;
    }
}

void nudge_drop_all(struct nudger *n)
{
    for (struct entry *e = n->qhead; e; e = e->qnext) e->queued = 0;
    n->qhead = n->qtail = NULL;
    n->st.pending = 0;
    uv_timer_stop(&n->timer);
}

void nudge_get_stats(const struct nudger *n, struct nudge_stats *s) { *s = n->st; }

static void on_closed(uv_handle_t *h)
{
    struct nudger *n = h->data;
    for (size_t i = 0; i < n->nb; i++)
        for (struct entry *e = n->b[i], *next; e; e = next) {
            next = e->hnext;
            free(e->ns);
            free(e->pod);
            free(e->value);
            free(e);
        }
    free(n->b);
    free(n);
}

void nudge_close(struct nudger *n)
{
    if (!n || n->closing) return;
    n->closing = 1;
    uv_close((uv_handle_t *)&n->timer, on_closed);
}
