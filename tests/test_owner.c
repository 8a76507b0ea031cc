/*
 * test_owner.c - tests of the owner-kind table and of owner resolution
 * (kube/owner.c) through the real
 * Kubernetes client against the fake API server tests/lib/fakeapi.py: one
 * fake per test (a child process with the test's fixture, stopped by PID),
 * real HTTPS on 127.0.0.1, a real libuv loop bounded by a deadline, and
 * uv_loop_close() == 0 at the end of each test. Every fixture's owner chain
 * is followed; objects are changed through the fake's control API to cover
 * ignored references, recreated owners, annotations and subPath mounts.
 * The behaviour columns of the table and kinds_not_rolling() are checked on
 * the fake's stored objects.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <curl/curl.h>

#include "net/httpc.h"
#include "kube/kube.h"
#include "base/log.h"
#include "kube/owner.h"

#define RUN_LIMIT_MS 30000 /* no test loop may run longer than this */

#include "tests/fakeapi_client.h"
#include "tests/helpers.h"

static char g_dir[64];
static char g_state[300]; /* the fake's --state, one per test */

/* ---- per-test loop, client and result ---- */

struct t {
    uv_loop_t loop;
    uv_timer_t tick; /* wakes uv_run(ONCE) so the deadline is checked */
    struct httpc *hc;
    struct kube *k;
    uv_timer_t aux;       /* for a test's own use; closed in teardown */
    struct owner_info *o; /* the result */
    int calls;
};

static void on_owner(void *ud, struct owner_info *o)
{
    struct t *t = ud;

    t->calls++;
    owner_info_free(t->o);
    t->o = o;
}

static void on_tick(uv_timer_t *h) { (void)h; }

/* Runs the loop until t->calls reaches calls (limit_ms at most). */
static void await_calls(struct t *t, int calls, uint64_t limit_ms)
{
    run_until_count(&t->loop, &t->calls, calls, limit_ms);
    assert_int_equal(t->calls, calls);
}

static int make_kube(struct t *t, const char *pod)
{
    char api[64], err[512];
    struct kube_config cfg = {.api = api,
                              .token_file = g_fake.token_file,
                              .ca_file = g_fake.ca,
                              .pod_name = pod,
                              .namespace_ = g_fake.ns};
    int r;

    snprintf(api, sizeof api, "https://127.0.0.1:%d", g_fake.port);
    r = kube_create(&t->loop, t->hc, &cfg, &t->k, err, sizeof err);
    if (r != 0) fprintf(stderr, "kube_create: %s\n", err);
    return r;
}

/* Starts the fake with a fixture and a client for its first pod. */
static struct t *start(void **state, const char *fixture)
{
    struct t *t = calloc(1, sizeof *t);

    assert_non_null(t);
    *state = t;
    assert_int_equal(uv_loop_init(&t->loop), 0);
    assert_int_equal(httpc_create(&t->loop, &t->hc), 0);
    uv_timer_init(&t->loop, &t->tick);
    uv_timer_start(&t->tick, on_tick, 50, 50);
    uv_timer_init(&t->loop, &t->aux);
    assert_int_equal(fake_start(&g_fake, g_state, fixture), 0);
    assert_int_equal(make_kube(t, g_fake.pod), 0);
    return t;
}

static void closed(void *ud) { *(int *)ud = 1; }

static int teardown(void **state)
{
    struct t *t = *state;
    int hc_closed = 0, i;

    if (!t) return 0;
    kube_destroy(t->k);
    httpc_close(t->hc, closed, &hc_closed);
    uv_close((uv_handle_t *)&t->tick, NULL);
    uv_close((uv_handle_t *)&t->aux, NULL);
    for (i = 0; i < 1000 && uv_run(&t->loop, UV_RUN_NOWAIT) != 0; i++) usleep(1000);
    assert_int_equal(hc_closed, 1);
    assert_int_equal(uv_loop_close(&t->loop), 0);
    owner_info_free(t->o);
    free(t);
    fake_stop(&g_fake);
    return remove_tmpdir(g_state);
}

static void resolve(struct t *t)
{
    assert_int_equal(owner_resolve(t->k, on_owner, t), 0);
    await_calls(t, 1, RUN_LIMIT_MS);
    assert_non_null(t->o);
}

/* The fake's stored object (resource plural, name), to free. */
static cJSON *object(const char *resource, const char *name)
{
    char q[256];

    snprintf(q, sizeof q, "/object?resource=%s&name=%s", resource, name);
    return ctl("GET", q, NULL);
}

static const char *meta_str(const cJSON *obj, const char *key)
{
    return cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), key));
}

static void put_object(const char *resource, const cJSON *obj)
{
    cJSON *req = cJSON_CreateObject();
    char *body;

    cJSON_AddStringToObject(req, "resource", resource);
    cJSON_AddItemToObject(req, "object", cJSON_Duplicate(obj, 1));
    body = cJSON_PrintUnformatted(req);
    ctl_ok("POST", "/object", body);
    free(body);
    cJSON_Delete(req);
}

/* The paths the fake was asked for, joined by spaces. */
static void request_paths(char *out, size_t n)
{
    cJSON *all = ctl("GET", "/requests", NULL), *r;
    size_t len = 0;

    assert_non_null(all);
    out[0] = '\0';
    cJSON_ArrayForEach(r, all)
    {
        const char *p = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "path"));

        len +=
            (size_t)snprintf(out + len, len < n ? n - len : 0, "%s%s", len ? " " : "", p ? p : "?");
    }
    cJSON_Delete(all);
}

static void expect_ok(const struct t *t)
{
    if (t->o->status != OWNER_OK)
        fail_msg("want OWNER_OK, got %d: %s", t->o->status, t->o->error ? t->o->error : "");
    assert_null(t->o->error);
}

static void expect_error(const struct t *t, enum owner_status st, const char *want)
{
    if (t->o->status != st || !t->o->error || !strstr(t->o->error, want))
        fail_msg("want status %d with \"%s\", got %d: %s", st, want, t->o->status,
                 t->o->error ? t->o->error : "(no error)");
}

/* Checks a found workload against the fake's stored object. */
static void expect_workload(const struct t *t, const char *kind, const char *resource,
                            const char *group_version, const char *name, const char *patch_type)
{
    cJSON *w = object(resource, name), *pod = object("pods", g_fake.pod);
    char path[256];

    expect_ok(t);
    assert_string_equal(t->o->kind, kind);
    assert_string_equal(t->o->resource, resource);
    assert_string_equal(t->o->name, name);
    assert_string_equal(t->o->namespace_, g_fake.ns);
    assert_string_equal(t->o->uid, meta_str(w, "uid"));
    assert_string_equal(t->o->api_version, group_version);
    snprintf(path, sizeof path, "/apis/%s/namespaces/%s/%s/%s", group_version, g_fake.ns, resource,
             name);
    assert_string_equal(t->o->path, path);
    assert_string_equal(t->o->patch_type, patch_type);
    assert_true(t->o->have_pod);
    assert_string_equal(t->o->pod.name, g_fake.pod);
    assert_string_equal(t->o->pod.uid, meta_str(pod, "uid"));
    assert_string_equal(t->o->pod.namespace_, g_fake.ns);
    cJSON_Delete(w);
    cJSON_Delete(pod);
}

/* kinds_not_rolling() on the fake's stored object of the resolved kind. */
static const char *stored_not_rolling(const struct t *t, const char *resource, const char *name,
                                      int *blocks)
{
    static char buf[600], out[600];
    cJSON *w = object(resource, name);
    const char *why;

    assert_non_null(t->o->ki);
    why = kinds_not_rolling(t->o->ki, w, buf, sizeof buf, blocks);
    if (why) snprintf(out, sizeof out, "%s", why);
    cJSON_Delete(w);
    return why ? out : NULL;
}

static void expect_rolls(const struct t *t, const char *resource, const char *name)
{
    int blocks = -1;

    assert_null(stored_not_rolling(t, resource, name, &blocks));
    assert_int_equal(blocks, 0);
    assert_null(t->o->via_kind);
}

#define STRATEGIC "application/strategic-merge-patch+json"
#define MERGE "application/merge-patch+json"

/* ---- the fixtures' chains ---- */

static void test_deployment(void **state)
{
    struct t *t = start(state, "deployment");
    char paths[1024], want[1024];

    resolve(t);
    expect_workload(t, "Deployment", "deployments", "apps/v1", "web", STRATEGIC);
    expect_rolls(t, "deployments", "web");
    assert_string_equal(t->o->group, "apps");
    /* Pod -> ReplicaSet -> Deployment, each fetched once. */
    request_paths(paths, sizeof paths);
    snprintf(want, sizeof want,
             "/api/v1/namespaces/%s/pods/%s /apis/apps/v1/namespaces/%s/replicasets/web-5d8f7c9b4 "
             "/apis/apps/v1/namespaces/%s/deployments/web",
             g_fake.ns, g_fake.pod, g_fake.ns, g_fake.ns);
    assert_string_equal(paths, want);
}

static void test_statefulset(void **state)
{
    struct t *t = start(state, "statefulset");
    char paths[1024], want[1024];

    resolve(t);
    expect_workload(t, "StatefulSet", "statefulsets", "apps/v1", "db", STRATEGIC);
    expect_rolls(t, "statefulsets", "db");
    request_paths(paths, sizeof paths);
    snprintf(want, sizeof want,
             "/api/v1/namespaces/%s/pods/%s /apis/apps/v1/namespaces/%s/statefulsets/db", g_fake.ns,
             g_fake.pod, g_fake.ns);
    assert_string_equal(paths, want);
}

static void test_daemonset(void **state)
{
    struct t *t = start(state, "daemonset");

    resolve(t);
    expect_workload(t, "DaemonSet", "daemonsets", "apps/v1", "agent", STRATEGIC);
    expect_rolls(t, "daemonsets", "agent");
}

static void test_rollout(void **state)
{
    struct t *t = start(state, "rollout");

    resolve(t);
    expect_workload(t, "Rollout", "rollouts", "argoproj.io/v1alpha1", "web", MERGE);
    assert_string_equal(t->o->group, "argoproj.io");
    expect_rolls(t, "rollouts", "web");
}

/* A Rollout with spec.workloadRef to a Deployment: the Deployment is the
 * object to patch, the Rollout is named as the pod's workload. */
static void test_rollout_workload_ref(void **state)
{
    struct t *t = start(state, "workloadref-rollout");
    cJSON *r = object("rollouts", "web");
    char paths[1024], want[1024], buf[600];
    int blocks = -1;

    resolve(t);
    expect_workload(t, "Deployment", "deployments", "apps/v1", "web-template", STRATEGIC);
    assert_string_equal(t->o->via_kind, "Rollout");
    assert_string_equal(t->o->via_name, "web");
    assert_string_equal(t->o->via_api_version, "argoproj.io/v1alpha1");
    assert_string_equal(t->o->via_uid, meta_str(r, "uid"));
    request_paths(paths, sizeof paths);
    snprintf(want, sizeof want,
             "/api/v1/namespaces/%s/pods/%s /apis/apps/v1/namespaces/%s/replicasets/web-7d6c5b4a9 "
             "/apis/argoproj.io/v1alpha1/namespaces/%s/rollouts/web "
             "/apis/apps/v1/namespaces/%s/deployments/web-template",
             g_fake.ns, g_fake.pod, g_fake.ns, g_fake.ns, g_fake.ns);
    assert_string_equal(paths, want);
    /* the Rollout itself would never be patched: the one judgement says so */
    assert_non_null(strstr(kinds_not_rolling(kinds_named("Rollout"), r, buf, sizeof buf, &blocks),
                           "spec.workloadRef names Deployment web-template"));
    assert_int_equal(blocks, 1);
    cJSON_Delete(r);
}

static void test_rollout_workload_ref_other(void **state)
{
    struct t *t = start(state, "workloadref-other");

    resolve(t);
    expect_error(t, OWNER_NO_ROLLOUT,
                 "Rollout web: spec.workloadRef names PodTemplate "
                 "web-template (v1), not an apps/v1 Deployment");
    assert_null(t->o->kind);
    assert_string_equal(t->o->via_kind, "Rollout");
    assert_string_equal(t->o->via_name, "web");
}

static void test_rollout_workload_ref_unreadable(void **state)
{
    struct t *t = start(state, "workloadref-rollout");

    ctl_ok("POST", "/faults",
           "{\"method\":\"GET\",\"path_regex\":\"/deployments/\",\"status\":403}");
    resolve(t);
    expect_error(t, OWNER_NO_ROLLOUT,
                 "cannot get Deployment web-template named by Rollout web's "
                 "spec.workloadRef: ");
    expect_error(t, OWNER_NO_ROLLOUT, "verb \"get\" on resource \"deployments\"");
    assert_string_equal(t->o->via_kind, "Rollout");
}

static void test_paused_deployment(void **state)
{
    struct t *t = start(state, "paused-deployment");
    int blocks = -1;

    resolve(t);
    expect_workload(t, "Deployment", "deployments", "apps/v1", "web", STRATEGIC);
    assert_string_equal(stored_not_rolling(t, "deployments", "web", &blocks),
                        "spec.paused is true: a template patch will not roll pods until "
                        "`kubectl rollout resume`");
    assert_int_equal(blocks, 0);
}

static const char ONDELETE[] = "updateStrategy OnDelete: a template patch will not replace "
                               "running pods; delete them to pick up the change";

static void test_ondelete_statefulset(void **state)
{
    struct t *t = start(state, "ondelete-statefulset");
    int blocks = -1;

    resolve(t);
    expect_workload(t, "StatefulSet", "statefulsets", "apps/v1", "db", STRATEGIC);
    assert_string_equal(stored_not_rolling(t, "statefulsets", "db", &blocks), ONDELETE);
    assert_int_equal(blocks, 0);
}

static void test_ondelete_daemonset(void **state)
{
    struct t *t = start(state, "ondelete-daemonset");
    int blocks = -1;

    resolve(t);
    expect_workload(t, "DaemonSet", "daemonsets", "apps/v1", "agent", STRATEGIC);
    assert_string_equal(stored_not_rolling(t, "daemonsets", "agent", &blocks), ONDELETE);
    assert_int_equal(blocks, 0);
}

/* ---- the table ---- */

static void test_kind_table(void **state)
{
    static const struct {
        const char *kind, *api_version, *resource, *patch_type;
        int pod, rs, roll;
    } rows[] = {
        {"ReplicaSet", "apps/v1", "replicasets", NULL, 1, 0, 0},
        {"Deployment", "apps/v1", "deployments", STRATEGIC, 0, 1, 1},
        {"StatefulSet", "apps/v1", "statefulsets", STRATEGIC, 1, 0, 1},
        {"DaemonSet", "apps/v1", "daemonsets", STRATEGIC, 1, 0, 1},
        {"Rollout", "argoproj.io/v1alpha1", "rollouts", MERGE, 0, 1, 1},
        {"Job", "batch/v1", "jobs", NULL, 1, 0, 0},
        {"CronJob", "batch/v1", "cronjobs", NULL, 0, 0, 0},
    };
    char buf[64];
    int blocks;

    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct kinds_kind *k = kinds_find(rows[i].kind, rows[i].api_version);

        assert_non_null(k);
        assert_ptr_equal(k, kinds_named(rows[i].kind));
        assert_string_equal(k->resource, rows[i].resource);
        assert_int_equal(k->may_own_pod, rows[i].pod);
        assert_int_equal(k->may_own_replicaset, rows[i].rs);
        assert_int_equal(k->can_roll, rows[i].roll);
        if (rows[i].patch_type)
            assert_string_equal(k->patch_type, rows[i].patch_type);
        else
            assert_null(k->patch_type);
        /* a kind that cannot roll always blocks, with its reason */
        if (!k->can_roll) {
            assert_non_null(k->why_not);
            assert_ptr_equal(kinds_not_rolling(k, NULL, buf, sizeof buf, &blocks), k->why_not);
            assert_int_equal(blocks, 1);
        }
    }
    /* the group must match: no extensions/v1beta1 Deployment, no core Rollout */
    assert_null(kinds_find("Deployment", "extensions/v1beta1"));
    assert_null(kinds_find("Rollout", "v1"));
    assert_null(kinds_find("Node", "v1"));
    assert_null(kinds_find("Deployment", "apps/"));
    assert_null(kinds_find("Pod", "v2"));
    /* a Pod is its own template and rolls only through its controller */
    const struct kinds_kind *pod = kinds_find("Pod", "v1");
    assert_non_null(pod);
    assert_string_equal(pod->template_prefix, "");
    assert_string_equal(pod->template_path, "");
    assert_false(pod->can_roll || pod->may_own_pod || pod->may_own_replicaset);
    /* where each template is, as a pointer and as a dotted path */
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct kinds_kind *k = kinds_named(rows[i].kind);
        int cron = strcmp(rows[i].kind, "CronJob") == 0;
        assert_string_equal(k->template_prefix,
                            cron ? "/spec/jobTemplate/spec/template" : "/spec/template");
        assert_string_equal(k->template_path,
                            cron ? "spec.jobTemplate.spec.template" : "spec.template");
        assert_int_equal(k->workload_ref, strcmp(rows[i].kind, "Rollout") == 0);
    }
}

/* ---- pods that cannot be rolled ---- */

static const char IMMUTABLE[] = "pod template of a Job is immutable; use --action restart or "
                                "signal, or change the CronJob's jobTemplate";

static void test_job(void **state)
{
    struct t *t = start(state, "job");

    resolve(t);
    expect_error(t, OWNER_NO_ROLLOUT, IMMUTABLE);
    expect_error(t, OWNER_NO_ROLLOUT, "belongs to Job migrate:");
    assert_true(t->o->have_pod);
    assert_null(t->o->kind);
}

static void test_cronjob(void **state)
{
    struct t *t = start(state, "cronjob");

    resolve(t);
    expect_error(t, OWNER_NO_ROLLOUT, IMMUTABLE);
    expect_error(t, OWNER_NO_ROLLOUT, "Job nightly-123 of CronJob nightly");
}

static void test_orphan_replicaset(void **state)
{
    struct t *t = start(state, "orphan-rs");

    resolve(t);
    expect_error(t, OWNER_NO_ROLLOUT,
                 "ReplicaSet cache-6b5f4d7c8 has no controller: patching it "
                 "does not replace pods");
    assert_string_equal(t->o->error, "ReplicaSet cache-6b5f4d7c8 has no controller: patching it "
                                     "does not replace pods");
}

static void test_bare_pod(void **state)
{
    struct t *t = start(state, "bare-pod");

    resolve(t);
    expect_error(t, OWNER_NO_ROLLOUT,
                 "the pod has no controller: nothing to roll; use restart "
                 "or signal");
    assert_true(t->o->have_pod);
    assert_string_equal(t->o->pod.name, g_fake.pod);
}

/* A mirror pod's controller is its Node: not something to roll. */
static void test_unknown_kind(void **state)
{
    struct t *t = start(state, "bare-pod");
    cJSON *pod = object("pods", g_fake.pod);
    cJSON *refs = cJSON_Parse("[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"node-1\","
                              "\"uid\":\"0b7e\",\"controller\":true}]");

    cJSON_AddItemToObject(cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "ownerReferences",
                          refs);
    put_object("pods", pod);
    cJSON_Delete(pod);
    resolve(t);
    expect_error(t, OWNER_NO_ROLLOUT, "is controlled by Node node-1 (v1), which cannot be rolled");
    expect_error(t, OWNER_NO_ROLLOUT, "use --action restart or signal");
}

/* ---- what the pod tells ---- */

/* Non-controller ownerReferences are ignored; annotations and subPath
 * mounts of updating volumes are reported. */
static void test_pod_details(void **state)
{
    struct t *t = start(state, "deployment");
    cJSON *pod = object("pods", g_fake.pod);
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
    cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
    cJSON *refs = cJSON_GetObjectItemCaseSensitive(meta, "ownerReferences");
    cJSON *app = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(spec, "containers"), 0);
    const struct owner_mount *m;

    cJSON_InsertItemInArray(refs, 0,
                            cJSON_Parse("{\"apiVersion\":\"apps/v1\",\"kind\":"
                                        "\"Deployment\",\"name\":\"decoy\",\"uid\":\"d\"}"));
    cJSON_ReplaceItemInObjectCaseSensitive(
        meta, "annotations",
        cJSON_Parse("{\"reload-agent.io/config-hash\":\"abc\",\"other\":\"x\"}"));
    cJSON_AddItemToObject(spec, "volumes",
                          cJSON_Parse("[{\"name\":\"cfg\",\"configMap\":{\"name\":\"app\"}},"
                                      "{\"name\":\"tls\",\"secret\":{\"secretName\":\"tls\"}},"
                                      "{\"name\":\"scratch\",\"emptyDir\":{}}]"));
    cJSON_AddItemToObject(
        app, "volumeMounts",
        cJSON_Parse(
            "[{\"name\":\"cfg\",\"mountPath\":\"/etc/app/app.conf\",\"subPath\":\"app.conf\"},"
            "{\"name\":\"cfg\",\"mountPath\":\"/etc/cfg\"},"
            "{\"name\":\"scratch\",\"mountPath\":\"/tmp/x\",\"subPath\":\"x\"}]"));
    cJSON_AddItemToObject(
        spec, "initContainers",
        cJSON_Parse(
            "[{\"name\":\"init\",\"volumeMounts\":[{\"name\":\"tls\",\"mountPath\":\"/tls/key\","
            "\"subPathExpr\":\"$(POD_NAME).key\"}]}]"));
    put_object("pods", pod);
    cJSON_Delete(pod);

    resolve(t);
    expect_workload(t, "Deployment", "deployments", "apps/v1", "web", STRATEGIC);
    assert_string_equal(owner_pod_annotation(t->o, "reload-agent.io/config-hash"), "abc");
    assert_string_equal(owner_pod_annotation(t->o, "other"), "x");
    assert_null(owner_pod_annotation(t->o, "absent"));
    assert_int_equal(t->o->pod.nsubpath_mounts, 2);
    m = &t->o->pod.subpath_mounts[0];
    assert_string_equal(m->container, "init");
    assert_string_equal(m->volume, "tls");
    assert_string_equal(m->mount_path, "/tls/key");
    m = &t->o->pod.subpath_mounts[1];
    assert_string_equal(m->container, "app");
    assert_string_equal(m->volume, "cfg");
    assert_string_equal(m->mount_path, "/etc/app/app.conf");
}

/* A ReplicaSet recreated under the same name is not the pod's owner. */
static void test_uid_mismatch(void **state)
{
    struct t *t = start(state, "deployment");
    cJSON *rs = object("replicasets", "web-5d8f7c9b4");

    cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(rs, "metadata"), "uid",
                                           cJSON_CreateString("new-uid-1"));
    put_object("replicasets", rs);
    cJSON_Delete(rs);
    resolve(t);
    expect_error(t, OWNER_API_ERROR, "ReplicaSet web-5d8f7c9b4 has uid new-uid-1, but pod ");
    expect_error(t, OWNER_API_ERROR, "(recreated?)");
}

/* ---- API errors ---- */

static void test_forbidden_replicaset(void **state)
{
    struct t *t = start(state, "deployment");

    ctl_ok("POST", "/faults",
           "{\"method\":\"GET\",\"path_regex\":\"/replicasets/\",\"status\":403}");
    resolve(t);
    expect_error(t, OWNER_API_ERROR, "cannot get ReplicaSet web-5d8f7c9b4: ");
    expect_error(t, OWNER_API_ERROR,
                 "RBAC: the service account needs verb \"get\" on resource "
                 "\"replicasets\" in API group \"apps\"");
    assert_true(t->o->have_pod);
}

static void test_pod_not_found(void **state)
{
    struct t *t = start(state, "deployment");

    kube_destroy(t->k);
    assert_int_equal(make_kube(t, "ghost"), 0);
    resolve(t);
    expect_error(t, OWNER_API_ERROR, "cannot get pod ghost: pods \"ghost\" not found");
    assert_false(t->o->have_pod);
}

static void stop_loop(uv_timer_t *h) { uv_stop(h->loop); }

/* kube_destroy in the middle of the chain: the callback never runs and the
 * state is freed (the sanitizer build checks for leaks). */
static void test_cancel_mid_chain(void **state)
{
    struct t *t = start(state, "deployment");
    char paths[1024];
    int i;

    ctl_ok("POST", "/faults", "{\"path_regex\":\"/replicasets/\",\"delay_ms\":3000}");
    assert_int_equal(owner_resolve(t->k, on_owner, t), 0);
    for (i = 0; i < 50; i++) { /* until the ReplicaSet was asked for (at most 5 s) */
        uv_timer_start(&t->aux, stop_loop, 100, 0);
        uv_run(&t->loop, UV_RUN_DEFAULT);
        request_paths(paths, sizeof paths);
        if (strstr(paths, "/replicasets/")) break;
    }
    assert_true(i < 50);
    kube_destroy(t->k);
    t->k = NULL;
    uv_run(&t->loop, UV_RUN_NOWAIT);
    assert_int_equal(t->calls, 0);
    assert_null(t->o);
}

static int group_setup(void **state)
{
    (void)state;
    no_proxy_env();
    if (make_tmpdir(g_dir, sizeof g_dir, "test_owner", 0) != 0) return -1;
    snprintf(g_state, sizeof g_state, "%s/fake", g_dir);
    log_configure(RA_LOG_ERROR, RA_LOG_FORMAT_TEXT);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    return remove_tmpdir(g_dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_deployment, teardown),
        cmocka_unit_test_teardown(test_statefulset, teardown),
        cmocka_unit_test_teardown(test_daemonset, teardown),
        cmocka_unit_test_teardown(test_rollout, teardown),
        cmocka_unit_test_teardown(test_rollout_workload_ref, teardown),
        cmocka_unit_test_teardown(test_rollout_workload_ref_other, teardown),
        cmocka_unit_test_teardown(test_rollout_workload_ref_unreadable, teardown),
        cmocka_unit_test(test_kind_table),
        cmocka_unit_test_teardown(test_paused_deployment, teardown),
        cmocka_unit_test_teardown(test_ondelete_statefulset, teardown),
        cmocka_unit_test_teardown(test_ondelete_daemonset, teardown),
        cmocka_unit_test_teardown(test_job, teardown),
        cmocka_unit_test_teardown(test_cronjob, teardown),
        cmocka_unit_test_teardown(test_orphan_replicaset, teardown),
        cmocka_unit_test_teardown(test_bare_pod, teardown),
        cmocka_unit_test_teardown(test_unknown_kind, teardown),
        cmocka_unit_test_teardown(test_pod_details, teardown),
        cmocka_unit_test_teardown(test_uid_mismatch, teardown),
        cmocka_unit_test_teardown(test_forbidden_replicaset, teardown),
        cmocka_unit_test_teardown(test_pod_not_found, teardown),
        cmocka_unit_test_teardown(test_cancel_mid_chain, teardown),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
