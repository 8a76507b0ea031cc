/*
 * httpc.c - asynchronous HTTP(S) client on the libuv loop.
 *
 * libcurl's multi-socket API tells us which sockets to watch
 * (CURLMOPT_SOCKETFUNCTION -> one uv_poll_t per socket, remembered with
 * curl_multi_assign) and when to wake it up (CURLMOPT_TIMERFUNCTION -> one
 * uv_timer_t). Socket readiness and timer expiry are fed back with
 * curl_multi_socket_action; after each call the finished transfers are
 * drained from curl_multi_info_read and their callbacks run. Nothing blocks
 * the loop, so the agent keeps watching files while a request is slow.
 *
 * Lifetimes: a socket's uv_poll_t is closed when curl says CURL_POLL_REMOVE
 * and freed in its close callback. curl forgets the socket's pointer at that
 * moment, so a new socket that gets the same fd number starts with a fresh
 * poll handle and never sees the closing one. The client itself is freed
 * after the close callbacks of all its handles have run.
 *
 * Streams (on_data): the write callback only appends a 2xx body to the
 * transfer's buffer and marks it pending, and the header callback marks a
 * complete 2xx head; after each curl_multi_socket_action the pending
 * pieces (and heads) are handed to their readers (deliver_streams),
 * outside libcurl's callbacks, where a reader may start requests (curl
 * refuses curl_multi_add_handle from inside a callback).
 */
#include "net/httpc.h"

#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "base/file.h"
#include "base/log.h"

#define HTTPC_DEFAULT_TIMEOUT_MS 30000
#define HTTPC_DEFAULT_MAX_BODY (1024 * 1024)

/* One socket curl asked us to watch. */
struct httpc_sock {
    uv_poll_t poll;
    curl_socket_t fd;
    int events; /* UV_READABLE / UV_WRITABLE being watched */
    struct httpc *c;
    struct httpc_sock *prev, *next; /* c->socks: sockets not yet closing */
};

struct httpc_xfer {
    struct httpc *c;
    CURL *easy;
    struct curl_slist *headers;
    httpc_done cb;
    void *ud;
    char *body; /* always NUL-terminated once allocated */
    size_t body_len, body_cap, max_body;
    int whole_body; /* a body over max_body fails (else it is cut there) */
    int too_big;
    int truncated; /* cut at max_body: the transfer was ended on purpose */
    int no_memory;
    int completing;        /* its callback is running */
    httpc_data_cb on_data; /* a stream: 2xx body pieces go here */
    void *data_ud;
    int streaming;    /* the response is 2xx and on_data is set */
    int head_pending; /* a 2xx head is complete; its reader has not been told */
    int stopped;      /* on_data asked to end the transfer */
    int64_t retry_after_s;
    char errbuf[CURL_ERROR_SIZE];
    struct httpc_xfer *prev, *next; /* c->xfers */
};

struct httpc {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;
    struct httpc_xfer *xfers;
    struct httpc_sock *socks;
    size_t nxfers;
    int closing;
    unsigned closes_pending; /* handles passed to uv_close, callback not yet run */
    void (*close_done)(void *);
    void *close_ud;
};

/* ---- lists ---- */

#define LIST_PUSH(head, e)                                                                         \
    do {                                                                                           \
        (e)->prev = NULL;                                                                          \
        (e)->next = (head);                                                                        \
        if (head) (head)->prev = (e);                                                              \
        (head) = (e);                                                                              \
    } while (0)

#define LIST_UNLINK(head, e)                                                                       \
    do {                                                                                           \
        if ((e)->prev)                                                                             \
            (e)->prev->next = (e)->next;                                                           \
        else                                                                                       \
            (head) = (e)->next;                                                                    \
        if ((e)->next) (e)->next->prev = (e)->prev;                                                \
        (e)->prev = (e)->next = NULL;                                                              \
    } while (0)

/* ---- closing and freeing ---- */

static void client_finish(struct httpc *c)
{
    void (*done)(void *) = c->close_done;
    void *ud = c->close_ud;

    curl_multi_cleanup(c->multi); /* its callbacks are ignored: c->closing */
    free(c);
    if (done) done(ud);
}

static void handle_closed(struct httpc *c)
{
    c->closes_pending--;
    if (c->closing && c->closes_pending == 0) client_finish(c);
}

static void sock_close_cb(uv_handle_t *h)
{
    struct httpc_sock *s = h->data;
    struct httpc *c = s->c;

    free(s);
    handle_closed(c);
}

static void timer_close_cb(uv_handle_t *h) { handle_closed(h->data); }

static void sock_close(struct httpc_sock *s)
{
    LIST_UNLINK(s->c->socks, s);
    s->c->closes_pending++;
    uv_close((uv_handle_t *)&s->poll, sock_close_cb);
}

/* Takes x out of curl and out of c's list; the memory stays. */
static void xfer_detach(struct httpc_xfer *x)
{
    struct httpc *c = x->c;

    curl_multi_remove_handle(c->multi, x->easy);
    LIST_UNLINK(c->xfers, x);
    c->nxfers--;
}

static void xfer_free(struct httpc_xfer *x)
{
    curl_easy_cleanup(x->easy);
    curl_slist_free_all(x->headers);
    free(x->body);
    free(x);
}

/* ---- completion ---- */

static void xfer_complete(struct httpc_xfer *x, CURLcode code)
{
    struct httpc_result res = {0};
    char msg[96];

    /* What a stream received last is read before it ends (its answer to
     * stop is moot now). */
    if (x->streaming && x->body_len > 0 && !x->stopped) {
        struct httpc *c = x->c;
        size_t n = x->body_len;

        x->body_len = 0;
        if (x->on_data(x->data_ud, x->body, n) != 0) x->stopped = 1;
        if (c->closing) return; /* the reader closed the client: x is gone */
    }
    if (x->streaming) x->body_len = 0;

    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &res.status);
    curl_easy_getinfo(x->easy, CURLINFO_TOTAL_TIME, &res.seconds);
    res.curl_code = code;
    /* A body cut at max_body ends the transfer with CURLE_WRITE_ERROR (our
     * write callback stopped it); the response itself was received. */
    res.ok = code == CURLE_OK || (x->truncated && code == CURLE_WRITE_ERROR);
    res.truncated = x->truncated;
    res.body = x->body && !x->streaming ? x->body : "";
    res.body_len = x->body_len;
    res.retry_after_s = x->retry_after_s;
    if (x->stopped) {
        res.ok = 0;
        res.error = "stopped by the reader";
    } else if (x->too_big) {
        snprintf(msg, sizeof msg, "%s exceeds %zu bytes",
                 x->streaming ? "stream data waiting for its reader" : "response body",
                 x->max_body);
        res.error = msg;
    } else if (x->no_memory) {
        res.error = "out of memory while buffering the response body";
    } else if (!res.ok) {
        res.error = x->errbuf[0] ? x->errbuf : curl_easy_strerror(code);
    }
    res.ok = res.ok && !x->too_big && !x->no_memory;

    /* Detached first, so the callback may cancel others or close c. */
    xfer_detach(x);
    x->completing = 1;
    x->cb(x->ud, &res);
    xfer_free(x);
}

/* Runs the callbacks of all finished transfers. A callback may close the
 * client, which ends the drain (the remaining transfers were cancelled). */
static void drain_done(struct httpc *c)
{
    CURLMsg *m;
    int left;

    while (!c->closing && (m = curl_multi_info_read(c->multi, &left)) != NULL) {
        struct httpc_xfer *x = NULL;

        if (m->msg != CURLMSG_DONE) continue;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        xfer_complete(x, m->data.result);
    }
}

/* Hands every stream's pending piece to its reader. A reader may start or
 * cancel transfers, or close the client, so the scan starts over after each
 * delivery (there are a handful of transfers). A reader that asks to stop
 * ends its transfer here, outside libcurl's callbacks. */
static void deliver_streams(struct httpc *c)
{
    for (int again = 1; again && !c->closing;) {
        again = 0;
        for (struct httpc_xfer *x = c->xfers; x; x = x->next) {
            if (x->stopped || !(x->head_pending || (x->streaming && x->body_len > 0))) continue;
            size_t n = x->streaming ? x->body_len : 0;
            x->body_len -= n;
            x->head_pending = 0;
            int stop = x->on_data(x->data_ud, n ? x->body : "", n);
            if (c->closing) return;
            if (stop) {
                x->stopped = 1;
                xfer_complete(x, CURLE_WRITE_ERROR);
            }
            again = 1;
            break;
        }
    }
}

/* ---- libuv -> curl ---- */

static void on_poll(uv_poll_t *h, int status, int events)
{
    struct httpc_sock *s = h->data;
    struct httpc *c = s->c;
    int flags = 0, running;

    /* On a socket error libuv stops the handle and reports no events. Like
     * select(2), also mark the watched directions ready: curl then reads or
     * writes and reports the real cause ("Connection reset by peer"), where
     * CURL_CSELECT_ERR alone only yields "select/poll returned error". */
    if (status < 0) {
        flags = CURL_CSELECT_ERR;
        events = s->events;
    }
    if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
    curl_multi_socket_action(c->multi, s->fd, flags, &running);
    deliver_streams(c);
    drain_done(c);
}

static void on_timer(uv_timer_t *t)
{
    struct httpc *c = t->data;
    int running;

    curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    deliver_streams(c);
    drain_done(c);
}

/* ---- curl -> libuv ---- */

static int curl_socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    struct httpc *c = userp;
    struct httpc_sock *s = socketp;
    int events = 0;

    (void)easy;
    if (c->closing) return 0;
    if (what == CURL_POLL_REMOVE) {
        if (s) sock_close(s);
        return 0;
    }
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s) return -1;
        if (uv_poll_init_socket(c->loop, &s->poll, fd) != 0) {
            free(s);
            return -1;
        }
        s->fd = fd;
        s->c = c;
        s->poll.data = s;
        LIST_PUSH(c->socks, s);
        curl_multi_assign(c->multi, fd, s);
    }
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) events |= UV_READABLE;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) events |= UV_WRITABLE;
    if (uv_poll_start(&s->poll, events, on_poll) != 0) return -1;
    s->events = events;
    return 0;
}

/* curl wants to be woken after timeout_ms (-1: never). Even 0 only arms the
 * timer: curl_multi_socket_action must not be called from here. */
static int curl_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    struct httpc *c = userp;

    (void)multi;
    if (c->closing) return 0;
    if (timeout_ms < 0) return uv_timer_stop(&c->timer) == 0 ? 0 : -1;
    return uv_timer_start(&c->timer, on_timer, (uint64_t)timeout_ms, 0) == 0 ? 0 : -1;
}

/* ---- per-transfer curl callbacks ---- */

static size_t write_cb(char *data, size_t size, size_t nmemb, void *ud)
{
    struct httpc_xfer *x = ud;
    size_t n = size * nmemb;

    if (x->on_data && !x->streaming && x->body_len == 0) {
        long status = 0;
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
        x->streaming = status >= 200 && status <= 299;
    }
    if (x->stopped) return 0;
    if (x->streaming && n > x->max_body - x->body_len) {
        x->too_big = 1; /* the reader cannot keep up: never cut a stream silently */
        return 0;
    }
    if (n > x->max_body - x->body_len) {
        if (x->whole_body) {
            x->too_big = 1;
            return 0; /* != n: curl stops with CURLE_WRITE_ERROR */
        }
        /* Keep what fits, then stop reading: the status has been received
         * and decides; the rest of the body is never read (the connection
         * is dropped), so an endless body costs nothing either. */
        x->truncated = 1;
        n = x->max_body - x->body_len;
        if (n == 0) return 0;
    }
    if (x->body_len + n + 1 > x->body_cap) {
        size_t cap = x->body_cap ? x->body_cap : 4096;
        char *p;

        while (cap < x->body_len + n + 1) cap *= 2;
        if (cap > x->max_body + 1) cap = x->max_body + 1;
        p = realloc(x->body, cap);
        if (!p) {
            x->no_memory = 1;
            return 0;
        }
        x->body = p;
        x->body_cap = cap;
    }
    memcpy(x->body + x->body_len, data, n);
    x->body_len += n;
    x->body[x->body_len] = '\0';
    return x->truncated ? 0 : n;
}

/* Parses a Retry-After value: delta-seconds, or an HTTP-date turned into
 * seconds from now (0 if in the past). Returns -1 if it is neither. */
static int64_t parse_retry_after(const char *v, size_t n)
{
    char buf[64];
    size_t i;
    time_t when;

    while (n > 0 && (*v == ' ' || *v == '\t')) v++, n--;
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r' || v[n - 1] == '\n'))
        n--;
    if (n == 0 || n >= sizeof buf) return -1;
    memcpy(buf, v, n);
    buf[n] = '\0';
    for (i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++) {
    }
    if (i == n) return n <= 18 ? strtoll(buf, NULL, 10) : -1;
    when = curl_getdate(buf, NULL);
    if (when == -1) return -1;
    when -= time(NULL);
    return when > 0 ? (int64_t)when : 0;
}

static size_t header_cb(char *line, size_t size, size_t nitems, void *ud)
{
    static const char name[] = "retry-after:";
    struct httpc_xfer *x = ud;
    size_t n = size * nitems;

    if (n >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        x->retry_after_s = -1; /* a new response (after 100 Continue) starts */
    } else if (x->on_data && (n == 2 || n == 1) && (line[0] == '\r' || line[0] == '\n')) {
        long status = 0; /* the end of a head: a 2xx one starts the stream */
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 200 && status <= 299) x->streaming = x->head_pending = 1;
    } else if (n >= sizeof name - 1 && strncasecmp(line, name, sizeof name - 1) == 0) {
        x->retry_after_s = parse_retry_after(line + sizeof name - 1, n - (sizeof name - 1));
    }
    return n;
}

/* ---- request validation ---- */

static int is_tchar(unsigned char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

static int has_crlf(const char *s) { return strpbrk(s, "\r\n") != NULL; }

/* Returns NULL if req is acceptable, else what is wrong with it. Never
 * quotes header values or the token. */
static const char *req_problem(const struct httpc_req *req, const char *method)
{
    size_t i;

    if (!req->url || !req->url[0]) return "the URL is empty";
    if (strpbrk(req->url, "\r\n \t")) return "the URL contains whitespace or CR/LF";
    if (!method[0] || strlen(method) > 32) return "the method must be 1 to 32 characters";
    for (i = 0; method[i]; i++)
        if (!is_tchar((unsigned char)method[i])) return "the method is not an HTTP token";
    if (req->body_len > 0 && !req->body) return "body_len > 0 but body is NULL";
    if (req->body && strcmp(method, "HEAD") == 0) return "a HEAD request cannot have a body";
    if (req->nheaders > 0 && !req->headers) return "nheaders > 0 but headers is NULL";
    for (i = 0; i < req->nheaders; i++) {
        const char *h = req->headers[i], *colon;

        if (!h) return "a header line is NULL";
        colon = strchr(h, ':');
        if (!colon || colon == h) return "a header line is not \"Name: value\"";
        if (has_crlf(h)) return "a header line contains CR/LF";
    }
    if (req->bearer_token && (!req->bearer_token[0] || has_crlf(req->bearer_token)))
        return "the bearer token is empty or contains CR/LF";
    return NULL;
}

/* ---- public API ---- */

int httpc_create(uv_loop_t *loop, struct httpc **out)
{
    static int global_rc = 1; /* 1: curl_global_init not called yet */
    struct httpc *c;

    if (global_rc == 1) {
        CURLcode code = curl_global_init(CURL_GLOBAL_DEFAULT);

        global_rc = code == CURLE_OK ? 0 : -EIO;
        if (code != CURLE_OK) log_error("curl_global_init failed: %s", curl_easy_strerror(code));
    }
    if (global_rc < 0) return global_rc;
    c = calloc(1, sizeof *c);
    if (!c) return -ENOMEM;
    c->loop = loop;
    c->multi = curl_multi_init();
    if (!c->multi) {
        free(c);
        return -ENOMEM;
    }
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, curl_socket_cb);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, curl_timer_cb);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    uv_timer_init(loop, &c->timer);
    c->timer.data = c;
    *out = c;
    return 0;
}

/* Builds the header list: the caller's lines, the token, and "Expect:" so a
 * large body is sent at once instead of waiting for 100 Continue. */
static int build_headers(const struct httpc_req *req, struct curl_slist **out)
{
    struct curl_slist *list = NULL, *next;
    size_t i;

    for (i = 0; i <= req->nheaders; i++) {
        const char *line = i < req->nheaders ? req->headers[i] : "Expect:";

        next = curl_slist_append(list, line);
        if (!next) goto oom;
        list = next;
    }
    if (req->bearer_token) {
        static const char prefix[] = "Authorization: Bearer ";
        size_t n = sizeof prefix + strlen(req->bearer_token);
        char *line = malloc(n);

        if (!line) goto oom;
        snprintf(line, n, "%s%s", prefix, req->bearer_token);
        next = curl_slist_append(list, line);
        memset(line, 0, n); /* do not leave the token in freed memory */
        free(line);
        if (!next) goto oom;
        list = next;
    }
    *out = list;
    return 0;
oom:
    curl_slist_free_all(list);
    return -ENOMEM;
}

/* Sets every option of x's easy handle. Returns 0 or -EIO. */
static int setup_easy(struct httpc_xfer *x, const struct httpc_req *req, const char *method)
{
    CURL *e = x->easy;
    int is_get = strcmp(method, "GET") == 0, is_post = strcmp(method, "POST") == 0;
    int is_head = strcmp(method, "HEAD") == 0;
    int send_body = req->body || is_post || !strcmp(method, "PUT") || !strcmp(method, "PATCH");
    uint64_t timeout = req->timeout_ms ? req->timeout_ms : HTTPC_DEFAULT_TIMEOUT_MS;
    CURLcode rc = CURLE_OK;

#define SET(opt, val)                                                                              \
    if (rc == CURLE_OK) rc = curl_easy_setopt(e, opt, val)
    SET(CURLOPT_URL, req->url);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_FOLLOWLOCATION, 0L);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_TIMEOUT_MS, timeout > LONG_MAX ? LONG_MAX : (long)timeout);
    SET(CURLOPT_ERRORBUFFER, x->errbuf);
    SET(CURLOPT_SSL_VERIFYPEER, 1L);
    SET(CURLOPT_SSL_VERIFYHOST, 2L);
    if (req->ca_file) SET(CURLOPT_CAINFO, req->ca_file);
    if (req->on_data) {
        SET(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L); /* a proxy's CONNECT head is no stream head */
        SET(CURLOPT_TCP_KEEPALIVE, 1L);
        SET(CURLOPT_TCP_KEEPIDLE, 30L);
        SET(CURLOPT_TCP_KEEPINTVL, 10L);
    }
#if LIBCURL_VERSION_NUM >= 0x075700
    /* A rotated CA file (kube-root-ca.crt) at the same path is picked up
     * within a minute instead of curl's default 24 h CA-store cache. */
    SET(CURLOPT_CA_CACHE_TIMEOUT, 60L);
#endif
    SET(CURLOPT_HTTPHEADER, x->headers);
    SET(CURLOPT_WRITEFUNCTION, write_cb);
    SET(CURLOPT_WRITEDATA, x);
    SET(CURLOPT_HEADERFUNCTION, header_cb);
    SET(CURLOPT_HEADERDATA, x);
    SET(CURLOPT_PRIVATE, x);
    if (is_head) {
        SET(CURLOPT_NOBODY, 1L);
    } else if (send_body) {
        SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        SET(CURLOPT_COPYPOSTFIELDS, req->body ? req->body : "");
    }
    if (!is_head && !is_post && !(is_get && !send_body)) SET(CURLOPT_CUSTOMREQUEST, method);
#undef SET
    return rc == CURLE_OK ? 0 : -EIO;
}

/* 1 (and logs why) if the CA file exists but is not a regular file: libcurl
 * would open and read it on the loop thread, and a FIFO would block it
 * there. A missing file is left to libcurl, which reports it. */
static int ca_file_unusable(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) return 0;
    log_error("http request not started: the CA file %s is %s, not a regular file", path,
              ra_file_kind(st.st_mode));
    return 1;
}

int httpc_request(struct httpc *c, const struct httpc_req *req, httpc_done cb, void *ud,
                  struct httpc_xfer **xfer)
{
    const char *method, *problem;
    struct httpc_xfer *x;
    int r;

    if (!c || !req || !cb) return -EINVAL;
    if (c->closing) return -ECANCELED;
    method = req->method ? req->method : "GET";
    problem = req_problem(req, method);
    if (problem) {
        log_error("http request not started: %s", problem);
        return -EINVAL;
    }
    if (req->ca_file && ca_file_unusable(req->ca_file)) return -EINVAL;
    x = calloc(1, sizeof *x);
    if (!x) return -ENOMEM;
    x->c = c;
    x->cb = cb;
    x->ud = ud;
    x->retry_after_s = -1;
    x->max_body = req->max_body ? req->max_body : HTTPC_DEFAULT_MAX_BODY;
    x->whole_body = req->on_data ? 0 : req->whole_body;
    x->on_data = req->on_data;
    x->data_ud = req->data_ud;
    x->easy = curl_easy_init();
    if (!x->easy) {
        free(x);
        return -ENOMEM;
    }
    r = build_headers(req, &x->headers);
    if (r == 0) r = setup_easy(x, req, method);
    if (r == 0 && curl_multi_add_handle(c->multi, x->easy) != CURLM_OK) r = -EIO;
    if (r != 0) {
        xfer_free(x);
        return r;
    }
    LIST_PUSH(c->xfers, x);
    c->nxfers++;
    if (xfer) *xfer = x;
    return 0;
}

void httpc_cancel(struct httpc_xfer *x)
{
    if (!x || x->completing) return;
    xfer_detach(x);
    xfer_free(x);
}

size_t httpc_active(const struct httpc *c) { return c->nxfers; }

void httpc_close(struct httpc *c, void (*done)(void *), void *ud)
{
    if (!c || c->closing) return;
    c->closing = 1;
    c->close_done = done;
    c->close_ud = ud;
    /* Poll handles first, while curl still has their sockets open. */
    while (c->socks) sock_close(c->socks);
    while (c->xfers) httpc_cancel(c->xfers);
    c->closes_pending++;
    uv_close((uv_handle_t *)&c->timer, timer_close_cb);
}
