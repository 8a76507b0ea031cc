/*
 * test_restart.c - the restart action against real child processes: the
 * target gets the signal and exits (success), a target that ignores it
 * times out (failure), a missing target fails asynchronously, and the
 * callback always runs exactly once with uv_loop_close() == 0 after.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/log.h"
#include "actions/restart.h"

struct result {
    int calls;
    int ok;
    char err[512];
};

static void done(void *ud, int ok, const char *err)
{
    struct result *r = ud;
    r->calls++;
    r->ok = ok;
    snprintf(r->err, sizeof r->err, "%s", err ? err : "");
}

/* Forks a child that optionally ignores SIGTERM and sleeps; writes its PID
 * into pidfile. */
static pid_t child(int ignore_term, const char *pidfile)
{
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        if (ignore_term) signal(SIGTERM, SIG_IGN);
        for (int i = 0; i < 100; i++) usleep(100000); /* bounded: 10 s */
        _exit(0);
    }
    FILE *f = fopen(pidfile, "w");
    assert_non_null(f);
    fprintf(f, "%d\n", (int)p);
    fclose(f);
    return p;
}

static void run(uv_loop_t *loop) { uv_run(loop, UV_RUN_DEFAULT); }

static void test_target_exits(void **state)
{
    (void)state;
    uv_loop_t loop;
    struct result r = {0};
    char pf[64];
    snprintf(pf, sizeof pf, "/tmp/ra-restart-%d.pid", (int)getpid());
    pid_t p = child(0, pf);
    usleep(50000);
    struct proc_target t = {.pid_file = pf};
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(restart_start(&loop, &t, SIGTERM, 5000, done, &r, NULL), 0);
    assert_int_equal(r.calls, 0); /* never synchronous */
    run(&loop);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.ok, 1);
    int st;
    assert_int_equal(waitpid(p, &st, 0), p);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    assert_int_equal(uv_loop_close(&loop), 0);
    unlink(pf);
}

static void test_target_ignores_signal_times_out(void **state)
{
    (void)state;
    uv_loop_t loop;
    struct result r = {0};
    char pf[64];
    snprintf(pf, sizeof pf, "/tmp/ra-restart-%d.pid", (int)getpid());
    pid_t p = child(1, pf);
    usleep(50000);
    struct proc_target t = {.pid_file = pf};
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(restart_start(&loop, &t, SIGTERM, 300, done, &r, NULL), 0);
    run(&loop);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.ok, 0);
    assert_non_null(strstr(r.err, "did not exit"));
    assert_int_equal(kill(p, 0), 0); /* still alive: no SIGKILL escalation */
    kill(p, SIGKILL);
    waitpid(p, NULL, 0);
    assert_int_equal(uv_loop_close(&loop), 0);
    unlink(pf);
}

static void test_missing_target_fails_async(void **state)
{
    (void)state;
    uv_loop_t loop;
    struct result r = {0};
    struct proc_target t = {.pid_file = "/nonexistent/ra.pid"};
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(restart_start(&loop, &t, SIGTERM, 1000, done, &r, NULL), 0);
    assert_int_equal(r.calls, 0);
    run(&loop);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.ok, 0);
    assert_non_null(strstr(r.err, "/nonexistent/ra.pid"));
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    log_configure(RA_LOG_ERROR, RA_LOG_FORMAT_TEXT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_target_exits),
        cmocka_unit_test(test_target_ignores_signal_times_out),
        cmocka_unit_test(test_missing_target_fails_async),
    };
    return cmocka_run_group_tests_name("restart", tests, NULL, NULL);
}
