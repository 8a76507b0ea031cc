/*
 * test_inject_restart.c - unit tests of the restart rules the injection
 * adds (inject/restartpolicy.c, through inject_object): restart-pod's
 * RestartAllContainers rule on the sidecar, its copy in
 * --restart-policy-rules and its --state-dir emptyDir, the refusal below
 * Kubernetes 1.36, and the restart action's Restart rule on the app
 * container of a Never/OnFailure pod (KEP-5307). The golden cases
 * restart-pod, restart-pod-old-cluster and job-restart (test_transform.c)
 * show whole injections; these pin the rules across the inputs.
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

#include "config/config.h"
#include "inject/transform.h"
#include "yamldoc/jsonpatch.h"

/* A pod with annotations ANN (JSON members, after the opt-in), pod spec
 * members SPEC (before the containers) and container members CTR of the
 * app "app", which mounts ConfigMap cfg at /etc/app. */
#define POD(ANN, SPEC, CTR)                                                                        \
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"annotations\":{"       \
    "\"reload-agent.io/inject\":\"true\"" ANN "}},\"spec\":{" SPEC "\"containers\":[{\"name\":"    \
    "\"app\",\"image\":\"x\"" CTR ",\"volumeMounts\":[{\"name\":\"cfg\",\"mountPath\":"            \
    "\"/etc/app\"}]},{\"name\":\"helper\",\"image\":\"y\"}],\"volumes\":[{\"name\":\"cfg\","       \
    "\"configMap\":{\"name\":\"app\"}}]}}"
#define RESTART_POD ",\"reload-agent.io/action\":\"restart-pod\""
#define RESTART ",\"reload-agent.io/action\":\"restart\",\"reload-agent.io/process\":\"app\""

/* Injects json with o; returns the patched object (r keeps the result). */
static cJSON *inject(const char *json, const struct inject_opts *o, struct inject_result *r)
{
    char err[512] = "";
    cJSON *obj = cJSON_Parse(json);
    if (!obj) print_error("bad test JSON: %s\n", json);
    assert_non_null(obj);
    int rc = inject_object(obj, o, r, err, sizeof err);
    if (rc) print_error("inject: %s\n", err);
    assert_int_equal(rc, 0);
    if (r->outcome == INJECT_INJECTED) {
        rc = jsonpatch_apply(&obj, r->ops, err, sizeof err);
        if (rc) print_error("apply: %s\n", err);
        assert_int_equal(rc, 0);
    }
    return obj;
}

static const cJSON *spec_of(const cJSON *pod) { return cJSON_GetObjectItem(pod, "spec"); }

static const cJSON *sidecar_of(const cJSON *pod)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(spec_of(pod), "initContainers"))
    {
        if (strcmp(cJSON_GetObjectItem(c, "name")->valuestring, INJECT_CONTAINER) == 0) return c;
    }
    return NULL;
}

static const cJSON *container(const cJSON *pod, int i)
{
    return cJSON_GetArrayItem(cJSON_GetObjectItem(spec_of(pod), "containers"), i);
}

/* The value of the sidecar's --NAME= arg, or NULL. */
static const char *arg_value(const cJSON *side, const char *name)
{
    const cJSON *a;
    size_t n = strlen(name);
    cJSON_ArrayForEach(a, cJSON_GetObjectItem(side, "args"))
    {
        if (strncmp(a->valuestring, name, n) == 0 && a->valuestring[n] == '=')
            return a->valuestring + n + 1;
    }
    return NULL;
}

/* The compact JSON of field key of c (malloc'd), or NULL when absent. */
static char *field_json(const cJSON *c, const char *key)
{
    const cJSON *f = cJSON_GetObjectItem(c, key);
    return f ? cJSON_PrintUnformatted(f) : NULL;
}

static void expect_rules(const cJSON *c, const char *want)
{
    char *got = field_json(c, "restartPolicyRules");
    if (!got || strcmp(got, want) != 0)
        print_error("rules %s, want %s\n", got ? got : "(none)", want);
    assert_non_null(got);
    assert_string_equal(got, want);
    cJSON_free(got);
}

/* The sidecar's args (after "run") and the pod's annotations, through the
 * agent's own parser: 0 when the agent would start, with the actions it
 * uses in *used. */
static int agent_accepts(const cJSON *pod, unsigned *used, char *err, size_t errlen)
{
    const cJSON *side = sidecar_of(pod), *a;
    const cJSON *annots = cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "metadata"), "annotations");
    int n = 0, help = 0, rc = -EINVAL;
    char *argv[32];
    cJSON_ArrayForEach(a, cJSON_GetObjectItem(side, "args"))
    {
        assert_true(n < 32);
        argv[n++] = a->valuestring;
    }
    assert_true(n > 0);
    assert_string_equal(argv[0], "run");
    struct cfg_layer flags, al;
    struct annot_set set = {0};
    struct config cfg;
    assert_int_equal(cfg_layer_init(&flags, CFG_SRC_FLAG), 0);
    assert_int_equal(cfg_layer_init(&al, CFG_SRC_ANNOTATION), 0);
    assert_int_equal(inject_annot_set(annots, &set), 0);
    if (cfg_parse_args(n - 1, argv + 1, &flags, &help, err, errlen) == 0 &&
        cfg_layer_from_annotations(&set, &al, err, errlen) == 0 &&
        cfg_build(&flags, &al, &cfg, err, errlen) == 0) {
        *used = cfg_used_actions(&cfg);
        cfg_free(&cfg);
        rc = 0;
    }
    free(set.v);
    cfg_layer_free(&flags);
    cfg_layer_free(&al);
    return rc;
}

/* restart-pod: the sidecar's rule for the agent's exit code, the same JSON
 * in --restart-policy-rules, --state-dir on a writable emptyDir; no shared
 * PID namespace, no token, no UID of the app's; the agent accepts it. At
 * admission, no token is copied even where the app has one. */
static void test_restart_pod_sidecar(void **state)
{
    (void)state;
    static const char *const WANT = "[{\"action\":\"RestartAllContainers\",\"exitCodes\":{"
                                    "\"operator\":\"In\",\"values\":[99]}}]";
    struct inject_opts o = {.admission = 1};
    struct inject_result r;
    cJSON *pod = inject(
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"annotations\":{"
        "\"reload-agent.io/inject\":\"true\"" RESTART_POD
        ",\"reload-agent.io/restart-pod-exit-code\":\"99\"}},\"spec\":{\"securityContext\":{"
        "\"runAsUser\":1000},\"containers\":[{\"name\":\"app\",\"volumeMounts\":[{\"name\":"
        "\"cfg\",\"mountPath\":\"/etc/app\"},{\"name\":\"kube-api-access-x\",\"mountPath\":"
        "\"/var/run/secrets/kubernetes.io/serviceaccount\"}]}],\"volumes\":[{\"name\":\"cfg\","
        "\"configMap\":{\"name\":\"app\"}},{\"name\":\"kube-api-access-x\",\"projected\":{"
        "\"sources\":[{\"serviceAccountToken\":{\"path\":\"token\"}}]}}]}}",
        &o, &r);
    if (r.outcome != INJECT_INJECTED) print_error("not injected: %s\n", r.reason);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    const cJSON *side = sidecar_of(pod), *m;
    assert_non_null(side);
    assert_string_equal(cJSON_GetObjectItem(side, "restartPolicy")->valuestring, "Always");
    expect_rules(side, WANT);
    assert_non_null(arg_value(side, "--restart-policy-rules"));
    assert_string_equal(arg_value(side, "--restart-policy-rules"), WANT);
    assert_string_equal(arg_value(side, "--state-dir"), "/reload-agent/state");
    assert_string_equal(arg_value(side, "--events"), "false");
    int state_mount = 0;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(side, "volumeMounts"))
    {
        const char *p = cJSON_GetObjectItem(m, "mountPath")->valuestring;
        assert_string_not_equal(p, "/var/run/secrets/kubernetes.io/serviceaccount");
        if (strcmp(p, "/reload-agent/state") == 0) {
            state_mount = 1;
            assert_string_equal(cJSON_GetObjectItem(m, "name")->valuestring, "reload-agent-state");
            assert_null(cJSON_GetObjectItem(m, "readOnly"));
        }
    }
    assert_true(state_mount);
    const cJSON *v;
    int state_vol = 0;
    cJSON_ArrayForEach(v, cJSON_GetObjectItem(spec_of(pod), "volumes"))
    {
        if (strcmp(cJSON_GetObjectItem(v, "name")->valuestring, "reload-agent-state") == 0) {
            state_vol = 1;
            assert_non_null(cJSON_GetObjectItem(v, "emptyDir"));
        }
    }
    assert_true(state_vol);
    assert_null(cJSON_GetObjectItem(spec_of(pod), "shareProcessNamespace"));
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(side, "securityContext"), "runAsUser"));
    assert_null(cJSON_GetObjectItem(container(pod, 0), "restartPolicyRules"));
    char err[512] = "";
    unsigned used = 0;
    int rc = agent_accepts(pod, &used, err, sizeof err);
    if (rc) print_error("the agent refuses the injected sidecar: %s\n", err);
    assert_int_equal(rc, 0);
    assert_true(used & ACTION_BIT(ACTION_RESTART_POD));
    inject_result_free(&r);
    cJSON_Delete(pod);
}

/* env-action restart-pod alone (through an env volume) is effective too;
 * a sidecar without restart-pod gets none of it. */
static void test_restart_pod_from_env_action(void **state)
{
    (void)state;
    struct inject_result r;
    cJSON *pod = inject(POD(",\"reload-agent.io/env-action\":\"restart-pod\"", "",
                            ",\"envFrom\":[{\"configMapRef\":{\"name\":\"env\"}}]"),
                        NULL, &r);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    expect_rules(sidecar_of(pod),
                 "[{\"action\":\"RestartAllContainers\",\"exitCodes\":{\"operator\":\"In\","
                 "\"values\":[88]}}]");
    inject_result_free(&r);
    cJSON_Delete(pod);
    pod = inject(POD(",\"reload-agent.io/action\":\"none\"", "", ""), NULL, &r);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    assert_null(cJSON_GetObjectItem(sidecar_of(pod), "restartPolicyRules"));
    assert_null(arg_value(sidecar_of(pod), "--restart-policy-rules"));
    /* the state directory is every sidecar's (the applied state) */
    assert_string_equal(arg_value(sidecar_of(pod), "--state-dir"), "/reload-agent/state");
    inject_result_free(&r);
    cJSON_Delete(pod);
}

/* The cluster's version decides: below 1.36 the API server rejects the
 * rule on a sidecar, so the pod is not injected, with the field and the
 * version in the reason. */
static void test_restart_pod_kube_version(void **state)
{
    (void)state;
    static const struct {
        int minor, injected;
    } T[] = {{0, 1}, {36, 1}, {37, 1}, {35, 0}, {34, 0}, {29, 0}};
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        struct inject_opts o = {.kube_minor = T[i].minor};
        struct inject_result r;
        cJSON *pod = inject(POD(RESTART_POD, "", ""), &o, &r);
        if ((r.outcome == INJECT_INJECTED) != T[i].injected)
            print_error("kube 1.%d: outcome %d (%s)\n", T[i].minor, r.outcome, r.reason);
        assert_int_equal(r.outcome == INJECT_INJECTED, T[i].injected);
        if (!T[i].injected) {
            char v[16];
            snprintf(v, sizeof v, "1.%d", T[i].minor);
            assert_int_equal(r.outcome, INJECT_SKIPPED);
            assert_non_null(strstr(r.reason, "restartPolicyRules"));
            assert_non_null(strstr(r.reason, "RestartAllContainers"));
            assert_non_null(strstr(r.reason, v));
            assert_int_equal(cJSON_GetArraySize(r.ops), 0);
        }
        inject_result_free(&r);
        cJSON_Delete(pod);
    }
}

/* What the agent would refuse is never injected: the rules are a flag
 * only, exit code 70 is the agent's own; and the state volume's name. */
static void test_restart_pod_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *json, *reason;
    } T[] = {
        {POD(RESTART_POD ",\"reload-agent.io/restart-pod-exit-code\":\"70\"", "", ""), "70"},
        {POD(RESTART_POD ",\"reload-agent.io/restart-pod-exit-code\":\"300\"", "", ""),
         "restart-pod-exit-code"},
        {POD(RESTART_POD ",\"reload-agent.io/restart-policy-rules\":\"[]\"", "", ""),
         "restart-policy-rules"},
        {"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"annotations\":{"
         "\"reload-agent.io/inject\":\"true\"" RESTART_POD "}},\"spec\":{\"containers\":[{\"name\":"
         "\"app\",\"volumeMounts\":[{\"name\":\"cfg\",\"mountPath\":\"/etc/app\"}]}],\"volumes\":["
         "{\"name\":\"cfg\",\"configMap\":{\"name\":\"app\"}},{\"name\":\"reload-agent-state\","
         "\"emptyDir\":{}}]}}",
         "reload-agent-state"},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        struct inject_result r;
        cJSON *pod = inject(T[i].json, NULL, &r);
        if (r.outcome != INJECT_SKIPPED || !strstr(r.reason, T[i].reason))
            print_error("case %zu: outcome %d, reason \"%s\", want it to name %s\n", i, r.outcome,
                        r.reason, T[i].reason);
        assert_int_equal(r.outcome, INJECT_SKIPPED);
        assert_non_null(strstr(r.reason, T[i].reason));
        inject_result_free(&r);
        cJSON_Delete(pod);
    }
}

#define RULE_143 "[{\"action\":\"Restart\",\"exitCodes\":{\"operator\":\"In\",\"values\":[143]}}]"

/* restart in a pod that would end when its app is stopped: the app
 * container (not the helper) gets the pod's restartPolicy and a Restart
 * rule on 128 + the restart signal's number. */
static void test_restart_rule_on_app(void **state)
{
    (void)state;
    static const struct {
        const char *json, *policy, *rules; /* policy NULL: none added; rules NULL: none */
        int index;
    } T[] = {
        {POD(RESTART, "\"restartPolicy\":\"Never\",", ""), "Never", RULE_143, 0},
        {POD(RESTART, "\"restartPolicy\":\"OnFailure\",", ""), "OnFailure", RULE_143, 0},
        {POD(RESTART ",\"reload-agent.io/restart-signal\":\"INT\"", "\"restartPolicy\":\"Never\",",
             ""),
         "Never", "[{\"action\":\"Restart\",\"exitCodes\":{\"operator\":\"In\",\"values\":[130]}}]",
         0},
        {POD(RESTART ",\"kubectl.kubernetes.io/default-container\":\"helper\"",
             "\"restartPolicy\":\"Never\",", ""),
         "Never", RULE_143, 1},
        /* the container states its own policy: only the rule is added */
        {POD(RESTART, "\"restartPolicy\":\"Never\",", ",\"restartPolicy\":\"OnFailure\""),
         "OnFailure", RULE_143, 0},
        /* the kubelet restarts it anyway */
        {POD(RESTART, "", ""), NULL, NULL, 0},
        {POD(RESTART, "\"restartPolicy\":\"Always\",", ""), NULL, NULL, 0},
        {POD(RESTART, "\"restartPolicy\":\"Never\",", ",\"restartPolicy\":\"Always\""), "Always",
         NULL, 0},
        /* restart is not effective */
        {POD(",\"reload-agent.io/action\":\"none\"", "\"restartPolicy\":\"Never\",", ""), NULL,
         NULL, 0},
        /* a rule's action is effective too */
        {POD(",\"reload-agent.io/rule\":\"*.conf=restart\",\"reload-agent.io/process\":\"app\"",
             "\"restartPolicy\":\"Never\",", ""),
         "Never", RULE_143, 0},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        struct inject_result r;
        cJSON *pod = inject(T[i].json, NULL, &r);
        assert_int_equal(r.outcome, INJECT_INJECTED);
        const cJSON *app = container(pod, T[i].index), *other = container(pod, 1 - T[i].index);
        char *policy = field_json(app, "restartPolicy"),
             *rules = field_json(app, "restartPolicyRules");
        char want[32];
        snprintf(want, sizeof want, "\"%s\"", T[i].policy ? T[i].policy : "");
        if ((T[i].policy ? !policy || strcmp(policy, want) : policy != NULL) ||
            (T[i].rules ? !rules || strcmp(rules, T[i].rules) : rules != NULL))
            print_error("case %zu: restartPolicy %s, rules %s\n", i, policy ? policy : "(none)",
                        rules ? rules : "(none)");
        if (T[i].policy)
            assert_string_equal(policy, want);
        else
            assert_null(policy);
        if (T[i].rules)
            assert_string_equal(rules, T[i].rules);
        else
            assert_null(rules);
        assert_null(cJSON_GetObjectItem(other, "restartPolicyRules"));
        cJSON_free(policy);
        cJSON_free(rules);
        inject_result_free(&r);
        cJSON_Delete(pod);
    }
}

static int has_warning(const struct inject_result *r, const char *a, const char *b)
{
    for (size_t i = 0; i < r->nwarnings; i++)
        if (strstr(r->warnings[i], a) && strstr(r->warnings[i], b)) return 1;
    return 0;
}

/* The app's own rules are never changed: a warning when they would end
 * it on the code; none when they restart it. Below 1.35 the field is
 * dropped by the API server: not added, with a warning. */
static void test_restart_rule_left_alone(void **state)
{
    (void)state;
    struct inject_result r;
    cJSON *pod = inject(POD(RESTART, "\"restartPolicy\":\"Never\",",
                            ",\"restartPolicy\":\"Never\",\"restartPolicyRules\":[{\"action\":"
                            "\"Restart\",\"exitCodes\":{\"operator\":\"In\",\"values\":[42]}}]"),
                        NULL, &r);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    expect_rules(container(pod, 0),
                 "[{\"action\":\"Restart\",\"exitCodes\":{\"operator\":\"In\",\"values\":[42]}}]");
    assert_true(has_warning(&r, "container app", "exit code 143"));
    inject_result_free(&r);
    cJSON_Delete(pod);

    pod = inject(POD(RESTART, "\"restartPolicy\":\"Never\",",
                     ",\"restartPolicy\":\"Never\",\"restartPolicyRules\":[{\"action\":"
                     "\"Restart\",\"exitCodes\":{\"operator\":\"NotIn\",\"values\":[0]}}]"),
                 NULL, &r);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    assert_false(has_warning(&r, "container app", "exit code"));
    inject_result_free(&r);
    cJSON_Delete(pod);

    struct inject_opts old = {.kube_minor = 34};
    pod = inject(POD(RESTART, "\"restartPolicy\":\"Never\",", ""), &old, &r);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    assert_null(cJSON_GetObjectItem(container(pod, 0), "restartPolicyRules"));
    assert_null(cJSON_GetObjectItem(container(pod, 0), "restartPolicy"));
    assert_true(has_warning(&r, "restartPolicyRules", "1.34"));
    inject_result_free(&r);
    cJSON_Delete(pod);
    struct inject_opts v135 = {.kube_minor = 35};
    pod = inject(POD(RESTART, "\"restartPolicy\":\"Never\",", ""), &v135, &r);
    expect_rules(container(pod, 0), RULE_143);
    inject_result_free(&r);
    cJSON_Delete(pod);
}

/* A field of the wrong type is an error naming its path. */
static void test_restart_rule_types(void **state)
{
    (void)state;
    static const char *const T[][2] = {
        {POD(RESTART, "\"restartPolicy\":1,", ""), "spec.restartPolicy: want a string"},
        {POD(RESTART, "", ",\"restartPolicyRules\":{}"),
         "spec.containers[0].restartPolicyRules: want an array"},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        cJSON *obj = cJSON_Parse(T[i][0]);
        struct inject_result r;
        char err[512] = "";
        assert_non_null(obj);
        int rc = inject_object(obj, NULL, &r, err, sizeof err);
        if (rc != -EINVAL || !strstr(err, T[i][1]))
            print_error("case %zu: rc %d, err \"%s\"\n", i, rc, err);
        assert_int_equal(rc, -EINVAL);
        assert_non_null(strstr(err, T[i][1]));
        cJSON_Delete(obj);
    }
}

/* --kube-version: what kubectl and Helm print, and nothing else. */
static void test_parse_kube_version(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int minor; /* -1: refused */
    } T[] = {{"1.35", 35},         {"v1.36", 36},  {"1.36.3", 36}, {"v1.36.3-gke.100", 36},
             {"v1.37.0+k3s1", 37}, {"1.100", 100}, {"2.1", -1},    {"1.", -1},
             {"1.x", -1},          {"1.35x", -1},  {"1.35.", -1},  {"v1.19.0", -1},
             {"1.1234", -1},       {"", -1},       {"35", -1},     {" 1.35", -1}};
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        int minor = 0, rc = inject_parse_kube_version(T[i].s, &minor);
        if ((rc == 0 ? minor : -1) != T[i].minor)
            print_error("\"%s\": rc %d minor %d, want %d\n", T[i].s, rc, minor, T[i].minor);
        assert_int_equal(rc == 0 ? minor : -1, T[i].minor);
    }
    assert_int_equal(inject_parse_kube_version(NULL, &(int){0}), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restart_pod_sidecar),
        cmocka_unit_test(test_restart_pod_from_env_action),
        cmocka_unit_test(test_restart_pod_kube_version),
        cmocka_unit_test(test_restart_pod_refusals),
        cmocka_unit_test(test_restart_rule_on_app),
        cmocka_unit_test(test_restart_rule_left_alone),
        cmocka_unit_test(test_restart_rule_types),
        cmocka_unit_test(test_parse_kube_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
