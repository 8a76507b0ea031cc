/*
 * test_vproto.c - the validator protocol's lines (run/vproto.c): requests
 * and replies round-trip; every malformed or oversized line is refused
 * with a reason; the output is cut at VPROTO_OUTPUT_MAX; a string holding
 * an escaped NUL is refused rather than cut.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "actions/exec.h"
#include "run/vproto.h"

static void test_request_round_trip(void **state)
{
    (void)state;
    char *argv[] = {"nginx", "-t", "-c", "/etc/nginx/a \"b\".conf", "", NULL};
    char *line = vproto_request_encode(argv, 10000);
    assert_non_null(line);
    assert_int_equal(line[strlen(line) - 1], '\n');
    char **back, why[256];
    uint64_t t;
    assert_int_equal(vproto_request_decode(line, strlen(line), &back, &t, why, sizeof why), 0);
    assert_int_equal(t, 10000);
    for (int i = 0; argv[i]; i++) assert_string_equal(back[i], argv[i]);
    assert_null(back[5]);
    exec_argv_free(back);
    free(line);
    char *none[] = {NULL};
    assert_null(vproto_request_encode(none, 1));
}

static void test_request_refused(void **state)
{
    (void)state;
    static const struct {
        const char *line, *why;
    } bad[] = {
        {"", "not a JSON object"},
        {"[1]", "not a JSON object"},
        {"{\"argv\":[\"x\"]}", "timeout_ms"},
        {"{\"argv\":[\"x\"],\"timeout_ms\":0}", "timeout_ms"},
        {"{\"argv\":[\"x\"],\"timeout_ms\":1.5}", "timeout_ms"},
        {"{\"argv\":[\"x\"],\"timeout_ms\":3600001}", "timeout_ms"},
        {"{\"argv\":[],\"timeout_ms\":5}", "1 to 256 strings"},
        {"{\"argv\":\"x\",\"timeout_ms\":5}", "1 to 256 strings"},
        {"{\"argv\":[\"\"],\"timeout_ms\":5}", "non-empty string"},
        {"{\"argv\":[\"x\",1],\"timeout_ms\":5}", "\"argv\"[1] must be a string"},
        {"{\"argv\":[\"x\\u0000y\"],\"timeout_ms\":5}", "NUL"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char **argv = NULL, why[256] = "";
        uint64_t t;
        int rc =
            vproto_request_decode(bad[i].line, strlen(bad[i].line), &argv, &t, why, sizeof why);
        if (rc != -22 || !strstr(why, bad[i].why))
            fail_msg("case %zu: rc %d, why \"%s\", want \"%s\"", i, rc, why, bad[i].why);
    }
    /* 300 words, and a line over the limit */
    char *big = malloc(VPROTO_REQUEST_MAX + 64);
    assert_non_null(big);
    size_t n = (size_t)snprintf(big, 64, "{\"argv\":[");
    for (int i = 0; i < 300; i++) n += (size_t)sprintf(big + n, "%s\"a\"", i ? "," : "");
    n += (size_t)sprintf(big + n, "],\"timeout_ms\":5}");
    char **argv, why[256];
    uint64_t t;
    assert_int_equal(vproto_request_decode(big, n, &argv, &t, why, sizeof why), -22);
    assert_non_null(strstr(why, "1 to 256"));
    memset(big, ' ', VPROTO_REQUEST_MAX + 10);
    assert_int_equal(
        vproto_request_decode(big, VPROTO_REQUEST_MAX + 10, &argv, &t, why, sizeof why), -22);
    assert_non_null(strstr(why, "exceeds"));
    free(big);
    /* an argv too long to send is not encoded */
    char *word = malloc(VPROTO_REQUEST_MAX + 1);
    assert_non_null(word);
    memset(word, 'x', VPROTO_REQUEST_MAX);
    word[VPROTO_REQUEST_MAX] = '\0';
    char *long_argv[] = {word, NULL};
    assert_null(vproto_request_encode(long_argv, 5));
    free(word);
}

static void test_reply_round_trip(void **state)
{
    (void)state;
    struct vproto_result r = {.ran = 1,
                              .exit_status = 1,
                              .term_signal = 0,
                              .timed_out = 0,
                              .output = "nginx: [emerg] unexpected \"}\"\n\x01 binary",
                              .output_len = 38};
    char *line = vproto_reply_encode(&r), *store, why[256];
    struct vproto_result b;
    assert_int_equal(vproto_reply_decode(line, strlen(line), &b, &store, why, sizeof why), 0);
    assert_int_equal(b.ran, 1);
    assert_int_equal(b.exit_status, 1);
    assert_string_equal(b.output, r.output);
    assert_false(vproto_passed(&b));
    free(store);
    free(line);

    /* the output is cut at VPROTO_OUTPUT_MAX and says so */
    char *big = malloc(VPROTO_OUTPUT_MAX * 2 + 1);
    assert_non_null(big);
    memset(big, 'o', VPROTO_OUTPUT_MAX * 2);
    big[VPROTO_OUTPUT_MAX * 2] = '\0';
    struct vproto_result r2 = {.ran = 1, .output = big, .output_len = VPROTO_OUTPUT_MAX * 2};
    line = vproto_reply_encode(&r2);
    assert_int_equal(vproto_reply_decode(line, strlen(line), &b, &store, why, sizeof why), 0);
    assert_int_equal(b.output_len, VPROTO_OUTPUT_MAX);
    assert_int_equal(b.output_truncated, 1);
    assert_true(vproto_passed(&b));
    free(store);
    free(line);
    free(big);

    struct vproto_result e = {.ran = 0, .error = "cannot run \"nginx\": no such file"};
    line = vproto_reply_encode(&e);
    assert_int_equal(vproto_reply_decode(line, strlen(line), &b, &store, why, sizeof why), 0);
    assert_int_equal(b.ran, 0);
    assert_string_equal(b.error, e.error);
    assert_false(vproto_passed(&b));
    free(store);
    free(line);
}

static void test_reply_refused_and_described(void **state)
{
    (void)state;
    const char *bad[] = {"nope", "{}", "{\"exit\":0}",
                         "{\"exit\":0,\"signal\":0,\"timed_out\":1,\"output\":\"\"}",
                         /* found by fuzz_vproto: a number no int64 holds */
                         "{\"exit\":5e300,\"signal\":1,\"timed_out\":false,\"output\":\"\"}",
                         "{\"exit\":1,\"signal\":99,\"timed_out\":false,\"output\":\"\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct vproto_result r;
        char *store, why[256];
        assert_int_equal(vproto_reply_decode(bad[i], strlen(bad[i]), &r, &store, why, sizeof why),
                         -22);
        assert_null(store);
    }
    char out[128];
    struct vproto_result t = {.ran = 1, .timed_out = 1, .term_signal = 15};
    vproto_describe(&t, 10000, out, sizeof out);
    assert_string_equal(out, "timed out after 10000 ms and was killed");
    struct vproto_result s = {.ran = 1, .term_signal = 9};
    vproto_describe(&s, 1, out, sizeof out);
    assert_string_equal(out, "was killed by signal 9");
    struct vproto_result x = {.ran = 1, .exit_status = 2};
    vproto_describe(&x, 1, out, sizeof out);
    assert_string_equal(out, "exited with status 2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_round_trip),
        cmocka_unit_test(test_request_refused),
        cmocka_unit_test(test_reply_round_trip),
        cmocka_unit_test(test_reply_refused_and_described),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
