/*
 * test_transform.c - unit tests for inject/transform.c, driven by golden
 * files, plus the rules that goldens do not show well.
 *
 * Each case of CASES reads tests/golden/inject/<case>.in.json (an object
 * as kubectl would print it), runs inject_object with the case's options
 * and compares with the reviewed expectations:
 *   <case>.ops.json  the operations, byte for byte (cJSON_Print);
 *   <case>.out.json  the input with the operations applied (jsonpatch_apply);
 *   <case>.warn.txt  "outcome: ..." then one "warning: ..." line each.
 * Then the output is injected again: it must be UNCHANGED with no
 * operations (idempotency), whatever the first outcome.
 *
 * UPDATE_GOLDEN=1 rewrites the three expectation files from the current
 * code instead of comparing: read every changed file before committing it
 * (git diff), a golden is a reviewed expectation, not a recording.
 * GOLDEN_DIR overrides the directory (default tests/golden/inject, run from
 * the repository's root as `make unit` does).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "yamldoc/jsonpatch.h"
#include "inject/transform.h"
#include "inject/transform_int.h"
#include "kube/kinds.h"
#include "oomwrap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gcase {
    const char *name;
    int admission, all;
    const char *image;
};

static const struct gcase CASES[] = {
    {"deployment", 0, 0, NULL},
    {"statefulset", 0, 0, NULL},
    {"daemonset", 0, 0, NULL},
    {"job", 0, 0, NULL},
    {"cronjob", 0, 0, NULL},
    {"pod", 0, 0, NULL},
    {"replicaset-all", 0, 1, "registry.example/reload-agent:1.2.3"},
    {"labels-only-all", 0, 1, NULL},
    {"rollout", 0, 0, NULL},
    {"rollout-workloadref", 0, 0, NULL},
    {"mesh-sidecar", 0, 0, NULL},
    {"env-sources", 0, 0, NULL},
    {"env-restart", 0, 0, NULL},
    {"subpath", 0, 0, NULL},
    {"projected", 0, 0, NULL},
    {"projected-token", 0, 0, NULL},
    {"kube-api-access", 1, 0, NULL},
    {"collision", 0, 0, NULL},
    {"admission-token-rollout", 1, 0, NULL},
    {"already-injected", 0, 0, NULL},
    {"reinvocation", 1, 0, NULL},
    {"foreign-container", 0, 0, NULL},
    {"host-pid", 0, 0, NULL},
    {"inject-false", 0, 0, NULL},
    {"inject-other-value", 0, 0, NULL},
    {"not-opted-in", 0, 0, NULL},
    {"admission-no-token-rollout", 1, 0, NULL},
    {"signal-uid", 0, 0, NULL},
    {"signal-root", 0, 0, NULL},
    {"signal-nonroot-required", 0, 0, NULL},
    {"signal-run-as-annotation", 0, 0, NULL},
    {"signal-run-as-bad", 0, 0, NULL},
    {"pod-root-none", 0, 0, NULL},
    {"bad-annotation", 0, 0, NULL},
    {"sidecar-overrides", 0, 0, NULL},
    {"nothing-to-watch", 0, 0, NULL},
    {"service", 0, 0, NULL},
    {"nested-mounts", 0, 0, NULL},
    {"restart-pod", 0, 0, NULL},
    {"restart-pod-old-cluster", 0, 0, NULL},
    {"job-restart", 0, 0, NULL},
    {"fast-sync", 0, 0, NULL},
    {"admission-fast-sync", 1, 0, NULL},
    {"admission-no-token-fast-sync", 1, 0, NULL},
    {"reinvocation-fast-sync", 1, 0, NULL},
    {"safe-reload", 0, 0, NULL},
    {"admission-safe-reload", 1, 0, NULL},
    {"keep-last-good-subpath", 0, 0, NULL},
    {"validate-two-containers", 0, 0, NULL},
    {"csi-secrets", 0, 0, NULL},
    {"extra-sources", 0, 0, NULL},
    {"extra-sources-only", 0, 0, NULL},
    {"extra-sources-bad", 0, 0, NULL},
    {"notify-secret", 0, 0, NULL},
    {"notify-secret-bad", 0, 0, NULL},
};

/* The cases injected for another Kubernetes version than the default
 * (inject_opts.kube_minor). */
static const struct {
    const char *name;
    int kube_minor;
} CASE_KUBE[] = {
    {"restart-pod-old-cluster", 35},
};

static int case_kube_minor(const struct gcase *c)
{
    for (size_t i = 0; i < sizeof CASE_KUBE / sizeof CASE_KUBE[0]; i++)
        if (strcmp(CASE_KUBE[i].name, c->name) == 0) return CASE_KUBE[i].kube_minor;
    return 0;
}

static const char *golden_dir(void)
{
    const char *d = getenv("GOLDEN_DIR");
    return d && *d ? d : "tests/golden/inject";
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

static const char *outcome_name(enum inject_outcome o)
{
    switch (o) {
    case INJECT_INJECTED: return "injected";
    case INJECT_UNCHANGED: return "unchanged";
    case INJECT_SKIPPED: return "skipped";
    case INJECT_NOT_WORKLOAD: return "not a workload";
    }
    return "?";
}

/* "outcome: ...\n", the warnings and the notes, one line each. */
static char *report_of(const struct inject_result *r)
{
    size_t cap = 512 + 300 * r->nwarnings + 420 * r->nnotes, len = 0;
    char *s = malloc(cap);
    assert_non_null(s);
    len += (size_t)snprintf(s + len, cap - len, "outcome: %s%s%s\n", outcome_name(r->outcome),
                            r->reason[0] ? ": " : "", r->reason);
    for (size_t i = 0; i < r->nwarnings; i++)
        len += (size_t)snprintf(s + len, cap - len, "warning: %s\n", r->warnings[i]);
    for (size_t i = 0; i < r->nnotes; i++)
        len += (size_t)snprintf(s + len, cap - len, "note: %s\n", r->notes[i]);
    return s;
}

static char *print_json(const cJSON *v)
{
    char *p = cJSON_Print(v);
    assert_non_null(p);
    size_t n = strlen(p);
    char *s = malloc(n + 2);
    assert_non_null(s);
    memcpy(s, p, n);
    s[n] = '\n';
    s[n + 1] = '\0';
    cJSON_free(p);
    return s;
}

/* Compares got with the file, or writes it under UPDATE_GOLDEN. */
static void expect_file(const char *cname, const char *suffix, const char *got)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.%s", golden_dir(), cname, suffix);
    const char *up = getenv("UPDATE_GOLDEN");
    if (up && strcmp(up, "1") == 0) {
        write_text(path, got);
        return;
    }
    char *want = read_text(path);
    if (!want) print_error("%s: missing (run with UPDATE_GOLDEN=1, then review it)\n", path);
    assert_non_null(want);
    if (strcmp(want, got) != 0)
        print_error("%s differs from the output:\n---- got\n%s---- want\n%s", path, got, want);
    assert_string_equal(got, want);
    free(want);
}

static void run_case(const struct gcase *c)
{
    char path[512], err[512] = "";
    snprintf(path, sizeof path, "%s/%s.in.json", golden_dir(), c->name);
    char *text = read_text(path);
    if (!text) print_error("%s: cannot read\n", path);
    assert_non_null(text);
    cJSON *in = cJSON_Parse(text);
    if (!in) print_error("%s: not JSON\n", path);
    assert_non_null(in);
    free(text);

    struct inject_opts opts = {.admission = c->admission,
                               .all = c->all,
                               .image = c->image,
                               .kube_minor = case_kube_minor(c)};
    struct inject_result r;
    int rc = inject_object(in, &opts, &r, err, sizeof err);
    if (rc != 0) print_error("%s: inject_object: %d %s\n", c->name, rc, err);
    assert_int_equal(rc, 0);
    assert_non_null(r.ops);
    assert_true(cJSON_IsArray(r.ops));
    if (r.outcome != INJECT_INJECTED) assert_int_equal(cJSON_GetArraySize(r.ops), 0);
    if (r.outcome == INJECT_INJECTED) assert_true(cJSON_GetArraySize(r.ops) > 0);
    if (r.outcome == INJECT_SKIPPED || r.outcome == INJECT_NOT_WORKLOAD)
        assert_true(r.reason[0] != '\0');
    for (size_t i = 0; i < r.nwarnings; i++) {
        if (strlen(r.warnings[i]) > 120) print_error("warning over 120: %s\n", r.warnings[i]);
        assert_true(strlen(r.warnings[i]) <= 120);
        assert_null(strchr(r.warnings[i], '\n'));
    }

    char *ops = print_json(r.ops), *report = report_of(&r);
    cJSON *out = cJSON_Duplicate(in, 1);
    assert_non_null(out);
    rc = jsonpatch_apply(&out, r.ops, err, sizeof err);
    if (rc != 0) print_error("%s: jsonpatch_apply: %s\n", c->name, err);
    assert_int_equal(rc, 0);
    char *outs = print_json(out);
    expect_file(c->name, "ops.json", ops);
    expect_file(c->name, "out.json", outs);
    expect_file(c->name, "warn.txt", report);

    /* the output injected again: nothing to add */
    struct inject_result again;
    rc = inject_object(out, &opts, &again, err, sizeof err);
    assert_int_equal(rc, 0);
    if (r.outcome == INJECT_INJECTED || r.outcome == INJECT_UNCHANGED) {
        if (again.outcome != INJECT_UNCHANGED)
            print_error("%s: injecting the output again gave %s: %s\n", c->name,
                        outcome_name(again.outcome), again.reason);
        assert_int_equal(again.outcome, INJECT_UNCHANGED);
    } else {
        assert_int_equal(again.outcome, r.outcome);
    }
    assert_int_equal(cJSON_GetArraySize(again.ops), 0);
    inject_result_free(&again);

    free(ops);
    free(report);
    free(outs);
    cJSON_Delete(out);
    cJSON_Delete(in);
    inject_result_free(&r);
}

static void test_golden(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) run_case(&CASES[i]);
}

static void test_prefix_table(void **state)
{
    (void)state;
    assert_string_equal(inject_prefix_for("v1", "Pod"), "");
    assert_string_equal(inject_prefix_for(NULL, "Pod"), "");
    assert_string_equal(inject_prefix_for("apps/v1", "Deployment"), "/spec/template");
    assert_string_equal(inject_prefix_for("apps/v1", "StatefulSet"), "/spec/template");
    assert_string_equal(inject_prefix_for("apps/v1", "DaemonSet"), "/spec/template");
    assert_string_equal(inject_prefix_for("apps/v1", "ReplicaSet"), "/spec/template");
    assert_string_equal(inject_prefix_for("batch/v1", "Job"), "/spec/template");
    assert_string_equal(inject_prefix_for("batch/v1", "CronJob"),
                        "/spec/jobTemplate/spec/template");
    assert_string_equal(inject_prefix_for("argoproj.io/v1alpha1", "Rollout"), "/spec/template");
    assert_null(inject_prefix_for("v1", "ConfigMap"));
    assert_null(inject_prefix_for("v1", "Service"));
    assert_null(inject_prefix_for("example.com/v1", "Deployment")); /* a CRD of the same kind */
    assert_null(inject_prefix_for("apps/v1", "Pod"));
    assert_null(inject_prefix_for("apps/", "Deployment"));
    assert_null(inject_prefix_for("v1", "pod")); /* kinds are case-sensitive */
    assert_null(inject_prefix_for("v1", NULL));
}

/* Runs inject_object on JSON text; returns rc, fills *r and err. */
static int inject_text(const char *json, const struct inject_opts *o, struct inject_result *r,
                       char *err, size_t errlen)
{
    cJSON *obj = cJSON_Parse(json);
    if (!obj) print_error("bad test JSON: %s\n", json);
    assert_non_null(obj);
    int rc = inject_object(obj, o, r, err, errlen);
    cJSON_Delete(obj);
    return rc;
}

#define POD_HEAD                                                                                   \
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"annotations\":{"
#define OPT_IN "\"reload-agent.io/inject\":\"true\""
#define APP_CM                                                                                     \
    "\"containers\":[{\"name\":\"app\",\"image\":\"x\",\"volumeMounts\":[{\"name\":\"cfg\","       \
    "\"mountPath\":\"/etc/app\"}]}],\"volumes\":[{\"name\":\"cfg\",\"configMap\":{\"name\":"       \
    "\"app\"}}]"

static void expect_einval(const char *json, const char *path_in_msg)
{
    struct inject_result r;
    char err[512] = "";
    int rc = inject_text(json, NULL, &r, err, sizeof err);
    if (rc != -EINVAL || !strstr(err, path_in_msg))
        print_error("rc %d, err \"%s\", want -EINVAL naming %s\n", rc, err, path_in_msg);
    assert_int_equal(rc, -EINVAL);
    assert_non_null(strstr(err, path_in_msg));
    assert_null(r.ops);
    assert_int_equal(r.nwarnings, 0);
}

static void test_malformed_fields_named(void **state)
{
    (void)state;
    expect_einval("[1,2]", "not a JSON object");
    expect_einval("{\"kind\":7}", "kind: want a string, got a number");
    expect_einval("{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"spec\":[]}",
                  "spec: want an object, got an array");
    expect_einval("{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"spec\":{\"template\":{"
                  "\"metadata\":{\"annotations\":\"x\"}}}}",
                  "spec.template.metadata.annotations: want an object, got a string");
    expect_einval(POD_HEAD "\"reload-agent.io/action\":5}},\"spec\":{" APP_CM "}}",
                  "metadata.annotations[reload-agent.io/action]: want a string, got a number");
    expect_einval(POD_HEAD OPT_IN "}},\"spec\":{\"containers\":{}}}",
                  "spec.containers: want an array, got an object");
    expect_einval(POD_HEAD OPT_IN "}},\"spec\":{\"containers\":[\"app\"]}}",
                  "spec.containers[0]: want an object, got a string");
    expect_einval(POD_HEAD OPT_IN "}},\"spec\":{\"hostPID\":\"yes\"," APP_CM "}}",
                  "spec.hostPID: want a boolean, got a string");
    expect_einval(POD_HEAD OPT_IN "}},\"spec\":{\"containers\":[{\"name\":\"app\","
                                  "\"volumeMounts\":[{\"name\":\"cfg\",\"mountPath\":1}]}],"
                                  "\"volumes\":[{\"name\":\"cfg\",\"configMap\":{}}]}}",
                  "spec.containers[0].volumeMounts[0].mountPath: want a string, got a number");
    expect_einval(POD_HEAD OPT_IN "}},\"spec\":{\"containers\":[{\"name\":\"app\"}],"
                                  "\"volumes\":[{\"configMap\":{}}]}}",
                  "spec.volumes[0].name: missing");
    expect_einval(
        "{\"apiVersion\":\"batch/v1\",\"kind\":\"CronJob\",\"spec\":{\"jobTemplate\":{"
        "\"spec\":{\"template\":{\"metadata\":{\"annotations\":{" OPT_IN "}},\"spec\":{"
        "\"containers\":[{\"name\":\"a\",\"env\":[{\"name\":\"X\",\"valueFrom\":{"
        "\"configMapKeyRef\":{\"name\":\"c\",\"key\":\"k\",\"optional\":\"no\"}}}]}]}}}}}}",
        "spec.jobTemplate.spec.template.spec.containers[0].env[0].valueFrom."
        "configMapKeyRef.optional: want a boolean, got a string");
    expect_einval(POD_HEAD OPT_IN "}},\"spec\":{\"securityContext\":{\"runAsUser\":-1},"
                                  "\"containers\":[{\"name\":\"app\",\"volumeMounts\":[{\"name\":"
                                  "\"cfg\",\"mountPath\":\"/c\"}]}],\"volumes\":[{\"name\":\"cfg\","
                                  "\"secret\":{}}]},\"x\":0}",
                  "spec.securityContext.runAsUser: want an integer 0..2147483647");
}

/* Not-opted-in objects are not looked at beyond their annotations. */
static void test_not_opted_in_is_not_validated(void **state)
{
    (void)state;
    struct inject_result r;
    char err[256];
    assert_int_equal(inject_text("{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"spec\":{"
                                 "\"template\":{\"spec\":{\"containers\":7}}}}",
                                 NULL, &r, err, sizeof err),
                     0);
    assert_int_equal(r.outcome, INJECT_SKIPPED);
    assert_non_null(strstr(r.reason, "not opted in"));
    inject_result_free(&r);
    /* a kustomize-style partial Deployment under --all: skipped, not an error */
    struct inject_opts all = {.all = 1};
    assert_int_equal(inject_text("{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":"
                                 "{\"name\":\"web\"},\"spec\":{\"replicas\":3}}",
                                 &all, &r, err, sizeof err),
                     0);
    assert_int_equal(r.outcome, INJECT_SKIPPED);
    assert_string_equal(r.reason, "no pod template (spec.template is missing)");
    inject_result_free(&r);
}

static const cJSON *find_sidecar(const cJSON *doc)
{
    const cJSON *c, *init = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "spec"), "initContainers");
    cJSON_ArrayForEach(c, init)
    {
        if (strcmp(cJSON_GetObjectItem(c, "name")->valuestring, "reload-agent") == 0) return c;
    }
    return NULL;
}

/* Injects a pod (JSON) and returns the patched pod; r keeps the result. */
static cJSON *inject_pod(const char *json, const struct inject_opts *o, struct inject_result *r)
{
    char err[512] = "";
    cJSON *obj = cJSON_Parse(json);
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

static int has_arg(const cJSON *side, const char *arg)
{
    const cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItem(side, "args"))
    {
        if (strcmp(a->valuestring, arg) == 0) return 1;
    }
    return 0;
}

/* Env volume names: '.' mapped, long names cut and hashed, clashes with
 * the pod's volumes resolved by the hashed form. */
static void test_env_volume_names(void **state)
{
    (void)state;
    char name[300]; /* 243 characters: four labels of 60 */
    memset(name, 'a', 243);
    name[60] = name[121] = name[182] = '.';
    name[243] = '\0';
    char json[2048];
    snprintf(json, sizeof json,
             POD_HEAD OPT_IN "}},\"spec\":{\"containers\":[{\"name\":\"app\",\"envFrom\":[{"
                             "\"configMapRef\":{\"name\":\"my.app.cfg\"}},{\"configMapRef\":{"
                             "\"name\":\"%s\"}},{\"secretRef\":{\"name\":\"taken\"}},{"
                             "\"configMapRef\":{\"name\":\"BAD_NAME\"}}]}],\"volumes\":[{\"name\":"
                             "\"reload-agent-env-secret-taken\",\"emptyDir\":{}}]}}",
             name);
    struct inject_result r;
    cJSON *pod = inject_pod(json, NULL, &r);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    const cJSON *vols = cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "volumes"), *v;
    int seen = 0;
    cJSON_ArrayForEach(v, vols)
    {
        const char *n = cJSON_GetObjectItem(v, "name")->valuestring;
        assert_true(strlen(n) <= 63);
        for (const char *p = n; *p; p++)
            assert_true((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-');
        if (strcmp(n, "reload-agent-env-cm-my-app-cfg") == 0) seen |= 1;
        /* 20 + 34 characters of the name, '-', 8 hex of the SHA-256 of the name */
        if (strncmp(n, "reload-agent-env-cm-aaaa", 24) == 0) {
            assert_int_equal(strlen(n), 63);
            assert_string_equal(n + 54, "-4bea83b2");
            seen |= 2;
        }
        if (strncmp(n, "reload-agent-env-secret-taken-", 30) == 0) {
            assert_int_equal(strlen(n), 30 + 8);
            seen |= 4;
        }
    }
    assert_int_equal(seen, 7);
    const cJSON *side = find_sidecar(pod);
    assert_true(has_arg(side, "--env-watch=/reload-agent/env/configmap/my.app.cfg"));
    assert_true(has_arg(side, "--env-watch=/reload-agent/env/secret/taken"));
    /* the invalid name is warned about and not mounted */
    int warned = 0;
    for (size_t i = 0; i < r.nwarnings; i++) warned |= strstr(r.warnings[i], "BAD_NAME") != NULL;
    assert_true(warned);
    inject_result_free(&r);
    cJSON_Delete(pod);
}

static void test_bad_config_is_skipped_with_agents_message(void **state)
{
    (void)state;
    static const struct {
        const char *annots, *reason;
    } T[] = {
        {"\"reload-agent.io/action\":\"bounce\"",
         "invalid value for annotation reload-agent.io/action: \"bounce\": must be one of"},
        {"\"reload-agent.io/nosuch\":\"1\"", "annotation reload-agent.io/nosuch: no such option"},
        {"\"reload-agent.io/action\":\"signal\"",
         "the signal action needs --process NAME or --pid-file PATH"},
        {"\"reload-agent.io/rule\":\"*.conf=reboot\"", "invalid value for --rule"},
        {"\"reload-agent.io/debounce\":\"5\"", "missing unit in duration"},
        {"\"reload-agent.io/env-action\":\"signal\"", "reload-agent.io/env-action"},
        {"\"reload-agent.io/env-action\":\"restart\"",
         "the restart action needs --process NAME or --pid-file PATH"},
        {"\"reload-agent.io/sidecar-memory-request\":\"64Mi\"",
         "sidecar memory request 64Mi exceeds its limit 32Mi"},
        {"\"reload-agent.io/sidecar-cpu-request\":\"lots\"", "invalid sidecar cpu request"},
        {"\"reload-agent.io/sidecar-image\":\"a b\"", "invalid sidecar image"},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        char json[2048], err[256];
        snprintf(json, sizeof json,
                 POD_HEAD OPT_IN ",%s}},\"spec\":{\"containers\":[{\"name\":\"app\",\"envFrom\":"
                                 "[{\"configMapRef\":{\"name\":\"e\"}}],\"volumeMounts\":[{"
                                 "\"name\":\"cfg\",\"mountPath\":\"/etc/app\"}]}],\"volumes\":[{"
                                 "\"name\":\"cfg\",\"configMap\":{\"name\":\"app\"}}]}}",
                 T[i].annots);
        struct inject_result r;
        assert_int_equal(inject_text(json, NULL, &r, err, sizeof err), 0);
        if (r.outcome != INJECT_SKIPPED || !strstr(r.reason, T[i].reason))
            print_error("case %zu: outcome %d reason \"%s\", want \"%s\"\n", i, r.outcome, r.reason,
                        T[i].reason);
        assert_int_equal(r.outcome, INJECT_SKIPPED);
        assert_non_null(strstr(r.reason, T[i].reason));
        assert_int_equal(cJSON_GetArraySize(r.ops), 0);
        assert_int_equal(r.nwarnings, 0);
        /* the reason does not depend on the caller's error buffer */
        struct inject_result r2;
        cJSON *obj = cJSON_Parse(json);
        assert_int_equal(inject_object(obj, NULL, &r2, NULL, 0), 0);
        assert_string_equal(r2.reason, r.reason);
        inject_result_free(&r2);
        cJSON_Delete(obj);
        inject_result_free(&r);
    }
}

/* The agent's own parser judges the configuration whole: an env root set
 * by annotation takes --env-action like an injected one, so restart there
 * needs the shared PID namespace; and a pod with nothing to mirror but an
 * annotated root is injected, not "nothing to watch". */
static void test_env_options_judged_by_the_agent(void **state)
{
    (void)state;
    static const struct {
        const char *annots, *spec;
        int want_spn;
    } T[] = {
        {",\"reload-agent.io/env-watch\":\"/etc/app\",\"reload-agent.io/env-action\":"
         "\"restart\",\"reload-agent.io/process\":\"app\"",
         APP_CM, 1},
        {",\"reload-agent.io/env-watch\":\"/etc/app\",\"reload-agent.io/env-action\":"
         "\"none\"",
         APP_CM, 0},
        {",\"reload-agent.io/env-watch\":\"/etc/podinfo/annotations\",\"reload-agent.io/"
         "env-action\":\"restart\",\"reload-agent.io/process\":\"app\"",
         "\"containers\":[{\"name\":\"app\",\"image\":\"x\"}]", 1},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        char json[2048];
        struct inject_result r;
        snprintf(json, sizeof json, POD_HEAD OPT_IN "%s}},\"spec\":{%s}}", T[i].annots, T[i].spec);
        cJSON *pod = inject_pod(json, NULL, &r);
        if (r.outcome != INJECT_INJECTED) print_error("case %zu: %s\n", i, r.reason);
        assert_int_equal(r.outcome, INJECT_INJECTED);
        const cJSON *spn =
            cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "shareProcessNamespace");
        if (cJSON_IsTrue(spn) != T[i].want_spn) print_error("case %zu: shareProcessNamespace\n", i);
        assert_int_equal(cJSON_IsTrue(spn), T[i].want_spn);
        inject_result_free(&r);
        cJSON_Delete(pod);
    }
}

/* Nested mirrors: the inner volume's kubelet-private names are ignored;
 * a reload-agent.io/ignore annotation replaces that list and is warned
 * about unless it still covers them; a reinvocation that adds a volume
 * inside a mirrored one adds its --ignore too. */
#define NESTED_SPEC(extra_mount, extra_vol)                                                        \
    "\"containers\":[{\"name\":\"app\",\"image\":\"x\",\"volumeMounts\":[{\"name\":\"cfg\","       \
    "\"mountPath\":\"/etc/app\"},{\"name\":\"tls\",\"mountPath\":\"/etc/app/tls\"}" extra_mount    \
    "]}],\"volumes\":[{\"name\":\"cfg\",\"configMap\":{\"name\":\"app\"}},{\"name\":\"tls\","      \
    "\"secret\":{\"secretName\":\"tls\"}}" extra_vol "]"

static void test_nested_mirrors_ignored(void **state)
{
    (void)state;
    static const struct {
        const char *annots;
        int warned;
    } T[] = {
        {"", 0},
        {",\"reload-agent.io/ignore\":\"*.swp\"", 1},
        {",\"reload-agent.io/ignore\":\"*.swp,/etc/a\\\\[p]p/tls/..*\"", 0},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        char json[2048];
        struct inject_result r;
        /* the inner path holds fnmatch specials: escaped in the glob */
        snprintf(json, sizeof json,
                 POD_HEAD OPT_IN
                 "%s}},\"spec\":{"
                 "\"containers\":[{\"name\":\"app\",\"image\":\"x\","
                 "\"volumeMounts\":[{\"name\":\"cfg\",\"mountPath\":\"/etc/a[p]p\"},"
                 "{\"name\":\"tls\",\"mountPath\":\"/etc/a[p]p/tls\"}]}],"
                 "\"volumes\":[{\"name\":\"cfg\",\"configMap\":{\"name\":\"app\"}},"
                 "{\"name\":\"tls\",\"secret\":{\"secretName\":\"tls\"}}]}}",
                 T[i].annots);
        cJSON *pod = inject_pod(json, NULL, &r);
        if (r.outcome != INJECT_INJECTED) print_error("case %zu: %s\n", i, r.reason);
        assert_int_equal(r.outcome, INJECT_INJECTED);
        const cJSON *side = find_sidecar(pod);
        assert_true(has_arg(side, "--ignore=/etc/a\\[p]p/tls/..*"));
        assert_false(has_arg(side, "--ignore=/etc/a\\[p]p/..*"));
        int warned = 0;
        for (size_t w = 0; w < r.nwarnings; w++)
            warned |=
                strstr(r.warnings[w], "reload-agent.io/ignore replaces the injected") != NULL &&
                strstr(r.warnings[w], "/etc/a\\[p]p/tls/..*") != NULL;
        if (warned != T[i].warned) print_error("case %zu: warned %d\n", i, warned);
        assert_int_equal(warned, T[i].warned);
        inject_result_free(&r);
        cJSON_Delete(pod);
    }

    /* reinvocation: a volume added later inside a mirrored one */
    char json[2048];
    struct inject_result r;
    snprintf(json, sizeof json, POD_HEAD OPT_IN "}},\"spec\":{" NESTED_SPEC("", "") "}}");
    cJSON *pod = inject_pod(json, NULL, &r);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    inject_result_free(&r);
    cJSON *c0 =
        cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "containers"), 0);
    cJSON *m = cJSON_Parse("{\"name\":\"ca\",\"mountPath\":\"/etc/app/ca\"}");
    cJSON *v = cJSON_Parse("{\"name\":\"ca\",\"configMap\":{\"name\":\"ca\"}}");
    cJSON_AddItemToArray(cJSON_GetObjectItem(c0, "volumeMounts"), m);
    cJSON_AddItemToArray(cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "volumes"), v);
    char err[256];
    struct inject_opts o = {.admission = 1};
    assert_int_equal(inject_object(pod, &o, &r, err, sizeof err), 0);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    assert_int_equal(jsonpatch_apply(&pod, r.ops, err, sizeof err), 0);
    const cJSON *side = find_sidecar(pod);
    assert_true(has_arg(side, "--watch=/etc/app/ca"));
    assert_true(has_arg(side, "--ignore=/etc/app/ca/..*"));
    int n = 0;
    const cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItem(side, "args")) n +=
        strcmp(a->valuestring, "--ignore=/etc/app/tls/..*") == 0;
    assert_int_equal(n, 1); /* the first injection's, not added again */
    inject_result_free(&r);
    cJSON_Delete(pod);
}

/* The injector-only keys and the agent's own options are accepted. */
static void test_good_annotations_accepted(void **state)
{
    (void)state;
    struct inject_result r;
    char json[2048];
    snprintf(json, sizeof json,
             POD_HEAD OPT_IN ",\"reload-agent.io/config-hash\":\"abc\",\"reload-agent.io/"
                             "sidecar-memory-limit\":\"1Gi\",\"reload-agent.io/sidecar-memory-"
                             "request\":\"1e8\",\"reload-agent.io/sidecar-cpu-request\":\"0.5\","
                             "\"reload-agent.io/debounce\":\"1s\",\"other.io/x\":\"y\"}},"
                             "\"spec\":{" APP_CM "}}");
    cJSON *pod = inject_pod(json, NULL, &r);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    const cJSON *res = cJSON_GetObjectItem(find_sidecar(pod), "resources");
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(res, "requests"), "memory")->valuestring, "1e8");
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(res, "requests"), "cpu")->valuestring, "0.5");
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(res, "limits"), "memory")->valuestring, "1Gi");
    inject_result_free(&r);
    cJSON_Delete(pod);
}

/* The app container for the UID: kubectl.kubernetes.io/default-container. */
static void test_default_container_uid(void **state)
{
    (void)state;
    struct inject_result r;
    const char *json =
        POD_HEAD OPT_IN ",\"kubectl.kubernetes.io/default-container\":\"web\","
                        "\"reload-agent.io/action\":\"signal\",\"reload-agent.io/process\":"
                        "\"nginx\"}},\"spec\":{\"securityContext\":{\"runAsUser\":1000,"
                        "\"runAsGroup\":3000},\"containers\":[{\"name\":\"log\",\"image\":\"x\","
                        "\"securityContext\":{\"runAsUser\":7}},{\"name\":\"web\",\"image\":\"y\","
                        "\"securityContext\":{\"runAsUser\":101},\"volumeMounts\":[{\"name\":"
                        "\"cfg\",\"mountPath\":\"/etc/nginx\"}]}],\"volumes\":[{\"name\":\"cfg\","
                        "\"configMap\":{\"name\":\"nginx\"}}]}}";
    cJSON *pod = inject_pod(json, NULL, &r);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    const cJSON *sc = cJSON_GetObjectItem(find_sidecar(pod), "securityContext");
    assert_int_equal(cJSON_GetObjectItem(sc, "runAsUser")->valueint, 101);
    assert_int_equal(cJSON_GetObjectItem(sc, "runAsGroup")->valueint, 3000);
    assert_true(cJSON_IsTrue(
        cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "shareProcessNamespace")));
    assert_int_equal(r.nwarnings, 0);
    inject_result_free(&r);
    cJSON_Delete(pod);
}

/* A status annotation the injector did not write is not trusted. */
static void test_status_without_container(void **state)
{
    (void)state;
    struct inject_result r;
    char err[256];
    assert_int_equal(inject_text(POD_HEAD OPT_IN ",\"reload-agent.io/inject-status\":\"{}\"}},"
                                                 "\"spec\":{" APP_CM "}}",
                                 NULL, &r, err, sizeof err),
                     0);
    assert_int_equal(r.outcome, INJECT_SKIPPED);
    assert_non_null(strstr(r.reason, "no reload-agent container"));
    inject_result_free(&r);
    assert_int_equal(inject_text(POD_HEAD OPT_IN
                                 ",\"reload-agent.io/inject-status\":\"[\"}},"
                                 "\"spec\":{\"initContainers\":[{\"name\":"
                                 "\"reload-agent\",\"restartPolicy\":\"Always\"}]," APP_CM "}}",
                                 NULL, &r, err, sizeof err),
                     0);
    assert_int_equal(r.outcome, INJECT_SKIPPED);
    assert_non_null(strstr(r.reason, "not the JSON object reload-agent writes"));
    inject_result_free(&r);
}

/* Operations are deterministic: the same input gives the same bytes. */
static void test_deterministic(void **state)
{
    (void)state;
    const char *json = POD_HEAD OPT_IN "}},\"spec\":{" APP_CM "}}";
    char *first = NULL;
    for (int i = 0; i < 3; i++) {
        struct inject_result r;
        char err[256];
        assert_int_equal(inject_text(json, NULL, &r, err, sizeof err), 0);
        char *s = cJSON_PrintUnformatted(r.ops);
        if (first)
            assert_string_equal(first, s);
        else
            first = strdup(s);
        cJSON_free(s);
        inject_result_free(&r);
    }
    free(first);
}

/* Reasons and warnings quote names from the input: each stays one line of
 * valid UTF-8 (found by fuzz_transform: an apiVersion holding a newline). */
static void test_messages_are_one_line(void **state)
{
    (void)state;
    struct inject_result r;
    char err[256];
    assert_int_equal(inject_text("{\"apiVersion\":\"apps\\nv1\",\"kind\":\"Deployment\"}", NULL, &r,
                                 err, sizeof err),
                     0);
    assert_int_equal(r.outcome, INJECT_NOT_WORKLOAD);
    assert_string_equal(r.reason, "Deployment apps\\x0av1 is not a workload with a pod template");
    inject_result_free(&r);
    /* a subPath warning naming a container with a tab and a bad byte */
    cJSON *pod =
        inject_pod(POD_HEAD OPT_IN "}},\"spec\":{\"containers\":[{\"name\":\"a\\tb\\u00e9\","
                                   "\"volumeMounts\":[{\"name\":\"cfg\",\"mountPath\":\"/x\","
                                   "\"subPath\":\"k\"},{\"name\":\"cfg\",\"mountPath\":"
                                   "\"/etc/app\"}]}],\"volumes\":[{\"name\":\"cfg\","
                                   "\"configMap\":{\"name\":\"app\"}}]}}",
                   NULL, &r);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    assert_int_equal(r.nwarnings, 1);
    assert_string_equal(r.warnings[0],
                        "container a\\x09b\xc3\xa9 mounts volume cfg with subPath at "
                        "/x: subPath mounts never update");
    inject_result_free(&r);
    cJSON_Delete(pod);
    /* an error naming an annotation key with a newline */
    assert_int_equal(inject_text(POD_HEAD "\"reload-agent.io/a\\nb\":1}},\"spec\":{}}", NULL, &r,
                                 err, sizeof err),
                     -EINVAL);
    assert_string_equal(err, "metadata.annotations[reload-agent.io/a\\x0ab]: want a string, got a "
                             "number");
}

/* Out of memory (tests/oomwrap.h: libc's allocators wrapped, cJSON's and
 * the transform's own alike), on every golden case: with every allocation
 * from the n-th on failing, for n = 0, 1, ... until a run needs fewer
 * than n, each run that met a failure returns -ENOMEM with "out of
 * memory" and owns nothing, and the last one gives what the case gives
 * without a limit (outcome and operations); under ASan (make asan)
 * nothing leaks. */
static void test_out_of_memory(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        const struct gcase *c = &CASES[k];
        char path[512], err[256];
        snprintf(path, sizeof path, "%s/%s.in.json", golden_dir(), c->name);
        char *text = read_text(path);
        assert_non_null(text);
        cJSON *in = cJSON_Parse(text);
        free(text);
        assert_non_null(in);
        struct inject_opts opts = {.admission = c->admission,
                                   .all = c->all,
                                   .image = c->image,
                                   .kube_minor = case_kube_minor(c)};
        struct inject_result want, r;
        assert_int_equal(inject_object(in, &opts, &want, err, sizeof err), 0);
        long n = 0;
        for (;; n++) {
            oom_fail_from(n);
            int rc = inject_object(in, &opts, &r, err, sizeof err);
            int failed = oom_failed();
            oom_off();
            if (!failed) { /* the whole run fitted in n allocations */
                assert_int_equal(rc, 0);
                assert_int_equal(r.outcome, want.outcome);
                assert_true(cJSON_Compare(r.ops, want.ops, 1));
                inject_result_free(&r);
                break;
            }
            if (rc != -ENOMEM)
                fail_msg("%s, allocation %ld and later failing: rc %d (outcome %d, %s)", c->name, n,
                         rc, r.outcome, r.reason);
            assert_string_equal(err, "out of memory");
            assert_null(r.ops);
            assert_null(r.warnings);
            inject_result_free(&r);
        }
        if (want.outcome == INJECT_INJECTED && n < 50)
            fail_msg("%s: only %ld allocations", c->name, n);
        inject_result_free(&want);
        cJSON_Delete(in);
    }
}

/* Refused or adjusted before the API server would reject the pod. */
static void test_pods_the_api_server_would_reject(void **state)
{
    (void)state;
    struct inject_result r;
    char err[256];
    assert_int_equal(inject_text(POD_HEAD OPT_IN
                                 "}},\"spec\":{\"os\":{\"name\":\"windows\"}," APP_CM "}}",
                                 NULL, &r, err, sizeof err),
                     0);
    assert_int_equal(r.outcome, INJECT_SKIPPED);
    assert_string_equal(r.reason,
                        "windows pods are not injected (spec.os.name): the agent runs on Linux");
    inject_result_free(&r);
    /* spec.os.name linux is fine; a mountPath with $( would be expanded in args */
    cJSON *pod =
        inject_pod(POD_HEAD OPT_IN "}},\"spec\":{\"os\":{\"name\":\"linux\"},"
                                   "\"containers\":[{\"name\":\"app\",\"volumeMounts\":[{"
                                   "\"name\":\"cfg\",\"mountPath\":\"/etc/$(HOME)\"},{\"name\":"
                                   "\"Bad_Name\",\"mountPath\":\"/s\"}]}],"
                                   "\"volumes\":[{\"name\":\"cfg\",\"configMap\":{}},{"
                                   "\"name\":\"Bad_Name\",\"secret\":{}}]}}",
                   NULL, &r);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    assert_true(has_arg(find_sidecar(pod), "--watch=/reload-agent/volumes/cfg"));
    assert_int_equal(r.nwarnings, 2);
    assert_string_equal(r.warnings[0], "volume cfg: /etc/$(HOME) holds $( (args expand "
                                       "it); mirrored at /reload-agent/volumes/cfg");
    assert_string_equal(r.warnings[1], "volume name \"Bad_Name\" is not a DNS label: not watched");
    inject_result_free(&r);
    cJSON_Delete(pod);
    /* a volume name given twice (the API server rejects it): mirrored once */
    pod = inject_pod(POD_HEAD OPT_IN
                     "}},\"spec\":{\"containers\":[{\"name\":\"app\",\"volumeMounts\":"
                     "[{\"name\":\"cfg\",\"mountPath\":\"/a\"},{\"name\":\"cfg\","
                     "\"mountPath\":\"/b\"}]}],\"volumes\":[{\"name\":\"cfg\","
                     "\"configMap\":{}},{\"name\":\"cfg\",\"secret\":{}}]}}",
                     NULL, &r);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    /* /a once, the annotations file and the state directory */
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(find_sidecar(pod), "volumeMounts")), 3);
    assert_true(has_arg(find_sidecar(pod), "--watch=/a"));
    inject_result_free(&r);
    cJSON_Delete(pod);
}

static const cJSON *sidecar_mount(const cJSON *side, const char *path)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(side, "volumeMounts"))
    {
        if (strcmp(cJSON_GetObjectItem(m, "mountPath")->valuestring, path) == 0) return m;
    }
    return NULL;
}

#define TOKEN_MOUNT                                                                                \
    "{\"name\":\"kube-api-access-abcde\",\"readOnly\":true,\"mountPath\":"                         \
    "\"/var/run/secrets/kubernetes.io/serviceaccount\"}"
#define TOKEN_VOLUME                                                                               \
    "{\"name\":\"kube-api-access-abcde\",\"projected\":{\"sources\":[{"                            \
    "\"serviceAccountToken\":{\"path\":\"token\"}}]}}"

/* Who gets the token, and --events=false, in each mode. */
static void test_api_access(void **state)
{
    (void)state;
    static const struct {
        const char *annots;
        int admission, token, automount_false;
        int want_token, want_events_off;
        const char *warning; /* NULL: none */
    } T[] = {
        /* admission: Events asked for, token there: copied */
        {",\"reload-agent.io/events\":\"true\"", 1, 1, 0, 1, 0, NULL},
        /* admission: Events asked for, no token: warned, off */
        {",\"reload-agent.io/events\":\"true\"", 1, 0, 0, 0, 1,
         "Events need the Kubernetes API, but container app has no token mount: Events are off"},
        /* admission: nothing needs the API: no token, Events off */
        {"", 1, 1, 0, 0, 1, NULL},
        /* admission: events explicitly false, rollout: the token still goes in */
        {",\"reload-agent.io/events\":\"false\",\"reload-agent.io/action\":\"rollout\"", 1, 1, 0, 1,
         0, NULL},
        /* CLI: the ServiceAccount plugin mounts the token at pod creation */
        {",\"reload-agent.io/action\":\"rollout\"", 0, 0, 0, 0, 0, NULL},
        /* CLI: ... unless automountServiceAccountToken is false: Events go off */
        {",\"reload-agent.io/events\":\"true\"", 0, 0, 1, 0, 0,
         "Events need the Kubernetes API, but container app has no token mount "
         "(automountServiceAccountToken is false): Events are off"},
        /* CLI: automountServiceAccountToken false, the app mounts a token itself: copied */
        {",\"reload-agent.io/action\":\"rollout\"", 0, 1, 1, 1, 0, NULL},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        char json[2048];
        snprintf(json, sizeof json,
                 POD_HEAD OPT_IN
                 "%s},\"ownerReferences\":[{\"kind\":\"ReplicaSet\",\"name\":\"r\","
                 "\"controller\":true}]},\"spec\":{%s\"containers\":[{\"name\":\"app\","
                 "\"volumeMounts\":[{\"name\":\"cfg\",\"mountPath\":\"/etc/app\"}%s%s]}],"
                 "\"volumes\":[{\"name\":\"cfg\",\"configMap\":{}}%s%s]}}",
                 T[i].annots, T[i].automount_false ? "\"automountServiceAccountToken\":false," : "",
                 T[i].token ? "," : "", T[i].token ? TOKEN_MOUNT : "", T[i].token ? "," : "",
                 T[i].token ? TOKEN_VOLUME : "");
        struct inject_opts o = {.admission = T[i].admission};
        struct inject_result r;
        cJSON *pod = inject_pod(json, &o, &r);
        if (r.outcome != INJECT_INJECTED) print_error("case %zu: %s\n", i, r.reason);
        assert_int_equal(r.outcome, INJECT_INJECTED);
        const cJSON *side = find_sidecar(pod);
        const cJSON *tm = sidecar_mount(side, "/var/run/secrets/kubernetes.io/serviceaccount");
        if ((tm != NULL) != T[i].want_token) print_error("case %zu: token %p\n", i, (void *)tm);
        assert_int_equal(tm != NULL, T[i].want_token);
        if (tm)
            assert_string_equal(cJSON_GetObjectItem(tm, "name")->valuestring,
                                "kube-api-access-abcde");
        assert_int_equal(has_arg(side, "--events=false"), T[i].want_events_off);
        assert_int_equal(r.nwarnings, T[i].warning ? 1 : 0);
        if (T[i].warning) assert_string_equal(r.warnings[0], T[i].warning);
        inject_result_free(&r);
        cJSON_Delete(pod);
    }
}

/* 1 if a warning of r holds needle. */
static int warned(const struct inject_result *r, const char *needle)
{
    for (size_t i = 0; i < r->nwarnings; i++)
        if (strstr(r->warnings[i], needle)) return 1;
    return 0;
}

/* Issue 16.3 and 16.4: mount paths are compared and written cleaned, as
 * the container runtime reads them: an unclean path on the sidecar's own
 * mounts, or on another mirror, is taken (so the sidecar never mounts two
 * volumes on one directory), the warning says by what, and a nested
 * mirror written with "/./" or "//" gets the clean path and the --ignore
 * glob of it, which is what the agent walks. */
static void test_mount_paths_are_cleaned(void **state)
{
    (void)state;
    static const struct {
        const char *path, *mirror, *warning;
    } T[] = {
        {"/etc/./podinfo", "/reload-agent/volumes/v",
         "volume v: /etc/./podinfo is taken by the sidecar's /etc/podinfo"},
        {"/srv/../reload-agent/env/configmap/x", "/reload-agent/volumes/v",
         "is taken by the sidecar's /reload-agent"},
        {"/etc/conf/..", "/reload-agent/volumes/v",
         "volume v: /etc/conf/.. is taken by the "
         "sidecar's /etc/podinfo"},
        {"//etc//app/", "/reload-agent/volumes/v", "volume v: //etc//app/ is taken by volume cfg"},
        {"/etc/app/./tls", "/etc/app/tls", "volume v: mountPath /etc/app/./tls is /etc/app/tls"},
        {"/etc/app//tls/", "/etc/app/tls", "is /etc/app/tls once cleaned"},
        {"/etc/app/x/../tls", "/etc/app/tls", "is /etc/app/tls once cleaned"},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        char json[2048];
        struct inject_result r;
        snprintf(json, sizeof json,
                 POD_HEAD OPT_IN "}},\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":\"x\","
                                 "\"volumeMounts\":[{\"name\":\"cfg\",\"mountPath\":\"/etc/app\"},"
                                 "{\"name\":\"v\",\"mountPath\":\"%s\"}]}],"
                                 "\"volumes\":[{\"name\":\"cfg\",\"configMap\":{\"name\":\"a\"}},"
                                 "{\"name\":\"v\",\"secret\":{\"secretName\":\"s\"}}]}}",
                 T[i].path);
        cJSON *pod = inject_pod(json, NULL, &r);
        assert_int_equal(r.outcome, INJECT_INJECTED);
        const cJSON *side = find_sidecar(pod);
        char arg[128];
        snprintf(arg, sizeof arg, "--watch=%s", T[i].mirror);
        if (!sidecar_mount(side, T[i].mirror) || !has_arg(side, arg) || !warned(&r, T[i].warning))
            print_error("case %zu (%s): want the mirror at %s and a warning \"%s\"\n", i, T[i].path,
                        T[i].mirror, T[i].warning);
        assert_non_null(sidecar_mount(side, T[i].mirror));
        assert_true(has_arg(side, arg));
        assert_true(warned(&r, T[i].warning));
        /* nested in /etc/app: the glob of the clean path */
        int nested = strcmp(T[i].mirror, "/etc/app/tls") == 0;
        assert_int_equal(has_arg(side, "--ignore=/etc/app/tls/..*"), nested);
        /* no two mounts of the sidecar on one directory, none unclean */
        const cJSON *m, *m2;
        cJSON_ArrayForEach(m, cJSON_GetObjectItem(side, "volumeMounts"))
        {
            const char *mp = cJSON_GetObjectItem(m, "mountPath")->valuestring;
            assert_null(strstr(mp, "/."));
            assert_null(strstr(mp, "//"));
            cJSON_ArrayForEach(m2, cJSON_GetObjectItem(side, "volumeMounts")) if (m2 != m)
                assert_string_not_equal(mp, cJSON_GetObjectItem(m2, "mountPath")->valuestring);
        }
        inject_result_free(&r);
        cJSON_Delete(pod);
    }
}

/* inject_clean_path is Go's path.Clean. */
static void test_clean_path(void **state)
{
    (void)state;
    static const char *const T[][2] = {
        {"/", "/"},
        {"//", "/"},
        {"/..", "/"},
        {"/../a", "/a"},
        {"/a/b/../..", "/"},
        {"/a/./b//c/", "/a/b/c"},
        {"a/..", "."},
        {"", "."},
        {"../a/..", ".."},
        {"./a/", "a"},
        {"a/../../b", "../b"},
        {"/etc/conf/..", "/etc"},
        {"/a/b/../c/./d", "/a/c/d"},
        {"/x$(Y)/z", "/x$(Y)/z"},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        char *c = inject_clean_path(T[i][0]);
        assert_non_null(c);
        if (strcmp(c, T[i][1]) != 0) print_error("\"%s\": got \"%s\"\n", T[i][0], c);
        assert_string_equal(c, T[i][1]);
        assert_int_equal(inject_is_clean_path(T[i][0]), strcmp(T[i][0], T[i][1]) == 0);
        free(c);
    }
}

/* Issue 16.5: a sidecar that would exit 2 is never injected. With
 * automountServiceAccountToken: false no token reaches the sidecar at pod
 * creation; rollout (asked for, or the env volumes' default env-action)
 * cannot start without one: refused with the reason, as at admission,
 * unless the app mounts a token itself (copied, test_api_access). */
static void test_rollout_without_a_token_is_refused(void **state)
{
    (void)state;
    static const char *const T[] = {
        /* asked for */
        POD_HEAD OPT_IN ",\"reload-agent.io/action\":\"rollout\"}},\"spec\":{"
                        "\"automountServiceAccountToken\":false," APP_CM "}}",
        /* the env volumes' default env-action */
        POD_HEAD OPT_IN "}},\"spec\":{\"automountServiceAccountToken\":false,\"containers\":["
                        "{\"name\":\"app\",\"envFrom\":[{\"configMapRef\":{\"name\":\"env\"}}]}]}}",
    };
    for (int admission = 0; admission < 2; admission++)
        for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
            struct inject_opts o = {.admission = admission};
            struct inject_result r;
            cJSON *pod = inject_pod(T[i], &o, &r);
            if (r.outcome != INJECT_SKIPPED)
                print_error("case %zu, admission %d: not refused\n", i, admission);
            assert_int_equal(r.outcome, INJECT_SKIPPED);
            assert_int_equal(cJSON_GetArraySize(r.ops), 0);
            if (!strstr(r.reason, "rollout needs the Kubernetes API, but container app has no "
                                  "service-account token mount to copy"))
                print_error("reason: %s\n", r.reason);
            assert_non_null(strstr(r.reason, "rollout needs the Kubernetes API"));
            if (!admission)
                assert_non_null(strstr(r.reason, "(automountServiceAccountToken is false)"));
            inject_result_free(&r);
            cJSON_Delete(pod);
        }
}

/* Issue 16.7: a pod that can only run on another OS, by spec.os.name, by
 * nodeSelector kubernetes.io/os or by a required node affinity every term
 * of which excludes linux, is refused with the field in the reason. */
static void test_other_os_is_refused(void **state)
{
    (void)state;
#define AFF(terms)                                                                                 \
    "\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"         \
    "\"nodeSelectorTerms\":[" terms "]}}},"
#define OS_IN(v)                                                                                   \
    "{\"matchExpressions\":[{\"key\":\"kubernetes.io/os\",\"operator\":\"In\",\"values\":[" v "]}" \
    "]}"
    static const struct {
        const char *spec;   /* members before "containers" */
        const char *reason; /* NULL: injected */
    } T[] = {
        {"\"os\":{\"name\":\"windows\"},", "windows pods are not injected (spec.os.name)"},
        {"\"nodeSelector\":{\"kubernetes.io/os\":\"windows\"},",
         "windows pods are not injected (nodeSelector kubernetes.io/os): the agent runs on Linux"},
        {"\"nodeSelector\":{\"beta.kubernetes.io/os\":\"windows\"},",
         "windows pods are not injected (nodeSelector beta.kubernetes.io/os)"},
        {"\"nodeSelector\":{\"kubernetes.io/os\":\"linux\",\"disk\":\"ssd\"},", NULL},
        {AFF(OS_IN("\"windows\"")),
         "windows pods are not injected (required node affinity on kubernetes.io/os)"},
        {AFF(OS_IN("\"windows\"") "," OS_IN("\"windows\",\"linux\"")), NULL},
        {AFF("{\"matchExpressions\":[{\"key\":\"kubernetes.io/os\",\"operator\":\"NotIn\","
             "\"values\":[\"linux\"]}]}"),
         "non-linux pods are not injected (required node affinity"},
        {AFF("{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"a\"]}]}"),
         NULL},
        {"\"affinity\":{\"nodeAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[]}}"
         ",",
         NULL},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        char json[2048];
        struct inject_result r;
        snprintf(json, sizeof json, POD_HEAD OPT_IN "}},\"spec\":{%s" APP_CM "}}", T[i].spec);
        cJSON *pod = inject_pod(json, NULL, &r);
        if (T[i].reason && (r.outcome != INJECT_SKIPPED || !strstr(r.reason, T[i].reason)))
            print_error("case %zu: outcome %d, reason \"%s\"\n", i, r.outcome, r.reason);
        assert_int_equal(r.outcome, T[i].reason ? INJECT_SKIPPED : INJECT_INJECTED);
        if (T[i].reason) assert_non_null(strstr(r.reason, T[i].reason));
        inject_result_free(&r);
        cJSON_Delete(pod);
    }
    expect_einval(POD_HEAD OPT_IN "}},\"spec\":{\"nodeSelector\":[]," APP_CM "}}",
                  "spec.nodeSelector: want an object, got an array");
    expect_einval(POD_HEAD OPT_IN "}},\"spec\":{" AFF("{\"matchExpressions\":{}}") APP_CM "}}",
                  "nodeSelectorTerms[0].matchExpressions: want an array");
#undef AFF
#undef OS_IN
}

/* Issue 16.9: a mirrored volume whose files the non-root sidecar cannot
 * read (owned by root, no read for others, no fsGroup) is warned about at
 * injection (the agent would fail with Permission denied at every try). */
static void test_unreadable_modes_warned(void **state)
{
    (void)state;
    static const struct {
        const char *psc, *vol; /* the pod's securityContext members, the volume's source */
        long mode;             /* the warned mode, -1: none */
    } T[] = {
        {"", "\"secret\":{\"secretName\":\"s\",\"defaultMode\":256}", 0400},
        {"", "\"secret\":{\"secretName\":\"s\",\"defaultMode\":288}", 0440},
        {"\"runAsGroup\":0", "\"secret\":{\"secretName\":\"s\",\"defaultMode\":288}", -1},
        {"\"fsGroup\":2000", "\"secret\":{\"secretName\":\"s\",\"defaultMode\":256}", -1},
        {"", "\"secret\":{\"secretName\":\"s\"}", -1},
        {"", "\"configMap\":{\"name\":\"c\",\"defaultMode\":292}", -1},
        {"",
         "\"configMap\":{\"name\":\"c\",\"items\":[{\"key\":\"a\",\"path\":\"a\"},{\"key\":"
         "\"b\",\"path\":\"b\",\"mode\":384}]}",
         0600},
        {"",
         "\"secret\":{\"secretName\":\"s\",\"defaultMode\":256,\"items\":[{\"key\":\"a\","
         "\"path\":\"a\",\"mode\":292}]}",
         -1},
        {"", "\"projected\":{\"defaultMode\":256,\"sources\":[{\"secret\":{\"name\":\"s\"}}]}",
         0400},
        {"",
         "\"projected\":{\"sources\":[{\"configMap\":{\"name\":\"c\",\"items\":[{\"key\":\"a\","
         "\"path\":\"a\",\"mode\":256}]}}]}",
         0400},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        char json[2048], want[128];
        struct inject_result r;
        snprintf(json, sizeof json,
                 POD_HEAD OPT_IN
                 "}},\"spec\":{\"securityContext\":{%s},\"containers\":[{\"name\":"
                 "\"app\",\"volumeMounts\":[{\"name\":\"v\",\"mountPath\":\"/v\"}]}],"
                 "\"volumes\":[{\"name\":\"v\",%s}]}}",
                 T[i].psc, T[i].vol);
        cJSON *pod = inject_pod(json, NULL, &r);
        assert_int_equal(r.outcome, INJECT_INJECTED);
        snprintf(want, sizeof want,
                 "volume v: files of mode %04lo owned by root; the sidecar "
                 "cannot read them: set the pod's fsGroup or mode 0444",
                 T[i].mode);
        int got = warned(&r, "owned by root");
        if (got != (T[i].mode >= 0) || (got && !warned(&r, want)))
            print_error("case %zu: warnings %zu, first \"%s\"\n", i, r.nwarnings,
                        r.nwarnings ? r.warnings[0] : "");
        assert_int_equal(got, T[i].mode >= 0);
        if (got) assert_true(warned(&r, want));
        inject_result_free(&r);
        cJSON_Delete(pod);
    }
    expect_einval(POD_HEAD OPT_IN
                  "}},\"spec\":{\"containers\":[{\"name\":\"app\",\"volumeMounts\":"
                  "[{\"name\":\"v\",\"mountPath\":\"/v\"}]}],\"volumes\":[{\"name\":"
                  "\"v\",\"secret\":{\"defaultMode\":\"0400\"}}]}}",
                  "spec.volumes[0].secret.defaultMode: want an integer");
}

/* Appends printf output to a growing string. */
static void cat(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void cat(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(*buf + *len, *cap - *len, fmt, ap);
        va_end(ap);
        assert_true(n >= 0);
        if ((size_t)n < *cap - *len) {
            *len += (size_t)n;
            return;
        }
        *cap = 2 * *cap + (size_t)n;
        *buf = realloc(*buf, *cap);
        assert_non_null(*buf);
    }
}

/* A pod with nvol ConfigMap volumes, each mounted (v1, v11, v21, ...
 * inside the one before it), and nenv env references to nobj objects. */
static char *big_pod(size_t nvol, size_t nenv, size_t nobj)
{
    size_t len = 0, cap = 4096;
    char *b = malloc(cap);
    assert_non_null(b);
    cat(&b, &len, &cap,
        POD_HEAD OPT_IN ",\"reload-agent.io/env-action\":\"none\"}},\"spec\":{"
                        "\"containers\":[{\"name\":\"app\",\"env\":[");
    for (size_t i = 0; i < nenv; i++)
        cat(&b, &len, &cap,
            "%s{\"name\":\"E%zu\",\"valueFrom\":{\"configMapKeyRef\":{\"name\":\"o%zu\",\"key\":"
            "\"k%zu\"}}}",
            i ? "," : "", i, i % nobj, i % 7);
    cat(&b, &len, &cap, "],\"volumeMounts\":[");
    for (size_t i = 0; i < nvol; i++)
        cat(&b, &len, &cap, "%s{\"name\":\"v%zu\",\"mountPath\":\"/etc/v%zu%s\"}", i ? "," : "", i,
            i % 10 == 1 ? i - 1 : i, i % 10 == 1 ? "/in" : "");
    cat(&b, &len, &cap, "]}],\"volumes\":[");
    for (size_t i = 0; i < nvol; i++)
        cat(&b, &len, &cap, "%s{\"name\":\"v%zu\",\"configMap\":{\"name\":\"c%zu\"}}", i ? "," : "",
            i, i);
    cat(&b, &len, &cap, "]}}");
    return b;
}

/* Issue 16.14: thousands of volumes and env references are planned by
 * name lookups (the review took seconds, quadratic in the volume count,
 * on the webhook's loop: make bench measures it); the result at that scale
 * is right, and past INJECT_MAX_WATCHED the pod is not injected (the
 * sidecar would make it too large to store). */
static void test_many_volumes(void **state)
{
    (void)state;
    char *json = big_pod(1000, 700, 100);
    struct inject_result r;
    cJSON *pod = inject_pod(json, NULL, &r);
    free(json);
    if (r.outcome != INJECT_INJECTED) print_error("%s\n", r.reason);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    const cJSON *side = find_sidecar(pod), *a;
    size_t watch = 0, ignore = 0, env = 0;
    cJSON_ArrayForEach(a, cJSON_GetObjectItem(side, "args"))
    {
        watch += strncmp(a->valuestring, "--watch=/etc/v", 14) == 0;
        ignore += strncmp(a->valuestring, "--ignore=/etc/v", 15) == 0;
        env += strncmp(a->valuestring, "--env-watch=", 12) == 0;
    }
    assert_int_equal(watch, 1000);
    assert_int_equal(ignore, 100); /* each "/etc/vN/in" inside "/etc/vN" */
    assert_int_equal(env, 100);
    assert_true(has_arg(side, "--ignore=/etc/v990/in/..*"));
    assert_false(has_arg(side, "--ignore=/etc/v10/..*"));
    /* each object's keys once, sorted: o0 is read 7 times, for k0..k6 */
    const cJSON *v, *o0 = NULL;
    cJSON_ArrayForEach(v, cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "volumes"))
    {
        if (strcmp(cJSON_GetObjectItem(v, "name")->valuestring, "reload-agent-env-cm-o0") == 0)
            o0 = v;
    }
    assert_non_null(o0);
    char *items =
        cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetObjectItem(o0, "configMap"), "items"));
    assert_string_equal(items, "[{\"key\":\"k0\",\"path\":\"k0\"},{\"key\":\"k1\",\"path\":\"k1\"},"
                               "{\"key\":\"k2\",\"path\":\"k2\"},{\"key\":\"k3\",\"path\":\"k3\"},"
                               "{\"key\":\"k4\",\"path\":\"k4\"},{\"key\":\"k5\",\"path\":\"k5\"},"
                               "{\"key\":\"k6\",\"path\":\"k6\"}]");
    free(items);
    inject_result_free(&r);
    cJSON_Delete(pod);

    json = big_pod(20000, 0, 1);
    pod = inject_pod(json, NULL, &r);
    free(json);
    assert_int_equal(r.outcome, INJECT_SKIPPED);
    assert_string_equal(r.reason, "20000 volumes, env sources and keys to watch, more than 2000: "
                                  "not injected (the sidecar would make the pod too large)");
    inject_result_free(&r);
    cJSON_Delete(pod);
}

/* Issue 16.13: "nothing to watch" says why when the app mounts a ConfigMap
 * only through subPath, or only a token projected volume. */
static void test_nothing_to_watch_says_why(void **state)
{
    (void)state;
    static const struct {
        const char *mounts, *volumes, *reason;
    } T[] = {
        {"{\"name\":\"cfg\",\"mountPath\":\"/etc/a.conf\",\"subPath\":\"a.conf\"}",
         "{\"name\":\"cfg\",\"configMap\":{\"name\":\"a\"}}",
         "nothing to watch: volume cfg is mounted only with subPath (at /etc/a.conf), and subPath "
         "mounts never update: mount the whole volume"},
        {"{\"name\":\"tok\",\"mountPath\":\"/var/run/tok\"}",
         "{\"name\":\"tok\",\"projected\":{\"sources\":[{\"serviceAccountToken\":{\"path\":\"t\"}}]"
         "}}",
         "nothing to watch: projected volume tok holds a service-account token, which is never "
         "watched (it rotates hourly)"},
        {"{\"name\":\"e\",\"mountPath\":\"/tmp\"}", "{\"name\":\"e\",\"emptyDir\":{}}",
         "nothing to watch: the app mounts no ConfigMap, Secret or projected volume and reads none "
         "through env"},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        char json[2048];
        struct inject_result r;
        snprintf(json, sizeof json,
                 POD_HEAD OPT_IN "}},\"spec\":{\"containers\":[{\"name\":\"app\",\"volumeMounts\":"
                                 "[%s]}],\"volumes\":[%s]}}",
                 T[i].mounts, T[i].volumes);
        cJSON *pod = inject_pod(json, NULL, &r);
        assert_int_equal(r.outcome, INJECT_SKIPPED);
        assert_string_equal(r.reason, T[i].reason);
        inject_result_free(&r);
        cJSON_Delete(pod);
    }
}

/* Issue 26: what safe reload cannot set up is refused, saying why. */
static void test_safe_reload_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *annots, *spec, *reason;
    } T[] = {
        {",\"reload-agent.io/keep-last-good\":\"yes\"", APP_CM,
         "invalid reload-agent.io/keep-last-good \"yes\": want \"true\" or \"false\""},
        {",\"reload-agent.io/keep-last-good\":\"true\",\"reload-agent.io/dry-run\":\"true\"",
         APP_CM,
         "keep-last-good with dry-run: the agent fills no copy, and the app would find its "
         "configuration directories empty"},
        {",\"reload-agent.io/validate\":\"app -t\",\"kubectl.kubernetes.io/default-container\":"
         "\"nope\"",
         APP_CM,
         "validate: the validator runs the app's image, and annotation "
         "kubectl.kubernetes.io/default-container names \"nope\", which is no container of the "
         "pod"},
        {",\"reload-agent.io/verify\":\"check-it\"",
         "\"containers\":[{\"name\":\"app\",\"volumeMounts\":[{\"name\":\"cfg\",\"mountPath\":"
         "\"/etc/app\"}]}],\"volumes\":[{\"name\":\"cfg\",\"configMap\":{\"name\":\"app\"}}]",
         "a command verify: the validator runs the app's image, and container app has none"},
        {",\"reload-agent.io/keep-last-good\":\"true\"",
         "\"containers\":[{\"name\":\"app\",\"image\":\"x\",\"env\":[{\"name\":\"A\",\"valueFrom\":"
         "{\"configMapKeyRef\":{\"name\":\"e\",\"key\":\"a\"}}}]}]",
         "keep-last-good: no ConfigMap, Secret or projected volume is mounted whole by an app "
         "container (env is read at start: nothing to keep)"},
        {",\"reload-agent.io/validate\":\"app -t\"",
         "\"initContainers\":[{\"name\":\"reload-agent-validator\",\"image\":\"y\"}]," APP_CM,
         "a container named reload-agent-validator exists and was not injected"},
        {",\"reload-agent.io/keep-last-good\":\"true\"",
         "\"containers\":[{\"name\":\"app\",\"image\":\"x\",\"volumeMounts\":[{\"name\":"
         "\"cfg\",\"mountPath\":\"/etc/app\"}]}],\"volumes\":[{\"name\":\"cfg\",\"configMap\":"
         "{}},{\"name\":\"reload-agent-bin\",\"emptyDir\":{}}]",
         "the pod already has a volume named reload-agent-bin that reload-agent did not add"},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        char json[2048];
        struct inject_result r;
        snprintf(json, sizeof json, POD_HEAD OPT_IN "%s}},\"spec\":{%s}}", T[i].annots, T[i].spec);
        cJSON *pod = inject_pod(json, NULL, &r);
        if (r.outcome != INJECT_SKIPPED || strcmp(r.reason, T[i].reason) != 0)
            print_error("case %zu: outcome %d reason \"%s\"\n", i, r.outcome, r.reason);
        assert_int_equal(r.outcome, INJECT_SKIPPED);
        assert_string_equal(r.reason, T[i].reason);
        assert_int_equal(r.nnotes, 0);
        inject_result_free(&r);
        cJSON_Delete(pod);
    }
}

/* The validator comes with validate or a command verify, not with a URL
 * verify; --validator-socket with it; keep-last-good alone adds the copies,
 * the install container and the probe but no validator. */
static void test_safe_reload_parts(void **state)
{
    (void)state;
    static const struct {
        const char *annots;
        int validator, keep;
    } T[] = {
        {"", 0, 0},
        {",\"reload-agent.io/verify\":\"http://127.0.0.1/ok\"", 0, 0},
        {",\"reload-agent.io/verify\":\"check-it --now\"", 1, 0},
        {",\"reload-agent.io/validate\":\"app -t\"", 1, 0},
        {",\"reload-agent.io/keep-last-good\":\"true\"", 0, 1},
        {",\"reload-agent.io/keep-last-good\":\"false\",\"reload-agent.io/validate\":\"a\"", 1, 0},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        char json[2048];
        struct inject_result r;
        snprintf(json, sizeof json, POD_HEAD OPT_IN "%s}},\"spec\":{" APP_CM "}}", T[i].annots);
        cJSON *pod = inject_pod(json, NULL, &r);
        assert_int_equal(r.outcome, INJECT_INJECTED);
        const cJSON *spec = cJSON_GetObjectItem(pod, "spec"), *c;
        int validator = 0, install = 0;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(spec, "initContainers"))
        {
            const char *n = cJSON_GetObjectItem(c, "name")->valuestring;
            validator += strcmp(n, "reload-agent-validator") == 0;
            install += strcmp(n, "reload-agent-install") == 0;
        }
        const cJSON *side = find_sidecar(pod);
        assert_int_equal(validator, T[i].validator);
        assert_int_equal(install, T[i].validator || T[i].keep);
        assert_int_equal(has_arg(side, "--validator-socket=/reload-agent/validator/validator.sock"),
                         T[i].validator);
        assert_int_equal(has_arg(side, "--keep-last-good=/etc/app=/reload-agent/lkg/cfg"),
                         T[i].keep);
        assert_int_equal(cJSON_GetObjectItem(side, "startupProbe") != NULL, T[i].keep);
        const cJSON *app = cJSON_GetArrayItem(cJSON_GetObjectItem(spec, "containers"), 0);
        const cJSON *m = cJSON_GetArrayItem(cJSON_GetObjectItem(app, "volumeMounts"), 0);
        assert_string_equal(cJSON_GetObjectItem(m, "name")->valuestring,
                            T[i].keep ? "reload-agent-lkg-cfg" : "cfg");
        inject_result_free(&r);
        cJSON_Delete(pod);
    }
}

/* A default-container that does not exist: the first container, warned. */
static void test_default_container_missing(void **state)
{
    (void)state;
    struct inject_result r;
    cJSON *pod =
        inject_pod(POD_HEAD OPT_IN ",\"kubectl.kubernetes.io/default-container\":\"nope\","
                                   "\"reload-agent.io/action\":\"signal\",\"reload-agent.io/"
                                   "pid-file\":\"/run/app.pid\"}},\"spec\":{\"containers\":[{"
                                   "\"name\":\"app\",\"securityContext\":{\"runAsUser\":42},"
                                   "\"volumeMounts\":[{\"name\":\"cfg\",\"mountPath\":"
                                   "\"/etc/app\"}]}],\"volumes\":[{\"name\":\"cfg\","
                                   "\"configMap\":{}}]}}",
                   NULL, &r);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    assert_int_equal(r.nwarnings, 1);
    assert_string_equal(r.warnings[0], "annotation kubectl.kubernetes.io/default-container names "
                                       "\"nope\", which is not a container; using the first");
    const cJSON *sc = cJSON_GetObjectItem(find_sidecar(pod), "securityContext");
    assert_int_equal(cJSON_GetObjectItem(sc, "runAsUser")->valueint, 42);
    assert_null(cJSON_GetObjectItem(sc, "runAsGroup"));
    inject_result_free(&r);
    cJSON_Delete(pod);
}

/* A status written without "mirrors" (an older or hand-edited one): the
 * reinvocation adds the list. */
static void test_reinvocation_status_without_mirrors(void **state)
{
    (void)state;
    struct inject_result r;
    cJSON *pod = inject_pod(
        POD_HEAD OPT_IN ",\"reload-agent.io/inject-status\":\"{\\\"version\\\":\\\"0.0.1\\\"}\"}},"
                        "\"spec\":{\"initContainers\":[{\"name\":\"reload-agent\",\"image\":\"r\","
                        "\"restartPolicy\":\"Always\"}]," APP_CM "}}",
        NULL, &r);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    const cJSON *side = find_sidecar(pod);
    assert_true(has_arg(side, "--watch=/etc/app"));
    assert_non_null(sidecar_mount(side, "/etc/app"));
    const cJSON *st = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "metadata"), "annotations"),
        "reload-agent.io/inject-status");
    assert_string_equal(st->valuestring, "{\"version\":\"0.0.1\",\"mirrors\":[\"cfg\"]}");
    inject_result_free(&r);
    /* and again: nothing to add */
    char err[128];
    assert_int_equal(inject_object(pod, NULL, &r, err, sizeof err), 0);
    assert_int_equal(r.outcome, INJECT_UNCHANGED);
    inject_result_free(&r);
    cJSON_Delete(pod);
}

static const char *sync_objects_of(const cJSON *pod)
{
    const cJSON *v = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "metadata"), "annotations"),
        "reload-agent.io/sync-objects");
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The sync-objects annotation (the cluster sync service, docs/sync.md):
 * every ConfigMap and Secret the pod's mirrors and env volumes read, each
 * once; a reinvocation appends the new ones. A pod with per-pod fast sync
 * has none (its own agent nudges it; the service would nudge it twice). */
static void test_sync_objects(void **state)
{
    (void)state;
    struct inject_result r;
    cJSON *pod = inject_pod(POD_HEAD OPT_IN
                            "}},\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":\"x\","
                            "\"envFrom\":[{\"secretRef\":{\"name\":\"env-s\"}}],"
                            "\"volumeMounts\":[{\"name\":\"cfg\",\"mountPath\":\"/etc/app\"},"
                            "{\"name\":\"pj\",\"mountPath\":\"/etc/pj\"},"
                            "{\"name\":\"cfg2\",\"mountPath\":\"/etc/app2\"}]}],"
                            "\"volumes\":[{\"name\":\"cfg\",\"configMap\":{\"name\":\"app\"}},"
                            "{\"name\":\"pj\",\"projected\":{\"sources\":[{\"configMap\":{\"name\":"
                            "\"app\"}},{\"secret\":{\"name\":\"tls\"}}]}},"
                            "{\"name\":\"cfg2\",\"configMap\":{\"name\":\"other\"}}]}}",
                            NULL, &r);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    assert_non_null(sync_objects_of(pod));
    assert_string_equal(sync_objects_of(pod),
                        "configmap/app,secret/tls,configmap/other,secret/env-s");
    inject_result_free(&r);
    /* a volume added since: a reinvocation appends its object */
    cJSON *spec = cJSON_GetObjectItem(pod, "spec");
    cJSON *app = cJSON_GetArrayItem(cJSON_GetObjectItem(spec, "containers"), 0);
    cJSON_AddItemToArray(cJSON_GetObjectItem(app, "volumeMounts"),
                         cJSON_Parse("{\"name\":\"late\",\"mountPath\":\"/etc/late\"}"));
    cJSON_AddItemToArray(cJSON_GetObjectItem(spec, "volumes"),
                         cJSON_Parse("{\"name\":\"late\",\"secret\":{\"secretName\":\"late\"}}"));
    char err[256];
    assert_int_equal(inject_object(pod, NULL, &r, err, sizeof err), 0);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    assert_int_equal(jsonpatch_apply(&pod, r.ops, err, sizeof err), 0);
    assert_string_equal(sync_objects_of(pod),
                        "configmap/app,secret/tls,configmap/other,secret/env-s,secret/late");
    inject_result_free(&r);
    cJSON_Delete(pod);
    /* per-pod fast sync: no sync-objects, at injection and at reinvocation */
    pod = inject_pod(POD_HEAD OPT_IN ",\"reload-agent.io/fast-sync\":\"true\"}},\"spec\":{" APP_CM
                                     "}}",
                     NULL, &r);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    assert_null(sync_objects_of(pod));
    inject_result_free(&r);
    spec = cJSON_GetObjectItem(pod, "spec");
    app = cJSON_GetArrayItem(cJSON_GetObjectItem(spec, "containers"), 0);
    cJSON_AddItemToArray(cJSON_GetObjectItem(app, "volumeMounts"),
                         cJSON_Parse("{\"name\":\"late\",\"mountPath\":\"/etc/late\"}"));
    cJSON_AddItemToArray(cJSON_GetObjectItem(spec, "volumes"),
                         cJSON_Parse("{\"name\":\"late\",\"secret\":{\"secretName\":\"late\"}}"));
    assert_int_equal(inject_object(pod, NULL, &r, err, sizeof err), 0);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    assert_int_equal(jsonpatch_apply(&pod, r.ops, err, sizeof err), 0);
    assert_null(sync_objects_of(pod));
    inject_result_free(&r);
    cJSON_Delete(pod);
}

/* rollout where the agent can roll nothing: warned, still injected. */
static void test_rollout_without_a_rollable_owner(void **state)
{
    (void)state;
    static const struct {
        const char *obj, *warning;
    } T[] = {
        {POD_HEAD OPT_IN ",\"reload-agent.io/action\":\"rollout\"}},\"spec\":{" APP_CM "}}",
         "rollout: this pod has no controller to roll; a change is only recorded"},
        {POD_HEAD OPT_IN ",\"reload-agent.io/action\":\"rollout\"},\"ownerReferences\":[{\"kind\":"
                         "\"Job\",\"name\":\"j\",\"controller\":true}]},\"spec\":{" APP_CM "}}",
         "rollout: a Job's pods are never rolled; a change is only recorded (use restart or none)"},
        {"{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"spec\":{\"template\":{\"metadata\":{"
         "\"annotations\":{" OPT_IN "}},\"spec\":{\"containers\":[{\"name\":\"a\",\"envFrom\":[{"
         "\"configMapRef\":{\"name\":\"e\"}}]}]}}}}",
         "rollout: a Job's pods are never rolled; a change is only recorded (use restart or none)"},
        /* a controller that rolls: no warning */
        {POD_HEAD OPT_IN ",\"reload-agent.io/action\":\"rollout\"},\"ownerReferences\":[{\"kind\":"
                         "\"StatefulSet\",\"name\":\"s\",\"controller\":true}]},\"spec\":{" APP_CM
                         "}}",
         NULL},
        /* a ReplicaSet's controller is judged at run time (a Deployment's) */
        {POD_HEAD OPT_IN ",\"reload-agent.io/action\":\"rollout\"},\"ownerReferences\":[{\"kind\":"
                         "\"ReplicaSet\",\"apiVersion\":\"apps/v1\",\"name\":\"r\","
                         "\"controller\":true}]},\"spec\":{" APP_CM "}}",
         NULL},
        /* a bare ReplicaSet: the agent refuses to roll it (kube/kinds.c) */
        {"{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"spec\":{\"template\":{"
         "\"metadata\":{\"annotations\":{" OPT_IN ",\"reload-agent.io/action\":\"rollout\"}},"
         "\"spec\":{" APP_CM "}}}}",
         "rollout: a ReplicaSet's pods are never rolled; a change is only recorded (use restart or "
         "none)"},
        /* a controller kind the agent's owner chain does not follow */
        {POD_HEAD OPT_IN ",\"reload-agent.io/action\":\"rollout\"},\"ownerReferences\":[{\"kind\":"
                         "\"StrimziPodSet\",\"apiVersion\":\"core.strimzi.io/v1beta2\",\"name\":"
                         "\"k\",\"controller\":true}]},\"spec\":{" APP_CM "}}",
         "rollout: this pod's controller StrimziPodSet cannot be rolled; a change is only recorded "
         "(use restart or none)"},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        struct inject_result r;
        cJSON *pod = inject_pod(T[i].obj, NULL, &r);
        assert_int_equal(r.outcome, INJECT_INJECTED);
        assert_int_equal(r.nwarnings, T[i].warning ? 1 : 0);
        if (T[i].warning) assert_string_equal(r.warnings[0], T[i].warning);
        inject_result_free(&r);
        cJSON_Delete(pod);
    }
}

/* The one builder of "set this annotation": the member when the map
 * exists (its key escaped), else the map, else metadata holding it. */
static void test_annotation_op(void **state)
{
    (void)state;
    static const struct {
        const char *meta, *want;
    } T[] = {
        {"{\"annotations\":{\"a\":\"1\"}}",
         "{\"op\":\"add\",\"path\":\"/spec/template/metadata/annotations/reload-agent.io~1k\","
         "\"value\":\"v\"}"},
        {"{\"labels\":{}}", "{\"op\":\"add\",\"path\":\"/spec/template/metadata/annotations\","
                            "\"value\":{\"reload-agent.io/k\":\"v\"}}"},
        {NULL, "{\"op\":\"add\",\"path\":\"/spec/template/metadata\",\"value\":{\"annotations\":"
               "{\"reload-agent.io/k\":\"v\"}}}"},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        cJSON *meta = T[i].meta ? cJSON_Parse(T[i].meta) : NULL;
        cJSON *op = inject_annotation_op(meta, "/spec/template", "reload-agent.io/k", "v");
        assert_non_null(op);
        char *got = cJSON_PrintUnformatted(op);
        assert_string_equal(got, T[i].want);
        free(got);
        cJSON_Delete(op);
        cJSON_Delete(meta);
    }
}

/* Every workload kind with rollout effective: warned exactly when the
 * kinds table says the agent cannot roll it, so the injector and the
 * agent's owner chain cannot disagree. */
static void test_rollout_warning_follows_the_kinds_table(void **state)
{
    (void)state;
    static const struct {
        const char *api, *kind;
    } K[] = {
        {"apps/v1", "Deployment"},          {"apps/v1", "StatefulSet"}, {"apps/v1", "DaemonSet"},
        {"apps/v1", "ReplicaSet"},          {"batch/v1", "Job"},        {"batch/v1", "CronJob"},
        {"argoproj.io/v1alpha1", "Rollout"}};
    for (size_t i = 0; i < sizeof K / sizeof K[0]; i++) {
        const struct kinds_kind *k = kinds_find(K[i].kind, K[i].api);
        assert_non_null(k);
        assert_string_equal(inject_prefix_for(K[i].api, K[i].kind), k->template_prefix);
        int cron = strcmp(K[i].kind, "CronJob") == 0;
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"apiVersion\":\"%s\",\"kind\":\"%s\",\"spec\":{%s\"template\":{\"metadata\":{"
                 "\"annotations\":{" OPT_IN
                 ",\"reload-agent.io/action\":\"rollout\"}},\"spec\":{" APP_CM "}}}%s}",
                 K[i].api, K[i].kind, cron ? "\"jobTemplate\":{\"spec\":{" : "", cron ? "}}" : "");
        struct inject_result r;
        cJSON *obj = inject_pod(json, NULL, &r);
        assert_int_equal(r.outcome, INJECT_INJECTED);
        if (r.nwarnings != (size_t)!k->can_roll)
            fail_msg("%s: %zu warnings, can_roll %d", K[i].kind, r.nwarnings, k->can_roll);
        if (!k->can_roll) assert_non_null(strstr(r.warnings[0], k->title));
        inject_result_free(&r);
        cJSON_Delete(obj);
    }
}

/* Issue 18 item 4: fast sync opted in by reload-agent.io/fast-sync (as
 * the agent reads a bool) adds --fast-sync=true and one
 * --fast-sync-objects per object the mirrors and env volumes name;
 * nothing without the opt-in; a bad value is the agent's own error. */
static void test_fast_sync_args(void **state)
{
    (void)state;
    static const struct {
        const char *value; /* NULL: no annotation */
        int on;            /* -1: refused */
    } T[] = {{NULL, 0}, {"false", 0}, {"true", 1}, {"1", 1}, {"True", 1}, {"maybe", -1}};
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        char json[1024];
        snprintf(json, sizeof json, POD_HEAD OPT_IN "%s%s%s}},\"spec\":{" APP_CM "}}",
                 T[i].value ? ",\"reload-agent.io/fast-sync\":\"" : "",
                 T[i].value ? T[i].value : "", T[i].value ? "\"" : "");
        struct inject_opts o = {0};
        struct inject_result r;
        cJSON *pod = inject_pod(json, &o, &r);
        if (T[i].on < 0) {
            assert_int_equal(r.outcome, INJECT_SKIPPED);
            if (!strstr(r.reason, "fast-sync")) print_error("reason: %s\n", r.reason);
            assert_non_null(strstr(r.reason, "fast-sync"));
        } else {
            assert_int_equal(r.outcome, INJECT_INJECTED);
            const cJSON *side = find_sidecar(pod);
            assert_non_null(side);
            assert_int_equal(has_arg(side, "--fast-sync=true"), T[i].on);
            assert_int_equal(has_arg(side, "--fast-sync-objects=configmap/app"), T[i].on);
            int n = 0;
            const cJSON *a;
            cJSON_ArrayForEach(a, cJSON_GetObjectItem(side, "args"))
            {
                n += strncmp(a->valuestring, "--fast-sync", 11) == 0;
            }
            assert_int_equal(n, 2 * T[i].on);
        }
        inject_result_free(&r);
        cJSON_Delete(pod);
    }
}

/* At most INJECT_FAST_SYNC_MAX objects (the agent's own limit), warned
 * beyond; a name the API server would reject is warned about and left
 * out; from the CLI without a token to copy (automountServiceAccountToken
 * false), fast sync cannot start: refused, as rollout is. */
static void test_fast_sync_limits(void **state)
{
    (void)state;
    size_t cap = 64 * 1024, len = 0;
    char *json = malloc(cap);
    assert_non_null(json);
    len += (size_t)snprintf(json + len, cap - len,
                            POD_HEAD OPT_IN ",\"reload-agent.io/fast-sync\":\"true\"}},\"spec\":{"
                                            "\"containers\":[{\"name\":\"app\",\"image\":\"x\","
                                            "\"volumeMounts\":[");
    for (int i = 0; i < 70; i++)
        len += (size_t)snprintf(json + len, cap - len,
                                "%s{\"name\":\"v%d\",\"mountPath\":\"/c/%d\"}", i ? "," : "", i, i);
    len += (size_t)snprintf(json + len, cap - len,
                            ",{\"name\":\"bad\",\"mountPath\":\"/bad\"}]}],"
                            "\"volumes\":[{\"name\":\"bad\",\"configMap\":{"
                            "\"name\":\"Bad_Name\"}}");
    for (int i = 0; i < 70; i++)
        len += (size_t)snprintf(json + len, cap - len,
                                ",{\"name\":\"v%d\",\"configMap\":{\"name\":\"cm-%d\"}}", i, i);
    snprintf(json + len, cap - len, "]}}");
    struct inject_opts o = {0};
    struct inject_result r;
    cJSON *pod = inject_pod(json, &o, &r);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    const cJSON *side = find_sidecar(pod), *a;
    int n = 0;
    cJSON_ArrayForEach(a, cJSON_GetObjectItem(side, "args"))
    {
        n += strncmp(a->valuestring, "--fast-sync-objects=", 20) == 0;
    }
    assert_int_equal(n, INJECT_FAST_SYNC_MAX);
    assert_true(has_arg(side, "--fast-sync-objects=configmap/cm-0"));
    assert_true(has_arg(side, "--fast-sync-objects=configmap/cm-63"));
    assert_false(has_arg(side, "--fast-sync-objects=configmap/cm-64"));
    assert_true(warned(&r, "fast sync watches at most 64 objects: configmap/cm-64"));
    assert_true(warned(&r, "fast sync: configmap \"Bad_Name\" (volume bad) is not a valid name"));
    inject_result_free(&r);
    cJSON_Delete(pod);
    free(json);

    /* an annotation replaces the injected list (a list flag, whole): warned */
    pod = inject_pod(POD_HEAD OPT_IN ",\"reload-agent.io/fast-sync\":\"true\","
                                     "\"reload-agent.io/fast-sync-objects\":\"configmap/other\"}},"
                                     "\"spec\":{" APP_CM "}}",
                     &o, &r);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    assert_true(warned(&r, "annotation reload-agent.io/fast-sync-objects replaces the 1 injected "
                           "--fast-sync-objects; the Role reload-agent inject writes names the "
                           "injected ones"));
    inject_result_free(&r);
    cJSON_Delete(pod);

    pod = inject_pod(POD_HEAD OPT_IN ",\"reload-agent.io/fast-sync\":\"true\"}},\"spec\":{"
                                     "\"automountServiceAccountToken\":false," APP_CM "}}",
                     &o, &r);
    assert_int_equal(r.outcome, INJECT_SKIPPED);
    assert_string_equal(r.reason, "fast sync needs the Kubernetes API, but container app has no "
                                  "service-account token mount to copy "
                                  "(automountServiceAccountToken is false)");
    inject_result_free(&r);
    cJSON_Delete(pod);
}

/* reload-agent.io/extra-sources (inject/extra.c) beyond its goldens: an
 * empty entry and too many entries refuse, fast sync watches the extra
 * objects too, a volume name the pod has already is cut and hashed. */
static void test_extra_sources_edges(void **state)
{
    (void)state;
    struct inject_opts o = {0};
    struct inject_result r;
    cJSON *pod = inject_pod(POD_HEAD OPT_IN ",\"reload-agent.io/extra-sources\":\"configmap/a,,"
                                            "secret/b\"}},\"spec\":{" APP_CM "}}",
                            &o, &r);
    assert_int_equal(r.outcome, INJECT_SKIPPED);
    assert_string_equal(r.reason, "annotation reload-agent.io/extra-sources: entry 2: \"\": "
                                  "expected configmap/NAME or secret/NAME");
    inject_result_free(&r);
    cJSON_Delete(pod);

    char big[2048] = POD_HEAD OPT_IN ",\"reload-agent.io/extra-sources\":\"";
    for (int i = 0; i < 65; i++)
        snprintf(big + strlen(big), sizeof big - strlen(big), "%sconfigmap/c%d", i ? "," : "", i);
    snprintf(big + strlen(big), sizeof big - strlen(big), "\"}},\"spec\":{" APP_CM "}}");
    pod = inject_pod(big, &o, &r);
    assert_int_equal(r.outcome, INJECT_SKIPPED);
    assert_string_equal(r.reason, "annotation reload-agent.io/extra-sources: more than 64 entries");
    inject_result_free(&r);
    cJSON_Delete(pod);

    pod = inject_pod(POD_HEAD OPT_IN
                     ",\"reload-agent.io/fast-sync\":\"true\","
                     "\"reload-agent.io/extra-sources\":\"configmap/flags\"}},\"spec\":{"
                     "\"containers\":[{\"name\":\"app\",\"image\":\"x\",\"volumeMounts\":[{"
                     "\"name\":\"cfg\",\"mountPath\":\"/etc/app\"}]}],\"volumes\":[{\"name\":"
                     "\"cfg\",\"configMap\":{\"name\":\"app\"}},{\"name\":\"reload-agent-extra-cm-"
                     "flags\",\"emptyDir\":{}}]}}",
                     &o, &r);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    const cJSON *side = find_sidecar(pod);
    assert_true(has_arg(side, "--fast-sync-objects=configmap/app"));
    assert_true(has_arg(side, "--fast-sync-objects=configmap/flags"));
    assert_true(has_arg(side, "--watch=/reload-agent/extra/configmap/flags"));
    const cJSON *m = sidecar_mount(side, "/reload-agent/extra/configmap/flags");
    assert_non_null(m);
    const char *vname = cJSON_GetObjectItem(m, "name")->valuestring;
    assert_string_not_equal(vname, "reload-agent-extra-cm-flags");
    assert_int_equal(strncmp(vname, "reload-agent-extra-cm-flags-", 28), 0);
    inject_result_free(&r);
    cJSON_Delete(pod);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_prefix_table),
        cmocka_unit_test(test_annotation_op),
        cmocka_unit_test(test_rollout_warning_follows_the_kinds_table),
        cmocka_unit_test(test_malformed_fields_named),
        cmocka_unit_test(test_not_opted_in_is_not_validated),
        cmocka_unit_test(test_env_volume_names),
        cmocka_unit_test(test_bad_config_is_skipped_with_agents_message),
        cmocka_unit_test(test_env_options_judged_by_the_agent),
        cmocka_unit_test(test_nested_mirrors_ignored),
        cmocka_unit_test(test_good_annotations_accepted),
        cmocka_unit_test(test_default_container_uid),
        cmocka_unit_test(test_status_without_container),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_messages_are_one_line),
        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_pods_the_api_server_would_reject),
        cmocka_unit_test(test_api_access),
        cmocka_unit_test(test_clean_path),
        cmocka_unit_test(test_mount_paths_are_cleaned),
        cmocka_unit_test(test_rollout_without_a_token_is_refused),
        cmocka_unit_test(test_other_os_is_refused),
        cmocka_unit_test(test_unreadable_modes_warned),
        cmocka_unit_test(test_many_volumes),
        cmocka_unit_test(test_nothing_to_watch_says_why),
        cmocka_unit_test(test_default_container_missing),
        cmocka_unit_test(test_reinvocation_status_without_mirrors),
        cmocka_unit_test(test_rollout_without_a_rollable_owner),
        cmocka_unit_test(test_fast_sync_args),
        cmocka_unit_test(test_sync_objects),
        cmocka_unit_test(test_fast_sync_limits),
        cmocka_unit_test(test_safe_reload_refusals),
        cmocka_unit_test(test_safe_reload_parts),
        cmocka_unit_test(test_extra_sources_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
