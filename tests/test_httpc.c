/*
 * test_httpc.c - tests of the asynchronous HTTP client (net/httpc.c)
 * against real servers over loopback: tests/tools/httpsrv.py runs as a
 * child process, once as HTTP and once as HTTPS with a CA and server
 * certificate made here with the openssl CLI. Every test runs a real libuv
 * loop, bounded by a guard timer, and checks uv_loop_close() == 0 at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <curl/curl.h>

#include "net/httpc.h"
#include "base/log.h"
#include "tests/helper_proc.h"
#include "tests/helpers.h"

#define GUARD_MS 10000 /* no test loop may run longer than this */

struct server {
    struct helper proc; /* exits when its stdin closes */
    int port;
};

static char g_dir[64];
static char g_ca[256], g_other_ca[256];
static struct server g_http, g_https;
static int g_refused_fd = -1; /* bound, never listening: connects are refused */
static int g_refused_port;

/* ---- helper processes ---- */

static const char *server_script(void)
{
    static char path[512];
    const char *file = __FILE__, *slash = strrchr(file, '/');
    int n = slash ? (int)(slash - file) : 1;

    snprintf(path, sizeof path, "%.*s/tools/httpsrv.py", n, slash ? file : ".");
    return path;
}

/* Starts httpsrv.py with extra arguments (NULL-terminated) and reads the port
 * it prints, waiting at most 10 s. Returns 0 or -1. */
static int server_start(struct server *s, const char *const *extra)
{
    const char *argv[16] = {"python3", server_script()};
    char buf[32];
    int n = 2;

    while (*extra && n < 15) argv[n++] = *extra++;
    argv[n] = NULL;
    if (access(argv[1], R_OK) != 0) {
        fprintf(stderr, "test_httpc: cannot read %s (run from the repository root)\n", argv[1]);
        return -1;
    }
    helper_start(&s->proc, argv, buf, sizeof buf, 10000);
    s->port = atoi(buf);
    return s->port > 0 ? 0 : -1;
}

static void server_stop(struct server *s) { helper_stop(&s->proc, 2000); }

static int make_certs(void)
{
    char cmd[2048];

    snprintf(cmd, sizeof cmd,
             "(cd %s && "
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "  -keyout ca.key -out ca.crt -days 2 -subj /CN=httpc-test-ca && "
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "  -keyout other.key -out other.crt -days 2 -subj /CN=httpc-other-ca && "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "  -keyout server.key -out server.csr -subj /CN=127.0.0.1 && "
             "printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext && "
             "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
             "  -out server.crt -days 2 -extfile san.ext) >/dev/null 2>&1",
             g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static int group_setup(void **state)
{
    char cert[256], key[256];
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    const char *plain[] = {NULL};
    const char *tls[] = {"--tls", "--cert", cert, "--key", key, NULL};

    (void)state;
    no_proxy_env();
    if (make_tmpdir(g_dir, sizeof g_dir, "test_httpc", 0) != 0) return -1;
    snprintf(g_ca, sizeof g_ca, "%s/ca.crt", g_dir);
    snprintf(g_other_ca, sizeof g_other_ca, "%s/other.crt", g_dir);
    snprintf(cert, sizeof cert, "%s/server.crt", g_dir);
    snprintf(key, sizeof key, "%s/server.key", g_dir);
    if (make_certs() != 0) {
        fprintf(stderr, "test_httpc: openssl could not make the test certificates\n");
        return -1;
    }
    if (server_start(&g_http, plain) != 0 || server_start(&g_https, tls) != 0) {
        fprintf(stderr, "test_httpc: could not start %s\n", server_script());
        return -1;
    }
    g_refused_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (g_refused_fd < 0 || bind(g_refused_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(g_refused_fd, (struct sockaddr *)&a, &alen) != 0)
        return -1;
    g_refused_port = ntohs(a.sin_port);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    server_stop(&g_http);
    server_stop(&g_https);
    if (g_refused_fd >= 0) close(g_refused_fd);
    return remove_tmpdir(g_dir);
}

/* ---- per-test loop and client ---- */

struct got {
    int calls;
    int ok;
    int truncated;
    long status;
    int curl_code;
    char error[CURL_ERROR_SIZE + 64];
    int error_null;
    char *body;
    size_t body_len;
    int64_t retry_after_s;
    double seconds;
};

struct t {
    uv_loop_t loop;
    struct httpc *c;
    int closed;
    int done; /* completed callbacks, for await_count */
};

static struct t *T; /* the running test's context, for callbacks */

static int setup(void **state)
{
    struct t *t = calloc(1, sizeof *t);

    if (!t || uv_loop_init(&t->loop) != 0) return -1;
    if (httpc_create(&t->loop, &t->c) != 0) return -1;
    T = t;
    *state = t;
    return 0;
}

/* Counts an event and makes the running uv_run return (uv_stop also keeps
 * the current iteration from blocking), so await_count sees the new count. */
static void bump(int *counter)
{
    (*counter)++;
    uv_stop(&T->loop);
}

static void on_closed(void *ud) { bump(&((struct t *)ud)->closed); }

static int teardown(void **state)
{
    struct t *t = *state;
    int i, rc;

    if (t->c) httpc_close(t->c, on_closed, t);
    for (i = 0; i < 200 && uv_loop_alive(&t->loop); i++) {
        uv_run(&t->loop, UV_RUN_NOWAIT);
        usleep(5000);
    }
    uv_run(&t->loop, UV_RUN_NOWAIT);
    assert_int_equal(t->closed, 1);
    rc = uv_loop_close(&t->loop);
    assert_int_equal(rc, 0);
    free(t);
    T = NULL;
    return 0;
}

/* Runs the loop until *count reaches n; fails the test after GUARD_MS. */
static void await_count(struct t *t, const int *count, int n)
{
    assert_true(run_until_count(&t->loop, count, n, GUARD_MS));
    assert_int_equal(*count, n);
}

static void got_free(struct got *g)
{
    free(g->body);
    g->body = NULL;
}

static void record(void *ud, const struct httpc_result *res)
{
    struct got *g = ud;

    g->calls++;
    g->ok = res->ok;
    g->truncated = res->truncated;
    g->status = res->status;
    g->curl_code = res->curl_code;
    g->error_null = res->error == NULL;
    snprintf(g->error, sizeof g->error, "%s", res->error ? res->error : "");
    free(g->body);
    assert_non_null(res->body);
    assert_int_equal(res->body[res->body_len], '\0');
    g->body = malloc(res->body_len + 1);
    assert_non_null(g->body);
    memcpy(g->body, res->body, res->body_len + 1);
    g->body_len = res->body_len;
    g->retry_after_s = res->retry_after_s;
    g->seconds = res->seconds;
    bump(&T->done);
}

static char *url(const struct server *s, const char *path)
{
    static char buf[8][256];
    static int i;
    char *u = buf[i++ % 8];

    snprintf(u, 256, "%s://127.0.0.1:%d%s", s == &g_https ? "https" : "http", s->port, path);
    return u;
}

/* Sends req and runs the loop until it completes. */
static void fetch(struct t *t, const struct httpc_req *req, struct got *g)
{
    int before = t->done;

    assert_int_equal(httpc_request(t->c, req, record, g, NULL), 0);
    assert_int_equal(httpc_active(t->c), 1);
    await_count(t, &t->done, before + 1);
    assert_int_equal(g->calls, 1);
    assert_int_equal(httpc_active(t->c), 0);
}

/* ---- tests ---- */

static void test_get_ok(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    struct httpc_req req = {.method = "GET", .url = url(&g_http, "/ok")};

    fetch(t, &req, &g);
    assert_int_equal(g.ok, 1);
    assert_int_equal(g.status, 200);
    assert_int_equal(g.curl_code, CURLE_OK);
    assert_true(g.error_null);
    assert_string_equal(g.body, "hello from httpsrv\n");
    assert_int_equal(g.body_len, strlen("hello from httpsrv\n"));
    assert_int_equal(g.retry_after_s, -1);
    assert_true(g.seconds > 0);
    got_free(&g);
}

static cJSON *echo_json(const struct got *g)
{
    cJSON *doc = cJSON_Parse(g->body);

    assert_non_null(doc);
    return doc;
}

static const char *jstr(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void test_post_echo(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    const char *hdrs[] = {"Content-Type: application/json", "X-Test: abc def"};
    const char body[] = "{\"a\":1}";
    struct httpc_req req = {.method = "POST",
                            .url = url(&g_http, "/echo?q=1"),
                            .headers = hdrs,
                            .nheaders = 2,
                            .body = body,
                            .body_len = strlen(body),
                            .bearer_token = "tok-123"};
    cJSON *doc, *h;

    fetch(t, &req, &g);
    assert_int_equal(g.ok, 1);
    assert_int_equal(g.status, 200);
    doc = echo_json(&g);
    h = cJSON_GetObjectItemCaseSensitive(doc, "headers");
    assert_string_equal(jstr(doc, "method"), "POST");
    assert_string_equal(jstr(doc, "path"), "/echo?q=1");
    assert_string_equal(jstr(doc, "body"), body);
    assert_string_equal(jstr(h, "content-type"), "application/json");
    assert_string_equal(jstr(h, "x-test"), "abc def");
    assert_string_equal(jstr(h, "authorization"), "Bearer tok-123");
    assert_string_equal(jstr(h, "content-length"), "7");
    assert_null(jstr(h, "expect"));
    cJSON_Delete(doc);
    got_free(&g);
}

/* A body with an embedded NUL is sent whole (the length counts, not strlen). */
static void test_binary_body(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    const char body[] = {'a', '\0', 'b'};
    struct httpc_req req = {
        .method = "POST", .url = url(&g_http, "/echo"), .body = body, .body_len = sizeof body};
    cJSON *doc;

    fetch(t, &req, &g);
    doc = echo_json(&g);
    assert_string_equal(jstr(cJSON_GetObjectItemCaseSensitive(doc, "headers"), "content-length"),
                        "3");
    cJSON_Delete(doc);
    got_free(&g);
}

static void test_other_methods(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    const char patch[] = "{\"metadata\":{}}";
    struct httpc_req req = {
        .method = "PATCH", .url = url(&g_http, "/echo"), .body = patch, .body_len = strlen(patch)};
    cJSON *doc, *h;

    fetch(t, &req, &g);
    doc = echo_json(&g);
    assert_string_equal(jstr(doc, "method"), "PATCH");
    assert_string_equal(jstr(doc, "body"), patch);
    cJSON_Delete(doc);
    got_free(&g);

    memset(&g, 0, sizeof g);
    req = (struct httpc_req){.method = "DELETE", .url = url(&g_http, "/echo")};
    fetch(t, &req, &g);
    doc = echo_json(&g);
    h = cJSON_GetObjectItemCaseSensitive(doc, "headers");
    assert_string_equal(jstr(doc, "method"), "DELETE");
    assert_null(jstr(h, "content-length"));
    cJSON_Delete(doc);
    got_free(&g);

    memset(&g, 0, sizeof g);
    req = (struct httpc_req){.method = "PUT", .url = url(&g_http, "/echo")};
    fetch(t, &req, &g);
    doc = echo_json(&g);
    h = cJSON_GetObjectItemCaseSensitive(doc, "headers");
    assert_string_equal(jstr(doc, "method"), "PUT");
    assert_string_equal(jstr(h, "content-length"), "0");
    cJSON_Delete(doc);
    got_free(&g);

    memset(&g, 0, sizeof g);
    req = (struct httpc_req){.method = "HEAD", .url = url(&g_http, "/ok")};
    fetch(t, &req, &g);
    assert_int_equal(g.ok, 1);
    assert_int_equal(g.status, 200);
    assert_int_equal(g.body_len, 0);
    got_free(&g);

    memset(&g, 0, sizeof g);
    req = (struct httpc_req){.url = url(&g_http, "/echo")}; /* NULL method = GET */
    fetch(t, &req, &g);
    doc = echo_json(&g);
    assert_string_equal(jstr(doc, "method"), "GET");
    cJSON_Delete(doc);
    got_free(&g);
}

static void test_status_500(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    struct httpc_req req = {.method = "GET", .url = url(&g_http, "/status/500")};

    fetch(t, &req, &g);
    assert_int_equal(g.ok, 1);
    assert_int_equal(g.status, 500);
    assert_int_equal(g.curl_code, CURLE_OK);
    assert_string_equal(g.body, "status 500\n");
    got_free(&g);
}

static void test_redirect_not_followed(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    struct httpc_req req = {.method = "GET", .url = url(&g_http, "/redirect")};

    fetch(t, &req, &g);
    assert_int_equal(g.ok, 1);
    assert_int_equal(g.status, 302);
    assert_string_equal(g.body, "moved\n");
    got_free(&g);
}

static void test_connection_refused(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    char u[64];
    struct httpc_req req = {.method = "GET", .url = u};

    snprintf(u, sizeof u, "http://127.0.0.1:%d/ok", g_refused_port);
    fetch(t, &req, &g);
    assert_int_equal(g.ok, 0);
    assert_int_equal(g.status, 0);
    assert_int_equal(g.curl_code, CURLE_COULDNT_CONNECT);
    assert_false(g.error_null);
    assert_true(strlen(g.error) > 0);
    assert_int_equal(g.body_len, 0);
    got_free(&g);
}

static void test_timeout(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    struct httpc_req req = {
        .method = "GET", .url = url(&g_http, "/slow?ms=5000"), .timeout_ms = 300};
    uint64_t start = uv_hrtime();

    fetch(t, &req, &g);
    assert_int_equal(g.ok, 0);
    assert_int_equal(g.curl_code, CURLE_OPERATION_TIMEDOUT);
    assert_true(strlen(g.error) > 0);
    /* It gave up instead of waiting for the answer, due after 5 s. */
    assert_true(uv_hrtime() - start < 4000000000ULL);
    got_free(&g);
}

static void test_retry_after_seconds(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    struct httpc_req req = {.method = "GET", .url = url(&g_http, "/retry-after")};

    fetch(t, &req, &g);
    assert_int_equal(g.ok, 1);
    assert_int_equal(g.status, 429);
    assert_int_equal(g.retry_after_s, 3);
    assert_string_equal(g.body, "Too many requests, please try again later.");
    got_free(&g);
}

static void test_retry_after_http_date(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    struct httpc_req req = {.method = "GET", .url = url(&g_http, "/retry-after?in=120")};

    fetch(t, &req, &g);
    assert_int_equal(g.status, 429);
    /* An HTTP-date 120 s ahead, with second resolution and some run time. */
    assert_true(g.retry_after_s >= 100 && g.retry_after_s <= 121);
    got_free(&g);
}

/* whole_body: the caller needs the whole body; one over the cap fails. */
static void test_body_cap_whole(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    struct httpc_req req = {
        .method = "GET", .url = url(&g_http, "/big?n=5000"), .max_body = 1000, .whole_body = 1};
    size_t i;

    fetch(t, &req, &g);
    assert_int_equal(g.ok, 0);
    assert_int_equal(g.curl_code, CURLE_WRITE_ERROR);
    assert_string_equal(g.error, "response body exceeds 1000 bytes");
    assert_true(g.body_len <= 1000);
    got_free(&g);

    memset(&g, 0, sizeof g);
    req.url = url(&g_http, "/big?n=1000"); /* exactly at the cap */
    fetch(t, &req, &g);
    assert_int_equal(g.ok, 1);
    assert_int_equal(g.truncated, 0);
    assert_int_equal(g.body_len, 1000);
    for (i = 0; i < g.body_len; i++) assert_int_equal(g.body[i], 'x');
    got_free(&g);

    memset(&g, 0, sizeof g);
    req = (struct httpc_req){.method = "GET",
                             .url = url(&g_http, "/big?n=1048577"),
                             .whole_body = 1}; /* default cap 1 MiB */
    fetch(t, &req, &g);
    assert_int_equal(g.ok, 0);
    assert_string_equal(g.error, "response body exceeds 1048576 bytes");
    got_free(&g);
}

/* Issue 9 F9: by default the status decides. A 200 with a 1 MiB body under a
 * 64 KiB cap is a success carrying the first 64 KiB; a 500 with a big body
 * is still a 500 (ok, status 500: the caller sees the failure status). */
static void test_body_cap_truncates(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    struct httpc_req req = {
        .method = "POST", .url = url(&g_http, "/big?n=1048576"), .max_body = 64 * 1024};
    size_t i;

    fetch(t, &req, &g);
    assert_int_equal(g.ok, 1);
    assert_true(g.error_null);
    assert_int_equal(g.status, 200);
    assert_int_equal(g.truncated, 1);
    assert_int_equal(g.body_len, 64 * 1024);
    for (i = 0; i < g.body_len; i++) assert_int_equal(g.body[i], 'x');
    got_free(&g);

    memset(&g, 0, sizeof g);
    req.url = url(&g_http, "/big?n=1048576&status=500");
    fetch(t, &req, &g);
    assert_int_equal(g.ok, 1);
    assert_int_equal(g.status, 500);
    assert_int_equal(g.truncated, 1);
    assert_int_equal(g.body_len, 64 * 1024);
    got_free(&g);

    memset(&g, 0, sizeof g);
    req.url = url(&g_http, "/big?n=65536"); /* exactly at the cap: not cut */
    fetch(t, &req, &g);
    assert_int_equal(g.ok, 1);
    assert_int_equal(g.truncated, 0);
    assert_int_equal(g.body_len, 64 * 1024);
    got_free(&g);

    /* The client is still usable: the dropped connection is not reused. */
    memset(&g, 0, sizeof g);
    req = (struct httpc_req){.method = "GET", .url = url(&g_http, "/ok")};
    fetch(t, &req, &g);
    assert_int_equal(g.ok, 1);
    assert_string_equal(g.body, "hello from httpsrv\n");
    got_free(&g);

    /* The same over TLS. */
    memset(&g, 0, sizeof g);
    req = (struct httpc_req){.method = "GET",
                             .url = url(&g_https, "/big?n=1048576"),
                             .ca_file = g_ca,
                             .max_body = 64 * 1024};
    fetch(t, &req, &g);
    assert_int_equal(g.ok, 1);
    assert_int_equal(g.status, 200);
    assert_int_equal(g.truncated, 1);
    assert_int_equal(g.body_len, 64 * 1024);
    got_free(&g);
}

static void test_reset(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    struct httpc_req req = {.method = "GET", .url = url(&g_http, "/reset"), .timeout_ms = 8000};

    fetch(t, &req, &g);
    assert_int_equal(g.ok, 0);
    assert_int_equal(g.status, 0);
    assert_int_equal(g.curl_code, CURLE_RECV_ERROR);
    assert_non_null(strstr(g.error, "reset"));
    got_free(&g);
}

static void test_https_with_ca(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    struct httpc_req req = {.method = "GET", .url = url(&g_https, "/ok"), .ca_file = g_ca};

    fetch(t, &req, &g);
    assert_int_equal(g.ok, 1);
    assert_int_equal(g.status, 200);
    assert_string_equal(g.body, "hello from httpsrv\n");
    got_free(&g);
}

static void test_https_unverified(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    struct httpc_req req = {.method = "GET", .url = url(&g_https, "/ok")}; /* system CAs */

    fetch(t, &req, &g);
    assert_int_equal(g.ok, 0);
    assert_int_equal(g.status, 0);
    assert_int_equal(g.curl_code, CURLE_PEER_FAILED_VERIFICATION);
    got_free(&g);

    memset(&g, 0, sizeof g);
    req.ca_file = g_other_ca; /* a CA that did not sign the server's certificate */
    fetch(t, &req, &g);
    assert_int_equal(g.ok, 0);
    assert_int_equal(g.curl_code, CURLE_PEER_FAILED_VERIFICATION);
    got_free(&g);

    memset(&g, 0, sizeof g);
    req.ca_file = "/nonexistent/ca.crt";
    fetch(t, &req, &g);
    assert_int_equal(g.ok, 0);
    assert_int_equal(g.curl_code, CURLE_SSL_CACERT_BADFILE);
    got_free(&g);
}

static void on_alarm(int sig)
{
    (void)sig;
    (void)!write(2, "test_httpc: blocked on a special CA file\n", 41);
    _exit(99);
}

/* A CA file that is a FIFO would block the loop inside libcurl (it opens
 * and reads the file while connecting): refused up front, callback never
 * runs. A directory is refused the same way. */
static void test_https_ca_not_regular(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    char fifo[300];
    struct httpc_req req = {.method = "GET", .url = url(&g_https, "/ok")};

    snprintf(fifo, sizeof fifo, "%s/ca.fifo", g_dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    signal(SIGALRM, on_alarm);
    alarm(10);
    req.ca_file = fifo;
    assert_int_equal(httpc_request(t->c, &req, record, &g, NULL), -EINVAL);
    req.ca_file = g_dir;
    assert_int_equal(httpc_request(t->c, &req, record, &g, NULL), -EINVAL);
    assert_int_equal(httpc_active(t->c), 0);
    alarm(0);
    signal(SIGALRM, SIG_DFL);
    assert_int_equal(g.calls, 0);
    unlink(fifo);
    /* A regular CA file still works. */
    req.ca_file = g_ca;
    fetch(t, &req, &g);
    assert_int_equal(g.ok, 1);
    assert_int_equal(g.status, 200);
    got_free(&g);
}

static void test_unsupported_protocol(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    struct httpc_req req = {.method = "GET", .url = "file:///etc/hostname"};

    fetch(t, &req, &g);
    assert_int_equal(g.ok, 0);
    assert_int_equal(g.curl_code, CURLE_UNSUPPORTED_PROTOCOL);
    assert_int_equal(g.body_len, 0);
    got_free(&g);
}

/* The server answers /barrier only when all N requests wait at once, so 200
 * for each proves the transfers really ran concurrently. */
static void test_concurrent(void **state)
{
    enum { N = 6 };
    struct t *t = *state;
    struct got g[N] = {0};
    char u[128];
    int i;

    snprintf(u, sizeof u, "http://127.0.0.1:%d/barrier?id=concurrent-%d&n=%d", g_http.port,
             (int)getpid(), N);
    for (i = 0; i < N; i++) {
        struct httpc_req req = {.method = "GET", .url = u};

        assert_int_equal(httpc_request(t->c, &req, record, &g[i], NULL), 0);
    }
    assert_int_equal(httpc_active(t->c), N);
    await_count(t, &t->done, N);
    for (i = 0; i < N; i++) {
        assert_int_equal(g[i].calls, 1);
        assert_int_equal(g[i].ok, 1);
        assert_int_equal(g[i].status, 200);
        assert_string_equal(g[i].body, "together\n");
        got_free(&g[i]);
    }
    assert_int_equal(httpc_active(t->c), 0);
}

static void test_cancel(void **state)
{
    struct t *t = *state;
    struct got never1 = {0}, never2 = {0}, ok = {0}, slow = {0};
    struct httpc_req r_slow = {.method = "GET", .url = url(&g_http, "/slow?ms=300")};
    struct httpc_req r_ok = {.method = "GET", .url = url(&g_http, "/ok")};
    struct httpc_req r_later = {.method = "GET", .url = url(&g_http, "/slow?ms=800")};
    struct httpc_xfer *x1, *x2;

    /* Cancelled before the loop ever ran. */
    assert_int_equal(httpc_request(t->c, &r_slow, record, &never1, &x1), 0);
    httpc_cancel(x1);
    assert_int_equal(httpc_active(t->c), 0);

    /* Cancelled while its request is on the wire. */
    assert_int_equal(httpc_request(t->c, &r_slow, record, &never2, &x2), 0);
    assert_int_equal(httpc_request(t->c, &r_ok, record, &ok, NULL), 0);
    await_count(t, &ok.calls, 1);
    assert_int_equal(httpc_active(t->c), 1);
    httpc_cancel(x2);
    assert_int_equal(httpc_active(t->c), 0);

    /* Wait past the time the cancelled answers would have arrived. */
    assert_int_equal(httpc_request(t->c, &r_later, record, &slow, NULL), 0);
    await_count(t, &slow.calls, 1);
    assert_int_equal(slow.status, 200);
    assert_int_equal(never1.calls, 0);
    assert_int_equal(never2.calls, 0);
    got_free(&ok);
    got_free(&slow);
}

static void test_close_in_flight(void **state)
{
    struct t *t = *state;
    struct got slow[3] = {0}, ok = {0};
    struct httpc_req r_slow = {.method = "GET", .url = url(&g_http, "/slow?ms=3000")};
    struct httpc_req r_ok = {.method = "GET", .url = url(&g_https, "/ok"), .ca_file = g_ca};
    int i;

    for (i = 0; i < 3; i++)
        assert_int_equal(httpc_request(t->c, &r_slow, record, &slow[i], NULL), 0);
    assert_int_equal(httpc_request(t->c, &r_ok, record, &ok, NULL), 0);
    await_count(t, &ok.calls, 1);
    assert_int_equal(httpc_active(t->c), 3);
    /* Another request, just started, when the client closes: its callback
     * must not run either (ok.calls stays 1). */
    assert_int_equal(httpc_request(t->c, &r_ok, record, &ok, NULL), 0);
    httpc_close(t->c, on_closed, t);
    t->c = NULL;
    await_count(t, &t->closed, 1);
    for (i = 0; i < 3; i++) assert_int_equal(slow[i].calls, 0);
    assert_int_equal(ok.calls, 1);
    got_free(&ok);
}

static struct got g_never; /* for a request the close must cancel */

static void close_from_cb(void *ud, const struct httpc_result *res)
{
    struct t *t = ud;
    struct httpc_req req = {.url = url(&g_http, "/ok")};

    assert_int_equal(res->status, 200);
    assert_int_equal(httpc_request(t->c, &req, record, &g_never, NULL), 0);
    httpc_close(t->c, on_closed, t);
    t->c = NULL;
    bump(&t->done);
}

static void test_close_from_callback(void **state)
{
    struct t *t = *state;
    struct got slow = {0};
    struct httpc_req r_slow = {.method = "GET", .url = url(&g_http, "/slow?ms=3000")};
    struct httpc_req r_ok = {.method = "GET", .url = url(&g_http, "/ok")};

    assert_int_equal(httpc_request(t->c, &r_slow, record, &slow, NULL), 0);
    assert_int_equal(httpc_request(t->c, &r_ok, close_from_cb, t, NULL), 0);
    await_count(t, &t->closed, 1);
    assert_int_equal(t->done, 1);
    assert_int_equal(slow.calls, 0);
    assert_int_equal(g_never.calls, 0);
}

/* A chain of requests, each started from the previous callback, that
 * alternates kept-alive connections with reset ones: curl closes and opens
 * sockets (often with the same fd number) while poll handles are closing. */
struct chain {
    int step, n, ok_count, fail_count;
};

static void chain_next(void *ud, const struct httpc_result *res);

static void chain_start(struct chain *ch)
{
    struct httpc_req req = {.method = "GET", .url = url(&g_http, ch->step % 2 ? "/reset" : "/ok")};

    assert_int_equal(httpc_request(T->c, &req, chain_next, ch, NULL), 0);
}

static void chain_next(void *ud, const struct httpc_result *res)
{
    struct chain *ch = ud;

    if (ch->step % 2 == 0) {
        assert_int_equal(res->ok, 1);
        assert_int_equal(res->status, 200);
        assert_string_equal(res->body, "hello from httpsrv\n");
        ch->ok_count++;
    } else {
        assert_int_equal(res->ok, 0);
        ch->fail_count++;
    }
    if (++ch->step < ch->n)
        chain_start(ch);
    else
        bump(&T->done);
}

static void test_chained_requests_reuse_fds(void **state)
{
    struct t *t = *state;
    struct chain ch = {.n = 20};

    chain_start(&ch);
    await_count(t, &t->done, 1);
    assert_int_equal(ch.ok_count, 10);
    assert_int_equal(ch.fail_count, 10);
    assert_int_equal(httpc_active(t->c), 0);
}

static void test_bad_requests(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    const char *crlf[] = {"X-A: b\r\nX-Injected: 1"};
    const char *nocolon[] = {"NoColonHere"};
    const char *nullhdr[] = {NULL};
    const struct httpc_req bad[] = {
        {.method = "GET", .url = NULL},
        {.method = "GET", .url = ""},
        {.method = "GET", .url = "http://127.0.0.1/a b"},
        {.method = "GE T", .url = url(&g_http, "/ok")},
        {.method = "", .url = url(&g_http, "/ok")},
        {.method = "GET\r\n", .url = url(&g_http, "/ok")},
        {.method = "GET", .url = url(&g_http, "/ok"), .headers = crlf, .nheaders = 1},
        {.method = "GET", .url = url(&g_http, "/ok"), .headers = nocolon, .nheaders = 1},
        {.method = "GET", .url = url(&g_http, "/ok"), .headers = nullhdr, .nheaders = 1},
        {.method = "GET", .url = url(&g_http, "/ok"), .headers = NULL, .nheaders = 2},
        {.method = "POST", .url = url(&g_http, "/ok"), .body = NULL, .body_len = 3},
        {.method = "HEAD", .url = url(&g_http, "/ok"), .body = "x", .body_len = 1},
        {.method = "GET", .url = url(&g_http, "/ok"), .bearer_token = ""},
        {.method = "GET", .url = url(&g_http, "/ok"), .bearer_token = "a\nb"},
    };
    size_t i, nbad = sizeof bad / sizeof bad[0];
    int rounds;
    char logpath[300], logbuf[8192] = {0}, *line;
    int logfd, lines = 0;

    /* Capture the log: each refusal is explained, without header content. */
    snprintf(logpath, sizeof logpath, "%s/bad.log", g_dir);
    logfd = open(logpath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(logfd >= 0);
    log_set_fd(logfd);
    for (i = 0; i < nbad; i++) {
        struct httpc_xfer *x = NULL;

        assert_int_equal(httpc_request(t->c, &bad[i], record, &g, &x), -EINVAL);
        assert_null(x);
    }
    assert_int_equal(httpc_request(t->c, NULL, record, &g, NULL), -EINVAL);
    assert_int_equal(httpc_request(t->c, &bad[3], NULL, &g, NULL), -EINVAL);
    assert_int_equal(httpc_active(t->c), 0);
    for (rounds = 0; rounds < 10; rounds++) uv_run(&t->loop, UV_RUN_NOWAIT);
    assert_int_equal(g.calls, 0);

    log_set_fd(2);
    assert_true(pread(logfd, logbuf, sizeof logbuf - 1, 0) > 0);
    close(logfd);
    for (line = logbuf; (line = strstr(line, "http request not started: ")) != NULL; line++)
        lines++;
    assert_int_equal(lines, (int)nbad);
    assert_non_null(strstr(logbuf, "a header line contains CR/LF"));
    assert_non_null(strstr(logbuf, "the method is not an HTTP token"));
    assert_null(strstr(logbuf, "X-Injected"));
    assert_null(strstr(logbuf, "NoColonHere"));
}

/* ---- streams (on_data) ---- */

struct stream {
    char data[4096];
    size_t len, first_len;
    int pieces, stop_after, start_other;
    struct httpc *c;
    struct got other;
};

static int on_piece(void *ud, const char *data, size_t n)
{
    struct stream *s = ud;

    assert_true(s->len + n < sizeof s->data);
    memcpy(s->data + s->len, data, n);
    s->len += n;
    s->data[s->len] = '\0';
    if (s->pieces++ == 0) s->first_len = n;
    if (s->start_other) { /* outside libcurl's callbacks: a new request starts */
        struct httpc_req req = {.method = "GET", .url = url(&g_http, "/ok")};
        s->start_other = 0;
        assert_int_equal(httpc_request(s->c, &req, record, &s->other, NULL), 0);
    }
    return s->stop_after && s->pieces >= s->stop_after;
}

static void test_stream_pieces(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    struct stream s = {.c = t->c};
    struct httpc_req req = {
        .url = url(&g_http, "/stream?n=4&ms=30"), .on_data = on_piece, .data_ud = &s};

    fetch(t, &req, &g);
    assert_int_equal(g.ok, 1);
    assert_int_equal(g.status, 200);
    assert_int_equal(g.body_len, 0); /* the body went to the reader */
    assert_string_equal(s.data, "line 0\nline 1\nline 2\nline 3\n");
    assert_true(s.pieces >= 2); /* delivered as it came, not at the end */
    got_free(&g);
}

/* The head of a stream is reported on its own (len 0) as soon as it is
 * complete, before any body: a reader can tell a stream that started from
 * one whose head never came (kwatch's head deadline). */
static void test_stream_head_first(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    struct stream s = {.c = t->c};
    struct httpc_req req = {
        .url = url(&g_http, "/stream?n=2&ms=10&first_ms=300"), .on_data = on_piece, .data_ud = &s};

    fetch(t, &req, &g);
    assert_int_equal(g.ok, 1);
    assert_true(s.pieces >= 2);
    assert_int_equal(s.first_len, 0);
    assert_string_equal(s.data, "line 0\nline 1\n");
    got_free(&g);
}

static void test_stream_stop(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    struct stream s = {.c = t->c, .stop_after = 1};
    struct httpc_req req = {
        .url = url(&g_http, "/stream?n=50&ms=50"), .on_data = on_piece, .data_ud = &s};

    fetch(t, &req, &g);
    assert_int_equal(g.ok, 0);
    assert_string_equal(g.error, "stopped by the reader");
    assert_int_equal(s.pieces, 1);
    got_free(&g);
}

static void test_stream_error_status_is_buffered(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    struct stream s = {.c = t->c};
    struct httpc_req req = {.url = url(&g_http, "/status/410"), .on_data = on_piece, .data_ud = &s};

    fetch(t, &req, &g);
    assert_int_equal(g.ok, 1);
    assert_int_equal(g.status, 410);
    assert_string_equal(g.body, "status 410\n"); /* kept for the error message */
    assert_int_equal(s.pieces, 0);
    got_free(&g);
}

static void test_stream_reader_starts_request(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    struct stream s = {.c = t->c, .start_other = 1};
    struct httpc_req req = {
        .url = url(&g_http, "/stream?n=3&ms=100"), .on_data = on_piece, .data_ud = &s};
    int before = t->done;

    assert_int_equal(httpc_request(t->c, &req, record, &g, NULL), 0);
    await_count(t, &t->done, before + 2);
    assert_int_equal(g.ok, 1);
    assert_int_equal(s.other.ok, 1);
    assert_string_equal(s.other.body, "hello from httpsrv\n");
    got_free(&g);
    got_free(&s.other);
}

static void test_stream_over_https(void **state)
{
    struct t *t = *state;
    struct got g = {0};
    struct stream s = {.c = t->c};
    struct httpc_req req = {.url = url(&g_https, "/stream?n=3&ms=10"),
                            .on_data = on_piece,
                            .data_ud = &s,
                            .ca_file = g_ca};

    fetch(t, &req, &g);
    assert_int_equal(g.ok, 1);
    assert_string_equal(s.data, "line 0\nline 1\nline 2\n");
    got_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_get_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_post_echo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_methods, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_500, setup, teardown),
        cmocka_unit_test_setup_teardown(test_redirect_not_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_after_seconds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_after_http_date, setup, teardown),
        cmocka_unit_test_setup_teardown(test_body_cap_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_body_cap_truncates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_https_with_ca, setup, teardown),
        cmocka_unit_test_setup_teardown(test_https_unverified, setup, teardown),
        cmocka_unit_test_setup_teardown(test_https_ca_not_regular, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unsupported_protocol, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_from_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chained_requests_reuse_fds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_pieces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_head_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_stop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_error_status_is_buffered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_reader_starts_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_over_https, setup, teardown),
    };

    if (getenv("TEST_FILTER"))
        cmocka_set_test_filter(getenv("TEST_FILTER")); /* e.g. "test_cancel" */
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
