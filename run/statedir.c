/*
 * statedir.c - --state-dir (statedir.h): which pod wrote a record, the
 * applied state (a manifest written as JSON and read back) and the
 * restart-pod record (rendered for the action, taken and reported at
 * start).
 */
#include "run/statedir.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>

#include "base/file.h"
#include "base/log.h"
#include "kube/kevents.h"

/* The format of both records; 1 named no pod (issue 24 U2). */
#define STATEDIR_VERSION 2

/* ---- which pod wrote a record ---- */

/* As far as the agent can tell without the API: the pod's name
 * (--pod-name, else $POD_NAME), its UID ($POD_UID, when the pod gives it
 * from the downward API) and its sandbox: the node's boot and the pod's
 * network namespace, which every container of the pod shares and which a
 * restart of any or all of them keeps. "" is unknown. */
struct pod_id {
    char name[256];
    char uid[64];
    char sandbox[96];
};

static void pod_self(const char *pod_name, struct pod_id *out)
{
    const char *n = pod_name && *pod_name ? pod_name : getenv("POD_NAME");
    const char *u = getenv("POD_UID");
    char *boot = NULL;
    size_t len;
    struct stat st;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", n ? n : "");
    snprintf(out->uid, sizeof out->uid, "%s", u ? u : "");
    if (ra_read_file("/proc/sys/kernel/random/boot_id", 64, &boot, &len, NULL, 0) == 0 &&
        stat("/proc/self/ns/net", &st) == 0) {
        boot[strcspn(boot, "\n")] = '\0';
        snprintf(out->sandbox, sizeof out->sandbox, "%s/net:%llu", boot,
                 (unsigned long long)st.st_ino);
    }
    free(boot);
}

/* o's "pod" into *out; -1 with what is wrong in why. */
static int pod_from_json(const cJSON *o, struct pod_id *out, char *why, size_t whylen)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "pod");
    const char *keys[] = {"name", "uid", "sandbox"};
    char *dst[] = {out->name, out->uid, out->sandbox};
    size_t cap[] = {sizeof out->name, sizeof out->uid, sizeof out->sandbox};
    for (int i = 0; i < 3; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(p, keys[i]);
        if (!cJSON_IsString(v) || strlen(v->valuestring) >= cap[i]) {
            snprintf(why, whylen, "pod.%s: not a string of fewer than %zu bytes", keys[i], cap[i]);
            return -1;
        }
        snprintf(dst[i], cap[i], "%s", v->valuestring);
    }
    return 0;
}

/* 1 if the record's pod is this one (every field both know is equal),
 * else 0 with the difference in why. */
static int pod_same(const struct pod_id *rec, const struct pod_id *self, char *why, size_t whylen)
{
    const char *what[] = {"pod", "pod UID", "sandbox"};
    const char *a[] = {rec->name, rec->uid, rec->sandbox};
    const char *b[] = {self->name, self->uid, self->sandbox};
    for (int i = 0; i < 3; i++)
        if (*a[i] && *b[i] && strcmp(a[i], b[i]) != 0) {
            snprintf(why, whylen, "written by another pod (%s %s, this one is %s)", what[i], a[i],
                     b[i]);
            return 0;
        }
    return 1;
}

/* A new record: the version and this pod. */
static cJSON *new_record(const char *self_name)
{
    struct pod_id self;
    cJSON *o = cJSON_CreateObject(), *p;
    pod_self(self_name, &self);
    if (!o || !cJSON_AddNumberToObject(o, "version", STATEDIR_VERSION) ||
        !(p = cJSON_AddObjectToObject(o, "pod")) ||
        !cJSON_AddStringToObject(p, "name", self.name) ||
        !cJSON_AddStringToObject(p, "uid", self.uid) ||
        !cJSON_AddStringToObject(p, "sandbox", self.sandbox))
        ra_oom();
    return o;
}

/* The version and the pod of a parsed record: 0 when it is this pod's;
 * -EINVAL (not the format) or -ESTALE (another pod's) with why. */
static int check_head(const cJSON *o, const char *self_name, char *why, size_t whylen)
{
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(o, "version");
    struct pod_id rec, self;
    if (!cJSON_IsNumber(ver) || ver->valuedouble != STATEDIR_VERSION) {
        snprintf(why, whylen, "version: not %d", STATEDIR_VERSION);
        return -EINVAL;
    }
    if (pod_from_json(o, &rec, why, whylen) < 0) return -EINVAL;
    pod_self(self_name, &self);
    return pod_same(&rec, &self, why, whylen) ? 0 : -ESTALE;
}

/* err for a record that was read but is not taken: "PATH: " and why. */
static int refuse(const char *dir, const char *name, const char *what, int rc, const char *why,
                  char *err, size_t errlen)
{
    char path[4096];
    ra_path_in(dir, name, path, sizeof path);
    if (rc == -ESTALE)
        snprintf(err, errlen, "%s: %s", path, why);
    else
        snprintf(err, errlen, "%s: not the %s reload-agent writes (%s)", path, what, why);
    return rc;
}

/* Reads dir/name (at most max bytes) and checks its head: 1 and *out
 * (cJSON_Delete) when it is this pod's record, 0 when there is none, or
 * -errno with the reason in err: unreadable, -EINVAL ("PATH: not the WHAT
 * reload-agent writes (why)"), -ESTALE ("PATH: written by another pod"). */
static int read_record(const char *dir, const char *name, size_t max, const char *self,
                       const char *what, cJSON **out, char *err, size_t errlen)
{
    char *buf = NULL, why[600] = "not JSON";
    size_t len;
    *out = NULL;
    int rc = ra_record_read(dir, name, max, &buf, &len, err, errlen);
    if (rc <= 0) return rc;
    *out = cJSON_ParseWithLength(buf, len);
    free(buf);
    rc = *out ? check_head(*out, self, why, sizeof why) : -EINVAL;
    if (rc == 0) return 1;
    cJSON_Delete(*out);
    *out = NULL;
    return refuse(dir, name, what, rc, why, err, errlen);
}

/* ---- the applied state ---- */

int statedir_applied_save(const char *dir, const char *self, const struct hash_manifest *m,
                          char *err, size_t errlen)
{
    cJSON *o = new_record(self), *files = cJSON_AddArrayToObject(o, "files");
    if (!files) ra_oom();
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
    if (len > STATEDIR_APPLIED_WRITE_MAX) {
        char path[4096];
        ra_path_in(dir, STATEDIR_APPLIED, path, sizeof path);
        (void)ra_record_remove(dir, STATEDIR_APPLIED, NULL, 0);
        snprintf(err, errlen,
                 "cannot write %s: the applied state of %zu files takes %zu bytes, more than %d",
                 path, m->n, len, STATEDIR_APPLIED_WRITE_MAX);
        rc = -EFBIG;
    } else {
        rc = ra_record_write(dir, STATEDIR_APPLIED, s, len, err, errlen);
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

/* The largest whole number a JSON number (a double) holds exactly. */
#define JSON_INT_MAX 9007199254740992.0 /* 2^53 */

/* 1 if v is a whole number in lo..hi (so a cast to an integer type that
 * holds that range is exact), else 0: not a number, infinite, a fraction,
 * or out of range (1e300 would make the cast undefined). */
static int is_int_in(const cJSON *v, double lo, double hi)
{
    return cJSON_IsNumber(v) && v->valuedouble >= lo && v->valuedouble <= hi &&
           v->valuedouble == (double)(int64_t)v->valuedouble;
}

/* One element of "files" into *e (path borrowed from the JSON); -1 with
 * what is wrong in why. */
static int read_entry(const cJSON *f, size_t i, struct hash_entry *e, char *why, size_t whylen)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(f, "path");
    const cJSON *sz = cJSON_GetObjectItemCaseSensitive(f, "size");
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(f, "sha256");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(f, "classes");
    const char *bad = NULL;
    if (!cJSON_IsString(p) || !*p->valuestring)
        bad = "path: not a non-empty string";
    else if (!is_int_in(sz, 0, JSON_INT_MAX))
        bad = "size: not a whole number of bytes (0 to 2^53)";
    else if (!cJSON_IsString(h) || unhex(h->valuestring, e->digest) < 0)
        bad = "sha256: not 64 lowercase hex digits";
    else if (!is_int_in(c, 1, 0xffff))
        bad = "classes: not a whole number from 1 to 65535";
    if (bad) {
        snprintf(why, whylen, "files[%zu].%s", i, bad);
        return -1;
    }
    e->path = p->valuestring;
    e->size = (uint64_t)sz->valuedouble;
    e->classes = (unsigned)c->valuedouble;
    return 0;
}

/* The parsed record into *out; -EINVAL with what is wrong in why when it
 * is not the format. */
static int from_json(const cJSON *o, struct hash_manifest *out, char *why, size_t whylen)
{
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(o, "files");
    if (!cJSON_IsArray(files)) {
        snprintf(why, whylen, "files: not an array");
        return -EINVAL;
    }
    size_t n = (size_t)cJSON_GetArraySize(files), i = 0;
    struct hash_entry *v = calloc(n ? n : 1, sizeof *v);
    if (!v) ra_oom();
    const cJSON *f;
    cJSON_ArrayForEach(f, files)
    {
        if (read_entry(f, i, &v[i], why, whylen) < 0) {
            free(v);
            return -EINVAL;
        }
        i++;
    }
    int rc = hash_manifest_from_entries(v, n, out);
    free(v);
    if (rc == -ENOMEM) ra_oom();
    if (rc < 0) {
        snprintf(why, whylen, "files: two entries with one path");
        return -EINVAL;
    }
    return 0;
}

int statedir_applied_load(const char *dir, const char *self, struct hash_manifest *out, char *err,
                          size_t errlen)
{
    cJSON *o;
    char why[200];
    memset(out, 0, sizeof *out);
    int rc = read_record(dir, STATEDIR_APPLIED, STATEDIR_APPLIED_MAX, self, "applied state", &o,
                         err, errlen);
    if (rc <= 0) return rc;
    rc = from_json(o, out, why, sizeof why);
    cJSON_Delete(o);
    if (rc < 0) return refuse(dir, STATEDIR_APPLIED, "applied state", rc, why, err, errlen);
    return 1;
}

/* ---- the restart-pod record ---- */

static int64_t wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

char *statedir_restart_render(const char *self, int exit_code, const char *hash, const char *files)
{
    cJSON *o = new_record(self);
    cJSON_AddNumberToObject(o, "time_ms", (double)wall_ms());
    cJSON_AddNumberToObject(o, "exit_code", exit_code);
    cJSON_AddStringToObject(o, "hash", hash);
    cJSON_AddStringToObject(o, "files", files ? files : "");
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) ra_oom();
    return s;
}

/* The parsed record into *out; -EINVAL with what is wrong in why when it
 * is not the format. */
static int restart_from_json(const cJSON *o, struct statedir_restart *out, char *why, size_t whylen)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "time_ms");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "exit_code");
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(o, "hash");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "files");
    unsigned char digest[HASH_LEN];
    const char *bad = NULL;
    if (!is_int_in(t, 0, JSON_INT_MAX))
        bad = "time_ms: not a whole number of milliseconds (0 to 2^53)";
    else if (!is_int_in(c, 0, 255))
        bad = "exit_code: not a whole number from 0 to 255";
    else if (!cJSON_IsString(h) || unhex(h->valuestring, digest) < 0)
        bad = "hash: not 64 lowercase hex digits";
    else if (f && !cJSON_IsString(f))
        bad = "files: not a string";
    if (bad) {
        snprintf(why, whylen, "%s", bad);
        return -EINVAL;
    }
    out->time_ms = (int64_t)t->valuedouble;
    out->exit_code = (int)c->valuedouble;
    snprintf(out->hash, sizeof out->hash, "%s", h->valuestring);
    out->files = f && *f->valuestring ? ra_strdup(f->valuestring) : NULL;
    return 0;
}

int statedir_restart_take(const char *dir, const char *self, struct statedir_restart *out,
                          char *err, size_t errlen)
{
    cJSON *o;
    char why[200];
    memset(out, 0, sizeof *out);
    int rc = read_record(dir, STATEDIR_RESTART_POD, STATEDIR_RESTART_POD_MAX, self, "record", &o,
                         err, errlen);
    if (rc == 0) return 0;
    /* reported once, whatever it holds */
    (void)ra_record_remove(dir, STATEDIR_RESTART_POD, NULL, 0);
    if (rc < 0) return rc;
    rc = restart_from_json(o, out, why, sizeof why);
    cJSON_Delete(o);
    if (rc < 0) return refuse(dir, STATEDIR_RESTART_POD, "record", rc, why, err, errlen);
    return 1;
}

void statedir_restart_free(struct statedir_restart *r)
{
    free(r->files);
    r->files = NULL;
}

/* The log line and the Event of a restart the previous agent made. */
static void report(const struct statedir_restart *rec, struct kevents *ev, const char *pod,
                   const char *ns)
{
    char when[32] = "?";
    int64_t ago = wall_ms() - rec->time_ms;
    time_t secs = (time_t)(rec->time_ms / 1000);
    struct tm tm;
    if (gmtime_r(&secs, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    const char *files = rec->files ? rec->files : "?";
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_INFO, "pod-restarted")) {
        log_rec_str(&r, "at", when);
        log_rec_int(&r, "ago_ms", (long long)ago);
        log_rec_int(&r, "exit_code", rec->exit_code);
        log_rec_str(&r, "hash", rec->hash);
        log_rec_str(&r, "files", files);
        log_rec_end(&r,
                    "the pod was restarted in place by reload-agent at %s (exit code %d) for "
                    "content %.12s, changed: %s; every container started with the content now "
                    "mounted",
                    when, rec->exit_code, rec->hash, files);
    }
    if (ev && pod && ns) {
        char msg[2400];
        struct kev_object obj = {"v1", "Pod", pod, ns, NULL};
        snprintf(msg, sizeof msg,
                 "restarted every container in place (exit code %d) for content hash %.12s; "
                 "changed: %s",
                 rec->exit_code, rec->hash, files);
        kev_post(ev, &obj, "Normal", "PodRestarted", msg);
    }
}

int statedir_restart_report(const char *dir, const char *self, struct kevents *ev, const char *pod,
                            const char *ns, char *hash, size_t hashlen)
{
    struct statedir_restart rec;
    char err[4800];
    if (!dir || !*dir) return 0;
    int rc = statedir_restart_take(dir, self, &rec, err, sizeof err);
    if (rc < 0)
        log_warn("restart-pod record: %s; removed, and this start is not taken for a pod "
                 "restart (--on-start decides what is applied)",
                 err);
    if (rc <= 0) return 0;
    report(&rec, ev, pod, ns);
    if (hash && hashlen) snprintf(hash, hashlen, "%s", rec.hash);
    statedir_restart_free(&rec);
    return 1;
}
