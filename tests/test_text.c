/*
 * test_text.c - base/text: the one-line policy on one table (what is kept,
 * what becomes \xHH and what \uHHHH), cutting that never splits an escape
 * or a UTF-8 sequence, the in-place and allocating forms, and ra_errf,
 * which applies the policy to every parser error.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/log.h"
#include "base/text.h"

static const struct {
    const char *what;
    const char *in;
    size_t n;
    const char *out;
} CASES[] = {
    {"empty", "", 0, ""},
    {"plain ASCII", "a b=c, \"d\"", 10, "a b=c, \"d\""},
    {"a backslash is kept", "C:\\x41", 6, "C:\\x41"},
    {"newline", "a\nb", 3, "a\\x0ab"},
    {"carriage return and tab", "\r\t", 2, "\\x0d\\x09"},
    {"NUL inside the bytes", "a\0b", 3, "a\\x00b"},
    {"ESC (a terminal sequence)", "\x1b[31m", 5, "\\x1b[31m"},
    {"DEL", "\x7f", 1, "\\x7f"},
    {"valid UTF-8 is kept", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14,
     "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
    {"U+00A0 (no-break space) is kept", "\xc2\xa0", 2, "\xc2\xa0"},
    {"C1 NEL", "a\xc2\x85z", 4, "a\\u0085z"},
    {"C1 U+009F", "\xc2\x9f", 2, "\\u009f"},
    {"LINE SEPARATOR", "\xe2\x80\xa8", 3, "\\u2028"},
    {"PARAGRAPH SEPARATOR", "\xe2\x80\xa9", 3, "\\u2029"},
    {"a stray byte", "a\xffz", 3, "a\\xffz"},
    {"overlong NUL: two bytes escaped", "\xc0\x80", 2, "\\xc0\\x80"},
    {"surrogate: three bytes escaped", "\xed\xa0\x80", 3, "\\xed\\xa0\\x80"},
    {"truncated sequence at the end", "ok\xe2\x82", 4, "ok\\xe2\\x82"},
    {"Latin-1 text is not UTF-8", "caf\xe9", 4, "caf\\xe9"},
};

static void test_policy_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char out[256];
        size_t l = ra_one_linen(out, sizeof out, CASES[i].in, CASES[i].n);
        if (strcmp(out, CASES[i].out) != 0)
            fail_msg("%s: got \"%s\", want \"%s\"", CASES[i].what, out, CASES[i].out);
        assert_int_equal(l, strlen(CASES[i].out));
        /* the output is a fixed point, and the predicate agrees with it */
        assert_int_equal(ra_text_is_one_line(CASES[i].in, CASES[i].n),
                         strlen(CASES[i].out) == CASES[i].n &&
                             memcmp(CASES[i].in, CASES[i].out, CASES[i].n) == 0);
        assert_true(ra_text_is_one_line(out, l));
    }
}

/* The output is cut before the first piece that does not fit: never in
 * the middle of an escape or of a UTF-8 sequence. */
static void test_cut_at_whole_pieces(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        size_t n;
        const char *out;
    } cuts[] = {
        {"abcdef", 4, "abc"},
        {"ab\ncd", 5, "ab"},      /* "\x0a" needs 4 bytes, 2 are left */
        {"ab\ncd", 7, "ab\\x0a"}, /* exactly fits */
        {"a\xc3\xa9z", 3, "a"},   /* the 2-byte é does not fit beside the NUL */
        {"a\xc3\xa9z", 4, "a\xc3\xa9"},
        {"\xe2\x80\xa8x", 6, ""}, /* \u2028 is 6 bytes */
        {"x", 1, ""},
    };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char out[16];
        memset(out, '#', sizeof out);
        ra_one_line(out, cuts[i].n, cuts[i].in);
        assert_string_equal(out, cuts[i].out);
    }
    char untouched = '#';
    assert_int_equal(ra_one_line(&untouched, 0, "abc"), 0);
    assert_int_equal(untouched, '#');
}

static void test_fix_in_place_and_dup(void **state)
{
    (void)state;
    char buf[32] = "bad\nvalue\xff";
    ra_one_line_fix(buf, sizeof buf);
    assert_string_equal(buf, "bad\\x0avalue\\xff");
    char small[8] = "ab\ncdef";
    ra_one_line_fix(small, sizeof small);
    assert_string_equal(small, "ab\\x0ac"); /* cut to the buffer */
    char clean[8] = "fine";
    ra_one_line_fix(clean, sizeof clean);
    assert_string_equal(clean, "fine");
    char *d = ra_one_line_dup("\xe2\x80\xa9\n");
    assert_string_equal(d, "\\u2029\\x0a");
    free(d);
    assert_null(ra_one_line_dup(NULL));
}

/* Every parser error is one line by construction: ra_errf applies the
 * policy to whatever its arguments quoted raw. */
static void test_errf_is_one_line(void **state)
{
    (void)state;
    char err[64];
    assert_int_equal(ra_errf(err, sizeof err, -EINVAL, "bad key %s", "a\nlevel=error\xc2\x85"),
                     -EINVAL);
    assert_string_equal(err, "bad key a\\x0alevel=error\\u0085");
    assert_int_equal(ra_errf(NULL, 0, -ENOENT, "%s", "x"), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_table),
        cmocka_unit_test(test_cut_at_whole_pieces),
        cmocka_unit_test(test_fix_in_place_and_dup),
        cmocka_unit_test(test_errf_is_one_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
