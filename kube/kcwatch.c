/*
 * kcwatch.c - a collection watched from resourceVersion 0, metadata only
 * (kube/kcwatch.h): one streamed request at a time through httpc's on_data,
 * cut into lines by base/lines.h, event lines parsed by kwatch's parser,
 * kwatch's backoff and deadlines.
 */
#include "kube/kcwatch.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/backoff.h"
#include "base/lines.h"
#include "base/log.h"
#include "base/text.h"
#include "kube/k8sname.h"
#include "kube/kwatch.h"
#include "net/httpc.h"

#define CLIENT_MARGIN_S 60
#define MAX_FAILURES 1000

struct kcwatch {
    struct kube *k;
    kcwatch_cb cb;
    void *ud;
    char *resource, *ns; /* ns NULL: cluster scope */
    const char *where;   /* ns, or "all namespaces" (the messages) */
    int table;           /* Secrets: a Table without objects */
    uint64_t timeout_s;
    struct backoff policy;
    uv_timer_t timer; /* the backoff, or the head and line deadlines */
    struct httpc_xfer *xfer;
    int fails, last_gone, closing, in_data, from_zero;
    int no_answer;             /* the failure being reported got no HTTP answer */
    int woken;                 /* an answer cut a wait short since the count started */
    struct kube_waiter waiter; /* such a wait, for the next answer to any request */
    unsigned token_gen;
    uint64_t started;
    int got_head, stream_failed, stream_gone;
    char why[1024];
    char watch_rv[128]; /* "" = start from 0 */
    struct lines lines; /* the partial event line */
    struct kcwatch_stats st;
};

static void attempt(struct kcwatch *w);
static void on_timer(uv_timer_t *t) { attempt(t->data); }

/* The API server answered another request while this watch waits out a
 * step after a failure without an answer (refused, no response): it is
 * back, so the watch tries again within the first step (a draw in
 * [0, base): many watches do not come back at once). Once per count of
 * failures: a watch whose own requests keep getting no answer while
 * others get theirs goes on with its backoff. */
static void on_answer(struct kube_waiter *kw)
{
    struct kcwatch *w = (struct kcwatch *)((char *)kw - offsetof(struct kcwatch, waiter));
    if (w->closing || w->xfer || !uv_is_active((uv_handle_t *)&w->timer)) return;
    uint64_t ms = ra_rng_below(ra_rng_process(), w->policy.base_ms);
    if (uv_timer_get_due_in(&w->timer) <= ms) return;
    w->woken = 1;
    w->st.woken++;
    uv_timer_start(&w->timer, on_timer, ms, 0);
}

static void fail(struct kcwatch *w, int gone, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(struct kcwatch *w, int gone, const char *fmt, ...)
{
    char raw[1536], msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    ra_one_line(msg, sizeof msg, raw);
    if (w->fails < MAX_FAILURES) w->fails++;
    uint64_t ms = backoff_next(&w->policy, backoff_watch_step(w->fails, gone, &w->last_gone),
                               ra_rng_process());
    w->st.errors++;
    struct kcwatch_event ev = {
        .what = KCWATCH_ERROR, .error = msg, .gone = gone, .failures = w->fails, .retry_ms = ms};
    w->cb(w->ud, &ev);
    if (w->closing) return;
    uv_timer_start(&w->timer, on_timer, ms, 0);
    if (w->no_answer && !w->woken) kube__wait_answer(w->k, &w->waiter);
    w->no_answer = 0;
}

static int stream_fail(struct kcwatch *w, int restart, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int stream_fail(struct kcwatch *w, int restart, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->why, sizeof w->why, fmt, ap);
    va_end(ap);
    w->stream_failed = 1;
    if (restart) w->watch_rv[0] = '\0';
    return 1;
}

/* One object event: handed on; a resume point unless the stream started
 * from 0 (its first events are the state in no order). */
static int on_object(struct kcwatch *w, const struct kwatch__event *ev, const cJSON *meta)
{
    static const enum kcwatch_what WHAT[] = {KCWATCH_ADDED, KCWATCH_MODIFIED, KCWATCH_DELETED};
    if (!ev->name[0] || !k8s_is_dns1123_subdomain(ev->name))
        return stream_fail(w, 1, "watch %s in %s: an event names no valid object", w->resource,
                           w->where);
    if (!w->ns && !k8s_is_dns1123_label(ev->ns))
        return stream_fail(w, 1, "watch %s in %s: an event names no valid namespace", w->resource,
                           w->where);
    w->st.events++;
    if (!w->from_zero) snprintf(w->watch_rv, sizeof w->watch_rv, "%s", ev->rv);
    struct kcwatch_event e = {.what = WHAT[ev->type],
                              .name = ev->name,
                              .ns = w->ns ? w->ns : ev->ns,
                              .rv = ev->rv,
                              .meta = meta,
                              .initial = w->from_zero};
    w->cb(w->ud, &e);
    return w->closing;
}

static int on_line(void *ud, const char *line, size_t len)
{
    struct kcwatch *w = ud;
    struct kwatch__event ev;
    char err[512];
    cJSON *meta = NULL;
    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ')) len--;
    if (len == 0) return 0;
    if (kwatch__parse_event_meta(line, len, w->table, &ev, &meta, err, sizeof err) < 0)
        return stream_fail(w, 1, "watch %s in %s: %s", w->resource, w->where, err);
    if (ev.type == KWATCH__BOOKMARK) {
        w->st.bookmarks++;
        snprintf(w->watch_rv, sizeof w->watch_rv, "%s", ev.rv);
        w->from_zero = 0; /* a resume point: later events are news */
        return 0;
    }
    if (ev.type == KWATCH__ERROR) {
        if (ev.code == 410) {
            w->st.gone++;
            w->stream_gone = 1;
            return stream_fail(w, 1, "watch %s in %s: 410 Gone (%s): starting again from 0",
                               w->resource, w->where, ev.message);
        }
        return stream_fail(w, 0, "watch %s in %s: the server sent an error (code %ld): %s",
                           w->resource, w->where, ev.code, ev.message);
    }
    int stop = on_object(w, &ev, meta);
    cJSON_Delete(meta);
    return stop;
}

static int on_data_lines(struct kcwatch *w, const char *data, size_t n)
{
    enum lines_result r = lines_feed(&w->lines, data, n, on_line, w);
    if (r != LINES_LONG) return r == LINES_STOP;
    return stream_fail(w, 1, "watch %s in %s: an event exceeds %d bytes", w->resource, w->where,
                       KWATCH_MAX_EVENT);
}

static void on_stall(uv_timer_t *t);

static int on_data(void *ud, const char *data, size_t n)
{
    struct kcwatch *w = ud;
    w->in_data = 1;
    if (!w->got_head) {
        w->got_head = 1;
        w->st.streaming = 1;
        uv_timer_stop(&w->timer);
    }
    int stop = on_data_lines(w, data, n);
    w->in_data = 0;
    if (stop || w->closing) return 1;
    if (w->lines.len == 0)
        uv_timer_stop(&w->timer);
    else if (!uv_is_active((uv_handle_t *)&w->timer))
        uv_timer_start(&w->timer, on_stall, KWATCH_LINE_TIMEOUT_MS, 0);
    return 0;
}

static uint64_t min_stream_ms(const struct kcwatch *w)
{
    return w->timeout_s * 1000 < KWATCH_MIN_STREAM_MS ? w->timeout_s * 1000 : KWATCH_MIN_STREAM_MS;
}

static uint64_t stream_over(struct kcwatch *w)
{
    uint64_t lasted = uv_now(kube__loop(w->k)) - w->started;
    w->xfer = NULL;
    w->st.streaming = 0;
    if (!w->closing) uv_timer_stop(&w->timer);
    lines_wipe(&w->lines);
    if (w->got_head && lasted >= min_stream_ms(w)) w->fails = w->last_gone = w->woken = 0;
    return lasted;
}

static void on_stall(uv_timer_t *t)
{
    struct kcwatch *w = t->data;
    if (!w->xfer) return;
    httpc_cancel(w->xfer);
    int got_head = w->got_head;
    stream_over(w);
    kube__count_response(w->k, 0);
    w->no_answer = !got_head;
    if (!got_head)
        fail(w, 0, "watch %s in %s: no 2xx response head within %d s", w->resource, w->where,
             KWATCH_HEAD_TIMEOUT_MS / 1000);
    else
        fail(w, 0, "watch %s in %s: an event line did not complete within %d s", w->resource,
             w->where, KWATCH_LINE_TIMEOUT_MS / 1000);
}

/* The collection's path: /api/v1/namespaces/NS/RES, or /api/v1/RES. */
static void collection_path(const struct kcwatch *w, char *out, size_t n)
{
    if (w->ns)
        snprintf(out, n, "/api/v1/namespaces/%s/%s", w->ns, w->resource);
    else
        snprintf(out, n, "/api/v1/%s", w->resource);
}

/* A reply that is not a stream: the token, the Status, the RBAC hint. */
static void fail_reply(struct kcwatch *w, const struct httpc_result *res)
{
    if (!res->ok) {
        w->no_answer = !w->got_head;
        fail(w, 0, "watch %s in %s: %s", w->resource, w->where, res->error);
        return;
    }
    if (res->status == 401) kube__token_rejected(w->k, w->token_gen);
    if (res->status == 410) {
        w->st.gone++;
        w->watch_rv[0] = '\0';
    }
    char path[512], err[1024];
    collection_path(w, path, sizeof path);
    struct kube_req req = {
        .verb = "watch", .resource = w->resource, .group = "", .method = "GET", .path = path};
    kube__http_error(w->k, &req, res->status, res->body, res->body_len, err, sizeof err);
    fail(w, res->status == 410, "watch %s in %s: %s", w->resource, w->where, err);
}

static void on_watch_done(void *ud, const struct httpc_result *res)
{
    struct kcwatch *w = ud;
    uint64_t lasted = stream_over(w);
    kube__count_response(w->k, res->ok ? res->status : 0);
    if (w->closing) return;
    if (w->stream_failed) {
        fail(w, w->stream_gone, "%s", w->why);
    } else if (res->ok && res->status == 200) {
        if (w->from_zero) w->watch_rv[0] = '\0'; /* no bookmark came: from 0 again */
        if (lasted >= min_stream_ms(w))
            attempt(w);
        else
            fail(w, 0, "watch %s in %s: the server ended the stream after %llu ms", w->resource,
                 w->where, (unsigned long long)lasted);
    } else {
        fail_reply(w, res);
    }
}

static void attempt(struct kcwatch *w)
{
    kube__unwait(&w->waiter);
    w->from_zero = !w->watch_rv[0];
    char path[512];
    collection_path(w, path, sizeof path);
    char *url =
        ra_asprintf("%s%s?watch=1&allowWatchBookmarks=true"
                    "&resourceVersion=%s&timeoutSeconds=%llu%s",
                    kube_base_url(w->k), path, w->from_zero ? "0" : w->watch_rv,
                    (unsigned long long)w->timeout_s, w->table ? "&includeObject=None" : "");
    char accept[128];
    snprintf(accept, sizeof accept, "Accept: %s",
             w->table ? KWATCH_ACCEPT_TABLE : KWATCH_ACCEPT_WATCH);
    const char *headers[] = {accept, "User-Agent: reload-agent-sync"};
    struct httpc_req req = {.method = "GET",
                            .url = url,
                            .headers = headers,
                            .nheaders = 2,
                            .timeout_ms = (w->timeout_s + CLIENT_MARGIN_S) * 1000,
                            .ca_file = kube__ca_path(w->k),
                            .bearer_token = kube__token(w->k, &w->token_gen),
                            .on_data = on_data,
                            .data_ud = w};
    w->started = uv_now(kube__loop(w->k));
    w->got_head = w->stream_failed = w->stream_gone = 0;
    w->st.watches++;
    if (w->from_zero) w->st.from_zero++;
    int r = httpc_request(kube__httpc(w->k), &req, on_watch_done, w, &w->xfer);
    free(url);
    if (r < 0) {
        w->xfer = NULL;
        fail(w, 0, "watch %s in %s: cannot start the request: %s", w->resource, w->where,
             strerror(-r));
        return;
    }
    uv_timer_start(&w->timer, on_stall, KWATCH_HEAD_TIMEOUT_MS, 0);
}

int kcwatch_start(struct kube *k, const struct kcwatch_opts *o, kcwatch_cb cb, void *ud,
                  struct kcwatch **out)
{
    static const char *const OK[] = {"configmaps", "secrets", "pods"};
    size_t i;
    if (!k || !o || !cb || !o->resource || (o->ns && !k8s_is_dns1123_label(o->ns))) return -EINVAL;
    for (i = 0; i < 3 && strcmp(o->resource, OK[i]) != 0; i++) continue;
    if (i == 3 || (!o->ns && i == 1)) return -EINVAL; /* no Secrets across namespaces */
    struct kcwatch *w = calloc(1, sizeof *w);
    if (!w) ra_oom();
    w->k = k;
    w->cb = cb;
    w->ud = ud;
    w->resource = ra_strdup(o->resource);
    w->ns = o->ns ? ra_strdup(o->ns) : NULL;
    w->lines.max = KWATCH_MAX_EVENT;
    w->where = w->ns ? w->ns : "all namespaces";
    w->table = i == 1;
    w->timeout_s =
        o->watch_timeout_s ? o->watch_timeout_s : 1800 + ra_rng_below(ra_rng_process(), 1801);
    w->policy = (struct backoff){o->retry_base_ms ? o->retry_base_ms : KWATCH_RETRY_BASE_MS,
                                 o->retry_cap_ms ? o->retry_cap_ms : KWATCH_RETRY_CAP_MS,
                                 BACKOFF_JITTER_SPREAD};
    uv_timer_init(kube__loop(k), &w->timer);
    w->timer.data = w;
    w->waiter.cb = on_answer;
    uv_timer_start(&w->timer, on_timer, 0, 0);
    *out = w;
    return 0;
}

void kcwatch_get_stats(const struct kcwatch *w, struct kcwatch_stats *s) { *s = w->st; }

static void on_closed(uv_handle_t *h)
{
    struct kcwatch *w = h->data;
    lines_free(&w->lines);
    free(w->resource);
    free(w->ns);
    free(w);
}

void kcwatch_close(struct kcwatch *w)
{
    if (!w || w->closing) return;
    w->closing = 1;
    kube__unwait(&w->waiter);
    if (w->xfer && !w->in_data) {
        httpc_cancel(w->xfer);
        w->xfer = NULL;
    }
    uv_close((uv_handle_t *)&w->timer, on_closed);
}
