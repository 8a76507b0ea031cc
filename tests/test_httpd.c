/*
 * test_httpd.c - the built-in HTTP server against real sockets. Each test
 * runs the server in its own libuv loop on the main thread; a client thread
 * (tests/tlsclient.h) drives it with blocking sockets over 127.0.0.1 or ::1
 * (every socket has 5 s send/receive timeouts, every loop is bounded),
 * stores what it received, and wakes the loop through a uv_async_t, which closes the
 * server. A 20 s deadline timer is the backstop. Expected replies are
 * written out from the wire format the server promises:
 *   HTTP/1.1 <code> <reason>\r\nContent-Type: ...\r\nContent-Length: N\r\n
 *   [Allow: GET, HEAD\r\n]Connection: keep-alive|close\r\n\r\n<body>
 * Tests that pass httpd_opts (POST bodies, other limits) set f->opts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/httpd.h"
#include "base/addr.h"
#include "tests/tlsclient.h"

#define MAX_EX 12
#define BIG_LEN (4u << 20)
#define CROWD 70

enum { END_EOF = 1, END_TIMEOUT = 2, END_RESET = 3 };

struct fx {
    uv_loop_t loop;
    struct srv_run run; /* the client thread and the deadline */
    struct httpd *srv;
    int family;
    int port;
    int closed;
    int handler_calls;
    int blocking; /* set by /block (atomically: read by the client thread) */
    void (*client)(struct fx *);
    /* client input and results */
    const char *req[MAX_EX];
    size_t nreq;
    char *res[MAX_EX];
    int end[MAX_EX];
    int val[8];
    const struct httpd_opts *opts; /* NULL: httpd_start with the defaults */
    int graceful;                  /* srv_run closes the server with httpd_shutdown */
    uv_async_t drain;              /* the client asks for httpd_drain (test_drain) */
    int drained;                   /* set (atomically) once httpd_drain has run */
};

/* FNV-1a of a body: the /post handler reports it, the client computes it. */
static uint32_t fnv(const char *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 16777619u;
    return h;
}

/* ---- server side (loop thread) ---- */

static void handler(void *ud, const struct httpd_req *req, struct httpd_resp *resp)
{
    struct fx *f = ud;
    f->handler_calls++;
    if (strcmp(req->path, "/hello") == 0) {
        resp->body = strdup("hello");
        resp->body_len = 5;
    } else if (strncmp(req->path, "/echo", 5) == 0) {
        resp->content_type = "text/x-echo";
        int n =
            asprintf(&resp->body, "method=%s path=%s query=%s", req->method, req->path, req->query);
        resp->body_len = n > 0 ? (size_t)n : 0;
    } else if (strcmp(req->path, "/big") == 0) {
        resp->body = malloc(BIG_LEN);
        memset(resp->body, 'x', BIG_LEN);
        resp->body_len = BIG_LEN;
    } else if (strcmp(req->path, "/block") == 0) {
        /* holds the loop, so that connections queue up in the backlog */
        __atomic_store_n(&f->blocking, 1, __ATOMIC_SEQ_CST);
        usleep(300 * 1000);
    } else if (strcmp(req->path, "/post") == 0) {
        /* what arrived: method, Content-Type, body length, checksum, and the
         * body itself when short */
        resp->content_type = "text/x-post";
        int n = asprintf(&resp->body, "method=%s ct=%s len=%zu fnv=%08x nul=%d body=%s",
                         req->method, req->content_type ? req->content_type : "(none)",
                         req->body_len, fnv(req->body, req->body_len),
                         req->body[req->body_len] == '\0', req->body_len <= 64 ? req->body : "...");
        resp->body_len = n > 0 ? (size_t)n : 0;
    } else if (strcmp(req->path, "/unsupported") == 0) {
        resp->status = 415;
        resp->headers = "Accept-Post: application/json\r\nX-Reason: type\r\n";
        resp->body = strdup("unsupported\n");
        resp->body_len = 12;
    } else if (strncmp(req->path, "/badheader", 10) == 0) {
        static const char *const bad[] = {
            "X-Injected: 1\r\nHTTP/1.1 200 OK", /* no final CRLF */
            "X-A: 1\nX-B: 2\r\n",               /* bare LF */
            "Bad Name: 1\r\n",                  /* space in the name */
            ": empty\r\n",
            "Content-Length: 9\r\n", /* the server's own */
            "X-Long: "
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
            "aaaaaaaa"
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
            "aaaaaaaa"
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n"};
        resp->headers = bad[atoi(req->path + 10) % 6];
    } else if (strcmp(req->path, "/badstatus") == 0) {
        resp->status = 42;
    } else if (strcmp(req->path, "/badtype") == 0) {
        resp->content_type = "text/plain\r\nX-Injected: 1";
    } else {
        resp->status = 404;
        resp->body = strdup("not found\n");
        resp->body_len = 10;
    }
}

static void on_closed(void *ud) { ((struct fx *)ud)->closed++; }

/* ---- client side (client thread; tests/tlsclient.h) ---- */

static void run_client(void *arg)
{
    struct fx *f = arg;
    f->client(f);
}

/* Reads until EOF (END_EOF), the 5 s receive timeout (END_TIMEOUT) or an
 * error such as a reset (END_RESET). Returns the bytes, NUL-terminated. */
static char *cli_read_all(int fd, int *end)
{
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap + 1);
    for (int i = 0; i < 100000; i++) {
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
        }
        ssize_t r = recv(fd, buf + len, cap - len, 0);
        if (r > 0) {
            len += (size_t)r;
            continue;
        }
        *end = r == 0                                      ? END_EOF
               : (errno == EAGAIN || errno == EWOULDBLOCK) ? END_TIMEOUT
                                                           : END_RESET;
        break;
    }
    buf[len] = '\0';
    return buf;
}

/* One connection per f->req[i]: send it, read the reply until EOF. */
static void client_exchanges(struct fx *f)
{
    for (size_t i = 0; i < f->nreq; i++) {
        int fd = cli_connect(f->family, f->port);
        if (fd < 0) continue;
        if (cli_send(fd, f->req[i], strlen(f->req[i])) == 0)
            f->res[i] = cli_read_all(fd, &f->end[i]);
        close(fd);
    }
}

/* ---- test plumbing ---- */

static void run_on(struct fx *f, const char *listen, unsigned timeout_ms,
                   void (*client)(struct fx *))
{
    assert_int_equal(uv_loop_init(&f->loop), 0);
    if (f->opts)
        assert_int_equal(httpd_start_opts(&f->loop, listen, f->opts, handler, f, &f->srv), 0);
    else
        assert_int_equal(httpd_start(&f->loop, listen, handler, f, &f->srv), 0);
    if (timeout_ms) httpd_set_timeout(f->srv, timeout_ms);
    f->port = httpd_port(f->srv);
    assert_true(f->port > 0);
    if (!f->family) f->family = AF_INET;
    f->client = client;
    srv_run(&f->run, &f->loop, 20000, f, run_client, f->srv, f->graceful);
    assert_int_equal(uv_loop_close(&f->loop), 0);
}

static void run(struct fx *f, void (*client)(struct fx *)) { run_on(f, "127.0.0.1:0", 0, client); }

static void free_results(struct fx *f)
{
    for (size_t i = 0; i < MAX_EX; i++) free(f->res[i]);
}

/* The reply the contract promises, built from its parts. */
static char *reply(const char *status, const char *ctype, const char *body, size_t body_len,
                   const char *extra, int keep, int with_body)
{
    char *s;
    int n = asprintf(
        &s, "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: %s\r\n\r\n%s",
        status, ctype, body_len, extra, keep ? "keep-alive" : "close", with_body ? body : "");
    assert_true(n > 0);
    return s;
}

#define PLAIN "text/plain; charset=utf-8"

static char *hello(int keep, int with_body)
{
    return reply("200 OK", PLAIN, "hello", 5, "", keep, with_body);
}

static char *canned(const char *status, const char *body)
{
    return reply(status, PLAIN, body, strlen(body), "", 0, 1);
}

static void expect_result(struct fx *f, size_t i, char *want)
{
    assert_non_null(f->res[i]);
    assert_string_equal(f->res[i], want);
    assert_int_equal(f->end[i], END_EOF);
    free(want);
}

/* ---- tests ---- */

static void test_get_head_404(void **state)
{
    (void)state;
    struct fx f = {0};
    f.req[0] = "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    f.req[1] = "HEAD /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    f.req[2] = "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    f.req[3] = "HEAD /nope HTTP/1.1\r\nConnection: close\r\n\r\n";
    f.nreq = 4;
    run(&f, client_exchanges);
    expect_result(&f, 0, hello(0, 1));
    expect_result(&f, 1, hello(0, 0));
    expect_result(&f, 2, reply("404 Not Found", PLAIN, "not found\n", 10, "", 0, 1));
    expect_result(&f, 3, reply("404 Not Found", PLAIN, "not found\n", 10, "", 0, 0));
    assert_int_equal(f.handler_calls, 4);
    free_results(&f);
}

static void test_path_decoding_and_query(void **state)
{
    (void)state;
    struct fx f = {0};
    f.req[0] = "GET /echo%2Fa%20b?x=%41&y=1#frag HTTP/1.1\r\nConnection: close\r\n\r\n";
    f.req[1] = "GET /echo HTTP/1.1\r\nConnection: close\r\n\r\n";
    f.req[2] = "GET http://example.test:8080/echo/abs?q HTTP/1.1\r\nConnection: close\r\n\r\n";
    f.nreq = 3;
    run(&f, client_exchanges);
    const char *b0 = "method=GET path=/echo/a b query=x=%41&y=1";
    const char *b1 = "method=GET path=/echo query=";
    const char *b2 = "method=GET path=/echo/abs query=q";
    expect_result(&f, 0, reply("200 OK", "text/x-echo", b0, strlen(b0), "", 0, 1));
    expect_result(&f, 1, reply("200 OK", "text/x-echo", b1, strlen(b1), "", 0, 1));
    expect_result(&f, 2, reply("200 OK", "text/x-echo", b2, strlen(b2), "", 0, 1));
    free_results(&f);
}

static void test_bad_handler_output_is_500(void **state)
{
    (void)state;
    struct fx f = {0};
    f.req[0] = "GET /badstatus HTTP/1.1\r\n\r\n";
    f.req[1] = "GET /badtype HTTP/1.1\r\n\r\n";
    f.nreq = 2;
    run(&f, client_exchanges);
    expect_result(&f, 0, canned("500 Internal Server Error", "internal error\n"));
    expect_result(&f, 1, canned("500 Internal Server Error", "internal error\n"));
    free_results(&f);
}

/* A POST gets 405 and the connection stays usable; the handler never sees it. */
static void client_405_then_get(struct fx *f)
{
    int fd = cli_connect(f->family, f->port);
    if (fd < 0) return;
    const char *post = "POST /hello HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
    char *want = reply("405 Method Not Allowed", PLAIN, "method not allowed\n", 19,
                       "Allow: GET, HEAD\r\n", 1, 1);
    if (cli_send(fd, post, strlen(post)) == 0) {
        f->res[0] = cli_read_n(fd, strlen(want));
        const char *get = "GET /hello HTTP/1.1\r\nConnection: close\r\n\r\n";
        if (cli_send(fd, get, strlen(get)) == 0) f->res[1] = cli_read_all(fd, &f->end[1]);
    }
    free(want);
    close(fd);
}

static void test_405_keeps_connection(void **state)
{
    (void)state;
    struct fx f = {0};
    run(&f, client_405_then_get);
    assert_non_null(f.res[0]);
    char *want = reply("405 Method Not Allowed", PLAIN, "method not allowed\n", 19,
                       "Allow: GET, HEAD\r\n", 1, 1);
    assert_string_equal(f.res[0], want);
    free(want);
    expect_result(&f, 1, hello(0, 1));
    assert_int_equal(f.handler_calls, 1);
    free_results(&f);
}

static void test_malformed_400(void **state)
{
    (void)state;
    struct fx f = {0};
    f.req[0] = "BLAH / HTTP/1.1\r\n\r\n";
    f.req[1] = "GET / HTTP/1.1\r\nno colon here\r\n\r\n";
    f.req[2] = "GET / HTTP/a.1\r\n\r\n";
    f.req[3] = "\x01\x02\x03 garbage\r\n\r\n";
    f.req[4] = "GET /a%zz HTTP/1.1\r\n\r\n";
    f.req[5] = "GET /a%00b HTTP/1.1\r\n\r\n";
    f.req[6] = "GET /a%4 HTTP/1.1\r\n\r\n";
    f.req[7] = "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab";
    f.req[8] = "GET /\x7f HTTP/1.1\r\n\r\n";
    f.req[9] = "GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n";
    f.nreq = 10;
    run(&f, client_exchanges);
    for (size_t i = 0; i < f.nreq; i++)
        expect_result(&f, i, canned("400 Bad Request", "bad request\n"));
    assert_int_equal(f.handler_calls, 0);
    free_results(&f);
}

static char *big_header_request(size_t value_len, const char *path_prefix, size_t path_len)
{
    char *path = malloc(path_len + 2);
    path[0] = '/';
    memset(path + 1, 'p', path_len);
    memcpy(path + 1, path_prefix, strlen(path_prefix));
    path[path_len + 1] = '\0';
    char *value = malloc(value_len + 1);
    memset(value, 'v', value_len);
    value[value_len] = '\0';
    char *s;
    assert_true(
        asprintf(&s, "GET %s HTTP/1.1\r\nX-Big: %s\r\nConnection: close\r\n\r\n", path, value) > 0);
    free(path);
    free(value);
    return s;
}

static void test_head_too_large_413(void **state)
{
    (void)state;
    struct fx f = {0};
    char *r0 = big_header_request(9000, "hello", 5);       /* one big header */
    char *r1 = big_header_request(10, "x", 9000);          /* long URL */
    char *r2 = big_header_request(7000, "hello", 5);       /* under the limit */
    char *r3 = big_header_request(100 * 1024, "hello", 5); /* far beyond the limit */
    f.req[0] = r0;
    f.req[1] = r1;
    f.req[2] = r2;
    f.req[3] = r3;
    f.nreq = 4;
    run(&f, client_exchanges);
    expect_result(&f, 0, canned("413 Payload Too Large", "request too large\n"));
    expect_result(&f, 1, canned("413 Payload Too Large", "request too large\n"));
    expect_result(&f, 2, hello(0, 1));
    expect_result(&f, 3, canned("413 Payload Too Large", "request too large\n"));
    free(r0);
    free(r1);
    free(r2);
    free(r3);
    free_results(&f);
}

static void test_body_too_large_413(void **state)
{
    (void)state;
    struct fx f = {0};
    char body[5001];
    memset(body, 'b', 5000);
    body[5000] = '\0';
    char *r0, *r1, *r2;
    assert_true(asprintf(&r0, "GET /hello HTTP/1.1\r\nContent-Length: 5000\r\n\r\n%s", body) > 0);
    assert_true(
        asprintf(&r1,
                 "GET /hello HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1388\r\n%s\r\n0\r\n\r\n",
                 body) > 0);
    body[100] = '\0';
    assert_true(
        asprintf(&r2, "GET /hello HTTP/1.1\r\nContent-Length: 100\r\nConnection: close\r\n\r\n%s",
                 body) > 0);
    f.req[0] = r0;
    f.req[1] = r1;
    f.req[2] = r2;
    f.nreq = 3;
    run(&f, client_exchanges);
    expect_result(&f, 0, canned("413 Payload Too Large", "request too large\n"));
    expect_result(&f, 1, canned("413 Payload Too Large", "request too large\n"));
    expect_result(&f, 2, hello(0, 1));
    assert_int_equal(f.handler_calls, 1);
    free(r0);
    free(r1);
    free(r2);
    free_results(&f);
}

/* Sends a, reads one keep-alive reply, sends b, reads to EOF. */
static void two_on_one(struct fx *f, const char *a, const char *b, size_t first_len, int slot)
{
    int fd = cli_connect(f->family, f->port);
    if (fd < 0) return;
    if (cli_send(fd, a, strlen(a)) == 0) {
        f->res[slot] = cli_read_n(fd, first_len);
        if (cli_send(fd, b, strlen(b)) == 0) f->res[slot + 1] = cli_read_all(fd, &f->end[slot + 1]);
    }
    close(fd);
}

static void client_keepalive(struct fx *f)
{
    char *first = hello(1, 1);
    two_on_one(f, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n",
               "GET /nope HTTP/1.1\r\nConnection: close\r\n\r\n", strlen(first), 0);
    two_on_one(f, "GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
               "HEAD /hello HTTP/1.0\r\n\r\n", strlen(first), 2);
    free(first);
    /* HTTP/1.0 without keep-alive: the server closes after the reply. */
    int fd = cli_connect(f->family, f->port);
    if (fd < 0) return;
    const char *r = "GET /hello HTTP/1.0\r\n\r\n";
    if (cli_send(fd, r, strlen(r)) == 0) f->res[4] = cli_read_all(fd, &f->end[4]);
    close(fd);
}

static void test_keepalive_and_http10(void **state)
{
    (void)state;
    struct fx f = {0};
    run(&f, client_keepalive);
    char *want = hello(1, 1);
    assert_non_null(f.res[0]);
    assert_string_equal(f.res[0], want);
    assert_non_null(f.res[2]);
    assert_string_equal(f.res[2], want);
    free(want);
    expect_result(&f, 1, reply("404 Not Found", PLAIN, "not found\n", 10, "", 0, 1));
    expect_result(&f, 3, hello(0, 0));
    expect_result(&f, 4, hello(0, 1));
    assert_int_equal(f.handler_calls, 5);
    free_results(&f);
}

static void test_pipelined(void **state)
{
    (void)state;
    struct fx f = {0};
    f.req[0] = "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n"
               "HEAD /hello HTTP/1.1\r\nHost: a\r\n\r\n"
               "POST /x HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"
               "GET /echo?n=4 HTTP/1.1\r\n\r\n"
               "GET /nope HTTP/1.1\r\nConnection: close\r\n\r\n"
               "GET /hello HTTP/1.1\r\n\r\n"; /* after close: never answered */
    f.nreq = 1;
    run(&f, client_exchanges);
    const char *echo = "method=GET path=/echo query=n=4";
    char *parts[] = {hello(1, 1), hello(1, 0),
                     reply("405 Method Not Allowed", PLAIN, "method not allowed\n", 19,
                           "Allow: GET, HEAD\r\n", 1, 1),
                     reply("200 OK", "text/x-echo", echo, strlen(echo), "", 1, 1),
                     reply("404 Not Found", PLAIN, "not found\n", 10, "", 0, 1)};
    char *want = calloc(1, 4096);
    for (size_t i = 0; i < 5; i++) {
        strcat(want, parts[i]);
        free(parts[i]);
    }
    expect_result(&f, 0, want);
    assert_int_equal(f.handler_calls, 4);
    free_results(&f);
}

static void client_half_close(struct fx *f)
{
    int fd = cli_connect(f->family, f->port);
    if (fd < 0) return;
    const char *r = "GET /hello HTTP/1.1\r\n\r\nGET /nope HTTP/1.1\r\n\r\n";
    if (cli_send(fd, r, strlen(r)) == 0 && shutdown(fd, SHUT_WR) == 0)
        f->res[0] = cli_read_all(fd, &f->end[0]);
    close(fd);
}

/* EOF after complete requests: both replies arrive, then the server closes. */
static void test_half_close(void **state)
{
    (void)state;
    struct fx f = {0};
    run(&f, client_half_close);
    char *a = hello(1, 1), *b = reply("404 Not Found", PLAIN, "not found\n", 10, "", 1, 1), *want;
    assert_true(asprintf(&want, "%s%s", a, b) > 0);
    free(a);
    free(b);
    expect_result(&f, 0, want);
    free_results(&f);
}

static void client_slow(struct fx *f)
{
    /* Half a request, then nothing: disconnected without a reply. */
    int fd = cli_connect(f->family, f->port);
    if (fd < 0) return;
    const char *r = "GET /hello HTTP/1.1\r\nHost: x\r\n";
    if (cli_send(fd, r, strlen(r)) == 0) f->res[0] = cli_read_all(fd, &f->end[0]);
    close(fd);
    /* Idle keep-alive connection after one reply: disconnected too. */
    fd = cli_connect(f->family, f->port);
    if (fd < 0) return;
    char *first = hello(1, 1);
    r = "GET /hello HTTP/1.1\r\n\r\n";
    if (cli_send(fd, r, strlen(r)) == 0) {
        f->res[1] = cli_read_n(fd, strlen(first));
        f->res[2] = cli_read_all(fd, &f->end[2]);
    }
    free(first);
    close(fd);
}

static void test_slow_client_timeout(void **state)
{
    (void)state;
    struct fx f = {0};
    run_on(&f, "127.0.0.1:0", 200, client_slow);
    assert_non_null(f.res[0]);
    assert_string_equal(f.res[0], "");
    assert_int_equal(f.end[0], END_EOF); /* not the client's 5 s timeout */
    char *first = hello(1, 1);
    assert_non_null(f.res[1]);
    assert_string_equal(f.res[1], first);
    free(first);
    assert_non_null(f.res[2]);
    assert_string_equal(f.res[2], "");
    assert_int_equal(f.end[2], END_EOF);
    assert_int_equal(f.handler_calls, 1);
    free_results(&f);
}

/* Reads one keep-alive /hello reply on fd; 1 if it is exactly right. */
static int hello_on(int fd, const char *want)
{
    const char *r = "GET /hello HTTP/1.1\r\n\r\n";
    if (cli_send(fd, r, strlen(r)) != 0) return 0;
    char *got = cli_read_n(fd, strlen(want));
    int ok = got && strcmp(got, want) == 0;
    free(got);
    return ok;
}

static void client_crowd(struct fx *f)
{
    int fds[CROWD], closed[CROWD] = {0};
    int n = 0;
    for (; n < CROWD; n++)
        if ((fds[n] = cli_connect(f->family, f->port)) < 0) break;
    f->val[0] = n;
    /* Wait (at most 5 s) until the extras are closed by the server. */
    int nclosed = 0;
    for (int round = 0; round < 100 && nclosed < CROWD - 64; round++) {
        struct pollfd p[CROWD];
        for (int i = 0; i < n; i++)
            p[i] = (struct pollfd){.fd = closed[i] ? -1 : fds[i], .events = POLLIN};
        if (poll(p, (nfds_t)n, 50) <= 0) continue;
        for (int i = 0; i < n; i++) {
            char c;
            if (p[i].revents && recv(fds[i], &c, 1, MSG_DONTWAIT) <= 0) {
                closed[i] = 1;
                nclosed++;
            }
        }
    }
    usleep(200 * 1000); /* no further connection gets closed */
    struct pollfd p[CROWD];
    for (int i = 0; i < n; i++)
        p[i] = (struct pollfd){.fd = closed[i] ? -1 : fds[i], .events = POLLIN};
    f->val[2] = poll(p, (nfds_t)n, 0);
    f->val[1] = nclosed;
    /* Every kept connection is served. */
    char *want = hello(1, 1);
    int served = 0;
    for (int i = 0; i < n; i++)
        if (!closed[i]) served += hello_on(fds[i], want);
    f->val[3] = served;
    for (int i = 0; i < n; i++) close(fds[i]);
    /* Once the crowd has gone, new connections are served again. The server
     * may not have seen all the closes yet, so retry a bounded number of times. */
    for (int attempt = 0; attempt < 100 && !f->val[4]; attempt++) {
        int fd = cli_connect(f->family, f->port);
        if (fd < 0) break;
        struct timeval tv = {.tv_usec = 200 * 1000};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        f->val[4] = hello_on(fd, want);
        close(fd);
        if (!f->val[4]) usleep(20 * 1000);
    }
    free(want);
}

static void test_connection_limit(void **state)
{
    (void)state;
    struct fx f = {0};
    run_on(&f, "127.0.0.1:0", 15000, client_crowd); /* no idle timeout mid-test */
    assert_int_equal(f.val[0], CROWD);
    assert_int_equal(f.val[1], CROWD - 64);
    assert_int_equal(f.val[2], 0);
    assert_int_equal(f.val[3], 64);
    assert_int_equal(f.val[4], 1);
}

/* 1 if fd has been closed by the server (EOF or reset) within ms. */
static int closed_within(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char c;
    if (poll(&p, 1, ms) != 1) return 0;
    return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

/* One probe as a kubelet sends it; 1 if it got exactly the /hello reply. */
static int probe(struct fx *f)
{
    int fd = cli_connect(f->family, f->port);
    if (fd < 0) return 0;
    const char *r = "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    int end = 0, ok = 0;
    if (cli_send(fd, r, strlen(r)) == 0) {
        char *got = cli_read_all(fd, &end);
        char *want = hello(0, 1);
        ok = end == END_EOF && strcmp(got, want) == 0;
        free(want);
        free(got);
    }
    close(fd);
    return ok;
}

#define LORIS 64 /* the connection limit */
#define ROUNDS 5 /* reconnect waves */
#define WAVE 8   /* new slow connections per wave */
static const char partial[] = "GET /hello HTTP/1.1\r\nHost: x\r\nX-Slow: a"; /* never ends */

/* 1 if the connections the server closed are exactly the oldest ones:
 * fds[0..k) closed, fds[k..n) open, with k >= n - LORIS (no more than LORIS
 * slow connections can be open). The (n - LORIS)th oldest must close (its
 * close is awaited, at most 5 s); the others are then checked at once. */
static int oldest_closed(const int *fds, int n, int *closed)
{
    int must = n - LORIS, ok = 1, k = 0;
    if (must > 0 && !closed[must - 1]) closed[must - 1] = closed_within(fds[must - 1], 5000);
    for (int i = 0; i < n; i++)
        if (!closed[i]) closed[i] = closed_within(fds[i], 0);
    while (k < n && closed[k]) k++;
    for (int i = k; i < n; i++) ok &= !closed[i]; /* no younger one closed */
    return ok && k >= must;
}

/* Slowloris: every slot held by a connection that sends a partial request
 * (first completing one keep-alive request, so the server has certainly
 * accepted it), then waves of new partial connections; a probe after each
 * must be answered, and what makes room is always the longest-waiting slow
 * connections. */
static void client_slowloris(struct fx *f)
{
    int fds[LORIS + ROUNDS * WAVE], closed[LORIS + ROUNDS * WAVE] = {0};
    int n = 0, served = 0, order_ok = 1, probes = 0;
    char *want = hello(1, 1);
    for (; n < LORIS; n++) {
        if ((fds[n] = cli_connect(f->family, f->port)) < 0) break;
        if (!hello_on(fds[n], want) || cli_send(fds[n], partial, strlen(partial)) != 0) break;
        served++;
    }
    free(want);
    f->val[0] = served;
    /* All 64 slots are taken by slow clients. A probe gets through, and the
     * oldest slow connection is the one that was closed for it. */
    probes += probe(f);
    closed[0] = closed_within(fds[0], 5000);
    order_ok &= closed[0] && oldest_closed(fds, n, closed);
    /* Reconnecting slow clients: each wave of new partial connections, then
     * a probe. The probe must be answered every time. */
    for (int r = 0; r < ROUNDS; r++) {
        for (int k = 0; k < WAVE && n < (int)(sizeof fds / sizeof fds[0]); k++) {
            if ((fds[n] = cli_connect(f->family, f->port)) < 0) break;
            if (cli_send(fds[n], partial, strlen(partial)) != 0) break;
            n++;
        }
        probes += probe(f);
        order_ok &= oldest_closed(fds, n, closed);
    }
    f->val[1] = probes;
    f->val[2] = order_ok;
    f->val[3] = n;
    for (int i = 0; i < n; i++) close(fds[i]);
}

#define BURST 80 /* slow connections queued right behind a probe */

/* A probe whose connection is queued right in front of a burst of slow
 * connections: while /block holds the loop, the probe connects and sends
 * its request, then BURST slow clients connect. The loop then accepts them
 * all in one go, and each accept at the limit closes the longest-waiting
 * connection; the probe's request is already there when it is accepted,
 * so it must be answered before the burst behind it could take its slot. */
static void client_probe_then_burst(struct fx *f)
{
    int fds[LORIS + BURST];
    int n = 0, served = 0;
    char *want = hello(1, 1);
    for (; n < LORIS; n++) {
        if ((fds[n] = cli_connect(f->family, f->port)) < 0) break;
        if (!hello_on(fds[n], want) || cli_send(fds[n], partial, strlen(partial)) != 0) break;
        served++;
    }
    free(want);
    f->val[0] = served;
    int bfd = cli_connect(f->family, f->port);
    const char *block = "GET /block HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    if (bfd < 0 || cli_send(bfd, block, strlen(block)) != 0) return;
    for (int i = 0; i < 500 && !__atomic_load_n(&f->blocking, __ATOMIC_SEQ_CST); i++) usleep(1000);
    f->val[2] = __atomic_load_n(&f->blocking, __ATOMIC_SEQ_CST);
    int pfd = cli_connect(f->family, f->port);
    const char *req = "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    int sent = pfd >= 0 && cli_send(pfd, req, strlen(req)) == 0;
    int m = n;
    for (; m < LORIS + BURST; m++) {
        if ((fds[m] = cli_connect(f->family, f->port)) < 0) break;
        (void)!cli_send(fds[m], partial, strlen(partial));
    }
    f->val[3] = m - n;
    int end = 0;
    char *got = sent ? cli_read_all(pfd, &end) : NULL;
    char *w = hello(0, 1);
    f->val[1] = got && end == END_EOF && strcmp(got, w) == 0;
    free(w);
    free(got);
    if (pfd >= 0) close(pfd);
    close(bfd);
    for (int i = 0; i < m; i++) close(fds[i]);
}

static void test_probe_ahead_of_a_burst(void **state)
{
    (void)state;
    struct fx f = {0};
    run_on(&f, "127.0.0.1:0", 15000, client_probe_then_burst);
    assert_int_equal(f.val[0], LORIS);
    assert_int_equal(f.val[2], 1);     /* the loop was held */
    assert_int_equal(f.val[3], BURST); /* all queued (the backlog is deeper) */
    assert_int_equal(f.val[1], 1);     /* the probe was answered */
}

static void test_slowloris_cannot_lock_out_probes(void **state)
{
    (void)state;
    struct fx f = {0};
    run_on(&f, "127.0.0.1:0", 15000, client_slowloris); /* no idle timeout mid-test */
    assert_int_equal(f.val[0], LORIS);
    assert_int_equal(f.val[1], 1 + ROUNDS);
    assert_int_equal(f.val[2], 1);
    assert_int_equal(f.val[3], LORIS + ROUNDS * WAVE);
    assert_int_equal(f.handler_calls, LORIS + 1 + ROUNDS);
}

static void client_reset(struct fx *f)
{
    int fd = cli_connect(f->family, f->port);
    if (fd < 0) return;
    const char *r = "GET /big HTTP/1.1\r\n\r\n";
    char buf[1024];
    if (cli_send(fd, r, strlen(r)) == 0) f->val[0] = recv(fd, buf, sizeof buf, 0) > 0;
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd); /* RST while the server still has megabytes to write */
    fd = cli_connect(f->family, f->port);
    if (fd < 0) return;
    r = "GET /hello HTTP/1.1\r\nConnection: close\r\n\r\n";
    if (cli_send(fd, r, strlen(r)) == 0) f->res[0] = cli_read_all(fd, &f->end[0]);
    close(fd);
}

static void test_client_reset_mid_write(void **state)
{
    (void)state;
    struct fx f = {0};
    run(&f, client_reset);
    assert_int_equal(f.val[0], 1);
    expect_result(&f, 0, hello(0, 1));
    free_results(&f);
}

static void test_ipv6_and_any(void **state)
{
    (void)state;
    struct fx f6 = {.family = AF_INET6};
    f6.req[0] = "GET /hello HTTP/1.1\r\nConnection: close\r\n\r\n";
    f6.nreq = 1;
    run_on(&f6, "[::1]:0", 0, client_exchanges);
    expect_result(&f6, 0, hello(0, 1));
    free_results(&f6);

    struct fx f4 = {0};
    f4.req[0] = f6.req[0];
    f4.nreq = 1;
    run_on(&f4, ":0", 0, client_exchanges);
    expect_result(&f4, 0, hello(0, 1));
    free_results(&f4);
}

static void test_listen_strings(void **state)
{
    (void)state;
    static const char *bad[] = {"",
                                "9090",
                                "127.0.0.1",
                                "127.0.0.1:",
                                "127.0.0.1:65536",
                                "127.0.0.1:-1",
                                "127.0.0.1:80x",
                                "127.0.0.1:123456",
                                "[::1:80",
                                "[::1]80",
                                "::1:80",
                                "localhost:80",
                                "1.2.3:80",
                                "[1.2.3.4]:80",
                                "[]:80",
                                " 127.0.0.1:80"};
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct httpd *s = NULL;
        assert_int_equal(httpd_start(&loop, bad[i], handler, NULL, &s), UV_EINVAL);
        assert_null(s);
        char err[200];
        struct sockaddr_storage ss;
        assert_int_equal(addr_parse_listen(bad[i], &ss, err, sizeof err), -EINVAL);
        assert_non_null(strstr(err, "listen address"));
    }
    char why[200];
    struct sockaddr_storage ws;
    assert_int_equal(addr_parse_listen("127.0.0.1:80x", &ws, why, sizeof why), -EINVAL);
    assert_non_null(strstr(why, "\"80x\""));
    assert_int_equal(addr_parse_listen("localhost:80", &ws, why, sizeof why), -EINVAL);
    assert_non_null(strstr(why, "\"localhost\""));
    struct httpd *s = NULL;
    assert_int_equal(httpd_start(&loop, NULL, handler, NULL, &s), UV_EINVAL);
    assert_int_equal(uv_loop_close(&loop), 0); /* nothing was left open */

    struct sockaddr_storage ss;
    char err[200];
    assert_int_equal(addr_parse_listen(":9090", &ss, err, sizeof err), 0);
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    assert_int_equal(a4->sin_family, AF_INET);
    assert_int_equal(ntohs(a4->sin_port), 9090);
    assert_int_equal(a4->sin_addr.s_addr, htonl(INADDR_ANY));
    assert_int_equal(addr_parse_listen("[::1]:65535", &ss, err, sizeof err), 0);
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    assert_int_equal(a6->sin6_family, AF_INET6);
    assert_int_equal(ntohs(a6->sin6_port), 65535);
    assert_memory_equal(&a6->sin6_addr, &in6addr_loopback, sizeof in6addr_loopback);
    assert_int_equal(addr_parse_listen("10.1.2.3:0", &ss, err, sizeof err), 0);
    assert_int_equal(ntohl(a4->sin_addr.s_addr), 0x0a010203u);
}

static void test_bind_failures(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    struct httpd *a = NULL, *b = NULL;
    assert_int_equal(httpd_start(&loop, "127.0.0.1:0", handler, NULL, &a), 0);
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", httpd_port(a));
    assert_int_equal(httpd_start(&loop, addr, handler, NULL, &b), UV_EADDRINUSE);
    assert_null(b);
    assert_int_equal(httpd_start(&loop, "192.0.2.1:0", handler, NULL, &b), UV_EADDRNOTAVAIL);
    assert_null(b);
    struct fx f = {0};
    httpd_close(a, on_closed, &f);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(f.closed, 1);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* Leaves an idle, a half-sent and a mid-response connection open, has the
 * server closed, and checks that each of them is closed by the server. */
static void client_open_conns(struct fx *f)
{
    int fds[3];
    for (int i = 0; i < 3; i++)
        if ((fds[i] = cli_connect(f->family, f->port)) < 0) return;
    const char *half = "GET /hello HTTP/1.1\r\nHo";
    const char *big = "GET /big HTTP/1.1\r\n\r\n";
    char buf[1024];
    if (cli_send(fds[1], half, strlen(half)) != 0 || cli_send(fds[2], big, strlen(big)) != 0)
        return;
    f->val[0] = recv(fds[2], buf, sizeof buf, 0) > 0; /* the big reply has started */
    srv_signal_close(&f->run);
    for (int i = 0; i < 3; i++) {
        int end = 0;
        free(cli_read_all(fds[i], &end));
        f->end[i] = end;
        close(fds[i]);
    }
}

static void test_close_with_open_connections(void **state)
{
    (void)state;
    struct fx f = {0};
    run(&f, client_open_conns);
    assert_int_equal(f.val[0], 1);
    for (int i = 0; i < 3; i++) assert_true(f.end[i] == END_EOF || f.end[i] == END_RESET);
}

/* ---- request bodies (httpd_start_opts) ---- */

static const struct httpd_opts post_opts = {.methods = HTTPD_GET | HTTPD_HEAD | HTTPD_POST};

/* The /post handler's reply for a body, as the client predicts it. */
static char *post_reply(const char *method, const char *ct, const char *body, size_t len, int keep)
{
    char *b;
    assert_true(asprintf(&b, "method=%s ct=%s len=%zu fnv=%08x nul=1 body=%s", method, ct, len,
                         fnv(body, len), len <= 64 ? body : "...") > 0);
    char *r = reply("200 OK", "text/x-post", b, strlen(b), "", keep, 1);
    free(b);
    return r;
}

/* Sends r one byte at a time, so that the header name and value reach the
 * parser in pieces (bounded: r is short, 1 ms apart). */
static void client_trickle(struct fx *f)
{
    client_exchanges(f);
    int fd = cli_connect(f->family, f->port);
    if (fd < 0) return;
    const char *r = "POST /post HTTP/1.1\r\nX-Content-Typo: no\r\ncOnTeNt-TyPe: "
                    "application/json \t\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
    int ok = 1;
    for (size_t i = 0; r[i] && ok; i++) {
        ok = cli_send(fd, r + i, 1) == 0;
        usleep(1000);
    }
    if (ok) f->res[f->nreq] = cli_read_all(fd, &f->end[f->nreq]);
    close(fd);
}

static void test_post_body_and_content_type(void **state)
{
    (void)state;
    struct fx f = {.opts = &post_opts};
    f.req[0] = "POST /post HTTP/1.1\r\nContent-Type: application/json; charset=utf-8  \r\n"
               "Content-Length: 11\r\nConnection: close\r\n\r\nhello world";
    f.req[1] = "POST /post HTTP/1.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    f.req[2] = "POST /post HTTP/1.1\r\nTransfer-Encoding: chunked\r\ncontent-type: a/b\r\n"
               "Connection: close\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    f.req[3] = "GET /post HTTP/1.1\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n";
    f.req[4] = "POST /post HTTP/1.1\r\nContent-Type: a/b\r\nContent-Type: c/d\r\n"
               "Content-Length: 2\r\n\r\nhi";
    f.req[5] = "POST /post HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc";
    f.req[6] = "POST /post HTTP/1.1\r\nContent-Typer: x/y\r\nContent-Typ: x/z\r\n"
               "Content-Length: 0\r\nConnection: close\r\n\r\n";
    f.nreq = 7;
    run_on(&f, "127.0.0.1:0", 0, client_trickle);
    expect_result(&f, 0,
                  post_reply("POST", "application/json; charset=utf-8", "hello world", 11, 0));
    expect_result(&f, 1, post_reply("POST", "(none)", "", 0, 0));
    expect_result(&f, 2, post_reply("POST", "a/b", "hello world", 11, 0));
    expect_result(&f, 3, post_reply("GET", "text/plain", "", 0, 0));
    expect_result(&f, 4, canned("400 Bad Request", "bad request\n"));
    expect_result(&f, 5, post_reply("POST", "(none)", "abc", 3, 0));
    expect_result(&f, 6, post_reply("POST", "(none)", "", 0, 0));
    expect_result(&f, 7, post_reply("POST", "application/json", "{}", 2, 0));
    assert_int_equal(f.handler_calls, 7);
    free_results(&f);
}

#define MIB3 (3u << 20)

/* Sends a head and then body[0..len), or (chunked) the body in 64 KiB
 * chunks; reads to EOF into res[slot]. */
static void post_big(struct fx *f, int slot, const char *body, size_t len, int chunked)
{
    int fd = cli_connect(f->family, f->port);
    if (fd < 0) return;
    char head[200];
    if (chunked)
        snprintf(head, sizeof head,
                 "POST /post HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Type: x/y\r\n"
                 "Connection: close\r\n\r\n");
    else
        snprintf(head, sizeof head,
                 "POST /post HTTP/1.1\r\nContent-Length: %zu\r\nContent-Type: x/y\r\n"
                 "Connection: close\r\n\r\n",
                 len);
    int ok = cli_send(fd, head, strlen(head)) == 0;
    for (size_t off = 0; ok && off < len;) {
        size_t n = len - off < 65536 ? len - off : 65536;
        if (chunked) {
            char sz[32];
            snprintf(sz, sizeof sz, "%zx\r\n", n);
            ok = cli_send(fd, sz, strlen(sz)) == 0 && cli_send(fd, body + off, n) == 0 &&
                 cli_send(fd, "\r\n", 2) == 0;
        } else {
            ok = cli_send(fd, body + off, n) == 0;
        }
        off += n;
    }
    if (ok && chunked) ok = cli_send(fd, "0\r\n\r\n", 5) == 0;
    /* a refused body may stop being read: the reply is what counts */
    f->res[slot] = cli_read_all(fd, &f->end[slot]);
    close(fd);
}

static char *big_body;

static void client_3mib(struct fx *f)
{
    post_big(f, 0, big_body, MIB3, 0);     /* at the limit */
    post_big(f, 1, big_body, MIB3 - 1, 0); /* just under */
    post_big(f, 2, big_body, MIB3 + 1, 0); /* one byte over: refused on the head */
    post_big(f, 3, big_body, MIB3, 1);     /* chunked, at the limit */
    post_big(f, 4, big_body, MIB3 + 1, 1); /* chunked, one byte over */
    /* Content-Length over the limit, and no body sent at all: the 413 comes
     * from the head alone (nothing of the body is awaited or buffered). */
    int fd = cli_connect(f->family, f->port);
    if (fd < 0) return;
    char head[200];
    snprintf(head, sizeof head, "POST /post HTTP/1.1\r\nContent-Length: %u\r\n\r\n", MIB3 + 1);
    if (cli_send(fd, head, strlen(head)) == 0) f->res[5] = cli_read_all(fd, &f->end[5]);
    close(fd);
}

static void test_post_3mib_limit(void **state)
{
    (void)state;
    struct httpd_opts o = {.methods = HTTPD_POST, .max_body = MIB3};
    struct fx f = {.opts = &o};
    big_body = malloc(MIB3 + 1);
    for (size_t i = 0; i < MIB3 + 1; i++) big_body[i] = (char)('a' + i % 23);
    run_on(&f, "127.0.0.1:0", 0, client_3mib);
    expect_result(&f, 0, post_reply("POST", "x/y", big_body, MIB3, 0));
    expect_result(&f, 1, post_reply("POST", "x/y", big_body, MIB3 - 1, 0));
    expect_result(&f, 2, canned("413 Payload Too Large", "request too large\n"));
    expect_result(&f, 3, post_reply("POST", "x/y", big_body, MIB3, 0));
    assert_non_null(f.res[4]);
    char *want = canned("413 Payload Too Large", "request too large\n");
    assert_string_equal(f.res[4], want);
    free(want);
    expect_result(&f, 5, canned("413 Payload Too Large", "request too large\n"));
    assert_int_equal(f.handler_calls, 3);
    free(big_body);
    free_results(&f);
}

/* Issue 16.15: what all connections' bodies may hold together is bounded
 * (httpd_opts.body_budget): a request whose body would pass it is answered
 * 503 with Retry-After (the API server retries) before its body is read,
 * a chunked one once it grows past it; the bytes come back when a request
 * has been answered. Budget 1500, bodies of at most 1000 (+1 each). */
static void client_budget(struct fx *f)
{
    char body[1001];
    memset(body, 'q', 1000);
    body[1000] = '\0';
    const char *head = "POST /post HTTP/1.1\r\nContent-Type: x/y\r\nConnection: close\r\n"
                       "Content-Length: %d\r\n\r\n";
    char h[200];
    int a = cli_connect(f->family, f->port); /* holds 1001 bytes: its body is half sent */
    if (a < 0) return;
    snprintf(h, sizeof h, head, 1000);
    if (cli_send(a, h, strlen(h)) != 0 || cli_send(a, body, 500) != 0) goto out;
    /* a request answered after A's head was sent: the loop has read it */
    int probe = cli_connect(f->family, f->port);
    if (probe < 0) goto out;
    snprintf(h, sizeof h, head, 1);
    if (cli_send(probe, h, strlen(h)) == 0 && cli_send(probe, "p", 1) == 0)
        f->res[5] = cli_read_all(probe, &f->end[5]);
    close(probe);
    for (int i = 0; i < 3; i++) {
        static const int lens[] = {1000, 400, -600}; /* -: chunked */
        int fd = cli_connect(f->family, f->port), n = lens[i] < 0 ? -lens[i] : lens[i];
        if (fd < 0) continue;
        char r[1700];
        if (lens[i] > 0)
            snprintf(r, sizeof r, head, n);
        else
            snprintf(r, sizeof r,
                     "POST /post HTTP/1.1\r\nContent-Type: x/y\r\nConnection: close\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n%x\r\n%.*s\r\n0\r\n\r\n",
                     n, n, body);
        if (cli_send(fd, r, strlen(r)) == 0 && (lens[i] < 0 || cli_send(fd, body, (size_t)n) == 0))
            f->res[1 + i] = cli_read_all(fd, &f->end[1 + i]);
        close(fd);
    }
    if (cli_send(a, body + 500, 500) == 0) f->res[0] = cli_read_all(a, &f->end[0]);
    int e = cli_connect(f->family, f->port); /* A's bytes are back */
    if (e < 0) goto out;
    snprintf(h, sizeof h, head, 1000);
    if (cli_send(e, h, strlen(h)) == 0 && cli_send(e, body, 1000) == 0)
        f->res[4] = cli_read_all(e, &f->end[4]);
    close(e);
out:
    close(a);
}

static void test_body_budget_503(void **state)
{
    (void)state;
    struct httpd_opts o = {.methods = HTTPD_POST, .max_body = 1000, .body_budget = 1500};
    struct fx f = {.opts = &o};
    char body[1001];
    memset(body, 'q', 1000);
    body[1000] = '\0';
    run(&f, client_budget);
    const char *busy = "busy: other requests hold the memory for request bodies; retry\n";
    expect_result(&f, 0, post_reply("POST", "x/y", body, 1000, 0));
    expect_result(
        &f, 1,
        reply("503 Service Unavailable", PLAIN, busy, strlen(busy), "Retry-After: 1\r\n", 0, 1));
    expect_result(&f, 2, post_reply("POST", "x/y", body, 400, 0));
    expect_result(
        &f, 3,
        reply("503 Service Unavailable", PLAIN, busy, strlen(busy), "Retry-After: 1\r\n", 0, 1));
    expect_result(&f, 4, post_reply("POST", "x/y", body, 1000, 0));
    expect_result(&f, 5, post_reply("POST", "x/y", "p", 1, 0));
    assert_int_equal(f.handler_calls, 4);
    free_results(&f);
}

static void test_405_lists_allowed_methods(void **state)
{
    (void)state;
    struct httpd_opts o = {.methods = HTTPD_GET | HTTPD_POST};
    struct fx f = {.opts = &o};
    f.req[0] = "HEAD /hello HTTP/1.1\r\nConnection: close\r\n\r\n";
    f.req[1] = "PUT /hello HTTP/1.1\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx";
    f.req[2] = "DELETE /hello HTTP/1.1\r\nConnection: close\r\n\r\n";
    f.req[3] = "POST /post HTTP/1.1\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx";
    f.nreq = 4;
    run_on(&f, "127.0.0.1:0", 0, client_exchanges);
    const char *allow = "Allow: GET, POST\r\n";
    /* 405 to a HEAD carries no body */
    expect_result(&f, 0,
                  reply("405 Method Not Allowed", PLAIN, "method not allowed\n", 19, allow, 0, 0));
    expect_result(&f, 1,
                  reply("405 Method Not Allowed", PLAIN, "method not allowed\n", 19, allow, 0, 1));
    expect_result(&f, 2,
                  reply("405 Method Not Allowed", PLAIN, "method not allowed\n", 19, allow, 0, 1));
    expect_result(&f, 3, post_reply("POST", "(none)", "x", 1, 0));
    assert_int_equal(f.handler_calls, 1);
    free_results(&f);

    struct httpd_opts bad = {.methods = 1u << 20};
    uv_loop_t loop;
    struct httpd *s = NULL;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(httpd_start_opts(&loop, "127.0.0.1:0", &bad, handler, NULL, &s), UV_EINVAL);
    assert_null(s);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* Pipelined POSTs with bodies: answered in order, bodies kept apart. */
static void test_pipelined_posts(void **state)
{
    (void)state;
    struct fx f = {.opts = &post_opts};
    f.req[0] = "POST /post HTTP/1.1\r\nContent-Type: a/1\r\nContent-Length: 3\r\n\r\none"
               "POST /post HTTP/1.1\r\nContent-Length: 3\r\n\r\ntwo"
               "POST /post HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Type: a/3\r\n\r\n"
               "5\r\nthree\r\n0\r\n\r\n"
               "GET /hello HTTP/1.1\r\n\r\n"
               "POST /post HTTP/1.1\r\nContent-Length: 4\r\nConnection: close\r\n\r\nfour";
    f.nreq = 1;
    run_on(&f, "127.0.0.1:0", 0, client_exchanges);
    char *parts[] = {post_reply("POST", "a/1", "one", 3, 1),
                     post_reply("POST", "(none)", "two", 3, 1),
                     post_reply("POST", "a/3", "three", 5, 1), hello(1, 1),
                     post_reply("POST", "(none)", "four", 4, 0)};
    char *want = calloc(1, 4096);
    for (size_t i = 0; i < 5; i++) {
        strcat(want, parts[i]);
        free(parts[i]);
    }
    expect_result(&f, 0, want);
    assert_int_equal(f.handler_calls, 5);
    free_results(&f);
}

static void test_extra_headers(void **state)
{
    (void)state;
    struct fx f = {0};
    f.req[0] = "GET /unsupported HTTP/1.1\r\nConnection: close\r\n\r\n";
    for (int i = 0; i < 6; i++) {
        static char r[6][80];
        snprintf(r[i], sizeof r[i], "GET /badheader%d HTTP/1.1\r\nConnection: close\r\n\r\n", i);
        f.req[1 + i] = r[i];
    }
    f.nreq = 7;
    run(&f, client_exchanges);
    expect_result(&f, 0,
                  reply("415 Unsupported Media Type", PLAIN, "unsupported\n", 12,
                        "Accept-Post: application/json\r\nX-Reason: type\r\n", 0, 1));
    for (int i = 1; i < 7; i++)
        expect_result(&f, (size_t)i, canned("500 Internal Server Error", "internal error\n"));
    free_results(&f);
}

/* max_conns from the options: with 3 slots, a 4th connection closes the
 * oldest idle one, and only that one. */
static void client_small_limit(struct fx *f)
{
    int fds[4], n = 0;
    char *want = hello(1, 1);
    for (; n < 4; n++) {
        /* A reply stays "being written" until its write callback, on the
         * next loop iteration, and such a connection is never closed to
         * make room. A second reply on the third connection is read only
         * after the first one's callback: by then the first two are idle
         * whatever the scheduling. */
        if (n == 3) f->val[7] = hello_on(fds[2], want);
        if ((fds[n] = cli_connect(f->family, f->port)) < 0) break;
        f->val[n] = hello_on(fds[n], want);
    }
    if (n == 4) {
        f->val[4] = closed_within(fds[0], 5000); /* the oldest */
        f->val[5] =
            !closed_within(fds[1], 0) && !closed_within(fds[2], 0) && !closed_within(fds[3], 0);
        f->val[6] = hello_on(fds[3], want); /* still served */
    }
    free(want);
    for (int i = 0; i < n; i++) close(fds[i]);
}

/* timeout_ms from the options: an idle keep-alive connection is cut long
 * before the default 5 s would. */
static void client_idle(struct fx *f)
{
    int fd = cli_connect(f->family, f->port);
    if (fd < 0) return;
    char *want = hello(1, 1);
    f->val[0] = hello_on(fd, want);
    f->val[1] = closed_within(fd, 3000);
    free(want);
    close(fd);
}

static void test_opts_conns_and_timeout(void **state)
{
    (void)state;
    struct httpd_opts o = {.max_conns = 3, .timeout_ms = 15000};
    struct fx f = {.opts = &o};
    run_on(&f, "127.0.0.1:0", 0, client_small_limit);
    for (int i = 0; i < 8; i++) assert_int_equal(f.val[i], 1);

    struct httpd_opts t = {.timeout_ms = 200};
    struct fx g = {.opts = &t};
    run_on(&g, "127.0.0.1:0", 0, client_idle);
    assert_int_equal(g.val[0], 1);
    assert_int_equal(g.val[1], 1);
}

/* Graceful shutdown: an idle connection is closed at once, new ones are
 * refused, a request that is arriving is answered with "Connection: close",
 * and a reply being written is written whole. */
static void client_graceful(struct fx *f)
{
    int idle = cli_connect(f->family, f->port), partial = cli_connect(f->family, f->port),
        big = cli_connect(f->family, f->port);
    if (idle < 0 || partial < 0 || big < 0) return;
    char *want = hello(1, 1);
    f->val[0] = hello_on(idle, want);
    free(want);
    const char *head = "GET /hello HTTP/1.1\r\nHost: x\r\n";
    const char *r = "GET /big HTTP/1.1\r\n\r\n";
    char buf[1024];
    if (cli_send(partial, head, strlen(head)) != 0 || cli_send(big, r, strlen(r)) != 0) return;
    ssize_t first = recv(big, buf, sizeof buf, 0); /* the big reply has started */
    f->val[1] = first > 0;
    srv_signal_close(&f->run);
    /* the idle one is closed: the shutdown has begun */
    f->val[2] = closed_within(idle, 5000);
    f->val[3] = cli_connect(f->family, f->port) < 0 && errno == ECONNREFUSED;
    if (cli_send(partial, "\r\n", 2) == 0) f->res[0] = cli_read_all(partial, &f->end[0]);
    int end = 0;
    char *rest = cli_read_all(big, &end);
    f->end[1] = end;
    /* the /big head says keep-alive: it was sent before the shutdown */
    char *h = hello(1, 0);
    size_t head_len = strlen(h) - strlen("5\r\nConnection: keep-alive\r\n\r\n") +
                      strlen("4194304\r\nConnection: keep-alive\r\n\r\n");
    free(h);
    f->val[4] = (size_t)first + strlen(rest) == head_len + BIG_LEN;
    free(rest);
    close(idle);
    close(partial);
    close(big);
}

static void test_graceful_shutdown(void **state)
{
    (void)state;
    struct fx f = {.graceful = 1};
    run_on(&f, "127.0.0.1:0", 15000, client_graceful);
    for (int i = 0; i < 5; i++) assert_int_equal(f.val[i], 1);
    expect_result(&f, 0, hello(0, 1));
    assert_int_equal(f.end[1], END_EOF);
    free_results(&f);
}

/* Drain: an idle keep-alive connection is not closed; its next request is
 * answered with "Connection: close" and the connection ends; a new
 * connection is still accepted and served the same way; a connection
 * still idle when httpd_shutdown comes is closed then. */
static void drain_cb(uv_async_t *a)
{
    struct fx *f = a->data;
    httpd_drain(f->srv);
    __atomic_store_n(&f->drained, 1, __ATOMIC_SEQ_CST);
    uv_close((uv_handle_t *)a, NULL);
}

static void client_drain(struct fx *f)
{
    int idle = cli_connect(f->family, f->port), idle2 = cli_connect(f->family, f->port);
    char *want = hello(1, 1);
    f->val[0] = idle >= 0 && idle2 >= 0 && hello_on(idle, want) && hello_on(idle2, want);
    free(want);
    uv_async_send(&f->drain); /* always: the loop ends only once it has closed */
    if (!f->val[0]) {
        if (idle >= 0) close(idle);
        if (idle2 >= 0) close(idle2);
        return;
    }
    for (int i = 0; i < 500 && !__atomic_load_n(&f->drained, __ATOMIC_SEQ_CST); i++)
        usleep(10 * 1000);
    f->val[1] = __atomic_load_n(&f->drained, __ATOMIC_SEQ_CST);
    /* neither idle connection is cut by the drain itself */
    f->val[2] = !closed_within(idle, 200) && !closed_within(idle2, 0);
    const char *r = "GET /hello HTTP/1.1\r\n\r\n";
    if (cli_send(idle, r, strlen(r)) == 0) f->res[0] = cli_read_all(idle, &f->end[0]);
    int fresh = cli_connect(f->family, f->port);
    if (fresh >= 0 && cli_send(fresh, r, strlen(r)) == 0)
        f->res[1] = cli_read_all(fresh, &f->end[1]);
    srv_signal_close(&f->run); /* httpd_shutdown: the one still idle goes */
    f->val[3] = closed_within(idle2, 5000);
    close(idle);
    close(idle2);
    if (fresh >= 0) close(fresh);
}

static void test_drain(void **state)
{
    (void)state;
    struct fx f = {.graceful = 1};
    assert_int_equal(uv_loop_init(&f.loop), 0);
    assert_int_equal(uv_async_init(&f.loop, &f.drain, drain_cb), 0);
    f.drain.data = &f;
    assert_int_equal(httpd_start(&f.loop, "127.0.0.1:0", handler, &f, &f.srv), 0);
    httpd_set_timeout(f.srv, 15000);
    f.port = httpd_port(f.srv);
    f.family = AF_INET;
    f.client = client_drain;
    srv_run(&f.run, &f.loop, 20000, &f, run_client, f.srv, 1);
    assert_int_equal(uv_loop_close(&f.loop), 0);
    for (int i = 0; i < 4; i++) assert_int_equal(f.val[i], 1);
    expect_result(&f, 0, hello(0, 1));
    expect_result(&f, 1, hello(0, 1));
    free_results(&f);
}

/* Expect: 100-continue: the interim reply comes before the body is sent
 * (the client waits for it), only for a body the server will take. */
static void client_continue(struct fx *f)
{
    const char *cont = "HTTP/1.1 100 Continue\r\n\r\n";
    int fd = cli_connect(f->family, f->port);
    if (fd < 0) return;
    const char *head = "POST /post HTTP/1.1\r\nContent-Type: a/b\r\nexpect: 100-Continue \r\n"
                       "Content-Length: 5\r\nConnection: close\r\n\r\n";
    if (cli_send(fd, head, strlen(head)) == 0) {
        f->res[0] = cli_read_n(fd, strlen(cont));
        if (cli_send(fd, "hello", 5) == 0) f->res[1] = cli_read_all(fd, &f->end[1]);
    }
    close(fd);
    /* chunked, on a keep-alive connection, then a GET that expects nothing */
    fd = cli_connect(f->family, f->port);
    if (fd < 0) return;
    head = "POST /post HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n";
    if (cli_send(fd, head, strlen(head)) == 0) {
        f->res[2] = cli_read_n(fd, strlen(cont));
        const char *rest =
            "2\r\nhi\r\n0\r\n\r\n"
            "GET /hello HTTP/1.1\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n";
        if (cli_send(fd, rest, strlen(rest)) == 0) f->res[3] = cli_read_all(fd, &f->end[3]);
    }
    close(fd);
    /* over the limit: 413 at once, no 100 */
    fd = cli_connect(f->family, f->port);
    if (fd < 0) return;
    head = "POST /post HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5000\r\n\r\n";
    if (cli_send(fd, head, strlen(head)) == 0) f->res[4] = cli_read_all(fd, &f->end[4]);
    close(fd);
}

static void test_expect_continue(void **state)
{
    (void)state;
    struct fx f = {.opts = &post_opts};
    run_on(&f, "127.0.0.1:0", 0, client_continue);
    assert_non_null(f.res[0]);
    assert_string_equal(f.res[0], "HTTP/1.1 100 Continue\r\n\r\n");
    expect_result(&f, 1, post_reply("POST", "a/b", "hello", 5, 0));
    assert_non_null(f.res[2]);
    assert_string_equal(f.res[2], "HTTP/1.1 100 Continue\r\n\r\n");
    char *a = post_reply("POST", "(none)", "hi", 2, 1), *b = hello(0, 1), *w;
    assert_true(asprintf(&w, "%s%s", a, b) > 0);
    free(a);
    free(b);
    expect_result(&f, 3, w);
    expect_result(&f, 4, canned("413 Payload Too Large", "request too large\n"));
    assert_int_equal(f.handler_calls, 3);
    free_results(&f);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as the agent does; see httpd.h */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_head_404),
        cmocka_unit_test(test_path_decoding_and_query),
        cmocka_unit_test(test_bad_handler_output_is_500),
        cmocka_unit_test(test_405_keeps_connection),
        cmocka_unit_test(test_malformed_400),
        cmocka_unit_test(test_head_too_large_413),
        cmocka_unit_test(test_body_too_large_413),
        cmocka_unit_test(test_keepalive_and_http10),
        cmocka_unit_test(test_pipelined),
        cmocka_unit_test(test_half_close),
        cmocka_unit_test(test_slow_client_timeout),
        cmocka_unit_test(test_connection_limit),
        cmocka_unit_test(test_slowloris_cannot_lock_out_probes),
        cmocka_unit_test(test_probe_ahead_of_a_burst),
        cmocka_unit_test(test_client_reset_mid_write),
        cmocka_unit_test(test_ipv6_and_any),
        cmocka_unit_test(test_listen_strings),
        cmocka_unit_test(test_bind_failures),
        cmocka_unit_test(test_close_with_open_connections),
        cmocka_unit_test(test_post_body_and_content_type),
        cmocka_unit_test(test_post_3mib_limit),
        cmocka_unit_test(test_body_budget_503),
        cmocka_unit_test(test_405_lists_allowed_methods),
        cmocka_unit_test(test_pipelined_posts),
        cmocka_unit_test(test_extra_headers),
        cmocka_unit_test(test_opts_conns_and_timeout),
        cmocka_unit_test(test_graceful_shutdown),
        cmocka_unit_test(test_drain),
        cmocka_unit_test(test_expect_continue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
