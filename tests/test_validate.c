/*
 * test_validate.c - the validation step (run/validate.c) on a real loop:
 * exit 0 accepts, a failure rejects with the checker's first lines (one
 * line each, joined, bounded), a command that cannot run is an error (not a
 * rejection), a timeout rejects; and validate_first_lines on its own.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include <cmocka.h>

#include "run/validate.h"

struct got {
    int calls;
    enum validate_verdict verdict;
    char summary[800], lines[VALIDATE_LINES_BYTES + 1];
};

static void on_done(void *ud, const struct validate_outcome *o)
{
    struct got *g = ud;
    g->calls++;
    g->verdict = o->verdict;
    snprintf(g->summary, sizeof g->summary, "%s", o->summary);
    snprintf(g->lines, sizeof g->lines, "%s", o->lines);
}

static void run(const char *cmd, uint64_t timeout_ms, struct got *g)
{
    uv_loop_t loop;
    struct validate *v;
    memset(g, 0, sizeof *g);
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(validate_start(&loop, cmd, timeout_ms, NULL, on_done, g, &v), 0);
    assert_int_equal(g->calls, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    assert_int_equal(g->calls, 1);
}

static void test_verdicts(void **state)
{
    (void)state;
    struct got g;
    run("true", 5000, &g);
    assert_int_equal(g.verdict, VALIDATE_ACCEPTED);
    run("sh -c 'echo \"nginx: [emerg] unexpected }\"; echo; echo test failed >&2; exit 1'", 5000,
        &g);
    assert_int_equal(g.verdict, VALIDATE_REJECTED);
    assert_string_equal(g.summary, "exited with status 1");
    assert_string_equal(g.lines, "nginx: [emerg] unexpected } | test failed");
    run("reload-agent-no-such-checker", 5000, &g);
    assert_int_equal(g.verdict, VALIDATE_ERROR);
    assert_non_null(strstr(g.summary, "cannot run"));
    run("sleep 10", 200, &g);
    assert_int_equal(g.verdict, VALIDATE_REJECTED);
    assert_string_equal(g.summary, "timed out after 200 ms and was killed");
    uv_loop_t loop;
    struct validate *v;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(validate_start(&loop, "sh -c 'x", 5000, NULL, on_done, &g, &v), -22);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_first_lines(void **state)
{
    (void)state;
    char buf[VALIDATE_LINES_BYTES + 1];
    const char *out = "a\r\n\n  \nb\tc\x01\n1\n2\n3\n4\n5\n6\n";
    validate_first_lines(out, strlen(out), buf, sizeof buf);
    assert_string_equal(buf, "a | b\\x09c\\x01 | 1 | 2 | 3 | 4"); /* 6 lines, escaped */
    char big[4000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    validate_first_lines(big, strlen(big), buf, sizeof buf);
    assert_int_equal(strlen(buf), VALIDATE_LINES_BYTES);
    validate_first_lines("", 0, buf, sizeof buf);
    assert_string_equal(buf, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verdicts),
        cmocka_unit_test(test_first_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
