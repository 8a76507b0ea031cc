/*
 * test_kube.c - tests of the Kubernetes API client (kube/kube.c) against
 * the fake API server tests/lib/fakeapi.py, started once as a child process
 * (real HTTPS on 127.0.0.1 and ::1 with its own CA) and stopped by PID. Its
 * control API (plain HTTP) injects faults, rotates the token, closes the
 * listener and reports the requests it saw, so every retry is checked on
 * the server side too. Each test runs a real libuv loop, bounded by a
 * deadline, and checks uv_loop_close() == 0 at the end.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <curl/curl.h>

#include "net/httpc.h"
#include "kube/kevents.h"
#include "kube/kube.h"
#include "base/log.h"

#define RUN_LIMIT_MS 30000 /* no test loop may run longer than this */

#include "tests/fakeapi_client.h"
#include "tests/helpers.h"

static char g_dir[64];

/* The requests the fake saw for path, in order (a JSON array to free). */
static cJSON *requests_for(const char *path)
{
    cJSON *all = ctl("GET", "/requests", NULL), *out = cJSON_CreateArray(), *r;

    assert_non_null(all);
    cJSON_ArrayForEach(r, all)
    {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(r, "path");

        if (cJSON_IsString(p) && strcmp(p->valuestring, path) == 0)
            cJSON_AddItemToArray(out, cJSON_Duplicate(r, 1));
    }
    cJSON_Delete(all);
    return out;
}

static long req_status(const cJSON *reqs, int i)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(reqs, i), "status");

    return cJSON_IsNumber(s) ? (long)s->valuedouble : -1;
}

static double req_time(const cJSON *reqs, int i)
{
    return cJSON_GetNumberValue(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(reqs, i), "time"));
}

static void read_file(const char *path, char *out, size_t n)
{
    FILE *fp = fopen(path, "r");
    size_t got;

    assert_non_null(fp);
    got = fread(out, 1, n - 1, fp);
    out[got] = '\0';
    fclose(fp);
}

/* ---- per-test loop and client ---- */

struct t {
    uv_loop_t loop;
    uv_timer_t tick; /* wakes uv_run(ONCE) so the deadline is checked */
    uv_timer_t aux;  /* for a test's own use; closed in teardown */
    struct httpc *hc;
    struct kube *k;
    char pod_path[256];
    char token_copy[300]; /* a token file of the test's own */
    /* the last response */
    int calls, cancels;
    int ok, tries;
    long status;
    char *body;
    char error[2048];
    int error_null;
    uint64_t started, finished; /* uv_hrtime */
};

static void on_resp(void *ud, const struct kube_resp *r)
{
    struct t *t = ud;

    t->calls++;
    t->ok = r->ok;
    t->status = r->status;
    t->tries = r->tries;
    free(t->body);
    t->body = strndup(r->body, r->body_len);
    t->error_null = r->error == NULL;
    snprintf(t->error, sizeof t->error, "%s", r->error ? r->error : "");
    t->finished = uv_hrtime();
}

static void on_cancel(void *ud) { ((struct t *)ud)->cancels++; }

static void on_tick(uv_timer_t *h) { (void)h; }

/* Runs the loop until t->calls reaches calls (limit_ms at most). */
static void await_calls(struct t *t, int calls, uint64_t limit_ms)
{
    run_until_count(&t->loop, &t->calls, calls, limit_ms);
    assert_int_equal(t->calls, calls);
}

/* Fails with the client's error text unless the last response was status. */
static void expect_status(const struct t *t, long status)
{
    if (!t->ok || t->status != status)
        fail_msg("want HTTP %ld, got ok=%d status=%ld tries=%d error=%s", status, t->ok, t->status,
                 t->tries, t->error);
}

/* Responses by HTTP code, pushed by the client's counter hook (one test
 * at a time). */
static struct {
    long code[16];
    uint64_t n[16];
    int count;
} g_codes;

static void count_response(void *ud, long code)
{
    int i;

    (void)ud;
    for (i = 0; i < g_codes.count; i++)
        if (g_codes.code[i] == code) break;
    if (i == g_codes.count) {
        if (g_codes.count == 16) return;
        g_codes.code[g_codes.count++] = code;
    }
    g_codes.n[i]++;
}

static int make_kube(struct t *t, const struct kube_config *cfg)
{
    char err[512];
    int r = kube_create(&t->loop, t->hc, cfg, &t->k, err, sizeof err);
    struct kube_counters counters = {.response = count_response};

    if (r != 0)
        fprintf(stderr, "kube_create: %s\n", err);
    else
        kube_set_counters(t->k, &counters);
    memset(&g_codes, 0, sizeof g_codes);
    return r;
}

static struct kube_config default_cfg(char *api, size_t n)
{
    snprintf(api, n, "https://127.0.0.1:%d", g_fake.port);
    return (struct kube_config){.api = api,
                                .token_file = g_fake.token_file,
                                .ca_file = g_fake.ca,
                                .pod_name = g_fake.pod,
                                .namespace_ = g_fake.ns};
}

static int setup(void **state)
{
    struct t *t = calloc(1, sizeof *t);
    char api[64];
    struct kube_config cfg = default_cfg(api, sizeof api);

    if (!t || uv_loop_init(&t->loop) != 0 || httpc_create(&t->loop, &t->hc) != 0) return -1;
    uv_timer_init(&t->loop, &t->tick);
    uv_timer_start(&t->tick, on_tick, 50, 50);
    uv_timer_init(&t->loop, &t->aux);
    snprintf(t->pod_path, sizeof t->pod_path, "/api/v1/namespaces/%s/pods/%s", g_fake.ns,
             g_fake.pod);
    snprintf(t->token_copy, sizeof t->token_copy, "%s/token-copy", g_dir);
    ctl_ok("POST", "/listener", "{\"up\":true}");
    ctl_ok("POST", "/faults/clear", "");
    ctl_ok("POST", "/requests/clear", "");
    *state = t;
    return make_kube(t, &cfg);
}

static void closed(void *ud) { *(int *)ud = 1; }

static int teardown(void **state)
{
    struct t *t = *state;
    int hc_closed = 0, i;

    kube_destroy(t->k);
    httpc_close(t->hc, closed, &hc_closed);
    uv_close((uv_handle_t *)&t->tick, NULL);
    uv_close((uv_handle_t *)&t->aux, NULL);
    for (i = 0; i < 1000 && uv_run(&t->loop, UV_RUN_NOWAIT) != 0; i++) usleep(1000);
    assert_int_equal(hc_closed, 1);
    assert_int_equal(uv_loop_close(&t->loop), 0);
    free(t->body);
    free(t);
    return 0;
}

/* Replaces t->k with a client made from cfg. */
static void remake(struct t *t, const struct kube_config *cfg)
{
    kube_destroy(t->k);
    t->k = NULL;
    assert_int_equal(make_kube(t, cfg), 0);
}

static void get(struct t *t, const char *path)
{
    struct kube_req req = {.verb = "get",
                           .resource = "pods",
                           .group = "",
                           .method = "GET",
                           .path = path,
                           .on_cancel = on_cancel};

    t->started = uv_hrtime();
    assert_int_equal(kube_request(t->k, &req, on_resp, t), 0);
}

static void fault(const char *json) { ctl_ok("POST", "/faults", json); }

static uint64_t elapsed_ms(const struct t *t) { return (t->finished - t->started) / 1000000ULL; }

static uint64_t code_count(const struct kube *k, long code)
{
    int i;

    (void)k;
    for (i = 0; i < g_codes.count; i++)
        if (g_codes.code[i] == code) return g_codes.n[i];
    return 0;
}

/* ---- configuration ---- */

static void expect_create_error(struct t *t, const struct kube_config *cfg, const char *want1,
                                const char *want2)
{
    char err[512] = "";
    struct kube *k = NULL;

    assert_int_equal(kube_create(&t->loop, t->hc, cfg, &k, err, sizeof err), -EINVAL);
    assert_null(k);
    if (!strstr(err, want1) || (want2 && !strstr(err, want2)))
        fail_msg("error \"%s\" does not name \"%s\" / \"%s\"", err, want1, want2 ? want2 : "");
}

static void test_create_errors(void **state)
{
    struct t *t = *state;
    char api[64], missing[300], empty[300];
    struct kube_config cfg = default_cfg(api, sizeof api);

    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    unsetenv("POD_NAME");
    unsetenv("POD_NAMESPACE");
    cfg.api = NULL;
    expect_create_error(t, &cfg, "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set",
                        "--kube-api");
    setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
    expect_create_error(t, &cfg, "KUBERNETES_SERVICE_PORT", NULL);
    unsetenv("KUBERNETES_SERVICE_HOST");

    cfg = default_cfg(api, sizeof api);
    cfg.api = "ftp://127.0.0.1";
    expect_create_error(t, &cfg, "--kube-api ftp://127.0.0.1", "https://");
    cfg.api = "http://127.0.0.1:8001";
    expect_create_error(t, &cfg, "--kube-api http://127.0.0.1:8001", "unencrypted");

    cfg = default_cfg(api, sizeof api);
    cfg.pod_name = NULL;
    expect_create_error(t, &cfg, "--pod-name", "POD_NAME");
    cfg.pod_name = "Bad/Name";
    expect_create_error(t, &cfg, "Bad/Name", "not a valid");
    /* a DNS-1123 subdomain has no empty label, nor one that starts or ends
     * with '-' (apimachinery's IsDNS1123Subdomain, kube/k8sname.h) */
    cfg.pod_name = "a..b";
    expect_create_error(t, &cfg, "a..b", "not a valid");
    cfg.pod_name = "a.-b";
    expect_create_error(t, &cfg, "a.-b", "not a valid");

    cfg = default_cfg(api, sizeof api);
    snprintf(missing, sizeof missing, "%s/no-such-file", g_dir);
    cfg.token_file = missing;
    expect_create_error(t, &cfg, missing, "token file");
    cfg = default_cfg(api, sizeof api);
    cfg.ca_file = missing;
    expect_create_error(t, &cfg, missing, "CA file");

    cfg = default_cfg(api, sizeof api);
    snprintf(empty, sizeof empty, "%s/empty-token", g_dir);
    write_file(empty, " \n\t\n");
    cfg.token_file = empty;
    expect_create_error(t, &cfg, empty, "empty");

    cfg = default_cfg(api, sizeof api);
    cfg.namespace_ = NULL;
    cfg.sa_dir = g_dir; /* holds no "namespace" file */
    expect_create_error(t, &cfg, "POD_NAMESPACE", "/namespace");
    cfg.namespace_ = "Not_A_Namespace";
    expect_create_error(t, &cfg, "Not_A_Namespace", NULL);
}

/* KUBERNETES_SERVICE_HOST=::1 becomes https://[::1]:PORT, and the service
 * account directory supplies the namespace (trimmed), token and CA. */
static void test_in_cluster_config(void **state)
{
    struct t *t = *state;
    char sa[300], path[400], port[16], want[64], tok[4096], cmd[1024];
    struct kube_config cfg = {.sa_dir = sa};

    snprintf(sa, sizeof sa, "%s/sa", g_dir);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s' '%s/ca.crt'", sa, g_fake.ca, sa);
    assert_int_equal(system(cmd), 0);
    read_file(g_fake.token_file, tok, sizeof tok);
    snprintf(path, sizeof path, "%s/token", sa);
    write_file(path, tok);
    snprintf(path, sizeof path, "%s/namespace", sa);
    snprintf(cmd, sizeof cmd, "  %s\n", g_fake.ns);
    write_file(path, cmd);
    snprintf(port, sizeof port, "%d", g_fake.port);
    setenv("KUBERNETES_SERVICE_HOST", "::1", 1);
    setenv("KUBERNETES_SERVICE_PORT", port, 1);
    setenv("POD_NAME", g_fake.pod, 1);
    unsetenv("POD_NAMESPACE");
    remake(t, &cfg);
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    unsetenv("POD_NAME");
    snprintf(want, sizeof want, "https://[::1]:%d", g_fake.port);
    assert_string_equal(kube_base_url(t->k), want);
    assert_string_equal(kube_namespace(t->k), g_fake.ns);
    assert_string_equal(kube_pod_name(t->k), g_fake.pod);
    snprintf(path, sizeof path, "%s/token", sa);
    assert_string_equal(kube_token_path(t->k), path);
    get(t, t->pod_path);
    await_calls(t, 1, RUN_LIMIT_MS);
    assert_int_equal(t->ok, 1);
    expect_status(t, 200);

    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    setenv("POD_NAMESPACE", "from-env", 1);
    setenv("POD_NAME", g_fake.pod, 1);
    remake(t, &cfg);
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    unsetenv("POD_NAMESPACE");
    unsetenv("POD_NAME");
    assert_string_equal(kube_base_url(t->k), "https://10.96.0.1:443");
    assert_string_equal(kube_namespace(t->k), "from-env");
}

/* ---- requests ---- */

static void test_get_ok(void **state)
{
    struct t *t = *state;
    cJSON *pod, *reqs;
    const cJSON *r0;

    get(t, t->pod_path);
    await_calls(t, 1, RUN_LIMIT_MS);
    assert_int_equal(t->ok, 1);
    expect_status(t, 200);
    assert_int_equal(t->tries, 1);
    assert_true(t->error_null);
    pod = cJSON_Parse(t->body);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "name")),
                        g_fake.pod);
    cJSON_Delete(pod);
    reqs = requests_for(t->pod_path);
    assert_int_equal(cJSON_GetArraySize(reqs), 1);
    r0 = cJSON_GetArrayItem(reqs, 0);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r0, "authorized")));
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r0, "user_agent")),
                        "reload-agent");
    cJSON_Delete(reqs);
    assert_int_equal(code_count(t->k, 200), 1);
}

static void test_patch_body_and_type(void **state)
{
    struct t *t = *state;
    char path[256], q[256];
    const char *body = "{\"spec\":{\"template\":{\"metadata\":{\"annotations\":"
                       "{\"reload-agent.io/config-hash\":\"abc123\"}}}}}";
    struct kube_req req = {.verb = "patch",
                           .resource = "deployments",
                           .group = "apps",
                           .method = "PATCH",
                           .path = path,
                           .content_type = "application/strategic-merge-patch+json",
                           .body = body,
                           .body_len = strlen(body)};
    cJSON *obj, *reqs;
    const cJSON *ann;

    snprintf(path, sizeof path, "/apis/apps/v1/namespaces/%s/deployments/web", g_fake.ns);
    assert_int_equal(kube_request(t->k, &req, on_resp, t), 0);
    await_calls(t, 1, RUN_LIMIT_MS);
    expect_status(t, 200);
    reqs = requests_for(path);
    assert_int_equal(cJSON_GetArraySize(reqs), 1);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            cJSON_GetArrayItem(reqs, 0), "content_type")),
                        "application/strategic-merge-patch+json");
    cJSON_Delete(reqs);
    snprintf(q, sizeof q, "/object?resource=deployments&name=web");
    obj = ctl("GET", q, NULL);
    ann = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "spec"),
                                                 "template"),
                "metadata"),
            "annotations"),
        "reload-agent.io/config-hash");
    assert_string_equal(cJSON_GetStringValue(ann), "abc123");
    cJSON_Delete(obj);
}

static void test_bad_arguments(void **state)
{
    struct t *t = *state;
    struct kube_req req = {.method = "GET", .path = "api/v1/no-slash"};

    assert_int_equal(kube_request(t->k, &req, on_resp, t), -EINVAL);
    req.path = NULL;
    assert_int_equal(kube_request(t->k, &req, on_resp, t), -EINVAL);
    req.path = "/api";
    req.method = NULL;
    assert_int_equal(kube_request(t->k, &req, on_resp, t), -EINVAL);
    uv_run(&t->loop, UV_RUN_NOWAIT);
    assert_int_equal(t->calls, 0);
}

static void test_token_whitespace_trimmed(void **state)
{
    struct t *t = *state;
    char api[64], tok[4096], padded[4200];
    struct kube_config cfg = default_cfg(api, sizeof api);

    read_file(g_fake.token_file, tok, sizeof tok);
    snprintf(padded, sizeof padded, "\n  %s \n\n", tok);
    write_file(t->token_copy, padded);
    cfg.token_file = t->token_copy;
    remake(t, &cfg);
    get(t, t->pod_path);
    await_calls(t, 1, RUN_LIMIT_MS);
    expect_status(t, 200);
    assert_int_equal(t->tries, 1);
}

/* The server's token changes while the client holds the old one: one 401,
 * one re-read, one successful retry. */
static void test_401_rereads_token(void **state)
{
    struct t *t = *state;
    cJSON *reqs;

    ctl_ok("POST", "/token", "{\"token\":\"rotated-token-1\"}");
    get(t, t->pod_path);
    await_calls(t, 1, RUN_LIMIT_MS);
    expect_status(t, 200);
    assert_int_equal(t->tries, 2);
    reqs = requests_for(t->pod_path);
    assert_int_equal(cJSON_GetArraySize(reqs), 2);
    assert_int_equal(req_status(reqs, 0), 401);
    assert_int_equal(req_status(reqs, 1), 200);
    cJSON_Delete(reqs);
    assert_int_equal(code_count(t->k, 401), 1);
}

static void test_401_twice_is_final(void **state)
{
    struct t *t = *state;
    char api[64], want[512];
    struct kube_config cfg = default_cfg(api, sizeof api);
    cJSON *reqs;

    write_file(t->token_copy, "not-the-token\n");
    cfg.token_file = t->token_copy;
    remake(t, &cfg);
    get(t, t->pod_path);
    await_calls(t, 1, RUN_LIMIT_MS);
    assert_int_equal(t->ok, 1);
    expect_status(t, 401);
    assert_int_equal(t->tries, 2);
    snprintf(want, sizeof want, "Unauthorized: the token in %s was rejected", t->token_copy);
    assert_string_equal(t->error, want);
    reqs = requests_for(t->pod_path);
    assert_int_equal(cJSON_GetArraySize(reqs), 2);
    cJSON_Delete(reqs);
}

/* kube_token_stale makes the next request use the new file content at once. */
static void test_token_stale(void **state)
{
    struct t *t = *state;
    char api[64], tok[4096];
    struct kube_config cfg = default_cfg(api, sizeof api);
    cJSON *reqs;

    read_file(g_fake.token_file, tok, sizeof tok);
    write_file(t->token_copy, tok);
    cfg.token_file = t->token_copy;
    remake(t, &cfg);
    ctl_ok("POST", "/token", "{\"token\":\"rotated-token-2\"}");
    write_file(t->token_copy, "rotated-token-2");
    kube_token_stale(t->k);
    get(t, t->pod_path);
    await_calls(t, 1, RUN_LIMIT_MS);
    expect_status(t, 200);
    assert_int_equal(t->tries, 1);
    reqs = requests_for(t->pod_path);
    assert_int_equal(cJSON_GetArraySize(reqs), 1);
    cJSON_Delete(reqs);
}

static void test_403_names_rbac_rule(void **state)
{
    struct t *t = *state;
    char path[256], f[512];
    const char *body = "{}";
    struct kube_req req = {.verb = "patch",
                           .resource = "deployments",
                           .group = "apps",
                           .method = "PATCH",
                           .path = path,
                           .content_type = "application/merge-patch+json",
                           .body = body,
                           .body_len = 2};

    snprintf(path, sizeof path, "/apis/apps/v1/namespaces/%s/deployments/web", g_fake.ns);
    snprintf(f, sizeof f,
             "{\"method\":\"PATCH\",\"path_regex\":\"/deployments/web$\",\"status\":403}");
    fault(f);
    assert_int_equal(kube_request(t->k, &req, on_resp, t), 0);
    await_calls(t, 1, RUN_LIMIT_MS);
    expect_status(t, 403);
    assert_int_equal(t->tries, 1);
    assert_non_null(strstr(t->error, "deployments.apps \"web\" is forbidden"));
    assert_non_null(
        strstr(t->error,
               "RBAC: the service account needs verb \"patch\" on resource "
               "\"deployments\" in API group \"apps\" (grant it the Role in manifests/role.yaml"));
    /* the command that grants it, for the ServiceAccount the API server named */
    char fix[512];
    snprintf(fix, sizeof fix,
             "kubectl -n %s apply -f manifests/role.yaml && kubectl -n %s create rolebinding "
             "reload-agent --role=reload-agent --serviceaccount=%s:",
             g_fake.ns, g_fake.ns, g_fake.ns);
    assert_non_null(strstr(t->error, fix));
}

/* Issue 18 item 4: a 403 of a fast-sync request names fast sync's Role:
 * what `reload-agent inject -o rbac` writes, else the template and its
 * binding for the ServiceAccount the API server named, and the policy. */
static void test_403_fast_sync_names_its_role(void **state)
{
    struct t *t = *state;
    char path[256], f[512];
    const char *body = "{\"metadata\":{\"annotations\":{\"reload-agent.io/sync\":\"7\"}}}";
    struct kube_req req = {.verb = "patch",
                           .resource = "pods",
                           .group = "",
                           .method = "PATCH",
                           .path = path,
                           .content_type = "application/merge-patch+json",
                           .body = body,
                           .body_len = strlen(body),
                           .role = KUBE_ROLE_FAST_SYNC};

    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/web-1", g_fake.ns);
    snprintf(f, sizeof f, "{\"method\":\"PATCH\",\"path_regex\":\"/pods/web-1$\",\"status\":403}");
    fault(f);
    assert_int_equal(kube_request(t->k, &req, on_resp, t), 0);
    await_calls(t, 1, RUN_LIMIT_MS);
    expect_status(t, 403);
    assert_non_null(strstr(t->error, "RBAC: the service account needs verb \"patch\" on resource "
                                     "\"pods\" in API group \"\" (grant it fast sync's Role, with "
                                     "the objects as resourceNames: `reload-agent inject -o rbac` "
                                     "writes it for the workload; or kubectl -n "));
    char fix[512];
    snprintf(fix, sizeof fix,
             "kubectl -n %s apply -f manifests/fast-sync/role.yaml && kubectl -n %s create "
             "rolebinding reload-agent-fast-sync --role=reload-agent-fast-sync "
             "--serviceaccount=%s:",
             g_fake.ns, g_fake.ns, g_fake.ns);
    if (!strstr(t->error, fix)) fail_msg("error: %s", t->error);
    assert_non_null(strstr(t->error, "; and manifests/fast-sync/policy.yaml once per cluster)"));
    assert_null(strstr(t->error, "manifests/role.yaml"));
}

static void test_404_message(void **state)
{
    struct t *t = *state;
    char path[256];

    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/no-such-pod", g_fake.ns);
    get(t, path);
    await_calls(t, 1, RUN_LIMIT_MS);
    expect_status(t, 404);
    assert_int_equal(t->tries, 1);
    assert_string_equal(t->error, "pods \"no-such-pod\" not found");
    assert_int_equal(code_count(t->k, 404), 1);
}

/* An API message is untrusted text in an error: its first line only,
 * under the one-line policy of base/text.h (a terminal escape, a tab and a
 * C1 NEL are escaped, not turned into spaces), trailing blanks dropped. */
static void test_api_message_one_line(void **state)
{
    struct t *t = *state;
    char path[256];

    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/odd", g_fake.ns);
    fault("{\"method\":\"GET\",\"path_regex\":\"/pods/odd$\",\"status\":404,"
          "\"message\":\"pods \\\"odd\\\" \\u001b[31mnot\\tfound \\u0085end \\r\\n"
          "level=error msg=forged\"}");
    get(t, path);
    await_calls(t, 1, RUN_LIMIT_MS);
    expect_status(t, 404);
    assert_string_equal(t->error, "pods \"odd\" \\x1b[31mnot\\x09found \\u0085end");
}

/* APF-style 429: plain text, Retry-After: 1. */
static void test_429_plain_retry_after(void **state)
{
    struct t *t = *state;
    cJSON *reqs;

    fault(
        "{\"path_regex\":\"/pods/\",\"status\":429,\"plain\":true,\"retry_after\":1,\"count\":1}");
    get(t, t->pod_path);
    await_calls(t, 1, RUN_LIMIT_MS);
    expect_status(t, 200);
    assert_int_equal(t->tries, 2);
    assert_true(elapsed_ms(t) >= 1000);
    reqs = requests_for(t->pod_path);
    assert_int_equal(cJSON_GetArraySize(reqs), 2);
    assert_int_equal(req_status(reqs, 0), 429);
    assert_true(req_time(reqs, 1) - req_time(reqs, 0) >= 0.99);
    cJSON_Delete(reqs);
}

/* The plain-text body becomes the error when retries run out. */
static void test_429_gives_up(void **state)
{
    struct t *t = *state;
    cJSON *reqs;

    fault(
        "{\"path_regex\":\"/pods/\",\"status\":429,\"plain\":true,\"retry_after\":0,\"count\":50}");
    get(t, t->pod_path);
    await_calls(t, 1, RUN_LIMIT_MS);
    assert_int_equal(t->ok, 1);
    expect_status(t, 429);
    assert_int_equal(t->tries, KUBE_MAX_TRIES);
    assert_string_equal(t->error, "Too many requests, please try again later. (gave up after 6 "
                                  "attempts)");
    reqs = requests_for(t->pod_path);
    assert_int_equal(cJSON_GetArraySize(reqs), KUBE_MAX_TRIES);
    cJSON_Delete(reqs);
    assert_int_equal(code_count(t->k, 429), KUBE_MAX_TRIES);
}

/* 503 without Retry-After: exponential backoff from 200 ms (75..125 %). */
static void test_503_backoff(void **state)
{
    struct t *t = *state;
    cJSON *reqs;

    fault("{\"path_regex\":\"/pods/\",\"status\":503,\"count\":2}");
    get(t, t->pod_path);
    await_calls(t, 1, RUN_LIMIT_MS);
    expect_status(t, 200);
    assert_int_equal(t->tries, 3);
    reqs = requests_for(t->pod_path);
    assert_int_equal(cJSON_GetArraySize(reqs), 3);
    assert_int_equal(req_status(reqs, 0), 503);
    assert_int_equal(req_status(reqs, 1), 503);
    assert_true(req_time(reqs, 1) - req_time(reqs, 0) >= 0.149);
    assert_true(req_time(reqs, 2) - req_time(reqs, 1) >= 0.299);
    cJSON_Delete(reqs);
}

static void test_500_needs_retry_after(void **state)
{
    struct t *t = *state;

    fault("{\"path_regex\":\"/pods/\",\"status\":500,\"count\":1}");
    get(t, t->pod_path);
    await_calls(t, 1, RUN_LIMIT_MS);
    expect_status(t, 500);
    assert_int_equal(t->tries, 1);
    assert_string_equal(t->error, "Internal error occurred: injected fault");

    fault("{\"path_regex\":\"/pods/\",\"status\":500,\"retry_after\":0,\"count\":1}");
    get(t, t->pod_path);
    await_calls(t, 2, RUN_LIMIT_MS);
    expect_status(t, 200);
    assert_int_equal(t->tries, 2);
}

static void test_dropped_connections_retried(void **state)
{
    struct t *t = *state;
    cJSON *reqs;

    fault("{\"path_regex\":\"/pods/\",\"drop\":true,\"count\":2}");
    get(t, t->pod_path);
    await_calls(t, 1, RUN_LIMIT_MS);
    expect_status(t, 200);
    assert_int_equal(t->tries, 3);
    reqs = requests_for(t->pod_path);
    assert_int_equal(cJSON_GetArraySize(reqs), 3);
    cJSON_Delete(reqs);
    assert_int_equal(code_count(t->k, 0), 2);
}

static void listener_up(uv_timer_t *h)
{
    (void)h;
    ctl_ok("POST", "/listener", "{\"up\":true}");
}

static void test_listener_down_then_up(void **state)
{
    struct t *t = *state;

    ctl_ok("POST", "/listener", "{\"up\":false}");
    uv_update_time(t->aux.loop); /* ctl_ok blocked: do not start the 3 s from a stale clock */
    uv_timer_start(&t->aux, listener_up, 3000, 0);
    get(t, t->pod_path);
    await_calls(t, 1, RUN_LIMIT_MS);
    assert_int_equal(t->ok, 1);
    expect_status(t, 200);
    assert_true(t->tries >= 2 && t->tries <= KUBE_MAX_TRIES);
    assert_true(elapsed_ms(t) >= 3000);
    assert_int_equal(code_count(t->k, 0), (uint64_t)t->tries - 1);
}

/* A timeout is final: the request may have been applied. */
static void test_timeout_not_retried(void **state)
{
    struct t *t = *state;
    char api[64];
    struct kube_config cfg = default_cfg(api, sizeof api);

    cfg.timeout_ms = 1000;
    remake(t, &cfg);
    fault("{\"path_regex\":\"/pods/\",\"delay_ms\":15000,\"count\":1}");
    get(t, t->pod_path);
    await_calls(t, 1, RUN_LIMIT_MS);
    assert_int_equal(t->ok, 0);
    assert_int_equal(t->tries, 1);
    assert_non_null(strstr(t->error, "timed out"));
    assert_true(elapsed_ms(t) >= 1000);
}

/* Slow (10 s): the default per-attempt timeout. */
static void test_timeout_default_10s_slow(void **state)
{
    struct t *t = *state;

    fault("{\"path_regex\":\"/pods/\",\"delay_ms\":15000,\"count\":1}");
    get(t, t->pod_path);
    await_calls(t, 1, RUN_LIMIT_MS);
    assert_int_equal(t->ok, 0);
    assert_int_equal(t->tries, 1);
    assert_non_null(strstr(t->error, "timed out"));
    assert_true(elapsed_ms(t) >= KUBE_TIMEOUT_MS);
}

/* A request's own max_tries 1 and timeout_ms: a 503 is its answer at
 * once (no retry inside), and a slow answer is given up after its own
 * timeout, not the client's 10 s (the sync service's election retries on
 * its own clock, sync/elect.c). */
static void test_one_attempt_own_timeout(void **state)
{
    struct t *t = *state;
    struct kube_req req = {.verb = "get",
                           .resource = "pods",
                           .group = "",
                           .method = "GET",
                           .path = t->pod_path,
                           .on_cancel = on_cancel,
                           .max_tries = 1,
                           .timeout_ms = 300};
    cJSON *reqs;

    fault("{\"path_regex\":\"/pods/\",\"status\":503,\"count\":1}");
    t->started = uv_hrtime();
    assert_int_equal(kube_request(t->k, &req, on_resp, t), 0);
    await_calls(t, 1, RUN_LIMIT_MS);
    expect_status(t, 503);
    assert_int_equal(t->tries, 1);
    reqs = requests_for(t->pod_path);
    assert_int_equal(cJSON_GetArraySize(reqs), 1);
    cJSON_Delete(reqs);

    fault("{\"path_regex\":\"/pods/\",\"delay_ms\":3000,\"count\":1}");
    t->started = uv_hrtime();
    assert_int_equal(kube_request(t->k, &req, on_resp, t), 0);
    await_calls(t, 2, RUN_LIMIT_MS);
    assert_int_equal(t->ok, 0);
    assert_int_equal(t->tries, 1);
    assert_non_null(strstr(t->error, "timed out"));
    assert_true(elapsed_ms(t) >= 300 && elapsed_ms(t) < 2500);
}

static void test_ca_bundle(void **state)
{
    struct t *t = *state;
    char api[64];
    struct kube_config cfg = default_cfg(api, sizeof api);

    cfg.ca_file = g_fake.ca_bundle; /* an unrelated CA first, then the right one */
    remake(t, &cfg);
    get(t, t->pod_path);
    await_calls(t, 1, RUN_LIMIT_MS);
    expect_status(t, 200);
}

static void test_wrong_ca(void **state)
{
    struct t *t = *state;
    char api[64];
    struct kube_config cfg = default_cfg(api, sizeof api);
    cJSON *reqs;

    cfg.ca_file = g_fake.other_ca;
    remake(t, &cfg);
    get(t, t->pod_path);
    await_calls(t, 1, RUN_LIMIT_MS);
    assert_int_equal(t->ok, 0);
    assert_int_equal(t->tries, 1);
    assert_non_null(strstr(t->error, "TLS verification against the CA file"));
    assert_non_null(strstr(t->error, g_fake.other_ca));
    reqs = requests_for(t->pod_path);
    assert_int_equal(cJSON_GetArraySize(reqs), 0);
    cJSON_Delete(reqs);
}

static void stop_loop(uv_timer_t *h) { uv_stop(h->loop); }

/* One request in flight, one waiting for its retry: both are cancelled,
 * neither callback runs, both on_cancel do, and the loop closes cleanly. */
static void test_destroy_cancels(void **state)
{
    struct t *t = *state;
    char path2[256];
    int i;
    cJSON *reqs;

    snprintf(path2, sizeof path2, "/api/v1/namespaces/%s/pods/other", g_fake.ns);
    fault("{\"path_regex\":\"/pods/other$\",\"status\":429,\"retry_after\":20,\"count\":1}");
    fault("{\"path_regex\":\"/pods/\",\"delay_ms\":3000,\"count\":1}");
    get(t, path2);
    get(t, t->pod_path);
    for (i = 0; i < 50; i++) { /* until the 429 was answered (at most 5 s) */
        uv_timer_start(&t->aux, stop_loop, 100, 0);
        uv_run(&t->loop, UV_RUN_DEFAULT);
        reqs = requests_for(path2);
        if (req_status(reqs, 0) == 429) i = 1000;
        cJSON_Delete(reqs);
    }
    assert_int_equal(i, 1001);
    assert_int_equal(httpc_active(t->hc), 1);
    kube_destroy(t->k);
    t->k = NULL;
    assert_int_equal(httpc_active(t->hc), 0);
    assert_int_equal(t->cancels, 2);
    uv_run(&t->loop, UV_RUN_NOWAIT);
    assert_int_equal(t->calls, 0);
}

/* ---- counters pushed by kevents ---- */

static int g_suppressed;

static void count_suppressed(void *ud)
{
    (void)ud;
    g_suppressed++;
}

/* Events over the rate limit are not sent, and each one is pushed to the
 * client's event_suppressed hook; the ones sent count as responses. */
static void test_kevents_suppressed_counted(void **state)
{
    struct t *t = *state;
    struct kube_counters counters = {.response = count_response,
                                     .event_suppressed = count_suppressed};
    struct kev_object pod = {"v1", "Pod", g_fake.pod, g_fake.ns, NULL};
    struct kevents *ev;
    char path[256], reason[32];
    uint64_t deadline;
    int i, n = 0;
    cJSON *reqs;

    g_suppressed = 0;
    kube_set_counters(t->k, &counters);
    assert_int_equal(kev_create(t->k, &ev), 0);
    kev_post(ev, &pod, "Normal", "Reloaded", "one");
    kev_post(ev, &pod, "Normal", "Reloaded", "the same reason again"); /* suppressed */
    assert_int_equal(g_suppressed, 1);
    for (i = 1; i <= KEV_BURST; i++) { /* the last one is over the burst */
        snprintf(reason, sizeof reason, "Reason%d", i);
        kev_post(ev, &pod, "Normal", reason, "burst");
    }
    assert_int_equal(g_suppressed, 2);
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/events", g_fake.ns);
    deadline = uv_hrtime() + 15000ULL * 1000000ULL;
    while (code_count(t->k, 201) < KEV_BURST && uv_hrtime() < deadline)
        uv_run(&t->loop, UV_RUN_ONCE);
    assert_int_equal(code_count(t->k, 201), KEV_BURST);
    reqs = requests_for(path);
    n = cJSON_GetArraySize(reqs);
    cJSON_Delete(reqs);
    assert_int_equal(n, KEV_BURST);
    kev_destroy(ev);
}

/* ---- main ---- */

/* The waiters of kube__wait_answer: woken once each by the next attempt
 * that got an HTTP status (never by one without), not when they stopped
 * waiting; a waiter that waits again from its cb waits for the answer
 * after; one that unwaits another waiter being woken keeps it asleep; a
 * waiter added twice is woken once; kube_destroy lets every waiter go. */
struct waiter_t {
    struct kube_waiter kw;
    int woken;
    int again;                 /* wait again from the cb */
    struct kube_waiter *other; /* unwait this from the cb */
    struct kube *k;
};

static void on_woken(struct kube_waiter *kw)
{
    struct waiter_t *w = (struct waiter_t *)kw;
    w->woken++;
    if (w->again) kube__wait_answer(w->k, kw);
    if (w->other) kube__unwait(w->other);
}

static void test_answer_wakes_waiters(void **state)
{
    struct t *t = *state;
    struct waiter_t w[4];
    memset(w, 0, sizeof w);
    for (int i = 0; i < 4; i++) {
        w[i].kw.cb = on_woken;
        w[i].k = t->k;
        kube__wait_answer(t->k, &w[i].kw);
    }
    kube__wait_answer(t->k, &w[0].kw); /* twice: still one wake */
    kube__unwait(&w[1].kw);
    kube__unwait(&w[1].kw); /* not waiting: a no-op */
    w[2].again = 1;
    w[3].other = &w[0].kw; /* w[3] is woken first (the last added) */
    kube__count_response(t->k, 0);
    for (int i = 0; i < 4; i++) assert_int_equal(w[i].woken, 0);
    kube__count_response(t->k, 503);
    assert_int_equal(w[0].woken, 0); /* unwaited by w[3] while being woken */
    assert_int_equal(w[1].woken, 0);
    assert_int_equal(w[2].woken, 1);
    assert_int_equal(w[3].woken, 1);
    kube__count_response(t->k, 200);
    assert_int_equal(w[2].woken, 2); /* it waited again */
    assert_int_equal(w[3].woken, 1);
    w[2].again = 0;
    kube__count_response(t->k, 200);
    assert_int_equal(w[2].woken, 3);
    kube__count_response(t->k, 200);
    assert_int_equal(w[2].woken, 3);
    kube__wait_answer(t->k, &w[1].kw);
    kube_destroy(t->k); /* lets w[1] go: nothing points at it after */
    t->k = NULL;
    assert_null(w[1].kw.pprev);
    char api[64];
    struct kube_config cfg = default_cfg(api, sizeof api);
    assert_int_equal(make_kube(t, &cfg), 0);
}

static int group_setup(void **state)
{
    char st[300];

    (void)state;
    no_proxy_env();
    if (make_tmpdir(g_dir, sizeof g_dir, "test_kube", 0) != 0) return -1;
    snprintf(st, sizeof st, "%s/fake", g_dir);
    log_configure(RA_LOG_ERROR, RA_LOG_FORMAT_TEXT);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return fake_start(&g_fake, st, "deployment");
}

static int group_teardown(void **state)
{
    (void)state;
    fake_stop(&g_fake);
    return remove_tmpdir(g_dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_cluster_config, setup, teardown),
        cmocka_unit_test_setup_teardown(test_get_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answer_wakes_waiters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_patch_body_and_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_whitespace_trimmed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_401_rereads_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_401_twice_is_final, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_stale, setup, teardown),
        cmocka_unit_test_setup_teardown(test_403_names_rbac_rule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_403_fast_sync_names_its_role, setup, teardown),
        cmocka_unit_test_setup_teardown(test_404_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_api_message_one_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_429_plain_retry_after, setup, teardown),
        cmocka_unit_test_setup_teardown(test_429_gives_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_503_backoff, setup, teardown),
        cmocka_unit_test_setup_teardown(test_500_needs_retry_after, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dropped_connections_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_listener_down_then_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_not_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_default_10s_slow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_attempt_own_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ca_bundle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_ca, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_cancels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kevents_suppressed_counted, setup, teardown),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
