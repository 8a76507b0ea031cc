/*
 * safestate.c - the ready marker and the storm breaker's record in
 * --state-dir (see safestate.h).
 */
#include "run/safestate.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"
#include "base/log.h"

#define STORM_RECORD_MAX (64 * 1024)

int safestate_set_ready(const char *dir, int ready, char *err, size_t errlen)
{
    char path[4096], pid[32];
    ra_path_in(dir, SAFESTATE_READY, path, sizeof path);
    if (!ready) {
        if (unlink(path) < 0 && errno != ENOENT)
            return ra_errf(err, errlen, -errno, "cannot remove %s: %s", path, strerror(errno));
        return 0;
    }
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    return ra_write_file_atomic(path, pid, (size_t)n, 0644, err, errlen);
}

int safestate_check_ready(const char *dir, char *why, size_t n)
{
    char path[4096], *buf, err[512];
    size_t len;
    ra_path_in(dir, SAFESTATE_READY, path, sizeof path);
    int rc = ra_read_file(path, 64, &buf, &len, err, sizeof err);
    if (rc == -ENOENT) return ra_errf(why, n, rc, "not ready yet: no %s", path);
    if (rc < 0) return ra_errf(why, n, rc, "%s", err);
    char *end;
    long pid = strtol(buf, &end, 10);
    int ok = pid > 0 && (*end == '\n' || *end == '\0');
    free(buf);
    if (!ok) return ra_errf(why, n, -EINVAL, "%s does not hold a process ID", path);
    if (kill((pid_t)pid, 0) < 0 && errno != EPERM)
        return ra_errf(why, n, -ESRCH, "%s names process %ld, which is gone", path, pid);
    return 0;
}

int safestate_save_storm(const char *dir, const int64_t *t, size_t n, char *err, size_t errlen)
{
    char path[4096];
    ra_path_in(dir, SAFESTATE_STORM, path, sizeof path);
    cJSON *o = cJSON_CreateObject(), *a = cJSON_CreateArray();
    if (!o || !a) ra_oom();
    cJSON_AddNumberToObject(o, "version", 1);
    cJSON_AddItemToObject(o, "actions_ms", a);
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)t[i]));
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) ra_oom();
    int rc = ra_write_file_atomic(path, s, strlen(s), 0600, err, errlen);
    free(s);
    return rc;
}

int safestate_load_storm(const char *dir, int64_t **t, size_t *n, char *err, size_t errlen)
{
    char path[4096], *buf, why[512];
    size_t len;
    *t = NULL;
    *n = 0;
    ra_path_in(dir, SAFESTATE_STORM, path, sizeof path);
    int rc = ra_read_file(path, STORM_RECORD_MAX, &buf, &len, why, sizeof why);
    if (rc == -ENOENT) return 0;
    if (rc < 0) return ra_errf(err, errlen, rc, "%s", why);
    cJSON *o = cJSON_ParseWithLength(buf, len);
    free(buf);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "actions_ms"), *x;
    if (!cJSON_IsArray(a)) {
        cJSON_Delete(o);
        return ra_errf(err, errlen, -EINVAL, "%s: not a storm record", path);
    }
    int64_t *v = calloc((size_t)cJSON_GetArraySize(a) + 1, sizeof *v);
    if (!v) ra_oom();
    cJSON_ArrayForEach(x, a)
    {
        if (!cJSON_IsNumber(x)) {
            free(v);
            cJSON_Delete(o);
            return ra_errf(err, errlen, -EINVAL, "%s: an action time is not a number", path);
        }
        v[(*n)++] = (int64_t)x->valuedouble;
    }
    cJSON_Delete(o);
    *t = v;
    return 1;
}
