/*
 * nudge.h - the sync service's PATCHes (docs/sync.md): the annotation
 * reload-agent.io/sync of a pod set to "KIND/NAME@RV" of the change it is
 * for, so the kubelet syncs the pod now (the nudge per-pod fast sync
 * sends, run/fastsync.c).
 *
 * Budget (issue 24's, for a whole cluster): a burst of changes for one
 * pod is coalesced into one PATCH (a pod already queued takes the newer
 * value); a pod is patched at most once per NUDGE_FLOOR_MS (a change
 * within it waits, coalescing); PATCHes leave at most qps per second
 * (a token bucket of burst), NUDGE_MAX_INFLIGHT at a time. A failed PATCH
 * is tried again after a growing backoff (1 s doubling to 30 s) at most
 * NUDGE_MAX_TRIES times; a 404 (the pod is gone) calls gone() and is
 * never retried.
 */
#ifndef RA_SYNC_NUDGE_H
#define RA_SYNC_NUDGE_H

#include <stdint.h>

#include "kube/kube.h"

#define NUDGE_FLOOR_MS 1000
#define NUDGE_MAX_INFLIGHT 16
#define NUDGE_MAX_TRIES 5

struct nudger;

struct nudge_opts {
    double qps;           /* PATCHes per second (> 0) */
    unsigned burst;       /* the bucket's size (>= 1) */
    uint64_t coalesce_ms; /* a change waits this long for more (0: none) */
};

struct nudge_stats {
    unsigned long queued;    /* nudge_pod calls */
    unsigned long coalesced; /* of them, for a pod already queued */
    unsigned long sent;      /* PATCHes sent (retries included) */
    unsigned long ok;        /* answered 2xx */
    unsigned long failed;    /* answered otherwise, or no answer */
    unsigned long dropped;   /* given up after NUDGE_MAX_TRIES, or 404 */
    unsigned pending;        /* pods queued now */
};

/* On loop, through k. gone(ud, ns, pod): the PATCH said 404. */
struct nudger *nudge_new(uv_loop_t *loop, struct kube *k, const struct nudge_opts *o,
                         void (*gone)(void *ud, const char *ns, const char *pod), void *ud);

/* Queues a nudge of pod ns/pod with value (copied), or gives a queued one
 * the newer value. */
void nudge_pod(struct nudger *n, const char *ns, const char *pod, const char *value);

/* Forgets pod ns/pod (deleted): its entry is freed unless a PATCH of it
 * is queued or in flight (then it stays until the service stops), so the
 * queue's memory follows the pods that exist. */
void nudge_forget(struct nudger *n, const char *ns, const char *pod);

/* Drops what is queued (a replica that lost the lead sends nothing). */
void nudge_drop_all(struct nudger *n);

void nudge_get_stats(const struct nudger *n, struct nudge_stats *s);

/* Stops: requests in flight are cancelled by kube_destroy (their
 * on_cancel frees them); n is freed once its timer is closed. */
void nudge_close(struct nudger *n);

#endif
