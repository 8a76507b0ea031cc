/*
 * owner.h - finds the workload that owns the agent's own pod (spec §6.2),
 * so the rollout action knows what to patch.
 *
 * The chain is followed only through controller ownerReferences (the one
 * with controller: true; others are ignored), fetching every object:
 *   Pod -> ReplicaSet (apps/v1) -> Deployment (apps/v1) | Rollout (argoproj.io/v1alpha1)
 *   Pod -> StatefulSet | DaemonSet (apps/v1)
 * Owners are never guessed from names. Anything else (bare pod, orphan
 * ReplicaSet, Job/CronJob, other kinds) is OWNER_NO_ROLLOUT with an error
 * saying what to do instead.
 */
#ifndef RA_OWNER_H
#define RA_OWNER_H

#include <stddef.h>

#include "kube/kube.h"

enum owner_status {
    OWNER_OK = 0,     /* a workload was found: kind, name, ... are set */
    OWNER_NO_ROLLOUT, /* the pod's controller cannot be rolled; error says what
                         to do instead (permanent: retrying does not help) */
    OWNER_API_ERROR,  /* a request failed or a reply was unusable (transient,
                         RBAC, malformed data); error names the object */
};

/* A volumeMount with subPath/subPathExpr of a configMap, secret, projected
 * or downwardAPI volume: the kubelet never updates it. */
struct owner_mount {
    char *container;
    char *volume;
    char *mount_path;
};

/* The agent's own pod, as read from the API. */
struct owner_pod {
    char *name, *namespace_, *uid;
    char **annotation_keys, **annotation_values; /* metadata.annotations */
    size_t nannotations;
    struct owner_mount *subpath_mounts; /* all containers and init containers */
    size_t nsubpath_mounts;
};

struct owner_info {
    enum owner_status status;
    char *error;        /* NULL when OWNER_OK; else one line */
    int have_pod;       /* pod is filled (the pod GET succeeded) */
    struct owner_pod pod;

    /* The workload, valid when status == OWNER_OK. */
    const char *kind;       /* "Deployment", "StatefulSet", "DaemonSet", "Rollout" */
    const char *resource;   /* RBAC/URL plural: "deployments", ... */
    const char *group;      /* "apps" or "argoproj.io" */
    const char *patch_type; /* application/strategic-merge-patch+json for apps/v1,
                               application/merge-patch+json for Rollouts */
    char *name, *namespace_, *uid, *api_version;
    char *path;             /* e.g. /apis/apps/v1/namespaces/NS/deployments/NAME */
    int rollout_possible;   /* 1 if a template patch replaces the pods now */
    const char *warning;    /* why not, when rollout_possible == 0: spec.paused,
                               updateStrategy OnDelete, or spec.workloadRef */
};

/* Called exactly once with the result, which the callee owns: free it with
 * owner_info_free (it may be kept). */
typedef void (*owner_cb)(void *ud, struct owner_info *o);

/* Starts resolving the owner of kube_pod_name(k) in kube_namespace(k).
 * Returns 0 (cb runs later, unless kube_destroy cancels the requests, then
 * it never runs and nothing leaks), or <0 from kube_request (cb never runs). */
int owner_resolve(struct kube *k, owner_cb cb, void *ud);

/* The pod's annotation value for key, or NULL. */
const char *owner_pod_annotation(const struct owner_info *o, const char *key);

void owner_info_free(struct owner_info *o);

#endif
