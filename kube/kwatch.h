/*
 * kwatch.h - one Kubernetes object watched by name: a list, then a watch,
 * both with fieldSelector=metadata.name=NAME (so RBAC resourceNames can
 * authorize them) and both metadata only (PartialObjectMetadata), so a
 * Secret's data is never sent to the agent: it learns names and
 * resourceVersions, nothing else.
 *
 * The watch is a long-lived streamed response of newline-delimited JSON
 * events (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR), read through httpc's
 * on_data. It asks for bookmarks, so a reconnect resumes from a recent
 * resourceVersion. A 401 re-reads the token (kube/kube.c) before the next
 * attempt, so a rotated token is used on the next connection. A 403's
 * error names the Role the caller says grants the watch (fast sync's,
 * staging's: their resourceNames grant it). A watch never gives up: it says what
 * failed through the callback and tries again.
 *
 * The API budget (docs/fast-sync.md). Every failure - a request without a
 * response or with a status >= 400 (410 Gone included), an ERROR event
 * (410 included), a malformed event or one for another object, a stream
 * that ends less than KWATCH_MIN_STREAM_MS after it opened (whatever it
 * delivered), a response head that takes longer than
 * KWATCH_HEAD_TIMEOUT_MS, an event line that takes longer than
 * KWATCH_LINE_TIMEOUT_MS - counts, and the next request waits the
 * backoff (base/backoff.c): KWATCH_RETRY_BASE_MS doubling to
 * KWATCH_RETRY_CAP_MS, 75-125 %. Each step sends at most one list (after
 * a 410 or malformed data) and one watch. The count starts over only
 * when a stream has stayed open KWATCH_MIN_STREAM_MS: a successful list
 * or an event does not reset it. A 410 after a failure of another kind
 * waits the first step (an API server back from a restart; a 410 after a
 * 410 waits the count's: backoff_watch_step). A stream that lasted that
 * long and ends cleanly (the server's timeoutSeconds) is resumed at once.
 *
 * What is a change. kwatch reports the object's state with `changed` set
 * only for a resourceVersion of the object it has not seen before and that
 * is not older than one it knows: resourceVersions are compared as
 * apimachinery allows (KEP-5504, stable in Kubernetes 1.35: decimal
 * integers without leading zeros, of one resource, compare by length then
 * digits), and otherwise only for equality with the last KWATCH_SEEN
 * values seen. A relist of an unchanged object, a bookmark, a DELETED
 * event and an event for another name are never a change.
 *
 * Besides ConfigMaps and Secrets (fast sync), it watches one Lease
 * (coordination.k8s.io/v1, staging: run/stage.c), whose state is in its
 * annotations: the metadata of each state is handed to the callback.
 *
 * A Secret's metadata can carry its data: client-side `kubectl apply`
 * stores the whole manifest, values included, in the annotation
 * kubectl.kubernetes.io/last-applied-configuration (seen on a real API
 * server). So a Secret is not asked for as PartialObjectMetadata (nor as a
 * Table with includeObject=Metadata, whose rows carry the same metadata)
 * but as a Table with includeObject=None: the rows hold only the columns
 * (name, type, the number of keys, age), no object and no annotation, and
 * a watch event's Table carries the object's resourceVersion in its own
 * metadata. A Table list says only the list's resourceVersion (no row says
 * the object's), so a Secret is listed once, at start, and after that
 * resynced by a watch from resourceVersion 0 ("any"): the API server
 * starts it with the object's current state as an ADDED event, whose
 * resourceVersion tells whether it changed while the watch was down (not
 * newer than what is known: no change).
 * Either way kwatch reads only names and resourceVersions, wipes its
 * buffers, and never logs an event body.
 */
#ifndef RA_KWATCH_H
#define RA_KWATCH_H

#include <stddef.h>
#include <stdint.h>

#include "kube/kube.h"

/* What kwatch asks for: metadata only, never the object (no fallback to
 * the full object: a server that cannot convert answers 406). */
#define KWATCH_ACCEPT_LIST "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
#define KWATCH_ACCEPT_WATCH "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
#define KWATCH_ACCEPT_TABLE "application/json;as=Table;g=meta.k8s.io;v=v1" /* Secrets */

#define KWATCH_MAX_EVENT (1024 * 1024) /* bytes of one event line */

/* The API budget of one watched object (above). */
#define KWATCH_RETRY_BASE_MS 1000    /* the first backoff step */
#define KWATCH_RETRY_CAP_MS 30000    /* the backoff's cap */
#define KWATCH_MIN_STREAM_MS 30000   /* shorter streams are failures; longer ones reset the count */
#define KWATCH_HEAD_TIMEOUT_MS 10000 /* a watch's response head, from the request */
#define KWATCH_LINE_TIMEOUT_MS 30000 /* one event line, from its first byte */
#define KWATCH_SEEN 8                /* resourceVersions remembered for equality */

struct kwatch;
struct cJSON;

enum kwatch_what {
    KWATCH_STATE, /* the object's state: exists and rv (after a list, or an event) */
    KWATCH_ERROR, /* a request or stream failed; kwatch retries on its own */
};

struct kwatch_event {
    enum kwatch_what what;
    int exists;        /* KWATCH_STATE: the object exists */
    const char *rv;    /* KWATCH_STATE: its resourceVersion ("" when it does not exist,
                          or when rv_unknown) */
    int rv_unknown;    /* KWATCH_STATE: it exists, but a Table list (Secrets) does not
                          say at which resourceVersion */
    int initial;       /* KWATCH_STATE: from the first list (a baseline, not a change) */
    int relist;        /* KWATCH_STATE: from a list after the first, or the first event
                          of a Secret's resync (a reconnect that could not resume) */
    int changed;       /* KWATCH_STATE: it exists at a resourceVersion never seen and
                          not older than a known one (never with initial) */
    const char *error; /* KWATCH_ERROR: one line, valid during the callback */
    int failures;      /* KWATCH_ERROR: failures in a row, this one included */
    uint64_t retry_ms; /* KWATCH_ERROR: the backoff before the next request */
    int gone;          /* KWATCH_ERROR: a 410 Gone (a relist follows) */
    /* KWATCH_STATE of an object that exists, watched as PartialObjectMetadata
     * (not a Table): its metadata as the server sent it (labels,
     * annotations, ...), valid during the callback; else NULL. */
    const struct cJSON *meta;
};

/* Runs on the loop thread. It may call kwatch_close(w) on its own watch. */
typedef void (*kwatch_cb)(void *ud, const struct kwatch_event *ev);

struct kwatch_opts {
    const char *resource;     /* "configmaps" or "secrets" (core group), or "leases"
                                 (coordination.k8s.io/v1: staging's Lease) */
    const char *name;         /* a valid object name */
    uint64_t watch_timeout_s; /* the server's timeoutSeconds; 0 = a random
                                   1800..3600 s (as the kubelet's reflectors) */
    uint64_t retry_base_ms;   /* first retry delay; 0 = KWATCH_RETRY_BASE_MS */
    uint64_t retry_cap_ms;    /* delay cap; 0 = KWATCH_RETRY_CAP_MS */
    enum kube_role role;      /* the Role a 403's error names (zero: the agent's; fast sync
                                 passes KUBE_ROLE_FAST_SYNC) */
};

/* Counts and state, for /status and the tests. */
struct kwatch_stats {
    unsigned lists;       /* list requests sent */
    unsigned watches;     /* watch requests sent (resyncs included) */
    unsigned resyncs;     /* of them, Secret resyncs from resourceVersion 0 */
    int failures;         /* failures in a row (the backoff's step) */
    unsigned events;      /* ADDED/MODIFIED/DELETED received */
    unsigned bookmarks;   /* BOOKMARK received */
    unsigned gone;        /* 410s (status or ERROR event) */
    unsigned errors;      /* failures reported through the callback */
    int streaming;        /* a watch response is open (its head arrived) */
    const char *rv;       /* the object's last known resourceVersion ("" = none) */
    const char *watch_rv; /* where the next watch resumes */
};

/* Starts listing and watching o->name in kube_namespace(k). All of o is
 * copied. Returns 0 and *out (cb runs later, never from inside this call),
 * or -EINVAL for a resource that is not configmaps/secrets/leases or a name
 * that is not an object name. k must outlive the watch (close it first). */
int kwatch_start(struct kube *k, const struct kwatch_opts *o, kwatch_cb cb, void *ud,
                 struct kwatch **out);

/* Fills *s; the strings are valid until the next call into w. */
void kwatch_get_stats(const struct kwatch *w, struct kwatch_stats *s);

/* Stops: the request in flight is cancelled (its callback never runs), no
 * callback of w runs again, and w is freed once its timer is closed; then
 * done(ud) runs (may be NULL). Safe to call from w's own callback. */
void kwatch_close(struct kwatch *w, void (*done)(void *), void *ud);

/* ---- internal: the event parser, without I/O (tests) ---- */

enum kwatch__type {
    KWATCH__ADDED,
    KWATCH__MODIFIED,
    KWATCH__DELETED,
    KWATCH__BOOKMARK,
    KWATCH__ERROR,
};

struct kwatch__event {
    enum kwatch__type type;
    char rv[128];      /* object.metadata.resourceVersion ("" for ERROR) */
    char name[254];    /* ADDED, MODIFIED, DELETED: the object's name (a Table: its one
                          row's first cell; "" when it names no single object) */
    char ns[64];       /* ADDED, MODIFIED, DELETED: its metadata.namespace, a label of at
                          most 63 bytes ("" when absent, longer, or a Table's row) */
    long code;         /* ERROR: the Status code (410 = Gone), else 0 */
    char message[256]; /* ERROR: the Status message, one line */
};

/* Parses one watch event line of len bytes (no newline); table: the watch
 * asked for a Table (Secrets). Returns 0 and *ev, or -EINVAL with a
 * one-line reason in err (not JSON, no type or object, an unknown type, an
 * object that is not PartialObjectMetadata (or a Table without objects),
 * no resourceVersion). Never quotes the line itself. */
int kwatch__parse_event(const char *line, size_t len, int table, struct kwatch__event *ev,
                        char *err, size_t errlen);

/* Compares two resourceVersions as apimachinery's CompareResourceVersion
 * does (KEP-5504): both decimal integers without leading zeros and not
 * "0", any length. Returns 0 with *cmp -1, 0 or 1 (a < b, equal, a > b), or
 * -EINVAL when either is not of that form (then only equality means
 * anything). */
int kwatch__rv_compare(const char *a, const char *b, int *cmp);

/* What one watch knows of its object's resourceVersions: the last
 * KWATCH_SEEN seen, and the highest comparable one known (an object
 * version at or below it is known, or older). */
struct kwatch__rvs {
    char seen[KWATCH_SEEN][128];
    unsigned n, next;
    char high[128];
};

/* 1 if rv is a change: not among those seen and not at or below the
 * highest known; when the two cannot be compared, strict (the first event
 * of a resync, which may be the object's old state) says no, else yes. */
int kwatch__rvs_is_new(const struct kwatch__rvs *r, const char *rv, int strict);

/* Remembers rv as seen (and raises the highest known). */
void kwatch__rvs_note(struct kwatch__rvs *r, const char *rv);

/* Raises the highest known to rv (a list's resourceVersion: the object is
 * at it or older), when comparable. */
void kwatch__rvs_raise(struct kwatch__rvs *r, const char *rv);

/* The same; with meta not NULL and an ADDED or MODIFIED event of a
 * PartialObjectMetadata, *meta is its metadata, detached (the caller
 * frees it with cJSON_Delete), else NULL. */
int kwatch__parse_event_meta(const char *line, size_t len, int table, struct kwatch__event *ev,
                             struct cJSON **meta, char *err, size_t errlen);

/* Parses a list reply (PartialObjectMetadataList; with table, a Table
 * without objects). Returns 0 with the list's resourceVersion in list_rv
 * and, when the list holds the object, *exists = 1 and its resourceVersion
 * in obj_rv ("" with table); or -EINVAL with err. */
int kwatch__parse_list(const char *body, size_t len, const char *name, int table, char *list_rv,
                       size_t rvlen, int *exists, char *obj_rv, char *err, size_t errlen);

/* The same; with meta not NULL and the object listed (not a Table), *meta
 * is its metadata, detached (free with cJSON_Delete), else NULL. */
int kwatch__parse_list_meta(const char *body, size_t len, const char *name, int table,
                            char *list_rv, size_t rvlen, int *exists, char *obj_rv,
                            struct cJSON **meta, char *err, size_t errlen);

#endif
