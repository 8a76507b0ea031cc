/*
 * fuzz_stagestate.c - libFuzzer target for the stage record a replica reads
 * from its workload's Lease (the annotation reload-agent.io/stage, written
 * by other pods: untrusted), run/stagestate.c: stagestate_parse, then every
 * decision on what it parsed.
 *
 * Input: the record's JSON.
 *
 * Invariants: a parse either fails with a one-line, non-empty reason, or
 * gives a state within the limits that prints back to JSON which parses to
 * the same state; acquire, release, renew and leave never crash, and what
 * they would write is within the limits too and parses again; an acquire
 * that writes gives the pod a slot; a halted hash is never a write.
 */
#include "run/stagestate.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

#define ME "web-1"
#define H "ab"

static int limits(const struct stagestate *s)
{
    return s->nactive <= STAGESTATE_MAX_ACTIVE + 1 && s->nverified <= STAGESTATE_MAX_VERIFIED &&
           s->nhalted <= STAGESTATE_MAX_HALTED && s->width <= STAGESTATE_MAX_WIDTH;
}

/* s prints, parses again and prints the same. */
static void round_trip(const struct stagestate *s)
{
    char err[256];
    char *j = stagestate_print(s);
    struct stagestate again;
    CHECK(stagestate_parse(j, &again, err, sizeof err) == 0);
    char *j2 = stagestate_print(&again);
    CHECK(strcmp(j, j2) == 0);
    free(j);
    free(j2);
    stagestate_free(&again);
}

static int every_other(void *ud, const char *pod, uint64_t n)
{
    (void)ud;
    return (n + strlen(pod)) % 2 == 0;
}

static void decide(const struct stagestate *s)
{
    struct stagestate_acq a;
    stagestate_acquire(s, ME, H, 2, 1000, every_other, NULL, &a);
    if (a.verdict == STAGESTATE_WRITE) {
        CHECK(stagestate_find_slot(&a.next, ME) >= 0);
        CHECK(strcmp(a.next.hash, H) == 0);
        CHECK(limits(&a.next));
        round_trip(&a.next);
    }
    if (stagestate_find_halt(s, H)) CHECK(a.verdict == STAGESTATE_HALTED);
    stagestate_acq_free(&a);
    struct stagestate n;
    for (int ok = 0; ok < 2; ok++)
        if (stagestate_release(s, ME, H, ok, "why", &n)) {
            CHECK(stagestate_find_slot(&n, ME) < 0);
            CHECK(limits(&n));
            round_trip(&n);
            stagestate_free(&n);
        }
    if (stagestate_renew(s, ME, H, &n)) {
        round_trip(&n);
        stagestate_free(&n);
    }
    if (stagestate_leave(s, ME, &n)) {
        CHECK(stagestate_find_slot(&n, ME) < 0);
        stagestate_free(&n);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    struct stagestate st;
    char err[256] = "";
    if (stagestate_parse(s, &st, err, sizeof err) == 0) {
        CHECK(limits(&st));
        round_trip(&st);
        decide(&st);
        stagestate_free(&st);
    } else {
        CHECK(err[0] && !strchr(err, '\n'));
    }
    free(s);
    return 0;
}
