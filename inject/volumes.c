/*
 * volumes.c - which volumes the injected sidecar mounts (transform_int.h):
 * the read-only mirrors of the app's ConfigMap, Secret and projected
 * volumes, and the agent-only volumes of the ConfigMaps and Secrets the
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

#include <errno.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENV_CM_PREFIX "reload-agent-env-cm-"
#define ENV_SECRET_PREFIX "reload-agent-env-secret-"
#define DNS_LABEL_MAX 63

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

int inject__is_mirrorable(const cJSON *vol)
{
    if (is_token_volume(vol)) return 0;
    return cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(vol, "configMap")) ||
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
        if (inject__path_within(path, OWN[i].path) || inject__path_within(OWN[i].path, path))
            return OWN[i].what;
    return NULL;
}

static int same_path(const char *a, const char *b)
{
    return inject__path_within(a, b) && inject__path_within(b, a);
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
            v[k++].app = &x->apps[ai];
        }
    }
    *out = v;
    *n = k;
    return 0;
}

static int plan(struct inject__ctx *x, const struct mount *mounts, size_t nm, size_t nvol,
                const char *const *skip, size_t nskip, const char *const *taken, size_t ntaken,
                int warn_subpath);

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
static const char *mirror_clash(const struct inject__ctx *x, const char *clean,
                                const char *const *taken, size_t ntaken, char *by, size_t bylen)
{
    const char *own;
    if (clean[0] != '/') return "is not absolute";
    if (strstr(clean, "$(")) return "holds $( (args expand it)";
    if ((own = clashes_with_own(clean))) {
        snprintf(by, bylen, " by %s", own);
        return "is taken";
    }
    for (size_t t = 0; t < ntaken; t++) {
        char *c = inject__clean_path(taken[t]);
        int same = c && same_path(clean, c);
        free(c);
        if (same) {
            snprintf(by, bylen, " by the sidecar's mount at %s", taken[t]);
            return "is taken";
        }
    }
    for (size_t k = 0; k < x->nmirrors; k++)
        if (same_path(clean, x->mirrors[k].mount_path)) {
            snprintf(by, bylen, " by volume %s", x->mirrors[k].volume);
            return "is taken";
        }
    return NULL;
}

int inject__plan_mirrors(struct inject__ctx *x, const char *const *skip, size_t nskip,
                         const char *const *taken, size_t ntaken, int warn_subpath)
{
    size_t nvol = (size_t)cJSON_GetArraySize(x->volumes), nm;
    struct mount *mounts;
    int rc = read_mounts(x, &mounts, &nm);
    if (rc < 0) return rc;
    rc = plan(x, mounts, nm, nvol, skip, nskip, taken, ntaken, warn_subpath);
    free(mounts);
    return rc;
}

static int plan(struct inject__ctx *x, const struct mount *mounts, size_t nm, size_t nvol,
                const char *const *skip, size_t nskip, const char *const *taken, size_t ntaken,
                int warn_subpath)
{
    size_t vi = 0;
    x->mirrors = calloc(nvol ? nvol : 1, sizeof *x->mirrors);
    if (!x->mirrors) return -ENOMEM;
    const cJSON *vol;
    cJSON_ArrayForEach(vol, x->volumes)
    {
        size_t idx = vi++;
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
        int done = 0; /* already mirrored, or a second volume of that name */
        for (size_t s = 0; s < nskip; s++) done |= strcmp(skip[s], vname) == 0;
        for (size_t k = 0; k < x->nmirrors; k++) done |= strcmp(x->mirrors[k].volume, vname) == 0;
        int mirrorable = inject__is_mirrorable(vol);
        int token_content = !mirrorable && is_token_volume(vol) && token_volume_has_content(vol);
        if (done || (!mirrorable && !token_content)) continue;

        const char *chosen = NULL;
        for (size_t i = 0; i < nm; i++) {
            const struct mount *m = &mounts[i];
            if (!m->name || strcmp(m->name, vname) != 0) continue;
            if (m->sub) {
                if (warn_subpath && mirrorable)
                    inject__warn(x,
                                 "container %s mounts volume %s with subPath at %s: subPath "
                                 "mounts never update",
                                 m->app->name, vname, m->path ? m->path : "?");
                continue;
            }
            if (!chosen && m->path) chosen = m->path;
        }
        if (!chosen) continue;
        if (token_content) {
            inject__warn(x,
                         "volume %s is not watched: it holds a service-account token, which "
                         "rotates hourly",
                         vname);
            continue;
        }
        if (!inject__is_dns_label(vname)) { /* the API server rejects the pod anyway */
            inject__warn(x, "volume name \"%.64s\" is not a DNS label: not watched", vname);
            continue;
        }
        char by[160] = "";
        char *clean = inject__clean_path(chosen);
        if (!clean) return -ENOMEM;
        const char *why = mirror_clash(x, clean, taken, ntaken, by, sizeof by);
        size_t cl = strlen(chosen); /* a trailing '/' changes nothing the agent sees */
        while (cl > 1 && chosen[cl - 1] == '/') cl--;
        if (!why && (strlen(clean) != cl || strncmp(clean, chosen, cl) != 0))
            inject__warn(x, "volume %s: mountPath %s is %s once cleaned; mirrored there", vname,
                         chosen, clean);
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
        if (x->oom) return -ENOMEM;
        x->nmirrors++;
        if (warn_unreadable(x, vol, vname, idx) < 0) return -EINVAL;
    }
    return 0;
}

/* ---- env ---- */

/* A ConfigMap/Secret key as the API server accepts it (IsConfigMapKey):
 * [-._a-zA-Z0-9]+, at most 253, not "." or "..", not starting with "..". */
static int is_config_key(const char *k)
{
    size_t n = strlen(k);
    if (n == 0 || n > 253 || strcmp(k, ".") == 0 || strncmp(k, "..", 2) == 0) return 0;
    for (const char *p = k; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '.' || *p == '_'))
            return 0;
    return 1;
}

/* Records one reference: key NULL = the whole object (envFrom). */
static int record_ref(struct inject__ctx *x, const struct inject__app *a, int secret,
                      const char *name, const char *key, int optional)
{
    const char *kind = secret ? "secret" : "configMap";
    if (!name || !inject__is_dns_subdomain(name)) {
        inject__warn(x, "container %s: %s name \"%.80s\" is not a valid name: not watched", a->name,
                     kind, name ? name : "");
        return x->oom ? -ENOMEM : 0;
    }
    if (key && !is_config_key(key)) {
        inject__warn(x, "container %s: key \"%.80s\" of %s %s is not a valid key: not watched",
                     a->name, key, kind, name);
        return x->oom ? -ENOMEM : 0;
    }
    struct inject__envref *e = NULL;
    for (size_t i = 0; i < x->nenvs && !e; i++)
        if (x->envs[i].secret == secret && strcmp(x->envs[i].name, name) == 0) e = &x->envs[i];
    if (!e) {
        struct inject__envref *nv = realloc(x->envs, (x->nenvs + 1) * sizeof *nv);
        if (!nv) return -ENOMEM;
        x->envs = nv;
        e = &x->envs[x->nenvs++];
        memset(e, 0, sizeof *e);
        e->secret = secret;
        e->name = name;
    }
    e->optional |= optional;
    if (!key) {
        e->whole = 1;
        return 0;
    }
    for (size_t i = 0; i < e->nkeys; i++)
        if (strcmp(e->keys[i], key) == 0) return 0;
    const char **nk = realloc(e->keys, (e->nkeys + 1) * sizeof *nk);
    if (!nk) return -ENOMEM;
    e->keys = nk;
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

/* 1 if name is a volume of the pod, the podinfo volume or an env volume
 * named before index upto. */
static int name_taken(const struct inject__ctx *x, const char *name, size_t upto)
{
    if (strcmp(name, INJECT__PODINFO_VOLUME) == 0 || inject__volume(x, name)) return 1;
    for (size_t i = 0; i < upto; i++)
        if (x->envs[i].volume && strcmp(x->envs[i].volume, name) == 0) return 1;
    return 0;
}

/* Names env volume i: the plain name, or the cut and hashed one. */
static int name_env_volume(struct inject__ctx *x, size_t i)
{
    struct inject__envref *e = &x->envs[i];
    char plain[512], hashed[DNS_LABEL_MAX + 1];
    int n = snprintf(plain, sizeof plain, "%s%s", e->secret ? ENV_SECRET_PREFIX : ENV_CM_PREFIX,
                     e->name);
    for (char *p = plain; *p; p++)
        if (*p == '.') *p = '-';
    const char *pick = NULL;
    if (n <= DNS_LABEL_MAX && !name_taken(x, plain, i)) {
        pick = plain;
    } else {
        unsigned char md[SHA256_DIGEST_LENGTH];
        SHA256((const unsigned char *)e->name, strlen(e->name), md);
        int cut = n > DNS_LABEL_MAX - 9 ? DNS_LABEL_MAX - 9 : n;
        snprintf(hashed, sizeof hashed, "%.*s-%02x%02x%02x%02x", cut, plain, md[0], md[1], md[2],
                 md[3]);
        if (!name_taken(x, hashed, i)) pick = hashed;
    }
    if (!pick) {
        snprintf(x->err, x->errlen, "cannot name the env volume of %s %s: %s is taken",
                 e->secret ? "secret" : "configmap", e->name, hashed);
        return -EEXIST;
    }
    e->volume = strdup(pick);
    e->mount_path = inject__printf(x, INJECT__OWN_ROOT "/env/%s/%s",
                                   e->secret ? "secret" : "configmap", e->name);
    return e->volume && e->mount_path ? 0 : -ENOMEM;
}

int inject__plan_env(struct inject__ctx *x)
{
    for (size_t i = 0; i < x->napps; i++) {
        int rc = scan_app_env(x, &x->apps[i]);
        if (rc < 0) return rc;
        if (x->oom) return -ENOMEM;
    }
    for (size_t i = 0; i < x->nenvs; i++) {
        struct inject__envref *e = &x->envs[i];
        if (e->nkeys > 1) qsort(e->keys, e->nkeys, sizeof *e->keys, cmp_str);
        int rc = name_env_volume(x, i);
        if (rc < 0) return rc;
    }
    return 0;
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
    x->nenvs = 0;
}
