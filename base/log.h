/*
 * log.h - levelled, structured logging to stderr, as text or JSON lines.
 *
 * Every line is one event. A plain message uses the log_error/warn/info/debug
 * macros. A structured event with fields uses a log_rec:
 *
 *     struct log_rec r;
 *     if (log_rec_begin(&r, RA_LOG_INFO, "change")) {
 *         log_rec_str(&r, "hash", hex);
 *         log_rec_strv(&r, "modified", paths, n);
 *         log_rec_end(&r, "content changed (%zu paths)", n);
 *     }
 *
 * With --log-format json each line is one JSON object:
 *   {"time":"2026-12-02T17:00:00.123Z","level":"info","event":"change","msg":"...","hash":"..."}
 * Text lines read:  2026-12-02T17:00:00.123Z info  [change] msg hash=... modified=[a,b]
 *
 * Strings may be arbitrary bytes (file names need not be UTF-8), and no value
 * can break a line: JSON output escapes control characters and writes each
 * byte that is not part of valid UTF-8 as the literal text "\\xHH"
 * (backslash, x, two hex digits), so the line stays valid JSON and the byte
 * is still recognisable; C1 controls and U+2028/U+2029 become \uHHHH. Text
 * output writes a field value raw only if it holds none of those (nor
 * spaces, quotes, '=', ',', '[', ']', '\\'), else JSON-quoted the same way;
 * in the message, \n \r \t are written as those two characters, other
 * control characters and invalid bytes as \xHH. One record, one line.
 * Never pass file contents or tokens to the logger.
 */
#ifndef RA_LOG_H
#define RA_LOG_H

#include <stdarg.h>
#include <stddef.h>

#include "base/buf.h"

enum log_level { RA_LOG_DEBUG = 0, RA_LOG_INFO = 1, RA_LOG_WARN = 2, RA_LOG_ERROR = 3 };
enum log_format { RA_LOG_FORMAT_TEXT = 0, RA_LOG_FORMAT_JSON = 1 };

/* Sets the minimum level and the output format (default: info, text). */
void log_configure(enum log_level min, enum log_format fmt);

/* Returns 1 if a record at `lvl` would be written. */
int log_is_enabled(enum log_level lvl);

/* Redirects output to fd (default 2). For tests. */
void log_set_fd(int fd);

/* The names of the levels and of the formats, NULL-terminated, indexed by
 * their enum value: the one list every --log-level and --log-format
 * parser takes its choices from (config/config.c, cmd/flags.c). */
extern const char *const log_level_names[];
extern const char *const log_format_names[];

struct log_rec {
    int active;
    enum log_level lvl;
    const char *event;
    struct buf fields; /* the rendered fields */
    int nfields;
};

/* Starts a record. Returns 0 (and makes every other log_rec_* call on r a
 * no-op) when the level is disabled; then log_rec_end need not be called.
 * `event` may be NULL for a plain message. */
int log_rec_begin(struct log_rec *r, enum log_level lvl, const char *event);
void log_rec_str(struct log_rec *r, const char *key, const char *val);
void log_rec_strn(struct log_rec *r, const char *key, const char *val, size_t len);
void log_rec_int(struct log_rec *r, const char *key, long long v);
void log_rec_num(struct log_rec *r, const char *key, double v);
void log_rec_bool(struct log_rec *r, const char *key, int v);
void log_rec_strv(struct log_rec *r, const char *key, const char *const *v, size_t n);
/* Writes the line (one write(2)) and frees the record's memory. */
void log_rec_end(struct log_rec *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Plain message at a level, no event name. */
void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define RA_LOG_AT_(lvl, ...)                                                                       \
    do {                                                                                           \
        if (!log_is_enabled(lvl)) break;                                                           \
        log_msg(lvl, __VA_ARGS__);                                                                 \
    } while (0)
#define log_error(...) RA_LOG_AT_(RA_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) RA_LOG_AT_(RA_LOG_WARN, __VA_ARGS__)
#define log_info(...) RA_LOG_AT_(RA_LOG_INFO, __VA_ARGS__)
#define log_debug(...) RA_LOG_AT_(RA_LOG_DEBUG, __VA_ARGS__)

/* The out-of-memory policy (docs/errors.md): logs and exits 70; Kubernetes
 * restarts the sidecar. Only for allocations inside the loop's own logic;
 * parsers return -ENOMEM instead. */
void ra_oom(void) __attribute__((noreturn));

/* strdup and asprintf under that policy: they never return NULL, except
 * ra_strdup(NULL), which returns NULL. The caller frees the result. */
char *ra_strdup(const char *s);
char *ra_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The parsers' error convention (docs/errors.md) in one call: formats the
 * reason into err (errlen bytes, NUL-terminated; nothing if err is NULL or
 * errlen 0), makes it one line under the policy of base/text.h (whatever
 * the arguments quoted raw), and returns rc, so a parser can `return
 * ra_errf(err, errlen, -EINVAL, "...", ...)`. */
int ra_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
