/*
 * dups.c - the first repeated string of a list (see dups.h): indices sorted
 * by (string, index); in each run of equal strings every index after the
 * run's first repeats it, and the smallest such index is the answer.
 */
#include "base/dups.h"

#include <stdlib.h>
#include <string.h>

struct ent {
    const char *s;
    size_t i;
};

static int by_string(const void *a, const void *b)
{
    const struct ent *x = a, *y = b;
    int c = strcmp(x->s, y->s);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

long ra_first_duplicate(const char *const *v, size_t n)
{
    if (n < 2) return -1;
    struct ent *e = malloc(n * sizeof *e);
    if (!e) return -2;
    for (size_t i = 0; i < n; i++) e[i] = (struct ent){v[i], i};
    qsort(e, n, sizeof *e, by_string);
    long first = -1;
    for (size_t k = 1; k < n; k++)
        if (strcmp(e[k].s, e[k - 1].s) == 0 && (first < 0 || e[k].i < (size_t)first))
            first = (long)e[k].i;
    free(e);
    return first;
}
