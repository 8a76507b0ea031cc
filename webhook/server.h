/*
 * server.h - the `reload-agent webhook` server: HTTPS on the libuv loop
 * (net/httpd.c with net/tls.c), routes, certificate reload and graceful
 * shutdown (a drain, then the stop). The review itself is
 * webhook/admission.c; the metrics are webhook/whmetrics.c.
 *
 * Routes:
 *   POST /mutate     an AdmissionReview v1 (webhook/admission.h); bodies
 *                    over WEBHOOK_MAX_BODY get 413 from the server
 *   POST /mutate-namespace  the same, for the webhook entry whose
 *                    namespaceSelector picks the namespaces labelled
 *                    reload-agent.io/inject=enabled: a pod that does not
 *                    say reload-agent.io/inject is injected too
 *                    (inject_opts.all); "false" still opts out
 *   GET  /healthz    200 "ok" while the process runs
 *   GET  /readyz     200 once the certificate is loaded and the socket
 *                    listens (and no hold is set: webhook_server_hold_ready);
 *                    503 from the start of a shutdown (its drain included)
 *   GET  /metrics    Prometheus text (webhook/whmetrics.h)
 * Other paths 404; a wrong method 405 with an Allow header.
 *
 * Certificate reload: the certificate and key files are watched as file
 * roots (watch/watch.h watches their directories, filtered by name, and
 * sees a Secret volume's "..data" swap as well as a plain rewrite). After
 * WEBHOOK_RELOAD_DEBOUNCE_MS without further events both are loaded again
 * with tls_server_reload: new connections get the new certificate,
 * connections already open keep theirs; a failure keeps the old one. Each
 * attempt is logged (event "cert-reload") and counted.
 *
 * Logs: one line per review (event "admission": uid, namespace, name or
 * generate_name, operation, result, status, dry_run, ops, warnings,
 * duration_ms, reason), never the object.
 */
#ifndef RA_WEBHOOK_SERVER_H
#define RA_WEBHOOK_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "inject/transform.h"

#define WEBHOOK_MAX_BODY (3u << 20) /* 3 MiB: the API server's request limit */
/* What the request bodies of all connections may hold together: a request
 * beyond it is answered 503 with Retry-After (the API server retries). */
#define WEBHOOK_BODY_BUDGET (8u << 20)
/* After a review of at least this size the heap's free pages go back. */
#define WEBHOOK_TRIM_BODY (256u << 10)
#define WEBHOOK_MAX_CONNS 256
#define WEBHOOK_RELOAD_DEBOUNCE_MS 100

struct webhook_server;

struct webhook_opts {
    const char *listen;        /* ADDR:PORT (port 0 picks one: webhook_server_port) */
    const char *cert_file;     /* PEM chain, leaf first */
    const char *key_file;      /* PEM private key */
    struct inject_opts inject; /* the transform's options (strings copied) */
    unsigned timeout_ms;       /* read timeout per connection; 0 = 5000 */
};

/* What webhook_server_start could not do. */
enum webhook_fail {
    WEBHOOK_FAIL_NONE = 0,
    WEBHOOK_FAIL_CERT,   /* the certificate or key could not be loaded */
    WEBHOOK_FAIL_LISTEN, /* the address is bad or cannot be bound */
    WEBHOOK_FAIL_WATCH,  /* the certificate files cannot be watched */
};

/* Loads the certificate, listens and starts watching the certificate
 * files. Returns 0 and *out; or <0, *fail saying which step failed and err
 * (errlen bytes) a message naming the file or address and the reason;
 * handles made before the failure are closing then, so the caller runs the
 * loop until it ends before uv_loop_close. An expired (or not yet valid) certificate is loaded and logged
 * as a warning: a rotation can fix it without a restart. */
int webhook_server_start(uv_loop_t *loop, const struct webhook_opts *o, struct webhook_server **out,
                         enum webhook_fail *fail, char *err, size_t errlen);

/* The port actually bound. */
int webhook_server_port(const struct webhook_server *s);

/* The Kubernetes minor version the transform targets from the next review
 * on (inject_opts.kube_minor; 0 = INJECT_KUBE_MINOR_DEFAULT) and where it
 * came from (inject_opts.kube_from, a static string); and the one in force. */
void webhook_server_set_kube_minor(struct webhook_server *s, int minor, const char *from);
int webhook_server_kube_minor(const struct webhook_server *s);

/* While why is set, /readyz answers 503 with it (webhook/kubever.c holds
 * readiness until the API server's version is known); NULL releases. */
void webhook_server_hold_ready(struct webhook_server *s, const char *why);

/* How webhook_server_shutdown stops. */
struct webhook_stop {
    uint64_t delay_ms;         /* the drain before the stop (--shutdown-delay); 0 = none */
    uint64_t grace_ms;         /* then, how long requests in flight may take (--shutdown-timeout) */
    void (*stopped)(void *ud); /* the delay is over (at once when there is none), the
                                  graceful stop begins; may be NULL */
    void (*done)(void *ud);    /* every handle is closed and s freed; may be NULL */
    void *ud;
};

/* Stops the server in two phases. Call it once.
 * The drain (when st->delay_ms > 0), for the delay: /readyz turns 503 (so
 * the pod leaves the Service's endpoints), the listener keeps accepting
 * and every request is served, but each reply says "Connection: close"
 * and ends its connection (httpd_drain): clients that reuse connections
 * reconnect, by then to another endpoint, and no idle keep-alive
 * connection is closed under a request sent on it meanwhile. Logged as
 * event "draining" (delay_ms).
 * The graceful stop, then (at once without a delay; event "drained" after
 * one): the listener closes (no new connections), idle connections close,
 * and requests already being received or answered finish (their replies
 * end the connection). When the last connection has closed, or grace_ms
 * after the stop began at the latest (then the rest are cut), every handle
 * is closed, s is freed and st->done(st->ud) runs. */
void webhook_server_shutdown(struct webhook_server *s, const struct webhook_stop *st);

/* During the drain's delay: ends it now (a second signal, the operator's
 * escape), logged as "drained" with early: true; the graceful stop starts
 * (st->stopped runs). Returns 1, or 0 when no delay was running. */
int webhook_server_end_delay(struct webhook_server *s);

#endif
