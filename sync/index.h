/*
 * index.h - the cluster sync service's memory (docs/sync.md): which pods
 * depend on which objects, and the last resourceVersion seen of each
 * object. Pure: no I/O, no loop; the watches (kube/kcwatch.c) feed it,
 * the service (sync/service.c) asks it which pods to nudge, and (with
 * --all-namespaces) which namespaces have pods, so it watches their
 * ConfigMaps and Secrets only while they do.
 *
 * A pod's objects come from its annotation reload-agent.io/sync-objects
 * ("configmap/a,secret/b", written by the injector), never from its spec.
 * An object's first resourceVersion is its baseline (no change); a later
 * one that differs and is not older (kwatch__rv_compare, apimachinery's
 * rule) is a change; an older or equal one is none. Keys are
 * "NS/KIND/NAME" for objects and "NS/NAME" for pods; memory is a few
 * dozen bytes per object and per reference, nothing of the objects' data.
 */
#ifndef RA_SYNC_INDEX_H
#define RA_SYNC_INDEX_H

#include <stddef.h>

#define SYNC_INDEX_MAX_REFS 256 /* objects read from one pod's annotation */

enum sync_kind { SYNC_CONFIGMAP, SYNC_SECRET };

enum sync_seen {
    SYNC_SEEN_BASELINE, /* the first version seen of the object */
    SYNC_SEEN_SAME,     /* the version known */
    SYNC_SEEN_OLDER,    /* older than the version known: no change */
    SYNC_SEEN_CHANGED,  /* a new version: its pods are to be nudged */
};

struct sync_index;

struct sync_index_stats {
    size_t objects; /* objects known (seen, or named by a pod) */
    size_t pods;    /* pods with at least one object */
    size_t refs;    /* pod -> object references */
    size_t nss;     /* namespaces with at least one pod */
};

/* An empty index (aborts on OOM, as the service does). */
struct sync_index *sync_index_new(void);
void sync_index_free(struct sync_index *ix);

/* "configmap" or "secret". */
const char *sync_kind_name(enum sync_kind k);

/* Sets the objects pod ns/pod depends on from its annotation value
 * (NULL or "" = none: the pod is forgotten). Entries that are not
 * "configmap/NAME" or "secret/NAME" with a valid object name, and those
 * beyond SYNC_INDEX_MAX_REFS, are left out. Returns how many were left
 * out (the caller may warn once). */
int sync_index_set_pod(struct sync_index *ix, const char *ns, const char *pod, const char *objects);

/* Forgets pod ns/pod (deleted, or its PATCH said 404). */
void sync_index_remove_pod(struct sync_index *ix, const char *ns, const char *pod);

/* The object was seen at resourceVersion rv (an event or a list):
 * what that is (above); the version is remembered unless older. */
enum sync_seen sync_index_object_seen(struct sync_index *ix, enum sync_kind k, const char *ns,
                                      const char *name, const char *rv);

/* The object was deleted: forgotten unless a pod names it (then its
 * version is kept, so a new object of that name is a change). */
void sync_index_object_deleted(struct sync_index *ix, enum sync_kind k, const char *ns,
                               const char *name);

/* Records the resourceVersion of the last change pod ns/pod was nudged
 * for (read back from its reload-agent.io/sync annotation, so a second
 * replica or a restarted one knows; NULL = none). A pod not in the index
 * is ignored. */
void sync_index_set_synced(struct sync_index *ix, const char *ns, const char *pod, const char *rv);

/* 1 if pod ns/pod has been nudged for a change at rv or later (its synced
 * version is at or above rv, when the two compare), else 0. */
int sync_index_synced_since(const struct sync_index *ix, const char *ns, const char *pod,
                            const char *rv);

/* Calls cb for each pod that names the object (in the order they were
 * added); cb must not change the index. Returns how many. */
size_t sync_index_pods_of(const struct sync_index *ix, enum sync_kind k, const char *ns,
                          const char *name, void (*cb)(void *ud, const char *ns, const char *pod),
                          void *ud);

/* How many pods of namespace ns the index holds (pods with at least one
 * object; kept by set_pod and remove_pod, O(1)). */
size_t sync_index_pods_in(const struct sync_index *ix, const char *ns);

/* Calls cb for each namespace with at least one pod, with its count (in
 * no order); cb must not change the index. Returns how many. */
size_t sync_index_each_ns(const struct sync_index *ix,
                          void (*cb)(void *ud, const char *ns, size_t pods), void *ud);

/* Forgets every object version of namespace ns (its watches were closed:
 * what they said may be stale). Objects no pod names are freed; those a
 * pod names lose their version, so the next version seen of them is a
 * baseline again, not a change (a watch opened again from 0 nudges no pod
 * for its initial events). Returns how many objects lost a version. */
size_t sync_index_forget_ns(struct sync_index *ix, const char *ns);

/* The pods that may have missed a change: those with a synced version
 * (nudged before) that name an object whose known version is newer (the
 * object changed after the pod's last nudge, while no leader nudged: a
 * hand-over to a replica that started after the change and took it for
 * its baseline). Calls cb once per such pod with its newest such object;
 * cb must not change the index. Returns how many. A pod never nudged is
 * left out: nothing tells whether it started before or after the change. */
size_t sync_index_behind(const struct sync_index *ix,
                         void (*cb)(void *ud, const char *ns, const char *pod, enum sync_kind k,
                                    const char *name, const char *rv),
                         void *ud);

void sync_index_get_stats(const struct sync_index *ix, struct sync_index_stats *s);

#endif
