/*
 * backoff.h - the one retry policy type and the one random generator.
 *
 * Every retry in the agent (the engine's failed actions, the Kubernetes
 * client's transient errors, the monitor's hash errors) and every jitter
 * (the rollout's spread between replicas) draws its delay here. The process
 * generator is seeded once in main (getrandom, else time and PID), so
 * replicas never share a sequence; tests seed their own generator and get
 * reproducible delays.
 */
#ifndef RA_BACKOFF_H
#define RA_BACKOFF_H

#include <stdint.h>

/* xorshift64* state: never 0. Not for cryptography. */
struct ra_rng {
    uint64_t s;
};

/* Seeds r; any seed works (0 is mapped to a fixed non-zero state). */
void ra_rng_seed(struct ra_rng *r, uint64_t seed);

/* The next 64 random bits. */
uint64_t ra_rng_next(struct ra_rng *r);

/* A uniform draw in [0, n); 0 when n is 0. */
uint64_t ra_rng_below(struct ra_rng *r, uint64_t n);

/* The process's generator (loop thread only). ra_rng_seed_process seeds it
 * from getrandom(2), falling back to the time and the PID; main calls it
 * once. Unseeded it still works, with a fixed sequence. */
struct ra_rng *ra_rng_process(void);
void ra_rng_seed_process(void);

enum backoff_jitter {
    BACKOFF_JITTER_NONE = 0, /* exactly the capped exponential delay d */
    BACKOFF_JITTER_EQUAL,    /* uniform in [d/2, d] */
    BACKOFF_JITTER_SPREAD,   /* uniform in [3d/4, 5d/4]: 75..125 % of d */
};

/* base_ms x 2^(attempt-1), capped at cap_ms (the cap wins even when it is
 * below base_ms), then jittered. */
struct backoff {
    uint64_t base_ms;
    uint64_t cap_ms;
    enum backoff_jitter jitter;
};

/* The delay before retry number `attempt` (1 = the first retry; values
 * below 1 count as 1) under policy p, drawing from rng (may be NULL only
 * with BACKOFF_JITTER_NONE). Never overflows: doubling stops at the cap. */
uint64_t backoff_next(const struct backoff *p, int attempt, struct ra_rng *rng);

/* The step a watch's failure number fails (>= 1) waits, for kube/kwatch.c
 * and kube/kcwatch.c. gone: this failure is a 410 Gone. A 410 that follows
 * a failure of another kind waits the first step: the server answered, so
 * it is up, and one that was away (a restart) answers every resume with
 * 410; the relist is due now, not after the step the outage's failures
 * reached (they reached 8 s and the relist waited it: an edit made as the
 * API server came back was nudged 14 s late). A 410 after a 410 waits the
 * step of the count, so a server that answers every watch with 410 is not
 * asked faster than any other failing one. *last_gone keeps the kind of
 * the previous failure; the caller clears it with the count. */
int backoff_watch_step(int fails, int gone, int *last_gone);

/* Nanoseconds to milliseconds, rounded up; <= 0 gives 0. Defined for every
 * int64_t (no overflow near INT64_MAX). */
uint64_t ra_ms_of_ns(int64_t ns);

#endif
