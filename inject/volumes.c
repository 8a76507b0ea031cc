/*
 * volumes.c - which volumes the injected sidecar mounts (transform_int.h):
 * the read-only mirrors of the app's ConfigMap, Secret and projected
 * volumes (and Secrets Store CSI volumes, csi.c), and the agent-only volumes of the ConfigMaps and Secrets the
 * app reads through env.
 *
 * Mirrors: in the order of spec.volumes, each mirrorable volume an app
 * container mounts without subPath is mounted into the sidecar at the
 * first such mountPath (regular containers first, then init containers);
 * a path that is taken (by another mirror, the sidecar's own mounts under
 * /etc/podinfo and /reload-agent, the token path, or a relative path)
 * moves under /reload-agent/volumes/<volume>, with a warning.
 *
 * Env volumes: one per referenced object, in the order of first reference,
 * named reload-agent-env-cm-<name> / reload-agent-env-secret-<name> ('.'
 * becomes '-'); a name longer than a DNS label (63), or one that clashes
 * with a volume of the pod or another env volume, is cut to 54 characters
 * and gets '-' and 8 hex digits of the SHA-256 of the object's name.
 */
#include "inject/transform_int.h"
#include "config/rules.h"
#include "kube/k8sname.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENV_CM_PREFIX "reload-agent-env-cm-"
#define ENV_SECRET_PREFIX "reload-agent-env-secret-"
#define EXTRA_CM_PREFIX "reload-agent-extra-cm-"
#define EXTRA_SECRET_PREFIX "reload-agent-extra-secret-"

const cJSON *inject__volume(const struct inject__ctx *x, const char *name)
{
    const cJSON *v;
    cJSON_ArrayForEach(v, x->volumes)
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(v, "name");
        if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0) return v;
    }
    return NULL;
}

/* 1 if the projected volume has a serviceAccountToken source. */
static int has_token_source(const cJSON *projected)
{
    const cJSON *src, *sources = cJSON_GetObjectItemCaseSensitive(projected, "sources");
    cJSON_ArrayForEach(src, (cJSON_IsArray(sources) ? sources : NULL))
    {
        if (cJSON_IsObject(src) && cJSON_GetObjectItemCaseSensitive(src, "serviceAccountToken"))
            return 1;
    }
    return 0;
}

static int is_token_volume(const cJSON *vol)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(vol, "name");
    const cJSON *pj = cJSON_GetObjectItemCaseSensitive(vol, "projected");
    if (cJSON_IsString(name) && strncmp(name->valuestring, "kube-api-access-", 16) == 0) return 1;
    return cJSON_IsObject(pj) && has_token_source(pj);
}

/* 1 if the volume is a ConfigMap, Secret or projected volume that is not a
 * service-account token (kube-api-access-*, serviceAccountToken source),
 * or a Secrets Store CSI volume (csi.c). */
static int is_mirrorable(const cJSON *vol)
{
    if (is_token_volume(vol)) return 0;
    return inject__is_csi_secrets(vol) ||
           cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(vol, "configMap")) ||
           cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(vol, "secret")) ||
           cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(vol, "projected"));
}

/* 1 if a projected token volume also carries ConfigMap or Secret content
 * (worth a warning: that content is not watched). */
static int token_volume_has_content(const cJSON *vol)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(vol, "name");
    const cJSON *pj = cJSON_GetObjectItemCaseSensitive(vol, "projected");
    if (cJSON_IsString(name) && strncmp(name->valuestring, "kube-api-access-", 16) == 0) return 0;
    const cJSON *src, *sources = cJSON_GetObjectItemCaseSensitive(pj, "sources");
    cJSON_ArrayForEach(src, (cJSON_IsArray(sources) ? sources : NULL))
    {
        if (cJSON_IsObject(src) && (cJSON_GetObjectItemCaseSensitive(src, "configMap") ||
                                    cJSON_GetObjectItemCaseSensitive(src, "secret")))
            return 1;
    }
    return 0;
}

/* What of the sidecar's own a mirror at path (clean) would clash with:
 * its mount at or inside path, or the one path lies in; NULL for none. */
static const char *clashes_with_own(const char *path)
{
    static const struct {
        const char *path, *what;
    } OWN[] = {{INJECT__PODINFO_PATH, "the sidecar's " INJECT__PODINFO_PATH},
               {INJECT__OWN_ROOT, "the sidecar's " INJECT__OWN_ROOT},
               {INJECT__TOKEN_PATH, "the sidecar's token mount"}};
    for (size_t i = 0; i < sizeof OWN / sizeof OWN[0]; i++)
        if (path_rules_is_under(OWN[i].path, path) || path_rules_is_under(path, OWN[i].path))
            return OWN[i].what;
    return NULL;
}

/* The string member key of o, or NULL when absent or null; *ok = 0 when it
 * has another type. */
static const char *str_member(const cJSON *o, const char *key, int *ok)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsString(v)) return v->valuestring;
    if (v && !cJSON_IsNull(v)) *ok = 0;
    return NULL;
}

/* Reads one volumeMount of app a: name, mountPath and whether it has a
 * subPath. Returns 0 or -EINVAL. Runs volumes x mounts times: the message
 * path is built only for an error. */
static int read_mount(struct inject__ctx *x, const struct inject__app *a, size_t i, const cJSON *m,
                      const char **name, const char **path, const char **sub)
{
    int ok = cJSON_IsObject(m);
    const char *subexpr = NULL;
    if (ok) {
        *name = str_member(m, "name", &ok);
        *path = str_member(m, "mountPath", &ok);
        *sub = str_member(m, "subPath", &ok);
        subexpr = str_member(m, "subPathExpr", &ok);
    }
    if (!ok) {
        char mp[160];
        snprintf(mp, sizeof mp, "%s%s.volumeMounts[%zu]", x->tpath, a->path, i);
        if (!cJSON_IsObject(m)) return inject__type_error(x, mp, "an object", m);
        if (inject__get_str(x, m, mp, "name", name) < 0 ||
            inject__get_str(x, m, mp, "mountPath", path) < 0 ||
            inject__get_str(x, m, mp, "subPath", sub) < 0 ||
            inject__get_str(x, m, mp, "subPathExpr", &subexpr) < 0)
            return -EINVAL;
    }
    if (!(*sub && **sub)) *sub = subexpr;
    if (*sub && !**sub) *sub = NULL;
    return 0;
}

static const cJSON *mounts_of(struct inject__ctx *x, const struct inject__app *a, int *rc)
{
    char cp[160];
    const cJSON *mounts = cJSON_GetObjectItemCaseSensitive(a->c, "volumeMounts");
    *rc = 0;
    if (!mounts || cJSON_IsNull(mounts) || cJSON_IsArray(mounts))
        return cJSON_IsArray(mounts) ? mounts : NULL;
    snprintf(cp, sizeof cp, "%s%s", x->tpath, a->path);
    *rc = inject__get_arr(x, a->c, cp, "volumeMounts", &mounts);
    return mounts;
}

/* One volumeMount of an app container. */
struct mount {
    const char *name, *path, *sub; /* sub: subPath or subPathExpr, NULL for none */
    const struct inject__app *app;
    size_t order; /* its place among all the apps' mounts */
};

/* Reads (and type-checks) every volumeMount of the apps once, in order.
 * Returns 0 with *out (free it), -EINVAL or -ENOMEM. */
static int read_mounts(struct inject__ctx *x, struct mount **out, size_t *n)
{
    size_t cap = 0, k = 0;
    *out = NULL;
    *n = 0;
    for (size_t ai = 0; ai < x->napps; ai++) {
        int rc;
        const cJSON *mounts = mounts_of(x, &x->apps[ai], &rc);
        if (rc < 0) return rc;
        cap += (size_t)cJSON_GetArraySize(mounts);
    }
    struct mount *v = calloc(cap ? cap : 1, sizeof *v);
    if (!v) return -ENOMEM;
    for (size_t ai = 0; ai < x->napps; ai++) {
        int rc;
        const cJSON *m, *mounts = mounts_of(x, &x->apps[ai], &rc);
        size_t mi = 0;
        cJSON_ArrayForEach(m, mounts)
        {
            if (read_mount(x, &x->apps[ai], mi++, m, &v[k].name, &v[k].path, &v[k].sub) < 0) {
                free(v);
                return -EINVAL;
            }
            v[k].order = k;
            v[k++].app = &x->apps[ai];
        }
    }
    *out = v;
    *n = k;
    return 0;
}

/* What planning the mirrors looks things up in, each by name or path: the
 * apps' mounts sorted by volume name (in mount order within one), the
 * volumes not to mirror again, the sidecar's mounts (a reinvocation) and
 * the mirrors planned so far. */
struct planner {
    struct mount *mounts;
    size_t nm;
    struct inject__names skip;   /* volume names: already mirrored, or planned */
    struct inject__names taken;  /* clean paths of the sidecar's mounts -> index */
    char **taken_clean;          /* owned copies, ntaken */
    const char *const *taken_as; /* as written, for the message */
    size_t ntaken;
    struct inject__names paths; /* clean mirror paths -> mirror index */
    int warn_subpath;
};

static int plan_volume(struct inject__ctx *x, struct planner *p, const cJSON *vol, size_t idx);

/* ---- file modes ---- */

#define DEFAULT_MODE 0644 /* the API's default for configMap, secret and projected */

/* 1 if a file of mode m, owned by root (the kubelet's), is readable by the
 * non-root sidecar: by others, or by group when the sidecar's group is 0. */
static int mode_readable(long m, int group0) { return (m & 04) || (group0 && (m & 040)); }

/* The first unreadable mode of a source's items (mode, else dflt) into
 * *bad. src: a configMap or secret source at path. Returns 0 or -EINVAL. */
static int items_mode(struct inject__ctx *x, const cJSON *src, const char *path, long dflt,
                      int group0, long *bad)
{
    const cJSON *items, *it;
    char ip[288];
    long dm = -1;
    if (!cJSON_IsObject(src)) return 0;
    if (inject__get_id(x, src, path, "defaultMode", &dm) < 0 ||
        inject__get_arr(x, src, path, "items", &items) < 0)
        return -EINVAL;
    if (dm >= 0) dflt = dm;
    if (!items && !mode_readable(dflt, group0) && *bad < 0) *bad = dflt;
    int i = 0;
    cJSON_ArrayForEach(it, items)
    {
        long m = -1;
        snprintf(ip, sizeof ip, "%.240s.items[%d]", path, i++);
        if (cJSON_IsObject(it) && inject__get_id(x, it, ip, "mode", &m) < 0) return -EINVAL;
        if (m < 0) m = dflt;
        if (!mode_readable(m, group0) && *bad < 0) *bad = m;
    }
    return 0;
}

/* Warns when a mirrored volume (spec.volumes[idx]) holds files the
 * sidecar cannot read: a mode without read for others (0400, 0440) and no
 * pod fsGroup (with one the kubelet makes every file group-readable and
 * the sidecar is in the group). The agent would report Permission denied
 * at every attempt. Returns 0 or -EINVAL. */
static int warn_unreadable(struct inject__ctx *x, const cJSON *vol, const char *vname, size_t idx)
{
    const cJSON *psc = cJSON_GetObjectItemCaseSensitive(x->spec, "securityContext"), *src;
    const cJSON *fs = cJSON_GetObjectItemCaseSensitive(psc, "fsGroup");
    const cJSON *rg = cJSON_GetObjectItemCaseSensitive(psc, "runAsGroup");
    if (cJSON_IsNumber(fs)) return 0;
    int group0 = cJSON_IsNumber(rg) && rg->valuedouble == 0;
    char vp[160], sp[224];
    long bad = -1, pdm = DEFAULT_MODE;
    snprintf(vp, sizeof vp, "%sspec.volumes[%zu]", x->tpath, idx);
    static const char *const KINDS[] = {"configMap", "secret"};
    for (int k = 0; k < 2; k++) {
        snprintf(sp, sizeof sp, "%s.%s", vp, KINDS[k]);
        src = cJSON_GetObjectItemCaseSensitive(vol, KINDS[k]);
        if (items_mode(x, src, sp, DEFAULT_MODE, group0, &bad) < 0) return -EINVAL;
    }
    const cJSON *pj = cJSON_GetObjectItemCaseSensitive(vol, "projected"), *sources;
    snprintf(sp, sizeof sp, "%s.projected", vp);
    if (cJSON_IsObject(pj) && (inject__get_id(x, pj, sp, "defaultMode", &pdm) < 0 ||
                               inject__get_arr(x, pj, sp, "sources", &sources) < 0))
        return -EINVAL;
    if (pdm < 0) pdm = DEFAULT_MODE;
    int i = 0;
    cJSON_ArrayForEach(src, (cJSON_IsObject(pj) ? sources : NULL))
    {
        for (int k = 0; k < 2; k++) { /* a projection's items default to the volume's mode */
            snprintf(sp, sizeof sp, "%s.projected.sources[%d].%s", vp, i, KINDS[k]);
            const cJSON *s = cJSON_GetObjectItemCaseSensitive(src, KINDS[k]);
            if (items_mode(x, s, sp, pdm, group0, &bad) < 0) return -EINVAL;
        }
        i++;
    }
    if (bad >= 0)
        inject__warn(x,
                     "volume %s: files of mode %04lo owned by root; the sidecar cannot read them: "
                     "set the pod's fsGroup or mode 0444",
                     vname, bad);
    return 0;
}

/* Why a mirror cannot go to the app's mountPath (clean: cleaned): it is
 * relative, holds $( (the kubelet would expand it in the sidecar's args),
 * or is taken in the sidecar (by its own mounts, a mount the sidecar
 * already has: taken[0..ntaken), or another mirror: by names which).
 * NULL when it can go there. */
static const char *mirror_clash(const struct inject__ctx *x, const struct planner *p,
                                const char *clean, char *by, size_t bylen)
{
    const char *own;
    long k;
    if (clean[0] != '/') return "is not absolute";
    if (strstr(clean, "$(")) return "holds $( (args expand it)";
    if ((own = clashes_with_own(clean))) {
        snprintf(by, bylen, " by %s", own);
        return "is taken";
    }
    if ((k = inject__names_get(&p->taken, clean)) >= 0) {
        snprintf(by, bylen, " by the sidecar's mount at %s", p->taken_as[k]);
        return "is taken";
    }
    if ((k = inject__names_get(&p->paths, clean)) >= 0) {
        snprintf(by, bylen, " by volume %s", x->mirrors[k].volume);
        return "is taken";
    }
    return NULL;
}

static int by_volume(const void *a, const void *b)
{
    const struct mount *m = a, *n = b;
    int c = strcmp(m->name ? m->name : "", n->name ? n->name : "");
    return c ? c : (m->order > n->order) - (m->order < n->order);
}

static void planner_free(struct planner *p)
{
    free(p->mounts);
    inject__names_free(&p->skip);
    inject__names_free(&p->taken);
    inject__names_free(&p->paths);
    for (size_t i = 0; i < p->ntaken; i++) free(p->taken_clean[i]);
    free(p->taken_clean);
}

static int planner_init(struct inject__ctx *x, struct planner *p, const char *const *skip,
                        size_t nskip, const char *const *taken, size_t ntaken)
{
    size_t nvol = (size_t)cJSON_GetArraySize(x->volumes);
    int rc = read_mounts(x, &p->mounts, &p->nm);
    if (rc < 0) return rc;
    qsort(p->mounts, p->nm, sizeof *p->mounts, by_volume);
    p->taken_as = taken;
    if (inject__names_init(&p->skip, nskip + nvol) < 0 ||
        inject__names_init(&p->taken, ntaken) < 0 || inject__names_init(&p->paths, nvol) < 0 ||
        !(p->taken_clean = calloc(ntaken + 1, sizeof *p->taken_clean)))
        return -ENOMEM;
    for (size_t i = 0; i < nskip; i++)
        if (inject__names_put(&p->skip, skip[i], i, NULL) < 0) return -ENOMEM;
    for (; p->ntaken < ntaken; p->ntaken++) {
        char *c = p->taken_clean[p->ntaken] = inject_clean_path(taken[p->ntaken]);
        if (!c || inject__names_put(&p->taken, c, p->ntaken, NULL) < 0) return -ENOMEM;
    }
    x->mirrors = calloc(nvol ? nvol : 1, sizeof *x->mirrors);
    return x->mirrors ? 0 : -ENOMEM;
}

int inject__plan_mirrors(struct inject__ctx *x, const char *const *skip, size_t nskip,
                         const char *const *taken, size_t ntaken, int warn_subpath)
{
    struct planner p = {.warn_subpath = warn_subpath};
    int rc = planner_init(x, &p, skip, nskip, taken, ntaken);
    size_t idx = 0;
    const cJSON *vol;
    cJSON_ArrayForEach(vol, x->volumes)
    {
        if (rc < 0) break;
        rc = plan_volume(x, &p, vol, idx++);
    }
    planner_free(&p);
    return rc;
}

/* The app's mount path of volume vname (the first mount without subPath),
 * or NULL; warns about its subPath mounts, and remembers the first volume
 * that is mounted only with subPath (for "nothing to watch"). */
static const char *mount_of(struct inject__ctx *x, const struct planner *p, const char *vname,
                            int mirrorable)
{
    struct mount key = {.name = vname, .order = 0};
    size_t lo = 0, hi = p->nm;
    while (lo < hi) { /* the first mount of vname */
        size_t mid = lo + (hi - lo) / 2;
        if (by_volume(&p->mounts[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    const char *chosen = NULL, *sub_at = NULL;
    for (size_t i = lo; i < p->nm && p->mounts[i].name && !strcmp(p->mounts[i].name, vname); i++) {
        const struct mount *m = &p->mounts[i];
        if (!m->sub) {
            if (!chosen && m->path) chosen = m->path;
            continue;
        }
        if (!sub_at) sub_at = m->path ? m->path : "?";
        if (p->warn_subpath && mirrorable)
            inject__warn(x,
                         "container %s mounts volume %s with subPath at %s: subPath mounts never "
                         "update",
                         m->app->name, vname, m->path ? m->path : "?");
    }
    if (!chosen && sub_at && mirrorable && !x->subpath_only) {
        x->subpath_only = vname;
        x->subpath_at = sub_at;
    }
    return chosen;
}

static int plan_volume(struct inject__ctx *x, struct planner *p, const cJSON *vol, size_t idx)
{
    const cJSON *jn = cJSON_GetObjectItemCaseSensitive(vol, "name");
    const char *vname = cJSON_IsString(jn) ? jn->valuestring : NULL;
    if (!vname) {
        char vp[96];
        snprintf(vp, sizeof vp, "%sspec.volumes[%zu]", x->tpath, idx);
        if (!cJSON_IsObject(vol)) return inject__type_error(x, vp, "an object", vol);
        if (inject__get_str(x, vol, vp, "name", &vname) < 0) return -EINVAL;
        snprintf(x->err, x->errlen, "%s.name: missing", vp);
        return -EINVAL;
    }
    /* already mirrored, or a second volume of that name */
    if (inject__names_get(&p->skip, vname) >= 0) return 0;
    int mirrorable = is_mirrorable(vol);
    int token = !mirrorable && is_token_volume(vol);
    int token_content = token && token_volume_has_content(vol);
    if (!mirrorable && !token) return 0;
    const char *chosen = mount_of(x, p, vname, mirrorable);
    if (!chosen) return 0;
    if (token) {
        if (token_content)
            inject__warn(x,
                         "volume %s is not watched: it holds a service-account token, which "
                         "rotates hourly",
                         vname);
        else if (!x->token_only && strncmp(vname, "kube-api-access-", 16) != 0)
            x->token_only = vname;
        return 0;
    }
    if (!k8s_is_dns1123_label(vname)) { /* the API server rejects the pod anyway */
        inject__warn(x, "volume name \"%.64s\" is not a DNS label: not watched", vname);
        return 0;
    }
    char by[160] = "";
    char *clean = inject_clean_path(chosen);
    if (!clean) return -ENOMEM;
    const char *why = mirror_clash(x, p, clean, by, sizeof by);
    size_t cl = strlen(chosen); /* a trailing '/' changes nothing the agent sees */
    while (cl > 1 && chosen[cl - 1] == '/') cl--;
    if (!why && (strlen(clean) != cl || strncmp(clean, chosen, cl) != 0))
        inject__warn(x, "volume %s: mountPath %s is %s once cleaned; mirrored there", vname, chosen,
                     clean);
    struct inject__mirror *mir = &x->mirrors[x->nmirrors];
    mir->volume = vname;
    if (why) {
        free(clean);
        mir->mount_path = inject__printf(x, INJECT__OWN_ROOT "/volumes/%s", vname);
        inject__warn(x, "volume %s: %s %s%s; mirrored at %s", vname, chosen, why, by,
                     mir->mount_path ? mir->mount_path : "?");
    } else {
        mir->mount_path = clean;
    }
    if (x->oom || !mir->mount_path ||
        inject__names_put(&p->paths, mir->mount_path, x->nmirrors, NULL) < 0 ||
        inject__names_put(&p->skip, vname, 0, NULL) < 0) {
        free(mir->mount_path); /* not counted in x->nmirrors: inject__plan_free skips it */
        mir->mount_path = NULL;
        return -ENOMEM;
    }
    x->nmirrors++;
    return warn_unreadable(x, vol, vname, idx);
}

/* ---- env ---- */

int inject__envref_add(struct inject__ctx *x, int secret, const char *name,
                       struct inject__envref **out)
{
    size_t at;
    int rc = inject__names_put(&x->env_idx[secret], name, x->nenvs, &at);
    if (rc < 0) return rc;
    if (rc == 1) { /* a new object */
        if (x->nenvs == x->envs_cap) {
            size_t cap = x->envs_cap ? 2 * x->envs_cap : 8;
            struct inject__envref *nv = realloc(x->envs, cap * sizeof *nv);
            if (!nv) return -ENOMEM;
            x->envs = nv;
            x->envs_cap = cap;
        }
        at = x->nenvs++;
        memset(&x->envs[at], 0, sizeof x->envs[at]);
        x->envs[at].secret = secret;
        x->envs[at].name = name;
    }
    *out = &x->envs[at];
    return rc;
}

/* Records one reference: key NULL = the whole object (envFrom). */
static int record_ref(struct inject__ctx *x, const struct inject__app *a, int secret,
                      const char *name, const char *key, int optional)
{
    const char *kind = secret ? "secret" : "configMap";
    if (!name || !k8s_is_dns1123_subdomain(name)) {
        inject__warn(x, "container %s: %s name \"%.80s\" is not a valid name: not watched", a->name,
                     kind, name ? name : "");
        return x->oom ? -ENOMEM : 0;
    }
    if (key && !k8s_is_configmap_key(key)) {
        inject__warn(x, "container %s: key \"%.80s\" of %s %s is not a valid key: not watched",
                     a->name, key, kind, name);
        return x->oom ? -ENOMEM : 0;
    }
    struct inject__envref *e;
    int rc = inject__envref_add(x, secret, name, &e);
    if (rc < 0) return rc;
    e->optional |= optional;
    if (!key) {
        e->whole = 1;
        return 0;
    }
    if (e->nkeys == e->keys_cap) { /* repeats are dropped once sorted (inject__plan_env) */
        size_t cap = e->keys_cap ? 2 * e->keys_cap : 4;
        const char **nk = realloc(e->keys, cap * sizeof *nk);
        if (!nk) return -ENOMEM;
        e->keys = nk;
        e->keys_cap = cap;
    }
    e->keys[e->nkeys++] = key;
    return 0;
}

/* Reads a reference object {name, key?, optional?} at path. */
static int read_ref(struct inject__ctx *x, const cJSON *ref, const char *path, int want_key,
                    const char **name, const char **key, int *optional)
{
    *key = NULL;
    if (inject__get_str(x, ref, path, "name", name) < 0 ||
        (want_key && inject__get_str(x, ref, path, "key", key) < 0) ||
        inject__get_bool(x, ref, path, "optional", optional) < 0)
        return -EINVAL;
    if (*optional < 0) *optional = 0;
    if (want_key && !*key) {
        snprintf(x->err, x->errlen, "%s.key: missing", path);
        return -EINVAL;
    }
    return 0;
}

static int scan_app_env(struct inject__ctx *x, const struct inject__app *a)
{
    char cp[160], ip[192], rp[224];
    const cJSON *envfrom, *env, *item;
    snprintf(cp, sizeof cp, "%s%s", x->tpath, a->path);
    if (inject__get_arr(x, a->c, cp, "envFrom", &envfrom) < 0 ||
        inject__get_arr(x, a->c, cp, "env", &env) < 0)
        return -EINVAL;
    size_t i = 0;
    cJSON_ArrayForEach(item, envfrom)
    {
        snprintf(ip, sizeof ip, "%s.envFrom[%zu]", cp, i++);
        if (!cJSON_IsObject(item)) return inject__type_error(x, ip, "an object", item);
        for (int secret = 0; secret < 2; secret++) {
            const char *field = secret ? "secretRef" : "configMapRef", *name, *key;
            const cJSON *ref;
            int optional, rc;
            if (inject__get_obj(x, item, ip, field, &ref) < 0) return -EINVAL;
            if (!ref) continue;
            snprintf(rp, sizeof rp, "%s.%s", ip, field);
            if (read_ref(x, ref, rp, 0, &name, &key, &optional) < 0) return -EINVAL;
            if ((rc = record_ref(x, a, secret, name, NULL, optional)) < 0) return rc;
        }
    }
    i = 0;
    cJSON_ArrayForEach(item, env)
    {
        const cJSON *vf;
        snprintf(ip, sizeof ip, "%s.env[%zu]", cp, i++);
        if (!cJSON_IsObject(item)) return inject__type_error(x, ip, "an object", item);
        if (inject__get_obj(x, item, ip, "valueFrom", &vf) < 0) return -EINVAL;
        if (!vf) continue;
        snprintf(ip + strlen(ip), sizeof ip - strlen(ip), ".valueFrom");
        for (int secret = 0; secret < 2; secret++) {
            const char *field = secret ? "secretKeyRef" : "configMapKeyRef", *name, *key;
            const cJSON *ref;
            int optional, rc;
            if (inject__get_obj(x, vf, ip, field, &ref) < 0) return -EINVAL;
            if (!ref) continue;
            snprintf(rp, sizeof rp, "%s.%s", ip, field);
            if (read_ref(x, ref, rp, 1, &name, &key, &optional) < 0) return -EINVAL;
            if ((rc = record_ref(x, a, secret, name, key, optional)) < 0) return rc;
        }
    }
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* 1 if name is a volume of the pod (vols), the podinfo volume or an env
 * volume named already (named). */
static int name_taken(const struct inject__names *vols, const struct inject__names *named,
                      const char *name)
{
    return strcmp(name, INJECT__PODINFO_VOLUME) == 0 || inject__names_get(vols, name) >= 0 ||
           inject__names_get(named, name) >= 0;
}

/* Names env volume i: the plain name, or the cut and hashed one. */
static int name_env_volume(struct inject__ctx *x, size_t i, const struct inject__names *vols,
                           struct inject__names *named)
{
    struct inject__envref *e = &x->envs[i];
    char plain[512], hashed[K8S_DNS1123_LABEL_MAX + 1];
    const char *prefix = e->extra ? (e->secret ? EXTRA_SECRET_PREFIX : EXTRA_CM_PREFIX)
                                  : (e->secret ? ENV_SECRET_PREFIX : ENV_CM_PREFIX);
    int n = snprintf(plain, sizeof plain, "%s%s", prefix, e->name);
    for (char *p = plain; *p; p++)
        if (*p == '.') *p = '-';
    const char *pick = NULL;
    if (n <= K8S_DNS1123_LABEL_MAX && !name_taken(vols, named, plain)) {
        pick = plain;
    } else {
        k8s_hashed_name(plain, K8S_DNS1123_LABEL_MAX, e->name, hashed, sizeof hashed);
        if (!name_taken(vols, named, hashed)) pick = hashed;
    }
    if (!pick) {
        snprintf(x->err, x->errlen, "cannot name the %s volume of %s %s: %s is taken",
                 e->extra ? "extra" : "env", e->secret ? "secret" : "configmap", e->name, hashed);
        return -EEXIST;
    }
    e->volume = strdup(pick);
    e->mount_path = inject__printf(x, INJECT__OWN_ROOT "/%s/%s/%s", e->extra ? "extra" : "env",
                                   e->secret ? "secret" : "configmap", e->name);
    if (!e->volume || !e->mount_path) return -ENOMEM;
    return inject__names_put(named, e->volume, i, NULL) < 0 ? -ENOMEM : 0;
}

/* Sorts keys[0..*n) and drops repeats. */
static void sort_unique(const char **keys, size_t *n)
{
    if (*n < 2) return;
    qsort(keys, *n, sizeof *keys, cmp_str);
    size_t o = 1;
    for (size_t i = 1; i < *n; i++)
        if (strcmp(keys[i], keys[o - 1]) != 0) keys[o++] = keys[i];
    *n = o;
}

int inject__plan_env(struct inject__ctx *x)
{
    for (size_t i = 0; i < x->napps; i++) {
        int rc = scan_app_env(x, &x->apps[i]);
        if (rc < 0) return rc;
        if (x->oom) return -ENOMEM;
    }
    int erc = inject__plan_extra(x);
    if (erc < 0) return erc;
    if (x->oom) return -ENOMEM;
    struct inject__names vols = {0}, named = {0};
    int rc = inject__names_init(&vols, (size_t)cJSON_GetArraySize(x->volumes)) < 0 ||
                     inject__names_init(&named, x->nenvs) < 0
                 ? -ENOMEM
                 : 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, x->volumes)
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(v, "name");
        if (rc == 0 && cJSON_IsString(n) && inject__names_put(&vols, n->valuestring, 0, NULL) < 0)
            rc = -ENOMEM;
    }
    for (size_t i = 0; i < x->nenvs && rc == 0; i++) {
        sort_unique(x->envs[i].keys, &x->envs[i].nkeys);
        rc = name_env_volume(x, i, &vols, &named);
    }
    inject__names_free(&vols);
    inject__names_free(&named);
    return rc;
}

cJSON *inject__env_volume(struct inject__ctx *x, const struct inject__envref *e)
{
    cJSON *v = inject__new_obj(x), *src = inject__new_obj(x);
    inject__add(x, v, "name", inject__str(x, e->volume));
    inject__add(x, src, e->secret ? "secretName" : "name", inject__str(x, e->name));
    if (!e->whole) {
        cJSON *items = inject__new_arr(x);
        for (size_t k = 0; k < e->nkeys; k++) {
            cJSON *it = inject__new_obj(x);
            inject__add(x, it, "key", inject__str(x, e->keys[k]));
            inject__add(x, it, "path", inject__str(x, e->keys[k]));
            inject__push(x, items, it);
        }
        inject__add(x, src, "items", items);
    }
    if (e->optional) inject__add(x, src, "optional", cJSON_CreateTrue());
    inject__add(x, v, e->secret ? "secret" : "configMap", src);
    return x->oom ? (cJSON_Delete(v), NULL) : v;
}

void inject__plan_free(struct inject__ctx *x)
{
    for (size_t i = 0; i < x->nmirrors; i++) free(x->mirrors[i].mount_path);
    free(x->mirrors);
    x->mirrors = NULL;
    x->nmirrors = 0;
    for (size_t i = 0; i < x->nenvs; i++) {
        free(x->envs[i].volume);
        free(x->envs[i].mount_path);
        free(x->envs[i].keys);
    }
    free(x->envs);
    x->envs = NULL;
    x->nenvs = x->envs_cap = 0;
    inject__names_free(&x->env_idx[0]);
    inject__names_free(&x->env_idx[1]);
    free(x->extra_text);
    x->extra_text = NULL;
}
