/*
 * stage.h - the stage gate (--stage): the replicas of one workload apply a
 * change one at a time (or N, or P% of the replicas, at a time); each
 * waits until the ones before it verified the change, and a rejection or a
 * failed verification anywhere halts the change for the whole workload.
 *
 * The engine (run/safeflow.c) asks for a slot before its action and says
 * how it went after its verification:
 *
 *   observe H -> validate H -> stage_acquire(H) -> [GO] swap the copies the
 *             app reads -> action -> verify -> stage_release(H, ok)
 *
 *   - stage_acquire after the content was validated, before the copy the
 *     app reads is swapped and before the action;
 *   - stage_release(ok) after the action and its verification passed;
 *   - stage_release(!ok) after a failed verification (rolled back or not),
 *     after a failed action, and after a rejection (then without a prior
 *     acquire: the replica found the content invalid, which halts it for
 *     the workload as well).
 * A NULL struct stage * means no staging: the engine treats it as an
 * immediate STAGE_GO and calls nothing here.
 *
 * Coordination is one Lease per workload (coordination.k8s.io/v1, named by
 * lease_name_for(): reload-agent-stage-<kind>-<name>), whose annotation
 * reload-agent.io/stage holds the stage (run/stagestate.h): the hash being
 * staged, the width, the active slots with a renewal count, the pods that
 * verified it, and the halt records. Every write is a compare-and-swap on
 * the Lease's resourceVersion; a replica waits by watching that one Lease
 * (list + watch by name: kube/kwatch.h), never by polling. The workload
 * comes from --stage-workload KIND/NAME (the injector writes it) or from
 * the pod's owner chain (kube/owner.h); "P%" reads the workload's
 * replicas (one GET per change).
 *
 * A slot's holder renews it every third of --stage-ttl; a slot whose
 * renewal count has not moved for --stage-ttl, measured on this agent's
 * own monotonic clock from when it saw that count, has expired and may be
 * taken over (a pod that died mid-stage blocks nobody for longer; no wall
 * clocks are compared across pods). A holder stops renewing after
 * STAGE_MAX_HOLD_MS, so an agent that never releases cannot hold a slot
 * for ever.
 *
 * Without coordination the gate says STAGE_ALONE: the pod applies the
 * change by itself, logs why (a warning with an explicit --stage; info for
 * the default of restart and restart-pod) and shows it in /status. That
 * is: no Kubernetes API client, a pod that belongs to no workload (a bare
 * pod, a Job), or the API unreachable or refusing (RBAC) for
 * STAGE_API_GRACE_MS while an acquire waits. A later acquire tries again.
 */
#ifndef RA_STAGE_H
#define RA_STAGE_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <uv.h>

struct kube;
struct kevents;

enum stage_verdict {
    STAGE_GO,     /* apply it: this pod holds a slot until stage_release */
    STAGE_HALTED, /* the hash was halted for the workload: do not apply it */
    STAGE_ALONE,  /* no coordination: act alone (logged, /status) */
};

#define STAGE_TTL_MS 30000       /* --stage-ttl's default */
#define STAGE_API_GRACE_MS 10000 /* how long an acquire waits for an API that fails */
#define STAGE_MAX_HOLD_MS 900000 /* a slot is renewed for at most 15 min */
#define STAGE_JITTER_STEP_MS 100 /* the write jitter per replica ... */
#define STAGE_JITTER_MAX_MS 2000 /* ... up to this */
#define STAGE_LEAVE_WAIT_MS 2000 /* at close, how long giving a slot back may take */

struct stage;

/* Asks for a slot to apply content hash (1-64 lower-case hex digits); cb
 * runs exactly once, on the loop, never inside this call (stage_close runs
 * a pending one with STAGE_HALTED, inside stage_close: the agent stops).
 * One acquire at a time: a new one supersedes the pending one, whose cb
 * then runs with STAGE_HALTED. An acquire while this pod holds a slot of
 * the same hash (a retry) is a GO at once; of another hash, the old slot is
 * given up. */
void stage_acquire(struct stage *s, const char *hash, void (*cb)(void *ud, enum stage_verdict),
                   void *ud);

/* After verify: ok -> this pod verified hash (its slot frees the next
 * replica); !ok -> the change halts for the whole workload: a halt record
 * in the Lease (every replica that asks for hash gets STAGE_HALTED) and an
 * Event ConfigHalted on the workload naming the pod, the hash and reason.
 * Also for a rejection (validate failed) without an acquire before it, and
 * after a restart (a restart-pod's new agent) without one. */
void stage_release(struct stage *s, const char *hash, int ok, const char *reason);

/* The agent exits to restart its pod (restart-pod): stage_close keeps this
 * pod's turn instead of giving it back, so the next replica waits until
 * the agent of the restarted pod ends it (stage_release(hash, ok) at its
 * start, without a turn in memory: the Lease has it) or the turn expires
 * after --stage-ttl. */
void stage_keep_turn(struct stage *s);

/* What the gate is given at start. */
struct stage_opts {
    int count;            /* N at a time, or 0 */
    int percent;          /* P% of the replicas at a time, or 0 */
    int is_default;       /* not asked for: the default of restart and restart-pod */
    const char *workload; /* "deployment/web" (--stage-workload), or NULL: the owner chain */
    uint64_t ttl_ms;      /* --stage-ttl; 0 = STAGE_TTL_MS */
    uint64_t jitter_ms;   /* the write jitter's window; 0 = per replica (tests set it) */
    uint64_t grace_ms;    /* 0 = STAGE_API_GRACE_MS (tests shorten it) */
};

/* Creates the gate and starts setting up (the workload, the Lease's
 * watch). k NULL: no coordination (every acquire is STAGE_ALONE); ev may be
 * NULL (no Events). k and ev must outlive s. Returns 0 and *out, or
 * -EINVAL with a reason in err (a --stage-workload that is not KIND/NAME of
 * a Deployment, StatefulSet, DaemonSet or Rollout). */
int stage_create(uv_loop_t *loop, struct kube *k, struct kevents *ev, const struct stage_opts *o,
                 struct stage **out, char *err, size_t errlen);

/* Adds the "stage" object of /status to root. */
void stage_status(const struct stage *s, cJSON *root);

/* The name of a verdict: "go", "halted", "alone". */
const char *stage_verdict_name(enum stage_verdict v);

/* Stops: the callbacks of verdicts not yet delivered run now, and a
 * pending acquire's with STAGE_HALTED (the engine, closed before, ignores
 * them); the releases not yet written are, and a turn still held is given
 * back (unless stage_keep_turn): one write, after the request in flight,
 * within STAGE_LEAVE_WAIT_MS in all; then the watch closes; s is
 * freed once its handles are closed, then done(ud) runs (may be NULL), in
 * which the caller destroys the client (kube_destroy cancels an owner
 * resolution still in flight, whose ud is s). Nothing may call into s
 * after this. */
void stage_close(struct stage *s, void (*done)(void *), void *ud);

#endif
