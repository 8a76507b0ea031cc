/*
 * nswatch.c - the per-namespace ConfigMap and Secret watches of
 * --all-namespaces (sync/nswatch.h): a fixed array of slots, a slot per
 * namespace watched, found by a scan (only when a namespace gets its first
 * pod or loses its last one).
 */
#include "sync/nswatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

/* one watch of a slot: what its callback needs */
struct wref {
    struct nswatch *nw;
    enum sync_kind kind;
    struct kcwatch *w;
};

struct slot {
    char ns[64]; /* "" = free */
    struct wref w[2];
};

struct nswatch {
    struct kube *k;
    struct nswatch_opts o;
    nswatch_cb cb;
    void *ud;
    struct slot *slots;
    size_t used; /* slots [0, used) have been taken at least once */
    size_t open;
};

static const char *const RESOURCE[2] = {"configmaps", "secrets"};

struct nswatch *nswatch_new(struct kube *k, const struct nswatch_opts *o, nswatch_cb cb, void *ud)
{
    struct nswatch *nw = calloc(1, sizeof *nw);
    if (!nw) ra_oom();
    nw->k = k;
    nw->o = *o;
    if (nw->o.max == 0) nw->o.max = 1;
    nw->cb = cb;
    nw->ud = ud;
    nw->slots = calloc(nw->o.max, sizeof *nw->slots);
    if (!nw->slots) ra_oom();
    return nw;
}

static void on_event(void *ud, const struct kcwatch_event *ev)
{
    struct wref *r = ud;
    r->nw->cb(r->nw->ud, r->kind, ev);
}

static struct slot *find(const struct nswatch *nw, const char *ns)
{
    for (size_t i = 0; i < nw->used; i++)
        if (nw->slots[i].ns[0] && !strcmp(nw->slots[i].ns, ns)) return &nw->slots[i];
    return NULL;
}

static struct slot *free_slot(struct nswatch *nw)
{
    for (size_t i = 0; i < nw->used; i++)
        if (!nw->slots[i].ns[0]) return &nw->slots[i];
    return nw->used < nw->o.max ? &nw->slots[nw->used++] : NULL;
}

static void slot_close(struct nswatch *nw, struct slot *sl)
{
    for (int i = 0; i < 2; i++) {
        kcwatch_close(sl->w[i].w);
        sl->w[i].w = NULL;
    }
    sl->ns[0] = '\0';
    nw->open--;
}

/* Opens both watches of ns in sl; -1 (nothing open) when kcwatch refuses. */
static int slot_open(struct nswatch *nw, struct slot *sl, const char *ns)
{
    snprintf(sl->ns, sizeof sl->ns, "%s", ns);
    nw->open++;
    for (int i = 0; i < 2; i++) {
        struct kcwatch_opts wo = {.resource = RESOURCE[i],
                                  .ns = sl->ns,
                                  .watch_timeout_s = nw->o.watch_timeout_s,
                                  .retry_base_ms = nw->o.retry_base_ms,
                                  .retry_cap_ms = nw->o.retry_cap_ms};
        sl->w[i] = (struct wref){.nw = nw, .kind = i ? SYNC_SECRET : SYNC_CONFIGMAP};
        if (kcwatch_start(nw->k, &wo, on_event, &sl->w[i], &sl->w[i].w) < 0) {
            sl->w[i].w = NULL;
            slot_close(nw, sl);
            return -1;
        }
    }
    return 0;
}

enum nswatch_result nswatch_update(struct nswatch *nw, const char *ns, size_t pods)
{
    struct slot *sl = find(nw, ns);
    if (!sl && pods == 0) return NSWATCH_SAME;
    if (sl && pods > 0) return NSWATCH_SAME;
    if (sl) {
        slot_close(nw, sl);
        return NSWATCH_CLOSED;
    }
    if (strlen(ns) >= sizeof sl->ns) return NSWATCH_SAME; /* not a label: kcwatch refuses it */
    sl = free_slot(nw);
    if (!sl) return NSWATCH_FULL;
    return slot_open(nw, sl, ns) < 0 ? NSWATCH_SAME : NSWATCH_OPENED;
}

size_t nswatch_count(const struct nswatch *nw) { return nw->open; }

int nswatch_is_open(const struct nswatch *nw, const char *ns) { return find(nw, ns) != NULL; }

void nswatch_free(struct nswatch *nw)
{
    if (!nw) return;
    for (size_t i = 0; i < nw->used; i++)
        if (nw->slots[i].ns[0]) slot_close(nw, &nw->slots[i]);
    free(nw->slots);
    free(nw);
}
