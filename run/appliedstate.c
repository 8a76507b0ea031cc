/*
 * appliedstate.c - the engine's applied state in --state-dir
 * (appliedstate.h): a manifest written as JSON and read back.
 */
#include "run/appliedstate.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"
#include "base/log.h"

#define APPLIEDSTATE_VERSION 1

int appliedstate_save(const char *dir, const struct hash_manifest *m, char *err, size_t errlen)
{
    char path[4096];
    ra_path_in(dir, APPLIEDSTATE_FILE, path, sizeof path);
    cJSON *o = cJSON_CreateObject(), *files = cJSON_CreateArray();
    if (!o || !files) ra_oom();
    cJSON_AddNumberToObject(o, "version", APPLIEDSTATE_VERSION);
    cJSON_AddItemToObject(o, "files", files);
    for (size_t i = 0; i < m->n; i++) {
        char hex[HASH_HEX_LEN + 1];
        cJSON *f = cJSON_CreateObject();
        if (!f) ra_oom();
        hash_hex(m->v[i].digest, hex);
        cJSON_AddStringToObject(f, "path", m->v[i].path);
        cJSON_AddNumberToObject(f, "size", (double)m->v[i].size);
        cJSON_AddStringToObject(f, "sha256", hex);
        cJSON_AddNumberToObject(f, "classes", m->v[i].classes);
        cJSON_AddItemToArray(files, f);
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) ra_oom();
    size_t len = strlen(s);
    int rc;
    if (len > APPLIEDSTATE_WRITE_MAX) {
        (void)unlink(path);
        snprintf(err, errlen,
                 "cannot write %s: the applied state of %zu files takes %zu bytes, more than %d",
                 path, m->n, len, APPLIEDSTATE_WRITE_MAX);
        rc = -EFBIG;
    } else {
        rc = ra_write_file_atomic(path, s, len, 0600, err, errlen);
    }
    free(s);
    return rc;
}

static int unhex(const char *s, unsigned char out[HASH_LEN])
{
    if (strlen(s) != HASH_HEX_LEN) return -1;
    for (size_t i = 0; i < HASH_LEN; i++) {
        unsigned v = 0;
        for (int k = 0; k < 2; k++) {
            char c = s[2 * i + (size_t)k];
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0) return -1;
            v = v * 16 + (unsigned)d;
        }
        out[i] = (unsigned char)v;
    }
    return 0;
}

/* One element of "files" into *e (path borrowed from the JSON). */
static int read_entry(const cJSON *f, struct hash_entry *e)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(f, "path");
    const cJSON *sz = cJSON_GetObjectItemCaseSensitive(f, "size");
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(f, "sha256");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(f, "classes");
    if (!cJSON_IsString(p) || !*p->valuestring || !cJSON_IsNumber(sz) || sz->valuedouble < 0 ||
        !cJSON_IsString(h) || unhex(h->valuestring, e->digest) < 0 || !cJSON_IsNumber(c) ||
        c->valuedouble < 1 || c->valuedouble > 0xffff)
        return -1;
    e->path = p->valuestring;
    e->size = (uint64_t)sz->valuedouble;
    e->classes = (unsigned)c->valuedouble;
    return 0;
}

/* The parsed record into *out; -EINVAL when it is not the format. */
static int from_json(const cJSON *o, struct hash_manifest *out)
{
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(o, "version");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(o, "files");
    if (!cJSON_IsNumber(ver) || ver->valuedouble != APPLIEDSTATE_VERSION || !cJSON_IsArray(files))
        return -EINVAL;
    size_t n = (size_t)cJSON_GetArraySize(files), i = 0;
    struct hash_entry *v = calloc(n ? n : 1, sizeof *v);
    if (!v) ra_oom();
    const cJSON *f;
    cJSON_ArrayForEach(f, files)
    {
        if (read_entry(f, &v[i]) < 0) {
            free(v);
            return -EINVAL;
        }
        i++;
    }
    int rc = hash_manifest_from_entries(v, n, out);
    free(v);
    if (rc == -ENOMEM) ra_oom();
    return rc;
}

int appliedstate_load(const char *dir, struct hash_manifest *out, char *err, size_t errlen)
{
    char path[4096], why[4400];
    char *buf = NULL;
    size_t len;
    memset(out, 0, sizeof *out);
    ra_path_in(dir, APPLIEDSTATE_FILE, path, sizeof path);
    int rc = ra_read_file(path, APPLIEDSTATE_MAX, &buf, &len, why, sizeof why);
    if (rc == -ENOENT) return 0;
    if (rc < 0) {
        snprintf(err, errlen, "%s", why);
        return rc;
    }
    cJSON *o = cJSON_ParseWithLength(buf, len);
    free(buf);
    rc = o ? from_json(o, out) : -EINVAL;
    cJSON_Delete(o);
    if (rc < 0) {
        snprintf(err, errlen, "%s: not the applied state reload-agent writes", path);
        return -EINVAL;
    }
    return 1;
}
