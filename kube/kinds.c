/*
 * kinds.c - the one table of workload kinds (contract in kinds.h): KINDS[]
 * is the one place that says what a kind does: where its pod template is,
 * who it may own, whether a template patch rolls it, with which patch
 * type, and why not. Pure: it reads objects handed to it and writes only
 * into the caller's buffers.
 */
#include "kube/kinds.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "base/text.h"

const char *kinds__str_at(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}

const cJSON *kinds__obj_at(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    return cJSON_IsObject(v) ? v : NULL;
}

/* 1 if api_version names a version of group: "GROUP/VERSION" with a
 * version, or for the core group "" exactly "v1". */
static int group_is(const char *api_version, const char *group)
{
    size_t n = strlen(group);

    if (n == 0) return strcmp(api_version, "v1") == 0;
    return strncmp(api_version, group, n) == 0 && api_version[n] == '/' && api_version[n + 1];
}

/* ---- the kinds ---- */

static const char *paused(const cJSON *obj, char *buf, size_t len, int *blocks)
{
    (void)buf;
    (void)len;
    *blocks = 0;
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(kinds__obj_at(obj, "spec"), "paused")))
        return NULL;
    return "spec.paused is true: a template patch will not roll pods until "
           "`kubectl rollout resume`";
}

static const char *on_delete(const cJSON *obj, char *buf, size_t len, int *blocks)
{
    const char *type =
        kinds__str_at(kinds__obj_at(kinds__obj_at(obj, "spec"), "updateStrategy"), "type");

    (void)buf;
    (void)len;
    *blocks = 0;
    if (!type || strcmp(type, "OnDelete") != 0) return NULL;
    return "updateStrategy OnDelete: a template patch will not replace running pods; delete "
           "them to pick up the change";
}

static const char *rollout_not_rolling(const cJSON *obj, char *buf, size_t len, int *blocks)
{
    const cJSON *ref = kinds__obj_at(kinds__obj_at(obj, "spec"), "workloadRef");
    const char *name = NULL;
    int r = kinds_workload_ref(obj, &name);

    if (r == 0) {
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(kinds__obj_at(obj, "spec"), "paused")))
            return NULL;
        *blocks = 0;
        return "spec.paused is true: the Rollout will not progress until it is resumed "
               "(`kubectl argo rollouts resume`)";
    }
    *blocks = 1;
    if (r > 0) {
        char raw[512];
        /* API data (kinds, names) goes into messages, logs and Events: one line */
        snprintf(raw, sizeof raw,
                 "spec.workloadRef names Deployment %.253s: the pod template lives "
                 "there, and the Rollout itself is never patched",
                 name ? name : "(no name)");
        ra_one_line(buf, len, raw);
        return buf;
    }
    if (!ref) return "spec.workloadRef is not an object: the pod template cannot be found";
    char raw[768];
    snprintf(raw, sizeof raw,
             "spec.workloadRef names %.63s %.253s (%.100s), not an apps/v1 Deployment: "
             "reload-agent patches only a referenced Deployment's pod template; use "
             "--action restart or signal",
             kinds__str_at(ref, "kind") ? kinds__str_at(ref, "kind") : "(no kind)",
             kinds__str_at(ref, "name") ? kinds__str_at(ref, "name") : "(no name)",
             kinds__str_at(ref, "apiVersion") ? kinds__str_at(ref, "apiVersion") : "no apiVersion");
    ra_one_line(buf, len, raw);
    return buf;
}

#define JOB_WHY                                                                                    \
    "pod template of a Job is immutable; use --action restart or signal, or change "               \
    "the CronJob's jobTemplate"

#define TEMPLATE "/spec/template"
#define TEMPLATE_PATH "spec.template"

/* The workload kinds, with their behaviour. */
static const struct kinds_kind KINDS[] = {
    /* the object is its own pod: its controller is what may roll */
    {.kind = "Pod",
     .group = "",
     .version = "v1",
     .resource = "pods",
     .title = "Pod",
     .template_prefix = "",
     .template_path = "",
     .why_not = "a pod is rolled only through its controller"},
    {.kind = "ReplicaSet",
     .group = "apps",
     .version = "v1",
     .resource = "replicasets",
     .title = "ReplicaSet",
     .template_prefix = TEMPLATE,
     .template_path = TEMPLATE_PATH,
     .may_own_pod = 1,
     .follows_controller = 1,
     .why_not = "patching a ReplicaSet does not replace its pods"},
    {.kind = "Deployment",
     .group = "apps",
     .version = "v1",
     .resource = "deployments",
     .title = "Deployment",
     .template_prefix = TEMPLATE,
     .template_path = TEMPLATE_PATH,
     .may_own_replicaset = 1,
     .can_roll = 1,
     .patch_type = OWNER_STRATEGIC,
     .not_rolling = paused},
    {.kind = "StatefulSet",
     .group = "apps",
     .version = "v1",
     .resource = "statefulsets",
     .title = "StatefulSet",
     .template_prefix = TEMPLATE,
     .template_path = TEMPLATE_PATH,
     .may_own_pod = 1,
     .can_roll = 1,
     .patch_type = OWNER_STRATEGIC,
     .not_rolling = on_delete},
    {.kind = "DaemonSet",
     .group = "apps",
     .version = "v1",
     .resource = "daemonsets",
     .title = "DaemonSet",
     .template_prefix = TEMPLATE,
     .template_path = TEMPLATE_PATH,
     .may_own_pod = 1,
     .can_roll = 1,
     .patch_type = OWNER_STRATEGIC,
     .not_rolling = on_delete},
    /* custom resources take no strategic merge patch (415) */
    {.kind = "Rollout",
     .group = "argoproj.io",
     .version = "v1alpha1",
     .resource = "rollouts",
     .title = "Argo Rollout",
     .template_prefix = TEMPLATE,
     .template_path = TEMPLATE_PATH,
     .may_own_replicaset = 1,
     .can_roll = 1,
     .patch_type = OWNER_MERGE,
     .workload_ref = 1,
     .not_rolling = rollout_not_rolling},
    {.kind = "Job",
     .group = "batch",
     .version = "v1",
     .resource = "jobs",
     .title = "Job",
     .template_prefix = TEMPLATE,
     .template_path = TEMPLATE_PATH,
     .may_own_pod = 1,
     .why_not = JOB_WHY},
    /* named from a Job's ownerReference, never fetched */
    {.kind = "CronJob",
     .group = "batch",
     .version = "v1",
     .resource = "cronjobs",
     .title = "CronJob",
     .template_prefix = "/spec/jobTemplate/spec/template",
     .template_path = "spec.jobTemplate.spec.template",
     .why_not = JOB_WHY},
};
#define NKINDS (sizeof KINDS / sizeof KINDS[0])

const struct kinds_kind *kinds_named(const char *kind)
{
    for (size_t i = 0; kind && i < NKINDS; i++)
        if (strcmp(KINDS[i].kind, kind) == 0) return &KINDS[i];
    return NULL;
}

const struct kinds_kind *kinds_find(const char *kind, const char *api_version)
{
    const struct kinds_kind *k = kinds_named(kind);

    return k && api_version && group_is(api_version, k->group) ? k : NULL;
}

const char *kinds_not_rolling(const struct kinds_kind *k, const cJSON *obj, char *buf, size_t len,
                              int *blocks)
{
    *blocks = 0;
    if (!k->can_roll) {
        *blocks = 1;
        return k->why_not;
    }
    return k->not_rolling ? k->not_rolling(obj, buf, len, blocks) : NULL;
}

int kinds_workload_ref(const cJSON *obj, const char **name)
{
    const cJSON *spec = kinds__obj_at(obj, "spec");
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(spec, "workloadRef");
    const char *kind, *av;

    *name = NULL;
    if (!ref || cJSON_IsNull(ref)) return 0;
    kind = kinds__str_at(ref, "kind");
    av = kinds__str_at(ref, "apiVersion");
    if (!cJSON_IsObject(ref) || !kind || !av || strcmp(kind, "Deployment") != 0 ||
        strcmp(av, "apps/v1") != 0)
        return -1;
    *name = kinds__str_at(ref, "name");
    return 1;
}

void kinds_rollable_list(char *out, size_t n)
{
    size_t len = 0, total = 0, seen = 0;

    for (size_t i = 0; i < NKINDS; i++) total += KINDS[i].can_roll;
    out[0] = '\0';
    for (size_t i = 0; i < NKINDS; i++) {
        if (!KINDS[i].can_roll) continue;
        seen++;
        len += (size_t)snprintf(out + len, len < n ? n - len : 0, "%s%s",
                                seen == 1       ? ""
                                : seen == total ? " and "
                                                : ", ",
                                KINDS[i].title);
    }
}
