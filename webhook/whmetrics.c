/*
 * whmetrics.c - counters, the review-duration histogram and the certificate
 * gauges of the webhook server, and their Prometheus text rendering (see
 * whmetrics.h) through base/prom.h.
 */
#include "webhook/whmetrics.h"

#include <stdio.h>
#include <string.h>

#include "base/prom.h"

static const double BUCKETS[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                 0.05,   0.1,   0.25,   0.5,   1};
static const struct prom_buckets DURATION = PROM_BUCKETS(BUCKETS);

static struct {
    uint64_t admissions[ADMISSION_NRESULTS];
    struct prom_hist duration;
    uint64_t reloads[2]; /* [ok] */
    int64_t not_after;
    uint64_t tls_failures;
    int kube_minor;
    char kube_source[16];
} W;

void whmetrics_reset(void) { memset(&W, 0, sizeof W); }

void whmetrics_admission(enum admission_result r, double seconds)
{
    if ((int)r < 0 || r >= ADMISSION_NRESULTS) r = ADMISSION_ERROR;
    W.admissions[r]++;
    prom_observe(&W.duration, &DURATION, seconds);
}

void whmetrics_cert_reload(int ok) { W.reloads[ok ? 1 : 0]++; }

void whmetrics_set_cert_expiry(int64_t not_after) { W.not_after = not_after; }

void whmetrics_tls_failure(void *ud, const char *reason)
{
    (void)ud;
    (void)reason;
    W.tls_failures++;
}

void whmetrics_set_kube_version(int minor, const char *source)
{
    W.kube_minor = minor;
    snprintf(W.kube_source, sizeof W.kube_source, "%s", source);
}

char *whmetrics_render(size_t *len)
{
    struct buf b = {0};
    prom_family(&b, "reload_agent_webhook_admissions_total", "counter",
                "AdmissionReview requests answered, by result (bad_request: 400 or 415).");
    for (int r = 0; r < ADMISSION_NRESULTS; r++) {
        char labels[64];
        snprintf(labels, sizeof labels, "result=\"%s\"",
                 admission_result_name((enum admission_result)r));
        prom_sample(&b, "reload_agent_webhook_admissions_total", labels, W.admissions[r]);
    }
    prom_histogram(&b, "reload_agent_webhook_admission_duration_seconds",
                   "Time to answer one review (parse, transform, encode), from the complete "
                   "request to the response.",
                   &DURATION, &W.duration);
    prom_gauge(&b, "reload_agent_webhook_cert_expiry_timestamp_seconds",
               "notAfter of the serving certificate in use, as a Unix time.", (double)W.not_after);
    prom_family(&b, "reload_agent_webhook_cert_reloads_total", "counter",
                "Certificate reloads after the files changed, by result (failure: the previous "
                "certificate stays in use).");
    prom_sample(&b, "reload_agent_webhook_cert_reloads_total", "result=\"success\"", W.reloads[1]);
    prom_sample(&b, "reload_agent_webhook_cert_reloads_total", "result=\"failure\"", W.reloads[0]);
    prom_counter(&b, "reload_agent_webhook_tls_handshake_failures_total",
                 "TLS handshakes that failed or were abandoned (timeout, protocol error, client "
                 "gone).",
                 W.tls_failures);
    if (W.kube_minor > 0) {
        char labels[48];
        prom_family(&b, "reload_agent_webhook_kube_version_minor", "gauge",
                    "The Kubernetes 1.x minor version injection is for, by where it came from "
                    "(flag: --kube-version, server: GET /version, default: neither).");
        snprintf(labels, sizeof labels, "source=\"%s\"", W.kube_source);
        prom_sample(&b, "reload_agent_webhook_kube_version_minor", labels, (uint64_t)W.kube_minor);
    }
    return buf_take(&b, len);
}
