/*
 * signal.c - the signal action: send --signal to the app's process(es),
 * found by --pid-file or --process (actions/proc.h). Completes at once.
 *
 * With --pid-file, the pidfd of the last target is kept in the action's
 * state: while the file names the same PID and that process is alive (one
 * poll on the pidfd, which can never refer to a reused PID), the signal
 * goes straight through it. A pid file whose stat is unchanged since the
 * PID was read from it is not read again; any change (even a touch)
 * re-reads it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "actions/action.h"
#include "actions/proc.h"
#include "base/log.h"

#define MAX_TARGETS 64

/* env->state[ACTION_SIGNAL] */
struct signal_state {
    pid_t pid;      /* --pid-file target of the last signal ... */
    int pidfd;      /* ... and its pidfd, kept open: -1 if none */
    struct stat pf; /* the pid file as stat'ed before pid was read from it */
};

static struct signal_state *state_of(struct action_env *env)
{
    struct signal_state *s = env->state[ACTION_SIGNAL];
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s) ra_oom();
        s->pidfd = -1;
        env->state[ACTION_SIGNAL] = s;
    }
    return s;
}

/* 1 if a and b are the same version of one file (same inode, size,
 * modification and change time). */
static int same_file_version(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Keeps st as the pid file version s->pid was read from, unless the file
 * changed less than a second ago: file times are coarse (a clock tick), so
 * a rewrite within the same tick could look unchanged; such a file is
 * read again next time (as git treats "racily clean" files). */
static void remember_pid_file(struct signal_state *s, const struct stat *st)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (st->st_ino != 0 && st->st_ctim.tv_sec + 1 < now.tv_sec)
        s->pf = *st;
    else
        s->pf = (struct stat){0};
}

/* Signals the cached target if it is still the pid file's process. pf is
 * the pid file's stat, taken before anything reads it (zeroed if the stat
 * failed). Returns 0 if signalled. */
static int signal_cached(struct signal_state *s, const struct action_params *p,
                         const struct stat *pf)
{
    pid_t pid;
    if (s->pidfd < 0) return -ENOENT;
    if (pf->st_ino != 0 &&
        (same_file_version(pf, &s->pf) ||
         (proc_pid_file_read(p->pid_file, &pid) == 0 && pid == s->pid)) &&
        proc_pidfd_alive(s->pidfd) == 1 && proc_pidfd_signal(s->pidfd, p->signal) == 0) {
        remember_pid_file(s, pf);
        return 0;
    }
    close(s->pidfd);
    s->pidfd = -1;
    return -ESRCH;
}

static void report(action_done done, void *ud, int status, const char *err)
{
    struct action_result r = {status, 0, status < 0 ? err : NULL, 0};
    done(ud, ACTION_SIGNAL, &r);
}

static void signal_start(struct action_env *env, const struct action_params *p, action_done done,
                         void *ud)
{
    struct signal_state *s = state_of(env);
    int by_file = p->pid_file && *p->pid_file;
    struct proc_target t = {.pid_file = p->pid_file, .name = p->process, .all = p->signal_all};
    struct proc_match m[MAX_TARGETS];
    struct proc_scan_info info = {0};
    const char *who = by_file ? p->pid_file : p->process ? p->process : "";
    char buf[512];
    /* stat'ed before it is read: a change in between is seen next time */
    struct stat pf = {0};
    if (by_file && stat(p->pid_file, &pf) != 0) pf = (struct stat){0};
    if (by_file && signal_cached(s, p, &pf) == 0) {
        report(done, ud, 0, NULL);
        return;
    }
    int n = proc_find(&t, m, MAX_TARGETS, &info);
    if (n <= 0) {
        snprintf(buf, sizeof buf, "no target process for %s: %s", who,
                 proc_hint(n == 0 ? -ESRCH : n, &info));
        report(done, ud, n == 0 ? -ESRCH : n, buf);
        return;
    }
    for (int i = 0; i < n; i++) {
        int rc, fd = by_file ? proc_pidfd(&m[i]) : -1;
        if (fd >= 0) {
            rc = proc_pidfd_signal(fd, p->signal);
            if (rc == 0) {
                if (s->pidfd >= 0) close(s->pidfd);
                s->pid = m[i].pid;
                s->pidfd = fd;
                remember_pid_file(s, &pf);
            } else {
                close(fd);
            }
        } else {
            rc = proc_signal(&m[i], p->signal); /* also the no-pidfd (old kernel) path */
        }
        if (rc < 0) {
            char uids[96] = "";
            if (rc == -EPERM) proc_uid_note(m[i].pid, uids, sizeof uids);
            snprintf(buf, sizeof buf, "cannot signal PID %d (%s)%s: %s", (int)m[i].pid, who, uids,
                     proc_hint(rc, &info));
            report(done, ud, rc, buf);
            return;
        }
        log_debug("sent signal %d to PID %d", p->signal, (int)m[i].pid);
    }
    report(done, ud, 0, NULL);
}

static void signal_release(struct action_env *env)
{
    struct signal_state *s = env->state[ACTION_SIGNAL];
    if (!s) return;
    if (s->pidfd >= 0) close(s->pidfd);
    free(s);
    env->state[ACTION_SIGNAL] = NULL;
}

const struct action_ops action__signal_ops = {signal_start, NULL, signal_release};
