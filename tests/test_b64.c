/*
 * test_b64.c - base/b64: the RFC 4648 §10 test vectors both ways, binary
 * bytes, line breaks skipped, malformed input refused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/b64.h"

static const char *const PLAIN[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
static const char *const CODED[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};

static void test_rfc4648_vectors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof PLAIN / sizeof *PLAIN; i++) {
        char *e = ra_b64_encode(PLAIN[i], strlen(PLAIN[i]));
        assert_non_null(e);
        assert_string_equal(e, CODED[i]);
        free(e);
        unsigned char *d = NULL;
        long n = ra_b64_decode(CODED[i], &d);
        assert_int_equal(n, (long)strlen(PLAIN[i]));
        assert_memory_equal(d, PLAIN[i], (size_t)n);
        assert_int_equal(d[n], 0);
        free(d);
    }
}

static void test_binary_round_trip(void **state)
{
    (void)state;
    unsigned char all[256];
    for (int i = 0; i < 256; i++) all[i] = (unsigned char)i;
    char *e = ra_b64_encode(all, sizeof all);
    assert_non_null(e);
    unsigned char *d = NULL;
    assert_int_equal(ra_b64_decode(e, &d), 256);
    assert_memory_equal(d, all, sizeof all);
    free(d);
    free(e);
}

static void test_line_breaks_skipped(void **state)
{
    (void)state;
    unsigned char *d = NULL;
    assert_int_equal(ra_b64_decode("Zm9v\r\nYmFy\n", &d), 6);
    assert_memory_equal(d, "foobar", 6);
    free(d);
}

static void test_malformed_refused(void **state)
{
    (void)state;
    const char *bad[] = {"Zg", "Zg=", "Z===", "Zm9v!", "Zg==Zg==", "Zg== ", "=Zg=", "Zm 9v"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        unsigned char *d = (unsigned char *)"untouched";
        assert_int_equal(ra_b64_decode(bad[i], &d), -EINVAL);
        assert_string_equal((const char *)d, "untouched");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc4648_vectors),
        cmocka_unit_test(test_binary_round_trip),
        cmocka_unit_test(test_line_breaks_skipped),
        cmocka_unit_test(test_malformed_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
