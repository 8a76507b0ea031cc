/*
 * dups.h - the first repeated string of a list, in O(n log n): option lists
 * may be long (a sidecar injected into a pod with 20 000 volumes gets
 * 20 000 --watch roots), and a pairwise check of them took seconds.
 */
#ifndef RA_DUPS_H
#define RA_DUPS_H

#include <stddef.h>

/* The index of the first string of v[0..n) that equals an earlier one (the
 * first i with v[j] == v[i] for some j < i), or -1 when all differ. The
 * strings are borrowed and not changed. Returns -2 when out of memory. */
long ra_first_duplicate(const char *const *v, size_t n);

#endif
