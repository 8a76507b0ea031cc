/*
 * test_admission.c - webhook/admission.c, the AdmissionReview core of
 * `reload-agent webhook`: every status (415, 400, 200), the uid echo, which
 * requests are mutated, the base64 patch (decoded and applied to the pod as
 * sent, managedFields included), skip/unchanged/error answers, the warning
 * limits, and that no answer is ever allowed:false, including under a
 * failing transform (test seam) and under out-of-memory (cJSON's allocator
 * failing at every allocation in turn). The real transform runs wherever
 * the seam is not set.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "yamldoc/jsonpatch.h"
#include "inject/transform.h"
#include "webhook/admission.h"
#include "webhook/jsonscan.h"

#include "oomwrap.h"

/* ---- building reviews ---- */

static const char *POD_OPTED_IN =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"generateName\":\"web-7d9f-\","
    "\"namespace\":\"\",\"annotations\":{\"reload-agent.io/inject\":\"true\","
    "\"reload-agent.io/action\":\"signal\",\"reload-agent.io/process\":\"nginx\"},"
    "\"managedFields\":[{\"manager\":\"kubectl\","
    "\"operation\":\"Update\",\"fieldsV1\":{\"f:metadata\":{}}}]},\"spec\":{\"containers\":"
    "[{\"name\":\"app\",\"image\":\"nginx\",\"securityContext\":{\"runAsUser\":101},"
    "\"volumeMounts\":[{\"name\":\"conf\",\"mountPath\":\"/etc/nginx/conf.d\"}]}],"
    "\"volumes\":[{\"name\":\"conf\",\"configMap\":{\"name\":\"nginx-conf\"}}]}}";

static const char *POD_PLAIN =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"plain\"},\"spec\":"
    "{\"containers\":[{\"name\":\"app\",\"image\":\"nginx\"}]}}";

/* A review of op on group/kind/resource (NULL object: none), as the API
 * server sends it. Returns the malloc'd JSON text. */
static char *review_of(const char *uid, const char *op, const char *group, const char *kind,
                       const char *resource, const char *sub, const char *object, int dry_run)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "apiVersion", "admission.k8s.io/v1");
    cJSON_AddStringToObject(r, "kind", "AdmissionReview");
    cJSON *req = cJSON_AddObjectToObject(r, "request");
    if (uid) cJSON_AddStringToObject(req, "uid", uid);
    cJSON *k = cJSON_AddObjectToObject(req, "kind");
    cJSON_AddStringToObject(k, "group", group);
    cJSON_AddStringToObject(k, "version", "v1");
    cJSON_AddStringToObject(k, "kind", kind);
    cJSON *res = cJSON_AddObjectToObject(req, "resource");
    cJSON_AddStringToObject(res, "group", group);
    cJSON_AddStringToObject(res, "version", "v1");
    cJSON_AddStringToObject(res, "resource", resource);
    if (sub) cJSON_AddStringToObject(req, "subResource", sub);
    cJSON_AddStringToObject(req, "name", "");
    cJSON_AddStringToObject(req, "namespace", "team-a");
    cJSON_AddStringToObject(req, "operation", op);
    if (object) cJSON_AddItemToObject(req, "object", cJSON_Parse(object));
    cJSON_AddBoolToObject(req, "dryRun", dry_run);
    char *s = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    return s;
}

static char *pod_review(const char *uid, const char *pod)
{
    return review_of(uid, "CREATE", "", "Pod", "pods", NULL, pod, 0);
}

/* ---- checking answers ---- */

struct answer {
    int rc;
    struct admission_response resp;
    struct admission_info info;
    cJSON *doc;      /* the parsed body of a 200 */
    cJSON *response; /* doc.response */
};

static void answer_free(struct answer *a)
{
    cJSON_Delete(a->doc);
    admission_response_free(&a->resp);
}

/* Sends body with content type ct; a 200 must be a well-formed, allowed
 * AdmissionReview v1 echoing uid (when uid is non-NULL). */
static void ask(struct answer *a, const char *body, const char *ct, const char *uid)
{
    memset(a, 0, sizeof *a);
    a->rc = admission_review(body, body ? strlen(body) : 0, ct, NULL, &a->resp, &a->info);
    assert_int_equal(a->rc, 0);
    assert_int_equal(a->resp.status, a->info.status);
    assert_non_null(a->resp.body);
    assert_int_equal(strlen(a->resp.body), a->resp.body_len);
    if (a->resp.status != 200) {
        assert_string_equal(a->resp.content_type, "text/plain; charset=utf-8");
        assert_int_equal(a->info.result, ADMISSION_BAD_REQUEST);
        return;
    }
    assert_string_equal(a->resp.content_type, "application/json");
    a->doc = cJSON_Parse(a->resp.body);
    assert_non_null(a->doc);
    assert_string_equal(cJSON_GetObjectItem(a->doc, "apiVersion")->valuestring,
                        "admission.k8s.io/v1");
    assert_string_equal(cJSON_GetObjectItem(a->doc, "kind")->valuestring, "AdmissionReview");
    a->response = cJSON_GetObjectItem(a->doc, "response");
    assert_non_null(a->response);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(a->response, "allowed")));
    if (uid) assert_string_equal(cJSON_GetObjectItem(a->response, "uid")->valuestring, uid);
    assert_null(cJSON_GetObjectItem(a->response, "status"));
}

static void ask_status(const char *body, const char *ct, int status, const char *reason_part)
{
    struct answer a;
    ask(&a, body, ct, NULL);
    assert_int_equal(a.resp.status, status);
    if (reason_part && !strstr(a.resp.body, reason_part)) fail_msg("reason: %s", a.resp.body);
    if (status != 200) /* one line */
        assert_ptr_equal(strchr(a.resp.body, '\n'), a.resp.body + a.resp.body_len - 1);
    answer_free(&a);
}

static size_t nwarnings(const struct answer *a)
{
    return (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(a->response, "warnings"));
}

static const char *warning(const struct answer *a, int i)
{
    return cJSON_GetArrayItem(cJSON_GetObjectItem(a->response, "warnings"), i)->valuestring;
}

static int has_patch(const struct answer *a)
{
    return cJSON_GetObjectItem(a->response, "patch") != NULL ||
           cJSON_GetObjectItem(a->response, "patchType") != NULL;
}

/* The decoded patch of a 200 (a JSON array), or fails. */
static cJSON *decoded_patch(const struct answer *a)
{
    assert_string_equal(cJSON_GetObjectItem(a->response, "patchType")->valuestring, "JSONPatch");
    const char *b64 = cJSON_GetObjectItem(a->response, "patch")->valuestring;
    size_t n = strlen(b64);
    unsigned char *raw = calloc(1, n + 1);
    int m = EVP_DecodeBlock(raw, (const unsigned char *)b64, (int)n);
    assert_true(m > 0);
    while (m > 0 && raw[m - 1] == '\0') m--; /* EVP_DecodeBlock pads with NULs */
    cJSON *ops = cJSON_ParseWithLength((const char *)raw, (size_t)m);
    free(raw);
    assert_non_null(ops);
    assert_true(cJSON_IsArray(ops));
    return ops;
}

/* ---- content type ---- */

static void test_content_type(void **state)
{
    (void)state;
    char *body = pod_review("u1", POD_PLAIN);
    ask_status(body, NULL, 415, "no Content-Type");
    ask_status(body, "text/plain", 415, "\"text/plain\"");
    ask_status(body, "application/jsonx", 415, "application/jsonx");
    ask_status(body, "application/json-patch+json", 415, NULL);
    ask_status(body, "application/x-www-form-urlencoded", 415, NULL);
    ask_status(body, "", 415, NULL);
    ask_status(body, "application/json", 200, NULL);
    ask_status(body, "application/json; charset=utf-8", 200, NULL);
    ask_status(body, " Application/JSON ;charset=UTF-8", 200, NULL);
    assert_true(admission_is_json_type("application/json;"));
    assert_false(admission_is_json_type("application/"));
    assert_false(admission_is_json_type(NULL));
    free(body);
}

/* ---- 400s ---- */

static void test_malformed(void **state)
{
    (void)state;
    const char *J = "application/json";
    ask_status("", J, 400, "empty body");
    ask_status("{", J, 400, "malformed JSON at byte");
    ask_status("{\"apiVersion\":", J, 400, "malformed JSON");
    ask_status("nul", J, 400, "malformed JSON");
    ask_status("{} {}", J, 400, "trailing data at byte 3");
    ask_status("[]", J, 400, "not a JSON object");
    ask_status("\"x\"", J, 400, "not a JSON object");
    ask_status("{\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"a\"}}", J, 400,
               "apiVersion is missing");
    ask_status("{\"apiVersion\":\"admission.k8s.io/v1beta1\",\"kind\":\"AdmissionReview\","
               "\"request\":{\"uid\":\"a\"}}",
               J, 400, "apiVersion \"admission.k8s.io/v1beta1\" is not supported");
    ask_status("{\"apiVersion\":7,\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"a\"}}", J,
               400, "apiVersion is missing");
    ask_status("{\"apiVersion\":\"admission.k8s.io/v1\",\"request\":{\"uid\":\"a\"}}", J, 400,
               "kind is missing");
    ask_status("{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"Pod\",\"request\":"
               "{\"uid\":\"a\"}}",
               J, 400, "kind \"Pod\": expected AdmissionReview");
    ask_status("{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}", J, 400,
               "request is missing");
    ask_status("{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
               "\"request\":[]}",
               J, 400, "request is missing or not an object");
    ask_status("{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
               "\"request\":{}}",
               J, 400, "request.uid is missing");
    ask_status("{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
               "\"request\":{\"uid\":\"\"}}",
               J, 400, "request.uid is missing or empty");
    ask_status("{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
               "\"request\":{\"uid\":42}}",
               J, 400, "request.uid");
    /* Values echoed in a reason keep it on one line (cJSON accepts raw
     * control characters inside strings), by the one text policy of
     * base/text.h. */
    ask_status("{\"apiVersion\":\"admission.k8\n.io/v1\",\"kind\":\"AdmissionReview\"}", J, 400,
               "apiVersion \"admission.k8\\x0a.io/v1\" is not supported");
    ask_status("{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"Admission\rReview\"}", J, 400,
               "kind \"Admission\\x0dReview\"");
    ask_status("{}", "text/\x01plain", 415, "\"text/\\x01plain\"");
    ask_status("{}",
               "text/pl\xc3"
               "ain",
               415, "\"text/pl\\xc3ain\"");
    /* A body that is not NUL-terminated is read within its length only. */
    char buf[8] = {'{', '"', 'a', '"', ':', '1', '}', 'X'};
    struct admission_response r;
    struct admission_info info;
    assert_int_equal(admission_review(buf, 7, J, NULL, &r, &info), 0);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "apiVersion is missing"));
    admission_response_free(&r);
}

/* ---- what is mutated ---- */

static void test_uid_echo(void **state)
{
    (void)state;
    const char *uids[] = {"705ab4f5-6393-11e8-b7cc-42010a800002", "a\"b\\c\n\xc3\xa9\xe2\x82\xac",
                          "x"};
    for (size_t i = 0; i < sizeof uids / sizeof uids[0]; i++) {
        char *body = pod_review(uids[i], POD_PLAIN);
        struct answer a;
        ask(&a, body, "application/json", uids[i]);
        assert_int_equal(a.resp.status, 200);
        answer_free(&a);
        free(body);
        /* Ignored requests echo it too. */
        body = review_of(uids[i], "DELETE", "", "Pod", "pods", NULL, NULL, 0);
        ask(&a, body, "application/json", uids[i]);
        assert_int_equal(a.info.result, ADMISSION_IGNORED);
        answer_free(&a);
        free(body);
    }
}

static void test_only_pod_create(void **state)
{
    (void)state;
    struct {
        const char *op, *group, *kind, *resource, *sub;
    } cases[] = {
        {"UPDATE", "", "Pod", "pods", NULL},
        {"DELETE", "", "Pod", "pods", NULL},
        {"CONNECT", "", "PodExecOptions", "pods", "exec"},
        {"CREATE", "", "Binding", "pods", "binding"},
        {"CREATE", "policy", "Eviction", "pods", "eviction"},
        {"CREATE", "", "Pod", "pods", "ephemeralcontainers"},
        {"CREATE", "apps", "Deployment", "deployments", NULL},
        {"CREATE", "", "Service", "services", NULL},
        {"CREATE", "example.com", "Pod", "pods", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *body = review_of("u", cases[i].op, cases[i].group, cases[i].kind, cases[i].resource,
                               cases[i].sub, POD_OPTED_IN, 0);
        struct answer a;
        ask(&a, body, "application/json", "u");
        assert_int_equal(a.resp.status, 200);
        assert_int_equal(a.info.result, ADMISSION_IGNORED);
        assert_false(has_patch(&a));
        assert_int_equal(nwarnings(&a), 0);
        assert_true(a.info.reason[0] != '\0');
        answer_free(&a);
        free(body);
    }
}

/* A CREATE of an opted-in pod: the patch decodes to the transform's own
 * ops for that pod (managedFields dropped), and applies to the pod as sent
 * (managedFields kept) giving the native sidecar. */
static void test_injected(void **state)
{
    (void)state;
    char *body = pod_review("uid-1", POD_OPTED_IN);
    struct answer a;
    ask(&a, body, "application/json; charset=utf-8", "uid-1");
    assert_int_equal(a.resp.status, 200);
    assert_int_equal(a.info.result, ADMISSION_INJECTED);
    assert_string_equal(a.info.namespace_, "team-a");
    assert_string_equal(a.info.name, "web-7d9f-");
    assert_true(a.info.name_is_generated);
    assert_string_equal(a.info.operation, "CREATE");
    assert_string_equal(a.info.uid, "uid-1");
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(a.response, "auditAnnotations"), "injected")
            ->valuestring,
        "true");
    cJSON *ops = decoded_patch(&a);
    assert_int_equal((size_t)cJSON_GetArraySize(ops), a.info.nops);
    assert_true(a.info.nops > 0);

    /* The same ops as the transform gives for the pod without managedFields. */
    cJSON *pod = cJSON_Parse(POD_OPTED_IN);
    cJSON *bare = cJSON_Duplicate(pod, 1);
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(bare, "metadata"), "managedFields");
    struct inject_opts o = {.admission = 1};
    struct inject_result r;
    char err[256];
    assert_int_equal(inject_object(bare, &o, &r, err, sizeof err), 0);
    assert_int_equal(r.outcome, INJECT_INJECTED);
    assert_true(cJSON_Compare(r.ops, ops, 1));
    assert_int_equal(nwarnings(&a), r.nwarnings > 10 ? 10 : r.nwarnings);
    inject_result_free(&r);
    cJSON_Delete(bare);

    /* It applies to the pod as the API server holds it. */
    assert_int_equal(jsonpatch_apply(&pod, ops, err, sizeof err), 0);
    cJSON *md = cJSON_GetObjectItem(pod, "metadata");
    assert_non_null(cJSON_GetObjectItem(md, "managedFields"));
    assert_non_null(
        cJSON_GetObjectItem(cJSON_GetObjectItem(md, "annotations"), CFG_ANNOT_INJECT_STATUS));
    cJSON *inits = cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "initContainers");
    cJSON *last = cJSON_GetArrayItem(inits, cJSON_GetArraySize(inits) - 1);
    assert_string_equal(cJSON_GetObjectItem(last, "name")->valuestring, INJECT_CONTAINER);
    assert_string_equal(cJSON_GetObjectItem(last, "restartPolicy")->valuestring, "Always");
    cJSON_Delete(ops);
    answer_free(&a);
    free(body);

    /* Sent again as patched (a reinvocation with nothing new): no patch. */
    char *pod2 = cJSON_PrintUnformatted(pod);
    body = pod_review("uid-2", pod2);
    ask(&a, body, "application/json", "uid-2");
    assert_int_equal(a.info.result, ADMISSION_UNCHANGED);
    assert_false(has_patch(&a));
    assert_null(cJSON_GetObjectItem(a.response, "auditAnnotations"));
    answer_free(&a);
    free(body);
    free(pod2);
    cJSON_Delete(pod);
}

/* Issue 18 item 4: a pod opted into fast sync gets, from the webhook, the
 * transform's --fast-sync=true and --fast-sync-objects of the objects it
 * mounts, and the app's token mount (fast sync needs the API); without a
 * token to copy it is admitted unchanged, the reason as the warning. */
static void test_fast_sync(void **state)
{
    (void)state;
    cJSON *pod = cJSON_Parse(POD_OPTED_IN);
    cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "metadata"), "annotations");
    cJSON_AddStringToObject(ann, "reload-agent.io/fast-sync", "true");
    cJSON *app =
        cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "containers"), 0);
    char *text = cJSON_PrintUnformatted(pod);
    char *body = pod_review("f1", text);
    struct answer a;
    ask(&a, body, "application/json", "f1");
    assert_int_equal(a.info.result, ADMISSION_SKIPPED);
    assert_false(has_patch(&a));
    if (!strstr(warning(&a, 0), "fast sync needs the Kubernetes API"))
        fail_msg("warning: %s", warning(&a, 0));
    answer_free(&a);
    free(body);
    free(text);

    cJSON_AddItemToArray(cJSON_GetObjectItem(app, "volumeMounts"),
                         cJSON_Parse("{\"name\":\"kube-api-access-abcde\",\"readOnly\":true,"
                                     "\"mountPath\":\"/var/run/secrets/kubernetes.io/"
                                     "serviceaccount\"}"));
    text = cJSON_PrintUnformatted(pod);
    body = pod_review("f2", text);
    ask(&a, body, "application/json", "f2");
    assert_int_equal(a.info.result, ADMISSION_INJECTED);
    cJSON *ops = decoded_patch(&a);
    char err[256];
    assert_int_equal(jsonpatch_apply(&pod, ops, err, sizeof err), 0);
    cJSON *inits = cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "initContainers");
    cJSON *side = cJSON_GetArrayItem(inits, cJSON_GetArraySize(inits) - 1);
    char *args = cJSON_PrintUnformatted(cJSON_GetObjectItem(side, "args"));
    assert_string_equal(args, "[\"run\",\"--watch=/etc/nginx/conf.d\","
                              "\"--state-dir=/reload-agent/state\",\"--fast-sync=true\","
                              "\"--fast-sync-objects=configmap/nginx-conf\"]");
    char *mounts = cJSON_PrintUnformatted(cJSON_GetObjectItem(side, "volumeMounts"));
    if (!strstr(mounts, "\"mountPath\":\"/var/run/secrets/kubernetes.io/serviceaccount\""))
        fail_msg("no token mount: %s", mounts);
    free(mounts);
    free(args);
    cJSON_Delete(ops);
    answer_free(&a);
    free(body);
    free(text);
    cJSON_Delete(pod);
}

/* The object may lack kind/apiVersion, and its namespace is often empty:
 * the request's namespace is the one reported. */
static void test_object_without_kind(void **state)
{
    (void)state;
    cJSON *pod = cJSON_Parse(POD_OPTED_IN);
    cJSON_DeleteItemFromObject(pod, "kind");
    cJSON_DeleteItemFromObject(pod, "apiVersion");
    char *text = cJSON_PrintUnformatted(pod);
    char *body = pod_review("k", text);
    struct answer a;
    ask(&a, body, "application/json", "k");
    assert_int_equal(a.info.result, ADMISSION_INJECTED);
    assert_string_equal(a.info.namespace_, "team-a");
    cJSON *ops = decoded_patch(&a);
    char err[256];
    assert_int_equal(jsonpatch_apply(&pod, ops, err, sizeof err), 0);
    assert_null(cJSON_GetObjectItem(pod, "kind")); /* the ops do not touch it */
    cJSON_Delete(ops);
    answer_free(&a);
    free(body);
    free(text);
    cJSON_Delete(pod);
}

static void test_skipped(void **state)
{
    (void)state;
    /* Not opted in: skipped quietly. */
    char *body = pod_review("s1", POD_PLAIN);
    struct answer a;
    ask(&a, body, "application/json", "s1");
    assert_int_equal(a.info.result, ADMISSION_SKIPPED);
    assert_string_equal(a.info.name, "plain");
    assert_false(a.info.name_is_generated);
    assert_false(has_patch(&a));
    assert_int_equal(nwarnings(&a), 0);
    answer_free(&a);
    free(body);

    /* Opted out: quietly too. */
    cJSON *pod = cJSON_Parse(POD_OPTED_IN);
    cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "metadata"), "annotations");
    cJSON_ReplaceItemInObject(ann, CFG_ANNOT_INJECT, cJSON_CreateString("false"));
    char *text = cJSON_PrintUnformatted(pod);
    body = pod_review("s2", text);
    ask(&a, body, "application/json", "s2");
    assert_int_equal(a.info.result, ADMISSION_SKIPPED);
    assert_int_equal(nwarnings(&a), 0);
    answer_free(&a);
    free(body);
    free(text);

    /* Opted in but refused (hostPID): the reason is a warning. */
    cJSON_ReplaceItemInObject(ann, CFG_ANNOT_INJECT, cJSON_CreateString("true"));
    cJSON_AddTrueToObject(cJSON_GetObjectItem(pod, "spec"), "hostPID");
    text = cJSON_PrintUnformatted(pod);
    body = pod_review("s3", text);
    ask(&a, body, "application/json", "s3");
    assert_int_equal(a.info.result, ADMISSION_SKIPPED);
    assert_false(has_patch(&a));
    assert_true(nwarnings(&a) >= 1);
    if (strncmp(warning(&a, 0), "reload-agent: not injected: ", 28) != 0 ||
        !strstr(warning(&a, 0), "hostPID"))
        fail_msg("warning: %s", warning(&a, 0));
    assert_non_null(strstr(a.info.reason, "hostPID"));
    answer_free(&a);
    free(body);
    free(text);
    cJSON_Delete(pod);
}

/* The one opt-in rule (inject_opt_in) decides for the transform and for
 * the webhook alike: for each value of reload-agent.io/inject on a pod the
 * transform refuses or skips, the webhook warns exactly when the pod asked
 * ("true", or a value the rule calls invalid, whose refusal says what to
 * write) and the warning is the transform's own reason. */
static void test_one_opt_in_rule(void **state)
{
    (void)state;
    static const struct {
        const char *value; /* NULL: no annotation */
        enum inject_opt_in want;
        const char *reason; /* words of the transform's reason */
    } T[] = {
        {NULL, INJECT_OPT_UNSET, "not opted in"},
        {"\"true\"", INJECT_OPT_IN, "hostPID"},
        {"\"false\"", INJECT_OPT_OUT, "is \"false\""},
        {"\"yes\"", INJECT_OPT_INVALID, "want \"true\""},
        {"\"True\"", INJECT_OPT_INVALID, "want \"true\""},
        {"\"\"", INJECT_OPT_INVALID, "want \"true\""},
        {"null", INJECT_OPT_UNSET, "not opted in"},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        char pod[512], ann[96] = "";
        if (T[i].value) snprintf(ann, sizeof ann, "\"reload-agent.io/inject\":%s", T[i].value);
        snprintf(pod, sizeof pod,
                 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\","
                 "\"annotations\":{%s}},\"spec\":{\"hostPID\":true,\"containers\":[{\"name\":"
                 "\"a\",\"volumeMounts\":[{\"name\":\"c\",\"mountPath\":\"/c\"}]}],\"volumes\":"
                 "[{\"name\":\"c\",\"configMap\":{\"name\":\"c\"}}]}}",
                 ann);
        cJSON *obj = cJSON_Parse(pod);
        assert_non_null(obj);
        const cJSON *annots =
            cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "annotations");
        assert_int_equal(inject_opt_in(annots), T[i].want);
        struct inject_result r;
        char err[256];
        assert_int_equal(inject_object(obj, NULL, &r, err, sizeof err), 0);
        assert_int_equal(r.outcome, INJECT_SKIPPED);
        if (!strstr(r.reason, T[i].reason)) fail_msg("%s: reason %s", pod, r.reason);
        cJSON_Delete(obj);

        char *body = pod_review("o", pod);
        struct answer a;
        ask(&a, body, "application/json", "o");
        assert_int_equal(a.info.result, ADMISSION_SKIPPED);
        int asked = T[i].want == INJECT_OPT_IN || T[i].want == INJECT_OPT_INVALID;
        assert_int_equal(nwarnings(&a), asked);
        if (asked) {
            char want[300];
            snprintf(want, sizeof want, "reload-agent: not injected: %s", r.reason);
            assert_string_equal(warning(&a, 0), want);
        }
        inject_result_free(&r);
        answer_free(&a);
        free(body);
    }
    assert_int_equal(inject_opt_in(NULL), INJECT_OPT_UNSET);
}

static void test_dry_run_same_answer(void **state)
{
    (void)state;
    char *wet = review_of("d", "CREATE", "", "Pod", "pods", NULL, POD_OPTED_IN, 0);
    char *dry = review_of("d", "CREATE", "", "Pod", "pods", NULL, POD_OPTED_IN, 1);
    struct answer a, b;
    ask(&a, wet, "application/json", "d");
    ask(&b, dry, "application/json", "d");
    assert_int_equal(a.info.dry_run, 0);
    assert_int_equal(b.info.dry_run, 1);
    assert_int_equal(b.info.result, ADMISSION_INJECTED);
    assert_string_equal(a.resp.body, b.resp.body);
    answer_free(&a);
    answer_free(&b);
    free(wet);
    free(dry);
}

/* ---- failures: never allowed:false ---- */

static int seam_rc;
static const char *seam_err;
static enum inject_outcome seam_outcome;
static size_t seam_nwarnings;
static int seam_ops; /* 1: one op */
static int seam_saw_managed_fields;
static const char *const *seam_warnings;
static int seam_released; /* the body's release ran before the transform */
static int released;      /* admission_review_release's calls of release */

static int fake_inject(const cJSON *obj, const struct inject_opts *opts, struct inject_result *out,
                       char *err, size_t errlen)
{
    assert_true(opts->admission);
    memset(out, 0, sizeof *out);
    seam_saw_managed_fields =
        cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "managedFields") != NULL;
    seam_released = released;
    if (seam_rc < 0) {
        if (seam_err) snprintf(err, errlen, "%s", seam_err);
        return seam_rc;
    }
    out->outcome = seam_outcome;
    out->ops = cJSON_CreateArray();
    if (seam_ops) {
        cJSON *op = cJSON_Parse("{\"op\":\"add\",\"path\":\"/metadata/labels\",\"value\":{}}");
        if (!out->ops || !op) { /* under the OOM test: as a transform would */
            cJSON_Delete(op);
            cJSON_Delete(out->ops);
            out->ops = NULL;
            return -ENOMEM;
        }
        cJSON_AddItemToArray(out->ops, op);
    }
    out->prefix = "";
    snprintf(out->reason, sizeof out->reason, "a reason");
    out->nwarnings = seam_nwarnings;
    out->warnings = calloc(seam_nwarnings + 1, sizeof *out->warnings);
    for (size_t i = 0; i < seam_nwarnings; i++) out->warnings[i] = strdup(seam_warnings[i]);
    return 0;
}

static int seam_setup(void **state)
{
    (void)state;
    admission__test_inject = fake_inject;
    seam_rc = 0;
    seam_err = NULL;
    seam_outcome = INJECT_INJECTED;
    seam_nwarnings = 0;
    seam_ops = 1;
    seam_warnings = NULL;
    return 0;
}

static int seam_teardown(void **state)
{
    (void)state;
    admission__test_inject = NULL;
    return 0;
}

static void expect_failed(const char *why_part)
{
    char *body = pod_review("f", POD_OPTED_IN);
    struct answer a;
    ask(&a, body, "application/json", "f");
    assert_int_equal(a.resp.status, 200);
    assert_int_equal(a.info.result, ADMISSION_ERROR);
    assert_false(has_patch(&a));
    assert_int_equal(nwarnings(&a), 1);
    if (strncmp(warning(&a, 0), "reload-agent: injection failed: ", 32) != 0 ||
        !strstr(warning(&a, 0), why_part))
        fail_msg("warning: %s (want %s)", warning(&a, 0), why_part);
    assert_non_null(strstr(a.info.reason, why_part));
    answer_free(&a);
    free(body);
}

static void test_transform_error(void **state)
{
    (void)state;
    seam_rc = -EINVAL;
    seam_err = "spec.containers[0].volumeMounts is not an array";
    expect_failed("spec.containers[0].volumeMounts is not an array");
    assert_false(seam_saw_managed_fields);
    seam_err = NULL;
    seam_rc = -ENOMEM;
    expect_failed(strerror(ENOMEM));
    seam_rc = 0;
    seam_outcome = INJECT_NOT_WORKLOAD;
    expect_failed("no pod template");
    seam_outcome = INJECT_INJECTED;
    seam_ops = 0;
    expect_failed("no operations");
}

static void test_bad_object(void **state)
{
    (void)state;
    char *body = review_of("o", "CREATE", "", "Pod", "pods", NULL, NULL, 0);
    struct answer a;
    ask(&a, body, "application/json", "o");
    assert_int_equal(a.info.result, ADMISSION_ERROR);
    assert_false(has_patch(&a));
    assert_non_null(strstr(warning(&a, 0), "injection failed: request.object is not a pod"));
    answer_free(&a);
    free(body);
    body = review_of("o", "CREATE", "", "Pod", "pods", NULL,
                     "{\"kind\":\"Deployment\",\"metadata\":{}}", 0);
    ask(&a, body, "application/json", "o");
    assert_int_equal(a.info.result, ADMISSION_ERROR);
    if (!strstr(warning(&a, 0), "\"Deployment\", not Pod")) fail_msg("%s", warning(&a, 0));
    answer_free(&a);
    free(body);
    body =
        review_of("o", "CREATE", "", "Pod", "pods", NULL, "{\"kind\":\"Pod\",\"metadata\":7}", 0);
    ask(&a, body, "application/json", "o");
    assert_int_equal(a.info.result, ADMISSION_ERROR);
    assert_non_null(strstr(warning(&a, 0), "metadata is not an object"));
    answer_free(&a);
    free(body);
}

/* UTF-8 code points in s. */
static size_t chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static void test_warning_limits(void **state)
{
    (void)state;
    char longw[400];
    memset(longw, 'w', sizeof longw - 1);
    longw[sizeof longw - 1] = '\0';
    /* 200 two-byte characters: cut on a character boundary. */
    char wide[401];
    for (int i = 0; i < 200; i++) memcpy(wide + 2 * i, "\xc3\xa9", 2);
    wide[400] = '\0';
    const char *ws[15] = {"first", longw, "tab\there\nnewline\x7f", wide, "bad \xff byte"};
    for (int i = 5; i < 15; i++) ws[i] = "more";
    seam_warnings = ws;
    seam_nwarnings = 15;
    char *body = pod_review("w", POD_OPTED_IN);
    struct answer a;
    ask(&a, body, "application/json", "w");
    assert_int_equal(a.info.result, ADMISSION_INJECTED);
    assert_int_equal(nwarnings(&a), 10);
    assert_int_equal(a.info.nwarnings, 10);
    for (int i = 0; i < 10; i++) {
        const char *w = warning(&a, i);
        assert_true(chars(w) <= ADMISSION_WARNING_MAX);
        assert_int_equal(strncmp(w, "reload-agent: ", 14), 0);
        for (const char *p = w; *p; p++) assert_true((unsigned char)*p >= 0x20 && *p != 0x7f);
    }
    assert_string_equal(warning(&a, 0), "reload-agent: first");
    assert_int_equal(chars(warning(&a, 1)), ADMISSION_WARNING_MAX);
    assert_string_equal(warning(&a, 1) + strlen(warning(&a, 1)) - 3, "...");
    assert_string_equal(warning(&a, 2), "reload-agent: tab here newline ");
    assert_int_equal(chars(warning(&a, 3)), ADMISSION_WARNING_MAX);
    assert_string_equal(warning(&a, 4), "reload-agent: bad ? byte");
    assert_string_equal(warning(&a, 9), "reload-agent: ... and 6 more warnings");
    answer_free(&a);

    /* Exactly ten: all sent, no summary. */
    seam_nwarnings = 10;
    ask(&a, body, "application/json", "w");
    assert_int_equal(nwarnings(&a), 10);
    assert_string_equal(warning(&a, 9), "reload-agent: more");
    answer_free(&a);
    free(body);
}

/* ---- out of memory: every allocation may fail (tests/oomwrap.h) ---- */

/* Runs the review of pod with the n-th allocation failing (and, with
 * rest, every later one), for n = 0, 1, ... until a run needs no more
 * than n allocations: libc's (the answer's own buffers, base64, the
 * transform's) and cJSON's alike. Every answer must be allowed (or a 400
 * when the request could not even be parsed, or -ENOMEM with nothing to
 * send: the server's 500), never a denial. Returns how many runs fell
 * back to "injection failed" answers. */
static int oom_run(const char *pod, int seam, int rest)
{
    char *body = pod_review("oom-uid", pod);
    int full = 0, fallback = 0;
    for (long n = 0; n < 100000 && !full; n++) {
        admission__test_inject = seam ? fake_inject : NULL;
        if (rest)
            oom_fail_from(n);
        else
            oom_fail_once(n);
        struct admission_response r;
        struct admission_info info;
        int rc = admission_review(body, strlen(body), "application/json", NULL, &r, &info);
        int alloc_failed = oom_failed();
        oom_off();
        admission__test_inject = NULL;
        if (rc == -ENOMEM) {
            assert_true(alloc_failed);
            assert_null(r.body);
            assert_int_equal(info.result, ADMISSION_ERROR);
            continue;
        }
        assert_int_equal(rc, 0);
        if (r.status == 400) { /* the parse itself failed for want of memory */
            assert_true(alloc_failed);
            admission_response_free(&r);
            continue;
        }
        assert_int_equal(r.status, 200);
        cJSON *doc = cJSON_Parse(r.body);
        assert_non_null(doc);
        cJSON *resp = cJSON_GetObjectItem(doc, "response");
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(resp, "allowed")));
        assert_string_equal(cJSON_GetObjectItem(resp, "uid")->valuestring, "oom-uid");
        if (info.result == ADMISSION_ERROR) {
            assert_true(alloc_failed);
            assert_null(cJSON_GetObjectItem(resp, "patch"));
            const char *w =
                cJSON_GetArrayItem(cJSON_GetObjectItem(resp, "warnings"), 0)->valuestring;
            if (!strstr(w, "reload-agent: injection failed: ")) fail_msg("warning %s", w);
            fallback++;
        } else if (!alloc_failed) { /* the whole review ran within the budget */
            assert_int_equal(info.result, ADMISSION_INJECTED);
            full = 1;
        }
        cJSON_Delete(doc);
        admission_response_free(&r);
    }
    assert_true(full);
    free(body);
    return fallback;
}

static void test_oom_never_denies(void **state)
{
    (void)state;
    /* One allocation fails: wherever it is after the parse, the answer is
     * the "injection failed" fallback (or the full answer, when the
     * transform copes with it). */
    assert_true(oom_run(POD_OPTED_IN, 0, 0) > 0);
    /* Every allocation from the n-th on fails: no denial and no crash or
     * leak either (the run under ASan checks the leaks). */
    oom_run(POD_OPTED_IN, 0, 1);
}

static void test_oom_never_denies_seam(void **state)
{
    (void)state;
    assert_true(oom_run(POD_OPTED_IN, 1, 0) > 0);
    oom_run(POD_OPTED_IN, 1, 1);
}

/* ---- memory: the body's release, reviews too large to parse ---- */

static void release(void *ud)
{
    released++;
    free(ud); /* the body: nothing may read it after */
}

/* Issue 16.15: the body is given back once parsed, before the transform
 * runs (the review is not held twice), on every path, once. */
static void test_body_released_before_the_transform(void **state)
{
    (void)state;
    static const char *const bodies[] = {NULL, "{\"apiVersion\":", "[1,2]"};
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        char *body = bodies[i] ? strdup(bodies[i]) : pod_review("r", POD_OPTED_IN);
        size_t len = strlen(body);
        struct admission_response out;
        struct admission_info info;
        released = seam_released = 0;
        assert_int_equal(admission_review_release(body, len, "application/json", NULL, release,
                                                  body, &out, &info),
                         0);
        assert_int_equal(released, 1);
        if (i == 0) {
            assert_int_equal(seam_released, 1);
            assert_int_equal(info.result, ADMISSION_INJECTED);
        } else {
            assert_int_equal(out.status, 400);
        }
        admission_response_free(&out);
    }
}

/* A review of n tiny JSON values in the pod's args (uid "big" unless
 * no_uid): malloc'd. */
static char *review_of_values(size_t n, int no_uid)
{
    size_t cap = 4 * n + 1024, o = 0;
    char *args = malloc(cap);
    assert_non_null(args);
    args[o++] = '[';
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(args + o, cap - o, "%s\"a\"", i ? "," : "");
    args[o++] = ']';
    args[o] = '\0';
    char *pod = NULL, *r = NULL;
    assert_true(asprintf(&pod,
                         "{\"metadata\":{\"name\":\"p\",\"annotations\":{\"reload-agent.io/"
                         "inject\":\"true\"}},\"spec\":{\"containers\":[{\"name\":\"a\","
                         "\"args\":%s,\"volumeMounts\":[{\"name\":\"c\",\"mountPath\":\"/c\"}]}],"
                         "\"volumes\":[{\"name\":\"c\",\"configMap\":{\"name\":\"c\"}}]}}",
                         args) > 0);
    free(args);
    r = review_of(no_uid ? NULL : "big", "CREATE", "", "Pod", "pods", NULL, pod, 0);
    free(pod);
    return r;
}

/* Issue 16.15: a review of more JSON values than ADMISSION_MAX_VALUES is
 * not parsed (a tree costs about 100 bytes a value: 3 MiB of tiny values
 * took 120 MiB): allowed unchanged with a warning; 400 without a uid. One
 * just under the limit is injected. */
static void test_too_many_values(void **state)
{
    (void)state;
    char uid[64], *body = review_of_values(0, 0);
    long overhead = jsonscan_values(body, strlen(body), uid, sizeof uid); /* with "args": [] */
    free(body);
    assert_string_equal(uid, "big");
    body = review_of_values((size_t)(ADMISSION_MAX_VALUES - overhead + 1), 0);
    struct answer a;
    ask(&a, body, "application/json", "big");
    assert_int_equal(a.info.result, ADMISSION_ERROR);
    assert_false(has_patch(&a));
    char want[160];
    snprintf(want, sizeof want,
             "reload-agent: injection failed: the review holds %d JSON values, more than %d: too "
             "large to read",
             ADMISSION_MAX_VALUES + 1, ADMISSION_MAX_VALUES);
    assert_string_equal(warning(&a, 0), want);
    answer_free(&a);
    free(body);
    body = review_of_values((size_t)(ADMISSION_MAX_VALUES - overhead), 0);
    ask(&a, body, "application/json", "big");
    assert_int_equal(a.info.result, ADMISSION_INJECTED);
    answer_free(&a);
    free(body);
    body = review_of_values(ADMISSION_MAX_VALUES, 1);
    ask_status(body, "application/json", 400, "and no plain request.uid");
    free(body);
}

/* The number of values of a cJSON tree. */
static long tree_values(const cJSON *v)
{
    long n = 1;
    for (const cJSON *c = v->child; c; c = c->next) n += tree_values(c);
    return n;
}

/* jsonscan counts every value, finds request.uid, and never counts fewer
 * values than cJSON builds (the bound the limit relies on). */
static void test_jsonscan(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        long values;
        const char *uid;
    } T[] = {
        {"{\"a\":[1,2,{\"b\":null}],\"c\":\"x\"}", 7, ""},
        {"\xEF\xBB\xBF{\"request\":{\"kind\":{},\"uid\":\"u-1\"}}", 4, "u-1"},
        {"{\"request\":{\"uid\":[\"no\"]}, \"uid\":\"top\"}", 5, ""},
        {"{\"x\":{\"request\":{\"uid\":\"deep\"}}}", 4, ""},
        {"{\"request\":{\"uid\":\"es\\\"caped\"}}", 3, ""},
        {" \x01[true, false, null, -1.5e3]\n trailing", 5, ""},
        {"[[[[", 4, ""},      /* cut off: what was seen */
        {"{\"a\" 1}", 1, ""}, /* not JSON from there on */
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        char uid[16];
        long n = jsonscan_values(T[i].text, strlen(T[i].text), uid, sizeof uid);
        if (n != T[i].values || strcmp(uid, T[i].uid) != 0)
            fail_msg("%zu: %ld values, uid \"%s\"", i, n, uid);
        cJSON *t = cJSON_ParseWithLength(T[i].text, strlen(T[i].text));
        if (t) assert_true(tree_values(t) <= n);
        cJSON_Delete(t);
    }
}

/* restart-pod at admission: the patch gives the sidecar its
 * RestartAllContainers rule and nothing of what signal or rollout need;
 * for a cluster below 1.36 (--kube-version) the pod is admitted unchanged,
 * with the reason as a warning naming the field and the version: never a
 * patch the API server would reject. */
static void test_restart_pod_kube_version(void **state)
{
    (void)state;
    static const char *POD =
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web\","
        "\"annotations\":{\"reload-agent.io/inject\":\"true\",\"reload-agent.io/action\":"
        "\"restart-pod\"}},\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":\"nginx\","
        "\"volumeMounts\":[{\"name\":\"conf\",\"mountPath\":\"/etc/nginx/conf.d\"}]}],"
        "\"volumes\":[{\"name\":\"conf\",\"configMap\":{\"name\":\"nginx-conf\"}}]}}";
    char *body = pod_review("rp", POD);
    for (int minor = 34; minor <= 37; minor++) {
        struct inject_opts o = {.kube_minor = minor};
        struct answer a;
        memset(&a, 0, sizeof a);
        assert_int_equal(
            admission_review(body, strlen(body), "application/json", &o, &a.resp, &a.info), 0);
        assert_int_equal(a.resp.status, 200);
        a.doc = cJSON_Parse(a.resp.body);
        a.response = cJSON_GetObjectItem(a.doc, "response");
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(a.response, "allowed")));
        if (minor < 36) {
            assert_int_equal(a.info.result, ADMISSION_SKIPPED);
            assert_false(has_patch(&a));
            assert_true(nwarnings(&a) >= 1);
            char v[16];
            snprintf(v, sizeof v, "1.%d", minor);
            if (!strstr(warning(&a, 0), "restartPolicyRules") || !strstr(warning(&a, 0), v))
                fail_msg("warning: %s", warning(&a, 0));
        } else {
            assert_int_equal(a.info.result, ADMISSION_INJECTED);
            cJSON *ops = decoded_patch(&a);
            char *text = cJSON_PrintUnformatted(ops);
            assert_non_null(strstr(text, "\"restartPolicyRules\":[{\"action\":"
                                         "\"RestartAllContainers\""));
            assert_non_null(strstr(text, "--restart-policy-rules="));
            assert_non_null(strstr(text, "--state-dir=/reload-agent/state"));
            assert_null(strstr(text, "shareProcessNamespace"));
            assert_null(strstr(text, "serviceaccount"));
            free(text);
            cJSON_Delete(ops);
        }
        answer_free(&a);
    }
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_content_type),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_uid_echo),
        cmocka_unit_test(test_only_pod_create),
        cmocka_unit_test(test_injected),
        cmocka_unit_test(test_fast_sync),
        cmocka_unit_test(test_object_without_kind),
        cmocka_unit_test(test_skipped),
        cmocka_unit_test(test_restart_pod_kube_version),
        cmocka_unit_test(test_one_opt_in_rule),
        cmocka_unit_test(test_dry_run_same_answer),
        cmocka_unit_test_setup_teardown(test_transform_error, seam_setup, seam_teardown),
        cmocka_unit_test(test_bad_object),
        cmocka_unit_test_setup_teardown(test_warning_limits, seam_setup, seam_teardown),
        cmocka_unit_test(test_oom_never_denies),
        cmocka_unit_test_setup_teardown(test_body_released_before_the_transform, seam_setup,
                                        seam_teardown),
        cmocka_unit_test(test_too_many_values),
        cmocka_unit_test(test_jsonscan),
        cmocka_unit_test_setup_teardown(test_oom_never_denies_seam, seam_setup, seam_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
