/*
 * vproto.h - the validator protocol (docs/safe-reload.md), pure: the
 * request the agent sends to `reload-agent validator` and the reply it gets
 * back, encoded and decoded with their bounds.
 *
 * A unix stream socket, one request per connection: one JSON line
 *   {"argv":["nginx","-t"],"timeout_ms":10000}
 * answered by one JSON line
 *   {"exit":1,"signal":0,"timed_out":false,"output":"...first 4 KiB..."}
 * or, when the command could not run (or the request was refused),
 *   {"error":"cannot run \"nginx\": no such file or directory"}
 * The same result shape carries a command the agent runs itself
 * (run/checkrun.c), so the callers judge one thing.
 */
#ifndef RA_VPROTO_H
#define RA_VPROTO_H

#include <stddef.h>
#include <stdint.h>

#define VPROTO_REQUEST_MAX (64 * 1024) /* a request line, newline included */
#define VPROTO_REPLY_MAX (64 * 1024)   /* a reply line: 4 KiB of output escaped fits */
#define VPROTO_OUTPUT_MAX 4096         /* output kept from a command */
#define VPROTO_ARGV_MAX 256            /* words of a command */
#define VPROTO_TIMEOUT_MAX_MS (3600 * 1000)

/* How one command ended. */
struct vproto_result {
    int ran; /* 1: it ran to an end (an exit, a signal or the timeout); 0: it could not */
    int64_t exit_status;
    int term_signal;
    int timed_out;
    const char *output; /* the first bytes of stdout+stderr, NUL-terminated ("" if none) */
    size_t output_len;
    int output_truncated;
    const char *error; /* !ran: why, one line; else NULL */
};

/* 1 if r says the command passed: it ran and exited 0. */
int vproto_passed(const struct vproto_result *r);

/* Encodes a request line (with its newline). Returns a malloc'd string, or
 * NULL when argv is empty or the line would exceed VPROTO_REQUEST_MAX.
 * Aborts on OOM. */
char *vproto_request_encode(char *const *argv, uint64_t timeout_ms);

/* Decodes a request line (line[0..len), without or with its newline).
 * Returns 0 with *argv (a malloc'd NULL-terminated vector: free with
 * exec_argv_free) and *timeout_ms, or -EINVAL with the reason in why. */
int vproto_request_decode(const char *line, size_t len, char ***argv, uint64_t *timeout_ms,
                          char *why, size_t n);

/* Encodes r as a reply line (with its newline); the output is cut to
 * VPROTO_OUTPUT_MAX. Returns a malloc'd string; aborts on OOM. */
char *vproto_reply_encode(const struct vproto_result *r);

/* Decodes a reply line into *r, whose strings point into *store (free it
 * with free() when done with r). Returns 0, or -EINVAL with the reason in
 * why (then *store is NULL). */
int vproto_reply_decode(const char *line, size_t len, struct vproto_result *r, char **store,
                        char *why, size_t n);

/* Describes how r ended in one line into out: "exited with status 1",
 * "was killed by signal 9", "timed out after 10000 ms and was killed", or
 * r->error. */
void vproto_describe(const struct vproto_result *r, uint64_t timeout_ms, char *out, size_t n);

#endif
