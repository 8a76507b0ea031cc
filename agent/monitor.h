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
 * file) are logged and the evaluation is retried with backoff.
 */
#ifndef RA_MONITOR_H
#define RA_MONITOR_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

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

struct monitor_opts {
    const char *const *roots;
    size_t nroots;
    int64_t debounce_ns;
    int64_t resync_ns;          /* 0 = no resync */
    const char *const *ignore;  /* globs; files matching are left out */
    size_t nignore;
    /* Optional: marks files that also feed manifest.sub (e.g. rollout files). */
    int (*is_sub)(void *ud, const char *logical_path);
    void *sub_ud;
    const struct monitor_extra *extra; /* may be NULL */
    size_t nextra;
};

/* Called after each real change with the new manifest (owned by the
 * monitor, valid until the next change) and the diff from the previous one. */
typedef void (*monitor_change_cb)(void *ud, const struct hash_manifest *cur,
                                  const struct hash_diff *diff);

/* Starts watching and takes the baseline synchronously (logged as
 * "baseline"). opts is copied. Returns 0 and *out, or <0 with nothing left
 * open. */
int monitor_start(uv_loop_t *loop, const struct monitor_opts *opts, monitor_change_cb cb, void *ud,
                  struct monitor **out);

/* The manifest last observed (the baseline until the first change). */
const struct hash_manifest *monitor_current(const struct monitor *m);

/* Changes debounce and resync at run time. */
void monitor_set_timing(struct monitor *m, int64_t debounce_ns, int64_t resync_ns);

/* Evaluates now (SIGHUP, tests). */
void monitor_kick(struct monitor *m);

/* Counters for metrics and /status. */
uint64_t monitor_watch_events(const struct monitor *m);
uint64_t monitor_changes(const struct monitor *m);
size_t monitor_root_count(const struct monitor *m);
const char *monitor_root(const struct monitor *m, size_t i);
int monitor_root_present(const struct monitor *m, size_t i);

/* Stops everything; m is freed after its handles closed, then done(ud). */
void monitor_close(struct monitor *m, void (*done)(void *), void *ud);

#endif
