/*
 * test_manifests.c - the manifest pipeline of `reload-agent inject`
 * (inject/manifests.c) in memory: a List's items injected in place (and
 * an item without a kind passed through), byte order marks, document
 * separators and the joins of several inputs (the separator each needs, a
 * block scalar at an input's end), streams of JSON documents, each output
 * mode (YAML spliced, JSON, patches as YAML or JSON), all or nothing on an
 * error, and the report. Outputs are read back with yamldoc/tree.h; exact
 * text only where the text is the contract (joins, untouched documents).
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

#include <openssl/sha.h>

#include "base/log.h"
#include "inject/manifests.h"
#include "kube/k8sname.h"
#include "yamldoc/jsonpatch.h"
#include "yamldoc/tree.h"

#define BOM "\xef\xbb\xbf"

/* A Deployment (at indentation ind, as a document or a List item) whose
 * template opts in and mounts ConfigMap app. */
#define DEPLOYMENT(I)                                                                              \
    I "apiVersion: apps/v1\n" I "kind: Deployment\n" I "metadata:\n" I "  name: web\n" I           \
      "spec:\n" I "  template:\n" I "    metadata:\n" I "      annotations:\n" I                   \
      "        reload-agent.io/inject: \"true\"\n" I "    spec:\n" I "      containers:\n" I       \
      "      - name: app\n" I "        image: nginx\n" I "        volumeMounts:\n" I               \
      "        - name: cfg\n" I "          mountPath: /etc/app\n" I "      volumes:\n" I           \
      "      - name: cfg\n" I "        configMap:\n" I "          name: app\n"

static void setup_log(void) { log_configure(RA_LOG_ERROR, RA_LOG_FORMAT_TEXT); }

/* Runs the pipeline on texts[0..n) named a.yaml, b.yaml, ... */
static int run(struct manifests_input *in, const char *const *texts, size_t n,
               enum manifests_output output, struct manifests_result *res, char *err, size_t errlen)
{
    static const char *const names[] = {"a.yaml", "b.yaml", "c.yaml", "d.yaml", "e.yaml", "f.yaml"};
    struct manifests_opts o = {.output = output};
    assert_true(n <= sizeof names / sizeof names[0]);
    memset(in, 0, n * sizeof *in);
    for (size_t i = 0; i < n; i++) {
        in[i].name = names[i];
        in[i].data = texts[i];
        in[i].len = strlen(texts[i]);
    }
    return manifests_run(in, n, &o, res, err, errlen);
}

/* The documents of a YAML text, as a JSON array (NULL when it does not
 * parse). */
static cJSON *docs_of(const char *text, size_t len)
{
    struct yamltree t;
    struct yamltree_error e;
    if (yamltree_parse(text, len, &t, &e) < 0) return NULL;
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; i < t.ndocs; i++) {
        cJSON *j = NULL;
        assert_int_equal(yamltree_to_json(t.docs[i].root, &j, &e), 0);
        cJSON_AddItemToArray(arr, j);
    }
    yamltree_free(&t);
    return arr;
}

/* The name of the first initContainer at pointer in doc, or NULL. */
static const char *sidecar_at(const cJSON *doc, const char *pointer)
{
    const cJSON *c = jsonpointer_get(doc, pointer, strlen(pointer));
    const cJSON *n = cJSON_GetObjectItem(cJSON_GetArrayItem(c, 0), "name");
    return cJSON_IsString(n) ? n->valuestring : NULL;
}

static int has_line(const char *report, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = report; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, line, n) == 0 && (p[n] == '\n' || p[n] == '\0')) return 1;
    return 0;
}

static void test_list_items_and_bom(void **state)
{
    (void)state;
#define UNTOUCHED "---\n# untouched\nkind: Service\napiVersion: v1\nmetadata: {name: s}\n...\n"
    const char *text = BOM "# head\napiVersion: v1\nkind: List\nitems:\n" DEPLOYMENT(
        "  ") "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: app\n"
              "- just: a value\n" UNTOUCHED;
    /* the Deployment is item 0: "  apiVersion" must read "- apiVersion" */
    char *t = strdup(text);
    char *first = strstr(t, "  apiVersion: apps/v1");
    first[0] = '-';
    struct manifests_input in[1];
    struct manifests_result res;
    char err[512];
    assert_int_equal(run(in, (const char *[]){t}, 1, MANIFESTS_OUT_YAML, &res, err, sizeof err), 0);
    assert_true(in[0].changed);
    /* the byte order mark and the untouched document stay byte for byte */
    assert_memory_equal(res.out, BOM "# head\n", 10);
    assert_true(res.outlen > strlen(UNTOUCHED));
    assert_string_equal(res.out + res.outlen - strlen(UNTOUCHED), UNTOUCHED);
    cJSON *docs = docs_of(res.out, res.outlen);
    assert_non_null(docs);
    assert_int_equal(cJSON_GetArraySize(docs), 2);
    assert_string_equal(sidecar_at(docs, "/0/items/0/spec/template/spec/initContainers"),
                        "reload-agent");
    assert_non_null(jsonpointer_get(docs, "/0/items/1/metadata/name", 25));
    assert_true(has_line(res.report, "deployment/web injected"));
    assert_true(has_line(res.report, "configmap/app passed through"));
    assert_true(has_line(res.report, "item 2 of document 1 of a.yaml passed through: no kind"));
    assert_true(has_line(res.report, "service/s passed through"));
    cJSON_Delete(docs);
    manifests_free(in, 1, &res);

    /* --output json: one indented JSON document per document */
    assert_int_equal(run(in, (const char *[]){t}, 1, MANIFESTS_OUT_JSON, &res, err, sizeof err), 0);
    assert_int_equal(res.out[0], '{');
    const char *end;
    cJSON *j = cJSON_ParseWithOpts(res.out, &end, 0);
    assert_non_null(j);
    assert_string_equal(sidecar_at(j, "/items/0/spec/template/spec/initContainers"),
                        "reload-agent");
    cJSON *svc = cJSON_Parse(end);
    assert_string_equal(cJSON_GetObjectItem(svc, "kind")->valuestring, "Service");
    cJSON_Delete(j);
    cJSON_Delete(svc);
    manifests_free(in, 1, &res);

    /* --output patch: one kustomize patch per injected object, its paths
     * relative to the object (not to the List) */
    assert_int_equal(run(in, (const char *[]){t}, 1, MANIFESTS_OUT_PATCH, &res, err, sizeof err),
                     0);
    assert_non_null(
        strstr(res.out, "- target:\n    kind: Deployment\n    name: web\n  patch: |-\n"));
    assert_non_null(strstr(res.out, "path: /spec/template/spec/initContainers\n"));
    assert_null(strstr(res.out, "/items/"));
    assert_null(in[0].out); /* nothing rendered per input */
    manifests_free(in, 1, &res);
    free(t);
#undef UNTOUCHED
}

/* Inputs joined into one stream: each gets the separator it needs. */
static void test_joins_and_separators(void **state)
{
    (void)state;
    const char *texts[] = {
        "kind: ConfigMap\napiVersion: v1\nmetadata:\n  name: x",          /* no final line break */
        BOM "---\nkind: Service\napiVersion: v1\nmetadata:\n  name: s\n", /* its own "---" */
        "%YAML 1.2\n---\nkind: Secret\napiVersion: v1\nmetadata:\n  name: t\n", /* a directive */
        "# only a comment\n",                                                   /* no document */
        "kind: ConfigMap\napiVersion: v1\nmetadata:\n  name: y\ndata:\n  k: |\n    line",
        "kind: ConfigMap\napiVersion: v1\nmetadata:\n  name: x",
    };
    static const char WANT[] =
        "kind: ConfigMap\napiVersion: v1\nmetadata:\n  name: x\n"
        "---\nkind: Service\napiVersion: v1\nmetadata:\n  name: s\n"
        "...\n%YAML 1.2\n---\nkind: Secret\napiVersion: v1\nmetadata:\n  name: t\n"
        "...\n# only a comment\n"
        /* a block scalar that ran to the end: strip chomping keeps its value */
        "---\nkind: ConfigMap\napiVersion: v1\nmetadata:\n  name: y\ndata:\n  k: |-\n    line\n"
        "---\nkind: ConfigMap\napiVersion: v1\nmetadata:\n  name: x";
    struct manifests_input in[6];
    struct manifests_result res;
    char err[512];
    assert_int_equal(run(in, texts, 6, MANIFESTS_OUT_YAML, &res, err, sizeof err), 0);
    assert_int_equal(res.outlen, strlen(WANT));
    assert_string_equal(res.out, WANT);
    /* each input's own rendering is its text, unchanged */
    for (size_t i = 0; i < 6; i++) {
        assert_false(in[i].changed);
        assert_int_equal(in[i].outlen, strlen(texts[i]));
        assert_memory_equal(in[i].out, texts[i], in[i].outlen);
    }
    cJSON *docs = docs_of(res.out, res.outlen);
    assert_non_null(docs);
    assert_int_equal(cJSON_GetArraySize(docs), 5); /* the comment-only input holds none */
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(docs, 3), "data"), "k")
            ->valuestring,
        "line");
    cJSON_Delete(docs);
    manifests_free(in, 6, &res);
}

/* JSON in: a JSON document stays JSON (indentation kept), a stream of
 * JSON documents is changed in place; --output patch of JSON inputs is
 * JSON. */
static void test_json_inputs(void **state)
{
    (void)state;
    static const char DEP[] =
        "{\n  \"apiVersion\": \"apps/v1\", \"kind\": \"Deployment\", \"metadata\": {\"name\": "
        "\"web\"},\n  \"spec\": {\"template\": {\"metadata\": {\"annotations\": "
        "{\"reload-agent.io/inject\": \"true\"}}, \"spec\": {\"containers\": [{\"name\": \"app\", "
        "\"volumeMounts\": [{\"name\": \"cfg\", \"mountPath\": \"/etc/app\"}]}], \"volumes\": "
        "[{\"name\": \"cfg\", \"configMap\": {\"name\": \"app\"}}]}}}}";
    static const char SVC[] = "{\"apiVersion\": \"v1\", \"kind\": \"Service\"}";
    char stream[2048];
    snprintf(stream, sizeof stream, "%s\n%s\n", SVC, DEP);
    struct manifests_input in[1];
    struct manifests_result res;
    char err[512];

    assert_int_equal(run(in, (const char *[]){DEP}, 1, MANIFESTS_OUT_YAML, &res, err, sizeof err),
                     0);
    assert_true(in[0].changed);
    assert_memory_equal(res.out, "{\n  \"apiVersion\"", 16); /* JSON, two spaces */
    cJSON *j = cJSON_Parse(res.out);
    assert_string_equal(sidecar_at(j, "/spec/template/spec/initContainers"), "reload-agent");
    cJSON_Delete(j);
    manifests_free(in, 1, &res);

    assert_int_equal(
        run(in, (const char *[]){stream}, 1, MANIFESTS_OUT_YAML, &res, err, sizeof err), 0);
    /* the untouched document of the stream keeps its bytes, in its place */
    assert_memory_equal(res.out, SVC, strlen(SVC));
    assert_int_equal(res.out[strlen(SVC)], '\n');
    const char *end;
    j = cJSON_ParseWithOpts(res.out + strlen(SVC) + 1, &end, 0);
    assert_non_null(j);
    assert_string_equal(sidecar_at(j, "/spec/template/spec/initContainers"), "reload-agent");
    assert_string_equal(end, "\n");
    cJSON_Delete(j);
    manifests_free(in, 1, &res);

    assert_int_equal(run(in, (const char *[]){DEP}, 1, MANIFESTS_OUT_PATCH, &res, err, sizeof err),
                     0);
    j = cJSON_Parse(res.out);
    assert_true(cJSON_IsArray(j));
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), "target"), "kind")
            ->valuestring,
        "Deployment");
    cJSON_Delete(j);
    manifests_free(in, 1, &res);
}

/* Any error: no output at all, and one line naming the input, the
 * document and the line. */
static void test_all_or_nothing(void **state)
{
    (void)state;
    const char *texts[] = {DEPLOYMENT(""), "kind: ConfigMap\n---\nkey: [unclosed\n"};
    struct manifests_input in[2];
    struct manifests_result res;
    char err[512];
    assert_int_equal(run(in, texts, 2, MANIFESTS_OUT_YAML, &res, err, sizeof err), -EINVAL);
    assert_int_equal(strncmp(err, "b.yaml: document 2, line ", 25), 0);
    assert_null(strchr(err, '\n'));
    assert_null(res.out);
    assert_null(res.report);
    assert_null(in[0].out);
    assert_null(in[1].out);
    manifests_free(in, 2, &res);

    /* an empty input is an empty output */
    assert_int_equal(run(in, (const char *[]){""}, 1, MANIFESTS_OUT_YAML, &res, err, sizeof err),
                     0);
    assert_int_equal(res.outlen, 0);
    assert_false(in[0].changed);
    manifests_free(in, 1, &res);
}

/* A second run over the first's output changes nothing (the sidecar is
 * there: unchanged), in every output mode's sense. */
static void test_second_run_changes_nothing(void **state)
{
    (void)state;
    struct manifests_input in[1], again[1];
    struct manifests_result res, res2;
    char err[512];
    assert_int_equal(
        run(in, (const char *[]){DEPLOYMENT("")}, 1, MANIFESTS_OUT_YAML, &res, err, sizeof err), 0);
    assert_int_equal(
        run(again, (const char *[]){res.out}, 1, MANIFESTS_OUT_YAML, &res2, err, sizeof err), 0);
    assert_false(again[0].changed);
    assert_string_equal(res2.out, res.out);
    assert_true(has_line(res2.report, "deployment/web unchanged: already injected"));
    manifests_free(again, 1, &res2);
    manifests_free(in, 1, &res);
}

/* A Deployment in namespace shop opted into fast sync: ConfigMap app
 * mounted, Secret db read through env, ServiceAccount from the template. */
#define FAST_SYNC(SA)                                                                              \
    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\nspec:\n"    \
    "  template:\n    metadata:\n      annotations:\n        reload-agent.io/inject: \"true\"\n"   \
    "        reload-agent.io/fast-sync: \"true\"\n        reload-agent.io/env-action: none\n"      \
    "    spec:\n" SA "      containers:\n      - name: app\n        image: nginx\n"                \
    "        envFrom:\n        - secretRef: {name: db}\n        volumeMounts:\n"                   \
    "        - {name: cfg, mountPath: /etc/app}\n      volumes:\n      - name: cfg\n"              \
    "        configMap: {name: app}\n"

#define RBAC_META(KIND)                                                                            \
    "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"" KIND "\",\"metadata\":{"        \
    "\"name\":\"reload-agent-fast-sync-deployment-web\",\"namespace\":\"shop\",\"labels\":{"       \
    "\"app.kubernetes.io/name\":\"reload-agent\",\"app.kubernetes.io/component\":\"fast-sync\"}}"
#define WANT_ROLE                                                                                  \
    RBAC_META("Role")                                                                              \
    ",\"rules\":[{\"apiGroups\":[\"\"],\"resources\":[\"pods\"],\"verbs\":[\"get\",\"patch\"]},"   \
    "{\"apiGroups\":[\"reload-agent.io\"],\"resources\":[\"fastsync\"],\"verbs\":[\"nudge\"]},"    \
    "{\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],\"resourceNames\":[\"app\"],"            \
    "\"verbs\":[\"get\",\"list\",\"watch\"]},{\"apiGroups\":[\"\"],\"resources\":[\"secrets\"],"   \
    "\"resourceNames\":[\"db\"],\"verbs\":[\"get\",\"list\",\"watch\"]}]}"
#define WANT_BINDING(SA)                                                                           \
    RBAC_META("RoleBinding")                                                                       \
    ",\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":"         \
    "\"reload-agent-fast-sync-deployment-web\"},\"subjects\":[{\"kind\":\"ServiceAccount\","       \
    "\"name\":\"" SA "\",\"namespace\":\"shop\"}]}"

/* 1 if item i of docs equals the JSON text want. */
static int doc_is(const cJSON *docs, int i, const char *want)
{
    cJSON *w = cJSON_Parse(want);
    assert_non_null(w);
    int same = cJSON_Compare(cJSON_GetArrayItem(docs, i), w, 1);
    if (!same) {
        char *got = cJSON_PrintUnformatted(cJSON_GetArrayItem(docs, i));
        print_error("document %d: %s\n", i, got);
        free(got);
    }
    cJSON_Delete(w);
    return same;
}

/* Issue 18 item 4: a workload opted into fast sync gets, after its
 * input's documents, the Role with resourceNames of exactly the objects
 * its sidecar watches and the RoleBinding to its ServiceAccount; a second
 * run adds nothing (they are in the input); the policy is named, never
 * written. */
static void test_fast_sync_rbac(void **state)
{
    (void)state;
    struct manifests_input in[1], again[1];
    struct manifests_result res, res2;
    char err[512];
    const char *text = FAST_SYNC("      serviceAccountName: web\n");
    assert_int_equal(run(in, (const char *[]){text}, 1, MANIFESTS_OUT_YAML, &res, err, sizeof err),
                     0);
    cJSON *docs = docs_of(res.out, res.outlen);
    assert_non_null(docs);
    assert_int_equal(cJSON_GetArraySize(docs), 3);
    assert_true(doc_is(docs, 1, WANT_ROLE));
    assert_true(doc_is(docs, 2, WANT_BINDING("web")));
    assert_memory_equal(res.out, text, strlen("apiVersion: apps/v1\nkind: Deployment\n"));
    assert_true(has_line(res.report, "role/reload-agent-fast-sync-deployment-web written: the "
                                     "fast sync of deployment/web"));
    assert_true(has_line(res.report, "rolebinding/reload-agent-fast-sync-deployment-web written: "
                                     "the fast-sync Role to serviceaccount web"));
    assert_non_null(strstr(res.report, "kubectl apply -f manifests/fast-sync/policy.yaml"));
    assert_null(strstr(res.out, "ValidatingAdmissionPolicy"));
    cJSON_Delete(docs);

    assert_int_equal(
        run(again, (const char *[]){res.out}, 1, MANIFESTS_OUT_YAML, &res2, err, sizeof err), 0);
    assert_false(again[0].changed);
    assert_string_equal(res2.out, res.out);
    assert_true(has_line(res2.report, "role/reload-agent-fast-sync-deployment-web passed through"));
    manifests_free(again, 1, &res2);

    /* a Role of that name the input holds is kept, with a warning when it
     * is not the one fast sync needs */
    char *edited = strdup(res.out);
    char *rn = strstr(edited, "  - app\n");
    assert_non_null(rn);
    memcpy(rn, "  - xyz\n", 8);
    assert_int_equal(
        run(again, (const char *[]){edited}, 1, MANIFESTS_OUT_YAML, &res2, err, sizeof err), 0);
    assert_false(again[0].changed);
    assert_true(has_line(res2.report, "  warning: role/reload-agent-fast-sync-deployment-web is in "
                                      "the input, but not as the injector writes it (the fast "
                                      "sync of deployment/web): kept"));
    manifests_free(again, 1, &res2);

    /* --output rbac: only the two, even when the input holds them */
    assert_int_equal(
        run(again, (const char *[]){edited}, 1, MANIFESTS_OUT_RBAC, &res2, err, sizeof err), 0);
    docs = docs_of(res2.out, res2.outlen);
    assert_int_equal(cJSON_GetArraySize(docs), 2);
    assert_true(doc_is(docs, 0, WANT_ROLE));
    assert_true(doc_is(docs, 1, WANT_BINDING("web")));
    assert_null(again[0].out);
    cJSON_Delete(docs);
    manifests_free(again, 1, &res2);
    free(edited);
    manifests_free(in, 1, &res);
}

/* The other outputs and inputs: --output json appends JSON documents (the
 * ServiceAccount "default" when the template names none), a JSON input
 * becomes a stream of JSON documents, --output patch says where the Roles
 * are. */
static void test_fast_sync_rbac_outputs(void **state)
{
    (void)state;
    struct manifests_input in[1];
    struct manifests_result res;
    char err[512];
    const char *text = FAST_SYNC("");
    assert_int_equal(run(in, (const char *[]){text}, 1, MANIFESTS_OUT_JSON, &res, err, sizeof err),
                     0);
    const char *end = res.out;
    const char *kinds[] = {"Deployment", "Role", "RoleBinding"};
    for (int i = 0; i < 3; i++) {
        cJSON *j = cJSON_ParseWithOpts(end, &end, 0);
        assert_non_null(j);
        assert_string_equal(cJSON_GetObjectItem(j, "kind")->valuestring, kinds[i]);
        if (i == 2) {
            char *got = cJSON_PrintUnformatted(j);
            assert_string_equal(got, WANT_BINDING("default"));
            free(got);
        }
        cJSON_Delete(j);
    }
    manifests_free(in, 1, &res);

    assert_int_equal(run(in, (const char *[]){text}, 1, MANIFESTS_OUT_PATCH, &res, err, sizeof err),
                     0);
    assert_true(has_line(res.report, "fast sync: patches cannot add objects: write the Roles and "
                                     "RoleBindings with --output rbac"));
    assert_null(strstr(res.out, "RoleBinding"));
    manifests_free(in, 1, &res);

    /* JSON in: a stream of JSON documents out, and the same again */
    cJSON *yd = docs_of(text, strlen(text));
    char *json = cJSON_Print(cJSON_GetArrayItem(yd, 0));
    cJSON_Delete(yd);
    assert_int_equal(run(in, (const char *[]){json}, 1, MANIFESTS_OUT_YAML, &res, err, sizeof err),
                     0);
    assert_int_equal(res.out[0], '{');
    end = res.out;
    for (int i = 0; i < 3; i++) {
        cJSON *j = cJSON_ParseWithOpts(end, &end, 0);
        assert_non_null(j);
        assert_string_equal(cJSON_GetObjectItem(j, "kind")->valuestring, kinds[i]);
        cJSON_Delete(j);
    }
    struct manifests_input again[1];
    struct manifests_result res2;
    assert_int_equal(
        run(again, (const char *[]){res.out}, 1, MANIFESTS_OUT_YAML, &res2, err, sizeof err), 0);
    assert_false(again[0].changed);
    manifests_free(again, 1, &res2);
    manifests_free(in, 1, &res);
    free(json);
}

/* An input that ends in a block scalar without a line break keeps its
 * value; no namespace means no RoleBinding (and says why); without the
 * opt-in nothing is written and nothing said. */
static void test_fast_sync_rbac_edges(void **state)
{
    (void)state;
    struct manifests_input in[1];
    struct manifests_result res;
    char err[512];
    const char *text = FAST_SYNC("");

    /* a block scalar at the end, without a final line break */
    const char *scalar = FAST_SYNC("") "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n"
                                       "  name: app\n  namespace: shop\ndata:\n  a: |\n    x";
    assert_int_equal(
        run(in, (const char *[]){scalar}, 1, MANIFESTS_OUT_YAML, &res, err, sizeof err), 0);
    cJSON *docs = docs_of(res.out, res.outlen);
    assert_int_equal(cJSON_GetArraySize(docs), 4);
    assert_string_equal(jsonpointer_get(docs, "/1/data/a", 9)->valuestring, "x");
    assert_true(doc_is(docs, 2, WANT_ROLE));
    cJSON_Delete(docs);
    manifests_free(in, 1, &res);

    /* CR LF line breaks: the added documents use them too */
    char crlf[2048];
    size_t k = 0;
    for (const char *c = text; *c && k + 2 < sizeof crlf; c++) {
        if (*c == '\n') crlf[k++] = '\r';
        crlf[k++] = *c;
    }
    crlf[k] = '\0';
    assert_int_equal(run(in, (const char *[]){crlf}, 1, MANIFESTS_OUT_YAML, &res, err, sizeof err),
                     0);
    assert_non_null(
        strstr(res.out, "\r\n---\r\napiVersion: rbac.authorization.k8s.io/v1\r\nkind: Role\r\n"));
    for (size_t i = 0; i < res.outlen; i++)
        if (res.out[i] == '\n') assert_int_equal(i > 0 && res.out[i - 1] == '\r', 1);
    docs = docs_of(res.out, res.outlen);
    assert_true(doc_is(docs, 1, WANT_ROLE));
    cJSON_Delete(docs);
    manifests_free(in, 1, &res);

    /* no namespace: no Role, and the reason */
    char *nons = strdup(text);
    char *ns = strstr(nons, "  namespace: shop\n");
    memmove(ns, ns + 18, strlen(ns + 18) + 1);
    assert_int_equal(run(in, (const char *[]){nons}, 1, MANIFESTS_OUT_YAML, &res, err, sizeof err),
                     0);
    docs = docs_of(res.out, res.outlen);
    assert_int_equal(cJSON_GetArraySize(docs), 1);
    assert_true(has_line(res.report, "deployment/web fast sync: no Role and RoleBinding written: "
                                     "it has no metadata.namespace, which the RoleBinding's "
                                     "ServiceAccount subject needs: set it (or see "
                                     "docs/fast-sync.md)"));
    cJSON_Delete(docs);
    manifests_free(in, 1, &res);
    free(nons);

    /* without the opt-in: no Role, no note */
    assert_int_equal(
        run(in, (const char *[]){DEPLOYMENT("")}, 1, MANIFESTS_OUT_YAML, &res, err, sizeof err), 0);
    assert_null(strstr(res.out, "kind: Role"));
    assert_null(strstr(res.report, "fast sync"));
    manifests_free(in, 1, &res);
}

/* The name of the Role that --output rbac writes for FAST_SYNC's
 * Deployment renamed to name, checked against the RoleBinding's name and
 * roleRef; the caller frees it. */
static char *rbac_name_for(const char *name)
{
    const char *text = FAST_SYNC("");
    const char *at = strstr(text, "name: web\n");
    assert_non_null(at);
    size_t head = (size_t)(at - text) + 6, len = strlen(text) + strlen(name);
    char *in_text = malloc(len + 1);
    snprintf(in_text, len + 1, "%.*s%s%s", (int)head, text, name, at + 9);
    struct manifests_input in[1];
    struct manifests_result res;
    char err[512];
    assert_int_equal(
        run(in, (const char *[]){in_text}, 1, MANIFESTS_OUT_RBAC, &res, err, sizeof err), 0);
    cJSON *docs = docs_of(res.out, res.outlen);
    assert_int_equal(cJSON_GetArraySize(docs), 2);
    char *role = strdup(jsonpointer_get(docs, "/0/metadata/name", 16)->valuestring);
    assert_string_equal(jsonpointer_get(docs, "/1/metadata/name", 16)->valuestring, role);
    assert_string_equal(jsonpointer_get(docs, "/1/roleRef/name", 15)->valuestring, role);
    cJSON_Delete(docs);
    manifests_free(in, 1, &res);
    free(in_text);
    return role;
}

/* Issue 24 G13: the Role and RoleBinding of a workload whose name is
 * longer than 219 (up to the 253 of an object name) were named
 * "reload-agent-fast-sync-deployment-" + name: up to 287 bytes, which the
 * API server refuses. A name that fits is kept; a longer one is cut to
 * 244 bytes (never at a '.') and gets '-' and 8 hex digits of the SHA-256
 * of the whole name: an object name, one per workload, the same in every
 * run. */
static void test_fast_sync_rbac_long_names(void **state)
{
    (void)state;
    const char *prefix = "reload-agent-fast-sync-deployment-";
    char name[K8S_DNS1123_SUBDOMAIN_MAX + 1], full[300], want[300];

    /* 219: exactly 253 in all, kept */
    memset(name, 'a', 219);
    name[219] = '\0';
    char *got = rbac_name_for(name);
    snprintf(want, sizeof want, "%s%s", prefix, name);
    assert_int_equal(strlen(got), K8S_DNS1123_SUBDOMAIN_MAX);
    assert_string_equal(got, want);
    free(got);

    /* 220 and 253: cut and hashed, exactly as the contract says */
    for (size_t n = 220; n <= K8S_DNS1123_SUBDOMAIN_MAX; n += 33) {
        memset(name, 'b', n);
        name[n] = '\0';
        got = rbac_name_for(name);
        snprintf(full, sizeof full, "%s%s", prefix, name);
        unsigned char md[SHA256_DIGEST_LENGTH];
        SHA256((const unsigned char *)full, strlen(full), md);
        snprintf(want, sizeof want, "%.244s-%02x%02x%02x%02x", full, md[0], md[1], md[2], md[3]);
        assert_string_equal(got, want);
        assert_true(k8s_is_dns1123_subdomain(got));
        char *again = rbac_name_for(name);
        assert_string_equal(again, got);
        free(again);
        free(got);
    }

    /* a cut that ends at a '.' drops it (".-" would start a label with
     * '-'); names that differ only after the cut get different names */
    memset(name, 'c', 253);
    name[209] = '.';
    name[253] = '\0';
    got = rbac_name_for(name);
    assert_true(k8s_is_dns1123_subdomain(got));
    assert_int_equal(strlen(got), 243 + K8S_HASHED_SUFFIX);
    name[252] = 'd';
    char *other = rbac_name_for(name);
    assert_true(k8s_is_dns1123_subdomain(other));
    assert_string_not_equal(other, got);
    assert_memory_equal(other, got, 243);
    free(other);
    free(got);
}

/* issue 29 item 5: an immutable ConfigMap or Secret is warned about (it
 * can never change); immutable: false and a mutable one are not; output
 * is unchanged by the warning. */
static void test_immutable_warned(void **state)
{
    (void)state;
    const char *text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: frozen}\nimmutable: "
                       "true\ndata: {a: b}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: "
                       "key}\nimmutable: true\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: "
                       "{name: open}\nimmutable: false\n---\napiVersion: v1\nkind: Service\n"
                       "metadata: {name: s}\nimmutable: true\n";
    struct manifests_input in[1];
    struct manifests_result res;
    char err[512];
    assert_int_equal(run(in, (const char *[]){text}, 1, MANIFESTS_OUT_YAML, &res, err, sizeof err),
                     0);
    assert_false(in[0].changed);
    const char *w = "  warning: %s is immutable: it can never change, so no agent will ever see "
                    "it change; a new content needs a new name, and the new name in the pod "
                    "template rolls the workload by itself";
    char line[512];
    snprintf(line, sizeof line, w, "configmap/frozen");
    assert_true(has_line(res.report, line));
    snprintf(line, sizeof line, w, "secret/key");
    assert_true(has_line(res.report, line));
    assert_null(strstr(res.report, "configmap/open is immutable"));
    assert_null(strstr(res.report, "service/s is immutable"));
    manifests_free(in, 1, &res);
}

/* A single List document (a kustomize KRM function's ResourceList) stays
 * one document: fast sync's Role and RoleBinding become its items, and
 * its other fields (functionConfig) are kept. */
static void test_rbac_into_a_list(void **state)
{
    (void)state;
    const char *text =
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n"
        "- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: web, namespace: prod}\n"
        "  spec:\n    selector: {matchLabels: {app: web}}\n    template:\n      metadata:\n"
        "        labels: {app: web}\n        annotations: {reload-agent.io/inject: \"true\", "
        "reload-agent.io/fast-sync: \"true\"}\n      spec:\n        containers:\n"
        "        - name: app\n          image: x\n          volumeMounts: [{name: c, mountPath: "
        "/etc/c}]\n        volumes: [{name: c, configMap: {name: site}}]\n"
        "functionConfig: {apiVersion: v1, kind: ConfigMap, metadata: {name: fn}}\n";
    struct manifests_input in[1];
    struct manifests_result res;
    char err[512];
    assert_int_equal(run(in, (const char *[]){text}, 1, MANIFESTS_OUT_YAML, &res, err, sizeof err),
                     0);
    cJSON *docs = docs_of(res.out, res.outlen);
    assert_non_null(docs);
    assert_int_equal(cJSON_GetArraySize(docs), 1);
    const cJSON *k2 = jsonpointer_get(docs, "/0/items/1/kind", 15);
    const cJSON *k3 = jsonpointer_get(docs, "/0/items/2/kind", 15);
    assert_non_null(k2);
    assert_non_null(k3);
    assert_string_equal(k2->valuestring, "Role");
    assert_string_equal(k3->valuestring, "RoleBinding");
    assert_non_null(jsonpointer_get(docs, "/0/functionConfig/metadata/name", 31));
    cJSON_Delete(docs);
    manifests_free(in, 1, &res);
}

int main(void)
{
    setup_log();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_items_and_bom),
        cmocka_unit_test(test_joins_and_separators),
        cmocka_unit_test(test_json_inputs),
        cmocka_unit_test(test_all_or_nothing),
        cmocka_unit_test(test_second_run_changes_nothing),
        cmocka_unit_test(test_fast_sync_rbac),
        cmocka_unit_test(test_fast_sync_rbac_outputs),
        cmocka_unit_test(test_fast_sync_rbac_edges),
        cmocka_unit_test(test_fast_sync_rbac_long_names),
        cmocka_unit_test(test_immutable_warned),
        cmocka_unit_test(test_rbac_into_a_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
