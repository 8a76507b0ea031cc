/*
 * kversion.c - GET /version and its parser (contract in kversion.h).
 */
#include "kube/kversion.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/text.h"

#define MINOR_MAX 999

/* Digits at s (at most 3, value <= MINOR_MAX) into *n; returns the first
 * character after them, or NULL when there are none. */
static const char *digits(const char *s, int *n)
{
    int v = 0, k = 0;
    for (; *s >= '0' && *s <= '9'; s++, k++) {
        if (k == 3) return NULL;
        v = v * 10 + (*s - '0');
    }
    if (!k) return NULL;
    *n = v;
    return s;
}

/* "minor": digits, then nothing or "+" (a provider's build). */
static int minor_field(const char *s, int *minor)
{
    const char *e = digits(s, minor);
    return e && (!*e || (e[0] == '+' && !e[1])) ? 0 : -1;
}

/* "gitVersion": "v1.N", then the end, "." or "-" or "+" (patch, build). */
static int minor_of_git(const char *s, int *minor)
{
    if (strncmp(s, "v1.", 3) != 0) return -1;
    const char *e = digits(s + 3, minor);
    return e && (!*e || *e == '.' || *e == '-' || *e == '+') ? 0 : -1;
}

static const char *str_item(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int kversion_parse(const char *body, size_t len, struct kversion *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const char *end = NULL;
    cJSON *o = body ? cJSON_ParseWithLengthOpts(body, len, &end, 0) : NULL;
    while (o && end && end < body + len && strchr(" \t\r\n", *end) && *end) end++;
    if (o && end != body + len) { /* something after the value */
        cJSON_Delete(o);
        o = NULL;
    }
    int rc = -EINVAL;
    if (!o || !cJSON_IsObject(o)) {
        snprintf(err, errlen, "/version: the answer is not a JSON object");
        goto out;
    }
    const char *major = str_item(o, "major"), *minor = str_item(o, "minor");
    const char *git = str_item(o, "gitVersion");
    if (git) ra_one_line(out->git, sizeof out->git, git);
    char q[96];
    int git_minor = -1;
    if (git && minor_of_git(git, &git_minor) < 0) git_minor = -1;
    if (major && major[0] && strcmp(major, "1") != 0) {
        ra_one_line(q, sizeof q, major);
        snprintf(err, errlen, "/version: major \"%s\" is not 1", q);
        goto out;
    }
    /* "minor" decides when it reads; without "major" only a gitVersion
     * of 1.x says which major it is */
    if (minor && minor_field(minor, &out->minor) == 0 && ((major && major[0]) || git_minor >= 0)) {
        rc = 0;
    } else if (git_minor >= 0) {
        out->minor = git_minor;
        rc = 0;
    } else {
        ra_one_line(q, sizeof q, minor ? minor : "");
        snprintf(err, errlen,
                 "/version: no Kubernetes 1.x minor version in minor \"%s\" or gitVersion "
                 "\"%s\"",
                 q, out->git);
        goto out;
    }
    out->major = 1;
out:
    cJSON_Delete(o);
    return rc;
}

/* ---- the request ---- */

struct fetch {
    kversion_cb cb;
    void *ud;
};

static void on_cancel(void *ud) { free(ud); }

static void on_answer(void *ud, const struct kube_resp *r)
{
    struct fetch f = *(struct fetch *)ud;
    free(ud);
    char err[512];
    if (!r->ok) {
        f.cb(f.ud, NULL, r->error ? r->error : "no answer");
        return;
    }
    if (r->status == 403) {
        snprintf(err, sizeof err,
                 "/version answered 403: the token's user may not read it (every authenticated "
                 "user may, through the ClusterRole system:public-info-viewer: is its "
                 "ClusterRoleBinding gone?)");
        f.cb(f.ud, NULL, err);
        return;
    }
    if (r->status != 200) {
        snprintf(err, sizeof err, "/version answered HTTP %ld: %s", r->status,
                 r->error ? r->error : "");
        f.cb(f.ud, NULL, err);
        return;
    }
    struct kversion v;
    if (kversion_parse(r->body, r->body_len, &v, err, sizeof err) < 0) {
        f.cb(f.ud, NULL, err);
        return;
    }
    f.cb(f.ud, &v, NULL);
}

int kversion_fetch(struct kube *k, kversion_cb cb, void *ud)
{
    struct fetch *f = malloc(sizeof *f);
    if (!f) ra_oom();
    f->cb = cb;
    f->ud = ud;
    struct kube_req req = {.method = "GET", .path = "/version", .on_cancel = on_cancel};
    int rc = kube_request(k, &req, on_answer, f);
    if (rc < 0) free(f);
    return rc;
}
