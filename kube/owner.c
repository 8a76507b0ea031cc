/*
 * owner.c - owner resolution for the rollout action (contract in owner.h).
 *
 * A small chain of GETs on the kube client: the own pod, then the object
 * its controller ownerReference names, and so on until a workload that can
 * be rolled (or a reason why there is none). Each step checks that the
 * fetched object has the uid the reference promised, so a recreated object
 * of the same name is never mistaken for the owner. All state lives in one
 * struct owner_op that is freed when the callback has run, or by kube's
 * on_cancel when the client is destroyed first.
 */
#include "kube/owner.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

#define STRATEGIC "application/strategic-merge-patch+json"
#define MERGE "application/merge-patch+json"

/* The kinds the chain may visit. */
struct kind_info {
    const char *kind, *group, *version, *resource, *patch_type;
};

static const struct kind_info KINDS[] = {
    { "ReplicaSet", "apps", "v1", "replicasets", NULL },
    { "Deployment", "apps", "v1", "deployments", STRATEGIC },
    { "StatefulSet", "apps", "v1", "statefulsets", STRATEGIC },
    { "DaemonSet", "apps", "v1", "daemonsets", STRATEGIC },
    { "Rollout", "argoproj.io", "v1alpha1", "rollouts", MERGE },
    { "Job", "batch", "v1", "jobs", NULL },
    { "CronJob", "batch", "v1", "cronjobs", NULL },
};

/* A controller ownerReference. */
struct ref {
    const struct kind_info *ki; /* NULL for a kind not in KINDS */
    const char *kind, *api_version, *name, *uid; /* point into the parsed JSON */
};

struct owner_op {
    struct kube *k;
    owner_cb cb;
    void *ud;
    struct owner_info *o;
    const struct kind_info *fetching; /* NULL while the pod is fetched */
    char *name;                       /* of the object being fetched */
    char *expect_uid;                 /* its uid per the reference, or NULL */
    char *child;                      /* "pod P" / "ReplicaSet R": who referenced it */
};

/* ---- helpers ---- */

static char *xstrdup(const char *s) { return ra_strdup(s ? s : ""); }


static const char *str_at(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const cJSON *obj_at(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    return cJSON_IsObject(v) ? v : NULL;
}

static const cJSON *arr_at(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    return cJSON_IsArray(v) ? v : NULL;
}

/* "apps/v1" has group "apps"; "v1" is the core group "". */
static int group_is(const char *api_version, const char *group)
{
    const char *slash = strchr(api_version, '/');
    size_t n = slash ? (size_t)(slash - api_version) : 0;

    return strlen(group) == n && strncmp(api_version, group, n) == 0;
}

static char *object_path(const struct kind_info *ki, const char *ns, const char *name)
{
    return ra_asprintf("/apis/%s/%s/namespaces/%s/%s/%s", ki->group, ki->version, ns, ki->resource,
                     name);
}

/* ---- ending ---- */

static void op_free(struct owner_op *op)
{
    free(op->name);
    free(op->expect_uid);
    free(op->child);
    free(op);
}

static void op_cancel(void *ud)
{
    struct owner_op *op = ud;

    owner_info_free(op->o);
    op_free(op);
}

static void op_done(struct owner_op *op)
{
    op->cb(op->ud, op->o);
    op_free(op);
}

static void op_fail(struct owner_op *op, enum owner_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void op_fail(struct owner_op *op, enum owner_status st, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    if (vasprintf(&op->o->error, fmt, ap) < 0) ra_oom();
    va_end(ap);
    op->o->status = st;
    op_done(op);
}

/* ---- steps ---- */

static void on_reply(void *ud, const struct kube_resp *r);

/* GETs the object named by ref (ki known); child describes who refers to it. */
static void fetch(struct owner_op *op, const struct kind_info *ki, const char *name,
                  const char *uid, char *child)
{
    char *path;
    struct kube_req req = { .verb = "get", .method = "GET", .on_cancel = op_cancel };
    int r;

    free(op->child);
    op->child = child;
    if (!kube_is_object_name(name)) {
        op_fail(op, OWNER_API_ERROR, "%s names %s \"%.253s\", which is not a valid object name",
                child, ki->kind, name);
        return;
    }
    free(op->name);
    free(op->expect_uid);
    op->fetching = ki;
    op->name = xstrdup(name);
    op->expect_uid = uid && uid[0] ? xstrdup(uid) : NULL;
    path = object_path(ki, kube_namespace(op->k), name);
    req.resource = ki->resource;
    req.group = ki->group;
    req.path = path;
    r = kube_request(op->k, &req, on_reply, op);
    free(path);
    if (r < 0) op_fail(op, OWNER_API_ERROR, "cannot get %s %s: %s", ki->kind, name, strerror(-r));
}

/* Finds the controller ownerReference of obj. Returns 1 and *ref, 0 if
 * there is none, -1 if it is malformed (error set on op). */
static int controller_ref(const cJSON *obj, struct ref *ref)
{
    const cJSON *refs = arr_at(obj_at(obj, "metadata"), "ownerReferences"), *it;
    size_t i;

    cJSON_ArrayForEach(it, refs) {
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "controller"))) continue;
        ref->kind = str_at(it, "kind");
        ref->api_version = str_at(it, "apiVersion");
        ref->name = str_at(it, "name");
        ref->uid = str_at(it, "uid");
        if (!ref->kind || !ref->api_version || !ref->name) return -1;
        ref->ki = NULL;
        for (i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++)
            if (strcmp(KINDS[i].kind, ref->kind) == 0 && group_is(ref->api_version, KINDS[i].group))
                ref->ki = &KINDS[i];
        return 1;
    }
    return 0;
}

static void collect_annotations(struct owner_pod *p, const cJSON *meta)
{
    const cJSON *ann = obj_at(meta, "annotations"), *it;
    size_t n = 0;

    cJSON_ArrayForEach(it, ann) if (cJSON_IsString(it)) n++;
    if (n == 0) return;
    p->annotation_keys = calloc(n, sizeof *p->annotation_keys);
    p->annotation_values = calloc(n, sizeof *p->annotation_values);
    if (!p->annotation_keys || !p->annotation_values) ra_oom();
    cJSON_ArrayForEach(it, ann) {
        if (!cJSON_IsString(it)) continue;
        p->annotation_keys[p->nannotations] = xstrdup(it->string);
        p->annotation_values[p->nannotations++] = xstrdup(it->valuestring);
    }
}

/* 1 if the pod volume named name is one the kubelet updates in place. */
static int is_updating_volume(const cJSON *volumes, const char *name)
{
    static const char *const kinds[] = { "configMap", "secret", "projected", "downwardAPI" };
    const cJSON *v;
    size_t i;

    cJSON_ArrayForEach(v, volumes) {
        const char *vn = str_at(v, "name");

        if (!vn || strcmp(vn, name) != 0) continue;
        for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
            if (obj_at(v, kinds[i])) return 1;
        return 0;
    }
    return 0;
}

static void collect_subpaths(struct owner_pod *p, const cJSON *spec)
{
    static const char *const lists[] = { "initContainers", "containers" };
    const cJSON *volumes = arr_at(spec, "volumes"), *c, *m;
    size_t i;

    if (!volumes) return;
    for (i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        const cJSON *cs = arr_at(spec, lists[i]);

        cJSON_ArrayForEach(c, cs) {
            const cJSON *mounts = arr_at(c, "volumeMounts");

            cJSON_ArrayForEach(m, mounts) {
                const char *sp = str_at(m, "subPath"), *spe = str_at(m, "subPathExpr");
                const char *vol = str_at(m, "name"), *mp = str_at(m, "mountPath");
                struct owner_mount *grown;

                if (!((sp && sp[0]) || (spe && spe[0])) || !vol || !mp) continue;
                if (!is_updating_volume(volumes, vol)) continue;
                grown = realloc(p->subpath_mounts,
                                (p->nsubpath_mounts + 1) * sizeof *p->subpath_mounts);
                if (!grown) ra_oom();
                p->subpath_mounts = grown;
                grown[p->nsubpath_mounts].container = xstrdup(str_at(c, "name"));
                grown[p->nsubpath_mounts].volume = xstrdup(vol);
                grown[p->nsubpath_mounts].mount_path = xstrdup(mp);
                p->nsubpath_mounts++;
            }
        }
    }
}

static void unsupported(struct owner_op *op, const struct ref *ref)
{
    op_fail(op, OWNER_NO_ROLLOUT,
            "%s is controlled by %s %s (%s), which cannot be rolled: only Deployment, "
            "StatefulSet, DaemonSet and Argo Rollout can; use --action restart or signal",
            op->child, ref->kind, ref->name, ref->api_version);
}

static void on_pod(struct owner_op *op, const cJSON *pod)
{
    const cJSON *meta = obj_at(pod, "metadata");
    struct owner_pod *p = &op->o->pod;
    struct ref ref;
    int has;

    p->name = xstrdup(str_at(meta, "name"));
    p->namespace_ = xstrdup(str_at(meta, "namespace"));
    p->uid = xstrdup(str_at(meta, "uid"));
    collect_annotations(p, meta);
    collect_subpaths(p, obj_at(pod, "spec"));
    op->o->have_pod = 1;
    has = controller_ref(pod, &ref);
    if (has < 0) {
        op_fail(op, OWNER_API_ERROR, "%s has a malformed controller ownerReference", op->child);
    } else if (has == 0) {
        op_fail(op, OWNER_NO_ROLLOUT, "%s: the pod has no controller: nothing to roll; use "
                "restart or signal", op->child);
    } else if (!ref.ki || !strcmp(ref.kind, "Deployment") || !strcmp(ref.kind, "Rollout") ||
               !strcmp(ref.kind, "CronJob")) {
        unsupported(op, &ref);
    } else {
        fetch(op, ref.ki, ref.name, ref.uid, xstrdup(op->child));
    }
}

static void on_replicaset(struct owner_op *op, const cJSON *rs)
{
    struct ref ref;
    int has = controller_ref(rs, &ref);

    if (has < 0) {
        op_fail(op, OWNER_API_ERROR, "ReplicaSet %s has a malformed controller ownerReference",
                op->name);
    } else if (has == 0) {
        op_fail(op, OWNER_NO_ROLLOUT,
                "ReplicaSet %s has no controller: patching it does not replace pods", op->name);
    } else if (!ref.ki || (strcmp(ref.kind, "Deployment") && strcmp(ref.kind, "Rollout"))) {
        free(op->child);
        op->child = ra_asprintf("ReplicaSet %s", op->name);
        unsupported(op, &ref);
    } else {
        fetch(op, ref.ki, ref.name, ref.uid, ra_asprintf("ReplicaSet %s", op->name));
    }
}

static void on_job(struct owner_op *op, const cJSON *job)
{
    struct ref ref;
    int has = controller_ref(job, &ref);
    const char *why = "pod template of a Job is immutable; use --action restart or signal, or "
                      "change the CronJob's jobTemplate";

    if (has > 0 && ref.ki && !strcmp(ref.kind, "CronJob"))
        op_fail(op, OWNER_NO_ROLLOUT, "%s belongs to Job %s of CronJob %s: %s", op->child,
                op->name, ref.name, why);
    else
        op_fail(op, OWNER_NO_ROLLOUT, "%s belongs to Job %s: %s", op->child, op->name, why);
}

static void on_workload(struct owner_op *op, const cJSON *w)
{
    const struct kind_info *ki = op->fetching;
    const cJSON *meta = obj_at(w, "metadata"), *spec = obj_at(w, "spec");
    const char *strategy = str_at(obj_at(spec, "updateStrategy"), "type");
    struct owner_info *o = op->o;

    o->kind = ki->kind;
    o->resource = ki->resource;
    o->group = ki->group;
    o->patch_type = ki->patch_type;
    o->name = xstrdup(op->name);
    o->namespace_ = xstrdup(kube_namespace(op->k));
    o->uid = xstrdup(str_at(meta, "uid"));
    o->api_version = xstrdup(str_at(w, "apiVersion"));
    if (!o->api_version[0]) {
        free(o->api_version);
        o->api_version = ra_asprintf("%s/%s", ki->group, ki->version);
    }
    o->path = object_path(ki, o->namespace_, o->name);
    o->rollout_possible = 1;
    if (!strcmp(ki->kind, "Deployment") &&
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(spec, "paused")))
        o->warning = "spec.paused is true: a template patch will not roll pods until "
                     "`kubectl rollout resume`";
    else if ((!strcmp(ki->kind, "StatefulSet") || !strcmp(ki->kind, "DaemonSet")) && strategy &&
             !strcmp(strategy, "OnDelete"))
        o->warning = "OnDelete: a template patch will not replace running pods; delete them to "
                     "pick up the change";
    else if (!strcmp(ki->kind, "Rollout") && obj_at(spec, "workloadRef"))
        o->warning = "spec.workloadRef is set: the pod template lives in the referenced "
                     "workload, so a template patch of the Rollout changes nothing";
    if (o->warning) o->rollout_possible = 0;
    o->status = OWNER_OK;
    op_done(op);
}

static void on_reply(void *ud, const struct kube_resp *r)
{
    struct owner_op *op = ud;
    const char *what = op->fetching ? op->fetching->kind : "pod";
    const char *uid;
    cJSON *j;

    if (r->error) {
        op_fail(op, OWNER_API_ERROR, "cannot get %s %s: %s", what, op->name, r->error);
        return;
    }
    if (r->status != 200) {
        op_fail(op, OWNER_API_ERROR, "cannot get %s %s: unexpected HTTP status %ld", what,
                op->name, r->status);
        return;
    }
    j = cJSON_ParseWithLength(r->body, r->body_len);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        op_fail(op, OWNER_API_ERROR, "cannot get %s %s: the reply is not a JSON object", what,
                op->name);
        return;
    }
    uid = str_at(obj_at(j, "metadata"), "uid");
    if (op->expect_uid && (!uid || strcmp(uid, op->expect_uid) != 0)) {
        op_fail(op, OWNER_API_ERROR, "%s %s has uid %s, but %s references uid %s (recreated?)",
                what, op->name, uid ? uid : "(none)", op->child, op->expect_uid);
    } else if (!op->fetching) {
        on_pod(op, j);
    } else if (!strcmp(op->fetching->kind, "ReplicaSet")) {
        on_replicaset(op, j);
    } else if (!strcmp(op->fetching->kind, "Job")) {
        on_job(op, j);
    } else {
        on_workload(op, j);
    }
    cJSON_Delete(j);
}

/* ---- public ---- */

int owner_resolve(struct kube *k, owner_cb cb, void *ud)
{
    struct owner_op *op = calloc(1, sizeof *op);
    struct kube_req req = { .verb = "get", .resource = "pods", .group = "", .method = "GET",
                            .on_cancel = op_cancel };
    char *path;
    int r;

    if (!op) ra_oom();
    op->k = k;
    op->cb = cb;
    op->ud = ud;
    op->o = calloc(1, sizeof *op->o);
    if (!op->o) ra_oom();
    op->name = xstrdup(kube_pod_name(k));
    op->child = ra_asprintf("pod %s", op->name);
    path = ra_asprintf("/api/v1/namespaces/%s/pods/%s", kube_namespace(k), op->name);
    req.path = path;
    r = kube_request(k, &req, on_reply, op);
    free(path);
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
    free(o);
}
