/*
 * httpd.c - the built-in HTTP/1.1 server behind --listen (/healthz,
 * /metrics, ...). One uv_tcp_t listener; per connection a struct embedding
 * the socket, a read-timeout timer and an http_parser. Bytes are fed to the
 * parser as they arrive; on_message_complete pauses it, so a pipelined
 * request stays in the read buffer until the previous response is written
 * (reading is stopped meanwhile). Limits are enforced in the parser
 * callbacks. A response that ends the connection is followed by a shutdown
 * and a "lingering" read that discards input until EOF or the timeout, so
 * the client reads our error reply instead of a reset. Stopping comes in
 * up to three steps: httpd_drain (every reply from then on is final),
 * httpd_shutdown (listener and idle connections closed), httpd_close (the
 * rest cut).
 *
 * TLS: a connection with a tls_conn reads ciphertext into the server's
 * shared raw buffer and feeds it to the tls_conn at once; conn_parse pulls
 * plaintext into c->b->in (allocated on demand) whenever the parser has used up what it had, so
 * pipelining works as in plain HTTP (the rest waits in OpenSSL's memory
 * BIO). Handshake records and alerts go out as separate writes; a response
 * is encrypted whole and written in one uv_write.
 */
#include "net/httpd.h"

#include <ctype.h>
#include <errno.h>
#include <http_parser.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "base/addr.h"
#include "net/tls.h"

#define HTTPD_MAX_CONNS 64 /* default */
/* Pending connections the kernel queues (capped by net.core.somaxconn): deep
 * enough that a burst of reconnecting clients does not overflow it, which
 * would drop a probe's SYN and delay it by the 1 s SYN retransmission. */
#define HTTPD_BACKLOG 1024
#define HTTPD_HEAD_MAX 8192
#define HTTPD_BODY_MAX 4096 /* default */
#define HTTPD_READ_BUF 8192
#define HTTPD_RAW_BUF (16 * 1024 + 512) /* one TLS record */
#define HTTPD_EXTRA_MAX 256             /* resp.headers */
#define HTTPD_TIMEOUT_MS 5000
#define HTTPD_DEFAULT_TYPE "text/plain; charset=utf-8"
#define HTTPD_REJECT_LOG_MS 10000

/* A connection's request buffers. Only a connection with input to parse or
 * a request in progress holds them: an idle keep-alive one holds none. */
struct conn_buf {
    char url[HTTPD_HEAD_MAX + 2]; /* the URL, a NUL, the Content-Type value */
    char in[HTTPD_READ_BUF];      /* input not parsed yet (TLS: plaintext) */
};

struct conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wreq;
    uv_shutdown_t sreq;
    http_parser parser;
    struct httpd *srv;
    struct conn *prev, *next;
    int open_handles; /* tcp + timer until both close callbacks ran */
    int closing;
    int reading;
    int writing;
    int draining;          /* final response sent: discard input until EOF */
    int in_request;        /* between the first byte of a request and its end */
    int keep;              /* keep-alive decision for the current request */
    int err_status;        /* limit hit in a parser callback (413), or 400 */
    int allowed;           /* the current request's method is allowed */
    const char *close_why; /* why it was closed, for a TLS handshake cut short */
    /* when it began waiting for its current request, as httpd.seq at accept
     * / at the end of the last reply */
    uint64_t since;
    size_t head_len, body_len, url_len;
    /* Content-Type: header name matching across split callbacks, then the
     * value, stored in url[] after the URL and its NUL (the head limit
     * bounds both together). */
    int hstate; /* 0 before headers, 1 in a field name, 2 in a value */
    int fpos, fmatch, in_ct, ct_count;
    int in_expect; /* in an Expect value: kept in expect[] (longer: not ours) */
    size_t expect_n;
    char expect[16];
    size_t ct_off, ct_len;
    uint64_t expect_len; /* Content-Length, 0 if none */
    char *body;          /* malloc'd, grown up to the limit; NULL when empty */
    size_t body_cap;
    size_t reserved;      /* bytes of the server's body budget this request holds */
    struct tls_conn *tls; /* NULL for plain HTTP */
    char whead[768];
    char *wbody;        /* malloc'd buffer being written (body, or TLS ciphertext), or NULL */
    struct conn_buf *b; /* while there is input to parse or a request in progress */
    size_t in_off, in_len;
};

struct httpd {
    uv_tcp_t listener;
    uv_tcp_t spare; /* accepts and closes connections we cannot serve */
    uv_loop_t *loop;
    httpd_handler handler;
    void *ud;
    unsigned timeout_ms;
    unsigned methods, max_conns;
    size_t max_body;
    size_t body_budget, body_held; /* all bodies together: the limit (0: none), held now */
    uint64_t last_busy_log;
    struct tls_server *tls;
    char allow[128]; /* "Allow: GET, HEAD\r\n" */
    int port;
    int listener_open, spare_busy, reject_wanted, closing;
    int shutting; /* httpd_shutdown: the listener is closed, requests finish */
    int drain;    /* httpd_drain: still accepting, every reply closes its connection */
    uint64_t last_reject_log;
    struct conn *conns;
    size_t nconns; /* in the list, closing ones included */
    size_t nlive;  /* not closing: what the limit counts */
    size_t burst;  /* most connections open at once since the last trim */
    uint64_t seq;  /* orders conn.since */
    void (*done)(void *);
    void *done_ud;
    char raw[HTTPD_RAW_BUF]; /* TLS ciphertext, fed to a tls_conn as soon as read */
};

/* A write outside a response (TLS handshake records and alerts, 100 Continue). */
struct wchunk {
    uv_write_t req;
    struct conn *c;
    char *data;
};

static const struct {
    unsigned bit;
    enum http_method m;
    const char *name;
} methods[] = {
    {HTTPD_GET, HTTP_GET, "GET"},
    {HTTPD_HEAD, HTTP_HEAD, "HEAD"},
    {HTTPD_POST, HTTP_POST, "POST"},
    {HTTPD_PUT, HTTP_PUT, "PUT"},
    {HTTPD_PATCH, HTTP_PATCH, "PATCH"},
    {HTTPD_DELETE, HTTP_DELETE, "DELETE"},
    {HTTPD_OPTIONS, HTTP_OPTIONS, "OPTIONS"},
};
#define HTTPD_ALL_METHODS                                                                          \
    (HTTPD_GET | HTTPD_HEAD | HTTPD_POST | HTTPD_PUT | HTTPD_PATCH | HTTPD_DELETE | HTTPD_OPTIONS)

/* The method's name if s allows it, else NULL. */
static const char *allowed_method(const struct httpd *s, unsigned m)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if ((unsigned)methods[i].m == m)
            return (s->methods & methods[i].bit) ? methods[i].name : NULL;
    return NULL;
}

/* Binds and listens on a socket of our own, so that a failure leaves no
 * libuv handle behind. Returns the fd or -errno. */
static int listen_socket(const struct sockaddr_storage *sa)
{
    socklen_t len =
        sa->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (const struct sockaddr *)sa, len) != 0 || listen(fd, HTTPD_BACKLOG) != 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    return fd;
}

/* ---- connection lifetime ---- */

static void maybe_free(struct httpd *s)
{
    if (!(s->closing || s->shutting) || s->listener_open || s->spare_busy || s->conns) return;
    void (*done)(void *) = s->done;
    void *ud = s->done_ud;
    free(s);
    if (done) done(ud);
}

/* A burst of connections (a TLS handshake holds some 50 KiB of OpenSSL
 * state) leaves the heap fragmented: its free pages stay resident, the top
 * cannot shrink past what is still in use. Once a burst of at least
 * HTTPD_TRIM_BURST connections has fallen to a quarter, give the free pages
 * back (malloc_trim walks the free chunks: once per burst, not per
 * connection). */
#define HTTPD_TRIM_BURST 8
static void maybe_trim(struct httpd *s)
{
    if (s->burst < HTTPD_TRIM_BURST || s->nconns * 4 > s->burst) return;
    s->burst = s->nconns;
    (void)malloc_trim(0);
}

/* Frees the request body and gives its bytes back to the budget. */
static void body_release(struct conn *c)
{
    c->srv->body_held -= c->reserved;
    c->reserved = 0;
    free(c->body);
    c->body = NULL;
    c->body_cap = 0;
}

/* Makes the request hold want bytes of the body budget. Returns 0, or -1
 * when the bodies of all connections would exceed it (logged at most once
 * per HTTPD_REJECT_LOG_MS). */
static int body_reserve(struct conn *c, size_t want)
{
    struct httpd *s = c->srv;
    if (want <= c->reserved) return 0;
    if (s->body_budget && s->body_held - c->reserved + want > s->body_budget) {
        uint64_t now = uv_now(s->loop);
        if (s->last_busy_log == 0 || now - s->last_busy_log >= HTTPD_REJECT_LOG_MS) {
            log_warn("httpd: request bodies would hold more than %zu bytes at once; answering "
                     "503 (retry)",
                     s->body_budget);
            s->last_busy_log = now;
        }
        return -1;
    }
    s->body_held += want - c->reserved;
    c->reserved = want;
    return 0;
}

static void conn_close_cb(uv_handle_t *h)
{
    struct conn *c = h->data;
    if (--c->open_handles > 0) return;
    struct httpd *s = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    s->nconns--;
    maybe_trim(s);
    /* A handshake cut short is counted, unless the server itself closed it. */
    tls_conn_free(c->tls, c->close_why                ? c->close_why
                          : s->closing || s->shutting ? NULL
                                                      : "connection closed during the handshake");
    body_release(c);
    free(c->b);
    free(c);
    maybe_free(s);
}

/* Closes both handles; pending write/shutdown callbacks run first with
 * UV_ECANCELED, then c is freed in the last close callback. */
static void conn_close(struct conn *c)
{
    if (c->closing) return;
    c->closing = 1;
    c->srv->nlive--;
    uv_close((uv_handle_t *)&c->tcp, conn_close_cb);
    uv_close((uv_handle_t *)&c->timer, conn_close_cb);
}

static void timer_cb(uv_timer_t *t)
{
    struct conn *c = t->data;
    log_debug("httpd: closing connection idle for %u ms", c->srv->timeout_ms);
    c->close_why = "timeout";
    conn_close(c);
}

/* (Re)starts the read timeout: c now waits for a (next) request. */
static void restart_timer(struct conn *c)
{
    c->since = ++c->srv->seq;
    uv_timer_start(&c->timer, timer_cb, c->srv->timeout_ms, 0);
}

/* The input buffer, allocated if need be. */
static char *conn_in(struct conn *c)
{
    if (!c->b && !(c->b = malloc(sizeof *c->b))) ra_oom();
    return c->b->in;
}

/* Gives the buffers back once nothing is left to parse between requests. */
static void conn_trim(struct conn *c)
{
    if (c->b && c->in_off == c->in_len && !c->in_request) {
        free(c->b);
        c->b = NULL;
    }
}

/* ---- parser callbacks: collect the URL, enforce the limits ---- */

static int head_bytes(http_parser *p, size_t len)
{
    struct conn *c = p->data;
    c->head_len += len;
    if (c->head_len <= HTTPD_HEAD_MAX) return 0;
    c->err_status = 413;
    return -1;
}

static int on_message_begin(http_parser *p)
{
    struct conn *c = p->data;
    c->head_len = c->body_len = c->url_len = 0;
    c->err_status = 0;
    c->in_request = 1;
    c->hstate = c->fpos = c->fmatch = c->in_ct = c->ct_count = c->in_expect = 0;
    c->expect_n = 0;
    c->ct_off = c->ct_len = 0;
    c->expect_len = 0;
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    struct conn *c = p->data;
    if (head_bytes(p, len) != 0) return -1;
    memcpy(c->b->url + c->url_len, at, len);
    c->url_len += len;
    return 0;
}

/* The header names the server looks at; bit i of conn.fmatch: name i may
 * still match what has arrived of the current header name. */
static const char *const hnames[] = {"content-type", "expect"};
enum { H_CONTENT_TYPE = 1, H_EXPECT = 2 };

/* Header names arrive in pieces: match them as they come. */
static int on_header_field(http_parser *p, const char *at, size_t len)
{
    struct conn *c = p->data;
    if (head_bytes(p, len) != 0) return -1;
    if (c->hstate != 1) {
        c->hstate = 1;
        c->fpos = 0;
        c->fmatch = H_CONTENT_TYPE | H_EXPECT;
    }
    for (size_t i = 0; i < len && c->fmatch; i++, c->fpos++)
        for (int k = 0; k < 2; k++) {
            const char *name = hnames[k];
            if ((c->fmatch & (1 << k)) &&
                ((size_t)c->fpos >= strlen(name) || tolower((unsigned char)at[i]) != name[c->fpos]))
                c->fmatch &= ~(1 << k);
        }
    return 0;
}

/* 1 if the header name that just ended is hnames[k]. */
static int header_is(const struct conn *c, int k)
{
    return (c->fmatch & (1 << k)) && (size_t)c->fpos == strlen(hnames[k]);
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    struct conn *c = p->data;
    if (head_bytes(p, len) != 0) return -1;
    if (c->hstate != 2) {
        c->hstate = 2;
        c->in_ct = header_is(c, 0);
        c->in_expect = header_is(c, 1);
        if (c->in_ct && c->ct_count++ > 0) {
            log_debug("httpd: bad request: two Content-Type headers");
            c->err_status = 400;
            return -1;
        }
        if (c->in_ct) c->ct_off = c->url_len + 1;
    }
    if (c->in_ct) { /* url_len + ct_len <= head_len <= HTTPD_HEAD_MAX */
        memcpy(c->b->url + c->ct_off + c->ct_len, at, len);
        c->ct_len += len;
    }
    if (c->in_expect) {
        if (len <= sizeof c->expect - c->expect_n) memcpy(c->expect + c->expect_n, at, len);
        c->expect_n += len; /* over sizeof expect: not "100-continue" */
    }
    return 0;
}

static void send_continue(struct conn *c);

/* 1 if the request says "Expect: 100-continue" (trailing blanks aside). */
static int expects_continue(const struct conn *c)
{
    size_t n = c->expect_n;
    if (n > sizeof c->expect) return 0;
    while (n > 0 && (c->expect[n - 1] == ' ' || c->expect[n - 1] == '\t')) n--;
    return n == 12 && strncasecmp(c->expect, "100-continue", 12) == 0;
}

static int on_headers_complete(http_parser *p)
{
    struct conn *c = p->data;
    if ((p->flags & F_CONTENTLENGTH) && p->content_length > c->srv->max_body) {
        c->err_status = 413;
        return -1;
    }
    c->expect_len = (p->flags & F_CONTENTLENGTH) ? p->content_length : 0;
    c->allowed = allowed_method(c->srv, p->method) != NULL;
    /* the body's bytes are held from now on: refused before it is read */
    if (c->allowed && c->expect_len > 0 && body_reserve(c, (size_t)c->expect_len + 1) < 0) {
        c->err_status = 503;
        return -1;
    }
    /* A client that waits for "100 Continue" before its body (curl does
     * for bigger bodies) gets it at once when the body is welcome. */
    if (c->allowed && expects_continue(c) && p->http_major == 1 && p->http_minor >= 1 &&
        (c->expect_len > 0 || (p->flags & F_CHUNKED)))
        send_continue(c);
    return 0;
}

/* Keeps the body of an allowed request (others are only counted), in a
 * buffer that grows with what arrives, never beyond the limit (+1 for the
 * NUL). */
static int on_body(http_parser *p, const char *at, size_t len)
{
    struct conn *c = p->data;
    size_t max = c->srv->max_body;
    if (len > max - c->body_len) {
        c->err_status = 413;
        return -1;
    }
    if (c->allowed) {
        size_t need = c->body_len + len + 1;
        if (need > c->body_cap) {
            size_t cap = c->expect_len    ? (size_t)c->expect_len + 1
                         : 4096 < max + 1 ? 4096
                                          : max + 1;
            while (cap < need) cap = cap > (max + 1) / 2 ? max + 1 : cap * 2;
            if (body_reserve(c, cap) < 0) { /* a chunked body that grew past the budget */
                c->err_status = 503;
                return -1;
            }
            char *b = realloc(c->body, cap);
            if (!b) ra_oom();
            c->body = b;
            c->body_cap = cap;
        }
        memcpy(c->body + c->body_len, at, len);
    }
    c->body_len += len;
    return 0;
}

static int on_message_complete(http_parser *p)
{
    struct conn *c = p->data;
    c->keep = http_should_keep_alive(p) && !p->upgrade;
    c->in_request = 0;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- responses ---- */

static void conn_parse(struct conn *c);
static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct conn *c = h->data;
    (void)hint;
    if (c->tls || c->draining) /* fed to OpenSSL at once, or discarded */
        *buf = uv_buf_init(c->srv->raw, sizeof c->srv->raw);
    else
        *buf = uv_buf_init(conn_in(c), HTTPD_READ_BUF);
}

/* ---- TLS output ---- */

static void wchunk_cb(uv_write_t *req, int status)
{
    struct wchunk *w = req->data;
    struct conn *c = w->c;
    free(w->data);
    free(w);
    if (status < 0 && !c->closing) {
        log_debug("httpd: write failed: %s", uv_strerror(status));
        conn_close(c);
    }
}

/* Writes data (malloc'd, n bytes, taken over) outside a response: TLS
 * handshake records and alerts, "100 Continue". On failure closes c. */
static void write_aux(struct conn *c, char *data, size_t n)
{
    if (n == 0 || c->closing) {
        free(data);
        return;
    }
    struct wchunk *w = malloc(sizeof *w);
    if (!w) ra_oom();
    w->c = c;
    w->data = data;
    w->req.data = w;
    uv_buf_t b = uv_buf_init(data, (unsigned)n);
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, wchunk_cb);
    if (rc != 0) {
        log_debug("httpd: write failed: %s", uv_strerror(rc));
        free(data);
        free(w);
        conn_close(c);
    }
}

/* Writes what OpenSSL has produced outside a response. */
static void tls_flush(struct conn *c)
{
    char *data;
    size_t n = tls_conn_take(c->tls, &data);
    write_aux(c, data, n);
}

static void send_continue(struct conn *c)
{
    static const char msg[] = "HTTP/1.1 100 Continue\r\n\r\n";
    if (c->tls) {
        if (tls_conn_write(c->tls, msg, sizeof msg - 1) != 0) {
            conn_close(c);
            return;
        }
        tls_flush(c);
        return;
    }
    char *data = malloc(sizeof msg - 1);
    if (!data) ra_oom();
    memcpy(data, msg, sizeof msg - 1);
    write_aux(c, data, sizeof msg - 1);
}

/* Decrypts the next plaintext into c->b->in. Returns 1 when there is some, 0
 * when more ciphertext must be read, -1 when the connection was closed
 * (close_notify, or a TLS error: an alert, if any, is sent first). */
static int tls_pull(struct conn *c)
{
    int was_established = tls_conn_is_established(c->tls);
    long n = tls_conn_read(c->tls, conn_in(c), HTTPD_READ_BUF);
    tls_flush(c);
    if (c->closing) return -1;
    if (!was_established && tls_conn_is_established(c->tls)) {
        /* The client's Finished gets no reply (no session tickets), so
         * its ACK would be delayed (40 ms), and a client that has Nagle on
         * holds its request until then: acknowledge it now. */
        uv_os_fd_t fd;
        int one = 1;
        if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0)
            (void)setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
    }
    if (n > 0) {
        c->in_off = 0;
        c->in_len = (size_t)n;
        return 1;
    }
    if (n == 0) return 0;
    c->close_why = n == TLS_CONN_EOF ? "close_notify during the handshake" : "TLS error";
    conn_close(c);
    return -1;
}

static void start_reading(struct conn *c)
{
    if (c->reading || c->closing) return;
    if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) != 0) {
        conn_close(c);
        return;
    }
    c->reading = 1;
}

static void stop_reading(struct conn *c)
{
    if (!c->reading) return;
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
}

static void shutdown_cb(uv_shutdown_t *req, int status)
{
    struct conn *c = req->data;
    if (status < 0) conn_close(c);
}

static void write_cb(uv_write_t *req, int status)
{
    struct conn *c = req->data;
    c->writing = 0;
    free(c->wbody);
    c->wbody = NULL;
    if (c->closing) return;
    if (status < 0) {
        log_debug("httpd: write failed: %s", uv_strerror(status));
        conn_close(c);
        return;
    }
    restart_timer(c);
    if (!c->keep || c->srv->shutting) {
        /* Lingering close: close_notify, FIN, then discard input until EOF
         * or timeout. */
        c->draining = 1;
        if (c->tls) {
            tls_conn_shutdown(c->tls);
            tls_flush(c);
            if (c->closing) return;
        }
        c->sreq.data = c;
        if (uv_shutdown(&c->sreq, (uv_stream_t *)&c->tcp, shutdown_cb) != 0)
            conn_close(c);
        else
            start_reading(c);
        return;
    }
    conn_parse(c); /* a pipelined request may already be buffered */
    if (!c->writing) start_reading(c);
}

/* Writes one response: body[0..body_len) (HEAD: only the head). An owned
 * body is malloc'd and freed once written (TLS: once encrypted); else it
 * must be static. */
static void conn_send(struct conn *c, int status, const char *ctype, char *body, size_t body_len,
                      int owned, const char *extra_header)
{
    const char *reason = http_status_str((enum http_status)status);
    if (reason[0] == '<') reason = "Unknown";
    /* the last reply on this connection */
    if (c->srv->shutting || c->srv->drain) c->keep = 0;
    int n = snprintf(
        c->whead, sizeof c->whead,
        "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: %s\r\n\r\n",
        status, reason, ctype, body_len, extra_header, c->keep ? "keep-alive" : "close");
    uv_buf_t bufs[2] = {uv_buf_init(c->whead, (unsigned)n), uv_buf_init(body, (unsigned)body_len)};
    unsigned nbufs = body_len > 0 && c->parser.method != HTTP_HEAD ? 2 : 1;
    c->wbody = owned ? body : NULL;
    c->wreq.data = c;
    stop_reading(c);
    if (c->tls) { /* encrypt it all; the ciphertext replaces the body */
        int bad = tls_conn_write(c->tls, c->whead, (size_t)n) != 0 ||
                  (nbufs == 2 && tls_conn_write(c->tls, body, body_len) != 0);
        free(c->wbody);
        c->wbody = NULL;
        char *data = NULL;
        size_t len = bad ? 0 : tls_conn_take(c->tls, &data);
        if (bad || len == 0) {
            free(data);
            conn_close(c);
            return;
        }
        c->wbody = data;
        bufs[0] = uv_buf_init(data, (unsigned)len);
        nbufs = 1;
    }
    int rc = uv_write(&c->wreq, (uv_stream_t *)&c->tcp, bufs, nbufs, write_cb);
    if (rc != 0) {
        log_debug("httpd: write failed: %s", uv_strerror(rc));
        free(c->wbody);
        c->wbody = NULL;
        conn_close(c);
        return;
    }
    c->writing = 1;
}

/* A canned reply for a request we refuse; all but 405 end the connection. */
static void conn_error(struct conn *c, int status)
{
    static char bad[] = "bad request\n", method[] = "method not allowed\n",
                large[] = "request too large\n", internal[] = "internal error\n",
                busy[] = "busy: other requests hold the memory for request bodies; retry\n";
    char *body = status == 400   ? bad
                 : status == 405 ? method
                 : status == 413 ? large
                 : status == 503 ? busy
                                 : internal;
    if (status != 405) c->keep = 0;
    conn_send(c, status, HTTPD_DEFAULT_TYPE, body, strlen(body), 0,
              status == 405   ? c->srv->allow
              : status == 503 ? "Retry-After: 1\r\n"
                              : "");
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* Decodes %XX in s[0..len) in place and NUL-terminates. Returns 0, or -1
 * for a broken escape or an encoded NUL. */
static int percent_decode(char *s, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '%') {
            s[o++] = s[i];
            continue;
        }
        int hi = i + 2 < len ? hexval(s[i + 1]) : -1;
        int lo = hi >= 0 ? hexval(s[i + 2]) : -1;
        if (lo < 0 || (hi | lo) == 0) return -1;
        s[o++] = (char)(hi * 16 + lo);
        i += 2;
    }
    s[o] = '\0';
    return 0;
}

static int valid_content_type(const char *t)
{
    size_t n = strlen(t);
    if (n == 0 || n > 128) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] < 0x20 || t[i] == 0x7f) return 0;
    return 1;
}

/* resp.headers: lines "Name: value\r\n" (token name, visible value), at
 * most HTTPD_EXTRA_MAX bytes, none the server writes itself. */
static int valid_extra_headers(const char *h)
{
    static const char *const ours[] = {
        "content-type:", "content-length:", "connection:", "transfer-encoding:"};
    size_t n = strlen(h);
    if (n > HTTPD_EXTRA_MAX) return 0;
    while (*h) {
        const char *colon = h;
        while (*colon && *colon != ':' &&
               (isalnum((unsigned char)*colon) || strchr("!#$%&'*+-.^_`|~", *colon)))
            colon++;
        if (*colon != ':' || colon == h) return 0;
        for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++)
            if (strncasecmp(h, ours[i], strlen(ours[i])) == 0) return 0;
        const char *v = colon + 1;
        for (; *v && *v != '\r'; v++)
            if (((unsigned char)*v < 0x20 && *v != '\t') || *v == 0x7f) return 0;
        if (v[0] != '\r' || v[1] != '\n') return 0;
        h = v + 2;
    }
    return 1;
}

/* A complete request is in c->b->url / c->parser: validate, call the handler,
 * send its response. */
static void conn_request(struct conn *c)
{
    const char *method = allowed_method(c->srv, c->parser.method);
    if (!method) {
        conn_error(c, 405);
        return;
    }
    struct http_parser_url u;
    http_parser_url_init(&u);
    if (http_parser_parse_url(c->b->url, c->url_len, 0, &u) != 0) {
        conn_error(c, 400);
        return;
    }
    c->b->url[c->url_len] = '\0';
    const char *path = "/", *query = "";
    if (u.field_set & (1u << UF_QUERY)) {
        char *q = c->b->url + u.field_data[UF_QUERY].off;
        q[u.field_data[UF_QUERY].len] = '\0'; /* over '#' or the final NUL */
        query = q;
    }
    if (u.field_set & (1u << UF_PATH)) {
        char *p = c->b->url + u.field_data[UF_PATH].off;
        if (percent_decode(p, u.field_data[UF_PATH].len) != 0) {
            conn_error(c, 400);
            return;
        }
        path = p;
    }
    const char *ctype = NULL;
    if (c->ct_count) {
        char *t = c->b->url + c->ct_off;
        while (c->ct_len > 0 && (t[c->ct_len - 1] == ' ' || t[c->ct_len - 1] == '\t')) c->ct_len--;
        t[c->ct_len] = '\0';
        ctype = t;
    }
    if (c->body) c->body[c->body_len] = '\0';
    struct httpd_req req = {.method = method,
                            .path = path,
                            .query = query,
                            .content_type = ctype,
                            .body = c->body ? c->body : "",
                            .body_len = c->body ? c->body_len : 0,
                            .conn_ = c};
    struct httpd_resp resp = {.status = 200, .content_type = HTTPD_DEFAULT_TYPE};
    c->srv->handler(c->srv->ud, &req, &resp);
    body_release(c);  /* an idle keep-alive connection holds no body buffer */
    if (c->closing) { /* the handler closed the server */
        free(resp.body);
        return;
    }
    if (!resp.body) resp.body_len = 0;
    if (!resp.content_type) resp.content_type = HTTPD_DEFAULT_TYPE;
    if (!resp.headers) resp.headers = "";
    if (resp.status < 100 || resp.status > 599 || !valid_content_type(resp.content_type) ||
        !valid_extra_headers(resp.headers)) {
        log_error("httpd: handler for \"%s\" returned status %d with an invalid status, "
                  "content type or extra header; answering 500",
                  path, resp.status);
        free(resp.body);
        conn_error(c, 500);
        return;
    }
    conn_send(c, resp.status, resp.content_type, resp.body, resp.body_len, 1, resp.headers);
}

/* Feeds buffered input to the parser until it is used up, a request is
 * being answered, or the connection ends. */
static void conn_parse(struct conn *c)
{
    while (!c->closing && !c->writing) {
        if (c->in_off == c->in_len) {
            c->in_off = c->in_len = 0;
            if (!c->tls || tls_pull(c) <= 0) break;
        }
        size_t avail = c->in_len - c->in_off;
        size_t n = http_parser_execute(&c->parser, &parser_settings, c->b->in + c->in_off, avail);
        c->in_off += n;
        enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
        if (e == HPE_PAUSED) {
            http_parser_pause(&c->parser, 0);
            conn_request(c);
        } else if (c->err_status) {
            conn_error(c, c->err_status);
        } else if (e != HPE_OK || n < avail) {
            log_debug("httpd: bad request: %s", http_errno_name(e));
            conn_error(c, e == HPE_HEADER_OVERFLOW ? 413 : 400);
        }
    }
    if (c->in_off == c->in_len) c->in_off = c->in_len = 0;
    if (!c->closing) conn_trim(c);
}

static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = st->data;
    if (nread < 0) { /* EOF or error; reading is off while a write is pending */
        conn_close(c);
        return;
    }
    if (nread == 0 || c->draining) {
        if (!c->tls) conn_trim(c);
        return;
    }
    if (c->tls) {
        tls_conn_feed(c->tls, buf->base, (size_t)nread);
    } else {
        c->in_off = 0;
        c->in_len = (size_t)nread;
    }
    conn_parse(c);
}

/* ---- accepting ---- */

static void reject(struct httpd *s);

static void spare_close_cb(uv_handle_t *h)
{
    struct httpd *s = h->data;
    s->spare_busy = 0;
    if (s->reject_wanted && !s->closing && !s->shutting) {
        s->reject_wanted = 0;
        reject(s);
    }
    maybe_free(s);
}

/* Accepts the pending connection into the spare handle and closes it. If
 * the spare is still closing, libuv keeps the connection pending (and stops
 * polling the listener) until spare_close_cb accepts it. */
static void reject(struct httpd *s)
{
    if (s->spare_busy) {
        s->reject_wanted = 1;
        return;
    }
    uv_tcp_init(s->loop, &s->spare);
    s->spare.data = s;
    s->spare_busy = 1;
    uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)&s->spare);
    uv_close((uv_handle_t *)&s->spare, spare_close_cb);
}

/* The connection to give up when the limit is reached: the one that has
 * waited longest for a request it has not completed (idle, or sending a
 * partial request: a slowloris), else the oldest that is lingering after
 * its final reply; never one whose reply is being written. NULL if all are
 * writing. */
static struct conn *eviction_victim(struct httpd *s)
{
    struct conn *idle = NULL, *lingering = NULL;
    for (struct conn *c = s->conns; c; c = c->next) {
        if (c->closing || c->writing) continue;
        struct conn **best = c->draining ? &lingering : &idle;
        if (!*best || c->since < (*best)->since) *best = c;
    }
    return idle ? idle : lingering;
}

/* Logs at most once per HTTPD_REJECT_LOG_MS. */
static void log_limit(struct httpd *s, const char *what)
{
    uint64_t now = uv_now(s->loop);
    if (s->last_reject_log == 0 || now - s->last_reject_log >= HTTPD_REJECT_LOG_MS) {
        log_warn("httpd: %u connections open; %s", s->max_conns, what);
        s->last_reject_log = now;
    }
}

/* Reads what the client has already sent, right at accept. libuv accepts
 * every pending connection in one go before it reads any of them; at the
 * limit each accept closes the longest-waiting connection, so a probe queued
 * behind a burst of slow clients could be closed before its request, which
 * is usually already here, was read. Answered now, it is no longer waiting
 * (a reply being written is never closed to make room). */
static void read_at_accept(struct conn *c)
{
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0) return;
    ssize_t n;
    char *into = c->tls ? c->srv->raw : conn_in(c);
    size_t cap = c->tls ? sizeof c->srv->raw : HTTPD_READ_BUF;
    do n = recv(fd, into, cap, MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n == 0) {
        conn_close(c); /* the client has already gone */
        return;
    }
    if (n < 0) { /* EAGAIN: nothing yet; errors surface on the next read */
        conn_trim(c);
        return;
    }
    if (c->tls) {
        tls_conn_feed(c->tls, into, (size_t)n);
    } else {
        c->in_off = 0;
        c->in_len = (size_t)n;
    }
    conn_parse(c);
}

static void on_connection(uv_stream_t *server, int status)
{
    struct httpd *s = server->data;
    if (status < 0) {
        log_warn("httpd: accept failed: %s", uv_strerror(status));
        return;
    }
    if (s->nlive >= s->max_conns) {
        /* Slow or idle clients must not lock out health probes: make room
         * by closing the one that has waited longest without a request. */
        struct conn *victim = eviction_victim(s);
        if (!victim) {
            log_limit(s, "all busy answering; closing new ones");
            reject(s);
            return;
        }
        log_limit(s, "closing the one waiting longest for a request to serve new ones");
        victim->close_why = "evicted at the connection limit";
        conn_close(victim);
    }
    struct conn *c = calloc(1, sizeof *c);
    if (!c) {
        log_error("httpd: out of memory; closing a new connection");
        reject(s);
        return;
    }
    c->srv = s;
    uv_tcp_init(s->loop, &c->tcp);
    uv_timer_init(s->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->open_handles = 2;
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    s->nconns++;
    s->nlive++;
    if (s->nconns > s->burst) s->burst = s->nconns;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    if (s->tls) c->tls = tls_conn_new(s->tls);
    restart_timer(c);
    read_at_accept(c);
    if (!c->closing && !c->writing) start_reading(c);
}

/* ---- public API ---- */

int httpd_start_opts(uv_loop_t *loop, const char *listen, const struct httpd_opts *opts,
                     httpd_handler h, void *ud, struct httpd **out)
{
    static const struct httpd_opts defaults = {0};
    if (!opts) opts = &defaults;
    if (opts->methods & ~(unsigned)HTTPD_ALL_METHODS) {
        log_error("httpd: unknown method bits 0x%x", opts->methods & ~(unsigned)HTTPD_ALL_METHODS);
        return UV_EINVAL;
    }
    struct sockaddr_storage sa;
    char err[160];
    if (addr_parse_listen(listen, &sa, err, sizeof err) != 0) {
        log_error("httpd: %s", err);
        return UV_EINVAL;
    }
    struct httpd *s = calloc(1, sizeof *s);
    if (!s) return UV_ENOMEM;
    int fd = listen_socket(&sa);
    if (fd < 0) {
        free(s);
        return fd;
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    getsockname(fd, (struct sockaddr *)&bound, &blen);
    s->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                : ((struct sockaddr_in *)&bound)->sin_port);
    s->loop = loop;
    s->handler = h;
    s->ud = ud;
    s->timeout_ms = opts->timeout_ms ? opts->timeout_ms : HTTPD_TIMEOUT_MS;
    s->methods = opts->methods ? opts->methods : HTTPD_GET | HTTPD_HEAD;
    s->max_body = opts->max_body ? opts->max_body : HTTPD_BODY_MAX;
    s->body_budget = opts->body_budget;
    s->max_conns = opts->max_conns ? opts->max_conns : HTTPD_MAX_CONNS;
    s->tls = opts->tls;
    size_t off = (size_t)snprintf(s->allow, sizeof s->allow, "Allow:");
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (s->methods & methods[i].bit)
            off += (size_t)snprintf(s->allow + off, sizeof s->allow - off, "%s %s",
                                    off > 6 ? "," : "", methods[i].name);
    snprintf(s->allow + off, sizeof s->allow - off, "\r\n");
    uv_tcp_init(loop, &s->listener);
    s->listener.data = s;
    s->listener_open = 1;
    int rc = uv_tcp_open(&s->listener, fd);
    if (rc != 0) close(fd); /* else the handle owns fd */
    if (rc == 0) rc = uv_listen((uv_stream_t *)&s->listener, HTTPD_BACKLOG, on_connection);
    if (rc != 0) {
        /* Unexpected for a socket that already listens; the handle is then
         * freed by the next loop iteration. */
        httpd_close(s, NULL, NULL);
        return rc;
    }
    *out = s;
    return 0;
}

int httpd_start(uv_loop_t *loop, const char *listen, httpd_handler h, void *ud, struct httpd **out)
{
    return httpd_start_opts(loop, listen, NULL, h, ud, out);
}

int httpd_port(const struct httpd *s) { return s->port; }

void httpd_req_release_body(const struct httpd_req *req)
{
    struct conn *c = req->conn_;
    if (c) body_release(c);
}

void httpd_set_timeout(struct httpd *s, unsigned ms) { s->timeout_ms = ms; }

static void listener_close_cb(uv_handle_t *h)
{
    struct httpd *s = h->data;
    s->listener_open = 0;
    maybe_free(s);
}

void httpd_close(struct httpd *s, void (*done)(void *), void *ud)
{
    if (s->closing) return;
    s->closing = 1;
    if (!s->shutting) { /* else the listener is closing and done is set */
        s->done = done;
        s->done_ud = ud;
        uv_close((uv_handle_t *)&s->listener, listener_close_cb);
    }
    for (struct conn *c = s->conns; c; c = c->next) conn_close(c);
}

void httpd_drain(struct httpd *s)
{
    /* Nothing is closed here: an idle connection's next request gets a
     * closing reply, and httpd_shutdown closes those still idle then. */
    if (!s->closing) s->drain = 1;
}

void httpd_shutdown(struct httpd *s, void (*done)(void *), void *ud)
{
    if (s->closing || s->shutting) return;
    s->shutting = 1;
    s->done = done;
    s->done_ud = ud;
    uv_close((uv_handle_t *)&s->listener, listener_close_cb);
    /* Keep only the connections with a request arriving or a reply being
     * written; the others (idle, in a TLS handshake, lingering after a
     * final reply) have nothing in flight. */
    for (struct conn *c = s->conns; c; c = c->next)
        if (!c->writing && (!c->in_request || c->draining)) conn_close(c);
}
