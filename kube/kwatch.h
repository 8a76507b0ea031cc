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
 * resourceVersion; a 410 Gone (the status, or an ERROR event with code
 * 410) relists. A stream the server ends (its timeoutSeconds) is resumed
 * at once; a failure (no connection, a status >= 400, a malformed event)
 * waits the one backoff (base/backoff.c) and tries again, without end: a
 * watch never gives up, it says what failed through the callback. A 401
 * re-reads the token (kube/kube.c) before the next attempt, so a rotated
 * token is used on the next connection. A 403's error names fast sync's
 * Role (KUBE_ROLE_FAST_SYNC), the one whose resourceNames grant the watch.
 *
 * A Secret's metadata can carry its data: client-side `kubectl apply`
 * stores the whole manifest, values included, in the annotation
 * kubectl.kubernetes.io/last-applied-configuration (seen on a real API
 * server). So a Secret is not asked for as PartialObjectMetadata but as a
 * Table with includeObject=None: the rows hold only the columns (name,
 * type, the number of keys, age), no object and no annotation, and a watch
 * event's Table carries the object's resourceVersion in its own metadata.
 * A Table list has no per-object resourceVersion, so after a list a
 * Secret's state is "exists, resourceVersion unknown" (rv_unknown).
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

struct kwatch;

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
    int relist;        /* KWATCH_STATE: from a list after the first (a reconnect
                          that could not resume, a 410) */
    const char *error; /* KWATCH_ERROR: one line, valid during the callback */
};

/* Runs on the loop thread. It may call kwatch_close(w) on its own watch. */
typedef void (*kwatch_cb)(void *ud, const struct kwatch_event *ev);

struct kwatch_opts {
    const char *resource;     /* "configmaps" or "secrets" (core group) */
    const char *name;         /* a valid object name */
    uint64_t watch_timeout_s; /* the server's timeoutSeconds; 0 = a random
                                   1800..3600 s (as the kubelet's reflectors) */
    uint64_t retry_base_ms;   /* first retry delay; 0 = 1000 */
    uint64_t retry_cap_ms;    /* delay cap; 0 = 30000 */
};

/* Counts and state, for /status and the tests. */
struct kwatch_stats {
    unsigned lists;       /* list requests sent */
    unsigned watches;     /* watch requests sent */
    unsigned events;      /* ADDED/MODIFIED/DELETED received */
    unsigned bookmarks;   /* BOOKMARK received */
    unsigned gone;        /* 410s (status or ERROR event) */
    unsigned errors;      /* failures reported through the callback */
    int streaming;        /* a watch response is open */
    const char *rv;       /* the object's last known resourceVersion ("" = none) */
    const char *watch_rv; /* where the next watch resumes */
};

/* Starts listing and watching o->name in kube_namespace(k). All of o is
 * copied. Returns 0 and *out (cb runs later, never from inside this call),
 * or -EINVAL for a resource that is not configmaps/secrets or a name that
 * is not an object name. k must outlive the watch (close it first). */
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

/* Parses a list reply (PartialObjectMetadataList; with table, a Table
 * without objects). Returns 0 with the list's resourceVersion in list_rv
 * and, when the list holds the object, *exists = 1 and its resourceVersion
 * in obj_rv ("" with table); or -EINVAL with err. */
int kwatch__parse_list(const char *body, size_t len, const char *name, int table, char *list_rv,
                       size_t rvlen, int *exists, char *obj_rv, char *err, size_t errlen);

#endif
