/*
 * storm.h - the storm breaker of --storm-limit N/WINDOW, pure: it keeps the
 * times of the last N actions and says whether one more stays within the
 * limit; once it trips, the agent stops acting until the content has been
 * stable for WINDOW (no change observed), and then acts once on what the
 * content is by then, with a fresh count.
 *
 * Times are wall-clock milliseconds (CLOCK_REALTIME), so that the agent
 * that starts again in the same pod (a crash, or restart-pod, which ends
 * the agent at every action) carries the count on through --state-dir
 * (run/safestate.h).
 */
#ifndef RA_STORM_H
#define RA_STORM_H

#include <stddef.h>
#include <stdint.h>

struct storm {
    int max;           /* N; 0 = off */
    int64_t window_ms; /* WINDOW */
    int64_t *t;        /* the last (at most max) action times, ascending */
    size_t n;
    int halted;
    int64_t halted_at;   /* when it tripped */
    int64_t last_change; /* the last content change seen (for the resume) */
};

/* Sets the limit (a live configuration change); the times kept stay, cut
 * to the newest max. A limit turned off ends a halt. */
void storm_configure(struct storm *s, int max, int64_t window_ms);

/* Frees what s holds and zeroes it. */
void storm_free(struct storm *s);

/* The actions within the window before now. */
size_t storm_count(const struct storm *s, int64_t now);

/* 1 if an action at now keeps within the limit (always when off and not
 * halted), else 0: the caller then calls storm_trip. */
int storm_allows(const struct storm *s, int64_t now);

/* Records an action at now. */
void storm_note_action(struct storm *s, int64_t now);

/* The breaker trips at now: halted until the content is stable. */
void storm_trip(struct storm *s, int64_t now);

/* A content change at now (it moves the resume). */
void storm_content_changed(struct storm *s, int64_t now);

/* When a halt may end: the last change (or the trip) + the window; 0 when
 * not halted. */
int64_t storm_resume_at(const struct storm *s);

/* Ends the halt when now has reached storm_resume_at, forgetting the
 * counted actions: returns 1 then, else 0. */
int storm_try_resume(struct storm *s, int64_t now);

/* Replaces the kept times with t[0..n) (ascending or not; the newest max
 * within reason are kept). */
void storm_load(struct storm *s, const int64_t *t, size_t n);

/* CLOCK_REALTIME in milliseconds. */
int64_t storm_now_ms(void);

#endif
