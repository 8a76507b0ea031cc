/*
 * safeopts.h - the values and the combination of the safe-reload options
 * (--validate, --validator-socket, --keep-last-good, --verify,
 * --storm-limit; docs/safe-reload.md), judged for config/config.c: the
 * value checks of their table rows, and one cross-field check that
 * validate() calls, which also derives the storm breaker's limit.
 */
#ifndef RA_SAFEOPTS_H
#define RA_SAFEOPTS_H

#include <stddef.h>
#include <stdint.h>

struct config;

/* The storm breaker's default for an agent whose actions include rollout:
 * at most this many actions per window ("auto"; docs/safe-reload.md). */
#define SAFEOPTS_STORM_AUTO_MAX 5
#define SAFEOPTS_STORM_AUTO_WINDOW_NS (INT64_C(10) * 60 * 1000000000)

/* The longest unix socket path (sun_path holds 108 bytes with the NUL). */
#define SAFEOPTS_SOCKET_MAX 107

/* Value checks of the table rows (the shape of opt_def.check): 0, or
 * -EINVAL with the reason in why. "" means unset for each. */
int safeopts_check_verify(const char *v, char *why, size_t n);      /* URL or command */
int safeopts_check_socket(const char *v, char *why, size_t n);      /* a unix socket path */
int safeopts_check_storm_limit(const char *v, char *why, size_t n); /* auto|off|N/DURATION */

/* Parses --storm-limit: "off" (and "") gives *max 0; "N/DURATION" gives
 * N (1 to 1000) and the window (1s to 24h); "auto" gives
 * SAFEOPTS_STORM_AUTO_* when uses_rollout, else 0. Returns 0, or -EINVAL
 * with the reason in why. */
int safeopts_storm_limit(const char *v, int uses_rollout, int *max, int64_t *window_ns, char *why,
                         size_t n);

/* Splits one --keep-last-good value "SRC=DIR" at its first '=': *src and
 * *dir are malloc'd (SRC without trailing '/'). Returns 0, or -EINVAL. */
int safeopts_split_lkg(const char *v, char **src, char **dir);

/* The combination, called by cfg_build once the actions in use are known
 * (used_mask, ACTION_BIT()s): each --keep-last-good names a --watch root
 * that is a directory the app reads in place (not an --env-watch root),
 * once, and an absolute DIR apart from every root; --keep-last-good needs
 * --state-dir; --verify needs an in-place action to follow. Sets
 * c->storm_max and c->storm_window_ns. Returns 0, or -EINVAL with a
 * one-line message naming the option and the value in err. */
int safeopts_validate(struct config *c, unsigned used_mask, char *err, size_t errlen);

#endif
