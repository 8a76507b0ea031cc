/*
 * podrefs.c - the ConfigMaps and Secrets of a pod spec (contract in
 * podrefs.h). Every container list is read (containers, initContainers,
 * ephemeralContainers), since the agent's own mirrors of env sources live
 * in its container and the kubelet refreshes all of the pod's volumes on
 * one sync.
 */
#include "kube/podrefs.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/text.h"
#include "kube/k8sname.h"
#include "kube/kube.h"

const char *podrefs_resource(enum podref_kind k)
{
    return k == PODREF_SECRET ? "secrets" : "configmaps";
}

void podrefs_add(struct podrefs *r, enum podref_kind kind, const char *name)
{
    if (!name || !k8s_is_dns1123_subdomain(name)) {
        if (name) r->skipped++;
        return;
    }
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].kind == kind && strcmp(r->v[i].name, name) == 0) return;
    if (r->n >= PODREFS_MAX) {
        r->skipped++;
        return;
    }
    struct podref *grown = realloc(r->v, (r->n + 1) * sizeof *grown);
    if (!grown) ra_oom();
    r->v = grown;
    r->v[r->n].kind = kind;
    r->v[r->n].name = ra_strdup(name);
    r->n++;
}

int podrefs_parse_spec(const char *spec, enum podref_kind *kind, const char **name, char *err,
                       size_t errlen)
{
    static const struct {
        const char *prefix;
        enum podref_kind kind;
    } KINDS[] = {{"configmap/", PODREF_CONFIGMAP}, {"secret/", PODREF_SECRET}};
    char q[400];
    for (size_t i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++) {
        size_t n = strlen(KINDS[i].prefix);
        if (strncmp(spec, KINDS[i].prefix, n) != 0) continue;
        if (!k8s_is_dns1123_subdomain(spec + n)) {
            ra_one_line(q, sizeof q, spec);
            snprintf(err, errlen,
                     "\"%s\": NAME is not a Kubernetes object name (lower-case letters, digits, "
                     "'-' and '.', at most 253, a letter or digit at each end of each part)",
                     q);
            return -EINVAL;
        }
        *kind = KINDS[i].kind;
        *name = spec + n;
        return 0;
    }
    ra_one_line(q, sizeof q, spec);
    int plural = strncmp(spec, "configmaps/", 11) == 0 || strncmp(spec, "secrets/", 8) == 0;
    snprintf(err, errlen, "\"%s\": expected configmap/NAME or secret/NAME%s", q,
             plural ? " (the kind is singular)" : "");
    return -EINVAL;
}

int podrefs_add_spec(struct podrefs *r, const char *spec, char *err, size_t errlen)
{
    enum podref_kind kind;
    const char *name;
    if (podrefs_parse_spec(spec, &kind, &name, err, errlen) < 0) return -EINVAL;
    size_t before = r->n, skipped = r->skipped;
    podrefs_add(r, kind, name);
    if (r->n == before && r->skipped != skipped) {
        snprintf(err, errlen, "more than %d objects", PODREFS_MAX);
        return -EINVAL;
    }
    return 0;
}

static const char *str_at(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const cJSON *at(const cJSON *o, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* v when it is an array, else NULL (cJSON_ArrayForEach then does nothing). */
static const cJSON *arr(const cJSON *v) { return cJSON_IsArray(v) ? v : NULL; }

static void from_volumes(struct podrefs *r, const cJSON *volumes)
{
    const cJSON *v, *src;
    cJSON_ArrayForEach(v, arr(volumes))
    {
        podrefs_add(r, PODREF_CONFIGMAP, str_at(at(v, "configMap"), "name"));
        podrefs_add(r, PODREF_SECRET, str_at(at(v, "secret"), "secretName"));
        const cJSON *sources = at(at(v, "projected"), "sources");
        /* The service-account token volume (kube-api-access-*: the token,
         * kube-root-ca.crt, the namespace) is the kubelet's own, rotated by
         * it: not configuration the pod's owner edits. */
        cJSON_ArrayForEach(src, arr(sources)) if (at(src, "serviceAccountToken")) break;
        if (src) continue;
        cJSON_ArrayForEach(src, arr(sources))
        {
            podrefs_add(r, PODREF_CONFIGMAP, str_at(at(src, "configMap"), "name"));
            podrefs_add(r, PODREF_SECRET, str_at(at(src, "secret"), "name"));
        }
    }
}

static void from_containers(struct podrefs *r, const cJSON *list)
{
    const cJSON *c, *e;
    cJSON_ArrayForEach(c, arr(list))
    {
        const cJSON *env = at(c, "env"), *env_from = at(c, "envFrom");
        cJSON_ArrayForEach(e, arr(env))
        {
            const cJSON *vf = at(e, "valueFrom");
            podrefs_add(r, PODREF_CONFIGMAP, str_at(at(vf, "configMapKeyRef"), "name"));
            podrefs_add(r, PODREF_SECRET, str_at(at(vf, "secretKeyRef"), "name"));
        }
        cJSON_ArrayForEach(e, arr(env_from))
        {
            podrefs_add(r, PODREF_CONFIGMAP, str_at(at(e, "configMapRef"), "name"));
            podrefs_add(r, PODREF_SECRET, str_at(at(e, "secretRef"), "name"));
        }
    }
}

int podrefs_from_pod(const char *json, size_t len, struct podrefs *r, char *err, size_t errlen)
{
    cJSON *j = cJSON_ParseWithLength(json, len);
    const cJSON *spec = at(j, "spec");

    if (!cJSON_IsObject(j) || !cJSON_IsObject(spec)) {
        snprintf(err, errlen, "the pod is not a JSON object with a spec");
        cJSON_Delete(j);
        return -EINVAL;
    }
    from_volumes(r, at(spec, "volumes"));
    from_containers(r, at(spec, "initContainers"));
    from_containers(r, at(spec, "containers"));
    from_containers(r, at(spec, "ephemeralContainers"));
    cJSON_Delete(j);
    return 0;
}

void podrefs_free(struct podrefs *r)
{
    for (size_t i = 0; i < r->n; i++) free(r->v[i].name);
    free(r->v);
    memset(r, 0, sizeof *r);
}
