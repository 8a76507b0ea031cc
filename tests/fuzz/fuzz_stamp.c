/*
 * fuzz_stamp.c - libFuzzer target for the render-time stamp
 * (inject/stamp.c), which reads manifests a user hands to `reload-agent
 * inject`: a pod template and the ConfigMaps and Secrets of the input.
 *
 * Input: one JSON object {"template": {...}, "namespace": "ns", "sources":
 * [...]} (the format of tests/tools/stamptool); anything that does not
 * parse is skipped.
 *
 * Invariants: the result is 1, 0, -EINVAL or -ENOMEM; a stamp is 64
 * lowercase hex digits with a non-empty annotation key and no reason;
 * otherwise the reason is one non-empty line; the same input gives the same
 * answer twice.
 */
#include "base/log.h"
#include "inject/stamp.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

static int one_line(const char *s)
{
    if (!s[0]) return 0;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    log_configure(RA_LOG_ERROR, RA_LOG_FORMAT_TEXT);
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    cJSON *in = cJSON_Parse(text);
    free(text);
    const cJSON *tmpl = cJSON_GetObjectItemCaseSensitive(in, "template");
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(in, "namespace");
    const cJSON *srcs = cJSON_GetObjectItemCaseSensitive(in, "sources"), *s;
    if (!in || !tmpl) {
        cJSON_Delete(in);
        return 0;
    }
    const cJSON *objs[64];
    size_t n = 0;
    cJSON_ArrayForEach(s, srcs)
    {
        if (n < 64) objs[n++] = s;
    }
    struct stamp_sources src = {objs, n};
    const char *nsv = cJSON_IsString(ns) ? ns->valuestring : NULL;
    char hex[65], key[256], why[512], hex2[65], key2[256], why2[512];
    int rc = stamp_compute(tmpl, nsv, &src, hex, key, sizeof key, why, sizeof why);
    CHECK(rc == 1 || rc == 0 || rc == -EINVAL || rc == -ENOMEM);
    if (rc == 1) {
        CHECK(strlen(hex) == 64 && strspn(hex, "0123456789abcdef") == 64);
        CHECK(key[0] && why[0] == '\0');
    } else {
        CHECK(one_line(why));
    }
    int rc2 = stamp_compute(tmpl, nsv, &src, hex2, key2, sizeof key2, why2, sizeof why2);
    CHECK(rc2 == rc);
    if (rc == 1)
        CHECK(!strcmp(hex, hex2) && !strcmp(key, key2));
    else
        CHECK(!strcmp(why, why2));
    cJSON_Delete(in);
    return 0;
}
