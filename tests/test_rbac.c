/*
 * test_rbac.c - staging's objects for `reload-agent inject` (inject/rbac.c
 * rbac_stage): a workload whose sidecar names it with --stage-workload gets
 * a Role on exactly its Lease (list, watch, patch), its own get, Events, a
 * RoleBinding to the template's ServiceAccount, and the Lease itself, all
 * under the name the agent computes (kube/lease.c); nothing without the
 * arg; a clear refusal without a namespace.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "inject/rbac.h"

#define DEPLOYMENT(NS, ARG)                                                                        \
    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\"" NS        \
    "},\"spec\":{\"template\":{\"spec\":{\"serviceAccountName\":\"site\",\"initContainers\":[{"    \
    "\"name\":\"reload-agent\",\"args\":[\"run\",\"--watch=/etc/site\"" ARG "]}],"                 \
    "\"containers\":[{\"name\":\"app\"}]}}}}"

static char *printed(const cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    assert_non_null(s);
    return s;
}

static void test_stage_objects(void **state)
{
    (void)state;
    cJSON *obj =
        cJSON_Parse(DEPLOYMENT(",\"namespace\":\"shop\"", ",\"--stage-workload=deployment/web\""));
    cJSON *role, *binding, *lease;
    char why[256];
    assert_int_equal(rbac_stage(obj, "/spec/template", &role, &binding, &lease, why, sizeof why),
                     1);
    char *r = printed(role), *b = printed(binding), *l = printed(lease);
    assert_string_equal(
        r, "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"Role\",\"metadata\":{"
           "\"name\":\"reload-agent-stage-deployment-web\",\"namespace\":\"shop\",\"labels\":{"
           "\"app.kubernetes.io/name\":\"reload-agent\",\"app.kubernetes.io/component\":"
           "\"stage\"}},\"rules\":[{\"apiGroups\":[\"coordination.k8s.io\"],\"resources\":"
           "[\"leases\"],\"resourceNames\":[\"reload-agent-stage-deployment-web\"],\"verbs\":"
           "[\"list\",\"watch\",\"patch\"]},{\"apiGroups\":[\"apps\"],\"resources\":"
           "[\"deployments\"],\"resourceNames\":[\"web\"],\"verbs\":[\"get\"]},{\"apiGroups\":"
           "[\"\"],\"resources\":[\"events\"],\"verbs\":[\"create\"]}]}");
    assert_non_null(strstr(b, "\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":"
                              "\"Role\",\"name\":\"reload-agent-stage-deployment-web\"}"));
    assert_non_null(strstr(b, "{\"kind\":\"ServiceAccount\",\"name\":\"site\",\"namespace\":"
                              "\"shop\"}"));
    assert_string_equal(
        l, "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":"
           "\"reload-agent-stage-deployment-web\",\"namespace\":\"shop\",\"labels\":{"
           "\"app.kubernetes.io/name\":\"reload-agent\",\"app.kubernetes.io/component\":"
           "\"stage\"}},\"spec\":{}}");
    free(r);
    free(b);
    free(l);
    cJSON_Delete(role);
    cJSON_Delete(binding);
    cJSON_Delete(lease);
    cJSON_Delete(obj);
}

static void test_stage_none_or_refused(void **state)
{
    (void)state;
    cJSON *role, *binding, *lease;
    char why[256] = "";
    cJSON *plain = cJSON_Parse(DEPLOYMENT(",\"namespace\":\"shop\"", ""));
    assert_int_equal(rbac_stage(plain, "/spec/template", &role, &binding, &lease, why, sizeof why),
                     0);
    assert_null(role);
    cJSON_Delete(plain);
    cJSON *nons = cJSON_Parse(DEPLOYMENT("", ",\"--stage-workload=deployment/web\""));
    assert_int_equal(rbac_stage(nons, "/spec/template", &role, &binding, &lease, why, sizeof why),
                     -EINVAL);
    assert_non_null(strstr(why, "metadata.namespace"));
    cJSON_Delete(nons);
    cJSON *bad = cJSON_Parse(DEPLOYMENT(",\"namespace\":\"shop\"", ",\"--stage-workload=job/x\""));
    assert_int_equal(rbac_stage(bad, "/spec/template", &role, &binding, &lease, why, sizeof why),
                     -EINVAL);
    assert_non_null(strstr(why, "--stage-workload=job/x"));
    assert_null(role);
    cJSON_Delete(bad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stage_objects),
        cmocka_unit_test(test_stage_none_or_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
