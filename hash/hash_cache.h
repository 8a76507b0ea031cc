/*
 * hash_cache.h - internal to hash/: what struct hash_cache remembers per
 * root between computations (its resolved path and top-level listing), and
 * the operations hash.c uses on it. The public side is in hash.h.
 */
#ifndef RA_HASH_CACHE_H
#define RA_HASH_CACHE_H

#include <sys/stat.h>
#include <sys/types.h>

#include "hash/hash.h"

/* One top-level entry of a root directory as getdents64 gave it. */
struct top_entry {
    char *name;
    unsigned char type; /* DT_* */
    char *target;       /* DT_LNK: what the link says */
};

struct top_list {
    struct top_entry *v;
    size_t n, cap;
    int ok; /* 1: recorded completely; -1: incomplete for good (out of memory) */
};

struct hash_cache_root {
    char *root; /* the root as given */
    dev_t dev;  /* identity of the directory it named */
    ino_t ino;
    char *real;          /* its resolved path */
    struct top_list top; /* its top-level entries, while top_valid */
    int top_valid;
};

/* Frees the list's memory and zeroes it. */
void hash__top_free(struct top_list *t);

/* Appends an entry (copied); out of memory only marks the list incomplete
 * (ok = -1), so it is never kept. */
void hash__top_add(struct top_list *t, const char *name, unsigned char type, const char *target);

/* The index of root's entry in c if its remembered resolved path still
 * names the directory st describes (one stat(2)), else -1. c may be NULL. */
ssize_t hash__cache_lookup(struct hash_cache *c, const char *root, const struct stat *st);

/* Remembers root -> real for the directory st, with no listing yet; returns
 * the entry's index, or -1 (c NULL, or out of memory: no caching). */
ssize_t hash__cache_store(struct hash_cache *c, const char *root, const struct stat *st,
                          const char *real);

#endif
