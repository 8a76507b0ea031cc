/*
 * index.c - the sync service's object -> pods index (sync/index.h): two
 * chained hash tables (objects, pods) of small records that point at each
 * other, and a third of the pod count per namespace; no I/O.
 */
#include "sync/index.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "kube/k8sname.h"
#include "kube/kwatch.h"

struct node {
    struct node *next;
    uint64_t h;
};

struct obj {
    struct node n; /* first: a struct obj is its node */
    enum sync_kind kind;
    char *ns, *name, *rv; /* rv: NULL until seen */
    struct pod **pods;
    size_t npods, cap;
};

struct pod {
    struct node n;
    char *ns, *name, *synced;
    struct obj **objs;
    size_t nobjs;
};

/* the pods of one namespace (only while it has some) */
struct nsc {
    struct node n;
    char *ns;
    size_t pods;
};

struct table {
    struct node **b;
    size_t nb, n;
};

struct sync_index {
    struct table objs, pods, nss;
    size_t refs;
};

static uint64_t fnv(uint64_t h, const char *s)
{
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (h ^ '/') * 1099511628211ULL;
}

static uint64_t key_hash(int kind, const char *ns, const char *name)
{
    return fnv(fnv(14695981039346656037ULL ^ (uint64_t)(kind + 1), ns), name);
}

static void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n, sz);
    if (!p) ra_oom();
    return p;
}

static void table_grow(struct table *t)
{
    size_t nb = t->nb ? t->nb * 2 : 64;
    struct node **b = xcalloc(nb, sizeof *b);
    for (size_t i = 0; i < t->nb; i++)
        for (struct node *p = t->b[i], *next; p; p = next) {
            next = p->next;
            p->next = b[p->h % nb];
            b[p->h % nb] = p;
        }
    free(t->b);
    t->b = b;
    t->nb = nb;
}

static void table_put(struct table *t, struct node *p)
{
    if (t->n + 1 > t->nb) table_grow(t);
    p->next = t->b[p->h % t->nb];
    t->b[p->h % t->nb] = p;
    t->n++;
}

static void table_del(struct table *t, struct node *p)
{
    for (struct node **pp = &t->b[p->h % t->nb]; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            t->n--;
            return;
        }
}

static struct obj *obj_find(const struct sync_index *ix, enum sync_kind k, const char *ns,
                            const char *name)
{
    uint64_t h = key_hash((int)k, ns, name);
    if (!ix->objs.nb) return NULL;
    for (struct node *p = ix->objs.b[h % ix->objs.nb]; p; p = p->next) {
        struct obj *o = (struct obj *)p;
        if (p->h == h && o->kind == k && !strcmp(o->ns, ns) && !strcmp(o->name, name)) return o;
    }
    return NULL;
}

static struct obj *obj_get(struct sync_index *ix, enum sync_kind k, const char *ns,
                           const char *name)
{
    struct obj *o = obj_find(ix, k, ns, name);
    if (o) return o;
    o = xcalloc(1, sizeof *o);
    o->kind = k;
    o->ns = ra_strdup(ns);
    o->name = ra_strdup(name);
    o->n.h = key_hash((int)k, ns, name);
    table_put(&ix->objs, &o->n);
    return o;
}

/* Frees o when nothing keeps it: no pod names it and keep_rv is 0 or it
 * has no version. */
static void obj_maybe_free(struct sync_index *ix, struct obj *o, int keep_rv)
{
    if (o->npods || (keep_rv && o->rv)) return;
    table_del(&ix->objs, &o->n);
    free(o->ns);
    free(o->name);
    free(o->rv);
    free(o->pods);
    free(o);
}

static struct pod *pod_find(const struct sync_index *ix, const char *ns, const char *name)
{
    uint64_t h = key_hash(-1, ns, name);
    if (!ix->pods.nb) return NULL;
    for (struct node *p = ix->pods.b[h % ix->pods.nb]; p; p = p->next) {
        struct pod *d = (struct pod *)p;
        if (p->h == h && !strcmp(d->ns, ns) && !strcmp(d->name, name)) return d;
    }
    return NULL;
}

static struct nsc *nsc_find(const struct sync_index *ix, const char *ns)
{
    uint64_t h = key_hash(-2, ns, "");
    if (!ix->nss.nb) return NULL;
    for (struct node *p = ix->nss.b[h % ix->nss.nb]; p; p = p->next) {
        struct nsc *c = (struct nsc *)p;
        if (p->h == h && !strcmp(c->ns, ns)) return c;
    }
    return NULL;
}

/* A pod of ns came (delta 1) or went (-1). */
static void nsc_count(struct sync_index *ix, const char *ns, int delta)
{
    struct nsc *c = nsc_find(ix, ns);
    if (!c && delta > 0) {
        c = xcalloc(1, sizeof *c);
        c->ns = ra_strdup(ns);
        c->n.h = key_hash(-2, ns, "");
        table_put(&ix->nss, &c->n);
    }
    if (!c) return;
    if (delta > 0) {
        c->pods++;
        return;
    }
    if (c->pods > 0) c->pods--;
    if (c->pods) return;
    table_del(&ix->nss, &c->n);
    free(c->ns);
    free(c);
}

struct sync_index *sync_index_new(void) { return xcalloc(1, sizeof(struct sync_index)); }

const char *sync_kind_name(enum sync_kind k) { return k == SYNC_SECRET ? "secret" : "configmap"; }

/* Drops every reference of d (and the objects nothing keeps). */
static void pod_unlink(struct sync_index *ix, struct pod *d)
{
    for (size_t i = 0; i < d->nobjs; i++) {
        struct obj *o = d->objs[i];
        for (size_t j = 0; j < o->npods; j++)
            if (o->pods[j] == d) {
                memmove(o->pods + j, o->pods + j + 1, (o->npods - j - 1) * sizeof *o->pods);
                o->npods--;
                break;
            }
        ix->refs--;
        obj_maybe_free(ix, o, 1);
    }
    free(d->objs);
    d->objs = NULL;
    d->nobjs = 0;
}

void sync_index_remove_pod(struct sync_index *ix, const char *ns, const char *pod)
{
    struct pod *d = pod_find(ix, ns, pod);
    if (!d) return;
    pod_unlink(ix, d);
    table_del(&ix->pods, &d->n);
    nsc_count(ix, d->ns, -1);
    free(d->ns);
    free(d->name);
    free(d->synced);
    free(d);
}

/* Parses one entry "KIND/NAME" (len bytes) into *k and name (n bytes).
 * Returns 0 or -1. */
static int parse_entry(const char *e, size_t len, enum sync_kind *k, char *name, size_t n)
{
    static const struct {
        const char *p;
        enum sync_kind k;
    } KINDS[] = {{"configmap/", SYNC_CONFIGMAP}, {"secret/", SYNC_SECRET}};
    for (size_t i = 0; i < 2; i++) {
        size_t pl = strlen(KINDS[i].p);
        if (len <= pl || len - pl >= n || memcmp(e, KINDS[i].p, pl) != 0) continue;
        memcpy(name, e + pl, len - pl);
        name[len - pl] = '\0';
        *k = KINDS[i].k;
        return k8s_is_dns1123_subdomain(name) ? 0 : -1;
    }
    return -1;
}

/* Adds the reference d -> object k/name unless d has it. */
static void pod_link(struct sync_index *ix, struct pod *d, enum sync_kind k, const char *name)
{
    struct obj *o = obj_get(ix, k, d->ns, name);
    for (size_t i = 0; i < d->nobjs; i++)
        if (d->objs[i] == o) return;
    d->objs[d->nobjs++] = o;
    if (o->npods == o->cap) {
        o->cap = o->cap ? o->cap * 2 : 2;
        o->pods = realloc(o->pods, o->cap * sizeof *o->pods);
        if (!o->pods) ra_oom();
    }
    o->pods[o->npods++] = d;
    ix->refs++;
}

int sync_index_set_pod(struct sync_index *ix, const char *ns, const char *pod, const char *objects)
{
    struct pod *d = pod_find(ix, ns, pod);
    if (d) pod_unlink(ix, d);
    if (!objects || !objects[0]) {
        sync_index_remove_pod(ix, ns, pod);
        return 0;
    }
    if (!d) {
        d = xcalloc(1, sizeof *d);
        d->ns = ra_strdup(ns);
        d->name = ra_strdup(pod);
        d->n.h = key_hash(-1, ns, pod);
        table_put(&ix->pods, &d->n);
        nsc_count(ix, ns, 1);
    }
    d->objs = xcalloc(SYNC_INDEX_MAX_REFS, sizeof *d->objs);
    int bad = 0;
    for (const char *p = objects; *p;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        enum sync_kind k;
        char name[254];
        if (parse_entry(p, len, &k, name, sizeof name) < 0 || d->nobjs == SYNC_INDEX_MAX_REFS)
            bad++;
        else
            pod_link(ix, d, k, name);
        p = c ? c + 1 : p + len;
    }
    if (d->nobjs == 0) sync_index_remove_pod(ix, ns, pod);
    return bad;
}

enum sync_seen sync_index_object_seen(struct sync_index *ix, enum sync_kind k, const char *ns,
                                      const char *name, const char *rv)
{
    struct obj *o = obj_get(ix, k, ns, name);
    int cmp;
    if (!o->rv) {
        o->rv = ra_strdup(rv);
        return SYNC_SEEN_BASELINE;
    }
    if (!strcmp(o->rv, rv)) return SYNC_SEEN_SAME;
    if (kwatch__rv_compare(rv, o->rv, &cmp) == 0 && cmp < 0) return SYNC_SEEN_OLDER;
    free(o->rv);
    o->rv = ra_strdup(rv);
    return SYNC_SEEN_CHANGED;
}

void sync_index_object_deleted(struct sync_index *ix, enum sync_kind k, const char *ns,
                               const char *name)
{
    struct obj *o = obj_find(ix, k, ns, name);
    if (o) obj_maybe_free(ix, o, 0);
}

void sync_index_set_synced(struct sync_index *ix, const char *ns, const char *pod, const char *rv)
{
    struct pod *d = pod_find(ix, ns, pod);
    if (!d) return;
    free(d->synced);
    d->synced = ra_strdup(rv);
}

int sync_index_synced_since(const struct sync_index *ix, const char *ns, const char *pod,
                            const char *rv)
{
    const struct pod *d = pod_find(ix, ns, pod);
    int cmp;
    if (!d || !d->synced) return 0;
    if (!strcmp(d->synced, rv)) return 1;
    return kwatch__rv_compare(d->synced, rv, &cmp) == 0 && cmp >= 0;
}

size_t sync_index_pods_of(const struct sync_index *ix, enum sync_kind k, const char *ns,
                          const char *name, void (*cb)(void *ud, const char *ns, const char *pod),
                          void *ud)
{
    const struct obj *o = obj_find(ix, k, ns, name);
    if (!o) return 0;
    for (size_t i = 0; i < o->npods; i++) cb(ud, o->pods[i]->ns, o->pods[i]->name);
    return o->npods;
}

size_t sync_index_pods_in(const struct sync_index *ix, const char *ns)
{
    const struct nsc *c = nsc_find(ix, ns);
    return c ? c->pods : 0;
}

size_t sync_index_each_ns(const struct sync_index *ix,
                          void (*cb)(void *ud, const char *ns, size_t pods), void *ud)
{
    size_t n = 0;
    for (size_t i = 0; i < ix->nss.nb; i++)
        for (const struct node *p = ix->nss.b[i]; p; p = p->next, n++) {
            const struct nsc *c = (const struct nsc *)p;
            cb(ud, c->ns, c->pods);
        }
    return n;
}

size_t sync_index_forget_ns(struct sync_index *ix, const char *ns)
{
    size_t n = 0;
    for (size_t i = 0; i < ix->objs.nb; i++)
        for (struct node *p = ix->objs.b[i], *next; p; p = next) {
            struct obj *o = (struct obj *)p;
            next = p->next;
            if (strcmp(o->ns, ns) != 0) continue;
            n++;
            free(o->rv);
            o->rv = NULL;
            obj_maybe_free(ix, o, 0);
        }
    return n;
}

void sync_index_get_stats(const struct sync_index *ix, struct sync_index_stats *s)
{
    s->objects = ix->objs.n;
    s->pods = ix->pods.n;
    s->refs = ix->refs;
    s->nss = ix->nss.n;
}

void sync_index_free(struct sync_index *ix)
{
    if (!ix) return;
    for (size_t i = 0; i < ix->pods.nb; i++)
        for (struct node *p = ix->pods.b[i], *next; p; p = next) {
            struct pod *d = (struct pod *)p;
            next = p->next;
            free(d->ns);
            free(d->name);
            free(d->synced);
            free(d->objs);
            free(d);
        }
    for (size_t i = 0; i < ix->objs.nb; i++)
        for (struct node *p = ix->objs.b[i], *next; p; p = next) {
            struct obj *o = (struct obj *)p;
            next = p->next;
            free(o->ns);
            free(o->name);
            free(o->rv);
            free(o->pods);
            free(o);
        }
    for (size_t i = 0; i < ix->nss.nb; i++)
        for (struct node *p = ix->nss.b[i], *next; p; p = next) {
            next = p->next;
            free(((struct nsc *)p)->ns);
            free(p);
        }
    free(ix->nss.b);
    free(ix->pods.b);
    free(ix->objs.b);
    free(ix);
}

size_t sync_index_behind(const struct sync_index *ix,
                         void (*cb)(void *ud, const char *ns, const char *pod, enum sync_kind k,
                                    const char *name, const char *rv),
                         void *ud)
{
    size_t n = 0;
    for (size_t b = 0; b < ix->pods.nb; b++)
        for (const struct node *p = ix->pods.b[b]; p; p = p->next) {
            const struct pod *d = (const struct pod *)p;
            const struct obj *newest = NULL;
            int cmp;
            if (!d->synced) continue;
            for (size_t i = 0; i < d->nobjs; i++) {
                const struct obj *o = d->objs[i];
                const char *than = newest ? newest->rv : d->synced;
                if (o->rv && kwatch__rv_compare(o->rv, than, &cmp) == 0 && cmp > 0) newest = o;
            }
            if (!newest) continue;
            cb(ud, d->ns, d->name, newest->kind, newest->name, newest->rv);
            n++;
        }
    return n;
}
