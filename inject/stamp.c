/*
 * stamp.c - the render-time rollout hash (see stamp.h).
 *
 * The steps mirror what happens in the pod:
 *   1. the agent's configuration: the sidecar's args after "run" are the
 *      flag layer, the template's reload-agent.io/ annotations the
 *      annotation layer when the sidecar mounts the downward-API
 *      annotations file the agent reads (the injected /etc/podinfo),
 *      cfg_build judges both;
 *   2. the files: every volume the sidecar mounts at or under a watch root
 *      (or whose mount holds one) is laid out as the kubelet's AtomicWriter
 *      writes it (docs/kubernetes-api.md#the-kubelets-atomicwriter): a ConfigMap's data and
 *      binaryData keys, a Secret's base64-decoded data with stringData over
 *      it, or only the items' key -> path mappings; a projected volume is
 *      the union of its ConfigMap and Secret sources, a later source winning
 *      on the same path; a deeper mount hides what lies under its path; a
 *      volume mounted strictly inside a watch root counts only when
 *      --ignore leaves out its kubelet-private "..*" names (the injector's
 *      --ignore=<mountPath>/..*), and then with its files at their paths
 *      in the container;
 *   3. the logical path of a file is its path in the container (mountPath +
 *      "/" + payload path), which is what the hash's walk gives for a root
 *      at or inside the mount (docs/hash.md, the content hash);
 *   4. each file's class is cfg_action_for's (the agent's own decision:
 *      --ignore, --env-watch roots, rules, --action), and the stamp is the
 *      manifest.sub of hash/hash.h over the rollout-class files
 *      (hash_manifest_from_entries).
 * Anything whose content cannot be known from the input (a downward-API or
 * token source, a volume of another kind, a missing object, a subPath
 * mount) means no stamp, with the reason.
 *
 * Return convention inside this file: 1 = go on, 0 = no stamp (why set),
 * <0 = error (why set).
 */
#include "inject/stamp.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/b64.h"
#include "base/text.h"
#include "config/annotations.h"
#include "config/config.h"
#include "config/rules.h"
#include "hash/hash.h"
#include "inject/cleanpath.h"
#include "inject/transform.h"
#include "kube/k8sname.h"

/* The names of the injector's extra-source volumes start so
 * (inject/volumes.c). */
#define STAMP_EXTRA_VOLUME_PREFIX "reload-agent-extra-"

/* One file of a volume's payload: path relative to the volume. */
struct pfile {
    char *path;
    uint64_t size;
    unsigned char digest[HASH_LEN];
};

struct payload {
    struct pfile *v;
    size_t n, cap;
};

/* One file as the container sees it. */
struct cfile {
    char *path;   /* mountPath + "/" + payload path */
    size_t mount; /* index of the mount it comes from */
    uint64_t size;
    unsigned char digest[HASH_LEN];
};

struct mount {
    char *path; /* mountPath, slashes collapsed, no trailing '/' ("" for "/") */
    const cJSON *vm;
    int relevant; /* the deepest mount holding some watch root */
};

struct ctx {
    const char *ns;
    const struct stamp_sources *src;
    char *why;
    size_t whylen;
};

static int say(struct ctx *c, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int say(struct ctx *c, int rc, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    ra_one_line(c->why, c->whylen, tmp); /* names from the input: base/text.h's policy */
    return rc;
}
#define NOSTAMP(c, ...) say((c), 0, __VA_ARGS__)
#define BAD(c, ...) say((c), -EINVAL, __VA_ARGS__)
#define NOMEM(c) say((c), -ENOMEM, "out of memory")

static void payload_free(struct payload *p)
{
    for (size_t i = 0; i < p->n; i++) free(p->v[i].path);
    free(p->v);
    memset(p, 0, sizeof *p);
}

/* Adds (or, for a path already there, replaces: a later projected source
 * wins) one file. Takes path. */
static int payload_put(struct payload *p, char *path, const void *bytes, size_t len)
{
    struct pfile *f = NULL;
    for (size_t i = 0; i < p->n && !f; i++)
        if (strcmp(p->v[i].path, path) == 0) f = &p->v[i];
    if (f) {
        free(f->path);
    } else {
        if (p->n == p->cap) {
            size_t cap = p->cap ? p->cap * 2 : 8;
            struct pfile *v = realloc(p->v, cap * sizeof *v);
            if (!v) {
                free(path);
                return -ENOMEM;
            }
            p->v = v;
            p->cap = cap;
        }
        f = &p->v[p->n++];
    }
    f->path = path;
    f->size = len;
    hash_bytes(bytes, len, f->digest);
    return 0;
}

/* filepath.Clean of an item path, then the AtomicWriter's validatePath:
 * relative, no ".." element, the first element not starting with "..".
 * Returns the cleaned malloc'd path, or NULL with *bad set (or OOM). */
static char *clean_item_path(const char *p, int *bad)
{
    size_t len = strlen(p);
    char *out = malloc(len + 1);
    size_t o = 0;
    *bad = 0;
    if (!out) return NULL;
    if (len == 0 || len > 4096 || p[0] == '/') goto bad;
    for (const char *s = p; *s;) {
        while (*s == '/') s++;
        const char *e = s;
        while (*e && *e != '/') e++;
        size_t l = (size_t)(e - s);
        if (l == 0) break;
        if (l == 1 && s[0] == '.') {
            s = e;
            continue;
        }
        if ((l == 2 && !strncmp(s, "..", 2)) || l > 255) goto bad;
        if (o == 0 && l >= 2 && !strncmp(s, "..", 2)) goto bad;
        if (o) out[o++] = '/';
        memcpy(out + o, s, l);
        o += l;
        s = e;
    }
    if (o == 0) goto bad;
    out[o] = '\0';
    return out;
bad:
    free(out);
    *bad = 1;
    return NULL;
}

static const char *str_of(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int is_true(const cJSON *o, const char *name)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, name));
}

/* The namespace rule of stamp.h: none matches none; otherwise equal. */
static int same_ns(const char *a, const char *b)
{
    if (a && !*a) a = NULL;
    if (b && !*b) b = NULL;
    if (!a || !b) return !a && !b;
    return strcmp(a, b) == 0;
}

/* The ConfigMap or Secret (kind) called name in the workload's namespace;
 * the last one in the input wins, as a later apply would. */
static const cJSON *find_source(struct ctx *c, const char *kind, const char *name)
{
    const cJSON *found = NULL;
    for (size_t i = 0; c->src && i < c->src->n; i++) {
        const cJSON *o = c->src->objs[i];
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(o, "metadata");
        const char *k = str_of(o, "kind"), *n = str_of(md, "name");
        if (k && n && !strcmp(k, kind) && !strcmp(n, name) &&
            same_ns(str_of(md, "namespace"), c->ns))
            found = o;
    }
    return found;
}

/* The namespace of a ConfigMap or Secret (kind) called name in another
 * namespace than the workload's ("" for none given), or NULL: why a source
 * the input holds does not count. */
static const char *other_namespace(struct ctx *c, const char *kind, const char *name)
{
    for (size_t i = 0; c->src && i < c->src->n; i++) {
        const cJSON *o = c->src->objs[i];
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(o, "metadata");
        const char *k = str_of(o, "kind"), *n = str_of(md, "name"), *ns = str_of(md, "namespace");
        if (k && n && !strcmp(k, kind) && !strcmp(n, name)) return ns ? ns : "";
    }
    return NULL;
}

/* The bytes of key in a source object: ConfigMap data (as is) or
 * binaryData (base64); Secret stringData (as is) over data (base64).
 * Returns 1 and *bytes (malloc'd) / *len, 0 when the key is absent, <0 on a
 * malformed value (why names it). */
static int source_key(struct ctx *c, const cJSON *obj, int secret, const char *what,
                      const char *key, unsigned char **bytes, size_t *len)
{
    const char *plain_field = secret ? "stringData" : "data";
    const char *b64_field = secret ? "data" : "binaryData";
    const cJSON *v =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, plain_field), key);
    /* null is the empty value (Go's JSON decoding leaves "" or nil) */
    if (v) {
        const char *str = cJSON_IsNull(v) ? "" : cJSON_IsString(v) ? v->valuestring : NULL;
        if (!str) return BAD(c, "%s: %s.%s is not a string", what, plain_field, key);
        *len = strlen(str);
        *bytes = malloc(*len + 1);
        if (!*bytes) return NOMEM(c);
        memcpy(*bytes, str, *len + 1);
        return 1;
    }
    v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, b64_field), key);
    if (!v) return 0;
    if (!cJSON_IsString(v) && !cJSON_IsNull(v))
        return BAD(c, "%s: %s.%s is not a string", what, b64_field, key);
    long n = ra_b64_decode(cJSON_IsNull(v) ? "" : v->valuestring, bytes);
    if (n == -ENOMEM) return NOMEM(c);
    if (n < 0) return BAD(c, "%s: %s.%s is not valid base64", what, b64_field, key);
    *len = (size_t)n;
    return 1;
}

/* Checks that a data map of a source is an object of valid keys. */
static int check_map(struct ctx *c, const cJSON *obj, const char *field, const char *what)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, field), *e;
    if (!m || cJSON_IsNull(m)) return 1;
    if (!cJSON_IsObject(m)) return BAD(c, "%s: %s is not an object", what, field);
    cJSON_ArrayForEach(e, m)
    {
        if (!e->string || !k8s_is_configmap_key(e->string))
            return BAD(c, "%s: %s has an invalid key \"%s\"", what, field,
                       e->string ? e->string : "");
    }
    return 1;
}

/* Adds one key of the source to the payload at path (taken). */
static int put_key(struct ctx *c, struct payload *p, const cJSON *obj, int secret, const char *what,
                   const char *key, char *path, int *found)
{
    unsigned char *bytes = NULL;
    size_t len = 0;
    int rc = source_key(c, obj, secret, what, key, &bytes, &len);
    *found = rc == 1;
    if (rc <= 0) {
        free(path);
        return rc < 0 ? rc : 1;
    }
    rc = payload_put(p, path, bytes, len);
    free(bytes);
    return rc < 0 ? NOMEM(c) : 1;
}

/* A configMap or secret volume source (or projected source) into p.
 * src is {name|secretName, items, optional}. */
static int source_payload(struct ctx *c, const cJSON *src, int secret, const char *vol,
                          struct payload *p)
{
    const char *kind = secret ? "Secret" : "ConfigMap";
    const char *name = str_of(src, secret ? "secretName" : "name");
    if (!name && secret) name = str_of(src, "name"); /* projected secret sources use name */
    if (!name)
        return BAD(c, "volume %s: the %s source has no name", vol, secret ? "secret" : "configMap");
    int optional = is_true(src, "optional");
    char what[320];
    snprintf(what, sizeof what, "%s/%s", secret ? "secret" : "configmap", name);
    const cJSON *obj = find_source(c, kind, name);
    if (!obj) {
        /* the kubelet mounts an empty directory for an optional one; an
         * extra source (inject/extra.c) is optional only so that the app
         * starts without it: one missing from the input is most often
         * kept elsewhere, and its content is not known */
        if (optional && strncmp(vol, STAMP_EXTRA_VOLUME_PREFIX, strlen(STAMP_EXTRA_VOLUME_PREFIX)))
            return 1;
        const char *other = other_namespace(c, kind, name);
        if (other)
            return NOSTAMP(c,
                           "%s is not in the input for namespace %s: the input has it in "
                           "namespace %s",
                           what, c->ns && *c->ns ? c->ns : "(none)", *other ? other : "(none)");
        return NOSTAMP(c, "%s is not in the input", what);
    }
    /* the plain map (as is) and the base64 one; source_key gives a key's
     * precedence (a Secret's stringData over data: the API server merges
     * it so) */
    const char *fields[2] = {"data", secret ? "stringData" : "binaryData"};
    for (int i = 0; i < 2; i++) {
        int rc = check_map(c, obj, fields[i], what);
        if (rc <= 0) return rc;
    }
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(src, "items"), *it;
    if (items && !cJSON_IsNull(items)) {
        if (!cJSON_IsArray(items)) return BAD(c, "volume %s: items is not an array", vol);
        cJSON_ArrayForEach(it, items)
        {
            const char *key = str_of(it, "key"), *path = str_of(it, "path");
            if (!key || !path)
                return BAD(c, "volume %s: an item of %s lacks key or path", vol, what);
            int bad;
            char *cp = clean_item_path(path, &bad);
            if (!cp)
                return bad ? BAD(c,
                                 "volume %s: item path \"%s\" of %s is not a valid "
                                 "relative path",
                                 vol, path, what)
                           : NOMEM(c);
            int found, rc = put_key(c, p, obj, secret, what, key, cp, &found);
            if (rc <= 0) return rc;
            if (!found && !optional)
                return NOSTAMP(c, "%s has no key %s (volume %s items): the kubelet cannot mount it",
                               what, key, vol);
        }
        return 1;
    }
    /* every key of both maps */
    for (int i = 0; i < 2; i++) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, fields[i]), *e;
        if (!cJSON_IsObject(m)) continue;
        cJSON_ArrayForEach(e, m)
        {
            char *path = strdup(e->string);
            if (!path) return NOMEM(c);
            int found, rc = put_key(c, p, obj, secret, what, e->string, path, &found);
            if (rc <= 0) return rc;
        }
    }
    return 1;
}

/* The kind of a volume: its one field besides name. */
static const char *volume_kind(const cJSON *vol)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, vol)
    {
        if (e->string && strcmp(e->string, "name") != 0) return e->string;
    }
    return "unknown";
}

/* Lays out the volume called name as the kubelet writes it. */
static int volume_payload(struct ctx *c, const cJSON *spec, const char *name, struct payload *p)
{
    const cJSON *vols = cJSON_GetObjectItemCaseSensitive(spec, "volumes"), *v, *vol = NULL;
    cJSON_ArrayForEach(v, vols)
    {
        const char *n = str_of(v, "name");
        if (n && !strcmp(n, name)) vol = v;
    }
    if (!vol)
        return BAD(c, "the sidecar mounts volume %s, which spec.volumes does not define", name);
    const cJSON *s;
    if ((s = cJSON_GetObjectItemCaseSensitive(vol, "configMap")))
        return source_payload(c, s, 0, name, p);
    if ((s = cJSON_GetObjectItemCaseSensitive(vol, "secret")))
        return source_payload(c, s, 1, name, p);
    if ((s = cJSON_GetObjectItemCaseSensitive(vol, "projected"))) {
        const cJSON *sources = cJSON_GetObjectItemCaseSensitive(s, "sources"), *src;
        if (sources && !cJSON_IsArray(sources))
            return BAD(c, "volume %s: projected.sources is not an array", name);
        cJSON_ArrayForEach(src, sources)
        {
            const cJSON *x;
            int rc;
            if ((x = cJSON_GetObjectItemCaseSensitive(src, "configMap")))
                rc = source_payload(c, x, 0, name, p);
            else if ((x = cJSON_GetObjectItemCaseSensitive(src, "secret")))
                rc = source_payload(c, x, 1, name, p);
            else
                return NOSTAMP(c,
                               "projected volume %s has a %s source: its content is only "
                               "known in the pod",
                               name, volume_kind(src));
            if (rc <= 0) return rc;
        }
        return 1;
    }
    return NOSTAMP(c,
                   "volume %s (%s) under a watch root is not a ConfigMap, Secret or projected "
                   "volume: its content is only known in the pod",
                   name, volume_kind(vol));
}

/* mountPath as the container runtime reads it (cleaned: inject_clean_path),
 * "" for "/". */
static char *norm_mount(const char *p)
{
    char *o = inject_clean_path(p);
    if (o && strcmp(o, "/") == 0) o[0] = '\0';
    return o;
}

/* The reload-agent sidecar: a native sidecar (initContainers) or, on old
 * clusters, a container. */
static const cJSON *find_sidecar(const cJSON *spec)
{
    const char *lists[] = {"initContainers", "containers"};
    for (int l = 0; l < 2; l++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(spec, lists[l]), *x;
        cJSON_ArrayForEach(x, a)
        {
            const char *n = str_of(x, "name");
            if (n && !strcmp(n, INJECT_CONTAINER)) return x;
        }
    }
    return NULL;
}

/* The agent's flags: the sidecar's command (its argv[0] dropped) then its
 * args, after the "run" subcommand (run is also the default). */
static int sidecar_flags(struct ctx *c, const cJSON *sc, struct cfg_layer *flags)
{
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(sc, "command");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(sc, "args");
    const cJSON *lists[2] = {cmd, args}, *x;
    size_t n = 0;
    for (int l = 0; l < 2; l++) {
        if (lists[l] && !cJSON_IsNull(lists[l]) && !cJSON_IsArray(lists[l]))
            return BAD(c, "the sidecar's %s is not an array", l ? "args" : "command");
        n += (size_t)cJSON_GetArraySize(lists[l]);
    }
    char **argv = calloc(n + 1, sizeof *argv);
    size_t argc = 0;
    if (!argv) return NOMEM(c);
    for (int l = 0; l < 2; l++) {
        int idx = 0;
        cJSON_ArrayForEach(x, lists[l])
        {
            if (!cJSON_IsString(x)) {
                free(argv);
                return BAD(c, "the sidecar's %s[%d] is not a string", l ? "args" : "command", idx);
            }
            if (!(l == 0 && idx == 0)) argv[argc++] = x->valuestring;
            idx++;
        }
    }
    for (size_t i = 0; i < argc; i++)
        if (strstr(argv[i], "$(")) {
            int rc = NOSTAMP(c,
                             "the sidecar's args use $(VAR) expansion (%s): only the pod "
                             "knows the result",
                             argv[i]);
            free(argv);
            return rc;
        }
    size_t first = 0;
    if (argc > 0 && !strcmp(argv[0], "run"))
        first = 1;
    else if (argc > 0 && argv[0][0] != '-') {
        int rc = NOSTAMP(c, "the sidecar runs \"%s\", not the run subcommand", argv[0]);
        free(argv);
        return rc;
    }
    char err[512];
    int help = 0;
    int rc = cfg_parse_args((int)(argc - first), argv + first, flags, &help, err, sizeof err);
    free(argv);
    if (rc < 0) return NOSTAMP(c, "the sidecar's args: %s", err);
    if (help) return NOSTAMP(c, "the sidecar's args ask for --help");
    return 1;
}

/* 1 if the pod gives the agent its annotations file: a downwardAPI volume
 * (or projected downwardAPI source) item with fieldRef metadata.annotations
 * at the file's path under one of the sidecar's mounts. */
static int has_annotations_file(const cJSON *spec, const cJSON *sc, const char *file)
{
    const cJSON *vm, *v;
    cJSON_ArrayForEach(vm, cJSON_GetObjectItemCaseSensitive(sc, "volumeMounts"))
    {
        const char *mp = str_of(vm, "mountPath"), *name = str_of(vm, "name");
        char *m = mp ? norm_mount(mp) : NULL;
        int under = m && *m && path_rules_is_under(m, file) && strlen(file) > strlen(m);
        const char *rel = under ? file + strlen(m) + 1 : NULL;
        free(m);
        if (!under || !name || str_of(vm, "subPath") || str_of(vm, "subPathExpr")) continue;
        cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(spec, "volumes"))
        {
            const char *vn = str_of(v, "name");
            if (!vn || strcmp(vn, name) != 0) continue;
            /* the downwardAPI item lists: the volume's, or its projected sources' */
            const cJSON *lists[16], *src;
            size_t nl = 0;
            lists[nl++] = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(v, "downwardAPI"), "items");
            cJSON_ArrayForEach(src,
                               cJSON_GetObjectItemCaseSensitive(
                                   cJSON_GetObjectItemCaseSensitive(v, "projected"), "sources"))
            {
                if (nl < sizeof lists / sizeof lists[0])
                    lists[nl++] = cJSON_GetObjectItemCaseSensitive(
                        cJSON_GetObjectItemCaseSensitive(src, "downwardAPI"), "items");
            }
            for (size_t l = 0; l < nl; l++) {
                const cJSON *it;
                cJSON_ArrayForEach(it, lists[l])
                {
                    const char *path = str_of(it, "path");
                    const char *field =
                        str_of(cJSON_GetObjectItemCaseSensitive(it, "fieldRef"), "fieldPath");
                    int bad;
                    char *cp = path ? clean_item_path(path, &bad) : NULL;
                    int hit =
                        cp && field && !strcmp(cp, rel) && !strcmp(field, "metadata.annotations");
                    free(cp);
                    if (hit) return 1;
                }
            }
        }
    }
    return 0;
}

/* The template's annotations as the pod's downward-API file will hold them. */
static int template_annots(struct ctx *c, const cJSON *tmpl, struct cfg_layer *l)
{
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(tmpl, "metadata"), "annotations"),
                *e;
    struct annot_set a = {0};
    if (!ann || cJSON_IsNull(ann)) return 1;
    if (!cJSON_IsObject(ann)) return BAD(c, "metadata.annotations is not an object");
    cJSON_ArrayForEach(e, ann)
    {
        if (!cJSON_IsString(e))
            return BAD(c, "metadata.annotations.%s is not a string", e->string ? e->string : "");
    }
    if (inject_annot_set(ann, &a) < 0) return NOMEM(c);
    int rc = 1;
    char err[512];
    if (cfg_layer_from_annotations(&a, l, err, sizeof err) < 0)
        rc = NOSTAMP(c, "the template's annotations: %s", err);
    free(a.v);
    return rc;
}

/* 1 if --ignore leaves out the kubelet's private names at the top of a
 * volume mounted at path ("..data" and the timestamped directory, and what
 * lies in them), 0 if not, -ENOMEM. */
static int private_ignored(const struct config *cfg, const char *path)
{
    static const char *const NAMES[] = {"..data", "..data/k", "..2006_01_02_15_04_05.000000000",
                                        "..2006_01_02_15_04_05.000000000/k"};
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++) {
        size_t len = strlen(path) + strlen(NAMES[i]) + 2;
        char *probe = malloc(len);
        if (!probe) return -ENOMEM;
        snprintf(probe, len, "%s/%s", path, NAMES[i]);
        int ig = cfg_is_ignored(cfg, probe);
        free(probe);
        if (!ig) return 0;
    }
    return 1;
}

static int cmp_cfile(const void *a, const void *b)
{
    return strcmp(((const struct cfile *)a)->path, ((const struct cfile *)b)->path);
}

/* What steps 2-4 build: the sidecar's mounts and the files laid out in
 * them, freed in one place (layout_free). */
struct layout {
    const char **roots; /* the watch roots (cfg_watch_roots) */
    size_t nroots;
    struct mount *mounts;
    size_t nm;
    struct cfile *files;
    size_t nf, capf;
};

static void layout_free(struct layout *l)
{
    for (size_t i = 0; i < l->nf; i++) free(l->files[i].path);
    free(l->files);
    for (size_t i = 0; i < l->nm; i++) free(l->mounts[i].path);
    free(l->mounts);
    free(l->roots);
    memset(l, 0, sizeof *l);
}

/* The agent's logical paths start with the root as written: the
 * container's paths only where it is clean. */
static int roots_are_clean(struct ctx *c, const struct layout *l)
{
    if (l->nroots == 0) return NOSTAMP(c, "the sidecar watches nothing");
    for (size_t r = 0; r < l->nroots; r++) {
        size_t n = strlen(l->roots[r]);
        char *root = strdup(l->roots[r]);
        if (!root) return NOMEM(c);
        while (n > 1 && root[n - 1] == '/') root[--n] = '\0';
        int clean = inject_is_clean_path(root);
        free(root);
        if (!clean)
            return NOSTAMP(c,
                           "watch root %s is not a clean path: the agent's paths would not be "
                           "the container's",
                           l->roots[r]);
    }
    return 1;
}

/* The sidecar's volumeMounts, cleaned, into l->mounts. */
static int sidecar_mounts(struct ctx *c, const cJSON *sc, struct layout *l)
{
    const cJSON *vms = cJSON_GetObjectItemCaseSensitive(sc, "volumeMounts"), *vm;
    if (vms && !cJSON_IsNull(vms) && !cJSON_IsArray(vms))
        return BAD(c, "the sidecar's volumeMounts is not an array");
    if (!(l->mounts = calloc((size_t)cJSON_GetArraySize(vms) + 1, sizeof *l->mounts)))
        return NOMEM(c);
    cJSON_ArrayForEach(vm, vms)
    {
        const char *mp = str_of(vm, "mountPath");
        if (!mp || !str_of(vm, "name"))
            return BAD(c, "a volumeMount of the sidecar lacks name or mountPath");
        struct mount *m = &l->mounts[l->nm];
        if (!(m->path = norm_mount(mp))) return NOMEM(c);
        m->vm = vm;
        l->nm++;
        for (size_t j = 0; j + 1 < l->nm; j++)
            if (!strcmp(l->mounts[j].path, m->path))
                return BAD(c, "the sidecar mounts two volumes at %s", mp);
    }
    return 1;
}

/* Every root lies in a mount: marks the deepest mount holding each root
 * relevant. A mount strictly inside a root is entered by the walk below
 * the root's top level, where the kubelet's private ..data and timestamped
 * names are not skipped: reproducible only when --ignore leaves them out
 * (the injector adds <mountPath>/..* for a nested mirror); then the walk
 * yields exactly that volume's files under their logical paths in the
 * container, the same ones a root at the inner mount gives (counted
 * once), and it is relevant too. */
static int roots_to_mounts(struct ctx *c, const struct config *cfg, struct layout *l)
{
    for (size_t r = 0; r < l->nroots; r++) {
        const char *root = l->roots[r];
        size_t best = l->nm;
        for (size_t i = 0; i < l->nm; i++) {
            struct mount *m = &l->mounts[i];
            if (path_rules_is_under(root, m->path) && !path_rules_is_under(m->path, root)) {
                int ig = private_ignored(cfg, m->path);
                if (ig < 0) return NOMEM(c);
                if (!ig)
                    return NOSTAMP(c,
                                   "volume %s is mounted at %s, inside watch root %s: the hash "
                                   "there includes the kubelet's private timestamped names "
                                   "(unless --ignore=%s/..* leaves them out)",
                                   str_of(m->vm, "name"), str_of(m->vm, "mountPath"), root,
                                   m->path);
                m->relevant = 1;
            }
            if (path_rules_is_under(m->path, root) &&
                (best == l->nm || strlen(m->path) > strlen(l->mounts[best].path)))
                best = i;
        }
        if (best == l->nm)
            return NOSTAMP(c,
                           "watch root %s is not inside a volume the sidecar mounts: its content "
                           "is only known in the pod",
                           root);
        l->mounts[best].relevant = 1;
    }
    return 1;
}

/* Adds the payload of mount mi (its volume laid out by volume_payload) to
 * l->files at its paths in the container. */
static int add_files(struct ctx *c, struct layout *l, size_t mi, const struct payload *p)
{
    const char *mp = l->mounts[mi].path;
    for (size_t k = 0; k < p->n; k++) {
        if (l->nf == l->capf) {
            size_t cap = l->capf ? l->capf * 2 : 16;
            struct cfile *v = realloc(l->files, cap * sizeof *v);
            if (!v) return NOMEM(c);
            l->files = v;
            l->capf = cap;
        }
        struct cfile *f = &l->files[l->nf];
        size_t len = strlen(mp) + 1 + strlen(p->v[k].path) + 1;
        if (!(f->path = malloc(len))) return NOMEM(c);
        snprintf(f->path, len, "%s/%s", mp, p->v[k].path);
        f->mount = mi;
        f->size = p->v[k].size;
        memcpy(f->digest, p->v[k].digest, HASH_LEN);
        l->nf++;
    }
    return 1;
}

/* Lays out every relevant mount's volume as the kubelet writes it. */
static int lay_out(struct ctx *c, const cJSON *spec, struct layout *l)
{
    for (size_t i = 0; i < l->nm; i++) {
        if (!l->mounts[i].relevant) continue;
        const cJSON *vm = l->mounts[i].vm;
        const char *vname = str_of(vm, "name");
        if (str_of(vm, "subPath") || str_of(vm, "subPathExpr"))
            return NOSTAMP(c, "the sidecar mounts volume %s with subPath", vname);
        struct payload p = {0};
        int rc = volume_payload(c, spec, vname, &p);
        if (rc > 0) rc = add_files(c, l, i, &p);
        payload_free(&p);
        if (rc <= 0) return rc;
    }
    return 1;
}

/* A file and a directory of the same volume at one path: the kubelet
 * cannot write that payload. Sorts l->files by path. */
static int check_clashes(struct ctx *c, struct layout *l)
{
    if (l->nf) qsort(l->files, l->nf, sizeof *l->files, cmp_cfile);
    for (size_t i = 0; i + 1 < l->nf; i++) {
        const struct cfile *a = &l->files[i], *b = &l->files[i + 1];
        size_t n = strlen(a->path);
        if (a->mount == b->mount && !strncmp(a->path, b->path, n) &&
            (b->path[n] == '/' || b->path[n] == '\0'))
            return BAD(c, "volume %s: %s is both a file and a directory",
                       str_of(l->mounts[a->mount].vm, "name"), a->path);
    }
    return 1;
}

/* 1 if file f is under some root and not hidden by a deeper mount (which
 * covers what the outer volume has under its path). */
static int is_visible(const struct layout *l, const struct cfile *f)
{
    int visible = 0;
    for (size_t r = 0; r < l->nroots && !visible; r++)
        visible = path_rules_is_under(l->roots[r], f->path);
    const char *mp = l->mounts[f->mount].path;
    for (size_t k = 0; k < l->nm && visible; k++) {
        const char *inner = l->mounts[k].path;
        if (strlen(inner) > strlen(mp) && path_rules_is_under(mp, inner) &&
            path_rules_is_under(inner, f->path))
            visible = 0;
    }
    return visible;
}

/* Each visible file's class by the agent's own decision (cfg_action_for),
 * and the stamp over the rollout-class ones into hex. */
static int classify_and_hash(struct ctx *c, const struct config *cfg, const struct layout *l,
                             char hex[65])
{
    struct hash_entry *ents = calloc(l->nf + 1, sizeof *ents);
    struct hash_manifest m = {0};
    size_t ne = 0, nsub = 0;
    if (!ents) return NOMEM(c);
    for (size_t i = 0; i < l->nf; i++) {
        const struct cfile *f = &l->files[i];
        if (!is_visible(l, f)) continue;
        int a = cfg_action_for(cfg, f->path);
        if (a == CFG_ACTION_IGNORED) continue;
        ents[ne] = (struct hash_entry){.path = f->path,
                                       .size = f->size,
                                       .classes = HASH_CLASS_MAIN |
                                                  (a == ACTION_ROLLOUT ? HASH_CLASS_SUB : 0)};
        memcpy(ents[ne].digest, f->digest, HASH_LEN);
        nsub += a == ACTION_ROLLOUT;
        ne++;
    }
    int rc = 1;
    if (nsub == 0) {
        rc = NOSTAMP(c, "no rollout-class content");
    } else {
        int hr = hash_manifest_from_entries(ents, ne, &m);
        if (hr < 0)
            rc = hr == -ENOMEM ? NOMEM(c) : BAD(c, "two files at one logical path");
        else
            hash_hex(m.sub, hex);
    }
    hash_manifest_free(&m);
    free(ents);
    return rc;
}

/* Steps 2-4 of the header, with the configuration built: each step returns
 * 1 to go on, or what compute returns. */
static int compute(struct ctx *c, const cJSON *spec, const cJSON *sc, const struct config *cfg,
                   char hex[65])
{
    struct layout l = {0};
    l.roots = cfg_watch_roots(cfg, &l.nroots);
    int rc = roots_are_clean(c, &l);
    if (rc > 0) rc = sidecar_mounts(c, sc, &l);
    if (rc > 0) rc = roots_to_mounts(c, cfg, &l);
    if (rc > 0) rc = lay_out(c, spec, &l);
    if (rc > 0) rc = check_clashes(c, &l);
    if (rc > 0) rc = classify_and_hash(c, cfg, &l, hex);
    layout_free(&l);
    return rc;
}

int stamp_compute(const cJSON *tmpl, const char *ns, const struct stamp_sources *src, char hex[65],
                  char *key, size_t keylen, char *why, size_t whylen)
{
    struct ctx c = {.ns = ns, .src = src, .why = why, .whylen = whylen};
    struct cfg_layer flags = {0}, annots = {0};
    struct config cfg;
    int have_cfg = 0, rc;
    if (whylen) why[0] = '\0';
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(tmpl, "spec");
    if (!cJSON_IsObject(tmpl) || !cJSON_IsObject(spec))
        return BAD(&c, "the pod template has no spec object");
    const cJSON *sc = find_sidecar(spec);
    if (!sc) return NOSTAMP(&c, "the pod template has no %s sidecar", INJECT_CONTAINER);
    if (cfg_layer_init(&flags, CFG_SRC_FLAG) < 0 ||
        cfg_layer_init(&annots, CFG_SRC_ANNOTATION) < 0) {
        rc = NOMEM(&c);
        goto out;
    }
    if ((rc = sidecar_flags(&c, sc, &flags)) <= 0) goto out;
    /* The annotation layer: the template's annotations, when the pod gives
     * the agent its downward-API annotations file (--annotations, default
     * the injected /etc/podinfo/annotations; "" turns it off). */
    const char *af = cfg_layer_get(&flags, "annotations");
    if (!af) af = CFG_DEFAULT_ANNOTATIONS_FILE;
    if (*af && has_annotations_file(spec, sc, af) && (rc = template_annots(&c, tmpl, &annots)) <= 0)
        goto out;
    char err[1024];
    if (cfg_build(&flags, &annots, &cfg, err, sizeof err) < 0) {
        rc = NOSTAMP(&c, "the agent's configuration: %s", err);
        goto out;
    }
    have_cfg = 1;
    if (!(cfg_used_actions(&cfg) & ACTION_BIT(ACTION_ROLLOUT))) {
        rc = NOSTAMP(&c, "no rollout-class content (neither --action, a --rule nor --env-action "
                         "with an --env-watch root uses rollout)");
        goto out;
    }
    if (strlen(cfg.hash_annotation) + 1 > keylen) {
        rc = BAD(&c, "the annotation key %s does not fit the caller's buffer", cfg.hash_annotation);
        goto out;
    }
    if ((rc = compute(&c, spec, sc, &cfg, hex)) == 1) {
        memcpy(key, cfg.hash_annotation, strlen(cfg.hash_annotation) + 1);
        if (whylen) why[0] = '\0';
    }
out:
    if (have_cfg) cfg_free(&cfg);
    cfg_layer_free(&flags);
    cfg_layer_free(&annots);
    return rc;
}
