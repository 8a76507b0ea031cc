/*
 * buf.c - the growable text buffer (contract in buf.h). The capacity
 * doubles from 256 bytes, so n appends cost O(n) copies in all.
 */
#include "base/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Makes room for want more bytes and the NUL. Returns 0, or -1 with oom
 * set. */
static int reserve(struct buf *b, size_t want)
{
    if (b->oom) return -1;
    if (want < b->cap - b->len) return 0; /* cap > len whenever p is set */
    if (want > (size_t)-1 / 2 - b->len) {
        b->oom = 1;
        return -1;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len <= want) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void buf_add(struct buf *b, const void *s, size_t n)
{
    if (reserve(b, n) < 0) return;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void buf_puts(struct buf *b, const char *s) { buf_add(b, s, strlen(s)); }

void buf_putc(struct buf *b, char c) { buf_add(b, &c, 1); }

/* buf_printf with a va_list. */
static void vprintf_to(struct buf *b, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    size_t room = b->p && !b->oom ? b->cap - b->len : 0;
    int n = b->oom ? -1 : vsnprintf(room ? b->p + b->len : NULL, room, fmt, ap);
    if (n >= 0 && (size_t)n >= room && reserve(b, (size_t)n) == 0)
        vsnprintf(b->p + b->len, b->cap - b->len, fmt, again);
    va_end(again);
    if (n < 0) b->oom = 1;
    if (b->oom) {
        if (b->p) b->p[b->len] = '\0'; /* a truncated first try wrote past len */
        return;
    }
    b->len += (size_t)n;
}

void buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf_to(b, fmt, ap);
    va_end(ap);
}

const char *buf_str(const struct buf *b) { return b->p ? b->p : ""; }

char *buf_take(struct buf *b, size_t *len)
{
    if (!b->p) buf_add(b, "", 0);
    if (b->oom) {
        buf_free(b);
        return NULL;
    }
    char *p = b->p;
    if (len) *len = b->len;
    memset(b, 0, sizeof *b);
    return p;
}

void buf_free(struct buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}
