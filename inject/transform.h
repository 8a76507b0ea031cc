/*
 * transform.h - the one sidecar-injection transform (issue 10), shared by
 * `reload-agent inject` (CLI, manifests) and `reload-agent webhook`
 * (admission). It reads an object (cJSON) and returns the RFC 6902 JSON
 * Patch operations that add the reload-agent sidecar to its pod template;
 * it never modifies its input.
 *
 * Where the pod template is (the path prefix of every operation) is the
 * kinds table's (kube/kinds.h: "" for a Pod, "/spec/template" for the
 * workloads, a CronJob's "/spec/jobTemplate/spec/template"); a kind it
 * does not list is not a workload (INJECT_NOT_WORKLOAD). With rollout
 * effective, the same table says when the agent will refuse to roll, and
 * the injection warns.
 *
 * What is added (see docs/inject.md for the full reference):
 *   - a native sidecar named INJECT_CONTAINER ("reload-agent"): appended
 *     last to initContainers with restartPolicy: Always (never a plain
 *     container), args "run" then one --watch per mirror and one
 *     --env-watch per env volume, POD_NAME/POD_NAMESPACE from fieldRef,
 *     resources, a hardened securityContext;
 *   - a read-only mirror mount of every ConfigMap, Secret and projected
 *     volume the app containers mount (not subPath mounts: warned; never
 *     the service-account token volume), at the app's mountPath, or under
 *     /reload-agent/volumes/<volume> when that path is taken;
 *   - for each ConfigMap/Secret referenced by envFrom or valueFrom, an
 *     agent-only volume mounted at /reload-agent/env/configmap/<name> or
 *     /reload-agent/env/secret/<name> (watched with --env-watch);
 *   - the downward-API annotations volume at /etc/podinfo;
 *   - shareProcessNamespace: true only when signal or restart is among the
 *     effective actions;
 *   - restart-pod effective: the sidecar's restartPolicyRules
 *     [{action: RestartAllContainers, exitCodes: {operator: In, values:
 *     [--restart-pod-exit-code]}}], the same JSON as --restart-policy-rules,
 *     and --state-dir on an emptyDir (KEP-5532);
 *   - restart effective in a pod whose restartPolicy is Never or OnFailure:
 *     the app container's restartPolicy and a Restart rule on the exit code
 *     the restart signal gives, 128 + signo (KEP-5307);
 *   - the service-account token mount copied from the app container, only
 *     at admission (opts->admission) and only when rollout or Events need
 *     the API;
 *   - the annotation reload-agent.io/inject-status (CFG_ANNOT_INJECT_STATUS,
 *     config/config.h) recording what was added
 *     (and the warnings, which the agent logs and posts as Events at start).
 */
#ifndef RA_INJECT_TRANSFORM_H
#define RA_INJECT_TRANSFORM_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "config/annotations.h"

#define INJECT_CONTAINER "reload-agent"
/* At most this many of the transform's warnings are recorded in the status
 * annotation ("warnings"), for the agent to log and post as Events. */
#define INJECT_STATUS_MAX_WARNINGS 16
/* At most this many volumes and keys (mirrors, env volumes and the keys
 * they list) are watched by one sidecar: a pod that would need more is not
 * injected, since the sidecar would make it too large to store. */
#define INJECT_MAX_WATCHED 2000
/* The Kubernetes minor version (1.N) the injection assumes when it is not
 * told (inject_opts.kube_minor 0): the release this version is built and
 * tested against, where RestartAllContainers is on by default. */
#define INJECT_KUBE_MINOR_DEFAULT 36
/* The image this version builds (Dockerfile tag). */
#define INJECT_DEFAULT_IMAGE "reload-agent:" RA_VERSION

struct inject_opts {
    const char *image;          /* NULL = INJECT_DEFAULT_IMAGE */
    const char *cpu_request;    /* NULL = "5m" */
    const char *memory_request; /* NULL = "16Mi" */
    const char *memory_limit;   /* NULL = "32Mi" */
    int all;       /* 1: inject every workload not annotated inject: "false" (CLI --all) */
    int admission; /* 1: the object is a Pod being created (webhook): copy the token mount */
    /* The cluster's Kubernetes minor version (1.N; 0: INJECT_KUBE_MINOR_DEFAULT):
     * restart-pod is refused below 1.36, whose API server rejects
     * RestartAllContainers on a sidecar; the restart action's rule on the
     * app container (KEP-5307) is left out, with a warning, below 1.35. */
    int kube_minor;
    /* Where kube_minor came from, as the refusal and warning messages name
     * it (a static string): NULL = "--kube-version". */
    const char *kube_from;
};

enum inject_outcome {
    INJECT_INJECTED,     /* ops add the sidecar (or, already injected, mirrors added since) */
    INJECT_UNCHANGED,    /* already injected and nothing to add: ops is an empty array */
    INJECT_SKIPPED,      /* refused or not opted in: reason says why; ops is empty */
    INJECT_NOT_WORKLOAD, /* not a kind with a pod template: ops is empty */
};

struct inject_result {
    enum inject_outcome outcome;
    cJSON *ops;      /* owned: the RFC 6902 operations (a JSON array, never NULL on success) */
    char **warnings; /* owned: one line each, <= 120 characters where possible */
    size_t nwarnings;
    /* owned, INJECT_INJECTED only: what the safe-reload steps and staging
     * will do, one line each (docs/safe-reload.md), for the CLI's report */
    char **notes;
    size_t nnotes;
    char reason
        [256]; /* INJECT_SKIPPED / INJECT_NOT_WORKLOAD: why, e.g. "hostPID pods are not injected" */
    const char
        *prefix; /* static: the path prefix used ("" for a Pod), or NULL when not a workload */
};

/* What the opt-in annotation reload-agent.io/inject (CFG_ANNOT_INJECT)
 * says. The one rule, for the CLI and the webhook: "true" injects, "false"
 * never does, anything else is refused with a reason. */
enum inject_opt_in {
    INJECT_OPT_UNSET,   /* absent (or JSON null): only `inject --all` injects */
    INJECT_OPT_IN,      /* "true" */
    INJECT_OPT_OUT,     /* "false": never injected, whatever else asks */
    INJECT_OPT_INVALID, /* another value (any other string, any other JSON type) */
};

/* The opt-in of annotations (a pod template's metadata.annotations: a JSON
 * object, or NULL for none), read, never kept. */
enum inject_opt_in inject_opt_in(const cJSON *annotations);

/* Returns the pod-template path prefix for an object's apiVersion and kind
 * (the kinds table's, static), or NULL when the kind carries no pod template.
 * apiVersion may be NULL (then only the kind is looked at). */
const char *inject_prefix_for(const char *api_version, const char *kind);

/* Computes the injection for obj (a whole object with apiVersion, kind,
 * metadata and spec). The pod template's annotations decide: inject:
 * "true" (or opts->all) opts in, inject: "false" always opts out. Returns
 * 0 and fills *out (free with inject_result_free) whatever the outcome;
 * -EINVAL with a message in err when obj is not an object or the template
 * is malformed (a field of the wrong JSON type: the message names its
 * path); -ENOMEM. Refusals (a foreign container named "reload-agent",
 * hostPID, inject: "false") are INJECT_SKIPPED with a reason, never errors. */
int inject_object(const cJSON *obj, const struct inject_opts *opts, struct inject_result *out,
                  char *err, size_t errlen);

/* The RFC 6902 operation that sets annotation key to value on the pod
 * template at prefix whose metadata is meta (NULL when it has none): an
 * add of the one member when the annotations exist, else of the whole map
 * (or of metadata holding it). Returns a new operation (the caller owns
 * it), or NULL on OOM. */
cJSON *inject_annotation_op(const cJSON *meta, const char *prefix, const char *key,
                            const char *value);

/* The minor version of a Kubernetes version as the CLI and the webhook
 * take it (--kube-version): "1.35", "v1.35", "1.35.2", "v1.36.3-gke.1"
 * (what `kubectl version` and Helm's .Capabilities.KubeVersion print).
 * Returns 0 with *minor set, or -EINVAL for anything else (another major
 * than 1, a minor below 20 or above 999, a missing dot). */
int inject_parse_kube_version(const char *s, int *minor);

/* Frees what *r owns and zeroes it. Safe on a zeroed result. */
void inject_result_free(struct inject_result *r);

/* The reload-agent.io/ annotations of map (a JSON object, or NULL) as the
 * agent reads them from its downward-API file, for judging the sidecar's
 * configuration (the transform, the stamp): string values only (other
 * values are left out: callers check types first), the first of duplicate
 * keys, sorted by key. Keys and values are borrowed from map: free only
 * set->v. Returns 0 or -ENOMEM. */
int inject_annot_set(const cJSON *map, struct annot_set *set);

#endif
