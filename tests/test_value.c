/*
 * test_value.c - unit tests for config/value.c: Go durations (parsing per
 * time.ParseDuration, formatting per Duration.String, expected strings
 * taken from Go's own time_test.go table), signals (checked against
 * glibc's sigabbrev_np and <signal.h>), booleans, lists and integers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "config/value.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEC INT64_C(1000000000)
#define MIN (60 * SEC)
#define HOUR (60 * MIN)
#define MS INT64_C(1000000)

static void expect_duration(const char *s, int64_t want)
{
    char err[160] = "";
    int64_t ns = -1;
    int rc = val_duration(s, &ns, err, sizeof err);

    if (rc != 0) print_error("duration %s: %s\n", s, err);
    assert_int_equal(rc, 0);
    assert_int_equal(ns, want);
}

static void expect_bad_duration(const char *s, const char *reason)
{
    char err[160] = "";
    int64_t ns = -7;

    assert_int_equal(val_duration(s, &ns, err, sizeof err), -EINVAL);
    assert_int_equal(ns, -7);
    if (!strstr(err, reason)) print_error("duration %s: got %s, want %s\n", s, err, reason);
    assert_non_null(strstr(err, reason));
}

static void test_duration_valid(void **state)
{
    (void)state;
    expect_duration("300ms", 300 * MS);
    expect_duration("1.5h", HOUR + 30 * MIN);
    expect_duration("2h45m", 2 * HOUR + 45 * MIN);
    expect_duration("1m30s", 90 * SEC);
    expect_duration(".5s", SEC / 2);
    expect_duration("1.s", SEC);
    expect_duration("0", 0);
    expect_duration("+0", 0);
    expect_duration("0s", 0);
    expect_duration("+5s", 5 * SEC);
    expect_duration("1ns", 1);
    expect_duration("1us", 1000);
    expect_duration("1\xc2\xb5s", 1000); /* U+00B5 micro sign */
    expect_duration("1\xce\xbcs", 1000); /* U+03BC mu */
    expect_duration("1h1m1s1ms1us1ns", HOUR + MIN + SEC + MS + 1000 + 1);
    expect_duration("1s1s", 2 * SEC);
    expect_duration("0.000000001s", 1);
    expect_duration("1.0000000001s", SEC);                  /* beyond ns precision: truncated */
    expect_duration("1.00000000000000000000000001h", HOUR); /* fraction digits past 2^63 ignored */
    expect_duration("9223372036854775807ns", INT64_MAX);
    expect_duration("2562047h47m16.854775807s", INT64_MAX);
}

static void test_duration_invalid(void **state)
{
    (void)state;
    expect_bad_duration("", "empty duration");
    expect_bad_duration("5", "missing unit in duration \"5\"");
    expect_bad_duration("1.5.5s", "missing unit in duration \"1.5.5s\"");
    expect_bad_duration("5x", "unknown unit \"x\" in duration \"5x\"");
    expect_bad_duration("1e3s", "unknown unit \"e\" in duration \"1e3s\"");
    expect_bad_duration("1s ", "unknown unit \"s \"");
    expect_bad_duration("1h-1m", "unknown unit \"h-\"");
    expect_bad_duration("1S", "unknown unit \"S\"");
    expect_bad_duration("-1s", "negative duration \"-1s\" not allowed");
    expect_bad_duration("-0", "negative duration");
    expect_bad_duration("+", "invalid duration \"+\"");
    expect_bad_duration("s", "invalid duration \"s\": expected a number at offset 0");
    expect_bad_duration(" 1s", "expected a number at offset 0");
    expect_bad_duration(".s", "'.' without digits");
    expect_bad_duration("9223372036854775808ns", "is too large");
    expect_bad_duration("2562047h47m16.854775808s", "is too large");
    expect_bad_duration("9223372036854775807ns1ns", "is too large");
    /* Go wraps this sum around to 0; we must not. */
    expect_bad_duration("9223372036854775808ns9223372036854775808ns", "is too large");
    expect_bad_duration("99999999999999999999h", "is too large");
    expect_bad_duration("2562048h", "is too large");
}

static void expect_format(int64_t ns, const char *want)
{
    char buf[40];

    val_format_duration(ns, buf, sizeof buf);
    assert_string_equal(buf, want);
}

/* Expected strings from Go's time_test.go durationTests and Duration docs. */
static void test_duration_format(void **state)
{
    char small[4];

    (void)state;
    expect_format(0, "0s");
    expect_format(1, "1ns");
    expect_format(1100, "1.1\xc2\xb5s");
    expect_format(2200 * 1000, "2.2ms");
    expect_format(3300 * MS, "3.3s");
    expect_format(4 * MIN + 5 * SEC, "4m5s");
    expect_format(4 * MIN + 5001 * MS, "4m5.001s");
    expect_format(5 * HOUR + 6 * MIN + 7001 * MS, "5h6m7.001s");
    expect_format(8 * MIN + 1, "8m0.000000001s");
    expect_format(INT64_MAX, "2562047h47m16.854775807s");
    expect_format(INT64_MIN, "-2562047h47m16.854775808s");
    expect_format(HOUR, "1h0m0s");
    expect_format(90 * SEC, "1m30s");
    expect_format(250 * MS, "250ms");
    expect_format(1500 * MS, "1.5s");
    expect_format(-1500 * MS, "-1.5s");
    expect_format(999999999, "999.999999ms");
    val_format_duration(90 * SEC, small, sizeof small); /* truncates, stays terminated */
    assert_string_equal(small, "1m3");
}

static void test_duration_round_trip(void **state)
{
    static const int64_t samples[] = {1,   999,      1000, 1001,          999999,
                                      MS,  SEC - 1,  SEC,  SEC + 1,       59 * SEC,
                                      MIN, HOUR - 1, HOUR, 25 * HOUR + 1, INT64_MAX - 1};
    char buf[40];
    int64_t back;
    size_t k;

    (void)state;
    for (k = 0; k < sizeof samples / sizeof samples[0]; k++) {
        val_format_duration(samples[k], buf, sizeof buf);
        assert_int_equal(val_duration(buf, &back, NULL, 0), 0);
        assert_int_equal(back, samples[k]);
    }
}

static void expect_signal(const char *s, int want)
{
    char err[160] = "";
    int sig = -1;
    int rc = val_signal(s, &sig, err, sizeof err);

    if (rc != 0) print_error("signal %s: %s\n", s, err);
    assert_int_equal(rc, 0);
    assert_int_equal(sig, want);
}

static void expect_bad_signal(const char *s, const char *reason)
{
    char err[160] = "";
    int sig = -1;

    assert_int_equal(val_signal(s, &sig, err, sizeof err), -EINVAL);
    assert_int_equal(sig, -1);
    if (!strstr(err, reason)) print_error("signal %s: got %s, want %s\n", s, err, reason);
    assert_non_null(strstr(err, reason));
}

static void test_signal_names(void **state)
{
    char buf[32];
    int sig;

    (void)state;
    expect_signal("HUP", SIGHUP);
    expect_signal("SIGHUP", SIGHUP);
    expect_signal("sighup", SIGHUP);
    expect_signal("SigUsr1", SIGUSR1);
    expect_signal("usr2", SIGUSR2);
    expect_signal("IO", SIGIO);
    expect_signal("SIGPOLL", SIGIO);
    expect_signal("STKFLT", SIGSTKFLT);
    expect_signal("SIGPWR", SIGPWR);
    expect_signal("1", 1);
    expect_signal("15", SIGTERM);
    expect_signal("064", 64);
    expect_signal("RTMIN", SIGRTMIN);
    expect_signal("SIGRTMIN+3", SIGRTMIN + 3);
    expect_signal("rtmin+0", SIGRTMIN);
    expect_signal("RTMAX", SIGRTMAX);
    expect_signal("sigrtmax-2", SIGRTMAX - 2);
    /* Every name glibc knows, with and without SIG, in lower case too. */
    for (sig = 1; sig < 32; sig++) {
        const char *abbrev = sigabbrev_np(sig);
        size_t k;
        assert_non_null(abbrev);
        expect_signal(abbrev, sig);
        snprintf(buf, sizeof buf, "sig%s", abbrev);
        for (k = 0; buf[k]; k++) buf[k] = (char)(buf[k] | 0x20);
        expect_signal(buf, sig);
    }
}

static void test_signal_invalid(void **state)
{
    (void)state;
    expect_bad_signal("", "empty signal");
    expect_bad_signal("0", "signal number \"0\" out of range 1..64");
    expect_bad_signal("65", "out of range 1..64");
    expect_bad_signal("99999999999999999999", "out of range 1..64");
    expect_bad_signal("SIGFOO", "unknown signal \"SIGFOO\"");
    expect_bad_signal("1x", "unknown signal \"1x\"");
    expect_bad_signal("-1", "unknown signal");
    expect_bad_signal("SIG", "unknown signal");
    expect_bad_signal(" HUP", "unknown signal");
    expect_bad_signal("HUP ", "unknown signal");
    expect_bad_signal("SIGSIGHUP", "unknown signal");
    expect_bad_signal("RTMIN+99", "invalid real-time signal \"RTMIN+99\"");
    expect_bad_signal("RTMIN-1", "invalid real-time signal");
    expect_bad_signal("RTMAX+1", "invalid real-time signal");
    expect_bad_signal("RTMIN+", "invalid real-time signal");
    expect_bad_signal("RTMIN+1x", "invalid real-time signal");
}

static void test_signal_name(void **state)
{
    int sig, back;

    (void)state;
    assert_string_equal(val_signal_name(SIGHUP), "SIGHUP");
    assert_string_equal(val_signal_name(SIGTERM), "SIGTERM");
    assert_string_equal(val_signal_name(SIGIO), "SIGIO");
    assert_string_equal(val_signal_name(SIGRTMIN), "SIGRTMIN");
    assert_string_equal(val_signal_name(SIGRTMIN + 1), "SIGRTMIN+1");
    assert_string_equal(val_signal_name(SIGRTMAX - 1), "SIGRTMAX-1");
    assert_string_equal(val_signal_name(SIGRTMAX), "SIGRTMAX");
    assert_null(val_signal_name(0));
    assert_null(val_signal_name(65));
    assert_null(val_signal_name(-1));
    /* Every name we print parses back to its number. */
    for (sig = 1; sig <= 64; sig++) {
        const char *name = val_signal_name(sig);
        if (sig < 32 || sig >= SIGRTMIN) assert_non_null(name);
        if (!name) continue;
        assert_int_equal(val_signal(name, &back, NULL, 0), 0);
        assert_int_equal(back, sig);
    }
}

static void test_bool(void **state)
{
    static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};
    static const char *const bad[] = {"",     "yes", "no",    "on",    "TRue",
                                      "tRUE", "2",   " true", "true ", "falsey"};
    char err[160];
    size_t k;
    int b;

    (void)state;
    for (k = 0; k < 6; k++) {
        b = -1;
        assert_int_equal(val_bool(yes[k], &b, err, sizeof err), 0);
        assert_int_equal(b, 1);
        b = -1;
        assert_int_equal(val_bool(no[k], &b, err, sizeof err), 0);
        assert_int_equal(b, 0);
    }
    for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        err[0] = '\0';
        b = -1;
        assert_int_equal(val_bool(bad[k], &b, err, sizeof err), -EINVAL);
        assert_int_equal(b, -1);
        assert_non_null(strstr(err, "invalid boolean"));
    }
}

static void expect_list(const char *s, size_t n, const char *const *want)
{
    char err[160] = "", **items = NULL;
    size_t got = 99, k;
    int rc = val_list(s, &items, &got, err, sizeof err);

    if (rc != 0) print_error("list %s: %s\n", s, err);
    assert_int_equal(rc, 0);
    assert_int_equal(got, n);
    for (k = 0; k < n; k++) assert_string_equal(items[k], want[k]);
    assert_null(items[n]);
    val_list_free(items);
}

static void expect_bad_list(const char *s, const char *reason)
{
    char err[160] = "", **items = (char **)1;
    size_t n = 99;

    assert_int_equal(val_list(s, &items, &n, err, sizeof err), -EINVAL);
    assert_null(items);
    assert_int_equal(n, 0);
    if (!strstr(err, reason)) print_error("list %s: got %s, want %s\n", s, err, reason);
    assert_non_null(strstr(err, reason));
}

static void test_list(void **state)
{
    static const char *const abc[] = {"a", "b", "c"};
    static const char *const paths[] = {"/etc/config", "/etc/tls certs"};
    static const char *const one[] = {"single"};

    (void)state;
    expect_list("a,b,c", 3, abc);
    expect_list("a, b , c", 3, abc);
    expect_list(" \ta,b\t,c ", 3, abc);
    expect_list("/etc/config, /etc/tls certs", 2, paths);
    expect_list("single", 1, one);
    expect_list("", 0, NULL);
    expect_list("  ", 0, NULL);
    expect_bad_list("a,,b", "empty item 2 in list \"a,,b\"");
    expect_bad_list("a, ,b", "empty item 2");
    expect_bad_list("a,", "empty item 2");
    expect_bad_list(",a", "empty item 1");
    expect_bad_list(",", "empty item 1");
}

static void expect_uint(const char *s, uint64_t min, uint64_t max, uint64_t want)
{
    char err[160] = "";
    uint64_t v = 12345;

    assert_int_equal(val_uint(s, min, max, &v, err, sizeof err), 0);
    assert_true(v == want);
}

static void expect_bad_uint(const char *s, uint64_t min, uint64_t max, const char *reason)
{
    char err[160] = "";
    uint64_t v = 12345;

    assert_int_equal(val_uint(s, min, max, &v, err, sizeof err), -EINVAL);
    assert_true(v == 12345);
    if (!strstr(err, reason)) print_error("uint %s: got %s, want %s\n", s, err, reason);
    assert_non_null(strstr(err, reason));
}

static void test_uint(void **state)
{
    (void)state;
    expect_uint("0", 0, 10, 0);
    expect_uint("42", 0, 100, 42);
    expect_uint("007", 0, 100, 7);
    expect_uint("10", 10, 20, 10);
    expect_uint("20", 10, 20, 20);
    expect_uint("18446744073709551615", 0, UINT64_MAX, UINT64_MAX);
    expect_bad_uint("18446744073709551616", 0, UINT64_MAX, "out of range 0..18446744073709551615");
    expect_bad_uint("5", 10, 20, "number \"5\" out of range 10..20");
    expect_bad_uint("21", 10, 20, "out of range 10..20");
    expect_bad_uint("", 0, 10, "empty number");
    expect_bad_uint("-1", 0, 10, "invalid unsigned integer \"-1\"");
    expect_bad_uint("+1", 0, 10, "invalid unsigned integer");
    expect_bad_uint(" 1", 0, 10, "invalid unsigned integer");
    expect_bad_uint("1 ", 0, 10, "invalid unsigned integer");
    expect_bad_uint("0x10", 0, 100, "invalid unsigned integer");
    expect_bad_uint("1.5", 0, 10, "invalid unsigned integer");
}

/* Kubernetes annotation keys (IsQualifiedName of the lower-cased key). */
static void test_annotation_key(void **state)
{
    (void)state;
    char n63[64], n64[65], p253[300], p254[300], err[300];
    memset(n63, 'a', 63);
    n63[63] = '\0';
    memset(n64, 'a', 64);
    n64[64] = '\0';
    /* prefix of 253: labels "aaa...a" of 63 joined by '.' (63*4+3 = 255: trim) */
    snprintf(p253, sizeof p253, "%.63s.%.63s.%.63s.%.61s/x", n63, n63, n63, n63);
    snprintf(p254, sizeof p254, "%.63s.%.63s.%.63s.%.62s/x", n63, n63, n63, n63);
    const char *good[] = {"reload-agent.io/config-hash",
                          "example.com/x",
                          "hash",
                          "a",
                          "A_b.c-D",
                          "Example.COM/Hash",
                          "a-b.c0/z9",
                          n63,
                          p253,
                          "x/y",
                          "1/2"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int rc = val_annotation_key(good[i], err, sizeof err);
        if (rc) print_error("%s: %s\n", good[i], err);
        assert_int_equal(rc, 0);
    }
    const struct {
        const char *key, *why;
    } bad[] = {
        {"", "empty annotation key"},
        {"a/b/c", "more than one '/'"},
        {"/x", "prefix before '/' is empty"},
        {"example.com/", "name after '/' is empty"},
        {n64, "longer than 63"},
        {p254, "longer than 253"},
        {"-x", "starting and ending"},
        {"x-", "starting and ending"},
        {"x y", "[-_.A-Za-z0-9]"},
        {"x\ny", "[-_.A-Za-z0-9]"},
        {"_x", "starting and ending"},
        {"exa_mple.com/x", "not a DNS subdomain"},
        {"-example.com/x", "not a DNS subdomain"},
        {"example-.com/x", "not a DNS subdomain"},
        {"example..com/x", "not a DNS subdomain"},
        {".example.com/x", "not a DNS subdomain"},
        {"example.com./x", "not a DNS subdomain"},
        {"caf\xc3\xa9/x", "not a DNS subdomain"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(val_annotation_key(bad[i].key, err, sizeof err), -EINVAL);
        if (!strstr(err, bad[i].why))
            print_error("%s: got %s, want %s\n", bad[i].key, err, bad[i].why);
        assert_non_null(strstr(err, bad[i].why));
        assert_null(strchr(err, '\n')); /* the key is quoted, escapes and all */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duration_valid),
        cmocka_unit_test(test_duration_invalid),
        cmocka_unit_test(test_duration_format),
        cmocka_unit_test(test_duration_round_trip),
        cmocka_unit_test(test_signal_names),
        cmocka_unit_test(test_signal_invalid),
        cmocka_unit_test(test_signal_name),
        cmocka_unit_test(test_bool),
        cmocka_unit_test(test_list),
        cmocka_unit_test(test_uint),
        cmocka_unit_test(test_annotation_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
