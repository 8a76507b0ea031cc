/*
 * test_backoff.c - the one backoff policy type and the one generator
 * (base/backoff.h): the bounds and jitter range of each policy the agent
 * uses (engine retry: equal jitter; Kubernetes client: 75..125 %; monitor:
 * no jitter), reproducibility with a fixed seed, no overflow at the edges,
 * and the rounding-up ns -> ms conversion.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/backoff.h"

#define DRAWS 4000

/* The capped exponential delay before jitter, computed independently. */
static uint64_t plain(uint64_t base, uint64_t cap, int attempt)
{
    uint64_t d = base;
    for (int i = 1; i < attempt; i++) {
        if (d >= cap) break;
        d *= 2;
    }
    return d < cap ? d : cap;
}

/* Draws DRAWS delays for each attempt; each must fall in [lo, hi] of its
 * plain delay, and the draws must come near both ends (the jitter really
 * spreads). */
static void check_range(struct backoff p, uint64_t (*lo)(uint64_t), uint64_t (*hi)(uint64_t))
{
    struct ra_rng rng;
    ra_rng_seed(&rng, 7);
    for (int attempt = 1; attempt <= 12; attempt++) {
        uint64_t d = plain(p.base_ms, p.cap_ms, attempt), l = lo(d), h = hi(d);
        uint64_t mn = UINT64_MAX, mx = 0;
        for (int i = 0; i < DRAWS; i++) {
            uint64_t v = backoff_next(&p, attempt, &rng);
            if (v < l || v > h)
                fail_msg("attempt %d: %llu outside [%llu, %llu]", attempt, (unsigned long long)v,
                         (unsigned long long)l, (unsigned long long)h);
            if (v < mn) mn = v;
            if (v > mx) mx = v;
        }
        /* within 5 % of the range from each end */
        uint64_t slack = (h - l) / 20 + 1;
        assert_true(mn <= l + slack);
        assert_true(mx + slack >= h);
    }
}

static uint64_t half(uint64_t d) { return d - d / 2; }
static uint64_t same(uint64_t d) { return d; }
static uint64_t three_q(uint64_t d) { return d - d / 4; }
static uint64_t five_q(uint64_t d) { return d - d / 4 + d / 2; }

static void test_engine_policy_equal_jitter(void **s)
{
    (void)s;
    /* --retry-initial 1s --retry-max 5m (the defaults) and a small one */
    check_range((struct backoff){1000, 300000, BACKOFF_JITTER_EQUAL}, half, same);
    check_range((struct backoff){100, 1000, BACKOFF_JITTER_EQUAL}, half, same);
}

static void test_kube_policy_spread(void **s)
{
    (void)s;
    check_range((struct backoff){200, 5000, BACKOFF_JITTER_SPREAD}, three_q, five_q);
    struct ra_rng rng;
    ra_rng_seed(&rng, 1);
    /* 75..125 % of 5 s once capped */
    for (int i = 0; i < DRAWS; i++) {
        uint64_t v = backoff_next(&(struct backoff){200, 5000, BACKOFF_JITTER_SPREAD}, 30, &rng);
        assert_in_range(v, 3750, 6250);
    }
}

static void test_monitor_policy_exact(void **s)
{
    (void)s;
    const struct backoff p = {500, 30000, BACKOFF_JITTER_NONE};
    const uint64_t want[] = {500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000};
    for (int i = 0; i < 9; i++) assert_int_equal(backoff_next(&p, i + 1, NULL), want[i]);
    assert_int_equal(backoff_next(&p, 0, NULL), 500);
    assert_int_equal(backoff_next(&p, -5, NULL), 500);
    assert_int_equal(backoff_next(&p, 1 << 30, NULL), 30000);
}

static void test_cap_below_base(void **s)
{
    (void)s;
    const struct backoff p = {1000, 300, BACKOFF_JITTER_NONE};
    assert_int_equal(backoff_next(&p, 1, NULL), 300);
    assert_int_equal(backoff_next(&p, 9, NULL), 300);
}

static void test_no_overflow_at_the_edges(void **s)
{
    (void)s;
    struct ra_rng rng;
    ra_rng_seed(&rng, 3);
    const struct backoff none = {1, UINT64_MAX, BACKOFF_JITTER_NONE};
    uint64_t prev = 0;
    for (int a = 1; a <= 200; a++) { /* monotonic, never wraps */
        uint64_t v = backoff_next(&none, a, NULL);
        assert_true(v >= prev);
        prev = v;
    }
    assert_true(prev >= UINT64_MAX / 4);
    for (int a = 64; a <= 70; a++) { /* doubled past 2^63: clamped, no wrap */
        uint64_t e = backoff_next(&(struct backoff){1, UINT64_MAX, BACKOFF_JITTER_EQUAL}, a, &rng);
        uint64_t sp =
            backoff_next(&(struct backoff){1, UINT64_MAX, BACKOFF_JITTER_SPREAD}, a, &rng);
        assert_true(e >= UINT64_MAX / 8);
        assert_true(sp >= UINT64_MAX / 8);
    }
}

static void test_fixed_seed_reproducible(void **s)
{
    (void)s;
    struct ra_rng a, b, c;
    ra_rng_seed(&a, 42);
    ra_rng_seed(&b, 42);
    ra_rng_seed(&c, 43);
    const struct backoff p = {1000, 300000, BACKOFF_JITTER_EQUAL};
    int differ = 0;
    for (int i = 1; i <= 50; i++) {
        uint64_t x = backoff_next(&p, i % 10 + 1, &a), y = backoff_next(&p, i % 10 + 1, &b);
        assert_int_equal(x, y);
        differ += x != backoff_next(&p, i % 10 + 1, &c);
    }
    assert_true(differ > 40); /* another seed, another sequence */
    /* a seed of 0 is valid and not stuck */
    struct ra_rng z;
    ra_rng_seed(&z, 0);
    assert_int_not_equal(ra_rng_next(&z), ra_rng_next(&z));
}

static void test_below(void **s)
{
    (void)s;
    struct ra_rng r;
    ra_rng_seed(&r, 9);
    int seen[10] = {0};
    assert_int_equal(ra_rng_below(&r, 0), 0);
    assert_int_equal(ra_rng_below(&r, 1), 0);
    for (int i = 0; i < 10000; i++) {
        uint64_t v = ra_rng_below(&r, 10);
        assert_true(v < 10);
        seen[v]++;
    }
    for (int i = 0; i < 10; i++) assert_in_range(seen[i], 800, 1200); /* about 1000 each */
}

static void test_process_generator_seeded(void **s)
{
    (void)s;
    struct ra_rng fixed = *ra_rng_process();
    ra_rng_seed_process();
    /* seeded from getrandom / time: not the unseeded state */
    assert_int_not_equal(ra_rng_process()->s, fixed.s);
}

static void test_ms_of_ns(void **s)
{
    (void)s;
    assert_int_equal(ra_ms_of_ns(0), 0);
    assert_int_equal(ra_ms_of_ns(-1), 0);
    assert_int_equal(ra_ms_of_ns(INT64_MIN), 0);
    assert_int_equal(ra_ms_of_ns(1), 1);
    assert_int_equal(ra_ms_of_ns(1000000), 1);
    assert_int_equal(ra_ms_of_ns(1000001), 2);
    assert_int_equal(ra_ms_of_ns(1500000000), 1500);
    /* the largest duration the options accept (2562047h47m16.854775807s) */
    assert_int_equal(ra_ms_of_ns(INT64_MAX), 9223372036855ULL);
}

/* A 410 after other failures (an API server back from a restart) waits the
 * first step; 410s in a row and every other failure wait the count's step;
 * a failure of another kind between two 410s lets the next 410 start over. */
static void test_watch_step_after_gone(void **s)
{
    (void)s;
    int last = 0;
    assert_int_equal(backoff_watch_step(1, 0, &last), 1);
    assert_int_equal(backoff_watch_step(5, 0, &last), 5);
    assert_int_equal(backoff_watch_step(6, 1, &last), 1); /* back: relist now */
    assert_int_equal(last, 1);
    assert_int_equal(backoff_watch_step(7, 1, &last), 7); /* 410 again: no storm */
    assert_int_equal(backoff_watch_step(8, 1, &last), 8);
    assert_int_equal(backoff_watch_step(9, 0, &last), 9);
    assert_int_equal(last, 0);
    assert_int_equal(backoff_watch_step(10, 1, &last), 1);
    last = 0; /* the count cleared by a stream that lasted */
    assert_int_equal(backoff_watch_step(1, 1, &last), 1);
    assert_int_equal(backoff_watch_step(2, 1, &last), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_policy_equal_jitter),
        cmocka_unit_test(test_kube_policy_spread),
        cmocka_unit_test(test_monitor_policy_exact),
        cmocka_unit_test(test_cap_below_base),
        cmocka_unit_test(test_no_overflow_at_the_edges),
        cmocka_unit_test(test_fixed_seed_reproducible),
        cmocka_unit_test(test_below),
        cmocka_unit_test(test_process_generator_seeded),
        cmocka_unit_test(test_ms_of_ns),
        cmocka_unit_test(test_watch_step_after_gone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
