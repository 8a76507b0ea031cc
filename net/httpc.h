/*
 * httpc.h - asynchronous HTTP(S) client: libcurl's multi-socket API driven
 * by the libuv loop (CURLMOPT_SOCKETFUNCTION + CURLMOPT_TIMERFUNCTION, one
 * uv_poll_t per socket, CURL_POLL_IN/OUT/INOUT/REMOVE all handled, one
 * uv_timer_t for curl's timeout). No call blocks the loop. Used by the http
 * action and the Kubernetes client.
 */
#ifndef RA_HTTPC_H
#define RA_HTTPC_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct httpc;
struct httpc_xfer;

/* A streamed response body (httpc_req.on_data): one piece of the body of a
 * 2xx response, in order, on the loop thread and never from inside a
 * libcurl callback (so it may start requests and cancel other transfers).
 * The first call comes as soon as the 2xx head is complete, with len 0
 * when no body has arrived yet: the reader learns that the stream started
 * (a server that trickles its head never gets that far). data is valid
 * only during the call. Return 0 to go on reading, or
 * nonzero to end the transfer now: the done callback then runs once with
 * ok = 0 and the error "stopped by the reader". It must not cancel its own
 * transfer (return nonzero instead); it may close the client. */
typedef int (*httpc_data_cb)(void *ud, const char *data, size_t len);

/* A request. Every pointer is read only during httpc_request (all is copied).
 * Redirects are never followed; only http:// and https:// URLs are accepted
 * (others fail in the callback with CURLE_UNSUPPORTED_PROTOCOL). TLS peer
 * and host name verification are always on. Proxy environment variables
 * (http_proxy, https_proxy, no_proxy) are honoured as libcurl does. */
struct httpc_req {
    const char *method; /* "GET", "POST", "PATCH", ... (a token,
                                    case-sensitive); NULL = "GET". POST, PUT
                                    and PATCH always send a body (maybe
                                    empty); HEAD must have none. */
    const char *url;
    const char *const *headers; /* "Name: value" lines, may be NULL; no CR/LF.
                                    A body without a Content-Type header is
                                    sent as libcurl's default,
                                    application/x-www-form-urlencoded. */
    size_t nheaders;
    const char *body; /* may be NULL */
    size_t body_len;
    uint64_t timeout_ms;      /* whole-transfer timeout; 0 = 30 s */
    const char *ca_file;      /* PEM bundle to verify against; NULL = system.
                                    One that is not a regular file (a FIFO
                                    would block the loop in libcurl) makes
                                    httpc_request fail with -EINVAL. */
    size_t max_body;          /* response body cap in bytes; 0 = 1 MiB */
    int whole_body;           /* what a body over max_body means:
                                    0 (default): the status decides; the
                                    first max_body bytes are kept, the rest
                                    is not read (the connection is dropped)
                                    and the result is ok with truncated = 1
                                    (a reload endpoint that answers 200 with
                                    a huge page has still reloaded).
                                    1: the caller needs the whole body (an
                                    API reply to parse): the transfer fails
                                    with "response body exceeds N bytes". */
    const char *bearer_token; /* NULL = none; else sent as "Authorization:
                                    Bearer <token>". Never logged. */
    /* A long-lived streamed response (a Kubernetes watch): when set, the
     * body of a 2xx response is not kept for the result but handed to
     * on_data as it arrives (the result's body is then empty; max_body
     * bounds only what arrives between two deliveries, and whole_body is
     * ignored); a response with any other status is kept and capped as
     * without it. TCP keepalive is on for such a transfer (probes after
     * 30 s idle), so a peer that vanished is noticed by the kernel without
     * a timer in the process; timeout_ms still bounds the whole stream. */
    httpc_data_cb on_data;
    void *data_ud;
};

struct httpc_result {
    int ok;            /* 1 if a response (any status) was received:
                               complete, or cut at max_body (truncated) when
                               the request allowed that (whole_body 0) */
    int truncated;     /* 1 if the body was longer than max_body and
                               only its first max_body bytes are in body */
    long status;       /* HTTP status, 0 if none */
    int curl_code;     /* CURLcode */
    const char *error; /* human-readable reason when !ok (curl's error
                               buffer, or "response body exceeds N bytes"
                               under whole_body); NULL when ok */
    const char *body;  /* response body (NUL-terminated, never NULL), valid
                               during the callback; partial when !ok */
    size_t body_len;
    int64_t retry_after_s; /* parsed Retry-After (delta seconds; an HTTP-date
                               becomes seconds from now, >= 0), -1 if absent
                               or unparsable */
    double seconds;        /* total time */
};

/* Runs on the loop thread when the transfer ends (success or failure), never
 * from inside httpc_request. It may start requests, cancel other transfers
 * or close the client. Its transfer handle is invalid once it returns. */
typedef void (*httpc_done)(void *ud, const struct httpc_result *res);

/* Creates a client on loop (initialising libcurl once per process). Returns 0
 * and *out, or -ENOMEM / -EIO. */
int httpc_create(uv_loop_t *loop, struct httpc **out);

/* Starts a request. All of req is copied. On success returns 0 and, if
 * xfer != NULL, a handle for httpc_cancel; cb runs exactly once later. On
 * failure returns <0 and cb never runs: -EINVAL for a bad request (the
 * reason is logged; header values and the token never are), -ECANCELED if
 * the client is closing, -ENOMEM, -EIO if libcurl refused an option. */
int httpc_request(struct httpc *c, const struct httpc_req *req, httpc_done cb, void *ud,
                  struct httpc_xfer **xfer);

/* Cancels a transfer in flight and frees it; its callback will not run. x must
 * not be used afterwards. A no-op when called from x's own callback. */
void httpc_cancel(struct httpc_xfer *x);

/* Number of transfers in flight. */
size_t httpc_active(const struct httpc *c);

/* Cancels everything (no callback runs), closes handles, frees c in the last
 * close callback, then calls done(ud) (may be NULL). c must not be used after
 * this call; once done runs, the client holds no loop handles. */
void httpc_close(struct httpc *c, void (*done)(void *), void *ud);

#endif
