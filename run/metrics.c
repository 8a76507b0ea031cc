/*
 * metrics.c - counters, gauges and the action-duration histogram, and their
 * Prometheus text rendering (see metrics.h). Single-threaded: only the loop
 * thread touches them. Every value is pushed by a metrics_*() call at the
 * event; rendering reads only M.
 */
#include "run/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const double BUCKETS[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30};
#define NBUCKETS (sizeof BUCKETS / sizeof BUCKETS[0])
#define MAX_CODES 32 /* distinct API status codes kept; more go to the last row */

struct code_count {
    long code;
    uint64_t n;
};

static struct {
    uint64_t reloads[ACTION__COUNT][2]; /* [action][success] */
    int have_result;
    int last_ok;
    double last_success_ts;
    uint64_t hist[NBUCKETS];
    uint64_t hist_count;
    double hist_sum;
    uint64_t config_errors;
    uint64_t retries;
    uint64_t changes;
    uint64_t watch_events;
    int api; /* the agent has an API client: show the API families */
    struct code_count codes[MAX_CODES];
    size_t ncodes;
    uint64_t events_suppressed;
    uint64_t unwatched_dirs;
    uint64_t validations[3]; /* accepted, rejected, error */
    double validation_seconds;
    uint64_t verifications[2]; /* failure, success */
    uint64_t rollbacks;
    uint64_t storm_halts;
    int storm_halted;
} M;

void metrics_reset(void) { memset(&M, 0, sizeof M); }

void metrics_action(int action, int success, double seconds)
{
    if (action < 0 || action >= ACTION__COUNT) return;
    M.reloads[action][success ? 1 : 0]++;
    M.have_result = 1;
    M.last_ok = success;
    if (success) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        M.last_success_ts = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    }
    for (size_t i = 0; i < NBUCKETS; i++)
        if (seconds <= BUCKETS[i]) M.hist[i]++;
    M.hist_count++;
    M.hist_sum += seconds;
}

void metrics_config_error(void) { M.config_errors++; }
void metrics_retry(void) { M.retries++; }
void metrics_change(void) { M.changes++; }
void metrics_api_enabled(void) { M.api = 1; }

void metrics_watch_events(void *ud, uint64_t n)
{
    (void)ud;
    M.watch_events += n;
}

void metrics_api_response(void *ud, long code)
{
    size_t i;
    (void)ud;
    M.api = 1;
    for (i = 0; i < M.ncodes; i++)
        if (M.codes[i].code == code) break;
    if (i == M.ncodes) {
        if (M.ncodes == MAX_CODES) return; /* a server with 32 distinct codes: keep the first */
        M.codes[M.ncodes++].code = code;
    }
    M.codes[i].n++;
}

void metrics_event_suppressed(void *ud)
{
    (void)ud;
    M.api = 1;
    M.events_suppressed++;
}
void metrics_set_unwatched_directories(uint64_t n) { M.unwatched_dirs = n; }

void metrics_validation(int result, double seconds)
{
    if (result < 0 || result > 2) return;
    M.validations[result]++;
    M.validation_seconds += seconds;
}

void metrics_verification(int ok) { M.verifications[ok ? 1 : 0]++; }
void metrics_rollback(void) { M.rollbacks++; }

void metrics_storm(int halted)
{
    if (halted && !M.storm_halted) M.storm_halts++;
    M.storm_halted = halted;
}

struct out {
    char *buf;
    size_t len, cap;
    int failed;
};

static void emit(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(struct out *o, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(o->buf ? o->buf + o->len : NULL, o->buf ? o->cap - o->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->failed = 1;
            return;
        }
        if (o->buf && o->len + (size_t)n < o->cap) {
            o->len += (size_t)n;
            return;
        }
        size_t nc = o->cap ? o->cap * 2 : 4096;
        while (nc < o->len + (size_t)n + 1) nc *= 2;
        char *nb = realloc(o->buf, nc);
        if (!nb) {
            o->failed = 1;
            return;
        }
        o->buf = nb;
        o->cap = nc;
    }
}

static void family(struct out *o, const char *name, const char *type, const char *help)
{
    emit(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

char *metrics_render(size_t *len)
{
    struct out o = {0};
    family(&o, "reload_agent_reloads_total", "counter",
           "Finished action attempts by action and result.");
    for (int a = 0; a < ACTION__COUNT; a++)
        for (int r = 1; r >= 0; r--)
            emit(&o, "reload_agent_reloads_total{action=\"%s\",result=\"%s\"} %llu\n",
                 cfg_action_name(a), r ? "success" : "failure",
                 (unsigned long long)M.reloads[a][r]);
    family(&o, "reload_agent_last_reload_successful", "gauge",
           "1 if the last action attempt succeeded (or none ran yet), else 0.");
    emit(&o, "reload_agent_last_reload_successful %d\n", M.have_result ? M.last_ok : 1);
    family(&o, "reload_agent_last_reload_success_timestamp_seconds", "gauge",
           "Unix time of the last successful action, 0 if none.");
    emit(&o, "reload_agent_last_reload_success_timestamp_seconds %.3f\n", M.last_success_ts);
    family(&o, "reload_agent_changes_total", "counter",
           "Real content changes detected (the canonical hash changed).");
    emit(&o, "reload_agent_changes_total %llu\n", (unsigned long long)M.changes);
    family(&o, "reload_agent_watch_events_total", "counter", "Raw inotify events read.");
    emit(&o, "reload_agent_watch_events_total %llu\n", (unsigned long long)M.watch_events);
    family(&o, "reload_agent_retries_total", "counter", "Retries scheduled after failed actions.");
    emit(&o, "reload_agent_retries_total %llu\n", (unsigned long long)M.retries);
    family(&o, "reload_agent_config_errors_total", "counter",
           "Rejected configuration updates (the last good configuration stayed in force).");
    emit(&o, "reload_agent_config_errors_total %llu\n", (unsigned long long)M.config_errors);
    family(&o, "reload_agent_unwatched_directories", "gauge",
           "Directories under the watch roots that could not be watched (e.g. the "
           "fs.inotify.max_user_watches limit): changes there are missed until they are.");
    emit(&o, "reload_agent_unwatched_directories %llu\n", (unsigned long long)M.unwatched_dirs);
    family(&o, "reload_agent_action_duration_seconds", "histogram", "Duration of action attempts.");
    for (size_t i = 0; i < NBUCKETS; i++)
        emit(&o, "reload_agent_action_duration_seconds_bucket{le=\"%g\"} %llu\n", BUCKETS[i],
             (unsigned long long)M.hist[i]);
    emit(&o, "reload_agent_action_duration_seconds_bucket{le=\"+Inf\"} %llu\n",
         (unsigned long long)M.hist_count);
    emit(&o, "reload_agent_action_duration_seconds_sum %.6f\n", M.hist_sum);
    emit(&o, "reload_agent_action_duration_seconds_count %llu\n", (unsigned long long)M.hist_count);
    static const char *const vres[] = {"accepted", "rejected", "error"};
    family(&o, "reload_agent_validations_total", "counter",
           "Validations of new content (--validate) by result: rejected content is never acted "
           "on; error: the checker could not run (retried).");
    for (int i = 0; i < 3; i++)
        emit(&o, "reload_agent_validations_total{result=\"%s\"} %llu\n", vres[i],
             (unsigned long long)M.validations[i]);
    family(&o, "reload_agent_validation_seconds_total", "counter",
           "Time spent validating new content.");
    emit(&o, "reload_agent_validation_seconds_total %.6f\n", M.validation_seconds);
    family(&o, "reload_agent_verifications_total", "counter",
           "Verifications after an action (--verify) by result.");
    emit(&o, "reload_agent_verifications_total{result=\"success\"} %llu\n",
         (unsigned long long)M.verifications[1]);
    emit(&o, "reload_agent_verifications_total{result=\"failure\"} %llu\n",
         (unsigned long long)M.verifications[0]);
    family(&o, "reload_agent_rollbacks_total", "counter",
           "Rollbacks to the last good copy after a failed verification (--keep-last-good).");
    emit(&o, "reload_agent_rollbacks_total %llu\n", (unsigned long long)M.rollbacks);
    family(&o, "reload_agent_storm_halts_total", "counter",
           "Times the storm breaker (--storm-limit) stopped the agent acting.");
    emit(&o, "reload_agent_storm_halts_total %llu\n", (unsigned long long)M.storm_halts);
    family(&o, "reload_agent_storm_halted", "gauge",
           "1 while the storm breaker holds actions back, else 0.");
    emit(&o, "reload_agent_storm_halted %d\n", M.storm_halted);
    if (M.api) {
        family(&o, "reload_agent_api_requests_total", "counter",
               "Kubernetes API requests by HTTP status code (0: no response).");
        for (size_t i = 0; i < M.ncodes; i++)
            emit(&o, "reload_agent_api_requests_total{code=\"%ld\"} %llu\n", M.codes[i].code,
                 (unsigned long long)M.codes[i].n);
        family(&o, "reload_agent_events_suppressed_total", "counter",
               "Kubernetes Events not sent because of the rate limit.");
        emit(&o, "reload_agent_events_suppressed_total %llu\n",
             (unsigned long long)M.events_suppressed);
    }
    if (o.failed) {
        free(o.buf);
        return NULL;
    }
    *len = o.len;
    return o.buf;
}
