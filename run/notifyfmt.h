/*
 * notifyfmt.h - the body of one notification (docs/notifications.md), in
 * the format the receiver expects: plain JSON (any webhook), Slack (text
 * and blocks), Microsoft Teams (an Adaptive Card in a message, what a
 * Workflows webhook takes) or Google Chat (text). Pure: an event in, a JSON
 * text out; run/notify.c sends it.
 */
#ifndef RA_NOTIFYFMT_H
#define RA_NOTIFYFMT_H

#include <stddef.h>
#include <stdint.h>

enum notify_format { NOTIFY_JSON = 0, NOTIFY_SLACK, NOTIFY_TEAMS, NOTIFY_GCHAT };

/* The names --notify-format takes, index = enum notify_format,
 * NULL-terminated. */
extern const char *const notify_format_names[];

#define NOTIFY_FILES_MAX 20

/* What happened. Every string may be NULL or "" (then left out). */
struct notify_event {
    const char *event;  /* "reload", "rejected", "rollback", "verify-failed",
                           "storm-halted", "stage-halted" */
    int ok;             /* 1: it went as wanted (a reload that succeeded) */
    const char *action; /* "signal", "rollout+signal", ... */
    const char *pod;
    const char *namespace_;
    const char *workload;                /* "Deployment/web" */
    const char *files[NOTIFY_FILES_MAX]; /* the changed files, at most 20 named */
    size_t nfiles;
    size_t files_more;    /* changed files not named */
    const char *old_hash; /* the content applied before (hex) */
    const char *new_hash; /* the content acted on (hex) */
    const char *detail;   /* the error or the reason */
    int attempt;          /* 0: not an attempt */
    int dry_run;
    int64_t time_unix_ms;
};

/* The result word of an event: "success" or "failure". */
const char *notify_result(const struct notify_event *ev);

/* One line saying what happened, e.g. "signal reload succeeded on pod
 * ns/web-1 (Deployment/web)". Written into out (always NUL-terminated). */
void notifyfmt_summary(const struct notify_event *ev, char *out, size_t n);

/* The body for format f, a malloc'd NUL-terminated JSON text (*len bytes
 * without the NUL when len != NULL); NULL only for an unknown format.
 * Aborts on ENOMEM (docs/errors.md). */
char *notifyfmt_render(enum notify_format f, const struct notify_event *ev, size_t *len);

#endif
