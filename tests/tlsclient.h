/*
 * tlsclient.h - the client side of the server tests (test_httpd.c over
 * plain TCP, test_tls.c over TLS): the server runs in the test's libuv loop
 * on the main thread, the client on a thread of its own with blocking
 * sockets to 127.0.0.1 or ::1, every socket with 5 s send and receive
 * timeouts and every read loop bounded. When the client is done it wakes
 * the loop through a uv_async_t, which closes the server; a deadline timer
 * is the backstop. Static inline functions: each test binary that includes
 * this gets its own copy. Include it after <cmocka.h>.
 */
#ifndef RA_TESTS_TLSCLIENT_H
#define RA_TESTS_TLSCLIENT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <uv.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "net/httpd.h"

/* ---- the loop side: a client thread against a server in the loop ---- */

/* What runs the client thread against the server: the test's fixture fx,
 * its client, and the server, closed once on the loop thread when the
 * client is done or the deadline passed (httpd_shutdown when graceful). */
struct srv_run {
    uv_async_t async;
    uv_timer_t deadline;
    void *fx;
    void (*client)(void *fx);
    struct httpd *srv;
    int graceful;
    int stopping, signalled, timed_out, closed;
    pthread_t thread;
};

static inline void srv_run_closed(void *ud) { ((struct srv_run *)ud)->closed++; }

static inline void srv_run_stop(struct srv_run *r)
{
    if (r->stopping) return;
    r->stopping = 1;
    if (r->graceful)
        httpd_shutdown(r->srv, srv_run_closed, r);
    else
        httpd_close(r->srv, srv_run_closed, r);
    uv_close((uv_handle_t *)&r->deadline, NULL);
}

static inline void srv_run_async_cb(uv_async_t *a)
{
    srv_run_stop(a->data);
    uv_close((uv_handle_t *)a, NULL);
}

static inline void srv_run_deadline_cb(uv_timer_t *t)
{
    struct srv_run *r = t->data;
    r->timed_out = 1;
    srv_run_stop(r);
}

/* Wakes the loop to close the server; at most once per run (the client
 * thread calls it when it is done, and may call it earlier). */
static inline void srv_signal_close(struct srv_run *r)
{
    if (r->signalled) return;
    r->signalled = 1;
    uv_async_send(&r->async);
}

static inline void *srv_run_thread(void *arg)
{
    struct srv_run *r = arg;
    r->client(r->fx);
    srv_signal_close(r);
    return NULL;
}

/* Runs client(fx) on a thread against srv, already started in loop, until
 * srv is closed (httpd_shutdown when graceful, else httpd_close) and the
 * loop has nothing left (deadline_ms at most); fails the test if the
 * deadline passed or srv did not close exactly once. */
static inline void srv_run(struct srv_run *r, uv_loop_t *loop, unsigned deadline_ms, void *fx,
                           void (*client)(void *), struct httpd *srv, int graceful)
{
    r->fx = fx;
    r->client = client;
    r->srv = srv;
    r->graceful = graceful;
    r->stopping = r->signalled = r->timed_out = r->closed = 0;
    r->async.data = r->deadline.data = r;
    assert_int_equal(uv_async_init(loop, &r->async, srv_run_async_cb), 0);
    assert_int_equal(uv_timer_init(loop, &r->deadline), 0);
    assert_int_equal(uv_timer_start(&r->deadline, srv_run_deadline_cb, deadline_ms, 0), 0);
    assert_int_equal(pthread_create(&r->thread, NULL, srv_run_thread, r), 0);
    assert_int_equal(uv_run(loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(pthread_join(r->thread, NULL), 0);
    assert_int_equal(r->timed_out, 0);
    assert_int_equal(r->closed, 1);
}

/* ---- the client thread: plain sockets ---- */

/* A TCP connection to port on the loopback address of family (AF_INET or
 * AF_INET6), with 5 s send and receive timeouts; the fd, or -1. */
static inline int cli_connect(int family, int port)
{
    struct timeval tv = {.tv_sec = 5};
    struct sockaddr_storage ss;
    socklen_t len;
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0) return -1;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    memset(&ss, 0, sizeof ss);
    if (family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        a->sin6_addr = in6addr_loopback;
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *a;
    }
    if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends all n bytes of s; 0, or -1 on an error or a timeout. */
static inline int cli_send(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0) return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads exactly n bytes (NUL-terminated, the caller frees them), or NULL
 * on EOF, an error or a timeout first. */
static inline char *cli_read_n(int fd, size_t n)
{
    char *buf = malloc(n + 1);
    size_t got = 0;

    assert_non_null(buf);
    while (got < n) {
        ssize_t r = recv(fd, buf + got, n - got, 0);
        if (r <= 0) {
            free(buf);
            return NULL;
        }
        got += (size_t)r;
    }
    buf[n] = '\0';
    return buf;
}

/* ---- the client thread: TLS (an in-process OpenSSL client) ---- */

/* One TLS connection: its socket and its OpenSSL state. */
struct tc {
    int fd;
    SSL *ssl;
};

/* Connects to 127.0.0.1:port and completes the handshake with ctx,
 * verifying the name "localhost" and offering h2 and http/1.1, resuming
 * resume when not NULL. Returns 0, or -1 with nothing left open. */
static inline int tls_open(int port, SSL_CTX *ctx, SSL_SESSION *resume, struct tc *t)
{
    t->fd = cli_connect(AF_INET, port);
    if (t->fd < 0) return -1;
    t->ssl = SSL_new(ctx);
    SSL_set_fd(t->ssl, t->fd);
    SSL_set_tlsext_host_name(t->ssl, "localhost");
    SSL_set1_host(t->ssl, "localhost");
    SSL_set_alpn_protos(t->ssl, (const unsigned char *)"\x02h2\x08http/1.1", 12);
    if (resume) SSL_set_session(t->ssl, resume);
    if (SSL_connect(t->ssl) != 1) {
        ERR_clear_error();
        SSL_free(t->ssl);
        close(t->fd);
        t->ssl = NULL;
        t->fd = -1;
        return -1;
    }
    return 0;
}

/* Frees the connection (no close_notify is sent). */
static inline void tls_close(struct tc *t)
{
    if (t->ssl) SSL_free(t->ssl);
    if (t->fd >= 0) close(t->fd);
    t->ssl = NULL;
    t->fd = -1;
    ERR_clear_error();
}

/* Sends the string s; 0, or -1. */
static inline int tls_send(struct tc *t, const char *s)
{
    size_t n = strlen(s);
    return SSL_write(t->ssl, s, (int)n) == (int)n ? 0 : -1;
}

/* Reads exactly n bytes (NUL-terminated, the caller frees them); NULL on
 * EOF or an error first. */
static inline char *tls_read_n(struct tc *t, size_t n)
{
    char *buf = malloc(n + 1);
    size_t got = 0;

    assert_non_null(buf);
    while (got < n) {
        int r = SSL_read(t->ssl, buf + got, (int)(n - got));
        if (r <= 0) {
            free(buf);
            ERR_clear_error();
            return NULL;
        }
        got += (size_t)r;
    }
    buf[n] = '\0';
    return buf;
}

#endif
