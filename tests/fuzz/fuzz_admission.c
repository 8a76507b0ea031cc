/*
 * fuzz_admission.c - libFuzzer target for admission_review (webhook/
 * admission.c), the bytes the webhook's POST /mutate receives.
 *
 * Input: the first byte picks the Content-Type (application/json, with a
 * charset parameter, text/plain, none), the rest is the body.
 *
 * Invariants: the call succeeds (no OOM here); the status is 415 exactly
 * when the type is not JSON, else 400 or 200; a 400/415 body is one text
 * line; a 200 body is an AdmissionReview v1 whose response echoes
 * request.uid and is allowed: true (never a denial); at most 10 warnings,
 * each starting "reload-agent: " with at most 120 characters and no
 * control character; a patch is base64 of a non-empty JSON array that
 * applies (our RFC 6902 code) to request.object as sent, and reviewing the
 * patched pod again gives no patch (the webhook converges on
 * reinvocation).
 */
#include "yamldoc/jsonpatch.h"
#include "webhook/admission.h"
#include "webhook/jsonscan.h"

#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

static const char *const TYPES[] = {"application/json", "application/json; charset=utf-8",
                                    "text/plain", NULL};

static size_t chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* The decoded patch, or NULL if the answer has none. */
static cJSON *patch_of(const cJSON *resp)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(resp, "patch");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(resp, "patchType");
    if (!p) {
        CHECK(!t);
        return NULL;
    }
    CHECK(cJSON_IsString(p) && cJSON_IsString(t) && strcmp(t->valuestring, "JSONPatch") == 0);
    size_t n = strlen(p->valuestring);
    CHECK(n % 4 == 0 && n > 0);
    unsigned char *raw = malloc(n + 1);
    CHECK(raw);
    int m = EVP_DecodeBlock(raw, (const unsigned char *)p->valuestring, (int)n);
    CHECK(m > 0);
    while (m > 0 && raw[m - 1] == '\0') m--;
    cJSON *ops = cJSON_ParseWithLength((const char *)raw, (size_t)m);
    free(raw);
    CHECK(cJSON_IsArray(ops) && cJSON_GetArraySize(ops) > 0);
    return ops;
}

/* Checks one answer; returns the parsed 200 body (or NULL). */
static cJSON *check_answer(const char *body, size_t len, const char *ctype,
                           const struct admission_response *r, const struct admission_info *info)
{
    (void)len;
    CHECK(r->body && strlen(r->body) == r->body_len && r->status == info->status);
    if (!admission_is_json_type(ctype)) {
        CHECK(r->status == 415);
        return NULL;
    }
    CHECK(r->status == 200 || r->status == 400);
    if (r->status == 400) {
        CHECK(info->result == ADMISSION_BAD_REQUEST);
        CHECK(r->body_len > 1 && r->body[r->body_len - 1] == '\n');
        CHECK(!memchr(r->body, '\n', r->body_len - 1));
        return NULL;
    }
    cJSON *doc = cJSON_Parse(r->body);
    CHECK(doc);
    const cJSON *av = cJSON_GetObjectItemCaseSensitive(doc, "apiVersion");
    CHECK(cJSON_IsString(av) && strcmp(av->valuestring, "admission.k8s.io/v1") == 0);
    const cJSON *resp = cJSON_GetObjectItemCaseSensitive(doc, "response");
    CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "allowed")));
    /* The uid echoed is the request's. */
    cJSON *req = cJSON_ParseWithLength(body, len);
    CHECK(req);
    const cJSON *uid =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(req, "request"), "uid");
    const cJSON *ruid = cJSON_GetObjectItemCaseSensitive(resp, "uid");
    CHECK(cJSON_IsString(uid) && cJSON_IsString(ruid) &&
          strcmp(uid->valuestring, ruid->valuestring) == 0);
    cJSON_Delete(req);
    const cJSON *ws = cJSON_GetObjectItemCaseSensitive(resp, "warnings");
    CHECK(cJSON_GetArraySize(ws) <= ADMISSION_MAX_WARNINGS);
    const cJSON *w;
    cJSON_ArrayForEach(w, ws)
    {
        CHECK(cJSON_IsString(w) && strncmp(w->valuestring, "reload-agent: ", 14) == 0);
        CHECK(chars(w->valuestring) <= ADMISSION_WARNING_MAX);
        for (const char *p = w->valuestring; *p; p++)
            CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
    }
    return doc;
}

static long tree_values(const cJSON *v)
{
    long n = 1;
    for (const cJSON *c = v->child; c; c = c->next) n += tree_values(c);
    return n;
}

/* The scan's count bounds cJSON's tree; its uid is the plain request.uid. */
static void check_scan(const char *body, size_t len)
{
    char uid[64];
    long n = jsonscan_values(body, len, uid, sizeof uid);
    const char *end = NULL;
    cJSON *t = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!t) return;
    CHECK(tree_values(t) <= n);
    const cJSON *u =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "request"), "uid");
    if (cJSON_IsString(u) && strlen(u->valuestring) < sizeof uid &&
        !strpbrk(u->valuestring, "\\\""))
        CHECK(strcmp(uid, u->valuestring) == 0 || *uid == '\0');
    cJSON_Delete(t);
}

static int released;
static void release(void *ud)
{
    released++;
    free(ud);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const char *ctype = TYPES[data[0] % 4];
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    struct admission_response r;
    struct admission_info info;
    check_scan(body, len);
    char *copy = malloc(len + 1);
    CHECK(copy);
    memcpy(copy, body, len);
    released = 0;
    CHECK(admission_review_release(copy, len, ctype, NULL, release, copy, &r, &info) == 0);
    CHECK(released == (admission_is_json_type(ctype) && len > 0));
    if (!released) free(copy);
    admission_response_free(&r);
    CHECK(admission_review(body, len, ctype, NULL, &r, &info) == 0);
    cJSON *doc = check_answer(body, len, ctype, &r, &info);
    cJSON *ops = doc ? patch_of(cJSON_GetObjectItemCaseSensitive(doc, "response")) : NULL;
    CHECK((ops != NULL) == (info.result == ADMISSION_INJECTED));
    if (ops) {
        /* The patch applies to the object as sent; the patched pod,
         * reviewed again, needs nothing more. */
        cJSON *rv = cJSON_ParseWithLength(body, len);
        CHECK(rv);
        cJSON *req = cJSON_GetObjectItemCaseSensitive(rv, "request");
        cJSON *obj = cJSON_DetachItemFromObjectCaseSensitive(req, "object");
        char err[256];
        CHECK(jsonpatch_apply(&obj, ops, err, sizeof err) == 0);
        cJSON_AddItemToObject(req, "object", obj);
        char *again = cJSON_PrintUnformatted(rv);
        CHECK(again);
        struct admission_response r2;
        struct admission_info info2;
        CHECK(admission_review(again, strlen(again), ctype, NULL, &r2, &info2) == 0);
        cJSON *doc2 = check_answer(again, strlen(again), ctype, &r2, &info2);
        CHECK(doc2 && info2.result == ADMISSION_UNCHANGED);
        CHECK(!patch_of(cJSON_GetObjectItemCaseSensitive(doc2, "response")));
        cJSON_Delete(doc2);
        admission_response_free(&r2);
        cJSON_free(again);
        cJSON_Delete(rv);
        cJSON_Delete(ops);
    }
    cJSON_Delete(doc);
    admission_response_free(&r);
    return 0;
}
