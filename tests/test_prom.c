/*
 * test_prom.c - base/prom.c, the Prometheus text both /metrics write: the
 * exact lines of a family, a counter, a labelled sample, gauges (whole
 * values as integers, fractions, NaN and infinities) and a histogram
 * (cumulative buckets, a value on a bound counted in it, +Inf, sum,
 * count), and a whole rendering read back by a small parser of the
 * exposition format 0.0.4: every sample after its family's HELP and
 * TYPE, every line ending in a line break.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <math.h>

#include "base/prom.h"

static void test_lines(void **state)
{
    (void)state;
    struct buf b = {0};
    prom_counter(&b, "a_total", "As counted.", 18446744073709551615ull);
    prom_family(&b, "b_total", "counter", "Bs by kind.");
    prom_sample(&b, "b_total", "kind=\"x\",result=\"ok\"", 3);
    prom_gauge(&b, "c", "A gauge.", 1700000000);
    prom_gauge(&b, "d", "A fraction.", 1700000000.125);
    prom_gauge(&b, "e", "Small.", 0.000123);
    prom_gauge(&b, "f", "Not a number.", NAN);
    prom_gauge(&b, "g", "Infinite.", -INFINITY);
    assert_false(b.oom);
    assert_string_equal(b.p, "# HELP a_total As counted.\n# TYPE a_total counter\n"
                             "a_total 18446744073709551615\n"
                             "# HELP b_total Bs by kind.\n# TYPE b_total counter\n"
                             "b_total{kind=\"x\",result=\"ok\"} 3\n"
                             "# HELP c A gauge.\n# TYPE c gauge\nc 1700000000\n"
                             "# HELP d A fraction.\n# TYPE d gauge\nd 1700000000.125\n"
                             "# HELP e Small.\n# TYPE e gauge\ne 0.000123\n"
                             "# HELP f Not a number.\n# TYPE f gauge\nf NaN\n"
                             "# HELP g Infinite.\n# TYPE g gauge\ng -Inf\n");
    buf_free(&b);
}

static void test_histogram(void **state)
{
    (void)state;
    static const double LE[] = {0.001, 0.5, 1, 30};
    static const struct prom_buckets BK = PROM_BUCKETS(LE);
    struct prom_hist h = {0};
    assert_int_equal(BK.n, 4);
    prom_observe(&h, &BK, 0.0001); /* every bucket */
    prom_observe(&h, &BK, 0.5);    /* on a bound: counted in it */
    prom_observe(&h, &BK, 0.75);
    prom_observe(&h, &BK, 31); /* only +Inf */
    struct buf b = {0};
    prom_histogram(&b, "d_seconds", "Durations.", &BK, &h);
    assert_string_equal(b.p, "# HELP d_seconds Durations.\n# TYPE d_seconds histogram\n"
                             "d_seconds_bucket{le=\"0.001\"} 1\n"
                             "d_seconds_bucket{le=\"0.5\"} 2\n"
                             "d_seconds_bucket{le=\"1\"} 3\n"
                             "d_seconds_bucket{le=\"30\"} 3\n"
                             "d_seconds_bucket{le=\"+Inf\"} 4\n"
                             "d_seconds_sum 32.2501\n"
                             "d_seconds_count 4\n");
    buf_free(&b);
    struct prom_hist empty = {0};
    prom_histogram(&b, "e_seconds", "None.", &BK, &empty);
    assert_non_null(strstr(b.p, "\ne_seconds_bucket{le=\"+Inf\"} 0\ne_seconds_sum 0\n"
                                "e_seconds_count 0\n"));
    buf_free(&b);
}

/* The family name of a sample line (name up to '{', ' ', or a histogram
 * suffix). */
static void family_of(const char *line, char *out, size_t n)
{
    size_t k = strcspn(line, "{ ");
    snprintf(out, n, "%.*s", (int)k, line);
    static const char *const SUFFIX[] = {"_bucket", "_sum", "_count"};
    for (size_t i = 0; i < 3; i++) {
        size_t l = strlen(out), s = strlen(SUFFIX[i]);
        if (l > s && strcmp(out + l - s, SUFFIX[i]) == 0) {
            out[l - s] = '\0';
            break;
        }
    }
}

/* Reads text as the exposition format: every sample's family was
 * announced by HELP then TYPE just before its samples; values parse. */
static void check_exposition(const char *text, int *families, int *samples)
{
    char help[128] = "", type[128] = "", fam[128];
    *families = *samples = 0;
    assert_int_equal(text[strlen(text) - 1], '\n');
    for (const char *l = text; *l;) {
        const char *e = strchr(l, '\n');
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(e - l), l);
        if (strncmp(line, "# HELP ", 7) == 0) {
            snprintf(help, sizeof help, "%.*s", (int)strcspn(line + 7, " "), line + 7);
            type[0] = '\0';
        } else if (strncmp(line, "# TYPE ", 7) == 0) {
            snprintf(type, sizeof type, "%.*s", (int)strcspn(line + 7, " "), line + 7);
            assert_string_equal(type, help);
            (*families)++;
        } else {
            family_of(line, fam, sizeof fam);
            if (strcmp(fam, type) != 0) fail_msg("sample \"%s\" outside its family", line);
            char *end;
            const char *v = strrchr(line, ' ') + 1;
            double d = strtod(v, &end);
            (void)d;
            if (*end) fail_msg("value of \"%s\" does not parse", line);
            (*samples)++;
        }
        l = e + 1;
    }
}

static void test_exposition(void **state)
{
    (void)state;
    static const double LE[] = {0.1, 1};
    static const struct prom_buckets BK = PROM_BUCKETS(LE);
    struct prom_hist h = {0};
    prom_observe(&h, &BK, 0.2);
    struct buf b = {0};
    prom_counter(&b, "x_total", "X.", 1);
    prom_histogram(&b, "y_seconds", "Y.", &BK, &h);
    prom_family(&b, "z_total", "counter", "Z by code.");
    prom_sample(&b, "z_total", "code=\"200\"", 5);
    prom_sample(&b, "z_total", "code=\"0\"", 1);
    prom_gauge(&b, "w", "W.", 0.25);
    int families, samples;
    check_exposition(b.p, &families, &samples);
    assert_int_equal(families, 4);
    assert_int_equal(samples, 1 + 5 + 2 + 1);
    buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_histogram),
        cmocka_unit_test(test_exposition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
