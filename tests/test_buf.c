/*
 * test_buf.c - base/buf.c, the growable text buffer: appends of bytes
 * (NULs too), strings and printf output across every capacity step
 * (against snprintf's own text), handing the bytes over, and out of memory
 * at every allocation (tests/oomwrap.h): the buffer keeps a valid,
 * NUL-terminated prefix of what was written and hands over nothing.
 * RA_VSNPRINTF, the body of the printf-like helpers, truncates to its
 * array.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/buf.h"
#include "oomwrap.h"

static void test_appends(void **state)
{
    (void)state;
    struct buf b = {0};
    assert_string_equal(buf_str(&b), "");
    assert_null(b.p);
    buf_puts(&b, "ab");
    buf_putc(&b, 'c');
    buf_add(&b, "d\0e", 3);
    assert_int_equal(b.len, 6);
    assert_memory_equal(b.p, "abcd\0e", 7); /* and the NUL after */
    buf_printf(&b, "|%d|%s|%.2f", -42, "x", 0.5);
    assert_int_equal(b.len, 6 + 11);
    assert_memory_equal(b.p + 6, "|-42|x|0.50", 12);
    assert_false(b.oom);
    buf_free(&b);
    assert_null(b.p);
    assert_int_equal(b.len, 0);
    buf_puts(&b, "again"); /* usable after buf_free */
    assert_string_equal(buf_str(&b), "again");
    buf_free(&b);
}

/* Text of every length from 0 to 700 after a prefix of every length
 * from 0 to 600, through buf_printf and buf_add: the capacity steps (256,
 * 512, 1024) fall at every offset of an append. */
static void test_growth_at_every_step(void **state)
{
    (void)state;
    char fill[701], want[1400];
    memset(fill, 'x', 700);
    fill[700] = '\0';
    for (int pre = 0; pre <= 600; pre += 37)
        for (int k = 0; k <= 700; k += 13) {
            struct buf b = {0};
            buf_add(&b, fill, (size_t)pre);
            buf_printf(&b, "<%.*s>", k, fill);
            int n = snprintf(want, sizeof want, "%.*s<%.*s>", pre, fill, k, fill);
            assert_int_equal(b.len, (size_t)n);
            assert_string_equal(b.p, want);
            assert_true(b.cap > b.len);
            buf_free(&b);
        }
    /* one large printf at once */
    struct buf b = {0};
    char *big = malloc(100001);
    memset(big, 'y', 100000);
    big[100000] = '\0';
    buf_printf(&b, "%s%s", big, "!");
    assert_int_equal(b.len, 100001);
    assert_int_equal(b.p[100000], '!');
    assert_int_equal(b.p[100001], '\0');
    buf_free(&b);
    free(big);
}

static void test_take(void **state)
{
    (void)state;
    struct buf b = {0};
    size_t len = 99;
    char *s = buf_take(&b, &len); /* nothing written: an allocated "" */
    assert_non_null(s);
    assert_string_equal(s, "");
    assert_int_equal(len, 0);
    free(s);
    buf_printf(&b, "%s=%d", "n", 7);
    s = buf_take(&b, &len);
    assert_string_equal(s, "n=7");
    assert_int_equal(len, 3);
    assert_null(b.p); /* b is empty again, and owns nothing */
    assert_int_equal(b.len, 0);
    free(s);
    s = buf_take(&b, NULL);
    assert_string_equal(s, "");
    free(s);
}

/* What test_oom writes: a string, a long printf and bytes. */
static void write_some(struct buf *b, const char *fill)
{
    buf_puts(b, "head ");
    buf_printf(b, "%s %d", fill, 12345);
    buf_add(b, fill, 300);
    buf_putc(b, '.');
}

static void test_oom_at_every_allocation(void **state)
{
    (void)state;
    char fill[1001];
    memset(fill, 'z', 1000);
    fill[1000] = '\0';
    struct buf ref = {0};
    write_some(&ref, fill);
    assert_false(ref.oom);
    int swept = 0;
    for (long n = 0; n < 50; n++) {
        struct buf b = {0};
        oom_fail_from(n);
        write_some(&b, fill);
        int failed = oom_failed();
        oom_off();
        if (!failed) {
            assert_false(b.oom);
            assert_int_equal(b.len, ref.len);
            buf_free(&b);
            break;
        }
        swept++;
        assert_true(b.oom);
        /* what is there is a prefix of what was written, terminated */
        assert_int_equal(strlen(buf_str(&b)), b.len);
        assert_true(b.len < ref.len);
        assert_memory_equal(buf_str(&b), ref.p, b.len);
        buf_puts(&b, "more"); /* ignored */
        assert_int_equal(strlen(buf_str(&b)), b.len);
        assert_null(buf_take(&b, NULL)); /* and b is freed */
        assert_null(b.p);
    }
    assert_true(swept >= 3); /* 256, 512, 1024, 2048: every step failed once */
    buf_free(&ref);
}

static const char *fmt_into(char *dst, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A printf-like helper as the product writes them (the array is a local
 * of fixed size there; here 8 bytes, to see the truncation). */
static const char *fmt_into(char *dst, size_t n, const char *fmt, ...)
{
    char small[8];
    RA_VSNPRINTF(small, fmt);
    snprintf(dst, n, "%s", small);
    return dst;
}

static void test_vsnprintf_helper(void **state)
{
    (void)state;
    char out[32];
    assert_string_equal(fmt_into(out, sizeof out, "%d+%d", 1, 2), "1+2");
    assert_string_equal(fmt_into(out, sizeof out, "%s", "0123456789"), "0123456");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_appends),
        cmocka_unit_test(test_growth_at_every_step),
        cmocka_unit_test(test_take),
        cmocka_unit_test(test_oom_at_every_allocation),
        cmocka_unit_test(test_vsnprintf_helper),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
