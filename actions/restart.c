/*
 * restart.c - signal the app's main process and wait for it to exit, via a
 * pidfd polled by the loop (see restart.h).
 */
#include "actions/restart.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "actions/action.h"
#include "base/log.h"

struct restart_job {
    uv_poll_t poll;
    uv_timer_t timer;
    int pidfd;
    int open_handles;
    int finished;
    int ok;
    pid_t pid;
    char err[512];
    restart_done cb;
    void *ud;
};

static void on_closed(uv_handle_t *h)
{
    struct restart_job *j = h->data;
    if (--j->open_handles > 0) return;
    if (j->pidfd >= 0) close(j->pidfd);
    j->cb(j->ud, j->ok, j->err);
    free(j);
}

/* Records the outcome once and closes the handles; the callback runs from
 * the last close callback, so it is always asynchronous. */
static void finish(struct restart_job *j, int ok)
{
    if (j->finished) return;
    j->finished = 1;
    j->ok = ok;
    if (j->pidfd >= 0 && uv_is_active((uv_handle_t *)&j->poll)) uv_poll_stop(&j->poll);
    if (j->pidfd >= 0) uv_close((uv_handle_t *)&j->poll, on_closed);
    uv_close((uv_handle_t *)&j->timer, on_closed);
}

static void on_exit_readable(uv_poll_t *p, int status, int events)
{
    struct restart_job *j = p->data;
    (void)events;
    if (status < 0)
        snprintf(j->err, sizeof j->err, "waiting for PID %d: %s", (int)j->pid, uv_strerror(status));
    else
        log_info("PID %d exited; the kubelet restarts the container", (int)j->pid);
    finish(j, status >= 0);
}

static void on_timeout(uv_timer_t *t)
{
    struct restart_job *j = t->data;
    if (j->pidfd < 0) { /* a deferred failure: report it now */
        finish(j, 0);
        return;
    }
    snprintf(j->err, sizeof j->err, "PID %d did not exit within the restart timeout", (int)j->pid);
    finish(j, 0);
}

int restart_start(uv_loop_t *loop, const struct proc_target *t, int sig, uint64_t timeout_ms,
                  restart_done cb, void *ud, struct restart_job **jobp)
{
    struct restart_job *j = calloc(1, sizeof *j);
    struct proc_match m;
    struct proc_scan_info info = {0};
    if (!j) return -ENOMEM;
    j->cb = cb;
    j->ud = ud;
    j->pidfd = -1;
    uv_timer_init(loop, &j->timer);
    j->timer.data = j;
    j->open_handles = 1;
    if (jobp) *jobp = j;

    int n = proc_find(t, &m, 1, &info);
    int fd = n > 0 ? proc_pidfd(&m) : -1;
    int rc = fd >= 0 ? proc_signal(&m, sig) : 0;
    if (n <= 0 || fd < 0 || rc < 0) {
        int why = n <= 0 ? (n == 0 ? 0 : n) : fd < 0 ? fd : rc;
        char uids[96] = "";
        if (why == -EPERM && n > 0) proc_uid_note(m.pid, uids, sizeof uids);
        snprintf(j->err, sizeof j->err, "cannot restart %s%s: %s",
                 t->pid_file && *t->pid_file ? t->pid_file
                 : t->name && *t->name       ? t->name
                                             : "(no --process or --pid-file configured)",
                 uids, proc_hint(why, &info));
        if (fd >= 0) close(fd);
        uv_timer_start(&j->timer, on_timeout, 0, 0); /* report asynchronously */
        return 0;
    }
    j->pid = m.pid;
    j->pidfd = fd;
    uv_poll_init(loop, &j->poll, fd);
    j->poll.data = j;
    j->open_handles = 2;
    uv_poll_start(&j->poll, UV_READABLE, on_exit_readable);
    uv_timer_start(&j->timer, on_timeout, timeout_ms ? timeout_ms : 1, 0);
    log_info("sent signal %d to PID %d; waiting for it to exit", sig, (int)m.pid);
    return 0;
}

/* ---- the restart action (actions/action.h) ---- */

struct restart_run {
    action_done done;
    void *ud;
};

static void restart_run_done(void *ud, int ok, const char *err)
{
    struct restart_run run = *(struct restart_run *)ud;
    free(ud);
    struct action_result r = {ok ? 0 : -EIO, 0, ok ? NULL : err, 0};
    run.done(run.ud, ACTION_RESTART, &r);
}

static void restart_action_start(struct action_env *env, const struct action_params *p,
                                 action_done done, void *ud)
{
    struct proc_target t = {.pid_file = p->pid_file, .name = p->process, .all = 0};
    struct restart_run *run = malloc(sizeof *run);
    if (!run) ra_oom();
    *run = (struct restart_run){done, ud};
    if (restart_start(env->loop, &t, p->restart_signal, p->restart_timeout_ms, restart_run_done,
                      run, NULL) < 0)
        ra_oom();
}

const struct action_ops action__restart_ops = {restart_action_start, NULL, NULL};
