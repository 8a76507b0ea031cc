/*
 * service.h - `reload-agent sync`, the cluster sync service
 * (docs/sync.md): the watches of the ConfigMaps, Secrets and Pods of each
 * namespace it serves (metadata only, kube/kcwatch.h; with all_namespaces,
 * one pod watch across the cluster and the ConfigMaps and Secrets of each
 * namespace only while it has pods that name objects, sync/nswatch.h),
 * the index of which pods name which objects (sync/index.h), the leader
 * election (sync/elect.h) and the nudges (sync/nudge.h). Every replica watches and
 * keeps the index; only the leader nudges. A replica that becomes the
 * leader nudges again for the changes of the last lease duration that the
 * pods do not show yet (their reload-agent.io/sync annotation names the
 * version they were nudged for), so a leader change loses no nudge and
 * doubles none that the pods show.
 */
#ifndef RA_SYNC_SERVICE_H
#define RA_SYNC_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#define SYNC_MAX_NAMESPACES 64   /* named by --namespaces */
#define SYNC_MAX_WATCHED_NS 1024 /* --all-namespaces: namespaces watched at once */
/* The watches' backoff cap: kwatch's 30 s suits a watch per pod; the
 * service holds a few per cluster, and a change must not wait half a
 * minute after an API server restart (docs/sync.md). */
#define SYNC_WATCH_RETRY_CAP_MS 8000

struct sync_opts {
    const char *api, *token_file, *ca_file;      /* NULL: in-cluster */
    const char *namespace_;                      /* the Lease's; NULL: $POD_NAMESPACE, ... */
    const char *namespaces[SYNC_MAX_NAMESPACES]; /* served (valid labels) */
    size_t nns;
    int all_namespaces;      /* serve every namespace (then nns is 0) */
    size_t max_watched_ns;   /* all_namespaces: namespaces watched at once (1..
                               SYNC_MAX_WATCHED_NS; 0: the most) */
    const char *lease;       /* the Lease's name */
    const char *identity;    /* NULL: $POD_NAME, else host name and pid */
    uint64_t lease_ms;       /* the lease duration */
    uint64_t lease_retry_ms; /* its read/renew period */
    double qps;
    unsigned burst;
    uint64_t coalesce_ms;
    uint64_t watch_timeout_s;     /* 0: random 1800..3600 */
    uint64_t watch_retry_base_ms; /* 0: kwatch's */
    uint64_t watch_retry_cap_ms;  /* the backoff's cap (SYNC_WATCH_RETRY_CAP_MS by default) */
};

/* Runs until SIGTERM or SIGINT. Returns the exit status: 0, or 1 when it
 * could not start (said on stderr). */
int sync_run(const struct sync_opts *o);

#endif
