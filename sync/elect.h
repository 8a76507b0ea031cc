/*
 * elect.h - leader election of the sync service's replicas through one
 * coordination.k8s.io/v1 Lease (docs/sync.md), as client-go's
 * leaderelection does it: the holder renews spec.renewTime every
 * retry period; another replica takes the Lease over when it has seen the
 * same holder and renewTime for leaseDurationSeconds by its own clock (no
 * clock comparison between nodes); every write is a compare-and-swap on
 * metadata.resourceVersion (a merge patch that carries it: 409 when
 * another replica wrote first). A leader that could not renew for
 * two thirds of the duration steps down before anyone may take over.
 * Each read or write is one attempt of at most a third of the duration;
 * the next period is its retry.
 */
#ifndef RA_SYNC_ELECT_H
#define RA_SYNC_ELECT_H

#include <stdint.h>

#include "kube/kube.h"

struct elect;

struct elect_opts {
    const char *lease;    /* the Lease's name, in kube_namespace(k) */
    const char *identity; /* this replica's holderIdentity */
    uint64_t duration_ms; /* leaseDurationSeconds * 1000 */
    uint64_t retry_ms;    /* the period of reads and renewals */
};

/* cb(ud, leader) runs on every change of this replica's role. */
struct elect *elect_start(uv_loop_t *loop, struct kube *k, const struct elect_opts *o,
                          void (*cb)(void *ud, int leader), void *ud);

int elect_is_leader(const struct elect *e);

/* Stops (the Lease is left to expire: a new leader waits the duration),
 * frees e once its timer is closed. */
void elect_close(struct elect *e);

/* ---- internal: the decision, without I/O (tests) ---- */

enum elect__do { ELECT__RENEW, ELECT__TAKE, ELECT__WAIT };

/* What a replica does with a Lease held by holder ("" = nobody) whose
 * (holder, renewTime) it has seen unchanged since observed_ms: renew its
 * own, take it over when empty or expired (now >= observed + duration),
 * else wait. */
enum elect__do elect__decide(const char *me, const char *holder, uint64_t observed_ms,
                             uint64_t now_ms, uint64_t duration_ms);

#endif
