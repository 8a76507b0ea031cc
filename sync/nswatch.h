/*
 * nswatch.h - `reload-agent sync --all-namespaces` (docs/sync.md, "All
 * namespaces"): the ConfigMap and Secret watches of each namespace that
 * has pods in the index, opened when it gets its first one and closed
 * when its last one goes, at most a fixed number of namespaces at once.
 * One namespace, two collection watches (kube/kcwatch.h), metadata only:
 * Secrets cannot be watched across namespaces (their Table rows carry no
 * namespace), so both are per namespace, only where pods need them.
 *
 * It decides nothing about pods: the service (sync/service.c) tells it a
 * namespace's pod count from the index (sync/index.h) and logs what came
 * of it; every event of its watches goes to one callback with its kind.
 */
#ifndef RA_SYNC_NSWATCH_H
#define RA_SYNC_NSWATCH_H

#include <stddef.h>
#include <stdint.h>

#include "kube/kcwatch.h"
#include "sync/index.h"

struct nswatch;

/* An event of a namespace's ConfigMaps (k SYNC_CONFIGMAP) or Secrets;
 * ev->ns names the namespace. */
typedef void (*nswatch_cb)(void *ud, enum sync_kind k, const struct kcwatch_event *ev);

struct nswatch_opts {
    size_t max;               /* namespaces watched at once (at least 1) */
    uint64_t watch_timeout_s; /* as kcwatch_opts */
    uint64_t retry_base_ms;
    uint64_t retry_cap_ms;
};

enum nswatch_result {
    NSWATCH_SAME,   /* nothing to do: open with pods, or closed without */
    NSWATCH_OPENED, /* its watches were opened (from resourceVersion 0) */
    NSWATCH_CLOSED, /* its watches were closed (no pod left) */
    NSWATCH_FULL,   /* it has pods but max namespaces are watched: not opened */
};

/* Nothing open yet. All of o is copied; k must outlive it. */
struct nswatch *nswatch_new(struct kube *k, const struct nswatch_opts *o, nswatch_cb cb, void *ud);

/* Namespace ns (a valid label) now has pods pods in the index: opens its
 * watches (pods > 0, not open, room left), or closes them (pods == 0, open).
 * The callback never runs inside this call. */
enum nswatch_result nswatch_update(struct nswatch *nw, const char *ns, size_t pods);

/* Namespaces whose watches are open. */
size_t nswatch_count(const struct nswatch *nw);

/* 1 if namespace ns's watches are open. */
int nswatch_is_open(const struct nswatch *nw, const char *ns);

/* Closes every watch (no callback after this) and frees nw (NULL: no-op). */
void nswatch_free(struct nswatch *nw);

#endif
