/*
 * test_syncelect.c - the sync service's leader election decision
 * (sync/elect.h elect__decide): renew its own Lease, take an empty or
 * expired one (expiry by the reader's own clock, from when it last saw
 * the holder and renewTime change), else wait.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sync/elect.h"

static void test_decide(void **state)
{
    (void)state;
    /* its own: renew, however old */
    assert_int_equal(elect__decide("a", "a", 0, 100000, 15000), ELECT__RENEW);
    /* nobody holds it: take */
    assert_int_equal(elect__decide("a", "", 5000, 5000, 15000), ELECT__TAKE);
    /* another holder seen changing 14.999 s ago: wait; 15 s: take */
    assert_int_equal(elect__decide("a", "b", 1000, 15999, 15000), ELECT__WAIT);
    assert_int_equal(elect__decide("a", "b", 1000, 16000, 15000), ELECT__TAKE);
    /* a name that only starts like ours is another holder */
    assert_int_equal(elect__decide("a", "ab", 1000, 2000, 15000), ELECT__WAIT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_decide)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
