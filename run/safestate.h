/*
 * safestate.h - what the safe-reload steps keep in --state-dir (an emptyDir
 * that lives as long as the pod), beside the applied state:
 *
 *   ready       the agent is ready: with --keep-last-good, every copy the app
 *               reads holds validated content. `reload-agent ready` (the
 *               injector's exec startupProbe) exits 0 while it exists and
 *               names a live process; an agent removes it when it starts and
 *               writes it once ready, so the app container is not started
 *               on an empty or invalid copy.
 *   storm.json  the storm breaker's recent action times (run/storm.h), so
 *               that an agent that starts again in the pod (a crash, or
 *               restart-pod, which ends the agent at every action) keeps the
 *               count: {"version": 1, "actions_ms": [...]}.
 */
#ifndef RA_SAFESTATE_H
#define RA_SAFESTATE_H

#include <stddef.h>
#include <stdint.h>

#define SAFESTATE_READY "ready"
#define SAFESTATE_STORM "storm.json"

/* Writes dir/ready (this process's PID) when ready, else removes it.
 * Returns 0 or -errno with the reason in err. */
int safestate_set_ready(const char *dir, int ready, char *err, size_t errlen);

/* 0 when dir/ready exists and names a live process; else -ENOENT (not
 * ready yet), -ESRCH (its agent is gone) or another -errno, with the
 * reason in why. */
int safestate_check_ready(const char *dir, char *why, size_t n);

/* Writes the action times t[0..n). Returns 0 or -errno with the reason. */
int safestate_save_storm(const char *dir, const int64_t *t, size_t n, char *err, size_t errlen);

/* Reads them back: 1 and *t (malloc'd, free it) and *n when there was a
 * record, 0 when none, -errno with the reason in err when it cannot be
 * read or is malformed. */
int safestate_load_storm(const char *dir, int64_t **t, size_t *n, char *err, size_t errlen);

#endif
