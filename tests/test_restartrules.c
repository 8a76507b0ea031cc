/*
 * test_restartrules.c - kube/restartrules.c: the verdict of a container's
 * restartPolicyRules for an exit code (first match, In and NotIn), and the
 * rule the agent writes for its own code. (The restart-pod record is
 * tested with --state-dir, test_statedir.c.)
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

#include "kube/restartrules.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verdict_first_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
