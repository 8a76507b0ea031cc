/*
 * buf.h - the one growable text buffer: bytes appended as they come, a
 * printf-style append, and out of memory noted once instead of at every
 * call (the writer checks b->oom at the end). The /metrics renderers
 * (base/prom.h), the log line (base/log.c), the injector's YAML and JSON
 * renderer (yamldoc/render.c) and its report (inject/manifests.c) write
 * into it.
 *
 * Out of memory: an append that cannot grow the buffer sets oom and every
 * later append does nothing; the bytes written so far stay valid and
 * NUL-terminated, and buf_free releases them. Nothing here aborts, so the
 * folders that return -ENOMEM (yamldoc/, inject/) can use it.
 */
#ifndef RA_BUF_H
#define RA_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h> /* vsnprintf, for RA_VSNPRINTF */

/* Zero-initialise ({0}) before the first append. */
struct buf {
    char *p;    /* the bytes, NUL-terminated; NULL until the first append */
    size_t len; /* bytes in p, without the NUL */
    size_t cap; /* bytes allocated at p */
    int oom;    /* an append failed: p holds a prefix of what was written */
};

/* Appends n bytes of s (which may hold NULs). */
void buf_add(struct buf *b, const void *s, size_t n);

/* Appends the string s. */
void buf_puts(struct buf *b, const char *s);

/* Appends one byte. */
void buf_putc(struct buf *b, char c);

/* Appends the printf output of fmt and its arguments. */
void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The string written so far: never NULL ("" before the first append). Valid
 * until the next append or buf_free. */
const char *buf_str(const struct buf *b);

/* Hands the bytes to the caller: returns p (NUL-terminated, *len bytes,
 * the caller frees it; an empty buffer gives an allocated "") and leaves b
 * empty. NULL (and b freed) when an append failed or nothing could be
 * allocated. len may be NULL. */
char *buf_take(struct buf *b, size_t *len);

/* Frees the bytes and leaves b empty, ready for reuse. */
void buf_free(struct buf *b);

/* Inside a printf-like function whose last named parameter is fmt: its
 * arguments formatted into the char array dst (truncated to fit,
 * NUL-terminated). The one body of the helpers that format a message and
 * hand it to a sink of their own (a log line, an error buffer, a report). */
#define RA_VSNPRINTF(dst, fmt)                                                                     \
    do {                                                                                           \
        _Static_assert(!__builtin_types_compatible_p(__typeof__(dst), __typeof__(&(dst)[0])),      \
                       "RA_VSNPRINTF needs an array, not a pointer");                              \
        va_list ra_ap_;                                                                            \
        va_start(ra_ap_, fmt);                                                                     \
        vsnprintf((dst), sizeof(dst), (fmt), ra_ap_);                                              \
        va_end(ra_ap_);                                                                            \
    } while (0)

#endif
