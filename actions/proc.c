/*
 * proc.c - finding the application's process in /proc and signalling it
 * without ever hitting a reused PID (see proc.h).
 *
 * In a pod with shareProcessNamespace the agent sees every container's
 * processes; PID 1 is the sandbox's pause process and never the app. A
 * process is identified by (PID, start time from /proc/PID/stat): the scan
 * records both, and proc_signal opens a pidfd first and then re-checks the
 * start time, so the pidfd provably refers to the process that was found.
 */
#include "actions/proc.h"

#include "base/file.h"
#include "base/log.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PROC_COMM_MAX 15            /* TASK_COMM_LEN - 1: comm is truncated to this */
#define PROC_PARENT_STEPS 64        /* bound on the parent-chain walk */
#define PROC_PF_KTHREAD 0x00200000u /* kernel thread flag, field 9 of stat */
#define PROC_PID_FILE_MAX 255       /* longer is not a PID file */

/* The fields of /proc/PID/stat that we use. */
struct pstat {
    char state;
    pid_t ppid;
    unsigned flags;
    unsigned long long start_time;
};

/* A process that matched the name during a scan. */
struct cand {
    pid_t pid, ppid;
    unsigned long long start_time;
};

/* Reads at most cap-1 bytes of a (small, /proc) file and NUL-terminates.
 * Returns the length or -errno. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    size_t len = 0;
    while (len < cap - 1) {
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
        if (n == 0) break;
        len += (size_t)n;
    }
    close(fd);
    buf[len] = '\0';
    return (ssize_t)len;
}

/* Reads /proc/PID/stat. Returns 0, -ESRCH if the process is gone, -EIO if
 * the line does not parse, or -errno. */
static int stat_read(pid_t pid, struct pstat *st)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    ssize_t n = read_small(path, buf, sizeof buf);
    if (n == -ENOENT || n == -ESRCH) return -ESRCH;
    if (n < 0) return (int)n;
    /* "pid (comm) state ppid ...": comm may hold spaces and ')', so parse
     * from the last ')'. Fields 3 state, 4 ppid, 9 flags, 22 starttime. */
    const char *p = strrchr(buf, ')');
    int ppid;
    if (!p ||
        sscanf(p + 1,
               " %c %d %*s %*s %*s %*s %u %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu",
               &st->state, &ppid, &st->flags, &st->start_time) != 4)
        return -EIO;
    st->ppid = (pid_t)ppid;
    return 0;
}

/* 1 if the stat describes a process we may target: not a zombie, not dead,
 * not a kernel thread. */
static int is_live_user_process(const struct pstat *st)
{
    return st->state != 'Z' && st->state != 'X' && !(st->flags & PROC_PF_KTHREAD);
}

/* 1 if pid's comm or basename(argv[0]) is `name`. comm holds at most 15
 * characters, so a longer name matches comm by its first 15 characters. */
static int name_matches(pid_t pid, const char *name)
{
    char path[64], buf[4096];
    size_t nlen = strlen(name);
    size_t clen = nlen > PROC_COMM_MAX ? PROC_COMM_MAX : nlen;

    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    ssize_t n = read_small(path, buf, sizeof buf);
    if (n > 0 && buf[n - 1] == '\n') buf[--n] = '\0';
    if (n == (ssize_t)clen && memcmp(buf, name, clen) == 0) return 1;

    /* cmdline is NUL-separated argv; read_small's terminator ends argv[0]
     * even when the process has an empty cmdline. */
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    if (read_small(path, buf, sizeof buf) <= 0) return 0;
    const char *slash = strrchr(buf, '/');
    return strcmp(slash ? slash + 1 : buf, name) == 0;
}

/* Parses a PID file's text: optional surrounding whitespace around one
 * positive decimal number. Returns the PID, -ENOENT if blank, -EINVAL. */
static pid_t parse_pid_text(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    size_t len = strlen(s);
    while (len > 0 && isspace((unsigned char)s[len - 1])) s[--len] = '\0';
    if (len == 0) return -ENOENT;
    long long v = 0;
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p)) return -EINVAL;
        v = v * 10 + (*p - '0');
        if (v > INT_MAX) return -EINVAL;
    }
    return v > 0 ? (pid_t)v : -EINVAL;
}

/* Reads and parses the pid file; *st (may be NULL) gets the fstat of the
 * descriptor the PID was read from. A file that is not a regular file or is
 * far too long for a PID is refused with a warning naming it and why. */
static int pid_file_read_st(const char *path, pid_t *out, struct stat *st)
{
    char *buf, err[PATH_MAX + 128];
    size_t len;
    int rc = ra_read_file_st(path, PROC_PID_FILE_MAX, &buf, &len, st, err, sizeof err);
    if (rc == -EISDIR || rc == -EINVAL || rc == -EFBIG) {
        log_warn("pid file %s", err);
        return -EINVAL;
    }
    if (rc < 0) return rc;
    pid_t pid = parse_pid_text(buf);
    free(buf);
    if (pid < 0) return pid;
    if (pid == 1 || pid == getpid()) return -EINVAL;
    *out = pid;
    return 0;
}

int proc_pid_file_read(const char *path, pid_t *out) { return pid_file_read_st(path, out, NULL); }

int proc_pidfd_alive(int pidfd)
{
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    int r = poll(&p, 1, 0); /* a pidfd polls readable once its process exited */
    return r < 0 ? -errno : r == 0;
}

int proc_pidfd_signal(int pidfd, int sig)
{
    return syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) < 0 ? -errno : 0;
}

/* The wall-clock time (ns since the epoch) at which a process with
 * /proc/PID/stat starttime `ticks` started: the boot time (CLOCK_REALTIME
 * minus CLOCK_BOOTTIME, which is how the kernel computes btime in
 * /proc/stat, here without its rounding to whole seconds) plus the ticks. */
static long long start_wall_ns(unsigned long long ticks)
{
    struct timespec real, boot;
    long hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0) hz = 100;
    clock_gettime(CLOCK_REALTIME, &real);
    clock_gettime(CLOCK_BOOTTIME, &boot);
    long long boot_ns =
        ((long long)real.tv_sec - boot.tv_sec) * 1000000000LL + (real.tv_nsec - boot.tv_nsec);
    return boot_ns + (long long)(ticks / (unsigned long long)hz) * 1000000000LL +
           (long long)(ticks % (unsigned long long)hz) * (1000000000LL / hz);
}

int proc_started_after(unsigned long long start_ticks, const struct timespec *mtime)
{
    long long written = (long long)mtime->tv_sec * 1000000000LL + mtime->tv_nsec;
    return start_wall_ns(start_ticks) > written + PROC_PID_FILE_SLACK_NS;
}

static int find_by_pid_file(const char *path, struct proc_match *out, size_t max)
{
    pid_t pid;
    struct stat pf;
    int rc = pid_file_read_st(path, &pid, &pf);
    if (rc < 0) return rc;
    struct pstat st;
    int r = stat_read(pid, &st);
    if (r < 0) return r;
    if (!is_live_user_process(&st)) return -ESRCH;
    /* A process that started after the file was last written cannot have
     * written it: the file's writer died and its PID was reused. */
    if (proc_started_after(st.start_time, &pf.st_mtim)) {
        double late = (double)(start_wall_ns(st.start_time) -
                               ((long long)pf.st_mtim.tv_sec * 1000000000LL + pf.st_mtim.tv_nsec)) /
                      1e9;
        log_warn("stale pid file %s: PID %d started %.2f s after the file was last written, so it "
                 "is not the process that wrote it (the PID was reused); not signalled",
                 path, (int)pid, late);
        return -ESTALE;
    }
    if (max == 0) return 0;
    out[0].pid = pid;
    out[0].start_time = st.start_time;
    return 1;
}

/* 1 if m's parent chain contains another candidate. Ancestors that vanish
 * end the walk. */
static int has_matching_ancestor(const struct cand *c, size_t n, const struct cand *m)
{
    pid_t p = m->ppid;
    for (int step = 0; step < PROC_PARENT_STEPS && p > 1; step++) {
        for (size_t i = 0; i < n; i++)
            if (c[i].pid == p) return 1;
        struct pstat st;
        if (stat_read(p, &st) < 0) return 0;
        p = st.ppid;
    }
    return 0;
}

/* Scans /proc for live user processes called `name` (never us or PID 1)
 * into a malloc'd array, counting what is visible into info. */
static int scan(const char *name, struct cand **out, size_t *nout, struct proc_scan_info *info)
{
    DIR *d = opendir("/proc");
    if (!d) return -errno;
    pid_t self = getpid();
    size_t others = 0, n = 0, cap = 0;
    struct cand *c = NULL;
    int err = 0;
    struct dirent *de;

    for (errno = 0; (de = readdir(d)) != NULL; errno = 0) {
        char *end;
        long v = strtol(de->d_name, &end, 10);
        if (!isdigit((unsigned char)de->d_name[0]) || *end || v <= 0 || v > INT_MAX) continue;
        pid_t pid = (pid_t)v;
        info->visible++;
        if (pid == self || pid == 1) continue;
        others++;
        struct pstat st;
        /* Processes can exit mid-scan: any read failure just skips them. */
        if (stat_read(pid, &st) < 0 || !is_live_user_process(&st) || !name_matches(pid, name))
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            struct cand *nc = realloc(c, ncap * sizeof *c);
            if (!nc) {
                err = -ENOMEM;
                break;
            }
            c = nc;
            cap = ncap;
        }
        c[n++] = (struct cand){pid, st.ppid, st.start_time};
    }
    if (!err && errno) err = -errno;
    closedir(d);
    if (err) {
        free(c);
        return err;
    }
    info->only_self_and_init = others == 0;
    *out = c;
    *nout = n;
    return 0;
}

int proc_find(const struct proc_target *t, struct proc_match *out, size_t max,
              struct proc_scan_info *info)
{
    struct proc_scan_info local;
    if (!info) info = &local;
    *info = (struct proc_scan_info){0, 0};

    if (t->pid_file && *t->pid_file) return find_by_pid_file(t->pid_file, out, max);
    if (!t->name || !*t->name || strchr(t->name, '/')) return -EINVAL;

    struct cand *c = NULL;
    size_t n = 0;
    int r = scan(t->name, &c, &n, info);
    if (r < 0) return r;
    size_t found = 0;
    for (size_t i = 0; i < n && found < max; i++) {
        if (!t->all && has_matching_ancestor(c, n, &c[i])) continue;
        out[found].pid = c[i].pid;
        out[found].start_time = c[i].start_time;
        found++;
    }
    free(c);
    return (int)found;
}

/* Returns 0 if m's PID still names the same live process, else -ESRCH. */
static int check_identity(const struct proc_match *m)
{
    struct pstat st;
    int r = stat_read(m->pid, &st);
    if (r < 0) return r;
    if (st.start_time != m->start_time || st.state == 'Z' || st.state == 'X') return -ESRCH;
    return 0;
}

int proc_pidfd(const struct proc_match *m)
{
    if (m->pid <= 0) return -EINVAL;
    int fd = (int)syscall(SYS_pidfd_open, m->pid, 0);
    if (fd < 0) return -errno;
    /* The pidfd pins the process it was opened for; if that process has the
     * start time we saw, it is the one we found (not a reused PID). */
    int r = check_identity(m);
    if (r < 0) {
        close(fd);
        return r;
    }
    return fd;
}

int proc_signal(const struct proc_match *m, int sig)
{
    int fd = proc_pidfd(m);
    if (fd == -ENOSYS) {
        /* Kernels before 5.3 have no pidfd_open. Fall back to kill() after
         * the same identity check; this leaves a tiny window in which the
         * PID could be reused between the check and the kill. */
        int r = check_identity(m);
        if (r < 0) return r;
        return kill(m->pid, sig) < 0 ? -errno : 0;
    }
    if (fd < 0) return fd;
    int r = (int)syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
    r = r < 0 ? -errno : 0;
    close(fd);
    return r;
}

void proc_uid_note(pid_t pid, char *buf, size_t n)
{
    char path[64], line[256];
    long uid = -1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Uid: %ld", &uid) == 1) break;
    if (f) fclose(f);
    if (uid >= 0)
        snprintf(buf, n, ", which runs as UID %ld while reload-agent runs as UID %u", uid,
                 (unsigned)geteuid());
    else
        snprintf(buf, n, " (its UID is unreadable) while reload-agent runs as UID %u",
                 (unsigned)geteuid());
}

const char *proc_hint(int err, const struct proc_scan_info *info)
{
    switch (err) {
    case 0:
        if (info && info->only_self_and_init)
            return "only reload-agent and PID 1 are visible: set shareProcessNamespace: true in "
                   "the pod spec";
        return "no matching process is running yet; will retry";
    case -EPERM:
        return "not permitted to signal the process: the kernel allows it only to the same UID "
               "(or with CAP_KILL, which a non-root process does not keep): run reload-agent "
               "with the application's UID (securityContext.runAsUser; reload-agent inject and "
               "the webhook take it from the app container, or from the annotation "
               "reload-agent.io/sidecar-run-as-user)";
    case -ENOENT: return "the pid file does not exist or is empty";
    case -EINVAL:
        return "invalid target: the pid file must be a regular file holding one positive decimal "
               "PID other than 1 and reload-agent's own, and a process name must be non-empty "
               "without '/'";
    case -ESTALE:
        return "stale pid file: the process with that PID started after the file was last "
               "written, so it is not the file's writer (its PID was reused); it is not "
               "signalled, and the pid file is read again on the next attempt";
    case -ESRCH: return "the process has exited or its PID was reused; it will be looked up again";
    case -EACCES: return "permission denied reading the pid file or /proc";
    default: return "unexpected error while looking up or signalling the process";
    }
}
