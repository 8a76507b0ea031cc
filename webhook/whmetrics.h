/*
 * whmetrics.h - the webhook server's metrics (reload_agent_webhook_*), in
 * the Prometheus text exposition format 0.0.4. Push-only, like
 * run/metrics.c: webhook/server.c calls a whmetrics_*() function where
 * the event happens; whmetrics_render reads only this module's state.
 * Single-threaded (the loop thread).
 */
#ifndef RA_WEBHOOK_WHMETRICS_H
#define RA_WEBHOOK_WHMETRICS_H

#include <stddef.h>
#include <stdint.h>

#include "webhook/admission.h"

/* Counts one review answered with result r, which took seconds. */
void whmetrics_admission(enum admission_result r, double seconds);

/* Counts one certificate reload attempt (ok: 1 = loaded, 0 = kept the old
 * certificate). */
void whmetrics_cert_reload(int ok);

/* Sets the serving certificate's notAfter (Unix time). */
void whmetrics_set_cert_expiry(int64_t not_after);

/* Counts one failed or abandoned TLS handshake. The shape of a
 * tls_server_set_failure_hook hook: ud is unused. */
void whmetrics_tls_failure(void *ud, const char *reason);

/* The Kubernetes minor version the transform targets, and where it came
 * from: "flag" (--kube-version), "server" (GET /version) or "default". */
void whmetrics_set_kube_version(int minor, const char *source);

/* Renders every family into a malloc'd buffer (*len bytes). NULL on OOM. */
char *whmetrics_render(size_t *len);

/* Resets everything (tests, and each webhook start). */
void whmetrics_reset(void);

#endif
