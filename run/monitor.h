/*
 * monitor.h - turns filesystem hints into content changes.
 *
 * A monitor owns one struct watch over the --watch roots, a debounce timer
 * and a resync timer. Any hint (re)arms the debounce timer; when it fires
 * the roots are hashed and, if the canonical hash differs from the last one
 * observed, a "change" event is logged (hash + added/removed/modified
 * logical paths) and the change callback runs. Identical content never
 * produces a change, however many events arrive.
 *
 * Roots that have never existed are left out of the hash; a root that
 * existed and disappeared defers every evaluation until it is back (a
 * vanishing volume is not "all files removed"). Hash errors (an unreadable
 * file) are logged, naming the path, and the evaluation is retried with
 * backoff.
 *
 * The baseline is the first hash that succeeds: until then there is no
 * baseline (monitor_has_baseline() = 0), and when it is taken the baseline
 * callback runs; it is never reported as a change.
 *
 * Hashing never stalls the loop on content: trees that were small last time
 * (<= 256 files and <= 1 MiB, checked again file by file as they are read)
 * are hashed inline; anything larger, and the baseline, by a job on a thread
 * of its own, while the loop keeps serving. A hint during a job drops the
 * job's result (stale) and hashes again; after 5 such jobs in a row, or
 * when the hash itself reports a file that keeps changing, a hash-error is
 * logged and the next attempt waits for the backoff even if events keep
 * coming. monitor_close() never waits for a job: it is abandoned at once
 * (result dropped; it stops at its next file and cleans up on its thread).
 *
 * Directories that could not be watched (fs.inotify.max_user_watches) are
 * counted (monitor_unwatched(), the reload_agent_unwatched_directories
 * gauge) and armed again every 2 s while any is missing, and on each resync.
 */
#ifndef RA_MONITOR_H
#define RA_MONITOR_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "config/rules.h"
#include "hash/hash.h"
#include "watch/watch.h"

struct monitor;

/* A file watched on the same inotify instance for someone else (the
 * annotations file, the service-account token): its events go to cb and
 * never cause an evaluation. One instance per agent keeps a node's
 * per-user inotify instance limit (fs.inotify.max_user_instances, 128 by
 * default) from running out when many pods run the agent as one UID. */
struct monitor_extra {
    const char *path;
    watch_cb cb;
    void *ud;
};

/* Called once, on the loop thread, when the baseline is taken (the manifest
 * is owned by the monitor; see monitor_current). */
typedef void (*monitor_baseline_cb)(void *ud, const struct hash_manifest *base);

struct monitor_opts {
    const char *const *roots;
    size_t nroots;
    int64_t debounce_ns;
    int64_t resync_ns; /* 0 = no resync */
    /* 0: a kubelet ..data swap is evaluated MONITOR_SWAP_QUIET_MS after its
     * last event, once the swapped roots show the committed content
     * (watch/awlayout.h), at most MONITOR_SWAP_CAP_MS after the first swap;
     * 1: it waits out debounce_ns like any other event (--debounce-swaps). */
    int debounce_swaps;
    /* The path -> action decision (config/rules.h), copied: an ignored
     * file is left out of the content, a rollout-class file also feeds
     * manifest.sub (the rollout hash). NULL: nothing is ignored and
     * manifest.sub is empty. */
    const struct path_rules *rules;
    monitor_baseline_cb baseline;      /* optional; gets the ud of monitor_start */
    const struct monitor_extra *extra; /* may be NULL */
    size_t nextra;
};

/* Called after each real change with the new manifest (owned by the
 * monitor, valid until the next change) and the diff from the previous one. */
typedef void (*monitor_change_cb)(void *ud, const struct hash_manifest *cur,
                                  const struct hash_diff *diff);

/* Starts watching; the baseline is taken by the first evaluation, which
 * runs from the loop (logged as "baseline", then opts->baseline runs). opts
 * is copied. Returns 0 and *out, or <0 (the handles it opened close on the
 * loop by themselves). */
int monitor_start(uv_loop_t *loop, const struct monitor_opts *opts, monitor_change_cb cb, void *ud,
                  struct monitor **out);

/* The manifest last observed (the baseline until the first change). */
const struct hash_manifest *monitor_current(const struct monitor *m);

/* Changes debounce and resync at run time. */
void monitor_set_timing(struct monitor *m, int64_t debounce_ns, int64_t resync_ns);

/* The quiet period and cap of the swap path (monitor_opts.debounce_swaps). */
#define MONITOR_SWAP_QUIET_MS 10
#define MONITOR_SWAP_CAP_MS 40

/* Changes monitor_opts.debounce_swaps at run time. */
void monitor_set_debounce_swaps(struct monitor *m, int on);

/* Replaces the path -> action decision (copied) for the hashes that start
 * from now on. The ignore globs change what the content is: when they
 * differ, start a new monitor instead (run/run.c does), so that the
 * baseline is taken again. */
void monitor_set_rules(struct monitor *m, const struct path_rules *rules);

/* Evaluates now (SIGHUP, tests). */
void monitor_kick(struct monitor *m);

/* Counters for /status. */
uint64_t monitor_changes(const struct monitor *m);
size_t monitor_root_count(const struct monitor *m);
const char *monitor_root(const struct monitor *m, size_t i);
int monitor_is_root_present(const struct monitor *m, size_t i);
/* Directories that exist but are not watched (see above). */
size_t monitor_unwatched(const struct monitor *m);
/* 1 once the baseline is taken. */
int monitor_has_baseline(const struct monitor *m);
/* 1 while a hash runs on a worker thread. */
int monitor_hashing(const struct monitor *m);
/* Ready: the baseline is taken and every directory is watched. */
int monitor_is_ready(const struct monitor *m);

/* Stops everything; m is freed after its handles closed, then done(ud).
 * A hash in progress is abandoned, not waited for. */
void monitor_close(struct monitor *m, void (*done)(void *), void *ud);

#endif
