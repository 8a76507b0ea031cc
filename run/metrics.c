/*
 * metrics.c - counters, gauges and the action-duration histogram, and their
 * Prometheus text rendering (see metrics.h) through base/prom.h.
 * Single-threaded: only the loop thread touches them. Every value is
 * pushed by a metrics_*() call at the event; rendering reads only M.
 */
#include "run/metrics.h"

#include "run/stage.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/prom.h"

static const double BUCKETS[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30};
static const struct prom_buckets DURATION = PROM_BUCKETS(BUCKETS);
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
    struct prom_hist duration;
    uint64_t config_errors;
    uint64_t retries;
    uint64_t changes;
    uint64_t watch_events;
    int api; /* the agent has an API client: show the API families */
    struct code_count codes[MAX_CODES];
    size_t ncodes;
    uint64_t events_suppressed;
    uint64_t unwatched_dirs;
    int fast_sync;
    uint64_t fs_budget[METRICS_FS__COUNT];
    int stage; /* staging is on: show its families */
    uint64_t stage_verdicts[3];
    double stage_wait_sum;
    uint64_t validations[3]; /* accepted, rejected, error */
    double validation_seconds;
    uint64_t verifications[2]; /* failure, success */
    uint64_t rollbacks;
    uint64_t storm_halts;
    int storm_halted;
    int notify; /* notifications are on: show their families */
    uint64_t notifications[METRICS_NOTIFY__COUNT];
    uint64_t notify_retries;
} M;

static const char *const FS_LIMITS[METRICS_FS__COUNT] = {"backoff", "nudge_floor"};
static const char *const NOTIFY_RESULTS[METRICS_NOTIFY__COUNT] = {"sent", "failed", "dropped"};

void metrics_notify_enabled(void) { M.notify = 1; }

void metrics_notification(enum metrics_notify_result r)
{
    if ((int)r < 0 || r >= METRICS_NOTIFY__COUNT) return;
    M.notify = 1;
    M.notifications[r]++;
}

void metrics_notify_retry(void)
{
    M.notify = 1;
    M.notify_retries++;
}

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
    prom_observe(&M.duration, &DURATION, seconds);
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

void metrics_stage(int verdict, double wait_seconds)
{
    M.stage = 1;
    if (verdict < 0 || verdict > 2) return;
    M.stage_verdicts[verdict]++;
    M.stage_wait_sum += wait_seconds;
}

void metrics_stage_enabled(void) { M.stage = 1; }
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

const char *metrics_fs_limit_name(enum metrics_fs_limit l)
{
    return l >= 0 && l < METRICS_FS__COUNT ? FS_LIMITS[l] : "unknown";
}

void metrics_fast_sync_enabled(void) { M.fast_sync = 1; }

void metrics_fast_sync_budget_hit(enum metrics_fs_limit l)
{
    if (l < 0 || l >= METRICS_FS__COUNT) return;
    M.fast_sync = 1;
    M.fs_budget[l]++;
}

/* The actions and what set them off. */
static void render_core(struct buf *b)
{
    prom_family(b, "reload_agent_reloads_total", "counter",
                "Finished action attempts by action and result.");
    for (int a = 0; a < ACTION__COUNT; a++)
        for (int r = 1; r >= 0; r--) {
            char labels[96];
            snprintf(labels, sizeof labels, "action=\"%s\",result=\"%s\"", cfg_action_name(a),
                     r ? "success" : "failure");
            prom_sample(b, "reload_agent_reloads_total", labels, M.reloads[a][r]);
        }
    prom_gauge(b, "reload_agent_last_reload_successful",
               "1 if the last action attempt succeeded (or none ran yet), else 0.",
               M.have_result ? M.last_ok : 1);
    prom_gauge(b, "reload_agent_last_reload_success_timestamp_seconds",
               "Unix time of the last successful action, 0 if none.", M.last_success_ts);
    prom_counter(b, "reload_agent_changes_total",
                 "Real content changes detected (the canonical hash changed).", M.changes);
    prom_counter(b, "reload_agent_watch_events_total", "Raw inotify events read.", M.watch_events);
    prom_counter(b, "reload_agent_retries_total", "Retries scheduled after failed actions.",
                 M.retries);
    prom_counter(b, "reload_agent_config_errors_total",
                 "Rejected configuration updates (the last good configuration stayed in force).",
                 M.config_errors);
    prom_gauge(b, "reload_agent_unwatched_directories",
               "Directories under the watch roots that could not be watched (e.g. the "
               "fs.inotify.max_user_watches limit): changes there are missed until they are.",
               (double)M.unwatched_dirs);
    prom_histogram(b, "reload_agent_action_duration_seconds", "Duration of action attempts.",
                   &DURATION, &M.duration);
}

/* Safe reload's steps: validation, verification, rollback, the breaker. */
static void render_safe(struct buf *b)
{
    static const char *const vres[] = {"accepted", "rejected", "error"};
    prom_family(
        b, "reload_agent_validations_total", "counter",
        "Validations of new content (--validate) by result: rejected content is never acted "
        "on; error: the checker could not run (retried).");
    for (int i = 0; i < 3; i++) {
        char labels[32];
        snprintf(labels, sizeof labels, "result=\"%s\"", vres[i]);
        prom_sample(b, "reload_agent_validations_total", labels, M.validations[i]);
    }
    prom_family(b, "reload_agent_validation_seconds_total", "counter",
                "Time spent validating new content.");
    buf_printf(b, "reload_agent_validation_seconds_total %.6f\n", M.validation_seconds);
    prom_family(b, "reload_agent_verifications_total", "counter",
                "Verifications after an action (--verify) by result.");
    prom_sample(b, "reload_agent_verifications_total", "result=\"success\"", M.verifications[1]);
    prom_sample(b, "reload_agent_verifications_total", "result=\"failure\"", M.verifications[0]);
    prom_counter(b, "reload_agent_rollbacks_total",
                 "Rollbacks to the last good copy after a failed verification (--keep-last-good).",
                 M.rollbacks);
    prom_counter(b, "reload_agent_storm_halts_total",
                 "Times the storm breaker (--storm-limit) stopped the agent acting.",
                 M.storm_halts);
    prom_gauge(b, "reload_agent_storm_halted",
               "1 while the storm breaker holds actions back, else 0.", M.storm_halted);
}

/* The API: requests, Events, fast sync's budget, the stage gate. */
static void render_api(struct buf *b)
{
    if (M.api) {
        prom_family(b, "reload_agent_api_requests_total", "counter",
                    "Kubernetes API requests by HTTP status code (0: no response).");
        for (size_t i = 0; i < M.ncodes; i++) {
            char labels[32];
            snprintf(labels, sizeof labels, "code=\"%ld\"", M.codes[i].code);
            prom_sample(b, "reload_agent_api_requests_total", labels, M.codes[i].n);
        }
        prom_counter(b, "reload_agent_events_suppressed_total",
                     "Kubernetes Events not sent because of the rate limit.", M.events_suppressed);
    }
    if (M.fast_sync) {
        prom_family(
            b, "reload_agent_fast_sync_budget_hits_total", "counter",
            "Requests fast sync's API budget held back: a list or watch waiting the backoff "
            "after repeated failures, a nudge waiting the floor between two.");
        for (int l = 0; l < METRICS_FS__COUNT; l++) {
            char labels[48];
            snprintf(labels, sizeof labels, "limit=\"%s\"", FS_LIMITS[l]);
            prom_sample(b, "reload_agent_fast_sync_budget_hits_total", labels, M.fs_budget[l]);
        }
    }
    if (M.stage) {
        prom_family(b, "reload_agent_stage_verdicts_total", "counter",
                    "Answers of the stage gate (--stage): go (this replica's turn), halted (the "
                    "change was halted for the workload), alone (no coordination).");
        for (int v = 0; v < 3; v++) {
            char labels[32];
            snprintf(labels, sizeof labels, "verdict=\"%s\"",
                     stage_verdict_name((enum stage_verdict)v));
            prom_sample(b, "reload_agent_stage_verdicts_total", labels, M.stage_verdicts[v]);
        }
        prom_family(b, "reload_agent_stage_wait_seconds_total", "counter",
                    "Time changes waited at the stage gate for their turn.");
        buf_printf(b, "reload_agent_stage_wait_seconds_total %.3f\n", M.stage_wait_sum);
    }
}

/* Notifications (--notify-url, docs/notifications.md). */
static void render_notify(struct buf *b)
{
    if (!M.notify) return;
    prom_family(b, "reload_agent_notifications_total", "counter",
                "Notifications by outcome: sent (the receiver answered 2xx), failed (refused, "
                "or no success within the retries), dropped (the queue was full, or the agent "
                "stopped before it was sent).");
    for (int r = 0; r < METRICS_NOTIFY__COUNT; r++) {
        char labels[32];
        snprintf(labels, sizeof labels, "result=\"%s\"", NOTIFY_RESULTS[r]);
        prom_sample(b, "reload_agent_notifications_total", labels, M.notifications[r]);
    }
    prom_counter(b, "reload_agent_notification_retries_total",
                 "Notification sends retried (no answer, 429 or 5xx).", M.notify_retries);
}

char *metrics_render(size_t *len)
{
    struct buf b = {0};
    render_core(&b);
    render_safe(&b);
    render_api(&b);
    render_notify(&b);
    return buf_take(&b, len);
}
