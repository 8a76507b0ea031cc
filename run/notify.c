/*
 * notify.c - the notifier (see notify.h): a ring of rendered bodies, the
 * head sent through its own httpc client, retried on its own timer with
 * the one backoff, and a drain bounded by --notify-timeout at close.
 */
#include "run/notify.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/metrics.h"
#include "base/backoff.h"
#include "base/file.h"
#include "base/log.h"
#include "base/redact.h"
#include "net/httpc.h"

struct notify_item {
    char *body;
    size_t len;
    int attempts;  /* sends so far */
    char what[64]; /* "reload failure", for the log */
};

struct notify {
    uv_loop_t *loop;
    struct httpc *hc;
    char *url, *url_file, *ca_file;
    enum notify_format format;
    uint64_t timeout_ms;
    size_t queue_max;
    struct notify_item *q; /* a ring of queue_max */
    size_t head, count;
    int sending;
    int retry_armed;
    uv_timer_t retry;
    uv_timer_t drain;
    int open_handles;
    int closing;
    int finishing;
    struct notify_send *cur; /* the send in flight */
    void (*done)(void *);
    void *done_ud;
};

struct notify_send {
    struct notify *n;
    char *url;
};

static void kick(struct notify *n);
static void finish(struct notify *n);

size_t notify_pending(const struct notify *n) { return n ? n->count : 0; }

int notify_create(uv_loop_t *loop, const struct notify_opts *o, struct notify **out)
{
    struct notify *n = calloc(1, sizeof *n);
    if (!n) return -ENOMEM;
    n->loop = loop;
    n->url = ra_strdup(o->url && *o->url ? o->url : NULL);
    n->url_file = ra_strdup(o->url_file && *o->url_file ? o->url_file : NULL);
    n->ca_file = ra_strdup(o->ca_file && *o->ca_file ? o->ca_file : NULL);
    n->format = o->format;
    n->timeout_ms = o->timeout_ms ? o->timeout_ms : 10000;
    n->queue_max = o->queue_max ? o->queue_max : 1;
    n->q = calloc(n->queue_max, sizeof *n->q);
    int rc = n->q ? httpc_create(loop, &n->hc) : -ENOMEM;
    if (rc < 0) {
        free(n->q);
        free(n->url);
        free(n->url_file);
        free(n->ca_file);
        free(n);
        return rc;
    }
    uv_timer_init(loop, &n->retry);
    uv_timer_init(loop, &n->drain);
    n->retry.data = n->drain.data = n;
    n->open_handles = 2;
    metrics_notify_enabled();
    *out = n;
    return 0;
}

void notify_post(struct notify *n, const struct notify_event *ev)
{
    if (!n || n->closing) return;
    char what[64];
    snprintf(what, sizeof what, "%s %s", ev->event && *ev->event ? ev->event : "reload",
             notify_result(ev));
    if (n->count == n->queue_max) {
        metrics_notification(METRICS_NOTIFY_DROPPED);
        log_warn("notification (%s) dropped: %zu already waiting (--notify-queue)", what, n->count);
        return;
    }
    struct notify_item *it = &n->q[(n->head + n->count) % n->queue_max];
    it->body = notifyfmt_render(n->format, ev, &it->len);
    if (!it->body) return;
    it->attempts = 0;
    memcpy(it->what, what, sizeof what);
    n->count++;
    kick(n);
}

/* The receiver's URL: --notify-url, or the first line of --notify-url-file
 * read now. Returns a malloc'd URL, or NULL with the reason in why (which
 * never quotes the file's content). */
static char *current_url(struct notify *n, char *why, size_t wn)
{
    char *buf = NULL, err[512];
    size_t len = 0;
    if (!n->url_file) return ra_strdup(n->url);
    if (ra_read_file(n->url_file, NOTIFY_URL_MAX, &buf, &len, err, sizeof err) < 0) {
        snprintf(why, wn, "--notify-url-file: %s", err);
        return NULL;
    }
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
        buf[--len] = '\0';
    if (strncmp(buf, "http://", 7) != 0 && strncmp(buf, "https://", 8) != 0) {
        snprintf(why, wn, "--notify-url-file %s does not hold an http:// or https:// URL",
                 n->url_file);
        free(buf);
        return NULL;
    }
    return buf;
}

/* The head ended: dropped from the ring, counted as r. */
static void pop(struct notify *n, enum metrics_notify_result r)
{
    struct notify_item *it = &n->q[n->head];
    free(it->body);
    it->body = NULL;
    n->head = (n->head + 1) % n->queue_max;
    n->count--;
    metrics_notification(r);
}

static void on_retry(uv_timer_t *t)
{
    struct notify *n = t->data;
    n->retry_armed = 0;
    kick(n);
}

/* A send of the head failed: retry after the backoff (at least what a
 * Retry-After asked, capped), or give up. */
static void failed(struct notify *n, int retryable, int64_t retry_after_s, const char *why)
{
    struct notify_item *it = &n->q[n->head];
    if (retryable && it->attempts < NOTIFY_ATTEMPTS && !n->closing) {
        struct backoff p = {NOTIFY_RETRY_BASE_MS, NOTIFY_RETRY_CAP_MS, BACKOFF_JITTER_EQUAL};
        uint64_t d = backoff_next(&p, it->attempts, ra_rng_process());
        if (retry_after_s > 0 && (uint64_t)retry_after_s * 1000 > d)
            d = (uint64_t)retry_after_s * 1000 < 60000 ? (uint64_t)retry_after_s * 1000 : 60000;
        log_info("notification (%s) not delivered: %s; retrying in %llums", it->what, why,
                 (unsigned long long)d);
        metrics_notify_retry();
        n->retry_armed = 1;
        uv_timer_start(&n->retry, on_retry, d, 0);
        return;
    }
    log_warn("notification (%s) failed after %d attempt%s: %s", it->what, it->attempts,
             it->attempts == 1 ? "" : "s", why);
    pop(n, METRICS_NOTIFY_FAILED);
    kick(n);
}

static void on_sent(void *ud, const struct httpc_result *res)
{
    struct notify_send *s = ud;
    struct notify *n = s->n;
    char why[1200], origin[512];
    n->sending = 0;
    n->cur = NULL;
    redact_url_origin(s->url, origin, sizeof origin);
    if (res->ok && res->status >= 200 && res->status < 300) {
        log_debug("notification (%s) sent to %s: %ld", n->q[n->head].what, origin, res->status);
        pop(n, METRICS_NOTIFY_SENT);
        kick(n);
    } else if (res->ok) {
        snprintf(why, sizeof why, "%s answered %ld", origin, res->status);
        failed(n, res->status == 429 || res->status >= 500, res->retry_after_s, why);
    } else {
        char e[600];
        redact_text_origin(res->error ? res->error : "no response", s->url, e, sizeof e);
        snprintf(why, sizeof why, "%s: %s", origin, e);
        failed(n, 1, -1, why);
    }
    free(s->url);
    free(s);
}

static void send_head(struct notify *n)
{
    static const char *const hdr[] = {"Content-Type: application/json"};
    struct notify_item *it = &n->q[n->head];
    char why[700];
    it->attempts++;
    struct notify_send *s = calloc(1, sizeof *s);
    if (!s) ra_oom();
    s->n = n;
    s->url = current_url(n, why, sizeof why);
    if (!s->url) {
        free(s);
        failed(n, 1, -1, why);
        return;
    }
    struct httpc_req req = {.method = "POST",
                            .url = s->url,
                            .headers = hdr,
                            .nheaders = 1,
                            .body = it->body,
                            .body_len = it->len,
                            .timeout_ms = n->timeout_ms,
                            .ca_file = n->ca_file,
                            .max_body = 4096};
    int rc = httpc_request(n->hc, &req, on_sent, s, NULL);
    if (rc < 0) {
        char origin[512];
        redact_url_origin(s->url, origin, sizeof origin);
        snprintf(why, sizeof why, "%s: the request could not start (%s)", origin, strerror(-rc));
        free(s->url);
        free(s);
        failed(n, 0, -1, why);
        return;
    }
    n->sending = 1;
    n->cur = s;
}

/* Sends the head unless one is in flight or waiting for its retry. */
static void kick(struct notify *n)
{
    if (n->finishing || n->sending || n->retry_armed) return;
    if (n->count == 0) {
        if (n->closing) finish(n);
        return;
    }
    send_head(n);
}

static void handle_gone(struct notify *n)
{
    if (--n->open_handles > 0) return;
    free(n->q);
    free(n->url);
    free(n->url_file);
    free(n->ca_file);
    void (*done)(void *) = n->done;
    void *ud = n->done_ud;
    free(n);
    if (done) done(ud);
}

static void on_handle_closed(uv_handle_t *h) { handle_gone(h->data); }

static void on_hc_closed(void *ud) { handle_gone(ud); }

/* Closing is over: what is left is dropped, the client and timers close. */
static void finish(struct notify *n)
{
    if (n->finishing) return;
    n->finishing = 1;
    if (n->count)
        log_warn("%zu notification%s dropped at exit", n->count, n->count == 1 ? "" : "s");
    while (n->count) pop(n, METRICS_NOTIFY_DROPPED);
    n->open_handles++; /* the client's close */
    uv_close((uv_handle_t *)&n->retry, on_handle_closed);
    uv_close((uv_handle_t *)&n->drain, on_handle_closed);
    httpc_close(n->hc, on_hc_closed, n); /* cancels a send in flight: its callback never runs */
    if (n->cur) {
        free(n->cur->url);
        free(n->cur);
        n->cur = NULL;
    }
}

static void on_drain(uv_timer_t *t) { finish(t->data); }

void notify_close(struct notify *n, void (*done)(void *), void *ud)
{
    n->closing = 1;
    n->done = done;
    n->done_ud = ud;
    if (n->retry_armed) { /* no more waiting: one last try now */
        uv_timer_stop(&n->retry);
        n->retry_armed = 0;
    }
    if (n->count) uv_timer_start(&n->drain, on_drain, n->timeout_ms, 0);
    kick(n);
}
