/*
 * httpd.h - the built-in HTTP/1.1 server (--listen), served by the libuv
 * loop. Requests are parsed with libhttp-parser (Debian libhttp-parser-dev).
 * Handlers are synchronous: they fill a response and return; the server
 * writes it and closes or keeps the connection (keep-alive honoured,
 * HTTP/1.0 and "Connection: close" respected, pipelined requests answered
 * in order).
 *
 * Limits (never stall or crash the agent): a request head (URL plus header
 * names and values) over 8 KiB -> 413; a body over the body limit (default
 * 4 KiB) -> 413, decided from Content-Length before any of the body is
 * read, or once a chunked body passes it (never more than the limit is
 * buffered); bodies over the server's budget for all connections together
 * -> 503 with Retry-After (see httpd_opts); malformed -> 400 (all four
 * close the connection); a client that has not sent a complete request
 * within the read timeout (default 5 s, counted from accept and from the
 * end of each response; the TLS
 * handshake counts as part of the first request) is disconnected, and so
 * is one that does not read its response within that time; at most 64
 * connections (the default): a new one beyond that closes the connection
 * that has waited longest for a request it has not completed (idle
 * keep-alive, in its TLS handshake, or sending a partial request: slowloris
 * clients cannot lock out health probes), else the oldest one lingering
 * after its final reply; only when all are having their replies written is
 * the new one closed at once. A request that has arrived by the time its
 * connection is accepted is answered at once, so it cannot lose its slot to
 * the connections accepted after it; the listen backlog is 1024 (capped by
 * net.core.somaxconn). Only the allowed methods (default GET and HEAD)
 * reach the handler; others get 405 with an Allow header listing them.
 * HEAD gets the handler's headers and Content-Length but no body. A
 * request with "Expect: 100-continue" whose body will be read (allowed
 * method, within the limit) gets "100 Continue" as soon as its head has
 * arrived.
 *
 * TLS: with opts.tls set, every connection speaks TLS (net/tls.h) over the
 * same socket through memory BIOs: the handshake is driven by the reads on
 * the loop, bounded by the read timeout and the connection limit like any
 * slow client; a failed handshake closes the connection without a reply
 * (counted by the tls_server). A final reply is followed by close_notify.
 * A certificate reload (tls_server_reload) applies to new connections.
 *
 * Stopping: httpd_drain (optional: replies close their connections, the
 * listener stays), then httpd_shutdown (listener and idle connections
 * closed, requests in flight finish), and httpd_close at a deadline.
 *
 * The process must ignore SIGPIPE (signal(SIGPIPE, SIG_IGN)): a client that
 * resets the connection mid-response makes the write fail with EPIPE, which
 * the server handles by closing that connection.
 */
#ifndef RA_HTTPD_H
#define RA_HTTPD_H

#include <stddef.h>
#include <sys/socket.h>
#include <uv.h>

struct httpd;
struct tls_server;

/* Methods a server may allow (a bit set). */
enum {
    HTTPD_GET = 1 << 0,
    HTTPD_HEAD = 1 << 1,
    HTTPD_POST = 1 << 2,
    HTTPD_PUT = 1 << 3,
    HTTPD_PATCH = 1 << 4,
    HTTPD_DELETE = 1 << 5,
    HTTPD_OPTIONS = 1 << 6,
};

/* Server settings; a zero field takes its default. */
struct httpd_opts {
    unsigned methods;       /* HTTPD_* bits; 0 = HTTPD_GET | HTTPD_HEAD */
    size_t max_body;        /* request body limit in bytes; 0 = 4096 */
    unsigned max_conns;     /* open connections; 0 = 64 */
    unsigned timeout_ms;    /* read timeout; 0 = 5000 */
    size_t body_budget;     /* bytes the request bodies of all connections may hold together
                               (0 = no limit beyond max_body each): a request whose body would
                               pass it is answered 503 with "Retry-After: 1" before its body is
                               read (by Content-Length; a chunked one as it grows), and the
                               connection closed. A body holds its bytes from its headers until
                               the handler returns (or httpd_req_release_body) */
    struct tls_server *tls; /* NULL = plain HTTP; not owned: it must outlive the server
                               (destroy it after httpd_close's done callback) */
};

struct httpd_req {
    const char *method;       /* "GET", "HEAD", "POST", ...: one of the allowed methods */
    const char *path;         /* decoded URL path, without query, e.g. "/metrics" */
    const char *query;        /* raw query string without '?', or "" */
    const char *content_type; /* the Content-Type header's value (trailing blanks trimmed), or
                                 NULL if absent; two Content-Type headers are refused with 400 */
    const char *body;         /* the request body (chunked bodies decoded), NUL-terminated after
                                 body_len bytes (it may hold NULs); "" when there is none */
    size_t body_len;          /* all pointers are valid during the handler call only */
    void *conn_;              /* the server's, for httpd_req_release_body */
};

struct httpd_resp {
    int status;               /* default 200; outside 100..599 -> 500 */
    const char *content_type; /* default "text/plain; charset=utf-8" (static string) */
    char *body;               /* malloc'd by the handler; the server frees it. NULL = empty */
    size_t body_len;
    const char *headers; /* extra header lines, each "Name: value\r\n" (static string; at
                            most 256 bytes), e.g. "Allow: POST\r\n"; NULL = none. A
                            malformed one -> 500 */
};

/* Fills resp for req. Unknown paths should set status 404. */
typedef void (*httpd_handler)(void *ud, const struct httpd_req *req, struct httpd_resp *resp);

/* Parses listen (as addr_parse_listen) and starts listening with the
 * settings in opts (NULL = all defaults). Port 0 picks a free port (see
 * httpd_port). Returns 0 and *out, or <0 (UV_EINVAL for a bad address or
 * unknown method bits, the bind/listen error such as UV_EADDRINUSE
 * otherwise) and nothing is left open or allocated. */
int httpd_start_opts(uv_loop_t *loop, const char *listen, const struct httpd_opts *opts,
                     httpd_handler h, void *ud, struct httpd **out);

/* httpd_start_opts with the defaults: plain HTTP, GET and HEAD, 4 KiB
 * bodies, 64 connections, 5 s read timeout. */
int httpd_start(uv_loop_t *loop, const char *listen, httpd_handler h, void *ud, struct httpd **out);

/* Frees req's body now, within the handler, and gives its bytes back to
 * the body budget: a handler that has read (parsed) the body calls it
 * before long work on what it read. req->body must not be used after. */
void httpd_req_release_body(const struct httpd_req *req);

/* Port actually bound. */
int httpd_port(const struct httpd *s);

/* Sets the per-connection read timeout (ms) for new and idle connections. */
void httpd_set_timeout(struct httpd *s, unsigned ms);

/* Closes the listener and all connections (call at most once); frees s in
 * the last close callback, then calls done(ud) (done may be NULL). After
 * httpd_shutdown (and before its done has run) it cuts the connections
 * still open; done is then the one given to httpd_shutdown, and this
 * call's done and ud are ignored. */
void httpd_close(struct httpd *s, void (*done)(void *), void *ud);

/* Drain (before httpd_shutdown, when clients must move to other servers
 * first): from now on every reply says "Connection: close" and its
 * connection ends after it (as after any final reply), while the listener
 * keeps accepting and every connection is served as before. Nothing is
 * closed now: an idle keep-alive connection may still send one request
 * (answered, then closed); those still idle are closed by httpd_shutdown
 * or their read timeout. Clients that reuse connections thus reconnect,
 * and a POST sent on an idle connection is never met by a close. A no-op
 * after httpd_close; calling it again changes nothing. */
void httpd_drain(struct httpd *s);

/* Graceful close (call at most once, not after httpd_close): closes the
 * listener (new connections are refused) and every connection with
 * nothing in flight (idle keep-alive, in its TLS handshake, lingering after
 * a final reply). A connection whose request is arriving or whose reply is
 * being written finishes it: a reply made from now on says "Connection:
 * close", and after the reply the connection ends as after any final
 * reply (TLS close_notify, FIN, then input is discarded until the client's
 * EOF). The read timeout still applies. When the last
 * connection has closed, frees s and calls done(ud) (done may be NULL).
 * To bound the wait, call httpd_close at a deadline. */
void httpd_shutdown(struct httpd *s, void (*done)(void *), void *ud);

#endif
