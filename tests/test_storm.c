/*
 * test_storm.c - the storm breaker's arithmetic (run/storm.c): N actions
 * within the window pass, the next trips it; it holds while the content
 * keeps changing and ends a full window after the last change, with a fresh
 * count; a limit turned off ends a halt; a loaded record keeps the newest.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "run/storm.h"

static void test_trip_and_resume(void **state)
{
    (void)state;
    struct storm s = {0};
    storm_configure(&s, 3, 10000);
    int64_t t = 1000000;
    for (int i = 0; i < 3; i++, t += 1000) {
        assert_true(storm_allows(&s, t));
        storm_note_action(&s, t);
    }
    assert_int_equal(storm_count(&s, t), 3);
    assert_false(storm_allows(&s, t)); /* the 4th within 10 s */
    storm_trip(&s, t);
    assert_int_equal(storm_resume_at(&s), t + 10000);
    /* changes keep it halted: the window counts from the last one */
    storm_content_changed(&s, t + 4000);
    assert_int_equal(storm_resume_at(&s), t + 14000);
    assert_false(storm_try_resume(&s, t + 13999));
    assert_false(storm_allows(&s, t + 13999));
    assert_true(storm_try_resume(&s, t + 14000));
    assert_true(storm_allows(&s, t + 14000));
    assert_int_equal(storm_count(&s, t + 14000), 0); /* a fresh count */
    storm_free(&s);
}

static void test_window_slides(void **state)
{
    (void)state;
    struct storm s = {0};
    storm_configure(&s, 2, 1000);
    storm_note_action(&s, 0);
    storm_note_action(&s, 500);
    assert_false(storm_allows(&s, 900));
    assert_true(storm_allows(&s, 1001)); /* the first left the window */
    /* off: always allowed, and a halt ends */
    storm_trip(&s, 900);
    storm_configure(&s, 0, 0);
    assert_false(s.halted);
    assert_true(storm_allows(&s, 900));
    storm_note_action(&s, 900); /* not counted when off */
    assert_int_equal(s.n, 0);
    storm_free(&s);
}

static void test_load_keeps_the_newest(void **state)
{
    (void)state;
    struct storm s = {0};
    storm_configure(&s, 2, 60000);
    int64_t t[] = {3000, 1000, 2000};
    storm_load(&s, t, 3);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.t[0], 2000);
    assert_int_equal(s.t[1], 3000);
    assert_false(storm_allows(&s, 4000));
    storm_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trip_and_resume),
        cmocka_unit_test(test_window_slides),
        cmocka_unit_test(test_load_keeps_the_newest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
