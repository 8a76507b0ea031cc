/*
 * enginenotify.c - the engine's notifications (engine_int.h's
 * engine__notify): one struct notify_event made from the engine's state
 * (the pod, its workload, the changed files, the applied and the target
 * hashes) and handed to the notifier (run/notify.h), which queues it and
 * returns: the engine never waits for a receiver.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "run/engine_int.h"
#include "run/notify.h"
#include "base/log.h"
#include "kube/kube.h"
#include "kube/owner.h"

void engine_set_notify(struct engine *e, struct notify *n) { e->notify = n; }

/* The changed files between what is applied and tgt, at most
 * NOTIFY_FILES_MAX named (d holds them until hash_diff_free). */
static void changed(struct engine *e, const struct hash_manifest *tgt, struct hash_diff *d,
                    struct notify_event *ev)
{
    if (hash_diff(&e->applied, tgt, d) < 0) ra_oom();
    const char **lists[] = {d->added, d->removed, d->modified};
    size_t ns[] = {d->nadded, d->nremoved, d->nmodified};
    for (int l = 0; l < 3; l++)
        for (size_t i = 0; i < ns[l]; i++) {
            if (ev->nfiles < NOTIFY_FILES_MAX)
                ev->files[ev->nfiles++] = lists[l][i];
            else
                ev->files_more++;
        }
}

void engine__notify(struct engine *e, const char *event, int ok, const char *detail)
{
    if (!e->notify) return;
    const struct hash_manifest *tgt = e->inflight ? &e->inflight_target : &e->observed;
    const struct owner_info *o = action_env_owner(&e->env);
    char old_hex[HASH_HEX_LEN + 1], new_hex[HASH_HEX_LEN + 1], acts[96] = "", wl[400] = "";
    struct hash_diff d;
    struct notify_event ev = {.event = event,
                              .ok = ok,
                              .detail = detail,
                              .attempt = e->inflight ? e->attempt : 0,
                              .dry_run = e->cfg->dry_run};
    for (int a = 0, n = 0; e->inflight && a < ACTION__COUNT; a++)
        if (e->inflight_mask & ACTION_BIT(a))
            n += snprintf(acts + n, sizeof acts - (size_t)n, "%s%s", n ? "+" : "", action_name(a));
    ev.action = acts;
    ev.pod = e->kube ? kube_pod_name(e->kube) : e->cfg->pod_name;
    ev.namespace_ = e->kube ? kube_namespace(e->kube) : e->cfg->namespace_;
    if (o && o->status == OWNER_OK && o->kind && o->name) {
        snprintf(wl, sizeof wl, "%s/%s", o->kind, o->name);
        ev.workload = wl;
    } else if (e->cfg->stage_workload) {
        ev.workload = e->cfg->stage_workload;
    }
    hash_hex(e->applied.total, old_hex);
    hash_hex(tgt->total, new_hex);
    ev.old_hash = old_hex;
    ev.new_hash = new_hex;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ev.time_unix_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    changed(e, tgt, &d, &ev);
    notify_post(e->notify, &ev);
    hash_diff_free(&d);
}
