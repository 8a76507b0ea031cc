/*
 * cleanpath.c - lexical path cleaning (contract in cleanpath.h) for the
 * transform and the stamp. Without it two mounts can land on one
 * directory, or an --ignore glob can miss the paths the agent walks.
 */
#include "inject/cleanpath.h"

#include <stdlib.h>
#include <string.h>

char *inject_clean_path(const char *p)
{
    size_t len = strlen(p), o = 0;
    int rooted = p[0] == '/';
    char *out = malloc(len + 2);
    if (!out) return NULL;
    if (rooted) out[o++] = '/';
    size_t floor = o; /* a ".." never goes above the root */
    for (size_t i = 0; i < len;) {
        while (i < len && p[i] == '/') i++;
        size_t s = i;
        while (i < len && p[i] != '/') i++;
        size_t n = i - s;
        if (n == 0 || (n == 1 && p[s] == '.')) continue;
        if (n == 2 && p[s] == '.' && p[s + 1] == '.') {
            if (o > floor) { /* drop the last element */
                while (o > floor && out[o - 1] != '/') o--;
                if (o > floor) o--;
            } else if (!rooted) { /* a relative path keeps its leading ".." */
                if (o > 0) out[o++] = '/';
                memcpy(out + o, "..", 2);
                o += 2;
                floor = o;
            }
            continue;
        }
        if (o > (rooted ? 1u : 0u)) out[o++] = '/';
        memcpy(out + o, p + s, n);
        o += n;
    }
    if (o == 0) out[o++] = '.';
    out[o] = '\0';
    return out;
}

int inject_is_clean_path(const char *p)
{
    char *c = inject_clean_path(p);
    int same = c && strcmp(c, p) == 0;
    free(c);
    return same;
}
