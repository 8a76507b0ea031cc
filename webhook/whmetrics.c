/*
 * whmetrics.c - counters, the review-duration histogram and the certificate
 * gauges of the webhook server, and their Prometheus text rendering (see
 * whmetrics.h).
 */
#include "webhook/whmetrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double BUCKETS[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                 0.05,   0.1,   0.25,   0.5,   1};
#define NBUCKETS (sizeof BUCKETS / sizeof BUCKETS[0])

static struct {
    uint64_t admissions[ADMISSION_NRESULTS];
    uint64_t hist[NBUCKETS];
    uint64_t hist_count;
    double hist_sum;
    uint64_t reloads[2]; /* [ok] */
    int64_t not_after;
    uint64_t tls_failures;
} W;

void whmetrics_reset(void) { memset(&W, 0, sizeof W); }

void whmetrics_admission(enum admission_result r, double seconds)
{
    if ((int)r < 0 || r >= ADMISSION_NRESULTS) r = ADMISSION_ERROR;
    W.admissions[r]++;
    for (size_t i = 0; i < NBUCKETS; i++)
        if (seconds <= BUCKETS[i]) W.hist[i]++;
    W.hist_count++;
    W.hist_sum += seconds;
}

void whmetrics_cert_reload(int ok) { W.reloads[ok ? 1 : 0]++; }

void whmetrics_set_cert_expiry(int64_t not_after) { W.not_after = not_after; }

void whmetrics_tls_failure(void *ud, const char *reason)
{
    (void)ud;
    (void)reason;
    W.tls_failures++;
}

struct buf {
    char *p;
    size_t len, cap;
    int oom;
};

static void put(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct buf *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)n;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

char *whmetrics_render(size_t *len)
{
    struct buf b = {malloc(4096), 0, 4096, 0};
    if (!b.p) return NULL;
    put(&b, "# HELP reload_agent_webhook_admissions_total AdmissionReview requests answered, by "
            "result (bad_request: 400 or 415).\n"
            "# TYPE reload_agent_webhook_admissions_total counter\n");
    for (int r = 0; r < ADMISSION_NRESULTS; r++)
        put(&b, "reload_agent_webhook_admissions_total{result=\"%s\"} %llu\n",
            admission_result_name((enum admission_result)r), (unsigned long long)W.admissions[r]);
    put(&b, "# HELP reload_agent_webhook_admission_duration_seconds Time to answer one review "
            "(parse, transform, encode), from the complete request to the response.\n"
            "# TYPE reload_agent_webhook_admission_duration_seconds histogram\n");
    for (size_t i = 0; i < NBUCKETS; i++)
        put(&b, "reload_agent_webhook_admission_duration_seconds_bucket{le=\"%g\"} %llu\n",
            BUCKETS[i], (unsigned long long)W.hist[i]);
    put(&b,
        "reload_agent_webhook_admission_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
        "reload_agent_webhook_admission_duration_seconds_sum %.9f\n"
        "reload_agent_webhook_admission_duration_seconds_count %llu\n",
        (unsigned long long)W.hist_count, W.hist_sum, (unsigned long long)W.hist_count);
    put(&b,
        "# HELP reload_agent_webhook_cert_expiry_timestamp_seconds notAfter of the serving "
        "certificate in use, as a Unix time.\n"
        "# TYPE reload_agent_webhook_cert_expiry_timestamp_seconds gauge\n"
        "reload_agent_webhook_cert_expiry_timestamp_seconds %lld\n",
        (long long)W.not_after);
    put(&b,
        "# HELP reload_agent_webhook_cert_reloads_total Certificate reloads after the files "
        "changed, by result (failure: the previous certificate stays in use).\n"
        "# TYPE reload_agent_webhook_cert_reloads_total counter\n"
        "reload_agent_webhook_cert_reloads_total{result=\"success\"} %llu\n"
        "reload_agent_webhook_cert_reloads_total{result=\"failure\"} %llu\n",
        (unsigned long long)W.reloads[1], (unsigned long long)W.reloads[0]);
    put(&b,
        "# HELP reload_agent_webhook_tls_handshake_failures_total TLS handshakes that failed or "
        "were abandoned (timeout, protocol error, client gone).\n"
        "# TYPE reload_agent_webhook_tls_handshake_failures_total counter\n"
        "reload_agent_webhook_tls_handshake_failures_total %llu\n",
        (unsigned long long)W.tls_failures);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}
