/*
 * lines.h - a byte stream cut into lines, as a watch's event stream is:
 * bytes fed as they come, each complete line (without its newline) handed
 * to a callback, a bound on a line's length, and the bytes held zeroed
 * whenever they are let go (a line may carry a Secret's bytes: kube/kwatch.c
 * and kube/kcwatch.c read their streams through it).
 */
#ifndef RA_LINES_H
#define RA_LINES_H

#include <stddef.h>

/* Zero-initialise, then set max (a line's longest, newline not counted). */
struct lines {
    char *p;    /* the partial line; NULL until the first byte */
    size_t len; /* bytes of the partial line */
    size_t cap; /* bytes allocated at p */
    size_t max; /* the bound: a longer line is an error */
};

enum lines_result {
    LINES_MORE = 0, /* all of the bytes taken; a partial line may be held */
    LINES_STOP = 1, /* on_line returned nonzero: the bytes after that line dropped */
    LINES_LONG = -1 /* a line grew past max: what was held is dropped */
};

/* Feeds n bytes of data: every line they complete goes to
 * on_line(ud, line, len) in order; line is NUL-terminated and valid during
 * the call. Aborts on out of memory (base/log.h's policy). */
enum lines_result lines_feed(struct lines *l, const char *data, size_t n,
                             int (*on_line)(void *ud, const char *line, size_t len), void *ud);

/* Drops the partial line (zeroed; the allocation is kept for the next). */
void lines_wipe(struct lines *l);

/* Zeroes and frees what l holds; l may be fed again afterwards. */
void lines_free(struct lines *l);

#endif
