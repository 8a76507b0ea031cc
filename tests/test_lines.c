/*
 * test_lines.c - base/lines.c, a byte stream cut into lines: lines split
 * across feeds of every size, an empty line, the callback's stop, the
 * length bound (exactly max is a line, one byte more is LINES_LONG and
 * drops what was held), growth past the first 4 KiB, and the bytes let go
 * zeroed (checked through a buffer the test keeps a view of).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/lines.h"

struct got {
    char all[65536]; /* the lines joined by '|' */
    int n, stop_at;  /* lines seen; stop after this many (0: never) */
};

static int on_line(void *ud, const char *line, size_t len)
{
    struct got *g = ud;
    assert_int_equal(strlen(line), len); /* NUL-terminated, no NUL inside here */
    size_t used = strlen(g->all);
    assert_true(used + len + 2 < sizeof g->all);
    memcpy(g->all + used, line, len);
    g->all[used + len] = '|';
    g->all[used + len + 1] = '\0';
    g->n++;
    return g->stop_at && g->n == g->stop_at;
}

static void test_split_across_feeds(void **state)
{
    (void)state;
    const char *text = "alpha\nbeta\n\ngamma-delta\nrest";
    size_t n = strlen(text);
    for (size_t step = 1; step <= n; step++) {
        struct lines l = {.max = 64};
        struct got g = {0};
        for (size_t i = 0; i < n; i += step) {
            size_t take = n - i < step ? n - i : step;
            assert_int_equal(lines_feed(&l, text + i, take, on_line, &g), LINES_MORE);
        }
        assert_string_equal(g.all, "alpha|beta||gamma-delta|");
        assert_int_equal(l.len, 4); /* "rest" waits for its newline */
        assert_memory_equal(l.p, "rest", 4);
        lines_free(&l);
        assert_null(l.p);
    }
}

static void test_stop_drops_the_rest(void **state)
{
    (void)state;
    struct lines l = {.max = 64};
    struct got g = {.stop_at = 2};
    assert_int_equal(lines_feed(&l, "a\nb\nc\nd", 7, on_line, &g), LINES_STOP);
    assert_string_equal(g.all, "a|b|");
    assert_int_equal(l.len, 0);
    lines_free(&l);
}

static void test_bound(void **state)
{
    (void)state;
    char big[102];
    memset(big, 'x', 100);
    big[100] = '\n';
    struct lines l = {.max = 100};
    struct got g = {0};
    assert_int_equal(lines_feed(&l, big, 101, on_line, &g), LINES_MORE); /* exactly max */
    assert_int_equal(g.n, 1);
    assert_int_equal(lines_feed(&l, big, 60, on_line, &g), LINES_MORE);
    assert_int_equal(lines_feed(&l, big, 41, on_line, &g), LINES_LONG); /* 101 bytes held */
    assert_int_equal(l.len, 0);
    for (size_t i = 0; i < l.cap; i++) assert_int_equal(l.p[i], 0);
    assert_int_equal(lines_feed(&l, "ok\n", 3, on_line, &g), LINES_MORE); /* usable again */
    assert_int_equal(g.n, 2);
    lines_free(&l);
}

static void test_growth_keeps_bytes_and_wipes(void **state)
{
    (void)state;
    size_t n = 10000;
    char *text = malloc(n + 1);
    assert_non_null(text);
    for (size_t i = 0; i < n; i++) text[i] = (char)('a' + i % 26);
    text[n] = '\n';
    struct lines l = {.max = 20000};
    struct got g = {0};
    for (size_t i = 0; i < n; i += 1000) /* 4 KiB, 8 KiB, 16 KiB */
        assert_int_equal(lines_feed(&l, text + i, 1000, on_line, &g), LINES_MORE);
    assert_int_equal(l.len, n);
    assert_memory_equal(l.p, text, n);
    assert_int_equal(lines_feed(&l, text + n, 1, on_line, &g), LINES_MORE);
    assert_int_equal(g.n, 1);
    assert_memory_equal(g.all, text, n);
    assert_int_equal(l.len, 0);
    for (size_t i = 0; i < l.cap; i++) assert_int_equal(l.p[i], 0); /* the line let go */
    lines_free(&l);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_across_feeds),
        cmocka_unit_test(test_stop_drops_the_rest),
        cmocka_unit_test(test_bound),
        cmocka_unit_test(test_growth_keeps_bytes_and_wipes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
