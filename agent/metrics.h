/*
 * metrics.h - the agent's counters and gauges, rendered in the Prometheus
 * text exposition format 0.0.4 (HELP and TYPE for every family).
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

/* Sets the gauge of directories that could not be watched (the monitor
 * pushes it whenever the count changes). */
void metrics_set_unwatched_directories(uint64_t n);

/* Renders all families into a malloc'd buffer (*len bytes). changes and
 * watch_events are read from the monitor by the caller. Returns NULL on
 * ENOMEM. */
char *metrics_render(uint64_t changes, uint64_t watch_events, size_t *len);

/* Resets everything (tests). */
void metrics_reset(void);

#endif
