/*
 * annotations.h - parser for the downward-API annotations file
 * (docs/kubernetes-api.md#the-downward-api-annotations-file):
 * lines `key="go-quoted value"` separated by '\n', sorted, no trailing
 * newline (a trailing newline and CRLF are tolerated). An empty file is an
 * empty set.
 */
#ifndef RA_ANNOTATIONS_H
#define RA_ANNOTATIONS_H

#include <stddef.h>

struct annot {
    char *key; /* NUL-terminated */
    char *val; /* decoded value, NUL-terminated (may hold NULs: see vlen) */
    size_t vlen;
};

struct annot_set {
    struct annot *v; /* sorted by key, bytewise (strcmp) */
    size_t n;
};

/* Parses buf[0..len). Returns 0 and fills *out (free with annot_free), or
 * -EINVAL with a message naming the line number and what was wrong (missing
 * '=', empty key, bad quoting, duplicate key, ...) in err, *out left empty.
 * -ENOMEM on allocation failure. */
int annot_parse(const char *buf, size_t len, struct annot_set *out, char *err, size_t errlen);

/* Reads (ra_read_file: never blocks on a FIFO or device) and parses a
 * file. -errno from open/read, -EISDIR for a directory, -EINVAL for any
 * other non-regular file, -EFBIG for a file over 1 MiB; every message
 * starts with the path. */
int annot_parse_file(const char *path, struct annot_set *out, char *err, size_t errlen);

/* Returns the entry with this key, or NULL. */
const struct annot *annot_get(const struct annot_set *s, const char *key);

void annot_free(struct annot_set *s);

#endif
