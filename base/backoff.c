/*
 * backoff.c - capped exponential backoff with jitter, one xorshift64*
 * generator, and the ns -> ms conversion (see backoff.h).
 */
#include "base/backoff.h"

#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static struct ra_rng g_rng = {0x9e3779b97f4a7c15ULL};

void ra_rng_seed(struct ra_rng *r, uint64_t seed)
{
    /* splitmix64 of the seed: nearby seeds give unrelated states */
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    r->s = z ? z : 0x9e3779b97f4a7c15ULL;
}

uint64_t ra_rng_next(struct ra_rng *r)
{
    uint64_t x = r->s ? r->s : 0x9e3779b97f4a7c15ULL;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545f4914f6cdd1dULL;
}

uint64_t ra_rng_below(struct ra_rng *r, uint64_t n)
{
    if (n == 0) return 0;
    /* rejection sampling: no modulo bias */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = ra_rng_next(r);
    while (x >= limit);
    return x % n;
}

struct ra_rng *ra_rng_process(void) { return &g_rng; }

void ra_rng_seed_process(void)
{
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec;
    }
    ra_rng_seed(&g_rng, seed);
}

uint64_t backoff_next(const struct backoff *p, int attempt, struct ra_rng *rng)
{
    uint64_t d = p->base_ms;
    for (int i = 1; i < attempt && d < p->cap_ms; i++) d = d > UINT64_MAX / 2 ? UINT64_MAX : d * 2;
    if (d > p->cap_ms) d = p->cap_ms;
    if (d > UINT64_MAX / 2) d = UINT64_MAX / 2; /* room for the jitter above d */
    switch (p->jitter) {
    case BACKOFF_JITTER_EQUAL: return d - d / 2 + ra_rng_below(rng, d / 2 + 1);
    case BACKOFF_JITTER_SPREAD: return d - d / 4 + ra_rng_below(rng, d / 2 + 1);
    case BACKOFF_JITTER_NONE: break;
    }
    return d;
}

int backoff_watch_step(int fails, int gone, int *last_gone)
{
    int step = gone && !*last_gone ? 1 : fails;
    *last_gone = gone;
    return step;
}

uint64_t ra_ms_of_ns(int64_t ns)
{
    if (ns <= 0) return 0;
    return (uint64_t)(ns / 1000000) + (ns % 1000000 != 0);
}
