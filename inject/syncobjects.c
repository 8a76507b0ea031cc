/*
 * syncobjects.c - fast sync in the injection transform (transform_int.h,
 * issue 18 item 4): when the template opts in (reload-agent.io/fast-sync
 * true, judged by the agent's own parser), the objects the sidecar's fast
 * sync watches, as --fast-sync-objects values: "configmap/NAME" and
 * "secret/NAME" of every mirrored volume (configMap, secret, and the
 * sources of a projected volume) and of every env volume, in that order,
 * each once, at most INJECT_FAST_SYNC_MAX of them. The same list is the
 * resourceNames of the Role `reload-agent inject` writes (inject/rbac.c),
 * so the agent watches exactly what RBAC grants.
 *
 * Also the value of the annotation reload-agent.io/sync-objects that every
 * injected pod carries (fast sync or not): the same objects, for the
 * cluster sync service (sync/, docs/sync.md), which so never reads a pod
 * spec.
 */
#include "inject/transform_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "base/buf.h"
#include "kube/k8sname.h"

/* Adds kind/name to x->fast unless it is there. An invalid name (the API
 * server would reject the pod, or the agent the flag) is warned about. */
static void add_object(struct inject__ctx *x, const char *kind, const char *name, const char *vol)
{
    if (!name) return;
    if (!k8s_is_dns1123_subdomain(name)) {
        inject__warn(x, "fast sync: %s \"%.60s\" (volume %s) is not a valid name: not watched",
                     kind, name, vol);
        return;
    }
    char *obj = inject__printf(x, "%s/%s", kind, name);
    if (!obj) return;
    for (size_t i = 0; i < x->nfast; i++)
        if (strcmp(x->fast[i], obj) == 0) {
            free(obj);
            return;
        }
    if (x->nfast == INJECT_FAST_SYNC_MAX) {
        if (!x->fast_over++)
            inject__warn(x,
                         "fast sync watches at most %d objects: %s and later ones wait for the "
                         "kubelet's periodic sync",
                         INJECT_FAST_SYNC_MAX, obj);
        free(obj);
        return;
    }
    if (!x->fast && !(x->fast = calloc(INJECT_FAST_SYNC_MAX, sizeof *x->fast))) {
        free(obj);
        x->oom = 1;
        return;
    }
    x->fast[x->nfast++] = obj;
}

/* The string member key of the object member sub of o, or NULL. */
static const char *name_in(const cJSON *o, const char *sub, const char *key)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, sub);
    const cJSON *v = cJSON_IsObject(s) ? cJSON_GetObjectItemCaseSensitive(s, key) : NULL;
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The objects of one mirrored volume. */
static void add_volume(struct inject__ctx *x, const cJSON *vol, const char *vname)
{
    add_object(x, "configmap", name_in(vol, "configMap", "name"), vname);
    add_object(x, "secret", name_in(vol, "secret", "secretName"), vname);
    const cJSON *pj = cJSON_GetObjectItemCaseSensitive(vol, "projected");
    const cJSON *srcs = cJSON_IsObject(pj) ? cJSON_GetObjectItemCaseSensitive(pj, "sources") : NULL;
    const cJSON *src;
    cJSON_ArrayForEach(src, (cJSON_IsArray(srcs) ? srcs : NULL))
    {
        add_object(x, "configmap", name_in(src, "configMap", "name"), vname);
        add_object(x, "secret", name_in(src, "secret", "name"), vname);
    }
}

void inject__plan_fast_sync(struct inject__ctx *x, int annotated)
{
    for (size_t i = 0; i < x->nmirrors && !x->oom; i++)
        add_volume(x, inject__volume(x, x->mirrors[i].volume), x->mirrors[i].volume);
    for (size_t i = 0; i < x->nenvs && !x->oom; i++)
        add_object(x, x->envs[i].secret ? "secret" : "configmap", x->envs[i].name,
                   x->envs[i].volume);
    if (x->nfast == 0 && !x->oom)
        inject__warn(x, "fast sync: the mirrored volumes name no ConfigMap or Secret: nothing "
                        "to watch");
    if (annotated)
        inject__warn(
            x,
            "annotation %sfast-sync-objects replaces the %zu injected --fast-sync-objects; "
            "the Role reload-agent inject writes names the injected ones",
            CFG_ANNOTATION_PREFIX, x->nfast);
}

size_t inject__fast_sync_args(struct inject__ctx *x, char **v)
{
    size_t k = 0;
    v[k++] = inject__printf(x, "--fast-sync=true");
    for (size_t i = 0; i < x->nfast; i++)
        v[k++] = inject__printf(x, "--fast-sync-objects=%s", x->fast[i]);
    return k;
}

size_t inject__fast_sync_reinvoke_args(struct inject__ctx *x, const cJSON *args, cJSON **add)
{
    static const char OBJ[] = "--fast-sync-objects=";
    const cJSON *a;
    int on = 0;
    cJSON_ArrayForEach(a, args) on |=
        cJSON_IsString(a) && !strcmp(a->valuestring, "--fast-sync=true");
    if (!on) return 0;
    if (!x->fast && !(x->fast = calloc(INJECT_FAST_SYNC_MAX, sizeof *x->fast))) {
        x->oom = 1;
        return 0;
    }
    cJSON_ArrayForEach(a, args) /* the objects the sidecar watches already */
    {
        if (!cJSON_IsString(a) || strncmp(a->valuestring, OBJ, sizeof OBJ - 1) != 0 ||
            x->nfast == INJECT_FAST_SYNC_MAX)
            continue;
        if (!(x->fast[x->nfast] = strdup(a->valuestring + sizeof OBJ - 1))) x->oom = 1;
        if (x->oom) return 0;
        x->nfast++;
    }
    size_t had = x->nfast, k = 0;
    for (size_t i = 0; i < x->nmirrors && !x->oom; i++)
        add_volume(x, inject__volume(x, x->mirrors[i].volume), x->mirrors[i].volume);
    for (size_t i = had; i < x->nfast && !x->oom; i++) {
        char *arg = inject__printf(x, "%s%s", OBJ, x->fast[i]);
        if (arg) add[k++] = inject__str(x, arg);
        free(arg);
    }
    return k;
}

void inject__fast_sync_free(struct inject__ctx *x)
{
    for (size_t i = 0; i < x->nfast; i++) free(x->fast[i]);
    free(x->fast);
    x->fast = NULL;
    x->nfast = 0;
    x->fast_over = 0;
}

/* ---- the sync-objects annotation (the cluster sync service) ---- */

/* 1 if the comma-separated list have (n bytes) holds obj. */
static int listed(const char *have, size_t n, const char *obj)
{
    size_t len = strlen(obj);
    for (const char *p = have; p && p < have + n;) {
        const char *c = memchr(p, ',', (size_t)(have + n - p));
        size_t l = c ? (size_t)(c - p) : (size_t)(have + n - p);
        if (l == len && memcmp(p, obj, len) == 0) return 1;
        p = c ? c + 1 : have + n;
    }
    return 0;
}

/* Appends kind/name to b unless it is there or not an object name. */
static void sync_add(struct buf *b, const char *kind, const char *name)
{
    char obj[300];
    if (!name || !k8s_is_dns1123_subdomain(name)) return;
    snprintf(obj, sizeof obj, "%s/%s", kind, name);
    if (listed(buf_str(b), b->len, obj)) return;
    if (b->len) buf_putc(b, ',');
    buf_puts(b, obj);
}

char *inject__sync_objects(struct inject__ctx *x, const char *had)
{
    if (x->fast) return NULL; /* per-pod fast sync: the pod's own agent nudges it */
    struct buf b = {0};
    if (had) buf_puts(&b, had);
    size_t before = b.len;
    for (size_t i = 0; i < x->nmirrors; i++) {
        const cJSON *vol = inject__volume(x, x->mirrors[i].volume);
        sync_add(&b, "configmap", name_in(vol, "configMap", "name"));
        sync_add(&b, "secret", name_in(vol, "secret", "secretName"));
        const cJSON *pj = cJSON_GetObjectItemCaseSensitive(vol, "projected");
        const cJSON *srcs =
            cJSON_IsObject(pj) ? cJSON_GetObjectItemCaseSensitive(pj, "sources") : NULL;
        const cJSON *src;
        cJSON_ArrayForEach(src, (cJSON_IsArray(srcs) ? srcs : NULL))
        {
            sync_add(&b, "configmap", name_in(src, "configMap", "name"));
            sync_add(&b, "secret", name_in(src, "secret", "name"));
        }
    }
    for (size_t i = 0; i < x->nenvs; i++)
        sync_add(&b, x->envs[i].secret ? "secret" : "configmap", x->envs[i].name);
    if (b.oom) x->oom = 1;
    if (b.oom || b.len == before) {
        buf_free(&b);
        return NULL;
    }
    return buf_take(&b, NULL);
}
