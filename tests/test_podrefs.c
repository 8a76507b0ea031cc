/*
 * test_podrefs.c - the ConfigMaps and Secrets of a pod spec
 * (kube/podrefs.c), the list fast sync watches: volumes, projected
 * sources, env and envFrom of every container list, deduplicated and
 * bounded; and the KIND/NAME form of --fast-sync-objects.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kube/podrefs.h"

static const char *kind(enum podref_kind k) { return k == PODREF_SECRET ? "secret" : "configmap"; }

static void joined(const struct podrefs *r, char *out, size_t n)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < r->n; i++)
        len += (size_t)snprintf(out + len, n - len, "%s%s/%s", i ? " " : "", kind(r->v[i].kind),
                                r->v[i].name);
}

static void test_pod(void **state)
{
    (void)state;
    const char *pod =
        "{\"spec\":{\"volumes\":["
        "{\"name\":\"a\",\"configMap\":{\"name\":\"site\"}},"
        "{\"name\":\"b\",\"secret\":{\"secretName\":\"creds\"}},"
        "{\"name\":\"c\",\"projected\":{\"sources\":[{\"configMap\":{\"name\":\"extra\"}},"
        "{\"secret\":{\"name\":\"tls\"}},"
        "{\"downwardAPI\":{}}]}},"
        "{\"name\":\"d\",\"emptyDir\":{}},"
        "{\"name\":\"kube-api-access-x\",\"projected\":{\"sources\":[{\"serviceAccountToken\":"
        "{\"path\":\"token\"}},{\"configMap\":{\"name\":\"kube-root-ca.crt\"}}]}},"
        "{\"name\":\"e\",\"configMap\":{\"name\":\"site\"}},"
        "{\"name\":\"f\",\"configMap\":{\"name\":\"Not_A_Name\"}}],"
        "\"initContainers\":[{\"name\":\"init\",\"envFrom\":[{\"secretRef\":{\"name\":\"initsec\"}}"
        "]}],"
        "\"containers\":[{\"name\":\"app\",\"env\":[{\"name\":\"X\",\"valueFrom\":"
        "{\"configMapKeyRef\":{\"name\":\"envcm\",\"key\":\"k\"}}},{\"name\":\"Y\",\"valueFrom\":"
        "{\"secretKeyRef\":{\"name\":\"creds\",\"key\":\"k\"}}},{\"name\":\"Z\",\"value\":\"1\"}],"
        "\"envFrom\":[{\"configMapRef\":{\"name\":\"envall\"}}]}]}}";
    struct podrefs r = {0};
    char err[256], got[1024];
    assert_int_equal(podrefs_from_pod(pod, strlen(pod), &r, err, sizeof err), 0);
    joined(&r, got, sizeof got);
    assert_string_equal(got, "configmap/site secret/creds configmap/extra secret/tls "
                             "secret/initsec configmap/envcm configmap/envall");
    assert_int_equal(r.skipped, 1); /* the invalid name */
    podrefs_free(&r);
}

static void test_bad_pods(void **state)
{
    (void)state;
    static const char *const bad[] = {"", "[]", "{\"spec\":[]}", "{}", "{\"spec\":"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct podrefs r = {0};
        char err[256];
        assert_int_equal(podrefs_from_pod(bad[i], strlen(bad[i]), &r, err, sizeof err), -EINVAL);
        assert_true(err[0] != '\0');
        podrefs_free(&r);
    }
    /* odd shapes inside a spec are skipped, not errors */
    const char *odd =
        "{\"spec\":{\"volumes\":{},\"containers\":[{\"env\":\"x\",\"envFrom\":[1]}]}}";
    struct podrefs r = {0};
    char err[256];
    assert_int_equal(podrefs_from_pod(odd, strlen(odd), &r, err, sizeof err), 0);
    assert_int_equal(r.n, 0);
    podrefs_free(&r);
}

static void test_specs_and_bound(void **state)
{
    (void)state;
    struct podrefs r = {0};
    char err[256];
    assert_int_equal(podrefs_add_spec(&r, "configmap/site", err, sizeof err), 0);
    assert_int_equal(podrefs_add_spec(&r, "secret/creds", err, sizeof err), 0);
    assert_int_equal(podrefs_add_spec(&r, "secrets/creds", err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "\"secrets/creds\": expected configmap/NAME or secret/NAME (the "
                                "kind is singular)"));
    assert_int_equal(podrefs_add_spec(&r, "configmap/site", err, sizeof err), 0); /* once */
    assert_int_equal(r.n, 2);
    assert_int_equal(podrefs_add_spec(&r, "deployment/web", err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "configmap/NAME"));
    assert_int_equal(podrefs_add_spec(&r, "secret/Bad\nName", err, sizeof err), -EINVAL);
    assert_null(strchr(err, '\n'));
    for (int i = 0; i < PODREFS_MAX + 5; i++) {
        char name[32];
        snprintf(name, sizeof name, "cm-%d", i);
        podrefs_add(&r, PODREF_CONFIGMAP, name);
    }
    assert_int_equal(r.n, PODREFS_MAX);
    assert_int_equal(r.skipped, 7);
    assert_int_equal(podrefs_add_spec(&r, "configmap/one-more", err, sizeof err), -EINVAL);
    assert_string_equal(podrefs_resource(PODREF_SECRET), "secrets");
    podrefs_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pod),
        cmocka_unit_test(test_bad_pods),
        cmocka_unit_test(test_specs_and_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
