/*
 * test_restartpod.c - the restart-pod action's pure parts: the verdict of
 * restartPolicyRules for an exit code (first match, In and NotIn), and the
 * record across the restart (written atomically, taken once, a malformed
 * one reported and removed).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "actions/restartpod.h"
#include "kube/restartrules.h"

static char g_dir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/ra-test-restartpod-%d", (int)getpid());
    return mkdir(g_dir, 0700);
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_verdict_first_match(void **state)
{
    (void)state;
    char why[256];
    const char *rules =
        "[{\"action\":\"Restart\",\"exitCodes\":{\"operator\":\"In\",\"values\":[1,2]}},"
        "{\"action\":\"RestartAllContainers\",\"exitCodes\":{\"operator\":\"NotIn\","
        "\"values\":[0,137]}}]";
    assert_int_equal(restartrules_verdict(rules, 1, why, sizeof why), RESTARTRULES_RESTART);
    assert_non_null(strstr(why, "rule [0]"));
    assert_int_equal(restartrules_verdict(rules, 88, why, sizeof why), RESTARTRULES_RESTART_ALL);
    assert_int_equal(restartrules_verdict(rules, 137, why, sizeof why), RESTARTRULES_NO_MATCH);
    assert_non_null(strstr(why, "no rule matches exit code 137"));
    assert_int_equal(restartrules_verdict("[]", 88, why, sizeof why), RESTARTRULES_NO_MATCH);
    assert_int_equal(restartrules_verdict("nope", 88, why, sizeof why), -EINVAL);
    char mine[128];
    restartrules_for_code(42, mine, sizeof mine);
    assert_int_equal(restartrules_check(mine, why, sizeof why), 0);
    assert_int_equal(restartrules_verdict(mine, 42, why, sizeof why), RESTARTRULES_RESTART_ALL);
    assert_int_equal(restartrules_verdict(mine, 43, why, sizeof why), RESTARTRULES_NO_MATCH);
}

static void test_record_round_trip(void **state)
{
    (void)state;
    char err[512];
    struct restartpod_record in = {1796313176031, 88, "", "/etc/app/a.conf, /etc/app/b"}, out;
    memset(in.hash, 'a', 64);
    in.hash[64] = '\0';
    assert_int_equal(restartpod_record_take(g_dir, &out, err, sizeof err), 0); /* none yet */
    assert_int_equal(restartpod_record_write(g_dir, &in, err, sizeof err), 0);
    assert_int_equal(restartpod_record_take(g_dir, &out, err, sizeof err), 1);
    assert_true(out.time_ms == in.time_ms);
    assert_int_equal(out.exit_code, 88);
    assert_string_equal(out.hash, in.hash);
    assert_string_equal(out.files, in.files);
    restartpod_record_free(&out);
    /* taken once */
    assert_int_equal(restartpod_record_take(g_dir, &out, err, sizeof err), 0);
    /* no temporary file is left beside it */
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s/" RESTARTPOD_RECORD_FILE ".tmp", g_dir);
    assert_int_equal(access(tmp, F_OK), -1);
    /* a directory that does not exist: an error naming the path */
    char missing[300];
    snprintf(missing, sizeof missing, "%s/nope", g_dir);
    assert_true(restartpod_record_write(missing, &in, err, sizeof err) < 0);
    assert_non_null(strstr(err, missing));
}

static void test_record_malformed_is_reported_and_removed(void **state)
{
    (void)state;
    char path[300], err[512];
    struct restartpod_record out;
    snprintf(path, sizeof path, "%s/" RESTARTPOD_RECORD_FILE, g_dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"time_ms\":\"soon\"}", f);
    fclose(f);
    assert_int_equal(restartpod_record_take(g_dir, &out, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "not the record reload-agent writes"));
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(restartpod_record_take(g_dir, &out, err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verdict_first_match),
        cmocka_unit_test_setup_teardown(test_record_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_record_malformed_is_reported_and_removed, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
