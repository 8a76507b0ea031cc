/*
 * verify.h - the verification step after an action (--verify): an http://
 * or https:// URL must answer a GET with 2xx, or a command must exit 0
 * (here, or through the validator at --validator-socket), within
 * --verify-timeout. The first try waits VERIFY_INTERVAL_MS after the action
 * (an app that reloads on a signal does it asynchronously: the first
 * answer right after the signal would come from the old configuration),
 * then one try every VERIFY_INTERVAL_MS until one passes or the time is up.
 */
#ifndef RA_VERIFY_H
#define RA_VERIFY_H

#include <stdint.h>
#include <uv.h>

#define VERIFY_INTERVAL_MS 500
#define VERIFY_TRY_MAX_MS 2000 /* an http try's own limit (less when less time is left) */

struct httpc;
struct verify;

struct verify_opts {
    const char *target;  /* the URL or the command */
    uint64_t timeout_ms; /* --verify-timeout */
    const char *socket;  /* --validator-socket for a command, or NULL */
    struct httpc *hc;    /* the client for a URL (the caller's) */
};

/* ok: a try passed; else detail says how the last try failed (one line,
 * the URL redacted). Valid during the call. */
typedef void (*verify_done)(void *ud, int ok, const char *detail, double seconds, int tries);

/* 1 if target is an http:// or https:// URL, else 0 (a command). */
int verify_is_url(const char *target);

/* Starts verifying (everything in o is copied). cb runs exactly once on
 * the loop unless cancelled. Returns 0 and *out, or -EINVAL for a command
 * that does not split or a URL without a client (cb never runs). */
int verify_start(uv_loop_t *loop, const struct verify_opts *o, verify_done cb, void *ud,
                 struct verify **out);

/* Gives verifying up: the try in flight is cancelled; cb never runs. */
void verify_cancel(struct verify *v);

#endif
