/*
 * hash_cache.c - what struct hash_cache remembers between computations
 * (hash_cache.h): per root, its resolved path, checked by directory
 * identity on every use, and its top-level listing, kept until the caller
 * forgets it (hash.h).
 */
#include "hash/hash_cache.h"

#include <stdlib.h>
#include <string.h>

void hash__top_free(struct top_list *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->v[i].name);
        free(t->v[i].target);
    }
    free(t->v);
    *t = (struct top_list){0};
}

void hash_cache_free(struct hash_cache *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->v[i].root);
        free(c->v[i].real);
        hash__top_free(&c->v[i].top);
    }
    free(c->v);
    c->v = NULL;
    c->n = 0;
}

void hash_cache_forget_listing(struct hash_cache *c, const char *root)
{
    for (size_t i = 0; c && i < c->n; i++) {
        if (root && strcmp(c->v[i].root, root) != 0) continue;
        hash__top_free(&c->v[i].top);
        c->v[i].top_valid = 0;
    }
}

ssize_t hash__cache_lookup(struct hash_cache *c, const char *root, const struct stat *st)
{
    struct stat rs;
    for (size_t i = 0; c && i < c->n; i++) {
        struct hash_cache_root *r = &c->v[i];
        if (strcmp(r->root, root) != 0) continue;
        if (r->dev == st->st_dev && r->ino == st->st_ino && stat(r->real, &rs) == 0 &&
            rs.st_dev == st->st_dev && rs.st_ino == st->st_ino)
            return (ssize_t)i;
        return -1;
    }
    return -1;
}

ssize_t hash__cache_store(struct hash_cache *c, const char *root, const struct stat *st,
                          const char *real)
{
    struct hash_cache_root *r = NULL;
    char *rr, *rl;
    if (!c) return -1;
    for (size_t i = 0; i < c->n && !r; i++)
        if (strcmp(c->v[i].root, root) == 0) r = &c->v[i];
    if (!r) {
        struct hash_cache_root *nv = realloc(c->v, (c->n + 1) * sizeof *nv);
        if (!nv) return -1;
        c->v = nv;
        rr = strdup(root);
        if (!rr) return -1;
        r = &c->v[c->n++];
        *r = (struct hash_cache_root){rr, 0, 0, NULL, {0}, 0};
    }
    hash__top_free(&r->top); /* another directory: its listing is unknown */
    r->top_valid = 0;
    rl = strdup(real);
    if (!rl) {
        r->dev = 0; /* never matches: the entry is refreshed next time */
        r->ino = 0;
        return -1;
    }
    free(r->real);
    r->real = rl;
    r->dev = st->st_dev;
    r->ino = st->st_ino;
    return r - c->v;
}

void hash__top_add(struct top_list *t, const char *name, unsigned char type, const char *target)
{
    char *n = NULL, *g = NULL;
    if (t->n == t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 16;
        struct top_entry *nv = realloc(t->v, ncap * sizeof *nv);
        if (!nv) {
            t->ok = -1;
            return;
        }
        t->v = nv;
        t->cap = ncap;
    }
    if ((n = strdup(name)) && (!target || (g = strdup(target)))) {
        t->v[t->n++] = (struct top_entry){n, type, g};
        return;
    }
    free(n);
    t->ok = -1; /* incomplete for good */
}
