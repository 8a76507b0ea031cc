/*
 * kubever.h - the webhook learns the API server's Kubernetes version
 * (kube/kversion.h: GET /version) instead of assuming one, and hands its
 * minor to the server's transform (webhook_server_set_kube_minor), which
 * refuses restart-pod below 1.36 and leaves restart's Job rule out below
 * 1.35 (inject/restartpolicy.c).
 *
 * When: at start, then every refresh_ms (--kube-version-refresh, default
 * 10 min), and KUBEVER_RETRY_MS after a failure (or refresh_ms when that is
 * shorter). How: in a cluster through the pod's ServiceAccount (the token
 * and CA of KUBE_SA_DIR, $KUBERNETES_SERVICE_HOST); outside one through
 * --kube-api, --kube-ca-file and --kube-token-file, as `run` (kube/kube.h).
 *
 * Failures: a version never read leaves INJECT_KUBE_MINOR_DEFAULT (1.36) in
 * force; one read before stays; each failure is a warning. A client that
 * cannot be set up at all (no cluster, no token) is one warning and no
 * lookup. Readiness: /readyz answers 503 until the first answer (a version
 * or a failure), KUBEVER_READY_WAIT_MS at most.
 *
 * Every change of the version in force is a log line (event
 * "kube-version") and the gauge reload_agent_webhook_kube_version_minor
 * (webhook/whmetrics.h). --kube-version skips all of this (cmd_webhook.c).
 */
#ifndef RA_WEBHOOK_KUBEVER_H
#define RA_WEBHOOK_KUBEVER_H

#include <stdint.h>
#include <uv.h>

#include "webhook/server.h"

#define KUBEVER_REFRESH_MS_DEFAULT (10u * 60u * 1000u)
#define KUBEVER_RETRY_MS 30000u
#define KUBEVER_READY_WAIT_MS 20000u

struct kubever_opts {
    const char *api, *ca_file, *token_file; /* NULL/"": in-cluster (kube_config) */
    uint64_t refresh_ms;                    /* 0 = KUBEVER_REFRESH_MS_DEFAULT */
};

struct kubever;

/* Starts the lookups for server s (which must outlive kv). Returns kv, or
 * NULL when no client can be set up (logged; the default stays in force).
 * Never fails otherwise. */
struct kubever *kubever_start(uv_loop_t *loop, const struct kubever_opts *o,
                              struct webhook_server *s);

/* Stops: a request in flight is cancelled, the timers close; kv is freed
 * once its handles have closed (run the loop). NULL is a no-op. */
void kubever_stop(struct kubever *kv);

#endif
