/*
 * httpd.h - the built-in HTTP/1.1 server (--listen), served by the libuv
 * loop. Requests are parsed with libhttp-parser (Debian libhttp-parser-dev).
 * Handlers are synchronous: they fill a response and return; the server
 * writes it and closes or keeps the connection (keep-alive honoured,
 * HTTP/1.0 and "Connection: close" respected, pipelined requests answered
 * in order).
 *
 * Limits (never stall or crash the agent): a request head (URL plus header
 * names and values) over 8 KiB -> 413; a body over 4 KiB -> 413; malformed
 * -> 400 (all three close the connection); a client that has not sent a
 * complete request within the read timeout (default 5 s, counted from
 * accept and from the end of each response) is disconnected, and so is one
 * that does not read its response within that time; at most 64
 * connections: a new one beyond that closes the connection that has waited
 * longest for a request it has not completed (idle keep-alive, or sending a
 * partial request: slowloris clients cannot lock out health probes), else
 * the oldest one lingering after its final reply; only when all 64 are
 * having their replies written is the new one closed at once. A request
 * that has arrived by the time its connection is accepted is answered at
 * once, so it cannot lose its slot to the connections accepted after it;
 * the listen backlog is 1024 (capped by net.core.somaxconn). Only GET and HEAD
 * reach the handler; other methods get 405 with "Allow: GET, HEAD". HEAD
 * gets the handler's headers and Content-Length but no body.
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

struct httpd_req {
    const char *method; /* "GET" or "HEAD" */
    const char *path;   /* decoded URL path, without query, e.g. "/metrics" */
    const char *query;  /* raw query string without '?', or "" */
};

struct httpd_resp {
    int status;               /* default 200; outside 100..599 -> 500 */
    const char *content_type; /* default "text/plain; charset=utf-8" (static string) */
    char *body;               /* malloc'd by the handler; the server frees it. NULL = empty */
    size_t body_len;
};

/* Fills resp for req. Unknown paths should set status 404. */
typedef void (*httpd_handler)(void *ud, const struct httpd_req *req, struct httpd_resp *resp);

/* Parses listen (as addr_parse_listen) and starts listening. Port 0 picks
 * a free port (see httpd_port). Returns 0 and *out, or <0 (UV_EINVAL for a
 * bad address, the bind/listen error such as UV_EADDRINUSE otherwise) and
 * nothing is left open or allocated. */
int httpd_start(uv_loop_t *loop, const char *listen, httpd_handler h, void *ud, struct httpd **out);

/* Port actually bound. */
int httpd_port(const struct httpd *s);

/* Sets the per-connection read timeout (ms) for new and idle connections. */
void httpd_set_timeout(struct httpd *s, unsigned ms);

/* Closes the listener and all connections (call at most once); frees s in
 * the last close callback, then calls done(ud) (done may be NULL). */
void httpd_close(struct httpd *s, void (*done)(void *), void *ud);

#endif
