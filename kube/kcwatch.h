/*
 * kcwatch.h - a whole collection watched, metadata only: the ConfigMaps,
 * the Secrets or the Pods of one namespace, for the cluster sync service
 * (sync/service.c, docs/sync.md). kwatch.h follows one object by name;
 * this follows every object of a resource with one stream.
 *
 * Cluster scope (kcwatch_opts.ns NULL, GET /api/v1/RESOURCE?watch=1):
 * Pods and ConfigMaps only, whose PartialObjectMetadata carries each
 * object's metadata.namespace. Never Secrets: they come as a Table with
 * includeObject=None, whose rows hold only the columns (name, type, data
 * count, age), no namespace, so a Secret's event across namespaces could
 * not say whose it is (the sync service watches Secrets per namespace).
 *
 * It never lists. A watch from resourceVersion 0 ("Start at Any", served
 * from the API server's watch cache) begins with every object as an ADDED
 * event, one line each, then the changes: the service's memory is one
 * event line at a time, never a list body (no paging needed: nothing is
 * held but the line). ConfigMaps and Pods come as PartialObjectMetadata;
 * Secrets as a Table with includeObject=None (kwatch.h says why: client-side
 * apply stores a Secret's values in an annotation), whose event carries
 * the object's resourceVersion and its name, never an annotation.
 *
 * Resuming: from the last bookmark, or the last event once the stream did
 * not start from 0 (the initial events of a watch from 0 come in no order
 * of resourceVersion, so only a bookmark gives a resume point there).
 * After a 410 Gone (status or ERROR event) or a malformed event it starts
 * again from 0, so an object changed meanwhile is seen at its new version.
 *
 * The API budget is kwatch's (kube/kwatch.h, docs/fast-sync.md): every
 * failure (no response, a status >= 400, an ERROR event, a malformed line,
 * a stream shorter than KWATCH_MIN_STREAM_MS, a head later than
 * KWATCH_HEAD_TIMEOUT_MS, a line slower than KWATCH_LINE_TIMEOUT_MS) waits
 * the backoff: KWATCH_RETRY_BASE_MS doubling to KWATCH_RETRY_CAP_MS,
 * 75-125 %; one request per step; the count starts over only after a
 * stream that stayed open KWATCH_MIN_STREAM_MS. No 410 storm: a relist
 * (a watch from 0) is one request per backoff step; a 410 after a failure
 * of another kind (an API server back from a restart) waits the first
 * step, a 410 after a 410 the count's (backoff_watch_step). A wait after a
 * failure without an answer (refused, no response head) is cut short by
 * the next answer to any request of the same kube client (the service's
 * Lease read, every retry period): the watch tries again within a draw in
 * [0, the first step), once per count of failures (kube__wait_answer).
 */
#ifndef RA_KCWATCH_H
#define RA_KCWATCH_H

#include <stddef.h>
#include <stdint.h>

#include "kube/kube.h"

struct kcwatch;
struct cJSON;

enum kcwatch_what { KCWATCH_ADDED, KCWATCH_MODIFIED, KCWATCH_DELETED, KCWATCH_ERROR };

struct kcwatch_event {
    enum kcwatch_what what;
    const char *name;         /* the object's name (not KCWATCH_ERROR) */
    const char *ns;           /* its namespace: the watch's, or (cluster scope) the
                                 object's metadata.namespace, a valid label */
    const char *rv;           /* its resourceVersion */
    const struct cJSON *meta; /* ADDED/MODIFIED of PartialObjectMetadata: its metadata
                                 (valid during the callback); NULL for Secrets */
    int initial;              /* part of a watch from 0 (the state, maybe old news) */
    const char *error;        /* KCWATCH_ERROR: one line */
    int gone;                 /* KCWATCH_ERROR: a 410 (the next watch starts from 0) */
    int failures;             /* KCWATCH_ERROR: failures in a row */
    uint64_t retry_ms;        /* KCWATCH_ERROR: the wait before the next request */
};

typedef void (*kcwatch_cb)(void *ud, const struct kcwatch_event *ev);

struct kcwatch_opts {
    const char *resource;     /* "configmaps", "secrets" or "pods" */
    const char *ns;           /* the namespace (a DNS-1123 label); NULL: every
                                 namespace (pods and configmaps only, above) */
    uint64_t watch_timeout_s; /* timeoutSeconds; 0 = random 1800..3600 */
    uint64_t retry_base_ms;   /* 0 = KWATCH_RETRY_BASE_MS */
    uint64_t retry_cap_ms;    /* 0 = KWATCH_RETRY_CAP_MS */
};

struct kcwatch_stats {
    unsigned watches;   /* requests sent */
    unsigned from_zero; /* of them, from resourceVersion 0 */
    unsigned events, bookmarks, gone, errors;
    unsigned woken; /* waits cut short by another request's answer */
    int streaming;  /* a stream is open */
};

/* Starts watching (the first request runs from the loop, never inside this
 * call). All of o is copied; k must outlive the watch. Returns 0 and *out,
 * or -EINVAL (an unknown resource, a namespace that is not a label,
 * Secrets at cluster scope). At cluster scope an event without a valid
 * metadata.namespace is a malformed event (the watch starts again from 0). */
int kcwatch_start(struct kube *k, const struct kcwatch_opts *o, kcwatch_cb cb, void *ud,
                  struct kcwatch **out);

void kcwatch_get_stats(const struct kcwatch *w, struct kcwatch_stats *s);

/* Stops (no callback after this), frees w once its timer is closed. Safe
 * from w's own callback. */
void kcwatch_close(struct kcwatch *w);

#endif
