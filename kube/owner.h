/*
 * owner.h - finds the workload that owns the agent's own pod
 * (docs/kubernetes-api.md#the-owner-chain),
 * so the rollout action knows what to patch, and says for every owner kind
 * what it does through the one kinds table of kube/kinds.h (struct
 * owner_kind, kinds_not_rolling()).
 *
 * The chain is followed only through controller ownerReferences (the one
 * with controller: true; others are ignored), fetching every object:
 *   Pod -> ReplicaSet (apps/v1) -> Deployment (apps/v1) | Rollout (argoproj.io/v1alpha1)
 *   Pod -> StatefulSet | DaemonSet (apps/v1)
 *   Rollout with spec.workloadRef -> the referenced Deployment (apps/v1),
 *     whose template Argo Rollouts follows: that Deployment is patched,
 *     never the Rollout.
 * Owners are never guessed from names. Anything else (bare pod, orphan
 * ReplicaSet, Job/CronJob, other kinds, a workloadRef that is not an apps/v1
 * Deployment or cannot be read) is OWNER_NO_ROLLOUT with an error saying
 * what to do instead.
 */
#ifndef RA_OWNER_H
#define RA_OWNER_H

#include <stddef.h>

#include "kube/kinds.h"
#include "kube/kube.h"

struct cJSON;

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
    char *error;  /* NULL when OWNER_OK; else one line */
    int have_pod; /* pod is filled (the pod GET succeeded) */
    struct owner_pod pod;

    /* The object whose pod template is patched, valid when status ==
     * OWNER_OK: the pod's workload, or the Deployment a Rollout's
     * spec.workloadRef names. */
    const struct kinds_kind *ki; /* its row in the table */
    const char *kind;            /* "Deployment", "StatefulSet", "DaemonSet", "Rollout" */
    const char *resource;        /* RBAC/URL plural: "deployments", ... */
    const char *group;           /* "apps" or "argoproj.io" */
    const char *patch_type;      /* OWNER_STRATEGIC for apps/v1, OWNER_MERGE for Rollouts */
    char *name, *namespace_, *uid, *api_version;
    char *path; /* e.g. /apis/apps/v1/namespaces/NS/deployments/NAME */

    /* The pod's workload when it is not the patched object (a Rollout with
     * spec.workloadRef): Events about the rollout go to it. Also set with
     * OWNER_NO_ROLLOUT when that Rollout was found but its workloadRef is not
     * an apps/v1 Deployment or cannot be read. via_kind NULL: none. */
    const char *via_kind;
    char *via_name, *via_uid, *via_api_version;
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

/* ---- internal: the chain's steps without I/O (owner.c, tests/fuzz) ---- */

/* The state of one resolution between its GETs. */
struct owner__chain {
    const struct kinds_kind *fetching; /* NULL while the pod is fetched */
    char *name;                        /* of the object to fetch next */
    char *expect_uid;                  /* its uid per the reference, or NULL */
    char *child;                       /* who referenced it: "pod P", "ReplicaSet R" */
    int via_ref;                       /* it is named by a Rollout's spec.workloadRef */
    struct owner_info *o;              /* the result being built (owned) */
};

/* Starts a chain at the pod named pod_name. Aborts on OOM. */
void owner__chain_init(struct owner__chain *c, const char *pod_name);

/* Takes the reply to the GET of c->fetching/c->name in namespace ns (status
 * 0 with error set when no response came; body need not be terminated).
 * Returns 1 when the next object to GET is set in c, 0 when c->o is
 * complete (status, error and the workload set). Never does I/O. */
int owner__step(struct owner__chain *c, const char *ns, long status, const char *error,
                const char *body, size_t body_len);

/* The API path of the object c names next. malloc'd. */
char *owner__chain_path(const struct owner__chain *c, const char *ns);

/* Frees the chain's strings and, unless NULL, c->o. */
void owner__chain_free(struct owner__chain *c);

#endif
