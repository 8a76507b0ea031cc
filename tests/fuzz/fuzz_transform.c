/*
 * fuzz_transform.c - libFuzzer target for the injection transform
 * (inject/transform.c) and JSON Patch (yamldoc/jsonpatch.c): the object a
 * webhook receives in an AdmissionReview, or a manifest the CLI reads.
 *
 * Input: byte 0 picks the options (bit 0: admission, bit 1: --all, bits
 * 2-3: --kube-version 1.36, 1.34, 1.35 or 1.37); the rest is JSON. When it parses, inject_object runs; then:
 *   - an error is -EINVAL with a one-line message, or -ENOMEM, and
 *     nothing else is returned;
 *   - only INJECTED carries operations; SKIPPED and NOT_WORKLOAD carry a
 *     reason; every warning is one line;
 *   - the operations apply (jsonpatch_apply must succeed on the input),
 *     and injecting the result again gives UNCHANGED with no operations;
 *   - jsonpatch_apply is all-or-nothing: the input patched with its own
 *     operations plus a failing test is left as it was;
 *   - a first injection's sidecar mounts clean paths (issue 16.3), no two
 *     on one directory, and watches them by those paths (the service-
 *     account token mount, copied from the app as it is, aside).
 * Any violation aborts.
 */
#include "yamldoc/jsonpatch.h"
#include "inject/transform.h"
#include "inject/transform_int.h"
#include "yamldoc/splice.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

static void check_line(const char *s)
{
    CHECK(s != NULL && s[0] != '\0');
    CHECK(strchr(s, '\n') == NULL);
}

/* The sidecar of the template at prefix in obj, or NULL. */
static const cJSON *sidecar_of(const cJSON *obj, const char *prefix)
{
    const cJSON *t = jsonpointer_get(obj, prefix, strlen(prefix)), *c;
    const cJSON *init = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(t, "spec"), "initContainers");
    cJSON_ArrayForEach(c, (cJSON_IsArray(init) ? init : NULL))
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(c, "name");
        if (cJSON_IsString(n) && strcmp(n->valuestring, INJECT_CONTAINER) == 0) return c;
    }
    return NULL;
}

/* The injected sidecar's mounts: clean, distinct, and what it watches. */
static void check_paths(const cJSON *side)
{
    const cJSON *m, *m2, *a;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(side, "volumeMounts"))
    {
        const char *p = cJSON_GetObjectItemCaseSensitive(m, "mountPath")->valuestring;
        char *c = inject_clean_path(p);
        CHECK(c);
        int token = strcmp(c, INJECT__TOKEN_PATH) == 0;
        CHECK(token || strcmp(c, p) == 0);
        cJSON_ArrayForEach(m2, cJSON_GetObjectItemCaseSensitive(side, "volumeMounts"))
        {
            char *c2 = m2 == m
                           ? NULL
                           : inject_clean_path(
                                 cJSON_GetObjectItemCaseSensitive(m2, "mountPath")->valuestring);
            CHECK(m2 == m || (c2 && strcmp(c, c2) != 0));
            free(c2);
        }
        free(c);
    }
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(side, "args"))
    {
        if (strncmp(a->valuestring, "--watch=", 8) == 0)
            CHECK(inject_is_clean_path(a->valuestring + 8));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536) return 0;
    static const int MINOR[] = {0, 34, 35, 37};
    struct inject_opts opts = {.admission = data[0] & 1,
                               .all = (data[0] >> 1) & 1,
                               .kube_minor = MINOR[(data[0] >> 2) & 3]};
    char *text = malloc(size);
    CHECK(text != NULL);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    cJSON *obj = cJSON_Parse(text);
    free(text);
    if (!obj) return 0;

    struct inject_result r;
    char err[512];
    int rc = inject_object(obj, &opts, &r, err, sizeof err);
    if (rc < 0) {
        CHECK(rc == -EINVAL || rc == -ENOMEM);
        check_line(err);
        CHECK(r.ops == NULL && r.warnings == NULL && r.nwarnings == 0);
        cJSON_Delete(obj);
        return 0;
    }
    CHECK(rc == 0 && cJSON_IsArray(r.ops));
    for (size_t i = 0; i < r.nwarnings; i++) check_line(r.warnings[i]);
    if (r.outcome != INJECT_INJECTED) CHECK(cJSON_GetArraySize(r.ops) == 0);
    if (r.outcome == INJECT_SKIPPED || r.outcome == INJECT_NOT_WORKLOAD) check_line(r.reason);
    if (r.outcome == INJECT_NOT_WORKLOAD) CHECK(r.prefix == NULL);
    if (r.outcome == INJECT_INJECTED) {
        CHECK(cJSON_GetArraySize(r.ops) > 0 && r.prefix != NULL);
        cJSON *out = cJSON_Duplicate(obj, 1);
        CHECK(out != NULL);
        rc = jsonpatch_apply(&out, r.ops, err, sizeof err);
        if (rc == -ENOMEM) {
            cJSON_Delete(out);
            goto done;
        }
        CHECK(rc == 0);
        if (!sidecar_of(obj, r.prefix)) { /* a first injection */
            CHECK(sidecar_of(out, r.prefix));
            check_paths(sidecar_of(out, r.prefix));
        }

        struct inject_result again;
        rc = inject_object(out, &opts, &again, err, sizeof err);
        if (rc == 0) {
            CHECK(again.outcome == INJECT_UNCHANGED);
            CHECK(cJSON_GetArraySize(again.ops) == 0);
            inject_result_free(&again);
        } else {
            CHECK(rc == -ENOMEM);
        }

        /* all or nothing: the same operations, then a test that fails */
        cJSON *ops = cJSON_Duplicate(r.ops, 1), *doc = cJSON_Duplicate(obj, 1);
        cJSON *bad = cJSON_Parse("{\"op\":\"test\",\"path\":\"\",\"value\":\"never\"}");
        CHECK(ops && doc && bad);
        cJSON_AddItemToArray(ops, bad);
        cJSON *before = doc;
        char *want = cJSON_PrintUnformatted(obj);
        rc = jsonpatch_apply(&doc, ops, err, sizeof err);
        CHECK(rc == -EINVAL || rc == -ENOMEM);
        char *got = cJSON_PrintUnformatted(doc); /* not cJSON_Compare: duplicate keys */
        CHECK(doc == before && want && got && strcmp(want, got) == 0);
        free(want);
        free(got);
        cJSON_Delete(ops);
        cJSON_Delete(doc);
        cJSON_Delete(out);
    }
done:
    inject_result_free(&r);
    cJSON_Delete(obj);
    return 0;
}
