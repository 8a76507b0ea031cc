/*
 * test_exec.c - exec_split word splitting and exec_start running real
 * commands on a real libuv loop: exit codes, spawn failure, timeout with
 * SIGTERM then SIGKILL, exec_kill, stdio wiring.
 *
 * Splitting is checked against hand-written expectations and, for cases
 * free of shell expansion, against /bin/sh itself: the shell splits the
 * same text and prints each word NUL-terminated. Every loop test ends with
 * uv_loop_close() == 0; a watchdog timer bounds every run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "actions/exec.h"

#define WATCHDOG_MS 15000

/* ---- exec_split ---- */

/* Runs `printf '%s\0' <cmd>` in /bin/sh and returns the words it split. */
static size_t shell_split(const char *cmd, char *out, size_t cap)
{
    char script[1024];
    snprintf(script, sizeof script, "printf '%%s\\0' %s", cmd);
    char *argv[] = {"sh", "-c", script, NULL};
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        execv("/bin/sh", argv);
        _exit(127);
    }
    close(pfd[1]);
    size_t len = 0;
    ssize_t n;
    while (len < cap && (n = read(pfd[0], out + len, cap - len)) > 0) len += (size_t)n;
    close(pfd[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    return len;
}

static void test_split_table(void **state)
{
    (void)state;
    static const struct {
        const char *cmd;
        const char *words[6]; /* NULL-terminated expectation */
        int check_with_sh;    /* 0 where sh would expand ($, globs) */
    } cases[] = {
        {"true", {"true"}, 1},
        {"  nginx   -s\treload  ", {"nginx", "-s", "reload"}, 1},
        {"sh -c 'exit 7'", {"sh", "-c", "exit 7"}, 1},
        {"echo 'a \"b\" \\c'", {"echo", "a \"b\" \\c"}, 1},
        {"echo \"a 'b' \\\" \\\\ \\$x \\` \\n\"", {"echo", "a 'b' \" \\ $x ` \\n"}, 1},
        {"a\\ b c\\\"d \\'e", {"a b", "c\"d", "'e"}, 1},
        {"x'y'\"z\"w", {"xyzw"}, 1},
        {"'' \"\" e", {"", "", "e"}, 1},
        {"one\\\ntwo", {"onetwo"}, 1},
        {"a\nb", {"a", "b"}, 0},                     /* newline separates words (sh: commands) */
        {"echo $HOME *", {"echo", "$HOME", "*"}, 0}, /* no expansion */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char **argv = NULL;
        assert_int_equal(exec_split(cases[i].cmd, &argv), 0);
        size_t n = 0;
        while (cases[i].words[n]) {
            assert_non_null(argv[n]);
            assert_string_equal(argv[n], cases[i].words[n]);
            n++;
        }
        assert_null(argv[n]);

        if (cases[i].check_with_sh) {
            char out[1024];
            size_t len = shell_split(cases[i].cmd, out, sizeof out), off = 0;
            for (size_t k = 0; k < n; k++) {
                assert_true(off < len);
                assert_string_equal(out + off, argv[k]);
                off += strlen(argv[k]) + 1;
            }
            assert_int_equal(off, len);
        }
        exec_argv_free(argv);
    }
}

static void test_split_errors(void **state)
{
    (void)state;
    static const struct {
        const char *cmd, *why;
    } bad[] = {
        {"", "empty command"},
        {" \t\n ", "empty command"},
        {"echo 'abc", "unterminated single quote"},
        {"echo \"abc", "unterminated double quote"},
        {"echo \"a\\\"", "unterminated double quote"},
        {"echo abc\\", "trailing backslash"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char **argv = (char **)&bad; /* must stay untouched */
        const char *why = NULL;
        assert_int_equal(exec_split_err(bad[i].cmd, &argv, &why), -EINVAL);
        assert_true(argv == (char **)&bad);
        assert_non_null(why);
        assert_string_equal(why, bad[i].why);
        assert_int_equal(exec_split(bad[i].cmd, &argv), -EINVAL);
    }
}

/* ---- exec_start ---- */

struct run {
    uv_loop_t loop;
    uv_timer_t watchdog, killer;
    struct exec_job *job;
    int calls;
    int watchdog_fired;
    struct exec_result res;
    uint64_t elapsed_ms;
    uint64_t t0;
};

static char g_output[8192]; /* the last captured output */

static void on_done(void *ud, const struct exec_result *res)
{
    struct run *r = ud;
    r->calls++;
    r->res = *res;
    g_output[0] = '\0';
    if (res->output) {
        assert_true(res->output_len < sizeof g_output);
        assert_int_equal(strlen(res->output), res->output_len);
        memcpy(g_output, res->output, res->output_len + 1);
    }
    r->res.output = NULL;
    r->elapsed_ms = (uv_hrtime() - r->t0) / 1000000;
}

static void on_watchdog(uv_timer_t *t)
{
    struct run *r = t->data;
    r->watchdog_fired = 1;
    uv_stop(&r->loop);
}

static void on_killer(uv_timer_t *t)
{
    struct run *r = t->data;
    exec_kill(r->job);
}

/* Runs cmd to completion; kill_after_ms > 0 calls exec_kill then;
 * capture_max > 0 runs it through exec_run with its output captured into
 * g_output. */
static void run_cmd_capture(struct run *r, const char *cmd, uint64_t timeout_ms,
                            uint64_t kill_after_ms, size_t capture_max)
{
    memset(r, 0, sizeof *r);
    assert_int_equal(uv_loop_init(&r->loop), 0);
    uv_timer_init(&r->loop, &r->watchdog);
    uv_timer_init(&r->loop, &r->killer);
    r->watchdog.data = r->killer.data = r;
    uv_timer_start(&r->watchdog, on_watchdog, WATCHDOG_MS, 0);
    uv_unref((uv_handle_t *)&r->watchdog);
    if (kill_after_ms) uv_timer_start(&r->killer, on_killer, kill_after_ms, 0);
    uv_unref((uv_handle_t *)&r->killer);

    r->t0 = uv_hrtime();
    if (capture_max) {
        char **argv;
        assert_int_equal(exec_split(cmd, &argv), 0);
        struct exec_opts o = {.argv = argv, .timeout_ms = timeout_ms, .capture_max = capture_max};
        assert_int_equal(exec_run(&r->loop, &o, on_done, r, &r->job), 0);
        exec_argv_free(argv);
    } else {
        assert_int_equal(exec_start(&r->loop, cmd, timeout_ms, on_done, r, &r->job), 0);
    }
    assert_int_equal(r->calls, 0); /* never synchronously */
    uv_run(&r->loop, UV_RUN_DEFAULT);
    if (r->watchdog_fired && r->calls == 0) {
        exec_kill(r->job);
        uv_run(&r->loop, UV_RUN_DEFAULT);
    }
    uv_close((uv_handle_t *)&r->watchdog, NULL);
    uv_close((uv_handle_t *)&r->killer, NULL);
    uv_run(&r->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&r->loop), 0);
    assert_int_equal(r->watchdog_fired, 0);
    assert_int_equal(r->calls, 1);
}

static void run_cmd(struct run *r, const char *cmd, uint64_t timeout_ms, uint64_t kill_after_ms)
{
    run_cmd_capture(r, cmd, timeout_ms, kill_after_ms, 0);
}

static void test_exit_codes(void **state)
{
    (void)state;
    struct run r;
    run_cmd(&r, "true", 0, 0);
    assert_int_equal(r.res.spawn_error, 0);
    assert_int_equal(r.res.exit_status, 0);
    assert_int_equal(r.res.term_signal, 0);
    assert_int_equal(r.res.timed_out, 0);

    run_cmd(&r, "false", 5000, 0);
    assert_int_equal(r.res.exit_status, 1);
    assert_int_equal(r.res.timed_out, 0);

    run_cmd(&r, "sh -c 'exit 7'", 5000, 0);
    assert_int_equal(r.res.exit_status, 7);

    run_cmd(&r, "sh -c 'kill -USR1 $$'", 5000, 0);
    assert_int_equal(r.res.term_signal, SIGUSR1);
}

static void test_stdio(void **state)
{
    (void)state;
    struct run r;
    /* stdin is /dev/null, not ours (made a pipe here, whatever it was) */
    int saved = dup(0), p[2];
    assert_true(saved >= 0);
    assert_int_equal(pipe(p), 0);
    assert_int_equal(dup2(p[0], 0), 0);
    run_cmd(&r, "sh -c 'test \"$(readlink /proc/$$/fd/0)\" = /dev/null'", 5000, 0);
    assert_int_equal(dup2(saved, 0), 0);
    close(saved);
    close(p[0]);
    close(p[1]);
    assert_int_equal(r.res.exit_status, 0);

    /* stdout and stderr are ours */
    char cmd[2 * PATH_MAX + 128], out[PATH_MAX] = "", err[PATH_MAX] = "";
    assert_true(readlink("/proc/self/fd/1", out, sizeof out - 1) > 0);
    assert_true(readlink("/proc/self/fd/2", err, sizeof err - 1) > 0);
    assert_null(strchr(out, '\''));
    assert_null(strchr(err, '\''));
    snprintf(cmd, sizeof cmd,
             "sh -c 'test \"$(readlink /proc/$$/fd/1)\" = \"$0\" && "
             "test \"$(readlink /proc/$$/fd/2)\" = \"$1\"' '%s' '%s'",
             out, err);
    run_cmd(&r, cmd, 5000, 0);
    assert_int_equal(r.res.exit_status, 0);
}

static void test_spawn_failure(void **state)
{
    (void)state;
    struct run r;
    run_cmd(&r, "/nonexistent/reload-agent-no-such-binary --flag", 5000, 0);
    assert_int_equal(r.res.spawn_error, UV_ENOENT);
    assert_int_equal(r.res.timed_out, 0);

    run_cmd(&r, "reload-agent-no-such-binary-on-path", 5000, 0);
    assert_int_equal(r.res.spawn_error, UV_ENOENT);

    /* not executable */
    char path[] = "/tmp/test_execact.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(chmod(path, 0644), 0);
    run_cmd(&r, path, 5000, 50); /* exec_kill on a failed job is harmless */
    unlink(path);
    assert_int_equal(r.res.spawn_error, UV_EACCES);

    struct exec_job *job;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(exec_start(&loop, "  ", 0, on_done, NULL, &job), -EINVAL);
    assert_int_equal(exec_start(&loop, "'x", 0, on_done, NULL, &job), -EINVAL);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0); /* nothing was left behind */
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_timeout_sigterm(void **state)
{
    (void)state;
    struct run r;
    run_cmd(&r, "sleep 5", 200, 0);
    assert_int_equal(r.res.spawn_error, 0);
    assert_int_equal(r.res.timed_out, 1);
    assert_int_equal(r.res.term_signal, SIGTERM);
    assert_true(r.elapsed_ms >= 190); /* slack: libuv timers use a coarse clock */
    assert_true(r.elapsed_ms < 3000); /* bound: sleep 5 did not run out */
}

static void test_timeout_sigkill_after_grace(void **state)
{
    (void)state;
    struct run r;
    /* sh ignores TERM, and so does sleep, which inherits the ignore. */
    run_cmd(&r, "sh -c 'trap \"\" TERM; sleep 10; exit 3'", 200, 0);
    assert_int_equal(r.res.timed_out, 1);
    assert_int_equal(r.res.term_signal, SIGKILL);
    assert_true(r.elapsed_ms >= 2150); /* the timeout plus the 2 s grace */
    assert_true(r.elapsed_ms < 9000);
}

static void test_timeout_kills_process_group(void **state)
{
    (void)state;
    /* The shell exits on TERM; its child (sleep, in the same group) must
     * also be gone, or it would keep running after the action. The shell
     * records the child's PID in a file so the test can check it. */
    char path[] = "/tmp/test_execact.XXXXXX", cmd[512];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    snprintf(cmd, sizeof cmd, "sh -c 'sleep 10 & echo $! > %s; wait'", path);
    struct run r;
    run_cmd(&r, cmd, 300, 0);
    assert_int_equal(r.res.timed_out, 1);
    FILE *f = fopen(path, "r");
    int child = 0;
    if (f) {
        if (fscanf(f, "%d", &child) != 1) child = 0;
        fclose(f);
    }
    unlink(path);
    assert_true(child > 1);
    /* The orphaned sleep is reaped by init; wait (bounded) until it is gone. */
    int gone = 0;
    for (int i = 0; i < 300 && !gone; i++) {
        char st[64], buf[512] = "";
        snprintf(st, sizeof st, "/proc/%d/stat", child);
        FILE *s = fopen(st, "r");
        if (!s) {
            gone = 1;
            break;
        }
        size_t n = fread(buf, 1, sizeof buf - 1, s);
        fclose(s);
        buf[n] = '\0';
        char *p = strrchr(buf, ')');
        if (p && p[2] == 'Z')
            gone = 1; /* dead, awaiting its reaper */
        else
            usleep(10000);
    }
    assert_true(gone);
}

static void test_exec_kill(void **state)
{
    (void)state;
    struct run r;
    run_cmd(&r, "sleep 10", 0, 100);
    assert_int_equal(r.res.spawn_error, 0);
    assert_int_equal(r.res.timed_out, 0);
    assert_int_equal(r.res.term_signal, SIGKILL);
    assert_true(r.elapsed_ms < 9000);

    /* right after the start, before the loop ever ran */
    memset(&r, 0, sizeof r);
    assert_int_equal(uv_loop_init(&r.loop), 0);
    assert_int_equal(exec_start(&r.loop, "sleep 10", 0, on_done, &r, &r.job), 0);
    exec_kill(r.job);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&r.loop), 0);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.res.term_signal, SIGKILL);
}

/* exec_run with capture: stdout and stderr in one bounded buffer, the
 * rest read and dropped (a writer of more than a pipe's worth does not
 * block), a background child that keeps the pipe open does not hold the
 * result past EXEC_DRAIN_MS, and a spawn failure still reports once. */
static void test_capture(void **state)
{
    (void)state;
    struct run r;
    run_cmd_capture(&r, "sh -c 'echo out; echo err >&2; exit 3'", 5000, 0, 4096);
    assert_int_equal(r.res.exit_status, 3);
    assert_string_equal(g_output, "out\nerr\n");
    assert_int_equal(r.res.output_truncated, 0);

    /* 1 MiB written, 100 bytes kept */
    run_cmd_capture(&r, "sh -c 'head -c 1048576 /dev/zero | tr \"\\\\0\" x'", 10000, 0, 100);
    assert_int_equal(r.res.exit_status, 0);
    assert_int_equal(strlen(g_output), 100);
    assert_int_equal(r.res.output_truncated, 1);
    assert_int_equal(g_output[0], 'x');

    /* nothing written: an empty string, not NULL */
    run_cmd_capture(&r, "true", 5000, 0, 64);
    assert_string_equal(g_output, "");

    /* a child left behind with the pipe open: the result comes after the
     * drain time, not after the child */
    run_cmd_capture(&r, "sh -c 'echo first; sleep 3 & exit 0'", 5000, 0, 64);
    assert_int_equal(r.res.exit_status, 0);
    assert_string_equal(g_output, "first\n");
    assert_true(r.elapsed_ms < 2500);

    run_cmd_capture(&r, "/nonexistent/reload-agent-no-such-binary", 5000, 0, 64);
    assert_int_equal(r.res.spawn_error, UV_ENOENT);
    assert_string_equal(g_output, "");
}

/* A timeout with capture: the process group is killed and what it wrote
 * before is kept. */
static void test_capture_timeout(void **state)
{
    (void)state;
    struct run r;
    run_cmd_capture(&r, "sh -c 'echo started; exec sleep 30'", 200, 0, 256);
    assert_int_equal(r.res.timed_out, 1);
    assert_int_equal(r.res.term_signal, SIGTERM);
    assert_string_equal(g_output, "started\n");
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_table),
        cmocka_unit_test(test_split_errors),
        cmocka_unit_test(test_exit_codes),
        cmocka_unit_test(test_stdio),
        cmocka_unit_test(test_spawn_failure),
        cmocka_unit_test(test_timeout_sigterm),
        cmocka_unit_test(test_timeout_sigkill_after_grace),
        cmocka_unit_test(test_timeout_kills_process_group),
        cmocka_unit_test(test_exec_kill),
        cmocka_unit_test(test_capture),
        cmocka_unit_test(test_capture_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
