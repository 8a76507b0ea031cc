/*
 * test_utf8.c - base/utf8: the strict decoder on one table (the valid
 * boundaries and every invalid class of Go's unicode/utf8 tests: overlong
 * forms, surrogates, above U+10FFFF, stray and missing continuation bytes),
 * the encoder against the same table, and the validity check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/utf8.h"

static const struct {
    const char *what;
    const char *in;
    size_t n;
    int32_t cp; /* RA_UTF8_INVALID for an invalid sequence */
    size_t width;
} CASES[] = {
    {"empty", "", 0, RA_UTF8_INVALID, 0},
    {"NUL", "\0", 1, 0, 1},
    {"ASCII", "a", 1, 'a', 1},
    {"DEL", "\x7f", 1, 0x7f, 1},
    {"only the first character", "ab", 2, 'a', 1},
    {"U+0080, the first of two bytes", "\xc2\x80", 2, 0x80, 2},
    {"U+07FF, the last of two bytes", "\xdf\xbf", 2, 0x7ff, 2},
    {"U+0800, the first of three bytes", "\xe0\xa0\x80", 3, 0x800, 3},
    {"U+2028 LINE SEPARATOR", "\xe2\x80\xa8", 3, 0x2028, 3},
    {"U+D7FF, below the surrogates", "\xed\x9f\xbf", 3, 0xd7ff, 3},
    {"U+E000, above the surrogates", "\xee\x80\x80", 3, 0xe000, 3},
    {"U+FFFD", "\xef\xbf\xbd", 3, 0xfffd, 3},
    {"U+FFFF", "\xef\xbf\xbf", 3, 0xffff, 3},
    {"U+10000, the first of four bytes", "\xf0\x90\x80\x80", 4, 0x10000, 4},
    {"U+10FFFF, the last code point", "\xf4\x8f\xbf\xbf", 4, 0x10ffff, 4},
    {"a stray continuation byte", "\x80", 1, RA_UTF8_INVALID, 1},
    {"another stray continuation byte", "\xbf\x80", 2, RA_UTF8_INVALID, 1},
    {"overlong NUL (C0 80)", "\xc0\x80", 2, RA_UTF8_INVALID, 1},
    {"overlong two bytes (C1 BF)", "\xc1\xbf", 2, RA_UTF8_INVALID, 1},
    {"overlong three bytes (E0 80 80)", "\xe0\x80\x80", 3, RA_UTF8_INVALID, 1},
    {"overlong three bytes (E0 9F BF)", "\xe0\x9f\xbf", 3, RA_UTF8_INVALID, 1},
    {"overlong four bytes (F0 80 80 80)", "\xf0\x80\x80\x80", 4, RA_UTF8_INVALID, 1},
    {"overlong four bytes (F0 8F BF BF)", "\xf0\x8f\xbf\xbf", 4, RA_UTF8_INVALID, 1},
    {"surrogate U+D800", "\xed\xa0\x80", 3, RA_UTF8_INVALID, 1},
    {"surrogate U+DFFF", "\xed\xbf\xbf", 3, RA_UTF8_INVALID, 1},
    {"above U+10FFFF (F4 90 80 80)", "\xf4\x90\x80\x80", 4, RA_UTF8_INVALID, 1},
    {"lead byte F5", "\xf5\x80\x80\x80", 4, RA_UTF8_INVALID, 1},
    {"lead byte FF", "\xff", 1, RA_UTF8_INVALID, 1},
    {"truncated two bytes", "\xc2", 1, RA_UTF8_INVALID, 1},
    {"truncated three bytes", "\xe2\x82", 2, RA_UTF8_INVALID, 1},
    {"truncated four bytes", "\xf0\x9f\x98", 3, RA_UTF8_INVALID, 1},
    {"n shorter than the sequence", "\xe2\x82\xac", 2, RA_UTF8_INVALID, 1},
    {"a continuation byte missing", "\xe2\x28\xa1", 3, RA_UTF8_INVALID, 1},
    {"ASCII where a continuation byte belongs",
     "\xc3"
     "a",
     2, RA_UTF8_INVALID, 1},
};

static void test_decode_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        size_t w = 99;
        int32_t cp = ra_utf8_decode(CASES[i].in, CASES[i].n, &w);
        if (cp != CASES[i].cp || w != CASES[i].width)
            fail_msg("%s: got %d width %zu, want %d width %zu", CASES[i].what, (int)cp, w,
                     (int)CASES[i].cp, CASES[i].width);
    }
}

/* Every valid row encodes back to its bytes; the encoder is the decoder's
 * inverse on all of U+0000-U+10FFFF outside the surrogates. */
static void test_encode_inverts_decode(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char out[4];
        if (CASES[i].cp == RA_UTF8_INVALID) continue;
        size_t l = ra_utf8_encode((uint32_t)CASES[i].cp, out);
        assert_int_equal(l, CASES[i].width);
        assert_memory_equal(out, CASES[i].in, l);
    }
    for (uint32_t cp = 0; cp <= 0x10ffff; cp++) {
        char out[4];
        size_t w;
        if (cp >= 0xd800 && cp <= 0xdfff) continue;
        size_t l = ra_utf8_encode(cp, out);
        assert_int_equal(ra_utf8_decode(out, l, &w), (int32_t)cp);
        assert_int_equal(w, l);
    }
}

static void test_is_valid(void **state)
{
    (void)state;
    assert_true(ra_utf8_is_valid("", 0));
    assert_true(ra_utf8_is_valid("caf\xc3\xa9 \xf0\x9f\x98\x80", 10));
    assert_false(ra_utf8_is_valid("caf\xc3", 4));
    assert_false(ra_utf8_is_valid("a\xed\xa0\x80z", 5));
    assert_true(ra_utf8_is_valid("a\0b", 3)); /* NUL is a code point */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_table),
        cmocka_unit_test(test_encode_inverts_decode),
        cmocka_unit_test(test_is_valid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
