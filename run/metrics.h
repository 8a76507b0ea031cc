/*
 * metrics.h - the agent's counters and gauges, rendered in the Prometheus
 * text exposition format 0.0.4 (HELP and TYPE for every family).
 *
 * One rule, push: every counter lives here and is incremented at the event
 * through a metrics_*() call (lower layers get a hook the agent registers:
 * kube_set_counters, watch_set_counter); metrics_render reads nothing but
 * this module's own state. Adding a metric: a field, a metrics_*() setter
 * called where it happens, one base/prom.h call in metrics_render, and the
 * list in docs/configuration.md.
 */
#ifndef RA_METRICS_H
#define RA_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

/* Records one finished action attempt. */
void metrics_action(int action, int success, double seconds);

/* Counts one rejected configuration update. */
void metrics_config_error(void);

/* Counts one retry scheduled. */
void metrics_retry(void);

/* Counts one real content change (the canonical hash changed). */
void metrics_change(void);

/* Counts n raw inotify events read. The shape of a watch_set_counter hook:
 * ud is unused. */
void metrics_watch_events(void *ud, uint64_t n);

/* Counts one finished Kubernetes API attempt by HTTP status (0: no
 * response). The shape of struct kube_counters.response: ud is unused. The
 * first call (or metrics_api_enabled) makes the family appear. */
void metrics_api_response(void *ud, long code);

/* Counts one Event dropped by the rate limit (struct
 * kube_counters.event_suppressed; ud is unused). */
void metrics_event_suppressed(void *ud);

/* Shows the API families (at zero) although no request was made yet: the
 * agent has an API client. */
void metrics_api_enabled(void);

/* What made fast sync hold a request back (docs/fast-sync.md "The API
 * budget"): a watch's backoff after repeated failures, or the floor
 * between two nudges. */
enum metrics_fs_limit { METRICS_FS_BACKOFF, METRICS_FS_NUDGE_FLOOR, METRICS_FS__COUNT };

/* The label value of a limit ("backoff", "nudge_floor"). */
const char *metrics_fs_limit_name(enum metrics_fs_limit l);

/* Fast sync runs: its family appears (at zero). */
void metrics_fast_sync_enabled(void);

/* Counts one request fast sync's budget held back. */
void metrics_fast_sync_budget_hit(enum metrics_fs_limit l);

/* Sets the gauge of directories that could not be watched (the monitor
 * pushes it whenever the count changes). */
void metrics_set_unwatched_directories(uint64_t n);

/* Counts one verdict of the stage gate (enum stage_verdict, run/stage.h)
 * and the time its acquire waited; the first call (or
 * metrics_stage_enabled) makes the stage families appear. */
void metrics_stage(int verdict, double wait_seconds);

/* Shows the stage families (at zero): staging is on. */
void metrics_stage_enabled(void);
/* Safe reload (docs/safe-reload.md). One validation of new content:
 * result 0 accepted, 1 rejected, 2 error (the checker could not run). */
void metrics_validation(int result, double seconds);

/* One verification after an action: passed or not. */
void metrics_verification(int ok);

/* One rollback to the last good copy. */
void metrics_rollback(void);

/* The storm breaker tripped (halted 1) or resumed (halted 0). */
void metrics_storm(int halted);

/* Notifications (run/notify.h): how one ended. */
enum metrics_notify_result {
    METRICS_NOTIFY_SENT,
    METRICS_NOTIFY_FAILED,
    METRICS_NOTIFY_DROPPED,
    METRICS_NOTIFY__COUNT
};

/* Shows the notification families (at zero): --notify-url is set. */
void metrics_notify_enabled(void);

/* Counts one notification that ended as r. */
void metrics_notification(enum metrics_notify_result r);

/* Counts one notification send retried. */
void metrics_notify_retry(void);

/* Renders all families into a malloc'd buffer (*len bytes). Returns NULL
 * on ENOMEM. */
char *metrics_render(size_t *len);

/* Resets everything (tests). */
void metrics_reset(void);

#endif
