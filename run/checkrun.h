/*
 * checkrun.h - one run of a check command (--validate, or a command
 * --verify): here, as a child of the agent (actions/exec.h, output
 * captured), or in the app's filesystem view through the validator at
 * --validator-socket (the client of run/vproto.h). Either way the result is
 * one struct vproto_result: ran or not, exit, signal, timeout, the first
 * VPROTO_OUTPUT_MAX bytes of output.
 */
#ifndef RA_CHECKRUN_H
#define RA_CHECKRUN_H

#include <stdint.h>
#include <uv.h>

#include "run/vproto.h"

struct checkrun;

/* Runs exactly once, on the loop, unless the run was cancelled; r and its
 * strings are valid during the call. */
typedef void (*checkrun_done)(void *ud, const struct vproto_result *r);

/* The slack the client allows the validator beyond timeout_ms (killing
 * the group, draining its output, the reply) before it gives up. */
#define CHECKRUN_SLACK_MS 5000

/* Starts argv (NULL-terminated, read during the call) with timeout_ms:
 * through the validator at socket when socket is not NULL, else here. The
 * outcome, including "cannot connect to the validator" or "cannot run",
 * comes through cb. Returns 0 and *out (valid until cb runs or
 * checkrun_cancel), or -EINVAL for an empty argv (cb never runs). */
int checkrun_start(uv_loop_t *loop, const char *socket, char *const *argv, uint64_t timeout_ms,
                   checkrun_done cb, void *ud, struct checkrun **out);

/* Gives the run up: a command here is killed, a request to the validator
 * is closed (the validator then kills it). cb never runs afterwards; the
 * handles finish closing on the loop. */
void checkrun_cancel(struct checkrun *c);

#endif
