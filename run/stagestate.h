/*
 * stagestate.h - the state of one workload's stage, as its Lease keeps it
 * (the annotation STAGESTATE_ANNOTATION, JSON), and the pure decisions on
 * it that run/stage.c writes back with a compare-and-swap:
 *
 *   acquire  may pod P apply content H now?  write (take a slot, or open
 *            a new stage for H), wait, or halted (H was halted)
 *   release  P verified H (leaves its slot, joins the verified), or P
 *            rejected / failed to verify H (a halt record: H is halted
 *            for the whole workload)
 *   renew    P still works on H: its slot's renewal count goes up
 *
 * The state: the hash being staged, the width (replicas at a time, fixed
 * when the stage opens), the slots' lifetime (ttl_ms), the active slots
 * (pod, renewal count), the pods that verified the hash, and the last
 * STAGESTATE_MAX_HALTED halt records (hash, pod, reason), newest first,
 * kept across stages: a halted hash stays halted when other content was
 * staged since, so a replica that sees it late does not apply it.
 *
 * No I/O and no clock. Whether a slot has expired is the caller's
 * judgement (expired_fn): run/stage.c measures, on its own monotonic
 * clock, how long it has seen a slot without a new renewal count, so no
 * wall clocks are compared across pods (clock skew cannot expire a slot).
 */
#ifndef RA_STAGESTATE_H
#define RA_STAGESTATE_H

#include <stddef.h>
#include <stdint.h>

#define STAGESTATE_ANNOTATION "reload-agent.io/stage"
#define STAGESTATE_HASH_MAX 64
#define STAGESTATE_POD_MAX 253
#define STAGESTATE_MAX_ACTIVE 1000
#define STAGESTATE_MAX_VERIFIED 1000 /* the oldest go first */
#define STAGESTATE_MAX_HALTED 16
#define STAGESTATE_REASON_MAX 300
#define STAGESTATE_MAX_WIDTH 1000

struct stagestate_slot {
    char *pod;
    uint64_t n; /* renewals: a new value tells the others the holder is alive */
};

struct stagestate_halt {
    char hash[STAGESTATE_HASH_MAX + 1];
    char *pod;
    char *reason;
};

struct stagestate {
    char hash[STAGESTATE_HASH_MAX + 1]; /* the content being staged; "" = none yet */
    int width;                          /* slots at a time (>= 1 once a stage is open; 0 none) */
    uint64_t ttl_ms;                    /* a slot not renewed this long is expired */
    struct stagestate_slot *active;
    size_t nactive;
    char **verified;
    size_t nverified;
    struct stagestate_halt *halted; /* newest first */
    size_t nhalted;
};

/* 1 if s is a content hash as the gate takes it: 1 to 64 lower-case hex
 * digits. */
int stagestate_is_hash(const char *s);

/* Parses the annotation's value (NULL or "": the empty state). Returns 0
 * and *out (free with stagestate_free), or -EINVAL with a one-line reason
 * in err (not JSON, a member of the wrong type, a hash or pod name that is
 * not one, more entries than the limits). Never quotes the value. Aborts
 * on OOM. */
int stagestate_parse(const char *json, struct stagestate *out, char *err, size_t errlen);

/* The annotation's value for s: compact JSON, malloc'd. */
char *stagestate_print(const struct stagestate *s);

void stagestate_free(struct stagestate *s);

/* A deep copy of src into *dst (free with stagestate_free). */
void stagestate_copy(const struct stagestate *src, struct stagestate *dst);

/* The width of a new stage: count when > 0; else percent (1-100) of
 * replicas, rounded up (25% of 10 is 3), at least 1; replicas <= 0
 * (unknown) gives 1. At most STAGESTATE_MAX_WIDTH. */
int stagestate_width(int count, int percent, long replicas);

/* Judges whether the slot (pod, n) has expired: 1 yes, 0 no. */
typedef int (*stagestate_expired_fn)(void *ud, const char *pod, uint64_t n);

enum stagestate_verdict {
    STAGESTATE_WRITE,  /* write next; once it is in, the pod may apply the hash */
    STAGESTATE_WAIT,   /* every slot is taken (or another stage still has holders) */
    STAGESTATE_HALTED, /* the hash was halted: halt names by whom */
};

struct stagestate_acq {
    enum stagestate_verdict verdict;
    struct stagestate next;             /* STAGESTATE_WRITE: the state to write (owned) */
    const struct stagestate_halt *halt; /* STAGESTATE_HALTED: into cur */
    int opened;                         /* the write opens a new stage for the hash */
    int resumed;                        /* the pod already held a slot of the hash */
    size_t taken_over;                  /* expired slots the write drops */
    const char *taken_pod;              /* the first of them (into cur), or NULL */
    size_t live;                        /* slots held by others, not expired */
};

/* Decides for pod me wanting hash (stagestate_is_hash) with cur as last
 * read. A new stage is opened with width and ttl_ms; an open one keeps its
 * own. Expired slots (expired(ud, pod, n); me's never) do not count and
 * are dropped by the write. Fills *out; free out->next with
 * stagestate_acq_free. */
void stagestate_acquire(const struct stagestate *cur, const char *me, const char *hash, int width,
                        uint64_t ttl_ms, stagestate_expired_fn expired, void *ud,
                        struct stagestate_acq *out);

void stagestate_acq_free(struct stagestate_acq *a);

/* Pod me is done with hash: ok, it verified it (it leaves the active
 * slots and joins the verified, when the stage is hash's); !ok, it
 * rejected it or failed to verify it: a halt record {hash, me, reason}
 * (cut to STAGESTATE_REASON_MAX bytes) goes first in the halted list,
 * unless hash is halted already, and me leaves the active slots. Returns
 * 1 with *next to write (free with stagestate_free), 0 when nothing
 * changes. */
int stagestate_release(const struct stagestate *cur, const char *me, const char *hash, int ok,
                       const char *reason, struct stagestate *next);

/* Pod me still works on hash: its slot's renewal count goes up. Returns 1
 * with *next to write, 0 when me holds no slot of hash (another replica
 * took it over as expired, or the stage moved on). */
int stagestate_renew(const struct stagestate *cur, const char *me, const char *hash,
                     struct stagestate *next);

/* Pod me leaves its slot without a verdict (its agent stops: the pod is
 * deleted, scaled down): returns 1 with *next to write, 0 when me holds no
 * slot. */
int stagestate_leave(const struct stagestate *cur, const char *me, struct stagestate *next);

/* The halt record of hash in s, or NULL. */
const struct stagestate_halt *stagestate_find_halt(const struct stagestate *s, const char *hash);

/* The index of pod's slot in s->active, or -1. */
long stagestate_find_slot(const struct stagestate *s, const char *pod);

#endif
