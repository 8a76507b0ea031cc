/*
 * stamptool.c - the render-time stamp (inject/stamp.h) for the integration
 * tests: reads one JSON object {"template": {metadata, spec}, "namespace":
 * "ns" (optional), "sources": [ConfigMap and Secret objects]} on stdin and
 * prints one JSON object on stdout: {"rc": 1, "hex": "<64 hex>", "key":
 * "<annotation key>"} when stamp_compute stamps, {"rc": 0, "why": "..."}
 * when it does not, {"rc": -22, "why": "..."} on an error.
 *
 * Exit status 0 when stamp_compute returned >= 0, 1 on its error, 2 when
 * stdin is not such a JSON object.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "inject/stamp.h"

int main(void)
{
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    if (!buf) return 2;
    for (;;) {
        if (len + 1 >= cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) return 2;
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len - 1, stdin);
        len += got;
        if (got == 0) break;
    }
    buf[len] = '\0';
    cJSON *in = cJSON_Parse(buf);
    free(buf);
    const cJSON *tmpl = cJSON_GetObjectItemCaseSensitive(in, "template");
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(in, "namespace");
    const cJSON *srcs = cJSON_GetObjectItemCaseSensitive(in, "sources"), *s;
    if (!cJSON_IsObject(in) || !tmpl || (srcs && !cJSON_IsArray(srcs))) {
        fprintf(stderr, "stamptool: want {\"template\": {...}, \"namespace\": \"ns\", "
                        "\"sources\": [...]} on stdin\n");
        cJSON_Delete(in);
        return 2;
    }
    size_t n = 0;
    const cJSON **objs = calloc((size_t)cJSON_GetArraySize(srcs) + 1, sizeof *objs);
    if (!objs) return 2;
    cJSON_ArrayForEach(s, srcs) objs[n++] = s;
    struct stamp_sources src = {objs, n};
    char hex[65] = "", key[512] = "", why[1024] = "";
    int rc = stamp_compute(tmpl, cJSON_IsString(ns) ? ns->valuestring : NULL, &src, hex, key,
                           sizeof key, why, sizeof why);
    cJSON *out = cJSON_CreateObject();
    cJSON_AddNumberToObject(out, "rc", rc);
    if (rc == 1) {
        cJSON_AddStringToObject(out, "hex", hex);
        cJSON_AddStringToObject(out, "key", key);
    } else {
        cJSON_AddStringToObject(out, "why", why);
    }
    char *text = cJSON_PrintUnformatted(out);
    if (text) printf("%s\n", text);
    free(text);
    cJSON_Delete(out);
    free(objs);
    cJSON_Delete(in);
    return rc < 0 ? 1 : 0;
}
