/*
 * kinds.h - the one table of workload kinds: for every kind the agent or
 * the injector knows, where its pod template is, who it may own, whether
 * a patch of that template rolls its pods, with which patch type, and why
 * not. The owner chain (kube/owner.c), the rollout decision
 * (actions/rollout_decide.c) and the injection transform
 * (inject/transform.c: where to inject, and the warning when rollout is
 * effective but the agent will refuse to roll) all read this table, so
 * "can the agent roll this" has one answer at injection and at run time.
 *
 * Pure (cJSON only: no loop, no I/O), so the transform uses it without the
 * API client. Its exports carry the file's prefix, kinds_.
 *
 *   kind         template                           can roll
 *   Pod          ""                                 no: through its controller
 *   Deployment, StatefulSet, DaemonSet, Rollout
 *                /spec/template                     yes (patch type per row)
 *   ReplicaSet   /spec/template                     no (its controller may)
 *   Job          /spec/template                     no
 *   CronJob      /spec/jobTemplate/spec/template    no
 */
#ifndef RA_KINDS_H
#define RA_KINDS_H

#include <stddef.h>

struct cJSON;

#define OWNER_STRATEGIC "application/strategic-merge-patch+json"
#define OWNER_MERGE "application/merge-patch+json"

/* One workload kind and its behaviour (a row of the table in kinds.c). */
struct kinds_kind {
    const char *kind, *group, *version, *resource; /* resource: the URL/RBAC plural */
    const char *title;                             /* for messages: "Deployment", "Argo Rollout" */
    /* Where the pod template is: the JSON Pointer of every injected
     * operation's prefix ("/spec/template"; a CronJob's
     * "/spec/jobTemplate/spec/template"; "" for a Pod, its own template),
     * and the same as a dotted path for messages ("spec.template", "").
     * NULL: no pod template. */
    const char *template_prefix, *template_path;
    int may_own_pod;        /* a Pod's controller may be of this kind */
    int may_own_replicaset; /* a ReplicaSet's controller may be of this kind */
    int follows_controller; /* not a workload: the chain goes on to its controller */
    int can_roll;           /* a pod-template patch makes its controller replace pods */
    const char *patch_type; /* content type of that patch; NULL if it cannot roll */
    const char *why_not;    /* can_roll == 0: why, and what to do instead */
    int workload_ref;       /* its template may live in spec.workloadRef (kinds_workload_ref) */
    /* Why a template patch of obj (an object of this kind, as read from the
     * API) does not replace pods now, or NULL when it does (see
     * kinds_not_rolling). NULL pointer: the kind has no such case. */
    const char *(*not_rolling)(const struct cJSON *obj, char *buf, size_t len, int *blocks);
};

/* The row for kind in the API group of api_version ("apps/v1": group
 * "apps" with a version; only "v1" is the core group), or NULL for a kind
 * the table does not know or another group (NULL api_version: NULL). The
 * row is static. */
const struct kinds_kind *kinds_find(const char *kind, const char *api_version);

/* The row for kind alone (kinds are unique in the table), or NULL. */
const struct kinds_kind *kinds_named(const char *kind);

/* The one judgement of whether patching the template of obj (an object of
 * kind k) rolls pods now. Returns NULL when it does; else the reason, one
 * line (a static string, or buf holding up to len bytes when it names
 * objects), and *blocks says what follows:
 *   *blocks == 0: the patch lands and pods follow once the user acts
 *                 (spec.paused, updateStrategy OnDelete): patch and warn;
 *   *blocks == 1: the patch would change nothing (a Rollout whose template
 *                 lives in its spec.workloadRef): do not patch.
 * A kind that cannot roll at all returns k->why_not with *blocks = 1. */
const char *kinds_not_rolling(const struct kinds_kind *k, const struct cJSON *obj, char *buf,
                              size_t len, int *blocks);

/* What spec.workloadRef of obj (a Rollout) names: 0 when there is none; 1
 * for an apps/v1 Deployment, with *name pointing into obj (NULL if the
 * reference has no name); -1 for anything else. */
int kinds_workload_ref(const struct cJSON *obj, const char **name);

/* Writes "Deployment, StatefulSet, DaemonSet and Argo Rollout" (the titles
 * of the kinds that can roll, in table order) into out (n bytes, cut to
 * fit, always terminated). */
void kinds_rollable_list(char *out, size_t n);

/* ---- internal: for the files of kube/ ---- */

/* The string (or object) member key of obj, or NULL when absent or of
 * another type; borrowed from obj. */
const char *kinds__str_at(const struct cJSON *obj, const char *key);
const struct cJSON *kinds__obj_at(const struct cJSON *obj, const char *key);

#endif
