/*
 * owner.c - owner resolution for the rollout action (contract in owner.h),
 * on the one kinds table of kube/kinds.h.
 *
 * The resolution is a small chain of GETs on the kube client: the own
 * pod, then the object its controller ownerReference names, and so on until
 * a workload that can be rolled (or a reason why there is none). The steps
 * themselves (owner__step) do no I/O: they read a reply and name the next
 * object, so tests and the fuzzer drive them directly. Each step checks
 * that the fetched object has the uid the reference promised, so a
 * recreated object of the same name is never mistaken for the owner. All
 * state lives in one struct owner_op that is freed when the callback has
 * run, or by kube's on_cancel when the client is destroyed first.
 */
#include "kube/owner.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/text.h"
#include "kube/k8sname.h"

/* ---- helpers ---- */

static char *xstrdup(const char *s) { return ra_strdup(s ? s : ""); }

static const cJSON *arr_at(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    return cJSON_IsArray(v) ? v : NULL;
}

/* ---- the chain's steps (no I/O) ---- */

/* A controller ownerReference. */
struct ref {
    const struct kinds_kind *ki;                 /* NULL for a kind not in the table */
    const char *kind, *api_version, *name, *uid; /* point into the parsed JSON */
};

static int fail(struct owner__chain *c, enum owner_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct owner__chain *c, enum owner_status st, const char *fmt, ...)
{
    va_list ap;
    char *raw;

    free(c->o->error);
    va_start(ap, fmt);
    if (vasprintf(&raw, fmt, ap) < 0) ra_oom();
    va_end(ap);
    c->o->error = ra_one_line_dup(raw); /* API data in an error: one line (base/text.h) */
    free(raw);
    c->o->status = st;
    return 0;
}

/* Names the next object to GET; child describes who refers to it (taken). */
static int next(struct owner__chain *c, const struct kinds_kind *ki, const char *name,
                const char *uid, char *child)
{
    free(c->child);
    c->child = child;
    if (!name || !k8s_is_dns1123_subdomain(name))
        return fail(c, c->via_ref ? OWNER_NO_ROLLOUT : OWNER_API_ERROR,
                    "%s names %s \"%.253s\", which is not a valid object name", child, ki->kind,
                    name ? name : "");
    free(c->name);
    free(c->expect_uid);
    c->fetching = ki;
    c->name = xstrdup(name);
    c->expect_uid = uid && uid[0] ? xstrdup(uid) : NULL;
    return 1;
}

/* Finds the controller ownerReference of obj. Returns 1 and *ref, 0 if
 * there is none, -1 if it is malformed. */
static int controller_ref(const cJSON *obj, struct ref *ref)
{
    const cJSON *refs = arr_at(kinds__obj_at(obj, "metadata"), "ownerReferences"), *it;

    cJSON_ArrayForEach(it, refs)
    {
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "controller"))) continue;
        ref->kind = kinds__str_at(it, "kind");
        ref->api_version = kinds__str_at(it, "apiVersion");
        ref->name = kinds__str_at(it, "name");
        ref->uid = kinds__str_at(it, "uid");
        if (!ref->kind || !ref->api_version || !ref->name) return -1;
        ref->ki = kinds_find(ref->kind, ref->api_version);
        return 1;
    }
    return 0;
}

static void collect_annotations(struct owner_pod *p, const cJSON *meta)
{
    const cJSON *ann = kinds__obj_at(meta, "annotations"), *it;
    size_t n = 0;

    cJSON_ArrayForEach(it, ann) if (cJSON_IsString(it)) n++;
    if (n == 0) return;
    p->annotation_keys = calloc(n, sizeof *p->annotation_keys);
    p->annotation_values = calloc(n, sizeof *p->annotation_values);
    if (!p->annotation_keys || !p->annotation_values) ra_oom();
    cJSON_ArrayForEach(it, ann)
    {
        if (!cJSON_IsString(it)) continue;
        p->annotation_keys[p->nannotations] = xstrdup(it->string);
        p->annotation_values[p->nannotations++] = xstrdup(it->valuestring);
    }
}

/* 1 if the pod volume named name is one the kubelet updates in place. */
static int is_updating_volume(const cJSON *volumes, const char *name)
{
    static const char *const kinds[] = {"configMap", "secret", "projected", "downwardAPI"};
    const cJSON *v;
    size_t i;

    cJSON_ArrayForEach(v, volumes)
    {
        const char *vn = kinds__str_at(v, "name");

        if (!vn || strcmp(vn, name) != 0) continue;
        for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
            if (kinds__obj_at(v, kinds[i])) return 1;
        return 0;
    }
    return 0;
}

static void collect_subpaths(struct owner_pod *p, const cJSON *spec)
{
    static const char *const lists[] = {"initContainers", "containers"};
    const cJSON *volumes = arr_at(spec, "volumes"), *c, *m;
    size_t i;

    if (!volumes) return;
    for (i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        const cJSON *cs = arr_at(spec, lists[i]);

        cJSON_ArrayForEach(c, cs)
        {
            const cJSON *mounts = arr_at(c, "volumeMounts");

            cJSON_ArrayForEach(m, mounts)
            {
                const char *sp = kinds__str_at(m, "subPath"),
                           *spe = kinds__str_at(m, "subPathExpr");
                const char *vol = kinds__str_at(m, "name"), *mp = kinds__str_at(m, "mountPath");
                struct owner_mount *grown;

                if (!((sp && sp[0]) || (spe && spe[0])) || !vol || !mp) continue;
                if (!is_updating_volume(volumes, vol)) continue;
                grown = realloc(p->subpath_mounts,
                                (p->nsubpath_mounts + 1) * sizeof *p->subpath_mounts);
                if (!grown) ra_oom();
                p->subpath_mounts = grown;
                grown[p->nsubpath_mounts].container = xstrdup(kinds__str_at(c, "name"));
                grown[p->nsubpath_mounts].volume = xstrdup(vol);
                grown[p->nsubpath_mounts].mount_path = xstrdup(mp);
                p->nsubpath_mounts++;
            }
        }
    }
}

static int unsupported(struct owner__chain *c, const struct ref *ref)
{
    char kinds[160];

    kinds_rollable_list(kinds, sizeof kinds);
    return fail(c, OWNER_NO_ROLLOUT,
                "%s is controlled by %s %s (%s), which cannot be rolled: only %s can; use "
                "--action restart or signal",
                c->child, ref->kind, ref->name, ref->api_version, kinds);
}

static int on_pod(struct owner__chain *c, const cJSON *pod)
{
    const cJSON *meta = kinds__obj_at(pod, "metadata");
    struct owner_pod *p = &c->o->pod;
    struct ref ref;
    int has;

    p->name = xstrdup(kinds__str_at(meta, "name"));
    p->namespace_ = xstrdup(kinds__str_at(meta, "namespace"));
    p->uid = xstrdup(kinds__str_at(meta, "uid"));
    collect_annotations(p, meta);
    collect_subpaths(p, kinds__obj_at(pod, "spec"));
    c->o->have_pod = 1;
    has = controller_ref(pod, &ref);
    if (has < 0)
        return fail(c, OWNER_API_ERROR, "%s has a malformed controller ownerReference", c->child);
    if (has == 0)
        return fail(c, OWNER_NO_ROLLOUT,
                    "%s: the pod has no controller: nothing to roll; use "
                    "restart or signal",
                    c->child);
    if (!ref.ki || !ref.ki->may_own_pod) return unsupported(c, &ref);
    return next(c, ref.ki, ref.name, ref.uid, xstrdup(c->child));
}

/* A kind that is not a workload: the chain goes on to its controller. */
static int on_intermediate(struct owner__chain *c, const cJSON *obj)
{
    const char *kind = c->fetching->kind;
    struct ref ref;
    int has = controller_ref(obj, &ref);

    if (has < 0)
        return fail(c, OWNER_API_ERROR, "%s %s has a malformed controller ownerReference", kind,
                    c->name);
    if (has == 0)
        return fail(c, OWNER_NO_ROLLOUT, "%s %s has no controller: %s", kind, c->name,
                    "patching it does not replace pods");
    free(c->child);
    c->child = ra_asprintf("%s %s", kind, c->name);
    if (!ref.ki || !ref.ki->may_own_replicaset) return unsupported(c, &ref);
    return next(c, ref.ki, ref.name, ref.uid, xstrdup(c->child));
}

/* A kind that cannot roll (a Job): say why, naming its controller. */
static int on_not_rollable(struct owner__chain *c, const cJSON *obj)
{
    const struct kinds_kind *ki = c->fetching;
    struct ref ref;
    int has = controller_ref(obj, &ref);

    if (has > 0 && ref.ki)
        return fail(c, OWNER_NO_ROLLOUT, "%s belongs to %s %s of %s %s: %s", c->child, ki->kind,
                    c->name, ref.ki->kind, ref.name, ki->why_not);
    return fail(c, OWNER_NO_ROLLOUT, "%s belongs to %s %s: %s", c->child, ki->kind, c->name,
                ki->why_not);
}

static void set_via(struct owner_info *o, const struct kinds_kind *ki, const char *name,
                    const cJSON *w)
{
    const char *av = kinds__str_at(w, "apiVersion");

    o->via_kind = ki->kind;
    o->via_name = xstrdup(name);
    o->via_uid = xstrdup(kinds__str_at(kinds__obj_at(w, "metadata"), "uid"));
    o->via_api_version = av && av[0] ? xstrdup(av) : ra_asprintf("%s/%s", ki->group, ki->version);
}

static int on_workload(struct owner__chain *c, const char *ns, const cJSON *w)
{
    const struct kinds_kind *ki = c->fetching;
    struct owner_info *o = c->o;
    const char *av = kinds__str_at(w, "apiVersion"), *ref_name;
    int ref = ki->workload_ref && !c->via_ref ? kinds_workload_ref(w, &ref_name) : 0;

    if (ref != 0) { /* a Rollout whose template lives in spec.workloadRef */
        char buf[600], *child = ra_asprintf("%s %s's spec.workloadRef", ki->kind, c->name);
        int blocks;

        set_via(o, ki, c->name, w);
        c->via_ref = 1;
        if (ref > 0) return next(c, kinds_named("Deployment"), ref_name, NULL, child);
        free(c->child);
        c->child = child;
        return fail(c, OWNER_NO_ROLLOUT, "%s %s: %s", ki->kind, c->name,
                    kinds_not_rolling(ki, w, buf, sizeof buf, &blocks));
    }
    o->ki = ki;
    o->kind = ki->kind;
    o->resource = ki->resource;
    o->group = ki->group;
    o->patch_type = ki->patch_type;
    o->name = xstrdup(c->name);
    o->namespace_ = xstrdup(ns);
    o->uid = xstrdup(kinds__str_at(kinds__obj_at(w, "metadata"), "uid"));
    o->api_version = av && av[0] ? xstrdup(av) : ra_asprintf("%s/%s", ki->group, ki->version);
    o->path = owner__chain_path(c, ns);
    o->status = OWNER_OK;
    return 0;
}

void owner__chain_init(struct owner__chain *c, const char *pod_name)
{
    memset(c, 0, sizeof *c);
    c->o = calloc(1, sizeof *c->o);
    if (!c->o) ra_oom();
    c->name = xstrdup(pod_name);
    c->child = ra_asprintf("pod %s", c->name);
}

char *owner__chain_path(const struct owner__chain *c, const char *ns)
{
    const struct kinds_kind *ki = c->fetching;

    if (!ki) return ra_asprintf("/api/v1/namespaces/%s/pods/%s", ns, c->name);
    return ra_asprintf("/apis/%s/%s/namespaces/%s/%s/%s", ki->group, ki->version, ns, ki->resource,
                       c->name);
}

int owner__step(struct owner__chain *c, const char *ns, long status, const char *error,
                const char *body, size_t body_len)
{
    const char *what = c->fetching ? c->fetching->kind : "pod";
    /* the referenced Deployment that cannot be read blocks the rollout */
    enum owner_status unreadable = c->via_ref ? OWNER_NO_ROLLOUT : OWNER_API_ERROR;
    const char *uid;
    cJSON *j;
    int r;

    if (error || status != 200) {
        if (error)
            return fail(c, unreadable, "cannot get %s %s%s%s: %s", what, c->name,
                        c->via_ref ? " named by " : "", c->via_ref ? c->child : "", error);
        return fail(c, unreadable, "cannot get %s %s%s%s: unexpected HTTP status %ld", what,
                    c->name, c->via_ref ? " named by " : "", c->via_ref ? c->child : "", status);
    }
    j = cJSON_ParseWithLength(body ? body : "", body_len);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return fail(c, unreadable, "cannot get %s %s: the reply is not a JSON object", what,
                    c->name);
    }
    uid = kinds__str_at(kinds__obj_at(j, "metadata"), "uid");
    if (c->expect_uid && (!uid || strcmp(uid, c->expect_uid) != 0))
        r = fail(c, OWNER_API_ERROR, "%s %s has uid %s, but %s references uid %s (recreated?)",
                 what, c->name, uid ? uid : "(none)", c->child, c->expect_uid);
    else if (!c->fetching)
        r = on_pod(c, j);
    else if (c->fetching->follows_controller)
        r = on_intermediate(c, j);
    else if (!c->fetching->can_roll)
        r = on_not_rollable(c, j);
    else
        r = on_workload(c, ns, j);
    cJSON_Delete(j);
    return r;
}

void owner__chain_free(struct owner__chain *c)
{
    free(c->name);
    free(c->expect_uid);
    free(c->child);
    owner_info_free(c->o);
    memset(c, 0, sizeof *c);
}

/* ---- the requests ---- */

struct owner_op {
    struct kube *k;
    owner_cb cb;
    void *ud;
    struct owner__chain c;
};

static void op_cancel(void *ud)
{
    struct owner_op *op = ud;

    owner__chain_free(&op->c);
    free(op);
}

static void op_done(struct owner_op *op)
{
    struct owner_info *o = op->c.o;

    op->c.o = NULL;
    owner__chain_free(&op->c);
    op->cb(op->ud, o);
    free(op);
}

static void on_reply(void *ud, const struct kube_resp *r);

/* GETs what the chain names next; returns kube_request's result. */
static int fetch(struct owner_op *op)
{
    char *path = owner__chain_path(&op->c, kube_namespace(op->k));
    const struct kinds_kind *ki = op->c.fetching;
    struct kube_req req = {.verb = "get",
                           .method = "GET",
                           .path = path,
                           .resource = ki ? ki->resource : "pods",
                           .group = ki ? ki->group : "",
                           .on_cancel = op_cancel};
    int r = kube_request(op->k, &req, on_reply, op);

    free(path);
    return r;
}

static void on_reply(void *ud, const struct kube_resp *r)
{
    struct owner_op *op = ud;
    int rc;

    if (!owner__step(&op->c, kube_namespace(op->k), r->ok ? r->status : 0,
                     r->error ? r->error
                     : r->ok  ? NULL
                              : "no response",
                     r->body, r->body_len)) {
        op_done(op);
        return;
    }
    if ((rc = fetch(op)) < 0) {
        fail(&op->c, OWNER_API_ERROR, "cannot get %s %s: %s", op->c.fetching->kind, op->c.name,
             strerror(-rc));
        op_done(op);
    }
}

/* ---- public ---- */

int owner_resolve(struct kube *k, owner_cb cb, void *ud)
{
    struct owner_op *op = calloc(1, sizeof *op);
    int r;

    if (!op) ra_oom();
    op->k = k;
    op->cb = cb;
    op->ud = ud;
    owner__chain_init(&op->c, kube_pod_name(k));
    r = fetch(op);
    if (r < 0) op_cancel(op);
    return r;
}

const char *owner_pod_annotation(const struct owner_info *o, const char *key)
{
    size_t i;

    for (i = 0; i < o->pod.nannotations; i++)
        if (strcmp(o->pod.annotation_keys[i], key) == 0) return o->pod.annotation_values[i];
    return NULL;
}

void owner_info_free(struct owner_info *o)
{
    size_t i;

    if (!o) return;
    for (i = 0; i < o->pod.nannotations; i++) {
        free(o->pod.annotation_keys[i]);
        free(o->pod.annotation_values[i]);
    }
    free(o->pod.annotation_keys);
    free(o->pod.annotation_values);
    for (i = 0; i < o->pod.nsubpath_mounts; i++) {
        free(o->pod.subpath_mounts[i].container);
        free(o->pod.subpath_mounts[i].volume);
        free(o->pod.subpath_mounts[i].mount_path);
    }
    free(o->pod.subpath_mounts);
    free(o->pod.name);
    free(o->pod.namespace_);
    free(o->pod.uid);
    free(o->error);
    free(o->name);
    free(o->namespace_);
    free(o->uid);
    free(o->api_version);
    free(o->path);
    free(o->via_name);
    free(o->via_uid);
    free(o->via_api_version);
    free(o);
}
