/*
 * rbac.c - the Role and RoleBinding of fast sync for one injected
 * workload (contract in rbac.h; the rules are manifests/fast-sync/
 * role.yaml's, docs/fast-sync.md). Key order is fixed, so the output is
 * byte-stable.
 */
#include "inject/rbac.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "yamldoc/jsonpatch.h"

#define OBJ_ARG "--fast-sync-objects="
#define RBAC_API "rbac.authorization.k8s.io"

static const char *str_at(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The args of the template's reload-agent container, or NULL. */
static const cJSON *sidecar_args(const cJSON *tmpl)
{
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(tmpl, "spec");
    const cJSON *init = cJSON_GetObjectItemCaseSensitive(spec, "initContainers"), *c;
    cJSON_ArrayForEach(c, (cJSON_IsArray(init) ? init : NULL))
    {
        const char *n = str_at(c, "name");
        if (n && strcmp(n, "reload-agent") == 0) return cJSON_GetObjectItemCaseSensitive(c, "args");
    }
    return NULL;
}

/* Builders: each sets *oom on failure (and then does nothing). */
static void add_str(cJSON *o, const char *k, const char *v, int *oom)
{
    if (!*oom && !cJSON_AddStringToObject(o, k, v)) *oom = 1;
}

static cJSON *add_obj(cJSON *o, const char *k, int *oom)
{
    cJSON *c = *oom ? NULL : cJSON_AddObjectToObject(o, k);
    if (!c) *oom = 1;
    return c;
}

static cJSON *add_arr(cJSON *o, const char *k, int *oom)
{
    cJSON *c = *oom ? NULL : cJSON_AddArrayToObject(o, k);
    if (!c) *oom = 1;
    return c;
}

static void push_str(cJSON *a, const char *v, int *oom)
{
    cJSON *s = *oom ? NULL : cJSON_CreateString(v);
    if (!s || !cJSON_AddItemToArray(a, s)) {
        cJSON_Delete(s);
        *oom = 1;
    }
}

/* One rule {apiGroups: [group], resources: [res], resourceNames, verbs}
 * (names: NULL for none) appended to rules. */
static cJSON *add_rule(cJSON *rules, const char *group, const char *res, const char *verbs,
                       int *oom)
{
    cJSON *r = *oom ? NULL : cJSON_CreateObject();
    if (!r || !cJSON_AddItemToArray(rules, r)) {
        cJSON_Delete(r);
        *oom = 1;
        return NULL;
    }
    push_str(add_arr(r, "apiGroups", oom), group, oom);
    push_str(add_arr(r, "resources", oom), res, oom);
    if (strcmp(res, "configmaps") == 0 || strcmp(res, "secrets") == 0)
        add_arr(r, "resourceNames", oom);
    cJSON *v = add_arr(r, "verbs", oom);
    for (const char *p = verbs; *p && !*oom;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char verb[16];
        snprintf(verb, sizeof verb, "%.*s", (int)n, p);
        push_str(v, verb, oom);
        p += n + (e ? 1 : 0);
    }
    return r;
}

/* metadata {name, namespace, labels} of both objects. */
static void add_meta(cJSON *o, const char *kind, const char *name, const char *ns, int *oom)
{
    add_str(o, "apiVersion", RBAC_API "/v1", oom);
    add_str(o, "kind", kind, oom);
    cJSON *m = add_obj(o, "metadata", oom);
    add_str(m, "name", name, oom);
    add_str(m, "namespace", ns, oom);
    cJSON *l = add_obj(m, "labels", oom);
    add_str(l, "app.kubernetes.io/name", "reload-agent", oom);
    add_str(l, "app.kubernetes.io/component", "fast-sync", oom);
}

/* The Role: manifests/fast-sync/role.yaml's rules, the objects of args
 * as resourceNames (a resource none names gets no rule). */
static cJSON *make_role(const char *name, const char *ns, const cJSON *args, int *oom)
{
    cJSON *role = cJSON_CreateObject(), *a;
    if (!role) *oom = 1;
    add_meta(role, "Role", name, ns, oom);
    cJSON *rules = add_arr(role, "rules", oom);
    add_rule(rules, "", "pods", "get,patch", oom);
    add_rule(rules, "reload-agent.io", "fastsync", "nudge", oom);
    static const char *const KIND[] = {"configmap/", "secret/"};
    static const char *const RES[] = {"configmaps", "secrets"};
    for (int k = 0; k < 2 && !*oom; k++) {
        cJSON *rule = NULL;
        cJSON_ArrayForEach(a, args)
        {
            const char *v = cJSON_IsString(a) ? a->valuestring : "";
            if (strncmp(v, OBJ_ARG, sizeof OBJ_ARG - 1) != 0) continue;
            v += sizeof OBJ_ARG - 1;
            if (strncmp(v, KIND[k], strlen(KIND[k])) != 0) continue;
            if (!rule) rule = add_rule(rules, "", RES[k], "get,list,watch", oom);
            push_str(cJSON_GetObjectItemCaseSensitive(rule, "resourceNames"), v + strlen(KIND[k]),
                     oom);
        }
    }
    return role;
}

static cJSON *make_binding(const char *name, const char *ns, const char *sa, int *oom)
{
    cJSON *b = cJSON_CreateObject();
    if (!b) *oom = 1;
    add_meta(b, "RoleBinding", name, ns, oom);
    cJSON *ref = add_obj(b, "roleRef", oom);
    add_str(ref, "apiGroup", RBAC_API, oom);
    add_str(ref, "kind", "Role", oom);
    add_str(ref, "name", name, oom);
    cJSON *subj = *oom ? NULL : cJSON_CreateObject();
    cJSON *subjects = add_arr(b, "subjects", oom);
    if (!subj || !subjects || !cJSON_AddItemToArray(subjects, subj)) {
        cJSON_Delete(subj);
        *oom = 1;
        return b;
    }
    add_str(subj, "kind", "ServiceAccount", oom);
    add_str(subj, "name", sa, oom);
    add_str(subj, "namespace", ns, oom);
    return b;
}

int rbac_fast_sync(const cJSON *obj, const char *prefix, cJSON **role, cJSON **binding, char *why,
                   size_t whylen)
{
    *role = *binding = NULL;
    const cJSON *tmpl = jsonpointer_get(obj, prefix, strlen(prefix)), *a;
    const cJSON *args = sidecar_args(tmpl);
    int on = 0;
    cJSON_ArrayForEach(a, (cJSON_IsArray(args) ? args : NULL))
    {
        on |= cJSON_IsString(a) && strcmp(a->valuestring, "--fast-sync=true") == 0;
    }
    if (!on) return 0;
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const char *kind = str_at(obj, "kind"), *name = str_at(meta, "name");
    const char *ns = str_at(meta, "namespace");
    if (!name || !*name) {
        snprintf(why, whylen, "it has no metadata.name to name them after");
        return -EINVAL;
    }
    if (!ns || !*ns) {
        snprintf(why, whylen,
                 "it has no metadata.namespace, which the RoleBinding's ServiceAccount subject "
                 "needs: set it (or see README \"Fast sync\")");
        return -EINVAL;
    }
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(tmpl, "spec");
    const char *sa = str_at(spec, "serviceAccountName");
    if (!sa || !*sa) sa = str_at(spec, "serviceAccount");
    if (!sa || !*sa) sa = "default";
    char *rname =
        malloc(sizeof RBAC_FAST_SYNC_PREFIX + strlen(kind ? kind : "") + strlen(name) + 1);
    if (!rname) return -ENOMEM;
    size_t n = (size_t)sprintf(rname, "%s", RBAC_FAST_SYNC_PREFIX);
    for (const char *k = kind ? kind : ""; *k; k++) rname[n++] = (char)tolower((unsigned char)*k);
    sprintf(rname + n, "-%s", name);
    int oom = 0;
    *role = make_role(rname, ns, args, &oom);
    *binding = make_binding(rname, ns, sa, &oom);
    free(rname);
    if (oom) {
        cJSON_Delete(*role);
        cJSON_Delete(*binding);
        *role = *binding = NULL;
        return -ENOMEM;
    }
    return 1;
}
