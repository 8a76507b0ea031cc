/*
 * rollout.h - the rollout action: make the owner's pod template carry the
 * rollout hash, so Kubernetes rolls the workload exactly once per change,
 * however many replicas run the agent.
 *
 * One apply: resolve the owner once (owner.h; for an Argo Rollout with
 * spec.workloadRef the owner is the referenced Deployment, whose template
 * Argo follows: the Rollout is never patched), wait a random delay in
 * [0, --rollout-jitter), GET the owner and decide (rollout_decide.h); if its
 * spec.template.metadata.annotations[--hash-annotation] already equals the
 * hash, another replica did it (already-current). Otherwise honour
 * --min-interval per owner (the owner's metadata annotation
 * <prefix>/last-rollout records the last patch time, visible to every
 * replica), then PATCH (fieldManager=reload-agent; strategic merge for
 * apps/v1, merge patch for Argo Rollouts) the hash annotation plus
 * <hash-annotation with -hash replaced by -files>: a JSON map of the
 * rollout-class files to a digest prefix, so replicas that disagree can say
 * which paths differ.
 *
 * Oscillation guard: when the owner's annotation is found changed to a
 * different hash by someone else after we set it, ROLLOUT_FLIP_LIMIT times
 * within ROLLOUT_FLIP_WINDOW_S, the pods disagree about the content; the
 * agent stops patching (blocked), logs a warning naming the differing
 * paths, and posts a RolloutSkipped Event. It never rolls forever.
 *
 * An owner that cannot roll (kinds_not_rolling blocks) gives ROLLOUT_BLOCKED,
 * a warning and a RolloutSkipped Event; it is resolved again at the next
 * apply, and so is an owner whose GET answers 404 (ROLLOUT_FAILED, retried). One that rolls only once the user acts (paused, OnDelete) is
 * patched, with a warning and a RolloutSkipped Event. Events go to the
 * pod's workload (the Rollout, when it named the Deployment).
 */
#ifndef RA_ROLLOUT_H
#define RA_ROLLOUT_H

#include <stdint.h>
#include <uv.h>

#include "actions/rollout_decide.h" /* ROLLOUT_FLIP_LIMIT, ROLLOUT_FLIP_WINDOW_S */
#include "kube/kevents.h"
#include "kube/kube.h"
#include "kube/owner.h"

enum rollout_result {
    ROLLOUT_PATCHED = 0,
    ROLLOUT_ALREADY_CURRENT,
    ROLLOUT_FAILED,  /* transient (API error, conflict): worth a retry */
    ROLLOUT_BLOCKED, /* permanent: no owner that can roll, or oscillation */
    ROLLOUT_STORM,   /* the workload was rolled --storm-limit times within the window */
};

struct rollout;

/* err: one line when FAILED, BLOCKED or STORM, valid during the callback. */
typedef void (*rollout_cb)(void *ud, enum rollout_result r, const char *err);

/* ev may be NULL (--events=false). k and ev must outlive the rollout. */
int rollout_create(uv_loop_t *loop, struct kube *k, struct kevents *ev, struct rollout **out);

/* What one apply reads, fixed when it starts (a live configuration change
 * never reaches an apply in flight). */
struct rollout_params {
    const char *hash_annotation; /* --hash-annotation */
    uint64_t jitter_ms;          /* --rollout-jitter */
    uint64_t min_interval_ms;    /* --min-interval, per owner */
    int events;                  /* --events: post Events on the owner */
    int storm_max;               /* --storm-limit N (0: off), counted on the workload */
    uint64_t storm_window_ms;    /* --storm-limit's window */
};

/* Resolves the owner now (at start: the reconcile needs the pod's
 * annotations, and subPath mounts are warned about). cb(ud, info) runs once
 * with the result whatever its status (info->have_pod tells whether the pod
 * was read); info is valid only during the callback. Returns 0 or <0. */
int rollout_resolve(struct rollout *r, void (*cb)(void *ud, const struct owner_info *o), void *ud);

/* Closes r: stops its timer (a pending apply's callback never runs; the
 * action's abort runs it first), ignores replies still on their way,
 * and frees r in its handle's close callback, after which done(ud) runs
 * (done may be NULL). r must not be used after this call. Call before
 * kube_destroy (the client cancels the requests still pending). */
void rollout_close(struct rollout *r, void (*done)(void *), void *ud);

#endif
