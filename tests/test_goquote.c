/*
 * test_goquote.c - unit tests for config/goquote.c: every escape form Go's
 * strconv.Unquote accepts, the invalid ones it rejects, strconv.Quote
 * output checked against strings written by hand from Go's rules, round
 * trips, and the bounded gq_quote_to.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "config/goquote.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Unquotes the literal lit (NUL-terminated) and checks the decoded bytes. */
static void expect_unquote(const char *lit, const char *want, size_t wantlen)
{
    char err[128] = "", *out = NULL;
    size_t outlen = 0, used = 0;
    int rc = gq_unquote(lit, strlen(lit), &out, &outlen, &used, err, sizeof err);

    if (rc != 0) print_error("literal %s: %s\n", lit, err);
    assert_int_equal(rc, 0);
    assert_int_equal(used, strlen(lit));
    assert_int_equal(outlen, wantlen);
    assert_memory_equal(out, want, wantlen);
    assert_int_equal(out[outlen], '\0');
    free(out);
}

static void expect_reject(const char *lit, size_t len, const char *reason)
{
    char err[128] = "", *out = (char *)1;
    size_t outlen = 0, used = 0;
    int rc = gq_unquote(lit, len, &out, &outlen, &used, err, sizeof err);

    assert_int_equal(rc, -EINVAL);
    assert_null(out);
    if (!strstr(err, reason)) print_error("literal %s: got %s, want %s\n", lit, err, reason);
    assert_non_null(strstr(err, reason));
}

static void test_simple_escapes(void **state)
{
    (void)state;
    expect_unquote("\"\"", "", 0);
    expect_unquote("\"plain text\"", "plain text", 10);
    expect_unquote("\"\\a\\b\\f\\n\\r\\t\\v\\\\\\\"\"", "\a\b\f\n\r\t\v\\\"", 9);
    expect_unquote("\"tab\there\"", "tab\there", 8); /* raw controls other than \n pass */
    expect_unquote("\"'single'\"", "'single'", 8);
}

static void test_numeric_escapes(void **state)
{
    (void)state;
    expect_unquote("\"\\x41\\x7a\\xff\\xFF\"", "Az\xff\xff", 4);
    expect_unquote("\"\\101\\000\\377\\011\"", "A\0\xff\t", 4);
    expect_unquote("\"a\\x00b\"", "a\0b", 3);
    expect_unquote("\"\\u00e9\\u65E5\\u0000\"", "\xc3\xa9\xe6\x97\xa5\0", 6);
    expect_unquote("\"\\U0001F600\\U0010ffff\\U00000041\"",
                   "\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf"
                   "A",
                   9);
    expect_unquote("\"\\u007f\\u0080\"", "\x7f\xc2\x80", 3);
}

static void test_raw_bytes_copied(void **state)
{
    (void)state;
    expect_unquote("\"\xe6\x97\xa5\xe6\x9c\xac\"", "\xe6\x97\xa5\xe6\x9c\xac", 6);
    expect_unquote("\"\xff\xc3(\"", "\xff\xc3(", 3);
}

static void test_invalid_escapes(void **state)
{
    (void)state;
    expect_reject("\"abc\\q\"", 7, "invalid escape \\q at offset 4");
    expect_reject("\"\\'\"", 4, "invalid escape \\' at offset 1");
    expect_reject("\"\\\x01\"", 4, "byte 0x01 after '\\' at offset 1");
    expect_reject("\"\\x4\"", 5, "escape \\x at offset 1 needs 2 hex digits");
    expect_reject("\"\\x4", 4, "needs 2 hex digits");
    expect_reject("\"\\xg0\"", 6, "needs 2 hex digits");
    expect_reject("\"\\u12\"", 6, "escape \\u at offset 1 needs 4 hex digits");
    expect_reject("\"\\U0001F60\"", 11, "needs 8 hex digits");
    expect_reject("\"\\UFFFFFFFF\"", 12, "code point 0xFFFFFFFF is beyond U+10FFFF");
    expect_reject("\"\\U00110000\"", 12, "beyond U+10FFFF");
    expect_reject("\"\\uD800\"", 8, "U+D800 is a surrogate");
    expect_reject("\"\\udfff\"", 8, "U+DFFF is a surrogate");
    expect_reject("\"\\400\"", 6, "octal escape \\400 at offset 1 exceeds \\377");
    expect_reject("\"\\77\"", 5, "needs 3 octal digits");
    expect_reject("\"\\8\"", 4, "invalid escape \\8");
    expect_reject("\"abc\\", 5, "unterminated escape at offset 4");
}

static void test_invalid_framing(void **state)
{
    (void)state;
    expect_reject("", 0, "expected '\"' at offset 0");
    expect_reject("abc", 3, "expected '\"' at offset 0");
    expect_reject("\"abc", 4, "unterminated string");
    expect_reject("\"", 1, "unterminated string");
    expect_reject("\"ab\ncd\"", 7, "raw newline at offset 3");
    /* The length bounds the input: a quote beyond len does not count. */
    expect_reject("\"ab\"", 3, "unterminated string");
}

static void test_consumed_stops_at_closing_quote(void **state)
{
    char err[64], *out;
    size_t outlen, used;
    const char *s = "\"a\\\"b\"tail\"";

    (void)state;
    assert_int_equal(gq_unquote(s, strlen(s), &out, &outlen, &used, err, sizeof err), 0);
    assert_int_equal(used, 6);
    assert_string_equal(out, "a\"b");
    free(out);
}

static void expect_quote(const char *in, size_t len, const char *want)
{
    char *q = gq_quote(in, len);

    assert_non_null(q);
    if (strcmp(q, want) != 0) print_error("got %s want %s\n", q, want);
    assert_string_equal(q, want);
    free(q);
}

/* Expected strings are Go's strconv.Quote results, derived by hand from
 * the rules in quote.go (appendQuotedWith / appendEscapedRune). */
static void test_quote_matches_go(void **state)
{
    (void)state;
    expect_quote("\xe6\x97\xa5\xe6\x9c\xac\t\0\x7f\xc2\xad", 11,
                 "\"\xe6\x97\xa5\xe6\x9c\xac\\t\\x00\\x7f\\u00ad\"");
    expect_quote("", 0, "\"\"");
    expect_quote("hello, world", 12, "\"hello, world\"");
    expect_quote("a\"b\\c'", 6, "\"a\\\"b\\\\c'\"");
    expect_quote("\a\b\f\n\r\t\v", 7, "\"\\a\\b\\f\\n\\r\\t\\v\"");
    expect_quote("\x01\x1b\x1f ~", 5, "\"\\x01\\x1b\\x1f ~\"");
    expect_quote("\xff\xfe", 2, "\"\\xff\\xfe\"");
    expect_quote("\xc3(", 2, "\"\\xc3(\"");                          /* truncated sequence */
    expect_quote("\xed\xa0\x80", 3, "\"\\xed\\xa0\\x80\"");          /* encoded surrogate */
    expect_quote("\xc0\xaf", 2, "\"\\xc0\\xaf\"");                   /* overlong */
    expect_quote("\xf4\x90\x80\x80", 4, "\"\\xf4\\x90\\x80\\x80\""); /* > U+10FFFF */
    expect_quote("\xc3\xa9 \xc3\xbc", 5, "\"\xc3\xa9 \xc3\xbc\"");
    expect_quote("\xc2\x85\xc2\xa0", 4, "\"\\u0085\\u00a0\"");
    expect_quote("\xe2\x80\xa8\xe2\x80\xa9\xe2\x80\x8b", 9, "\"\\u2028\\u2029\\u200b\"");
    expect_quote("\xef\xbb\xbf\xee\x80\x80\xef\xbf\xbf", 9, "\"\\ufeff\\ue000\\uffff\"");
    expect_quote("\xef\xbf\xbd", 3, "\"\xef\xbf\xbd\""); /* U+FFFD is a symbol */
    expect_quote("\xf0\x9f\x98\x80", 4, "\"\xf0\x9f\x98\x80\"");
    expect_quote("\xf4\x8f\xbf\xbf\xf3\xa0\x80\x81", 8, "\"\\U0010ffff\\U000e0001\"");
}

static void test_round_trip_all_bytes(void **state)
{
    char buf[4096], err[64], *q, *out;
    size_t outlen, used, k;
    uint32_t x = 12345;

    (void)state;
    for (k = 0; k < 256; k++) buf[k] = (char)k;
    for (; k < sizeof buf; k++) { /* deterministic pseudo-random bytes */
        x = x * 1103515245u + 12345u;
        buf[k] = (char)(x >> 16);
    }
    for (k = 0; k <= sizeof buf; k += 256) {
        q = gq_quote(buf, k);
        assert_non_null(q);
        assert_int_equal(gq_unquote(q, strlen(q), &out, &outlen, &used, err, sizeof err), 0);
        assert_int_equal(used, strlen(q));
        assert_int_equal(outlen, k);
        assert_memory_equal(out, buf, k);
        free(out);
        free(q);
    }
}

static void test_quote_to_bounded(void **state)
{
    char dst[16];

    (void)state;
    memset(dst, 'X', sizeof dst);
    gq_quote_to(dst, sizeof dst, "abc", 3);
    assert_string_equal(dst, "\"abc\"");
    gq_quote_to(dst, 16, "abcdefghijklm", 13); /* exact fit: 13 + 2 quotes + NUL */
    assert_string_equal(dst, "\"abcdefghijklm\"");
    gq_quote_to(dst, 16, "abcdefghijklmn", 14);
    assert_string_equal(dst, "\"abcdefghij...\""); /* 15 chars + NUL */
    gq_quote_to(dst, 12, "a\nb\nc\nd", 7);         /* never cuts inside an escape */
    assert_string_equal(dst, "\"a\\nb\\n...\"");
    gq_quote_to(dst, 6, "abcdef", 6);
    assert_string_equal(dst, "\"...\"");
    gq_quote_to(dst, 5, "a", 1);
    assert_string_equal(dst, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simple_escapes),
        cmocka_unit_test(test_numeric_escapes),
        cmocka_unit_test(test_raw_bytes_copied),
        cmocka_unit_test(test_invalid_escapes),
        cmocka_unit_test(test_invalid_framing),
        cmocka_unit_test(test_consumed_stops_at_closing_quote),
        cmocka_unit_test(test_quote_matches_go),
        cmocka_unit_test(test_round_trip_all_bytes),
        cmocka_unit_test(test_quote_to_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
