/*
 * kevents.h - core/v1 Events (docs/kubernetes-api.md#events) about what the agent did: on its own
 * pod for in-place actions (Normal Reloaded, Warning ReloadFailed), on the
 * owner for rollouts (Normal RolloutTriggered, Warning RolloutSkipped).
 *
 * Fire and forget: a failed POST is logged at debug level and dropped (an
 * Event is never worth a retry storm); only the process's first refusal
 * (403) is a warning, naming the RBAC rule to grant. Rate-limited: the same reason for
 * the same object at most once per KEV_SAME_REASON_S, and at most
 * KEV_BURST events per minute overall; each suppressed Event is pushed to
 * the kube client's counters (kube_set_counters: event_suppressed).
 */
#ifndef RA_KEVENTS_H
#define RA_KEVENTS_H

#include "kube/kube.h"

#define KEV_SAME_REASON_S 30
#define KEV_BURST 12

struct kevents;

/* The object an Event is about. */
struct kev_object {
    const char *api_version; /* "v1", "apps/v1", "argoproj.io/v1alpha1" */
    const char *kind;        /* "Pod", "Deployment", ... */
    const char *name;
    const char *namespace_;
    const char *uid; /* may be NULL */
};

/* Creates the sender. k must outlive it. Returns 0 or -ENOMEM. */
int kev_create(struct kube *k, struct kevents **out);

/* Posts an Event (type "Normal" or "Warning"); message is truncated to 1024
 * bytes. Never blocks, never fails loudly. */
void kev_post(struct kevents *ev, const struct kev_object *obj, const char *type,
              const char *reason, const char *message);

void kev_destroy(struct kevents *ev);

#endif
