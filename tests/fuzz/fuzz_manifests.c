/*
 * fuzz_manifests.c - libFuzzer target for `reload-agent inject` in memory
 * (inject/manifests.c): several inputs joined into one stream, YAML and JSON
 * (streams of JSON documents too), with the transform, the stamp and the
 * splicer behind them.
 *
 * Input: byte 0 picks --all (bit 0); the rest is cut into up to four
 * inputs at each 0xFF byte (issue 16.6: joins of inputs that end without
 * a line break, in block scalars, with BOMs, directives).
 *
 * Invariants: manifests_run returns 0, -EINVAL (one line naming an input) or
 * -ENOMEM; on 0, the joined YAML output parses, and its documents are the
 * documents of --output json of the same run, one for one; each input's
 * own rendering (what -i would write) parses to the documents that input's
 * JSON rendering holds; and the joined output, run again, comes out byte
 * for byte the same (idempotent). Any violation aborts.
 */
#include "inject/manifests.h"
#include "yamldoc/jsonstream.h"
#include "yamldoc/tree.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz_manifests.c:%d: check failed: %s\n", __LINE__, #c);              \
            __builtin_trap();                                                                      \
        }                                                                                          \
    } while (0)

#define MAX_INPUTS 4

static cJSON *yaml_docs(const char *text, size_t len);

/* The documents of a stream of JSON documents, each read as YAML. */
static cJSON *stream_docs(const char *text, const struct jsonstream_doc *d, long n)
{
    cJSON *arr = cJSON_CreateArray();
    CHECK(arr);
    for (long i = 0; i < n; i++) {
        cJSON *one = yaml_docs(text + d[i].start, d[i].end - d[i].start);
        CHECK(one && cJSON_GetArraySize(one) == 1);
        cJSON_AddItemToArray(arr, cJSON_DetachItemFromArray(one, 0));
        cJSON_Delete(one);
    }
    return arr;
}

/* The documents of a YAML text (or a stream of JSON documents) as one JSON
 * array (empty documents left out), or NULL when it does not parse. */
static cJSON *yaml_docs(const char *text, size_t len)
{
    struct jsonstream_doc *d = NULL;
    long n = jsonstream_split(text, len, &d);
    CHECK(n >= 0);
    if (n > 0) {
        cJSON *arr = stream_docs(text, d, n);
        free(d);
        return arr;
    }
    struct yamltree t;
    struct yamltree_error e;
    if (yamltree_parse(text, len, &t, &e) < 0) return NULL;
    cJSON *arr = cJSON_CreateArray();
    CHECK(arr);
    for (size_t i = 0; i < t.ndocs; i++) {
        cJSON *j = NULL;
        CHECK(yamltree_to_json(t.docs[i].root, &j, &e) == 0);
        if (cJSON_IsNull(j))
            cJSON_Delete(j);
        else
            cJSON_AddItemToArray(arr, j);
    }
    yamltree_free(&t);
    return arr;
}

/* The documents of --output json's text: JSON values one after the other
 * (objects, and any other value a document held). */
static cJSON *json_docs(const char *text, size_t len)
{
    cJSON *arr = cJSON_CreateArray();
    CHECK(arr);
    size_t i = 0;
    for (;;) {
        while (i < len && strchr(" \t\r\n", text[i]) && text[i]) i++;
        if (i == len) break;
        const char *end = NULL;
        cJSON *j = cJSON_ParseWithLengthOpts(text + i, len - i, &end, 0);
        CHECK(j && end > text + i);
        cJSON_AddItemToArray(arr, j);
        i = (size_t)(end - text);
    }
    return arr;
}

static int run(struct manifests_input *in, size_t n, enum manifests_output output, int all,
               struct manifests_result *res)
{
    struct manifests_opts o = {.output = output};
    char err[1024];
    o.inject.all = all;
    int rc = manifests_run(in, n, &o, res, err, sizeof err);
    CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
    if (rc == -EINVAL) CHECK(err[0] && !strchr(err, '\n'));
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[MAX_INPUTS] = {"a.yaml", "b.yaml", "c.yaml", "d.yaml"};
    struct manifests_input yin[MAX_INPUTS], jin[MAX_INPUTS], again;
    struct manifests_result yres, jres, ares;
    size_t n = 0, start = 1;
    if (size < 1 || size > 16384) return 0;
    log_configure(RA_LOG_ERROR, RA_LOG_FORMAT_TEXT);
    memset(yin, 0, sizeof yin);
    for (size_t i = 1; i <= size && n < MAX_INPUTS; i++)
        if (i == size || (data[i] == 0xFF && n < MAX_INPUTS - 1)) {
            yin[n].name = names[n];
            yin[n].data = (const char *)data + start;
            yin[n].len = i - start;
            n++;
            start = i + 1;
        }
    memcpy(jin, yin, sizeof jin);
    int all = data[0] & 1;
    if (run(yin, n, MANIFESTS_OUT_YAML, all, &yres) != 0) return 0;
    int jrc = run(jin, n, MANIFESTS_OUT_JSON, all, &jres);
    CHECK(jrc == 0 || jrc == -ENOMEM);
    if (jrc == 0) {
        /* the joined YAML holds the documents of --output json */
        cJSON *y = yaml_docs(yres.out, yres.outlen), *j = json_docs(jres.out, jres.outlen);
        CHECK(y && j && cJSON_Compare(y, j, 1));
        cJSON_Delete(y);
        cJSON_Delete(j);
        /* and so does each input's own rendering (what -i would write) */
        for (size_t i = 0; i < n; i++) {
            y = yaml_docs(yin[i].out, yin[i].outlen);
            j = json_docs(jin[i].out, jin[i].outlen);
            CHECK(y && j && cJSON_Compare(y, j, 1));
            cJSON_Delete(y);
            cJSON_Delete(j);
        }
        manifests_free(jin, n, &jres);
    }
    /* the joined output, run again: the same bytes */
    again = (struct manifests_input){
        .name = "joined", .data = yres.out ? yres.out : "", .len = yres.outlen};
    int arc = run(&again, 1, MANIFESTS_OUT_YAML, all, &ares);
    CHECK(arc == 0 || arc == -ENOMEM);
    if (arc == 0) {
        CHECK(ares.outlen == yres.outlen &&
              (yres.outlen == 0 || memcmp(ares.out, yres.out, yres.outlen) == 0));
        manifests_free(&again, 1, &ares);
    }
    manifests_free(yin, n, &yres);
    return 0;
}
