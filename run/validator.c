/*
 * validator.c - the validator's server (see validator.h): a unix socket on
 * its own loop, one connection per request, one command at a time through
 * actions/exec.h (exec_run, output captured).
 *
 * A connection owns a pipe and a timer; it is freed when both are closed and
 * no command of its own is still running (the command's callback holds it).
 */
#include "run/validator.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "actions/exec.h"
#include "base/log.h"
#include "run/vproto.h"

struct conn {
    struct conn *next, *prev; /* V.conns */
    uv_pipe_t pipe;
    uv_timer_t timer; /* the request must arrive in time */
    uv_write_t wr;
    int open_handles;
    int closing;
    int running; /* its command runs: the exec callback still holds the conn */
    struct exec_job *job;
    char *line; /* the request as read so far */
    size_t len;
    char *reply;
    uint64_t started_ns;
    uint64_t timeout_ms;
    char argv0[128];
    char rbuf[4096];
};

static struct {
    uv_loop_t loop;
    uv_pipe_t server;
    uv_signal_t sigterm, sigint;
    struct conn *busy;  /* the connection whose command runs */
    struct conn *conns; /* every open connection */
    int nconns;
    int stopping;
} V;

static void free_conn(struct conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        V.conns = c->next;
    if (c->next) c->next->prev = c->prev;
    free(c->line);
    free(c->reply);
    free(c);
    V.nconns--;
}

static void on_conn_closed(uv_handle_t *h)
{
    struct conn *c = h->data;
    if (--c->open_handles > 0 || c->running) return;
    free_conn(c);
}

static void close_conn(struct conn *c)
{
    if (c->closing) return;
    c->closing = 1;
    uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
    uv_close((uv_handle_t *)&c->timer, on_conn_closed);
    if (c->running) exec_kill(c->job); /* the client gave up, or the validator stops */
}

static void on_written(uv_write_t *w, int status)
{
    (void)status;
    close_conn(w->data);
}

/* Sends the reply line (owned by c) and closes the connection after it. */
static void reply(struct conn *c, char *line)
{
    if (c->closing) {
        free(line);
        return;
    }
    free(c->reply);
    c->reply = line;
    uv_read_stop((uv_stream_t *)&c->pipe);
    uv_timer_stop(&c->timer);
    uv_buf_t b = uv_buf_init(line, (unsigned)strlen(line));
    c->wr.data = c;
    if (uv_write(&c->wr, (uv_stream_t *)&c->pipe, &b, 1, on_written) < 0) close_conn(c);
}

static void reply_error(struct conn *c, const char *why)
{
    struct vproto_result r = {.ran = 0, .error = why};
    reply(c, vproto_reply_encode(&r));
}

static void on_exec_done(void *ud, const struct exec_result *res)
{
    struct conn *c = ud;
    char what[128], cant[256];
    struct vproto_result r = {.ran = !res->spawn_error,
                              .exit_status = res->exit_status,
                              .term_signal = res->term_signal,
                              .timed_out = res->timed_out,
                              .output = res->output,
                              .output_len = res->output_len,
                              .output_truncated = res->output_truncated};
    if (res->spawn_error) {
        snprintf(cant, sizeof cant, "cannot run \"%s\": %s", c->argv0,
                 uv_strerror(res->spawn_error));
        r.error = cant;
    }
    vproto_describe(&r, c->timeout_ms, what, sizeof what);
    struct log_rec lr;
    if (log_rec_begin(&lr, RA_LOG_INFO, "validator-run")) {
        log_rec_str(&lr, "command", c->argv0);
        log_rec_bool(&lr, "passed", vproto_passed(&r));
        log_rec_num(&lr, "duration_ms", (double)(uv_hrtime() - c->started_ns) / 1e6);
        log_rec_end(&lr, "%s %s", c->argv0, what);
    }
    c->running = 0;
    V.busy = NULL;
    if (c->closing) { /* the client went away: nobody to answer */
        if (c->open_handles == 0) free_conn(c);
        return;
    }
    reply(c, vproto_reply_encode(&r));
}

/* A whole request line arrived: run it, or say why not. */
static void handle_request(struct conn *c)
{
    char **argv, why[256];
    uint64_t timeout_ms;
    if (vproto_request_decode(c->line, c->len, &argv, &timeout_ms, why, sizeof why) < 0) {
        char msg[300];
        snprintf(msg, sizeof msg, "bad request: %s", why);
        reply_error(c, msg);
        return;
    }
    if (V.busy || V.stopping) {
        exec_argv_free(argv);
        reply_error(c, V.stopping ? "the validator is stopping"
                                  : "busy: the validator runs one command at a time");
        return;
    }
    snprintf(c->argv0, sizeof c->argv0, "%s", argv[0]);
    c->timeout_ms = timeout_ms;
    struct exec_opts o = {.argv = argv, .timeout_ms = timeout_ms, .capture_max = VPROTO_OUTPUT_MAX};
    c->started_ns = uv_hrtime();
    uv_timer_stop(&c->timer);
    int rc = exec_run(&V.loop, &o, on_exec_done, c, &c->job);
    exec_argv_free(argv);
    if (rc < 0) {
        snprintf(why, sizeof why, "cannot run the command: %s", uv_strerror(rc));
        reply_error(c, why);
        return;
    }
    c->running = 1;
    V.busy = c;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    struct conn *c = h->data;
    (void)suggested;
    *b = uv_buf_init(c->rbuf, sizeof c->rbuf);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct conn *c = s->data;
    if (n < 0) { /* EOF or an error: before the line, or while the command runs */
        close_conn(c);
        return;
    }
    if (c->running) return; /* nothing more is expected */
    const char *nl = memchr(b->base, '\n', (size_t)n);
    size_t take = nl ? (size_t)(nl - b->base) + 1 : (size_t)n;
    if (c->len + take > VPROTO_REQUEST_MAX) {
        char msg[96];
        snprintf(msg, sizeof msg, "bad request: a request line exceeds %d bytes",
                 VPROTO_REQUEST_MAX);
        reply_error(c, msg);
        return;
    }
    char *nl2 = realloc(c->line, c->len + take + 1);
    if (!nl2) ra_oom();
    c->line = nl2;
    memcpy(c->line + c->len, b->base, take);
    c->len += take;
    c->line[c->len] = '\0';
    if (nl) handle_request(c); /* reading goes on: to see the client go away */
}

static void on_request_timeout(uv_timer_t *t)
{
    struct conn *c = t->data;
    reply_error(c, "bad request: no request line within 10 s");
}

static void on_connection(uv_stream_t *server, int status)
{
    if (status < 0) {
        log_warn("validator: accept: %s", uv_strerror(status));
        return;
    }
    struct conn *c = calloc(1, sizeof *c);
    if (!c) ra_oom();
    V.nconns++;
    c->next = V.conns;
    if (V.conns) V.conns->prev = c;
    V.conns = c;
    uv_pipe_init(&V.loop, &c->pipe, 0);
    uv_timer_init(&V.loop, &c->timer);
    c->pipe.data = c->timer.data = c;
    c->open_handles = 2;
    if (uv_accept(server, (uv_stream_t *)&c->pipe) < 0) {
        close_conn(c);
        return;
    }
    if (V.nconns > VALIDATOR_CONNS_MAX) {
        reply_error(c, "busy: too many connections");
        return;
    }
    uv_timer_start(&c->timer, on_request_timeout, VALIDATOR_REQUEST_MS, 0);
    uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
}

static void on_closed_noop(uv_handle_t *h) { (void)h; }

static void on_signal(uv_signal_t *s, int signum)
{
    (void)s;
    if (V.stopping) return;
    V.stopping = 1;
    log_info("validator: signal %d: stopping", signum);
    uv_close((uv_handle_t *)&V.server, on_closed_noop);
    uv_close((uv_handle_t *)&V.sigterm, on_closed_noop);
    uv_close((uv_handle_t *)&V.sigint, on_closed_noop);
    for (struct conn *c = V.conns; c; c = c->next) close_conn(c);
}

/* Binds and listens at path, replacing a stale socket. The server handle
 * is initialised in any case. */
static int listen_at(const char *path)
{
    struct stat st;
    uv_pipe_init(&V.loop, &V.server, 0);
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            log_error("validator: %s exists and is not a socket; not replacing it", path);
            return -EEXIST;
        }
        unlink(path);
    }
    int rc = uv_pipe_bind(&V.server, path);
    if (rc == 0 && chmod(path, 0666) < 0) rc = -errno;
    if (rc == 0) rc = uv_listen((uv_stream_t *)&V.server, VALIDATOR_CONNS_MAX, on_connection);
    if (rc < 0) log_error("validator: cannot listen on %s: %s", path, uv_strerror(rc));
    return rc;
}

int validator_main(const struct validator_opts *o)
{
    memset(&V, 0, sizeof V);
    signal(SIGPIPE, SIG_IGN);
    if (uv_loop_init(&V.loop) < 0) return 1;
    int rc = listen_at(o->socket);
    if (rc < 0) {
        uv_close((uv_handle_t *)&V.server, on_closed_noop);
        uv_run(&V.loop, UV_RUN_DEFAULT);
        uv_loop_close(&V.loop);
        return 1;
    }
    uv_signal_init(&V.loop, &V.sigterm);
    uv_signal_init(&V.loop, &V.sigint);
    uv_signal_start(&V.sigterm, on_signal, SIGTERM);
    uv_signal_start(&V.sigint, on_signal, SIGINT);
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_INFO, "validator-ready")) {
        log_rec_str(&r, "socket", o->socket);
        log_rec_end(&r, "validator listening on %s", o->socket);
    }
    uv_run(&V.loop, UV_RUN_DEFAULT);
    unlink(o->socket);
    if (uv_loop_close(&V.loop) != 0) {
        log_error("validator: internal error: handles left open at exit");
        return 1;
    }
    return 0;
}
