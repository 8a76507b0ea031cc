/*
 * checkrun.c - a check command here (exec_run with capture) or through
 * the validator's socket (see checkrun.h).
 *
 * The client side of the socket: connect, write the request line, read one
 * reply line (at most VPROTO_REPLY_MAX bytes), all bounded by one timer of
 * timeout_ms + CHECKRUN_SLACK_MS. A run owns its handles (the pipe and the
 * timer) and is freed in the last close callback.
 */
#include "run/checkrun.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actions/exec.h"
#include "base/log.h"

struct checkrun {
    uv_loop_t *loop;
    checkrun_done cb;
    void *ud;
    int done;      /* cb ran, or the run was cancelled */
    int cancelled; /* checkrun_cancel: cb never runs */
    /* here */
    struct exec_job *job;
    /* through the validator */
    uv_pipe_t pipe;
    uv_timer_t timer;
    uv_connect_t conn;
    uv_write_t wr;
    int open_handles;
    char *request;
    char *reply;
    size_t reply_len;
    char rbuf[4096];
    char socket[128];
};

/* ---- here ---- */

static void on_exec_done(void *ud, const struct exec_result *res)
{
    struct checkrun *c = ud;
    char why[512];
    struct vproto_result r = {
        .ran = !res->spawn_error,
        .exit_status = res->exit_status,
        .term_signal = res->term_signal,
        .timed_out = res->timed_out,
        .output = res->output ? res->output : "",
        .output_len = res->output_len,
        .output_truncated = res->output_truncated,
    };
    if (res->spawn_error) {
        snprintf(why, sizeof why, "cannot run the command: %s", uv_strerror(res->spawn_error));
        r.error = why;
    }
    if (!c->cancelled) c->cb(c->ud, &r);
    free(c);
}

static int start_here(struct checkrun *c, char *const *argv, uint64_t timeout_ms)
{
    struct exec_opts o = {.argv = argv, .timeout_ms = timeout_ms, .capture_max = VPROTO_OUTPUT_MAX};
    return exec_run(c->loop, &o, on_exec_done, c, &c->job);
}

/* ---- through the validator ---- */

static void on_closed(uv_handle_t *h)
{
    struct checkrun *c = h->data;
    if (--c->open_handles > 0) return;
    free(c->request);
    free(c->reply);
    free(c);
}

static void close_all(struct checkrun *c)
{
    c->done = 1;
    uv_close((uv_handle_t *)&c->pipe, on_closed);
    uv_close((uv_handle_t *)&c->timer, on_closed);
}

/* Reports that the validator could not be asked (or answered nonsense). */
static void fail(struct checkrun *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct checkrun *c, const char *fmt, ...)
{
    char why[600], msg[800];
    va_list ap;
    if (c->done) return;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    snprintf(msg, sizeof msg, "the validator at %s: %s", c->socket, why);
    struct vproto_result r = {.ran = 0, .output = "", .error = msg};
    if (!c->cancelled) c->cb(c->ud, &r);
    close_all(c);
}

static void finish_reply(struct checkrun *c)
{
    struct vproto_result r;
    char *store, why[256];
    if (c->done) return;
    if (vproto_reply_decode(c->reply ? c->reply : "", c->reply_len, &r, &store, why, sizeof why) <
        0) {
        fail(c, "a malformed reply: %s", why);
        return;
    }
    if (!r.ran) {
        char msg[700];
        snprintf(msg, sizeof msg, "the validator at %s: %s", c->socket, r.error);
        r.error = msg;
        if (!c->cancelled) c->cb(c->ud, &r);
    } else if (!c->cancelled) {
        c->cb(c->ud, &r);
    }
    free(store);
    close_all(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    struct checkrun *c = h->data;
    (void)suggested;
    *b = uv_buf_init(c->rbuf, sizeof c->rbuf);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct checkrun *c = s->data;
    if (n == UV_EOF) {
        if (!c->reply_len)
            fail(c, "closed the connection without a reply");
        else
            finish_reply(c);
        return;
    }
    if (n < 0) {
        fail(c, "reading the reply: %s", uv_strerror((int)n));
        return;
    }
    if (c->reply_len + (size_t)n > VPROTO_REPLY_MAX) {
        fail(c, "a reply longer than %d bytes", VPROTO_REPLY_MAX);
        return;
    }
    char *nr = realloc(c->reply, c->reply_len + (size_t)n + 1);
    if (!nr) ra_oom();
    c->reply = nr;
    memcpy(c->reply + c->reply_len, b->base, (size_t)n);
    c->reply_len += (size_t)n;
    c->reply[c->reply_len] = '\0';
    if (memchr(b->base, '\n', (size_t)n)) finish_reply(c);
}

static void on_written(uv_write_t *w, int status)
{
    struct checkrun *c = w->data;
    if (status < 0 && status != UV_ECANCELED)
        fail(c, "sending the request: %s", uv_strerror(status));
}

static void on_connected(uv_connect_t *req, int status)
{
    struct checkrun *c = req->data;
    if (c->done) return;
    if (status < 0) {
        fail(c, "cannot connect: %s (is the validator container running?)", uv_strerror(status));
        return;
    }
    uv_buf_t b = uv_buf_init(c->request, (unsigned)strlen(c->request));
    c->wr.data = c;
    int rc = uv_write(&c->wr, (uv_stream_t *)&c->pipe, &b, 1, on_written);
    if (rc == 0) rc = uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
    if (rc < 0) fail(c, "sending the request: %s", uv_strerror(rc));
}

static void on_timeout(uv_timer_t *t)
{
    fail(t->data, "no reply within the time limit and %d ms more", CHECKRUN_SLACK_MS);
}

static int start_remote(struct checkrun *c, const char *socket, char *const *argv,
                        uint64_t timeout_ms)
{
    c->request = vproto_request_encode(argv, timeout_ms);
    if (!c->request) return -EINVAL;
    snprintf(c->socket, sizeof c->socket, "%s", socket);
    uv_pipe_init(c->loop, &c->pipe, 0);
    uv_timer_init(c->loop, &c->timer);
    c->pipe.data = c->timer.data = c->conn.data = c;
    c->open_handles = 2;
    uv_timer_start(&c->timer, on_timeout, timeout_ms + CHECKRUN_SLACK_MS, 0);
    uv_pipe_connect(&c->conn, &c->pipe, socket, on_connected);
    return 0;
}

int checkrun_start(uv_loop_t *loop, const char *socket, char *const *argv, uint64_t timeout_ms,
                   checkrun_done cb, void *ud, struct checkrun **out)
{
    if (!argv || !argv[0]) return -EINVAL;
    struct checkrun *c = calloc(1, sizeof *c);
    if (!c) ra_oom();
    c->loop = loop;
    c->cb = cb;
    c->ud = ud;
    int rc = socket && *socket ? start_remote(c, socket, argv, timeout_ms)
                               : start_here(c, argv, timeout_ms);
    if (rc < 0) {
        free(c->request);
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void checkrun_cancel(struct checkrun *c)
{
    c->cancelled = 1;
    if (c->job) {
        exec_kill(c->job); /* its callback frees c, calling nothing */
        return;
    }
    if (!c->done) close_all(c);
}
