/*
 * lines.c - a byte stream cut into lines (contract in lines.h). The buffer
 * doubles from 4 KiB; when it grows, the old bytes are copied and zeroed
 * before they are freed (realloc would leave them in freed memory).
 */
#include "base/lines.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"

/* Room for want more bytes and the NUL. */
static void reserve(struct lines *l, size_t want)
{
    if (l->len + want + 1 <= l->cap) return;
    size_t cap = l->cap ? l->cap : 4096;
    while (cap < l->len + want + 1) cap *= 2;
    char *p = malloc(cap);
    if (!p) ra_oom();
    if (l->p) {
        memcpy(p, l->p, l->len);
        explicit_bzero(l->p, l->cap);
        free(l->p);
    }
    l->p = p;
    l->cap = cap;
}

enum lines_result lines_feed(struct lines *l, const char *data, size_t n,
                             int (*on_line)(void *ud, const char *line, size_t len), void *ud)
{
    while (n > 0) {
        const char *nl = memchr(data, '\n', n);
        size_t take = nl ? (size_t)(nl - data) : n;
        if (take > l->max || l->len > l->max - take) {
            lines_wipe(l);
            return LINES_LONG;
        }
        reserve(l, take);
        memcpy(l->p + l->len, data, take);
        l->len += take;
        l->p[l->len] = '\0';
        data += take;
        n -= take;
        if (!nl) break;
        data++, n--; /* the newline */
        int stop = on_line(ud, l->p, l->len);
        lines_wipe(l);
        if (stop) return LINES_STOP;
    }
    return LINES_MORE;
}

void lines_wipe(struct lines *l)
{
    if (l->p) explicit_bzero(l->p, l->cap);
    l->len = 0;
}

void lines_free(struct lines *l)
{
    lines_wipe(l);
    free(l->p);
    l->p = NULL;
    l->cap = 0;
}
