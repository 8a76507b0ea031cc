/*
 * rbac.c - the Role and RoleBinding of fast sync for one injected
 * workload (contract in rbac.h; the rules are manifests/fast-sync/
 * role.yaml's, docs/fast-sync.md), and staging's Role, RoleBinding and
 * Lease (manifests/stage/role.yaml's rules, docs/staging.md). Key order is
 * fixed, so the output is byte-stable. A name longer than an object name
 * may be (253) is shortened with k8s_hashed_name (kube/k8sname.h).
 */
#include "inject/rbac.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/k8sname.h"
#include "kube/kinds.h"
#include "kube/lease.h"
#include "yamldoc/jsonpatch.h"

#define OBJ_ARG "--fast-sync-objects="
#define STAGE_ARG "--stage-workload="
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
 * appended to rules; resourceNames (empty, for the caller to fill) for
 * configmaps and secrets, or name when not NULL. */
static cJSON *add_named_rule(cJSON *rules, const char *group, const char *res, const char *name,
                             const char *verbs, int *oom);

static cJSON *add_rule(cJSON *rules, const char *group, const char *res, const char *verbs,
                       int *oom)
{
    return add_named_rule(rules, group, res, NULL, verbs, oom);
}

static cJSON *add_named_rule(cJSON *rules, const char *group, const char *res, const char *name,
                             const char *verbs, int *oom)
{
    cJSON *r = *oom ? NULL : cJSON_CreateObject();
    if (!r || !cJSON_AddItemToArray(rules, r)) {
        cJSON_Delete(r);
        *oom = 1;
        return NULL;
    }
    push_str(add_arr(r, "apiGroups", oom), group, oom);
    push_str(add_arr(r, "resources", oom), res, oom);
    if (name)
        push_str(add_arr(r, "resourceNames", oom), name, oom);
    else if (strcmp(res, "configmaps") == 0 || strcmp(res, "secrets") == 0)
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

/* apiVersion, kind and metadata {name, namespace, labels} of an object of
 * component ("fast-sync", "stage"). */
static void add_meta_of(cJSON *o, const char *api, const char *kind, const char *name,
                        const char *ns, const char *component, int *oom)
{
    add_str(o, "apiVersion", api, oom);
    add_str(o, "kind", kind, oom);
    cJSON *m = add_obj(o, "metadata", oom);
    add_str(m, "name", name, oom);
    add_str(m, "namespace", ns, oom);
    cJSON *l = add_obj(m, "labels", oom);
    add_str(l, "app.kubernetes.io/name", "reload-agent", oom);
    add_str(l, "app.kubernetes.io/component", component, oom);
}

static void add_meta(cJSON *o, const char *kind, const char *name, const char *ns, int *oom)
{
    add_meta_of(o, RBAC_API "/v1", kind, name, ns, "fast-sync", oom);
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

static cJSON *make_binding(const char *name, const char *ns, const char *sa, const char *component,
                           int *oom)
{
    cJSON *b = cJSON_CreateObject();
    if (!b) *oom = 1;
    add_meta_of(b, RBAC_API "/v1", "RoleBinding", name, ns, component, oom);
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
                 "needs: set it (or see docs/fast-sync.md)");
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
    n += (size_t)sprintf(rname + n, "-%s", name);
    char fit[K8S_DNS1123_SUBDOMAIN_MAX + 1];
    const char *use =
        n <= K8S_DNS1123_SUBDOMAIN_MAX
            ? rname
            : k8s_hashed_name(rname, K8S_DNS1123_SUBDOMAIN_MAX, rname, fit, sizeof fit);
    int oom = 0;
    *role = make_role(use, ns, args, &oom);
    *binding = make_binding(use, ns, sa, "fast-sync", &oom);
    free(rname);
    if (oom) {
        cJSON_Delete(*role);
        cJSON_Delete(*binding);
        *role = *binding = NULL;
        return -ENOMEM;
    }
    return 1;
}

/* The value of the sidecar's arg prefix (e.g. "--stage-workload="), or NULL. */
static const char *arg_value(const cJSON *args, const char *prefix)
{
    const cJSON *a;
    size_t n = strlen(prefix);
    cJSON_ArrayForEach(a, (cJSON_IsArray(args) ? args : NULL))
    {
        if (cJSON_IsString(a) && strncmp(a->valuestring, prefix, n) == 0) return a->valuestring + n;
    }
    return NULL;
}

/* Staging's Role: the one Lease (list, watch and patch: the agent reads it
 * by a watch and writes it with a compare-and-swap; it never creates it,
 * the Lease is written beside the Role), the workload (get: its replicas,
 * for "P%"), and Events (ConfigHalted). */
static cJSON *make_stage_role(const char *name, const char *ns, const struct kinds_kind *ki,
                              const char *workload, int *oom)
{
    cJSON *role = cJSON_CreateObject();
    if (!role) *oom = 1;
    add_meta_of(role, RBAC_API "/v1", "Role", name, ns, "stage", oom);
    cJSON *rules = add_arr(role, "rules", oom);
    add_named_rule(rules, LEASE_GROUP, LEASE_RESOURCE, name, "list,watch,patch", oom);
    add_named_rule(rules, ki->group, ki->resource, workload, "get", oom);
    add_rule(rules, "", "events", "create", oom);
    return role;
}

static cJSON *make_lease(const char *name, const char *ns, int *oom)
{
    cJSON *l = cJSON_CreateObject();
    if (!l) *oom = 1;
    add_meta_of(l, LEASE_GROUP "/v1", "Lease", name, ns, "stage", oom);
    add_obj(l, "spec", oom);
    return l;
}

int rbac_stage(const cJSON *obj, const char *prefix, cJSON **role, cJSON **binding, cJSON **lease,
               char *why, size_t whylen)
{
    *role = *binding = *lease = NULL;
    const cJSON *tmpl = jsonpointer_get(obj, prefix, strlen(prefix));
    const char *wl = arg_value(sidecar_args(tmpl), STAGE_ARG);
    if (!wl) return 0;
    const struct kinds_kind *ki;
    const char *wname;
    char name[LEASE_NAME_MAX + 1];
    if (lease_parse_workload(wl, &ki, &wname) < 0 ||
        lease_name_for(ki->kind, wname, name, sizeof name) < 0) {
        snprintf(why, whylen, "its sidecar's %s%.100s is not KIND/NAME of a workload", STAGE_ARG,
                 wl);
        return -EINVAL;
    }
    const char *ns = str_at(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "namespace");
    if (!ns || !*ns) {
        snprintf(why, whylen,
                 "it has no metadata.namespace, which the RoleBinding's ServiceAccount subject "
                 "needs: set it (or see docs/staging.md)");
        return -EINVAL;
    }
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(tmpl, "spec");
    const char *sa = str_at(spec, "serviceAccountName");
    if (!sa || !*sa) sa = str_at(spec, "serviceAccount");
    if (!sa || !*sa) sa = "default";
    int oom = 0;
    *role = make_stage_role(name, ns, ki, wname, &oom);
    *binding = make_binding(name, ns, sa, "stage", &oom);
    *lease = make_lease(name, ns, &oom);
    if (oom) {
        cJSON_Delete(*role);
        cJSON_Delete(*binding);
        cJSON_Delete(*lease);
        *role = *binding = *lease = NULL;
        return -ENOMEM;
    }
    return 1;
}
