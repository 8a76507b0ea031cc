/*
 * notify.h - notifications (--notify-url, docs/notifications.md): one POST
 * per event the engine reports (an action's result, a rejection, a
 * rollback, a storm halt), in the body run/notifyfmt.c renders, sent on
 * the loop through libcurl's multi interface (net/httpc.h), one at a time
 * and in order, from a bounded queue. Nothing here ever delays an action:
 * notify_post renders and queues, and returns. A send that gets no answer,
 * a 429 or a 5xx is retried with the one backoff (base/backoff.h), at most
 * NOTIFY_ATTEMPTS times; the URL is never logged whole (redact_url_origin:
 * a webhook URL is a credential).
 */
#ifndef RA_NOTIFY_H
#define RA_NOTIFY_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "run/notifyfmt.h"

#define NOTIFY_ATTEMPTS 4         /* sends of one notification, the first included */
#define NOTIFY_RETRY_BASE_MS 1000 /* the backoff: 1 s, doubling, equal jitter */
#define NOTIFY_RETRY_CAP_MS 30000
#define NOTIFY_URL_MAX 4096 /* --notify-url-file's size cap */

struct notify;

struct notify_opts {
    const char *url;      /* --notify-url; NULL or "" when url_file is used */
    const char *url_file; /* --notify-url-file: read at each send (a Secret key
                             the kubelet updates), NULL if unset */
    enum notify_format format;
    uint64_t timeout_ms; /* one send's timeout, and the drain at close */
    size_t queue_max;    /* notifications waiting or in flight, >= 1 */
    const char *ca_file; /* PEM bundle to verify an https receiver, NULL = system */
};

/* Creates the notifier (its own HTTP client on loop). Returns 0 and *out,
 * or -ENOMEM / -EIO. The options are copied. */
int notify_create(uv_loop_t *loop, const struct notify_opts *o, struct notify **out);

/* Renders ev now (every field is copied) and queues it; returns at once.
 * When the queue holds queue_max notifications the new one is dropped
 * (counted, logged). A no-op when n is NULL or closing. */
void notify_post(struct notify *n, const struct notify_event *ev);

/* Notifications queued or in flight. */
size_t notify_pending(const struct notify *n);

/* Stops retrying; what is queued is still sent, one by one, for at most
 * timeout_ms (the last action's notification before a restart-pod exit);
 * then whatever is left is dropped (counted), the client closes, n is
 * freed and done(ud) runs (done may be NULL). */
void notify_close(struct notify *n, void (*done)(void *), void *ud);

#endif
