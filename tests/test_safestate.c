/*
 * test_safestate.c - what the safe-reload steps keep in --state-dir
 * (run/safestate.c): the ready marker (this process: ready; a process that
 * is gone: not; none: not yet; garbage: refused) and the storm breaker's
 * record (round trip, none, malformed).
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "run/safestate.h"

static char g_dir[PATH_MAX];

static void put(const char *name, const char *content)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(content, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/test_safestate.XXXXXX");
    assert_non_null(mkdtemp(g_dir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static void test_ready_marker(void **state)
{
    (void)state;
    char why[512];
    assert_int_equal(safestate_check_ready(g_dir, why, sizeof why), -ENOENT);
    assert_non_null(strstr(why, "not ready yet"));
    assert_int_equal(safestate_set_ready(g_dir, 1, why, sizeof why), 0);
    assert_int_equal(safestate_check_ready(g_dir, why, sizeof why), 0);
    assert_int_equal(safestate_set_ready(g_dir, 0, why, sizeof why), 0);
    assert_int_equal(safestate_check_ready(g_dir, why, sizeof why), -ENOENT);
    assert_int_equal(safestate_set_ready(g_dir, 0, why, sizeof why), 0); /* none: fine */
    /* a child that exited (and was reaped): its PID names no process */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    char line[32];
    snprintf(line, sizeof line, "%d\n", (int)pid);
    put(SAFESTATE_READY, line);
    assert_int_equal(safestate_check_ready(g_dir, why, sizeof why), -ESRCH);
    assert_non_null(strstr(why, "gone"));
    put(SAFESTATE_READY, "not a pid\n");
    assert_int_equal(safestate_check_ready(g_dir, why, sizeof why), -EINVAL);
}

static void test_storm_record(void **state)
{
    (void)state;
    char err[512];
    int64_t *t;
    size_t n;
    assert_int_equal(safestate_load_storm(g_dir, &t, &n, err, sizeof err), 0);
    int64_t v[] = {1700000000000, 1700000001000};
    assert_int_equal(safestate_save_storm(g_dir, v, 2, err, sizeof err), 0);
    assert_int_equal(safestate_load_storm(g_dir, &t, &n, err, sizeof err), 1);
    assert_int_equal(n, 2);
    assert_true(t[0] == v[0] && t[1] == v[1]);
    free(t);
    put(SAFESTATE_STORM, "{\"version\":1,\"actions_ms\":[\"x\"]}");
    assert_int_equal(safestate_load_storm(g_dir, &t, &n, err, sizeof err), -EINVAL);
    put(SAFESTATE_STORM, "garbage");
    assert_int_equal(safestate_load_storm(g_dir, &t, &n, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "not a storm record"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ready_marker, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storm_record, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
