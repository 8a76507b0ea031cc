/*
 * value.h - parsers for option values: Go-style durations, signals,
 * booleans and comma lists. Pure functions, no allocation except
 * val_list. Each returns 0 on success or -EINVAL and writes a short reason
 * (without the option name; the caller adds that) into err[errlen].
 */
#ifndef RA_VALUE_H
#define RA_VALUE_H

#include <stddef.h>
#include <stdint.h>

/* Go time.ParseDuration syntax: a sequence of decimal numbers, each with an
 * optional fraction and a unit: "ns", "us", "µs" (U+00B5 or U+03BC), "ms",
 * "s", "m", "h" ("250ms", "1m30s", "1.5h", ".5s", "1.s"). "0" alone is
 * allowed without a unit; a leading '+' is allowed as in Go. A leading '-'
 * is rejected (no negative durations here), as is overflow of int64
 * nanoseconds. Reasons read like Go's: `missing unit in duration "5"`. */
int val_duration(const char *s, int64_t *ns, char *err, size_t errlen);

/* Formats ns exactly as Go's Duration.String ("1m30s", "250ms", "1.5µs",
 * "0s", "1h0m0s", negatives with '-') into out, truncated to outlen; 32
 * bytes always suffice. */
void val_format_duration(int64_t ns, char *out, size_t outlen);

/* Signal by name with or without "SIG" (case-insensitive: "HUP", "SIGHUP",
 * "sigusr1"; IO and POLL both mean 29) or by number 1..64 ("1"). RTMIN,
 * RTMIN+n, RTMAX and RTMAX-n use the C library's SIGRTMIN/SIGRTMAX and must
 * stay within them. */
int val_signal(const char *s, int *sig, char *err, size_t errlen);

/* Returns the canonical name ("SIGHUP", "SIGRTMIN+2") of sig, or NULL if
 * it has none (0, > 64, or 32..SIGRTMIN-1 reserved by the C library). The
 * name always parses back to sig with val_signal. */
const char *val_signal_name(int sig);

/* Go strconv.ParseBool: 1 t T TRUE true True 0 f F FALSE false False. */
int val_bool(const char *s, int *b, char *err, size_t errlen);

/* Splits a comma-separated list; items are trimmed of spaces and tabs; an
 * empty (or blank) string gives an empty list; empty items ("a,,b", "a,")
 * are rejected. On success
 * *items is a malloc'd NULL-terminated array of malloc'd strings (free with
 * val_list_free) and *n its length. */
int val_list(const char *s, char ***items, size_t *n, char *err, size_t errlen);
void val_list_free(char **items);

/* Unsigned decimal integer (digits only: no sign, spaces or 0x) within
 * [min, max]. */
int val_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out, char *err, size_t errlen);

/* A Kubernetes annotation key, validated as the API server does
 * (apimachinery ValidateAnnotations: IsQualifiedName of the lower-cased
 * key): an optional prefix, a DNS-1123 subdomain of at most 253 characters
 * followed by '/', then a name of 1 to 63 characters from [-_.A-Za-z0-9]
 * that starts and ends with [A-Za-z0-9]. ("reload-agent.io/config-hash",
 * "example.com/x", "hash".) */
int val_annotation_key(const char *s, char *err, size_t errlen);

#endif
