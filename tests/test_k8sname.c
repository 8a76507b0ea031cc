/*
 * test_k8sname.c - kube/k8sname: each rule on the cases of apimachinery's
 * own tests (pkg/util/validation/validation_test.go: TestIsDNS1123Label,
 * TestIsDNS1123Subdomain, TestIsDNS1035Label, TestIsConfigMapKey), plus
 * the length limits at their boundaries and the certificate DNS name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kube/k8sname.h"

static char *repeat(char c, size_t n)
{
    static char buf[4][300];
    static int k;
    char *b = buf[k++ % 4];
    memset(b, c, n);
    b[n] = '\0';
    return b;
}

static void check(int (*pred)(const char *), const char *what, const char *const *good,
                  const char *const *bad)
{
    for (size_t i = 0; good[i]; i++)
        if (!pred(good[i])) fail_msg("%s: \"%s\" should be valid", what, good[i]);
    for (size_t i = 0; bad[i]; i++)
        if (pred(bad[i])) fail_msg("%s: \"%s\" should be invalid", what, bad[i]);
    assert_false(pred(NULL));
}

#define BAD_COMMON                                                                                 \
    "", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-", "-1", "_", "a_", "_a",       \
        "a_b", "1_", "_1", "1_2", ".", "a.", ".a", "1.", ".1", " ", "a ", " a", "a b", "1 ", " 1", \
        "1 2"

static void test_dns1123_label(void **state)
{
    (void)state;
    const char *good[] = {"a",  "ab",  "abc", "a1",  "a-1",        "a--1--2--b",    "0",
                          "01", "012", "1a",  "1-a", "1--a--b--2", repeat('a', 63), NULL};
    const char *bad[] = {BAD_COMMON, "a.b", "1.2", "a..b", repeat('a', 64), NULL};
    check(k8s_is_dns1123_label, "DNS-1123 label", good, bad);
}

static void test_dns1123_subdomain(void **state)
{
    (void)state;
    const char *good[] = {"a", "ab", "a-1", "a--1--2--b", "0", "1-a", "a.a", "ab.a", "a--1--2--b.a",
                          "a.1", "a-1.1", "0.a", "012.a", "1--a--b--2", "1-a.1", "a.b.c.d.e",
                          "aa.bb.cc.dd.ee", "1.2.3.4.5", "11.22.33.44.55", repeat('a', 253),
                          /* no per-label limit in apimachinery's rule */
                          repeat('b', 64), NULL};
    const char *bad[] = {
        BAD_COMMON, "a..b", "1..2", "a.-b", "a-.b", "A.a",       "aB.a",      "ab.A",
        "A1.a",     "a1.A", "A.1",  "1A.1", "0.A",  "A.B.C.D.E", "a.B.c.d.e", "aa.bB.cc.dd.ee",
        "a@b",      "a,b",  "a;b",  "a:b",  "a%b",  "a?b",       "a$b",       repeat('a', 254),
        NULL};
    check(k8s_is_dns1123_subdomain, "DNS-1123 subdomain", good, bad);
}

static void test_dns1035_label(void **state)
{
    (void)state;
    const char *good[] = {"a", "ab", "abc", "a1", "a-1", "a--1--2--b", repeat('a', 63), NULL};
    const char *bad[] = {BAD_COMMON,   "0",   "01",  "012",           "1a", "1-a",
                         "1--a--b--2", "a.b", "1.2", repeat('a', 64), NULL};
    check(k8s_is_dns1035_label, "DNS-1035 label", good, bad);
}

static void test_configmap_key(void **state)
{
    (void)state;
    const char *good[] = {
        "a",           "good",         "good-good",     "still.good", "this.is.also.good",
        ".so.is.this", "THIS_IS_GOOD", "so_is_this_17", "a..b",       repeat('k', 253),
        NULL};
    const char *bad[] = {"",         ".",   "..",  "..bad",          "b*d",
                         "bad!&bad", "a/b", "a b", repeat('k', 254), NULL};
    check(k8s_is_configmap_key, "ConfigMap key", good, bad);
}

static void test_dns_name(void **state)
{
    (void)state;
    char long_label[80];
    snprintf(long_label, sizeof long_label, "%s.svc", repeat('c', 64));
    const char *good[] = {"svc",           "svc.ns", "svc.ns.svc", "svc.ns.svc.cluster.local",
                          repeat('c', 63), NULL};
    const char *bad[] = {BAD_COMMON, "a..b", "a.-b", long_label, repeat('a', 254), NULL};
    check(k8s_is_dns_name, "DNS name", good, bad);
}

/* k8s_hashed_name: the cut, the '.' at the cut dropped, the suffix from
 * the key (SHA-256("app") starts a172cedc), a short name kept whole. */
static void test_hashed_name(void **state)
{
    (void)state;
    char out[K8S_DNS1123_LABEL_MAX + 1], name[100];
    assert_string_equal(k8s_hashed_name("cfg", 63, "app", out, sizeof out), "cfg-a172cedc");
    memset(name, 'x', 80);
    name[80] = '\0';
    k8s_hashed_name(name, 63, "app", out, sizeof out);
    assert_int_equal(strlen(out), 63);
    assert_memory_equal(out, name, 54);
    assert_string_equal(out + 54, "-a172cedc");
    assert_true(k8s_is_dns1123_label(out));
    name[53] = '.';
    name[52] = '.';
    k8s_hashed_name(name, 63, "app", out, sizeof out);
    assert_int_equal(strlen(out), 52 + K8S_HASHED_SUFFIX);
    assert_true(k8s_is_dns1123_subdomain(out));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dns1123_label), cmocka_unit_test(test_dns1123_subdomain),
        cmocka_unit_test(test_dns1035_label), cmocka_unit_test(test_configmap_key),
        cmocka_unit_test(test_dns_name),      cmocka_unit_test(test_hashed_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
