/*
 * stage.h - the stage gate of issue 26 (docs/safe-reload.md, "Stage"): the
 * replicas of one workload apply a change one at a time (or N, or P%), each
 * after the previous ones verified it, and a rejection or a failed
 * verification anywhere halts the change for the whole workload.
 *
 * The contract between the engine (run/engine.c, which calls it) and the
 * coordination through the API (which implements it). The engine calls:
 *   - stage_acquire after the content was validated, before the copy the
 *     app reads is swapped and before the action;
 *   - stage_release(ok) after the action and its verification passed;
 *   - stage_release(!ok) after a failed verification (rolled back or not),
 *     after a failed action, and after a rejection (then without a prior
 *     acquire: the replica found the content invalid, which halts it for
 *     the workload as well).
 * A NULL struct stage * means no staging: the engine treats it as an
 * immediate STAGE_GO and calls nothing here.
 */
#ifndef RA_STAGE_H
#define RA_STAGE_H

enum stage_verdict {
    STAGE_GO,     /* this replica may apply hash now */
    STAGE_HALTED, /* the change halted for the workload: do not apply hash */
    STAGE_ALONE,  /* no coordination (the API cannot be reached): act alone, logged */
};

struct stage;

/* Asks for a slot to apply content hash (64 hex). cb runs exactly once,
 * never inside the call, on the loop. The engine keeps ud valid until cb
 * runs, even when it shuts down meanwhile (it then ignores the verdict). */
void stage_acquire(struct stage *s, const char *hash, void (*cb)(void *ud, enum stage_verdict),
                   void *ud);

/* After verify: ok, this pod verified hash; !ok, the change halts for the
 * whole workload (Event ConfigHalted on the workload naming the pod and the
 * hash, with reason, one line). */
void stage_release(struct stage *s, const char *hash, int ok, const char *reason);

#endif
