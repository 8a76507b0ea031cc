/*
 * lease.c - the Lease of a workload's stage: its name, its creation and a
 * compare-and-swap of one annotation (contract in lease.h).
 */
#include "kube/lease.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "kube/k8sname.h"
#include "kube/kinds.h"

int lease_name_for(const char *kind, const char *name, char *out, size_t n)
{
    if (!kind || !*kind || !name || !k8s_is_dns1123_subdomain(name) || n < LEASE_NAME_MAX + 1)
        return -EINVAL;
    char lower[64];
    size_t k = strlen(kind);
    if (k >= sizeof lower) return -EINVAL;
    for (size_t i = 0; i < k; i++) {
        if (!isalpha((unsigned char)kind[i])) return -EINVAL;
        lower[i] = (char)tolower((unsigned char)kind[i]);
    }
    lower[k] = '\0';
    int len = snprintf(out, n, "%s%s-%s", LEASE_PREFIX, lower, name);
    if (len > 0 && (size_t)len <= LEASE_NAME_MAX) return 0;
    /* Too long: the one shortening of a derived name (k8s_hashed_name), keyed
     * by the kind and the name so two long names stay apart. */
    char *full = ra_asprintf("%s%s-%s", LEASE_PREFIX, lower, name);
    char *key = ra_asprintf("%s/%s", lower, name);
    k8s_hashed_name(full, LEASE_NAME_MAX, key, out, n);
    free(key);
    free(full);
    return 0;
}

static const char *const STAGED_KINDS[] = {"Deployment", "StatefulSet", "DaemonSet", "Rollout"};

int lease_parse_workload(const char *v, const struct kinds_kind **ki, const char **name)
{
    const char *slash = v ? strchr(v, '/') : NULL;
    if (!slash) return -EINVAL;
    size_t klen = (size_t)(slash - v);
    for (size_t i = 0; i < sizeof STAGED_KINDS / sizeof STAGED_KINDS[0]; i++)
        if (strlen(STAGED_KINDS[i]) == klen && strncasecmp(v, STAGED_KINDS[i], klen) == 0) {
            *ki = kinds_named(STAGED_KINDS[i]);
            *name = slash + 1;
            return *ki && k8s_is_dns1123_subdomain(*name) ? 0 : -EINVAL;
        }
    return -EINVAL;
}

char *lease_path(const struct kube *k, const char *lease)
{
    return ra_asprintf("/apis/" LEASE_GROUP "/v1/namespaces/%s/" LEASE_RESOURCE "/%s",
                       kube_namespace(k), lease);
}

static char *print_or_die(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!s) ra_oom();
    return s;
}

/* Sends req (verb, method, path and content type set; path and body are
 * this call's to free) as a request on the Leases of the stage's role. */
static int send_owned(struct kube *k, struct kube_req *req, char *body, kube_cb cb, void *ud)
{
    req->resource = LEASE_RESOURCE;
    req->group = LEASE_GROUP;
    req->role = KUBE_ROLE_STAGE;
    req->body = body;
    req->body_len = strlen(body);
    int rc = kube_request(k, req, cb, ud);
    free((char *)req->path);
    free(body);
    return rc;
}

int lease_cas_annotation(struct kube *k, const char *lease, const char *rv, const char *key,
                         const char *value, kube_cb cb, void *ud, void (*on_cancel)(void *))
{
    cJSON *o = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(o, "metadata");
    cJSON *ann = cJSON_AddObjectToObject(meta, "annotations");
    if (!ann || !cJSON_AddStringToObject(meta, "resourceVersion", rv) ||
        !(value ? cJSON_AddStringToObject(ann, key, value) : cJSON_AddNullToObject(ann, key)))
        ra_oom();
    char *base = lease_path(k, lease);
    char *path = ra_asprintf("%s?fieldManager=reload-agent", base);
    free(base);
    struct kube_req req = {.verb = "patch",
                           .method = "PATCH",
                           .path = path,
                           .content_type = "application/merge-patch+json",
                           .on_cancel = on_cancel};
    return send_owned(k, &req, print_or_die(o), cb, ud);
}

int lease_create(struct kube *k, const char *lease, kube_cb cb, void *ud, void (*on_cancel)(void *))
{
    cJSON *o = cJSON_CreateObject();
    cJSON *meta = NULL, *labels = NULL;
    if (!o || !cJSON_AddStringToObject(o, "apiVersion", LEASE_GROUP "/v1") ||
        !cJSON_AddStringToObject(o, "kind", "Lease") ||
        !(meta = cJSON_AddObjectToObject(o, "metadata")) ||
        !cJSON_AddStringToObject(meta, "name", lease) ||
        !(labels = cJSON_AddObjectToObject(meta, "labels")) ||
        !cJSON_AddStringToObject(labels, "app.kubernetes.io/name", "reload-agent") ||
        !cJSON_AddStringToObject(labels, "app.kubernetes.io/component", "stage") ||
        !cJSON_AddObjectToObject(o, "spec"))
        ra_oom();
    char *path = ra_asprintf("/apis/" LEASE_GROUP "/v1/namespaces/%s/" LEASE_RESOURCE
                             "?fieldManager=reload-agent",
                             kube_namespace(k));
    struct kube_req req = {.verb = "create",
                           .method = "POST",
                           .path = path,
                           .content_type = "application/json",
                           .on_cancel = on_cancel};
    return send_owned(k, &req, print_or_die(o), cb, ud);
}

int lease_parse_reply(const char *body, size_t len, const char *key, char *rv, size_t rvlen,
                      char **value)
{
    *value = NULL;
    cJSON *j = body ? cJSON_ParseWithLength(body, len) : NULL;
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(j, "metadata");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(meta, "annotations"), key);
    int rc = -EINVAL;
    if (cJSON_IsString(r) && r->valuestring[0] && strlen(r->valuestring) < rvlen) {
        snprintf(rv, rvlen, "%s", r->valuestring);
        if (cJSON_IsString(a)) *value = ra_strdup(a->valuestring);
        rc = 0;
    }
    cJSON_Delete(j);
    return rc;
}
