/*
 * restart.h - the restart action: in-place container restart.
 *
 * Sends --restart-signal (default SIGTERM) to the application's main
 * process (found like the signal action: --pid-file or --process, topmost
 * match, never PID 1 or ourselves) and waits, without blocking the loop, for
 * it to exit (its pidfd polls readable). When the container's main process
 * exits, the kubelet restarts the container in place (same pod, no
 * rescheduling). There is no SIGKILL escalation: the kubelet and the app's
 * own termination handling own that; a process that does not exit within the
 * timeout is a failure, retried by the engine.
 */
#ifndef RA_RESTART_H
#define RA_RESTART_H

#include <stdint.h>
#include <uv.h>

#include "actions/proc.h"

struct restart_job;

/* ok: 1 if the process exited within the timeout. err: a one-line reason
 * otherwise (static or job-owned; valid during the callback). */
typedef void (*restart_done)(void *ud, int ok, const char *err);

/* Starts a restart. cb runs exactly once, later, on the loop (also when the
 * target cannot be found or signalled). Returns 0, or -ENOMEM (cb never runs). */
int restart_start(uv_loop_t *loop, const struct proc_target *t, int sig, uint64_t timeout_ms,
                  restart_done cb, void *ud, struct restart_job **job);

#endif
