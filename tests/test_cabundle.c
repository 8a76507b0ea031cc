/*
 * test_cabundle.c - the caBundle of a CA renewal (webhook/cabundle.c): the
 * new CA goes first and the previous, unexpired one stays behind it (keep),
 * or the new CA stands alone (drop); a bundle that already holds the CA is
 * current; text that is not PEM and expired CAs are not carried over; a
 * Secret CA that is not PEM is refused. The CAs are real ones from
 * certgen_generate, and the planned bundle is read back with OpenSSL.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "webhook/cabundle.h"
#include "webhook/certgen.h"

#define DAY (24 * 3600)

static const time_t NOW = 1796000000; /* 2026-11-30, a fixed clock */

/* A CA's PEM, made at `made` and valid for validity_s. */
static char *new_ca(time_t made, int64_t validity_s)
{
    char *dns[4], err[256] = "", *ca;
    struct certgen_pem p = {0};
    size_t n = certgen_dns_names("web", "ns", dns);

    assert_int_equal(
        certgen_generate((const char *const *)dns, n, validity_s, made, &p, err, sizeof err), 0);
    ca = strdup(p.ca_crt);
    certgen_pem_free(&p);
    for (size_t i = 0; i < n; i++) free(dns[i]);
    return ca;
}

static char *cat2(const char *a, const char *b)
{
    char *s = malloc(strlen(a) + strlen(b) + 1);
    assert_non_null(s);
    strcpy(s, a);
    strcat(s, b);
    return s;
}

/* How many certificates PEM text s holds; the first max are compared with
 * want[i] (PEM each) by content. */
static int certs_are(const char *s, const char *const *want, int max)
{
    BIO *b = BIO_new_mem_buf(s, (int)strlen(s));
    int k = 0;
    X509 *x;

    while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
        if (k < max) {
            BIO *w = BIO_new_mem_buf(want[k], (int)strlen(want[k]));
            X509 *y = PEM_read_bio_X509(w, NULL, NULL, NULL);
            assert_non_null(y);
            assert_int_equal(X509_cmp(x, y), 0);
            X509_free(y);
            BIO_free(w);
        }
        X509_free(x);
        k++;
    }
    BIO_free(b);
    return k;
}

/* Plans with have (NUL-terminated or NULL); returns the rc, *want, *kept. */
static int plan(const char *have, const char *ca, int keep, char **want, int *kept)
{
    char err[256] = "";
    return cabundle_plan(have, have ? strlen(have) : 0, ca, keep, NOW, want, kept, err, sizeof err);
}

static void test_first_bundle_is_the_ca(void **state)
{
    (void)state;
    char *ca = new_ca(NOW, DAY), *want;
    int kept = -1;

    assert_int_equal(plan(NULL, ca, 1, &want, &kept), 1);
    assert_int_equal(kept, 0);
    assert_int_equal(certs_are(want, (const char *const[]){ca}, 1), 1);
    free(want);
    assert_int_equal(plan("stale", ca, 1, &want, &kept), 1); /* not PEM: nothing to carry */
    assert_int_equal(kept, 0);
    assert_int_equal(certs_are(want, (const char *const[]){ca}, 1), 1);
    free(want);
    free(ca);
}

static void test_renewal_keeps_the_previous_ca(void **state)
{
    (void)state;
    char *old = new_ca(NOW - 10 * DAY, 365 * DAY), *ca = new_ca(NOW, 365 * DAY), *want, *want2;
    int kept = 0;

    assert_int_equal(plan(old, ca, 1, &want, &kept), 1);
    assert_int_equal(kept, 1);
    assert_int_equal(certs_are(want, (const char *const[]){ca, old}, 2), 2);
    /* written back, the bundle is current: nothing more is written */
    assert_int_equal(plan(want, ca, 1, &want2, &kept), 0);
    assert_null(want2);
    /* the next renewal drops the oldest: two CAs at most */
    char *next = new_ca(NOW + DAY, 365 * DAY);
    assert_int_equal(plan(want, next, 1, &want2, &kept), 1);
    assert_int_equal(kept, 1);
    assert_int_equal(certs_are(want2, (const char *const[]){next, ca}, 2), 2);
    free(want2);
    free(want);
    free(next);
    free(old);
    free(ca);
}

static void test_drop_leaves_the_ca_alone(void **state)
{
    (void)state;
    char *old = new_ca(NOW - 10 * DAY, 365 * DAY), *ca = new_ca(NOW, 365 * DAY), *want;
    char *both = cat2(ca, old);
    int kept = -1;

    assert_int_equal(plan(old, ca, 0, &want, &kept), 1);
    assert_int_equal(kept, 0);
    assert_int_equal(certs_are(want, (const char *const[]){ca}, 1), 1);
    free(want);
    /* a bundle kept earlier loses the previous CA when drop runs again */
    assert_int_equal(plan(both, ca, 0, &want, &kept), 1);
    assert_int_equal(certs_are(want, (const char *const[]){ca}, 1), 1);
    free(want);
    assert_int_equal(plan(ca, ca, 0, &want, &kept), 0);
    assert_null(want);
    free(both);
    free(old);
    free(ca);
}

static void test_current_anywhere_and_expired_dropped(void **state)
{
    (void)state;
    char *old = new_ca(NOW - 10 * DAY, 365 * DAY), *ca = new_ca(NOW, 365 * DAY);
    char *expired = new_ca(NOW - 10 * DAY, DAY), *want;
    char *old_first = cat2(old, ca), *exp_first = cat2(expired, old);
    int kept = -1;

    assert_int_equal(plan(old_first, ca, 1, &want, &kept), 0); /* the CA second is current too */
    assert_null(want);
    assert_int_equal(plan(expired, ca, 1, &want, &kept), 1);
    assert_int_equal(kept, 0);
    assert_int_equal(certs_are(want, (const char *const[]){ca}, 1), 1);
    free(want);
    /* the first unexpired one is kept, the expired one skipped */
    assert_int_equal(plan(exp_first, ca, 1, &want, &kept), 1);
    assert_int_equal(kept, 1);
    assert_int_equal(certs_are(want, (const char *const[]){ca, old}, 2), 2);
    free(want);
    free(old_first);
    free(exp_first);
    free(expired);
    free(old);
    free(ca);
}

static void test_secret_ca_not_pem_is_refused(void **state)
{
    (void)state;
    char err[256] = "", *want = (char *)"x";
    int kept = -1;

    assert_int_equal(
        cabundle_plan(NULL, 0, "not a certificate", 1, NOW, &want, &kept, err, sizeof err),
        -EINVAL);
    assert_null(want);
    assert_non_null(strstr(err, "ca.crt holds no PEM certificate"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_bundle_is_the_ca),
        cmocka_unit_test(test_renewal_keeps_the_previous_ca),
        cmocka_unit_test(test_drop_leaves_the_ca_alone),
        cmocka_unit_test(test_current_anywhere_and_expired_dropped),
        cmocka_unit_test(test_secret_ca_not_pem_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
