/*
 * admission.c - AdmissionReview v1 bytes in, HTTP status and body out
 * (the policy is in admission.h). cJSON parses the review; the pod inside
 * it goes to the transform with managedFields dropped; the response is
 * built with cJSON and its patch base64-encoded (base/b64.h). Nothing
 * here logs: the caller reads struct
 * admission_info.
 */
#include "webhook/admission.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/b64.h"
#include "base/text.h"
#include "base/utf8.h"
#include "webhook/jsonscan.h"

int (*admission__test_inject)(const cJSON *obj, const struct inject_opts *opts,
                              struct inject_result *out, char *err, size_t errlen);

#define WARN_PREFIX "reload-agent: "
#define TEXT_TYPE "text/plain; charset=utf-8"
#define JSON_TYPE "application/json"

const char *admission_result_name(enum admission_result r)
{
    switch (r) {
    case ADMISSION_INJECTED: return "injected";
    case ADMISSION_UNCHANGED: return "unchanged";
    case ADMISSION_SKIPPED: return "skipped";
    case ADMISSION_IGNORED: return "ignored";
    case ADMISSION_ERROR: return "error";
    case ADMISSION_BAD_REQUEST: return "bad_request";
    case ADMISSION_NRESULTS: break;
    }
    return "error";
}

int admission_is_json_type(const char *t)
{
    if (!t) return 0;
    while (*t == ' ' || *t == '\t') t++;
    size_t n = strcspn(t, ";");
    while (n > 0 && (t[n - 1] == ' ' || t[n - 1] == '\t')) n--;
    return n == strlen(JSON_TYPE) && strncasecmp(t, JSON_TYPE, n) == 0;
}

void admission_response_free(struct admission_response *out)
{
    free(out->body);
    memset(out, 0, sizeof *out);
}

/* Copies src (may be NULL) into dst[cap], cut to fit on a UTF-8 boundary. */
static void copy_cut(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= cap) {
        n = cap - 1;
        while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80) n--;
    }
    if (n) memcpy(dst, src, n);
    dst[n] = '\0';
}

/* A value from the request, for a one-line reason: the one text policy
 * (base/text.h: cJSON lets raw control characters through in strings),
 * cut to fit dst[cap]. */
static void shown(char *dst, size_t cap, const char *src) { ra_one_line(dst, cap, src ? src : ""); }

static const char *str_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A text/plain answer (400, 415): the reason and a newline. */
static int text_answer(struct admission_response *out, struct admission_info *info, int status,
                       const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int text_answer(struct admission_response *out, struct admission_info *info, int status,
                       const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(info->reason, sizeof info->reason, fmt, ap);
    va_end(ap);
    info->result = ADMISSION_BAD_REQUEST;
    info->status = status;
    size_t n = strlen(info->reason);
    char *b = malloc(n + 2);
    if (!b) return -ENOMEM;
    memcpy(b, info->reason, n);
    b[n] = '\n';
    b[n + 1] = '\0';
    *out = (struct admission_response){status, TEXT_TYPE, b, n + 1};
    return 0;
}

/* ---- warnings ---- */

/* WARN_PREFIX + text as one warning, by the API server's rules for
 * warnings (admission.h), not base/text.h's: control characters (C0, DEL,
 * C1) become spaces, bytes that are not UTF-8 (base/utf8.h, strict) '?',
 * and at most ADMISSION_WARNING_MAX code points (a longer one is cut and
 * ends in "..."). Returns a malloc'd string or NULL on OOM. */
static char *warning_text(const char *text)
{
    size_t plen = strlen(WARN_PREFIX), tlen = strlen(text);
    char *w = malloc(plen + tlen * 1 + 4);
    if (!w) return NULL;
    memcpy(w, WARN_PREFIX, plen);
    size_t o = plen, chars = plen, cut_o = 0, i = 0;
    int cut = 0;
    while (i < tlen) {
        if (chars == ADMISSION_WARNING_MAX - 3) cut_o = o; /* where "..." would go */
        if (chars == ADMISSION_WARNING_MAX) {
            cut = 1;
            break;
        }
        size_t l;
        int32_t cp = ra_utf8_decode(text + i, tlen - i, &l);
        if (cp == RA_UTF8_INVALID)
            w[o++] = '?';
        else if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f))
            w[o++] = ' ';
        else {
            memcpy(w + o, text + i, l);
            o += l;
        }
        i += l;
        chars++;
    }
    if (cut) {
        memcpy(w + cut_o, "...", 3);
        o = cut_o + 3;
    }
    w[o] = '\0';
    return w;
}

/* The warnings to send, in order. */
struct warnings {
    const char *v[64];
    size_t n, total;
};

static void warnings_add(struct warnings *w, const char *s)
{
    w->total++;
    if (w->n < sizeof w->v / sizeof w->v[0]) w->v[w->n++] = s;
}

/* Adds the warnings array to resp. Returns 0 or -ENOMEM. */
static int add_warnings(cJSON *resp, struct warnings *w, struct admission_info *info)
{
    if (w->total == 0) return 0;
    cJSON *arr = cJSON_AddArrayToObject(resp, "warnings");
    if (!arr) return -ENOMEM;
    size_t keep = w->total > ADMISSION_MAX_WARNINGS ? ADMISSION_MAX_WARNINGS - 1 : w->total;
    if (keep > w->n) keep = w->n;
    for (size_t i = 0; i < keep; i++) {
        char *t = warning_text(w->v[i]);
        cJSON *s = t ? cJSON_CreateString(t) : NULL;
        free(t);
        if (!s) return -ENOMEM;
        cJSON_AddItemToArray(arr, s);
    }
    if (keep < w->total) {
        char more[64];
        snprintf(more, sizeof more, WARN_PREFIX "... and %zu more warnings", w->total - keep);
        cJSON *s = cJSON_CreateString(more);
        if (!s) return -ENOMEM;
        cJSON_AddItemToArray(arr, s);
        keep++;
    }
    info->nwarnings = keep;
    return 0;
}

/* ---- the 200 answer ---- */

/* Builds the AdmissionReview response: allowed, uid echoed, the patch (if
 * ops is non-NULL), the warnings, the audit annotation. Returns 0 and
 * fills out, or -ENOMEM. */
static int review_answer(const char *uid, const cJSON *ops, struct warnings *w,
                         struct admission_info *info, struct admission_response *out)
{
    int rc = -ENOMEM;
    char *patch = NULL, *b64 = NULL, *text = NULL;
    cJSON *root = cJSON_CreateObject();
    if (!root) return -ENOMEM;
    cJSON *resp;
    if (!cJSON_AddStringToObject(root, "apiVersion", ADMISSION_API_VERSION) ||
        !cJSON_AddStringToObject(root, "kind", "AdmissionReview") ||
        !(resp = cJSON_AddObjectToObject(root, "response")) ||
        !cJSON_AddStringToObject(resp, "uid", uid) || !cJSON_AddTrueToObject(resp, "allowed"))
        goto out;
    if (ops) {
        patch = cJSON_PrintUnformatted(ops);
        if (!patch || !(b64 = ra_b64_encode(patch, strlen(patch)))) goto out;
        cJSON *audit;
        if (!cJSON_AddStringToObject(resp, "patchType", "JSONPatch") ||
            !cJSON_AddStringToObject(resp, "patch", b64) ||
            !(audit = cJSON_AddObjectToObject(resp, "auditAnnotations")) ||
            !cJSON_AddStringToObject(audit, "injected", "true"))
            goto out;
    }
    if (add_warnings(resp, w, info) < 0) goto out;
    text = cJSON_PrintUnformatted(root);
    if (!text) goto out;
    *out = (struct admission_response){200, JSON_TYPE, text, strlen(text)};
    info->status = 200;
    rc = 0;
out:
    if (patch) cJSON_free(patch);
    free(b64);
    cJSON_Delete(root);
    return rc;
}

/* The answer when the injection failed: allowed, no patch, one warning
 * "injection failed: why". */
static int failed_answer(const char *uid, const char *why, struct admission_info *info,
                         struct admission_response *out)
{
    char text[300];
    snprintf(text, sizeof text, "injection failed: %s", why);
    info->result = ADMISSION_ERROR;
    info->nops = 0;
    info->nwarnings = 0;
    copy_cut(info->reason, sizeof info->reason, text);
    struct warnings w = {.n = 0};
    warnings_add(&w, text);
    return review_answer(uid, NULL, &w, info, out);
}

/* 1 if request is a CREATE of a pod (group "", kind Pod, resource pods, no
 * subresource); else 0 and why in info->reason. */
static int is_pod_create(const cJSON *req, struct admission_info *info)
{
    const char *op = str_of(req, "operation");
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(req, "kind");
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(req, "resource");
    const char *kgroup = str_of(kind, "group"), *kkind = str_of(kind, "kind");
    const char *rgroup = str_of(res, "group"), *rres = str_of(res, "resource");
    const char *sub = str_of(req, "subResource");
    if (!op || strcmp(op, "CREATE") != 0) {
        snprintf(info->reason, sizeof info->reason, "operation %.20s: only CREATE is mutated",
                 op ? op : "(none)");
        return 0;
    }
    if (sub && *sub) {
        snprintf(info->reason, sizeof info->reason, "subresource %.64s: only pods are mutated",
                 sub);
        return 0;
    }
    if ((kgroup && *kgroup) || !kkind || strcmp(kkind, "Pod") != 0 || (rgroup && *rgroup) ||
        !rres || strcmp(rres, "pods") != 0) {
        snprintf(info->reason, sizeof info->reason,
                 "kind %.64s/%.64s (resource %.64s): only pods are mutated", kgroup ? kgroup : "",
                 kkind ? kkind : "(none)", rres ? rres : "(none)");
        return 0;
    }
    return 1;
}

/* 1 if the pod asked for injection, by the one opt-in rule
 * (inject_opt_in): "true", or a value that is neither "true" nor "false",
 * whose refusal says what to write instead. A pod that says nothing, or
 * "false", is skipped quietly. */
static int asked(const cJSON *pod)
{
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
    enum inject_opt_in o = inject_opt_in(cJSON_GetObjectItemCaseSensitive(md, "annotations"));
    return o == INJECT_OPT_IN || o == INJECT_OPT_INVALID;
}

/* Runs the transform on the CREATE's pod and answers. */
static int mutate(const char *uid, cJSON *pod, const struct inject_opts *opts,
                  struct admission_info *info, struct admission_response *out)
{
    if (!cJSON_IsObject(pod)) return failed_answer(uid, "request.object is not a pod", info, out);
    cJSON *md = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
    if (md && !cJSON_IsObject(md))
        return failed_answer(uid, "request.object.metadata is not an object", info, out);
    const char *name = str_of(md, "name");
    if (!name || !*name) {
        name = str_of(md, "generateName");
        info->name_is_generated = name != NULL;
    }
    copy_cut(info->name, sizeof info->name, name);
    /* Large, and never read by the transform: its ops stay valid on the
     * object as sent. */
    cJSON_DeleteItemFromObjectCaseSensitive(md, "managedFields");
    /* The API server serializes the kind; tolerate its absence. */
    const char *kind = str_of(pod, "kind");
    if (!kind) {
        cJSON_DeleteItemFromObjectCaseSensitive(pod, "kind");
        cJSON_DeleteItemFromObjectCaseSensitive(pod, "apiVersion");
        if (!cJSON_AddStringToObject(pod, "kind", "Pod") ||
            !cJSON_AddStringToObject(pod, "apiVersion", "v1"))
            return failed_answer(uid, "out of memory", info, out);
    } else if (strcmp(kind, "Pod") != 0) {
        char why[128];
        snprintf(why, sizeof why, "request.object.kind is \"%.64s\", not Pod", kind);
        return failed_answer(uid, why, info, out);
    }

    struct inject_opts o = opts ? *opts : (struct inject_opts){0};
    o.admission = 1;
    struct inject_result r;
    memset(&r, 0, sizeof r);
    char err[256] = "";
    int rc = admission__test_inject ? admission__test_inject(pod, &o, &r, err, sizeof err)
                                    : inject_object(pod, &o, &r, err, sizeof err);
    if (rc < 0) {
        inject_result_free(&r);
        return failed_answer(uid, err[0] ? err : strerror(-rc), info, out);
    }
    struct warnings w = {.n = 0};
    const cJSON *ops = NULL;
    char skip[300];
    switch (r.outcome) {
    case INJECT_INJECTED:
        if (!cJSON_IsArray(r.ops) || cJSON_GetArraySize(r.ops) == 0) {
            inject_result_free(&r);
            return failed_answer(uid, "the transform returned no operations", info, out);
        }
        info->result = ADMISSION_INJECTED;
        info->nops = (size_t)cJSON_GetArraySize(r.ops);
        ops = r.ops;
        break;
    case INJECT_UNCHANGED: info->result = ADMISSION_UNCHANGED; break;
    case INJECT_SKIPPED:
        info->result = ADMISSION_SKIPPED;
        copy_cut(info->reason, sizeof info->reason, r.reason);
        if (asked(pod)) {
            snprintf(skip, sizeof skip, "not injected: %s", r.reason);
            warnings_add(&w, skip);
        }
        break;
    case INJECT_NOT_WORKLOAD:
    default: {
        char why[300];
        snprintf(why, sizeof why, "the transform sees no pod template (%s)", r.reason);
        inject_result_free(&r);
        return failed_answer(uid, why, info, out);
    }
    }
    if (info->result != ADMISSION_SKIPPED || asked(pod))
        for (size_t i = 0; i < r.nwarnings; i++)
            if (r.warnings[i]) warnings_add(&w, r.warnings[i]);
    rc = review_answer(uid, ops, &w, info, out);
    inject_result_free(&r);
    if (rc < 0) return failed_answer(uid, "out of memory", info, out);
    return 0;
}

int admission_review(const char *body, size_t len, const char *content_type,
                     const struct inject_opts *opts, struct admission_response *out,
                     struct admission_info *info)
{
    return admission_review_release(body, len, content_type, opts, NULL, NULL, out, info);
}

/* A review with more than ADMISSION_MAX_VALUES JSON values is answered from
 * the scan alone: allowed, not injected (a tree of it would cost about 100
 * bytes per value), or 400 when it names no request.uid to answer. */
static int too_many_values(long nv, const char *uid, struct admission_response *out,
                           struct admission_info *info)
{
    if (!*uid)
        return text_answer(out, info, 400,
                           "the body holds more than %d JSON values and no plain request.uid",
                           ADMISSION_MAX_VALUES);
    char why[160];
    copy_cut(info->uid, sizeof info->uid, uid);
    snprintf(why, sizeof why, "the review holds %ld JSON values, more than %d: too large to read",
             nv, ADMISSION_MAX_VALUES);
    return failed_answer(uid, why, info, out);
}

/* Parses the body into *root after the Content-Type and size checks; the
 * caller's copy is released as soon as the tree holds what the rest needs
 * (one copy, not two). Returns 1, or what the answer given instead
 * returned (0, or -ENOMEM). */
static int parse_body(const char *body, size_t len, const char *content_type,
                      void (*release)(void *), void *ud, cJSON **root,
                      struct admission_response *out, struct admission_info *info)
{
    if (!admission_is_json_type(content_type)) {
        char ct[80];
        shown(ct, sizeof ct, content_type);
        return content_type
                   ? text_answer(out, info, 415,
                                 "Content-Type \"%s\" is not supported: send application/json", ct)
                   : text_answer(out, info, 415,
                                 "no Content-Type: send an AdmissionReview as application/json");
    }
    if (!body || len == 0)
        return text_answer(out, info, 400, "empty body: expected an AdmissionReview");
    char scan_uid[sizeof info->uid];
    long nv = jsonscan_values(body, len, scan_uid, sizeof scan_uid);
    if (nv > ADMISSION_MAX_VALUES) {
        if (release) release(ud);
        return too_many_values(nv, scan_uid, out, info);
    }
    const char *end = NULL;
    *root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    size_t at = end && end >= body && end <= body + len ? (size_t)(end - body) : 0;
    while (*root && at < len &&
           (body[at] == ' ' || body[at] == '\t' || body[at] == '\r' || body[at] == '\n'))
        at++;
    if (release) release(ud);
    if (!*root) return text_answer(out, info, 400, "malformed JSON at byte %zu of %zu", at, len);
    if (at < len)
        return text_answer(out, info, 400, "malformed JSON: trailing data at byte %zu of %zu", at,
                           len);
    return 1;
}

/* The AdmissionReview envelope: apiVersion, kind, a request with a uid.
 * Returns 1 with *req set, or what the 400 answer returned. */
static int check_envelope(const cJSON *root, const cJSON **req, struct admission_response *out,
                          struct admission_info *info)
{
    if (!cJSON_IsObject(root))
        return text_answer(out, info, 400,
                           "the body is not a JSON object: expected an AdmissionReview");
    const char *av = str_of(root, "apiVersion"), *kind = str_of(root, "kind");
    char v[80];
    if (!av || strcmp(av, ADMISSION_API_VERSION) != 0) {
        shown(v, sizeof v, av);
        return av ? text_answer(out, info, 400,
                                "apiVersion \"%s\" is not supported: only " ADMISSION_API_VERSION,
                                v)
                  : text_answer(out, info, 400,
                                "apiVersion is missing: expected " ADMISSION_API_VERSION);
    }
    if (!kind || strcmp(kind, "AdmissionReview") != 0) {
        shown(v, sizeof v, kind);
        return kind ? text_answer(out, info, 400, "kind \"%s\": expected AdmissionReview", v)
                    : text_answer(out, info, 400, "kind is missing: expected AdmissionReview");
    }
    *req = cJSON_GetObjectItemCaseSensitive(root, "request");
    if (!cJSON_IsObject(*req))
        return text_answer(out, info, 400, "request is missing or not an object");
    const char *uid = str_of(*req, "uid");
    if (!uid || !*uid) return text_answer(out, info, 400, "request.uid is missing or empty");
    return 1;
}

int admission_review_release(const char *body, size_t len, const char *content_type,
                             const struct inject_opts *opts, void (*release)(void *), void *ud,
                             struct admission_response *out, struct admission_info *info)
{
    cJSON *root = NULL;
    const cJSON *req = NULL;
    memset(out, 0, sizeof *out);
    memset(info, 0, sizeof *info);
    int rc = parse_body(body, len, content_type, release, ud, &root, out, info);
    if (rc > 0) rc = check_envelope(root, &req, out, info);
    if (rc > 0) {
        const char *uid = str_of(req, "uid");
        copy_cut(info->uid, sizeof info->uid, uid);
        copy_cut(info->namespace_, sizeof info->namespace_, str_of(req, "namespace"));
        copy_cut(info->operation, sizeof info->operation, str_of(req, "operation"));
        info->dry_run = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "dryRun"));
        if (is_pod_create(req, info)) {
            rc = mutate(uid, cJSON_GetObjectItemCaseSensitive(req, "object"), opts, info, out);
        } else {
            struct warnings w = {.n = 0};
            info->result = ADMISSION_IGNORED;
            rc = review_answer(uid, NULL, &w, info, out);
            if (rc < 0) rc = failed_answer(uid, "out of memory", info, out);
        }
    }
    if (rc < 0) { /* not even a 400 could be built: the caller answers 500 */
        info->result = ADMISSION_ERROR;
        info->status = 500;
        snprintf(info->reason, sizeof info->reason, "out of memory");
    }
    cJSON_Delete(root);
    return rc;
}
