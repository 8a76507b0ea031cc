/*
 * test_proc.c - proc_find / proc_signal / proc_pidfd against real processes
 * and real signals.
 *
 * The test binary doubles as its own helper process: run with "--counter"
 * it reports every SIGHUP/SIGUSR1/SIGUSR2 as one byte ('H'/'U'/'V') on fd 3;
 * with "--tree" it forks a child (which keeps the same name) and writes the
 * child's PID to fd 3. Helpers are exec'd through symlinks in a temporary
 * directory, so their comm is a name unique to this test run and other
 * processes on the machine never match. PR_SET_PDEATHSIG and alarm() make
 * sure no helper outlives the test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>

#include "actions/proc.h"
#include "tests/helpers.h"

static char g_exe[PATH_MAX]; /* this binary, for helper processes */
static char g_dir[64];       /* scratch directory for symlinks and pid files */

/* ---- helper modes, run in a child after exec ---- */

static void on_sig(int sig)
{
    char c = sig == SIGHUP ? 'H' : sig == SIGUSR1 ? 'U' : 'V';
    (void)!write(3, &c, 1);
}

static int helper_counter(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sig;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    alarm(60);
    if (write(3, "R", 1) != 1) return 1;
    for (;;) pause();
}

static int helper_tree(void)
{
    alarm(60);
    pid_t parent = getpid();
    pid_t c = fork();
    if (c < 0) return 1;
    if (c == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        for (;;) pause();
    }
    if (write(3, &c, sizeof c) != (ssize_t)sizeof c) return 1;
    for (;;) pause();
}

/* ---- test utilities ---- */

/* Waits up to ms for fd to become readable. */
static int wait_readable(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r;
    do r = poll(&p, 1, ms);
    while (r < 0 && errno == EINTR);
    return r == 1;
}

/* Next byte from fd within ms, or -1. */
static int read_byte(int fd, int ms)
{
    unsigned char c;
    if (!wait_readable(fd, ms) || read(fd, &c, 1) != 1) return -1;
    return c;
}

/* Forks and execs path with argv. If rd is given, the child's fd 3 is the
 * write end of a pipe whose read end is returned in *rd. Returns once the
 * exec has succeeded (a close-on-exec pipe reaches EOF). */
static pid_t spawn(const char *path, char *const argv[], int *rd)
{
    int ep[2], rp[2] = {-1, -1};
    assert_int_equal(pipe2(ep, O_CLOEXEC), 0);
    if (rd) assert_int_equal(pipe2(rp, O_CLOEXEC), 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(126);
        if (rd && (rp[1] == 3 ? fcntl(3, F_SETFD, 0) : dup2(rp[1], 3)) < 0) _exit(126);
        execv(path, argv);
        int e = errno;
        (void)!write(ep[1], &e, sizeof e);
        _exit(127);
    }
    close(ep[1]);
    if (rd) close(rp[1]);
    int e = 0;
    assert_true(wait_readable(ep[0], 5000));
    assert_int_equal(read(ep[0], &e, sizeof e), 0); /* EOF, no errno: exec worked */
    close(ep[0]);
    if (rd) *rd = rp[0];
    return pid;
}

/* Creates g_dir/name -> target and writes the link path to out. */
static void make_link(const char *name, const char *target, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", g_dir, name);
    assert_int_equal(symlink(target, out), 0);
}

/* Starts a --counter helper whose comm is `name`, argv[0] `argv0`. */
static pid_t start_counter(const char *name, const char *argv0, int *rd)
{
    char link[PATH_MAX];
    make_link(name, g_exe, link, sizeof link);
    char *argv[] = {(char *)argv0, "--counter", NULL};
    pid_t pid = spawn(link, argv, rd);
    assert_int_equal(read_byte(*rd, 5000), 'R');
    return pid;
}

static void stop(pid_t pid, int rd)
{
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    if (rd >= 0) close(rd);
}

/* Field 22 (start time) and field 3 (state) of /proc/PID/stat, parsed here
 * independently of proc.c. Returns 0 if the process is gone. */
static unsigned long long stat_field22(pid_t pid, char *state)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    assert_non_null(p);
    char *save, *tok = strtok_r(p + 1, " ", &save);
    if (state) *state = tok[0];
    for (int field = 3; field < 22; field++) tok = strtok_r(NULL, " ", &save);
    assert_non_null(tok);
    return strtoull(tok, NULL, 10);
}

static int find(const char *name, int all, struct proc_match *m, size_t max,
                struct proc_scan_info *info)
{
    struct proc_target t = {NULL, name, all};
    return proc_find(&t, m, max, info);
}

static int find_file(const char *path, struct proc_match *m, struct proc_scan_info *info)
{
    struct proc_target t = {path, "ignored-when-pid-file-is-set", 0};
    return proc_find(&t, m, 4, info);
}

static int setup(void **state)
{
    (void)state;
    return make_tmpdir(g_dir, sizeof g_dir, "test_proc", 0);
}

static int teardown(void **state)
{
    (void)state;
    return remove_tmpdir(g_dir);
}

/* ---- tests ---- */

static void test_find_by_comm(void **state)
{
    (void)state;
    char name[32], argv0[64];
    snprintf(name, sizeof name, "rac%d", (int)getpid());
    snprintf(argv0, sizeof argv0, "unrelated-argv0-%d", (int)getpid());
    int rd;
    pid_t pid = start_counter(name, argv0, &rd);

    struct proc_match m[8];
    struct proc_scan_info info;
    assert_int_equal(find(name, 0, m, 8, &info), 1);
    assert_int_equal(m[0].pid, pid);
    assert_true(m[0].start_time == stat_field22(pid, NULL));
    assert_true(info.visible >= 2); /* at least us and the helper */
    assert_int_equal(info.only_self_and_init, 0);
    /* max bounds what is written */
    assert_int_equal(find(name, 0, m, 0, NULL), 0);
    stop(pid, rd);
    assert_int_equal(find(name, 0, m, 8, NULL), 0);
}

static void test_find_by_argv0_basename(void **state)
{
    (void)state;
    char argv0[160], name[96], other[128];
    snprintf(name, sizeof name, "my-app-name-longer-than-15-%d", (int)getpid());
    snprintf(argv0, sizeof argv0, "/nonexistent/dir/%s", name);
    snprintf(other, sizeof other, "%sx", name);
    char *argv[] = {argv0, "30", NULL};
    pid_t pid = spawn("/bin/sleep", argv, NULL); /* comm is "sleep" */

    struct proc_match m[8];
    assert_int_equal(find(name, 0, m, 8, NULL), 1);
    assert_int_equal(m[0].pid, pid);
    assert_int_equal(find(other, 0, m, 8, NULL), 0);       /* same first 15, other name */
    assert_int_equal(find(argv0, 0, m, 8, NULL), -EINVAL); /* names have no '/' */
    stop(pid, -1);
}

static void test_find_long_name_by_comm(void **state)
{
    (void)state;
    char name[64], prefix[16], argv0[64];
    snprintf(name, sizeof name, "ra-long-%d-comm-name", (int)getpid());
    snprintf(prefix, sizeof prefix, "%.15s", name);
    snprintf(argv0, sizeof argv0, "short-%d", (int)getpid());
    int rd;
    pid_t pid = start_counter(name, argv0, &rd); /* comm = first 15 chars of name */

    char comm[64];
    snprintf(comm, sizeof comm, "/proc/%d/comm", (int)pid);
    FILE *f = fopen(comm, "r");
    assert_non_null(f);
    assert_non_null(fgets(comm, sizeof comm, f));
    fclose(f);
    assert_int_equal(strlen(comm), 16); /* 15 characters and the newline */

    struct proc_match m[8];
    assert_int_equal(find(name, 0, m, 8, NULL), 1);
    assert_int_equal(m[0].pid, pid);
    assert_int_equal(find(prefix, 0, m, 8, NULL), 1);
    assert_int_equal(m[0].pid, pid);
    stop(pid, rd);
}

static void test_topmost_only(void **state)
{
    (void)state;
    char name[32], link[PATH_MAX];
    snprintf(name, sizeof name, "rat%d", (int)getpid());
    make_link(name, g_exe, link, sizeof link);
    char *argv[] = {link, "--tree", NULL};
    int rd;
    pid_t parent = spawn(link, argv, &rd);
    pid_t child;
    assert_true(wait_readable(rd, 5000));
    assert_int_equal(read(rd, &child, sizeof child), sizeof child);

    struct proc_match m[8];
    assert_int_equal(find(name, 0, m, 8, NULL), 1);
    assert_int_equal(m[0].pid, parent);

    assert_int_equal(find(name, 1, m, 8, NULL), 2);
    assert_true((m[0].pid == parent && m[1].pid == child) ||
                (m[0].pid == child && m[1].pid == parent));

    assert_int_equal(kill(child, SIGKILL), 0);
    stop(parent, rd);
}

static void test_pid_file(void **state)
{
    (void)state;
    char path[PATH_MAX], text[64], name[32];
    snprintf(path, sizeof path, "%s/app.pid", g_dir);
    snprintf(name, sizeof name, "rap%d", (int)getpid());
    int rd;
    pid_t pid = start_counter(name, name, &rd);
    struct proc_match m[4];
    struct proc_scan_info info = {99, 99};

    snprintf(text, sizeof text, "  %d\n", (int)pid);
    write_file(path, text);
    assert_int_equal(find_file(path, m, &info), 1);
    assert_int_equal(m[0].pid, pid);
    assert_true(m[0].start_time == stat_field22(pid, NULL));
    assert_int_equal(info.visible, 0);
    assert_int_equal(info.only_self_and_init, 0);

    static const struct {
        const char *text;
        int err;
    } bad[] = {
        {"", -ENOENT},    {" \n\t ", -ENOENT}, {"12a", -EINVAL},
        {"-5", -EINVAL},  {"+5", -EINVAL},     {"0", -EINVAL},
        {"1 2", -EINVAL}, {"0x10", -EINVAL},   {"99999999999999999999", -EINVAL},
        {"1\n", -EINVAL}, /* PID 1 is the pause process, never the app */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(path, bad[i].text);
        assert_int_equal(find_file(path, m, NULL), bad[i].err);
    }
    snprintf(text, sizeof text, "%d", (int)getpid());
    write_file(path, text);
    assert_int_equal(find_file(path, m, NULL), -EINVAL); /* ourselves */

    char missing[PATH_MAX];
    snprintf(missing, sizeof missing, "%s/missing.pid", g_dir);
    assert_int_equal(find_file(missing, m, NULL), -ENOENT);
    assert_non_null(strstr(proc_hint(-ENOENT, NULL), "pid file"));

    /* a pid file naming a process that has exited */
    snprintf(text, sizeof text, "%d\n", (int)pid);
    write_file(path, text);
    stop(pid, rd);
    assert_int_equal(find_file(path, m, NULL), -ESRCH);
}

static void test_signal_delivered(void **state)
{
    (void)state;
    char name[32];
    snprintf(name, sizeof name, "ras%d", (int)getpid());
    int rd;
    pid_t pid = start_counter(name, name, &rd);
    struct proc_match m[2];
    assert_int_equal(find(name, 0, m, 2, NULL), 1);

    assert_int_equal(proc_signal(&m[0], SIGHUP), 0);
    assert_int_equal(read_byte(rd, 5000), 'H');
    assert_int_equal(proc_signal(&m[0], SIGHUP), 0);
    assert_int_equal(read_byte(rd, 5000), 'H');
    assert_int_equal(proc_signal(&m[0], 0), 0); /* existence probe, no signal */
    assert_int_equal(proc_signal(&m[0], 1000), -EINVAL);
    stop(pid, rd);
}

/* Sends SIGUSR2 through a good match and checks 'V' arrives with no 'U'
 * before it: had an earlier SIGUSR1 been delivered, it would come first
 * (it was sent earlier, and pending signals are delivered lowest first). */
static void expect_no_usr1(const struct proc_match *good, int rd)
{
    assert_int_equal(proc_signal(good, SIGUSR2), 0);
    assert_int_equal(read_byte(rd, 5000), 'V');
}

static void test_pid_reuse_guard(void **state)
{
    (void)state;
    char name[32];
    snprintf(name, sizeof name, "rag%d", (int)getpid());
    int rd;
    pid_t pid = start_counter(name, name, &rd);
    struct proc_match m[2];
    assert_int_equal(find(name, 0, m, 2, NULL), 1);

    struct proc_match reused = m[0];
    reused.start_time += 1; /* same PID, another process's identity */
    assert_int_equal(proc_signal(&reused, SIGUSR1), -ESRCH);
    assert_int_equal(proc_pidfd(&reused), -ESRCH);
    expect_no_usr1(&m[0], rd);
    stop(pid, rd);
}

static void test_dead_process(void **state)
{
    (void)state;
    char name[32], link[PATH_MAX];
    snprintf(name, sizeof name, "rad%d", (int)getpid());
    make_link(name, "/bin/sleep", link, sizeof link);
    char *argv[] = {link, "30", NULL};
    pid_t pid = spawn(link, argv, NULL);
    struct proc_match m[2];
    assert_int_equal(find(name, 0, m, 2, NULL), 1);
    assert_int_equal(m[0].pid, pid);

    /* killed but not reaped: a zombie is not a target */
    assert_int_equal(kill(pid, SIGKILL), 0);
    char st = 0;
    for (int i = 0; i < 500 && st != 'Z'; i++) {
        stat_field22(pid, &st);
        if (st != 'Z') usleep(10000);
    }
    assert_int_equal(st, 'Z');
    assert_int_equal(proc_signal(&m[0], SIGHUP), -ESRCH);
    assert_int_equal(proc_pidfd(&m[0]), -ESRCH);
    assert_int_equal(find(name, 0, m, 2, NULL), 0);

    assert_int_equal(waitpid(pid, NULL, 0), pid);
    assert_int_equal(proc_signal(&m[0], SIGHUP), -ESRCH);
    assert_non_null(strstr(proc_hint(-ESRCH, NULL), "reused"));
}

/* The boot time in whole seconds, from /proc/stat's btime (proc(5)),
 * independently of proc.c's clock arithmetic. */
static long long boot_time_btime(void)
{
    FILE *f = fopen("/proc/stat", "r");
    assert_non_null(f);
    char line[4096];
    long long bt = -1;
    while (bt < 0 && fgets(line, sizeof line, f))
        if (strncmp(line, "btime ", 6) == 0) bt = strtoll(line + 6, NULL, 10);
    fclose(f);
    assert_true(bt > 0);
    return bt;
}

static void set_mtime_ns(const char *path, long long ns)
{
    struct timespec ts[2];
    ts[0].tv_sec = ts[1].tv_sec = (time_t)(ns / 1000000000LL);
    ts[0].tv_nsec = ts[1].tv_nsec = (long)(ns % 1000000000LL);
    assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

/* F4: the pid file's writer died and an unrelated process got its PID.
 * Observable as a pid file last written before its PID's process started:
 * refused as stale, however often it is asked; fine again once rewritten. */
static void test_stale_pid_file(void **state)
{
    (void)state;
    char name[32], pf[PATH_MAX], text[32];
    snprintf(name, sizeof name, "rsp%d", (int)getpid());
    int rd;
    pid_t pid = start_counter(name, name, &rd);
    snprintf(pf, sizeof pf, "%s/stale.pid", g_dir);
    snprintf(text, sizeof text, "%d\n", (int)pid);
    write_file(pf, text); /* written after the process started: its writer */
    struct proc_match m[4];
    assert_int_equal(find_file(pf, m, NULL), 1);
    assert_int_equal(m[0].pid, pid);

    /* Start time as proc(5) defines it: btime + starttime / CLK_TCK. btime is
     * rounded down, so this is at most 1 s early. */
    long long start_ns =
        boot_time_btime() * 1000000000LL + (long long)(stat_field22(pid, NULL) * 1000000000ULL /
                                                       (unsigned long long)sysconf(_SC_CLK_TCK));
    set_mtime_ns(pf, start_ns - 2500000000LL); /* written 2.5 s before it started */
    for (int i = 0; i < 3; i++) assert_int_equal(find_file(pf, m, NULL), -ESTALE);
    set_mtime_ns(pf, start_ns - 30000000000LL);
    assert_int_equal(find_file(pf, m, NULL), -ESTALE);
    const char *h = proc_hint(-ESTALE, NULL);
    assert_non_null(strstr(h, "stale pid file"));
    assert_non_null(strstr(h, "not signalled"));

    /* Written within the tolerance after the start (coarse clocks): still
     * its writer. */
    set_mtime_ns(pf, start_ns + 1000000000LL);
    assert_int_equal(find_file(pf, m, NULL), 1);
    /* The application rewrites its pid file: accepted again. */
    write_file(pf, text);
    assert_int_equal(find_file(pf, m, NULL), 1);
    assert_int_equal(m[0].pid, pid);
    expect_no_usr1(&m[0], rd); /* nothing was delivered on the way */
    stop(pid, rd);
}

static void test_started_after_rule(void **state)
{
    (void)state;
    unsigned long long t = stat_field22(getpid(), NULL);
    long hz = sysconf(_SC_CLK_TCK);
    long long start_ns =
        boot_time_btime() * 1000000000LL + (long long)(t * 1000000000ULL / (unsigned long long)hz);
    struct timespec long_before = {.tv_sec = (time_t)(start_ns / 1000000000LL) - 10};
    struct timespec after = {.tv_sec = (time_t)(start_ns / 1000000000LL) + 2};
    assert_int_equal(proc_started_after(t, &long_before), 1);
    assert_int_equal(proc_started_after(t, &after), 0);
}

static void test_eperm(void **state)
{
    (void)state;
    char name[32];
    snprintf(name, sizeof name, "rae%d", (int)getpid());
    int rd;
    pid_t pid = start_counter(name, name, &rd);
    struct proc_match m[2];
    assert_int_equal(find(name, 0, m, 2, NULL), 1);

    if (geteuid() == 0) {
        /* An unprivileged UID may not signal a root-owned process. */
        pid_t c = fork();
        assert_true(c >= 0);
        if (c == 0) {
            if (setgroups(0, NULL) || setgid(65534) || setuid(65534)) _exit(3);
            int r = proc_signal(&m[0], SIGUSR1);
            _exit(r == -EPERM ? 0 : r == 0 ? 1 : 2);
        }
        int status;
        assert_int_equal(waitpid(c, &status, 0), c);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        expect_no_usr1(&m[0], rd);
    } else {
        /* Not root: PID 1 belongs to another UID in most environments. */
        char st;
        struct proc_match init = {1, stat_field22(1, &st)};
        FILE *f = fopen("/proc/1/status", "r");
        assert_non_null(f);
        char line[256];
        unsigned uid = (unsigned)geteuid();
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "Uid: %u", &uid) == 1) break;
        fclose(f);
        if (uid == (unsigned)geteuid()) {
            stop(pid, rd);
            skip(); /* no process of another UID to test against */
        }
        assert_int_equal(proc_signal(&init, 0), -EPERM);
    }
    stop(pid, rd);
    const char *h = proc_hint(-EPERM, NULL);
    assert_non_null(strstr(h, "runAsUser"));
    assert_non_null(strstr(h, "sidecar-run-as-user"));
    /* CAP_KILL is named only as what does not help a non-root agent. */
    assert_non_null(strstr(h, "CAP_KILL, which a non-root process does not keep"));
    char note[96];
    proc_uid_note(1, note, sizeof note);
    char want[96];
    snprintf(want, sizeof want, "while reload-agent runs as UID %u", (unsigned)geteuid());
    assert_non_null(strstr(note, want));
    assert_non_null(strstr(note, "which runs as UID "));
}

static void test_pidfd_polls_on_exit(void **state)
{
    (void)state;
    char name[32];
    snprintf(name, sizeof name, "raf%d", (int)getpid());
    int rd;
    pid_t pid = start_counter(name, name, &rd);
    struct proc_match m[2];
    assert_int_equal(find(name, 0, m, 2, NULL), 1);
    int fd = proc_pidfd(&m[0]);
    assert_true(fd >= 0);
    assert_false(wait_readable(fd, 0));
    assert_int_equal(kill(pid, SIGTERM), 0);
    assert_true(wait_readable(fd, 5000));
    close(fd);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    close(rd);
}

/* On kernels without pidfd_open, proc_signal falls back to kill() after
 * the same identity check. A seccomp filter in a child makes pidfd_open
 * fail with ENOSYS to exercise that path with real signals. */
static void test_enosys_fallback(void **state)
{
    (void)state;
    char name[32];
    snprintf(name, sizeof name, "ran%d", (int)getpid());
    int rd;
    pid_t pid = start_counter(name, name, &rd);
    struct proc_match m[2];
    assert_int_equal(find(name, 0, m, 2, NULL), 1);

    pid_t c = fork();
    assert_true(c >= 0);
    if (c == 0) {
        struct sock_filter f[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pidfd_open, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = {sizeof f / sizeof f[0], f};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
            _exit(4);
        if (syscall(SYS_pidfd_open, getpid(), 0) != -1 || errno != ENOSYS) _exit(5);
        if (proc_pidfd(&m[0]) != -ENOSYS) _exit(6);
        struct proc_match reused = m[0];
        reused.start_time += 1;
        if (proc_signal(&reused, SIGUSR1) != -ESRCH) _exit(7);
        if (proc_signal(&m[0], SIGHUP) != 0) _exit(8);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(c, &status, 0), c);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(read_byte(rd, 5000), 'H');
    expect_no_usr1(&m[0], rd);
    stop(pid, rd);
}

/* In a PID namespace of its own (what a pod without shareProcessNamespace
 * gives the sidecar) the scan sees only itself and PID 1 and says so.
 * Runs in a grandchild: PID 1 of a new namespace, with a private /proc. */
static void test_unshared_pid_namespace(void **state)
{
    (void)state;
    if (geteuid() != 0) skip(); /* creating a PID namespace needs CAP_SYS_ADMIN */
    pid_t c = fork();
    assert_true(c >= 0);
    if (c == 0) {
        if (unshare(CLONE_NEWPID | CLONE_NEWNS) < 0) _exit(10);
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) _exit(11);
        pid_t init = fork();
        if (init < 0) _exit(12);
        if (init == 0) { /* PID 1 of the new namespace */
            if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                _exit(13);
            pid_t scanner = fork();
            if (scanner < 0) _exit(14);
            if (scanner == 0) {
                struct proc_match m[2];
                struct proc_scan_info info;
                int r = find("reload-test-app", 0, m, 2, &info);
                if (r != 0) _exit(20);
                if (info.visible != 2) _exit(21);
                if (!info.only_self_and_init) _exit(22);
                if (!strstr(proc_hint(0, &info), "shareProcessNamespace")) _exit(23);
                _exit(0);
            }
            int st;
            if (waitpid(scanner, &st, 0) != scanner || !WIFEXITED(st)) _exit(15);
            _exit(WEXITSTATUS(st));
        }
        int st;
        if (waitpid(init, &st, 0) != init || !WIFEXITED(st)) _exit(16);
        _exit(WEXITSTATUS(st));
    }
    int status;
    assert_int_equal(waitpid(c, &status, 0), c);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 10) skip(); /* namespaces not permitted here */
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_hints_and_invalid_targets(void **state)
{
    (void)state;
    struct proc_match m[2];
    assert_int_equal(find(NULL, 0, m, 2, NULL), -EINVAL);
    assert_int_equal(find("", 0, m, 2, NULL), -EINVAL);
    assert_int_equal(find("a/b", 0, m, 2, NULL), -EINVAL);

    struct proc_scan_info shared = {5, 0}, alone = {2, 1};
    assert_non_null(strstr(proc_hint(0, &alone), "shareProcessNamespace: true"));
    assert_null(strstr(proc_hint(0, &shared), "shareProcessNamespace"));
    assert_non_null(strstr(proc_hint(0, &shared), "will retry"));
    assert_non_null(strstr(proc_hint(0, NULL), "will retry"));
    const int errs[] = {-EPERM, -ENOENT, -EINVAL, -ESRCH, -EACCES, -EIO};
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
        assert_true(strlen(proc_hint(errs[i], NULL)) > 10);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--counter")) return helper_counter();
    if (argc > 1 && !strcmp(argv[1], "--tree")) return helper_tree();
    ssize_t n = readlink("/proc/self/exe", g_exe, sizeof g_exe - 1);
    if (n <= 0) return 1;
    g_exe[n] = '\0';

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find_by_comm),
        cmocka_unit_test(test_find_by_argv0_basename),
        cmocka_unit_test(test_find_long_name_by_comm),
        cmocka_unit_test(test_topmost_only),
        cmocka_unit_test(test_pid_file),
        cmocka_unit_test(test_signal_delivered),
        cmocka_unit_test(test_pid_reuse_guard),
        cmocka_unit_test(test_dead_process),
        cmocka_unit_test(test_stale_pid_file),
        cmocka_unit_test(test_started_after_rule),
        cmocka_unit_test(test_eperm),
        cmocka_unit_test(test_pidfd_polls_on_exit),
        cmocka_unit_test(test_enosys_fallback),
        cmocka_unit_test(test_unshared_pid_namespace),
        cmocka_unit_test(test_hints_and_invalid_targets),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
