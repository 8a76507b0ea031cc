/*
 * test_kversion.c - kube/kversion: the /version bodies real servers send
 * (upstream, a development build, EKS's and GKE's "+" minors), and the
 * ones that name no usable version, each refused with a message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kube/kversion.h"

static int parse(const char *body, struct kversion *v, char *err, size_t n)
{
    return kversion_parse(body, strlen(body), v, err, n);
}

static void test_good(void **state)
{
    (void)state;
    static const struct {
        const char *body;
        int minor;
        const char *git;
    } T[] = {
        /* upstream, as the e2e cluster serves it */
        {"{\"major\":\"1\",\"minor\":\"36\",\"emulationMajor\":\"1\",\"emulationMinor\":\"36\","
         "\"gitVersion\":\"v1.36.3\",\"gitCommit\":\"0000\",\"platform\":\"linux/amd64\"}",
         36, "v1.36.3"},
        {"{\"major\":\"1\",\"minor\":\"34\",\"gitVersion\":\"v1.34.4\"}", 34, "v1.34.4"},
        /* EKS and GKE: a "+" minor and a provider's build in gitVersion */
        {"{\"major\":\"1\",\"minor\":\"29+\",\"gitVersion\":\"v1.29.3-eks-adc7111\"}", 29,
         "v1.29.3-eks-adc7111"},
        {"{\"major\":\"1\",\"minor\":\"35+\",\"gitVersion\":\"v1.35.1-gke.1234000\"}", 35,
         "v1.35.1-gke.1234000"},
        /* a development build: empty major and minor, gitVersion decides */
        {"{\"major\":\"\",\"minor\":\"\",\"gitVersion\":\"v1.37.0-alpha.0.123+abcdef\"}", 37,
         "v1.37.0-alpha.0.123+abcdef"},
        /* minor unreadable, gitVersion readable */
        {"{\"major\":\"1\",\"minor\":\"x\",\"gitVersion\":\"v1.33.2\"}", 33, "v1.33.2"},
        /* no gitVersion at all */
        {"{\"major\":\"1\",\"minor\":\"30\"}", 30, ""},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        struct kversion v;
        char err[256] = "";
        if (parse(T[i].body, &v, err, sizeof err) != 0) fail_msg("%s: %s", T[i].body, err);
        assert_int_equal(v.major, 1);
        assert_int_equal(v.minor, T[i].minor);
        assert_string_equal(v.git, T[i].git);
    }
}

static void test_bad(void **state)
{
    (void)state;
    static const struct {
        const char *body, *msg;
    } T[] = {
        {"", "not a JSON object"},
        {"not json", "not a JSON object"},
        {"[1,2]", "not a JSON object"},
        {"\"1.36\"", "not a JSON object"},
        {"{\"major\":\"2\",\"minor\":\"0\",\"gitVersion\":\"v2.0.0\"}", "major \"2\" is not 1"},
        {"{\"major\":\"1\"}", "no Kubernetes 1.x minor"},
        {"{\"major\":\"1\",\"minor\":\"\",\"gitVersion\":\"\"}", "no Kubernetes 1.x minor"},
        {"{\"major\":\"1\",\"minor\":\"36++\",\"gitVersion\":\"1.36\"}", "minor \"36++\""},
        {"{\"major\":\"1\",\"minor\":\"1234\"}", "minor \"1234\""},
        {"{\"major\":\"1\",\"minor\":36}", "no Kubernetes 1.x minor"},
        /* no major and a gitVersion that is not 1.x: nothing says 1.x */
        {"{\"minor\":\"36\",\"gitVersion\":\"v2.36.0\"}", "no Kubernetes 1.x minor"},
        {"{\"major\":\"1\",\"minor\":\"\",\"gitVersion\":\"v1.x\"}", "gitVersion \"v1.x\""},
        /* a control character is quoted, not printed */
        {"{\"major\":\"1\\n\"}", "major \"1\\x0a\" is not 1"},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        struct kversion v;
        char err[256] = "";
        if (parse(T[i].body, &v, err, sizeof err) == 0) fail_msg("%s: accepted", T[i].body);
        if (!strstr(err, T[i].msg)) fail_msg("%s: \"%s\" lacks \"%s\"", T[i].body, err, T[i].msg);
    }
    char err[64];
    struct kversion v;
    assert_int_equal(kversion_parse(NULL, 0, &v, err, sizeof err), -22);
}

/* A body is read only up to len: what follows it does not count. */
static void test_len(void **state)
{
    (void)state;
    const char body[] = "{\"major\":\"1\",\"minor\":\"34\"}garbage";
    struct kversion v;
    char err[128];
    assert_int_equal(kversion_parse(body, strlen(body) - 7, &v, err, sizeof err), 0);
    assert_int_equal(v.minor, 34);
    assert_int_not_equal(kversion_parse(body, strlen(body), &v, err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_len),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
