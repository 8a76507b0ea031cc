/*
 * names.c - a hash map from borrowed strings to indices for the transform
 * (transform_int.h): volumes, mounts, mirror paths and env references
 * looked up by name, so that a pod with 20 000 volumes costs 20 000
 * lookups, not 20 000 scans of 20 000 (issue 16.14: the webhook answers
 * every review from one loop). Open addressing with linear probing, at most
 * half full, FNV-1a hashes.
 */
#include "inject/transform_int.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_of(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The slot of key, or of the empty slot where it would go. */
static size_t slot(const struct inject__names *m, const char *key)
{
    size_t i = (size_t)hash_of(key) & (m->cap - 1);
    while (m->keys[i] && strcmp(m->keys[i], key) != 0) i = (i + 1) & (m->cap - 1);
    return i;
}

static int grow(struct inject__names *m, size_t want)
{
    size_t cap = 16;
    while (cap < 2 * want) cap *= 2;
    if (cap <= m->cap) return 0;
    struct inject__names n = {.cap = cap};
    n.keys = calloc(cap, sizeof *n.keys);
    n.vals = calloc(cap, sizeof *n.vals);
    if (!n.keys || !n.vals) {
        free(n.keys);
        free(n.vals);
        return -ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i]) {
            size_t j = slot(&n, m->keys[i]);
            n.keys[j] = m->keys[i];
            n.vals[j] = m->vals[i];
        }
    n.n = m->n;
    free(m->keys);
    free(m->vals);
    *m = n;
    return 0;
}

int inject__names_init(struct inject__names *m, size_t n)
{
    memset(m, 0, sizeof *m);
    return grow(m, n);
}

int inject__names_put(struct inject__names *m, const char *key, size_t val, size_t *had)
{
    if (grow(m, m->n + 1) < 0) return -ENOMEM;
    size_t i = slot(m, key);
    if (m->keys[i]) {
        if (had) *had = m->vals[i];
        return 0;
    }
    m->keys[i] = key;
    m->vals[i] = val;
    m->n++;
    return 1;
}

long inject__names_get(const struct inject__names *m, const char *key)
{
    if (!m->cap) return -1;
    size_t i = slot(m, key);
    return m->keys[i] ? (long)m->vals[i] : -1;
}

void inject__names_free(struct inject__names *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

long inject__names_ancestor(const struct inject__names *m, const char *path)
{
    size_t len = strlen(path);
    char stack[512], *buf = len < sizeof stack ? stack : malloc(len + 1);
    long found = -1;
    if (!buf) return -ENOMEM;
    memcpy(buf, path, len + 1);
    for (size_t i = len; i > 1 && found < 0;) {
        while (i > 0 && buf[i - 1] != '/') i--; /* to the '/' before the last element */
        if (i == 0) break;
        buf[i > 1 ? i - 1 : 1] = '\0'; /* "/a/b" -> "/a"; "/a" -> "/" */
        found = inject__names_get(m, buf);
        i = i > 1 ? i - 1 : 0;
    }
    if (buf != stack) free(buf);
    return found;
}
