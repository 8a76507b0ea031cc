/*
 * fastsync.h - fast sync (--fast-sync): learn of a ConfigMap or Secret edit
 * from the API and nudge the kubelet, instead of waiting 60-90 s for its
 * periodic pod sync.
 *
 * One metadata-only watch per object (kube/kwatch.h): the objects named by
 * --fast-sync-objects, else every ConfigMap and Secret the agent's own pod
 * spec names (kube/podrefs.h, one GET of the pod). When an object changes
 * (a resourceVersion kwatch has not seen and that is not older than one it
 * knows), the agent PATCHes one annotation of its own pod,
 * reload-agent.io/sync: <resourceVersion>; the kubelet syncs the pod at
 * once and AtomicWriter swaps the volume's ..data when the bytes differ.
 * The inotify path and the content hash then decide, as without fast sync.
 *
 * A nudge is confirmed by the next content change the monitor reports
 * (fastsync_content_changed). Without one within a bounded window (the
 * kubelet's cache may lag, so its sync wrote the old bytes) the agent
 * nudges again, with a new value and a growing window, at most
 * FASTSYNC_MAX_NUDGES times; then it falls back to the kubelet's own
 * periodic sync and says so in the log and in /status. An edit that
 * changes only an object's metadata (a label) ends that way too: its
 * bytes on disk do not change.
 *
 * The API budget (docs/fast-sync.md): the watches' backoff (kwatch.h); at
 * most one PATCH in flight, at least FASTSYNC_NUDGE_FLOOR_MS between two
 * (changes meanwhile make one nudge, for the newest), one nudge per change
 * plus the re-nudges above. When the budget holds a request back, that is
 * counted (reload_agent_fast_sync_budget_hits_total) and said in the log
 * at warn, at most once per FASTSYNC_BUDGET_LOG_MS and limit.
 */
#ifndef RA_FASTSYNC_H
#define RA_FASTSYNC_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "kube/kube.h"

#define FASTSYNC_MAX_NUDGES 4    /* per change, the first included */
#define FASTSYNC_CONFIRM_MS 2000 /* the first window; doubles per nudge */
#define FASTSYNC_CONFIRM_CAP_MS 16000
#define FASTSYNC_NUDGE_FLOOR_MS 1000 /* between two PATCHes of the pod */
#define FASTSYNC_BUDGET_LOG_MS 60000 /* one budget line per limit at most this often */

struct fastsync;

struct fastsync_opts {
    const char *const *objects; /* "configmap/NAME" or "secret/NAME"; none: from the pod spec */
    size_t nobjects;
    uint64_t confirm_ms;      /* 0 = FASTSYNC_CONFIRM_MS (tests shorten it) */
    int max_nudges;           /* 0 = FASTSYNC_MAX_NUDGES */
    uint64_t watch_timeout_s; /* 0 = kwatch's default */
};

/* Starts: reads the objects (or the pod), opens the watches. k must
 * outlive f (close f first). Returns 0 and *out, or -EINVAL with a
 * one-line reason in err (an object that is not KIND/NAME). */
int fastsync_start(struct kube *k, const struct fastsync_opts *o, struct fastsync **out, char *err,
                   size_t errlen);

/* The monitor saw the content change: a pending nudge is confirmed. */
void fastsync_content_changed(struct fastsync *f);

/* Adds the "fast_sync" object of /status to root. */
void fastsync_status(const struct fastsync *f, cJSON *root);

/* Stops: the watches close, a request in flight is cancelled; f is freed
 * once every handle is closed, then done(ud) runs (may be NULL). */
void fastsync_close(struct fastsync *f, void (*done)(void *), void *ud);

#endif
