/*
 * jsonstream.c - a stream of JSON documents split at the end of each
 * top-level object or array (see jsonstream.h): brackets counted outside
 * strings, string escapes skipped.
 */
#include "yamldoc/jsonstream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* The end of the object or array starting at text[i], or 0 when it does
 * not end in the text. */
static size_t value_end(const char *text, size_t len, size_t i)
{
    size_t depth = 0;
    int in_str = 0;
    for (; i < len; i++) {
        char c = text[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (depth == 0) return 0;
            if (--depth == 0) return i + 1;
        }
    }
    return 0;
}

long jsonstream_control_at(const char *text, size_t len)
{
    int in_str = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (in_str && c == '\\')
            i++;
        else if (c == '"')
            in_str = !in_str;
        else if (in_str && c < 0x20)
            return (long)i;
    }
    return -1;
}

long jsonstream_split(const char *text, size_t len, struct jsonstream_doc **docs)
{
    size_t i = len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0, n = 0, cap = 0;
    struct jsonstream_doc *v = NULL;
    *docs = NULL;
    for (;;) {
        while (i < len && is_ws(text[i])) i++;
        if (i == len) break;
        size_t end = text[i] == '{' || text[i] == '[' ? value_end(text, len, i) : 0;
        if (end == 0) {
            free(v);
            return 0;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            struct jsonstream_doc *nv = realloc(v, cap * sizeof *nv);
            if (!nv) {
                free(v);
                return -ENOMEM;
            }
            v = nv;
        }
        v[n++] = (struct jsonstream_doc){i, end};
        i = end;
    }
    if (n < 2) {
        free(v);
        return 0;
    }
    *docs = v;
    return (long)n;
}
