/*
 * extra.c - reload-agent.io/extra-sources (issue 29, docs/extra-sources.md):
 * ConfigMaps and Secrets the app neither mounts nor reads through env (it
 * fetches them over the API, a sidecar of its own reads them, a value was
 * copied at deploy time) and whose change should still reload or roll it.
 * Each named object gets a volume only the sidecar mounts, as an env
 * source does (transform_int.h, struct inject__envref with extra set):
 * the whole object, optional (a missing object never keeps the app from
 * starting: the kubelet mounts an empty directory and fills it when the
 * object appears), at /reload-agent/extra/<kind>/<name>, watched with
 * --watch, so the pod's action and the per-file rules apply to its files.
 * The value is "configmap/a,secret/b" (podrefs_parse_spec's grammar, the
 * one of --fast-sync-objects; blanks around an entry are allowed); a bad
 * entry refuses the injection with the entry named. An object the app
 * already reads (a mirrored volume, an env reference) or named twice is
 * watched once, with a warning.
 */
#include "inject/transform_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "kube/podrefs.h"

/* At most this many entries (each is a volume, a mount and an arg). */
#define EXTRA_MAX 64

/* 1 if the configMap or secret source src names (secret, name). */
static int source_names(const cJSON *src, int secret, const char *name)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(src, secret ? "secret" : "configMap");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, secret ? "secretName" : "name");
    if (secret && !cJSON_IsString(n)) n = cJSON_GetObjectItemCaseSensitive(s, "name");
    return cJSON_IsString(n) && strcmp(n->valuestring, name) == 0;
}

/* The mirrored volume that holds (secret, name), or NULL. */
static const char *mirrored_in(const struct inject__ctx *x, int secret, const char *name)
{
    for (size_t i = 0; i < x->nmirrors; i++) {
        const cJSON *vol = inject__volume(x, x->mirrors[i].volume), *src;
        if (source_names(vol, secret, name)) return x->mirrors[i].volume;
        const cJSON *pj = cJSON_GetObjectItemCaseSensitive(vol, "projected");
        const cJSON *sources = cJSON_GetObjectItemCaseSensitive(pj, "sources");
        cJSON_ArrayForEach(src, (cJSON_IsArray(sources) ? sources : NULL))
        {
            if (source_names(src, secret, name)) return x->mirrors[i].volume;
        }
    }
    return NULL;
}

/* One entry (trimmed, NUL-terminated in buf): added, warned about, or
 * refused (-EEXIST with the reason in x->err). */
static int add_entry(struct inject__ctx *x, char *entry, size_t idx)
{
    enum podref_kind kind;
    const char *name;
    char why[256];
    if (podrefs_parse_spec(entry, &kind, &name, why, sizeof why) < 0) {
        snprintf(x->err, x->errlen, "annotation %s: entry %zu: %s", CFG_ANNOT_EXTRA_SOURCES, idx,
                 why);
        return -EEXIST;
    }
    int secret = kind == PODREF_SECRET;
    const char *what = secret ? "secret" : "configmap", *vol;
    long at = inject__names_get(&x->env_idx[secret], name);
    if (at >= 0) {
        inject__warn(x, "extra source %s/%s is watched already: %s", what, name,
                     x->envs[at].extra ? "it is named twice"
                                       : "the app reads it through env (--env-watch)");
        return x->oom ? -ENOMEM : 0;
    }
    if ((vol = mirrored_in(x, secret, name))) {
        inject__warn(x, "extra source %s/%s is watched already: the app mounts it (volume %s)",
                     what, name, vol);
        return x->oom ? -ENOMEM : 0;
    }
    struct inject__envref *e;
    int rc = inject__envref_add(x, secret, name, &e);
    if (rc < 0) return rc;
    e->extra = e->whole = e->optional = 1;
    return 0;
}

int inject__plan_extra(struct inject__ctx *x)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(x->annots, CFG_ANNOT_EXTRA_SOURCES);
    if (!cJSON_IsString(v)) return 0;
    /* the names stay borrowed from the copy: it lives as long as the plan */
    char *s = x->extra_text = strdup(v->valuestring);
    if (!s) return -ENOMEM;
    size_t idx = 0;
    for (char *p = s, *next; p; p = next) {
        next = strchr(p, ',');
        if (next) *next++ = '\0';
        while (*p == ' ' || *p == '\t') p++;
        size_t n = strlen(p);
        while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) p[--n] = '\0';
        if (++idx > EXTRA_MAX) {
            snprintf(x->err, x->errlen, "annotation %s: more than %d entries",
                     CFG_ANNOT_EXTRA_SOURCES, EXTRA_MAX);
            return -EEXIST;
        }
        int rc = add_entry(x, p, idx);
        if (rc < 0) return rc;
    }
    return 0;
}
