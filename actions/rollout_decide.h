/*
 * rollout_decide.h - the rollout action's decision, without I/O: from the
 * owner's GET reply and what this agent remembers, decide whether the
 * template is already current, the rollout is blocked (and why), it must
 * wait for --min-interval, or the PATCH goes out. actions/rollout.c acts on
 * the result; tests/test_rollout.c and tests/fuzz/fuzz_apijson.c drive it
 * directly. "Will this patch roll?" is kinds_not_rolling() (kube/owner.h),
 * the same judgement the owner resolution uses.
 */
#ifndef RA_ROLLOUT_DECIDE_H
#define RA_ROLLOUT_DECIDE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "kube/owner.h"

#define ROLLOUT_FLIP_LIMIT 3
#define ROLLOUT_FLIP_WINDOW_S 600

/* What the owner's GET reply says (pointers into root). */
struct rollout_state {
    struct cJSON *root;       /* the parsed reply (owned) */
    const char *current;      /* spec.template.metadata.annotations[hash annotation] */
    const char *their_files;  /* ... [files annotation] */
    const char *last_rollout; /* metadata.annotations[<prefix>/last-rollout] */
    const char *recent;       /* metadata.annotations[<prefix>/recent-rollouts]: the times
                               * (unix seconds, comma-separated) of the last rollouts */
};

/* The oscillation guard's memory, kept by the rollout across applies. */
struct rollout_guard {
    char last_set[65];                /* the hash this agent last PATCHed, "" if none */
    time_t flips[ROLLOUT_FLIP_LIMIT]; /* when it was found replaced by another hash */
    size_t nflips;
};

/* What decide reads besides the state. */
struct rollout_input {
    const struct kinds_kind *kind; /* of the object whose template is patched */
    const char *hash;              /* ours, 64 hex */
    const char *files;             /* our files map (JSON object text), or NULL */
    uint64_t min_interval_ms;      /* --min-interval, 0 = none */
    time_t now;                    /* wall-clock seconds */
    const struct rollout_guard *guard;
    int flip_counted;       /* this apply already recorded the replaced hash
                                         it saw (it then waited for --min-interval) */
    int storm_max;          /* --storm-limit N, 0 = off */
    int64_t storm_window_s; /* --storm-limit's window */
};

enum rollout_verdict {
    ROLLOUT_V_PATCH = 0, /* send the PATCH now */
    ROLLOUT_V_CURRENT,   /* the template already carries our hash */
    ROLLOUT_V_BLOCKED,   /* do not patch: reason says why (permanent for this content) */
    ROLLOUT_V_WAIT,      /* --min-interval: GET again after wait_ms */
    ROLLOUT_V_STORM,     /* rolled storm_max times within the window (by any replica) */
};

struct rollout_decision {
    enum rollout_verdict verdict;
    uint64_t wait_ms;    /* ROLLOUT_V_WAIT */
    int flipped;         /* our hash was replaced by another, and this apply has
                                 not recorded that yet: record it (guard) */
    int owner_blocks;    /* BLOCKED by the owner itself (kinds_not_rolling), not
                                 by the oscillation guard: resolve the owner again next time */
    const char *warning; /* the patch lands but rolls nothing until the user acts
                                 (paused, OnDelete): warn; NULL if none */
    char reason[1400];   /* BLOCKED: one line; otherwise "" */
    char warn_buf[600];  /* storage for warning / kinds_not_rolling */
};

/* The annotation keys derived from --hash-annotation: "<key minus -hash>-files"
 * and "<prefix>/last-rollout". malloc'd (abort on OOM). */
char *rollout__files_key(const char *hash_annotation);
char *rollout__last_key(const char *hash_annotation);
/* "<prefix>/recent-rollouts", malloc'd. */
char *rollout__recent_key(const char *hash_annotation);

/* The times of recent (as the owner holds them, may be NULL) within the
 * window before now, and now, the newest max of them, comma-separated:
 * what the PATCH writes. malloc'd. */
char *rollout__recent_list(const char *recent, time_t now, int max, int64_t window_s);

/* How many times of recent lie within the window before now. */
size_t rollout__recent_count(const char *recent, time_t now, int64_t window_s);

/* Parses the owner's GET reply (body of body_len bytes, not necessarily
 * terminated). Returns 0 and *st (free with rollout__state_free), or
 * -EINVAL when the body is not a JSON object. */
int rollout__parse_state(const char *body, size_t body_len, const char *hash_annotation,
                         struct rollout_state *st);
void rollout__state_free(struct rollout_state *st);

/* The decision. Pure: reads st and in only, writes *d. Order: a blocking
 * kinds_not_rolling reason; already current; the oscillation guard (a
 * replaced hash, ROLLOUT_FLIP_LIMIT times within ROLLOUT_FLIP_WINDOW_S,
 * counting this one); the storm limit (storm_max rollouts of the workload
 * within the window, by any replica: ROLLOUT_V_STORM); --min-interval since
 * last-rollout; else PATCH. */
void rollout__decide(const struct rollout_state *st, const struct rollout_input *in,
                     struct rollout_decision *d);

/* Records one flip at now in g (drops those older than the window). */
void rollout__guard_flip(struct rollout_guard *g, time_t now);

#endif
