/*
 * server.c - the webhook server (see server.h): one struct webhook_server
 * owning the HTTPS server (net/httpd.c + net/tls.c), the watcher on the
 * certificate files, the reload debounce timer and the shutdown timer (the
 * drain's delay, then the deadline). The handler is synchronous: a review
 * is parsed, transformed and encoded inside the httpd callback
 * (webhook/admission.c), so an "in-flight review" at shutdown is a request
 * still arriving or a reply still being written; httpd_shutdown lets those
 * finish.
 */
#include "webhook/server.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "net/httpd.h"
#include "net/tls.h"
#include "watch/watch.h"
#include "webhook/admission.h"
#include "webhook/whmetrics.h"

struct webhook_server {
    uv_loop_t *loop;
    struct httpd *srv;
    struct tls_server *tls;
    struct watch *watch;
    uv_timer_t debounce; /* certificate reload */
    uv_timer_t grace;    /* the drain's delay, then the shutdown deadline */
    char *cert_file, *key_file;
    char *image, *cpu_request, *memory_request, *memory_limit;
    struct inject_opts inject;
    char *hold; /* why /readyz says 503 before the version is known, or NULL */
    int stopping;
    int draining;            /* in the delay of webhook_server_shutdown */
    uint64_t grace_ms;       /* the deadline after the delay */
    int open;                /* things still to close: timers, watch, httpd */
    void (*stopped)(void *); /* the delay is over (webhook_stop.stopped) */
    void (*done)(void *);
    void *done_ud;
};

/* ---- routes ---- */

static void text(struct httpd_resp *resp, int status, const char *body)
{
    resp->status = status;
    resp->body = ra_strdup(body);
    resp->body_len = strlen(body);
}

static void log_admission(const struct admission_info *in, double secs)
{
    enum log_level lvl = in->result == ADMISSION_ERROR || in->result == ADMISSION_BAD_REQUEST
                             ? RA_LOG_WARN
                         : in->result == ADMISSION_IGNORED ? RA_LOG_DEBUG
                                                           : RA_LOG_INFO;
    struct log_rec r;
    if (!log_rec_begin(&r, lvl, "admission")) return;
    if (in->uid[0]) log_rec_str(&r, "uid", in->uid);
    if (in->namespace_[0]) log_rec_str(&r, "namespace", in->namespace_);
    if (in->name[0]) log_rec_str(&r, in->name_is_generated ? "generate_name" : "name", in->name);
    if (in->operation[0]) log_rec_str(&r, "operation", in->operation);
    log_rec_str(&r, "result", admission_result_name(in->result));
    log_rec_int(&r, "status", in->status);
    if (in->dry_run) log_rec_bool(&r, "dry_run", 1);
    if (in->nops) log_rec_int(&r, "ops", (long long)in->nops);
    if (in->nwarnings) log_rec_int(&r, "warnings", (long long)in->nwarnings);
    log_rec_num(&r, "duration_ms", secs * 1000.0);
    if (in->reason[0]) log_rec_str(&r, "reason", in->reason);
    const char *who = in->name[0] ? in->name : "(unnamed)";
    switch (in->result) {
    case ADMISSION_INJECTED:
        log_rec_end(&r, "pod %s/%s: sidecar injected (%zu ops)", in->namespace_, who, in->nops);
        break;
    case ADMISSION_BAD_REQUEST:
        log_rec_end(&r, "bad admission request (%d): %s", in->status, in->reason);
        break;
    case ADMISSION_ERROR:
        log_rec_end(&r, "pod %s/%s: admitted unchanged, injection failed: %s", in->namespace_, who,
                    in->reason);
        break;
    default:
        log_rec_end(&r, "pod %s/%s: %s%s%s", in->namespace_, who, admission_result_name(in->result),
                    in->reason[0] ? ": " : "", in->reason);
        break;
    }
}

static void release_body(void *ud) { httpd_req_release_body(ud); }

/* ns_wide: the review came through /mutate-namespace (the webhook entry of
 * the namespaces labelled reload-agent.io/inject=enabled): a pod that says
 * nothing is injected too (inject_opts.all); "false" still opts out. */
static void mutate(struct webhook_server *s, const struct httpd_req *req, struct httpd_resp *resp,
                   int ns_wide)
{
    uint64_t t0 = uv_hrtime();
    struct admission_response out;
    struct admission_info info;
    struct inject_opts opts = s->inject;
    size_t len = req->body_len;
    opts.all = ns_wide;
    int rc = admission_review_release(req->body, len, req->content_type, &opts, release_body,
                                      (void *)req, &out, &info);
    double secs = (double)(uv_hrtime() - t0) / 1e9;
    /* a large review leaves the heap fragmented: give the free pages back */
    if (len >= WEBHOOK_TRIM_BODY) (void)malloc_trim(0);
    if (rc < 0) {
        /* Not even the fallback answer fitted in memory: failurePolicy
         * Ignore admits the pod on a 500. */
        text(resp, 500, "out of memory\n");
    } else {
        resp->status = out.status;
        resp->content_type = out.content_type;
        resp->body = out.body;
        resp->body_len = out.body_len;
        if (out.status == 415) resp->headers = "Accept: application/json\r\n";
    }
    whmetrics_admission(info.result, secs);
    log_admission(&info, secs);
}

static void handle(void *ud, const struct httpd_req *req, struct httpd_resp *resp)
{
    struct webhook_server *s = ud;
    int get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
    int ns_wide = strcmp(req->path, "/mutate-namespace") == 0;
    if (ns_wide || strcmp(req->path, "/mutate") == 0) {
        if (strcmp(req->method, "POST") != 0) {
            text(resp, 405, "method not allowed: POST an AdmissionReview\n");
            resp->headers = "Allow: POST\r\n";
            return;
        }
        mutate(s, req, resp, ns_wide);
        return;
    }
    int known = strcmp(req->path, "/healthz") == 0 || strcmp(req->path, "/readyz") == 0 ||
                strcmp(req->path, "/metrics") == 0;
    if (!known) {
        text(resp, 404, "not found\n");
        return;
    }
    if (!get) {
        text(resp, 405, "method not allowed\n");
        resp->headers = "Allow: GET, HEAD\r\n";
        return;
    }
    if (strcmp(req->path, "/healthz") == 0) {
        text(resp, 200, "ok\n");
    } else if (strcmp(req->path, "/readyz") == 0) {
        if (s->stopping)
            text(resp, 503, "shutting down\n");
        else if (s->hold)
            text(resp, 503, s->hold);
        else
            text(resp, 200, "ready\n");
    } else {
        size_t len;
        char *m = whmetrics_render(&len);
        if (!m) ra_oom();
        resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
        resp->body = m;
        resp->body_len = len;
    }
}

/* ---- certificate reload ---- */

static void log_cert(enum log_level lvl, const char *event, const struct tls_server *ts,
                     const char *msg)
{
    struct log_rec r;
    if (!log_rec_begin(&r, lvl, event)) return;
    log_rec_str(&r, "serial", tls_server_serial(ts));
    log_rec_str(&r, "subject", tls_server_subject(ts));
    log_rec_int(&r, "not_after", (long long)tls_server_not_after(ts));
    log_rec_end(&r, "%s", msg);
}

static void reload_cb(uv_timer_t *t)
{
    struct webhook_server *s = t->data;
    if (s->stopping) return;
    char err[512] = "";
    int rc = tls_server_reload(s->tls, s->cert_file, s->key_file, err, sizeof err);
    whmetrics_cert_reload(rc >= 0);
    if (rc < 0) {
        struct log_rec r;
        if (log_rec_begin(&r, RA_LOG_ERROR, "cert-reload")) {
            log_rec_str(&r, "result", "failure");
            log_rec_str(&r, "error", err);
            log_rec_str(&r, "serial", tls_server_serial(s->tls));
            log_rec_end(&r,
                        "certificate reload failed, still serving the previous certificate "
                        "(serial %s): %s",
                        tls_server_serial(s->tls), err);
        }
        return;
    }
    whmetrics_set_cert_expiry(tls_server_not_after(s->tls));
    struct log_rec r;
    if (log_rec_begin(&r, rc == 1 ? RA_LOG_WARN : RA_LOG_INFO, "cert-reload")) {
        log_rec_str(&r, "result", "success");
        log_rec_str(&r, "serial", tls_server_serial(s->tls));
        log_rec_str(&r, "subject", tls_server_subject(s->tls));
        log_rec_int(&r, "not_after", (long long)tls_server_not_after(s->tls));
        if (rc == 1) log_rec_str(&r, "warning", err);
        log_rec_end(&r, "certificate reloaded for new connections (serial %s)%s%s",
                    tls_server_serial(s->tls), rc == 1 ? "; " : "", rc == 1 ? err : "");
    }
}

static void on_cert_event(void *ud, size_t root, enum watch_why why)
{
    struct webhook_server *s = ud;
    (void)root;
    (void)why;
    if (s->stopping) return;
    uv_timer_start(&s->debounce, reload_cb, WEBHOOK_RELOAD_DEBOUNCE_MS, 0);
}

/* ---- start and stop ---- */

static void server_free(struct webhook_server *s)
{
    free(s->cert_file);
    free(s->key_file);
    free(s->image);
    free(s->cpu_request);
    free(s->memory_request);
    free(s->memory_limit);
    free(s->hold);
    free(s);
}

static void one_closed(struct webhook_server *s)
{
    if (--s->open > 0) return;
    void (*done)(void *) = s->done;
    void *ud = s->done_ud;
    tls_server_destroy(s->tls); /* after the httpd: its connections are gone */
    server_free(s);
    if (done) done(ud);
}

static void timer_closed(uv_handle_t *h) { one_closed(h->data); }
static void watch_closed(void *ud) { one_closed(ud); }

/* The httpd is gone (every connection finished, or was cut at the
 * deadline): the deadline timer goes too. */
static void httpd_closed(void *ud)
{
    struct webhook_server *s = ud;
    s->srv = NULL;
    log_debug("webhook: every connection has closed");
    uv_close((uv_handle_t *)&s->grace, timer_closed);
    one_closed(s);
}

static void on_grace(uv_timer_t *t)
{
    struct webhook_server *s = t->data;
    log_warn("webhook: shutdown timeout reached; closing the connections still open");
    if (s->srv) httpd_close(s->srv, NULL, NULL); /* httpd_closed still runs */
}

int webhook_server_start(uv_loop_t *loop, const struct webhook_opts *o, struct webhook_server **out,
                         enum webhook_fail *fail, char *err, size_t errlen)
{
    *fail = WEBHOOK_FAIL_NONE;
    struct webhook_server *s = calloc(1, sizeof *s);
    if (!s) ra_oom();
    s->loop = loop;
    s->cert_file = ra_strdup(o->cert_file);
    s->key_file = ra_strdup(o->key_file);
    s->image = ra_strdup(o->inject.image);
    s->cpu_request = ra_strdup(o->inject.cpu_request);
    s->memory_request = ra_strdup(o->inject.memory_request);
    s->memory_limit = ra_strdup(o->inject.memory_limit);
    s->inject = o->inject;
    s->inject.image = s->image;
    s->inject.cpu_request = s->cpu_request;
    s->inject.memory_request = s->memory_request;
    s->inject.memory_limit = s->memory_limit;
    s->inject.admission = 1;

    char why[512] = "";
    int rc = tls_server_create(s->cert_file, s->key_file, &s->tls, why, sizeof why);
    if (rc < 0) {
        *fail = WEBHOOK_FAIL_CERT;
        snprintf(err, errlen, "cannot load the TLS certificate: %s", why);
        server_free(s);
        return rc;
    }
    whmetrics_set_cert_expiry(tls_server_not_after(s->tls));
    tls_server_set_failure_hook(s->tls, whmetrics_tls_failure, NULL);
    if (rc == 1)
        log_cert(RA_LOG_WARN, "cert", s->tls, why);
    else
        log_cert(RA_LOG_INFO, "cert", s->tls, "certificate loaded");

    struct httpd_opts ho = {.methods = HTTPD_GET | HTTPD_HEAD | HTTPD_POST,
                            .max_body = WEBHOOK_MAX_BODY,
                            .body_budget = WEBHOOK_BODY_BUDGET,
                            .max_conns = WEBHOOK_MAX_CONNS,
                            .timeout_ms = o->timeout_ms,
                            .tls = s->tls};
    rc = httpd_start_opts(loop, o->listen, &ho, handle, s, &s->srv);
    if (rc < 0) {
        *fail = WEBHOOK_FAIL_LISTEN;
        snprintf(err, errlen, "cannot listen on %s: %s", o->listen, uv_strerror(rc));
        tls_server_destroy(s->tls);
        server_free(s);
        return rc;
    }
    /* A missing file is waited for, never an error: what fails here is
     * the inotify instance or watch limit, or an unreadable directory. */
    size_t idx;
    if ((rc = watch_create(loop, &s->watch)) < 0 ||
        (rc = watch_add(s->watch, s->cert_file, on_cert_event, s, &idx)) < 0 ||
        (rc = watch_add(s->watch, s->key_file, on_cert_event, s, &idx)) < 0) {
        *fail = WEBHOOK_FAIL_WATCH;
        snprintf(err, errlen, "cannot watch the certificate files %s and %s for rotation: %s",
                 s->cert_file, s->key_file, uv_strerror(rc));
        /* Nothing was accepted yet, so no connection uses the TLS context;
         * the handles finish closing when the caller runs the loop. */
        if (s->watch) watch_close(s->watch, NULL, NULL);
        httpd_close(s->srv, NULL, NULL);
        tls_server_destroy(s->tls);
        server_free(s);
        return rc;
    }
    uv_timer_init(loop, &s->debounce);
    uv_timer_init(loop, &s->grace);
    s->debounce.data = s->grace.data = s;
    s->open = 4; /* debounce, grace, watch, httpd */
    *out = s;
    return 0;
}

int webhook_server_port(const struct webhook_server *s) { return s->srv ? httpd_port(s->srv) : 0; }

void webhook_server_set_kube_minor(struct webhook_server *s, int minor, const char *from)
{
    s->inject.kube_minor = minor;
    s->inject.kube_from = from;
}

int webhook_server_kube_minor(const struct webhook_server *s)
{
    return s->inject.kube_minor > 0 ? s->inject.kube_minor : INJECT_KUBE_MINOR_DEFAULT;
}

void webhook_server_hold_ready(struct webhook_server *s, const char *why)
{
    free(s->hold);
    s->hold = why ? ra_asprintf("%s\n", why) : NULL;
}

/* The graceful stop, after the delay (or without one). */
static void stop_now(struct webhook_server *s)
{
    s->draining = 0;
    if (s->stopped) s->stopped(s->done_ud);
    /* The deadline runs until the connections are gone (httpd_closed
     * closes it). */
    uv_timer_start(&s->grace, on_grace, s->grace_ms, 0);
    httpd_shutdown(s->srv, httpd_closed, s);
}

static void log_draining(uint64_t delay_ms)
{
    struct log_rec r;
    if (!log_rec_begin(&r, RA_LOG_INFO, "draining")) return;
    log_rec_int(&r, "delay_ms", (long long)delay_ms);
    log_rec_end(&r,
                "draining for %llu ms: /readyz answers 503, connections are still accepted and "
                "served, every reply closes its connection",
                (unsigned long long)delay_ms);
}

/* early: a second signal ended the delay. */
static void log_drained(const struct webhook_server *s, int early)
{
    struct log_rec r;
    if (!log_rec_begin(&r, RA_LOG_INFO, "drained")) return;
    if (early) log_rec_bool(&r, "early", 1);
    log_rec_int(&r, "timeout_ms", (long long)s->grace_ms);
    log_rec_end(&r, "%s; stopping: no new connections; open requests get %llu ms to finish",
                early ? "delay cut short by a second signal" : "drain over",
                (unsigned long long)s->grace_ms);
}

static void on_delay(uv_timer_t *t)
{
    struct webhook_server *s = t->data;
    log_drained(s, 0);
    stop_now(s);
}

void webhook_server_shutdown(struct webhook_server *s, const struct webhook_stop *st)
{
    if (s->stopping) return;
    s->stopping = 1;
    s->grace_ms = st->grace_ms;
    s->stopped = st->stopped;
    s->done = st->done;
    s->done_ud = st->ud;
    uv_close((uv_handle_t *)&s->debounce, timer_closed);
    struct watch *w = s->watch;
    s->watch = NULL;
    watch_close(w, watch_closed, s);
    if (st->delay_ms == 0) {
        stop_now(s);
        return;
    }
    s->draining = 1;
    log_draining(st->delay_ms);
    httpd_drain(s->srv);
    uv_timer_start(&s->grace, on_delay, st->delay_ms, 0);
}

int webhook_server_end_delay(struct webhook_server *s)
{
    if (!s->draining) return 0;
    uv_timer_stop(&s->grace);
    log_drained(s, 1);
    stop_now(s);
    return 1;
}
