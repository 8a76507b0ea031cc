/*
 * rollout_decide.c - the rollout decision without I/O (see
 * rollout_decide.h): parse the owner's GET reply, then decide.
 */
#include "actions/rollout_decide.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/text.h"

char *rollout__files_key(const char *hash_key)
{
    size_t n = strlen(hash_key);

    if (n > 5 && strcmp(hash_key + n - 5, "-hash") == 0)
        return ra_asprintf("%.*s-files", (int)(n - 5), hash_key);
    return ra_asprintf("%s-files", hash_key);
}

char *rollout__last_key(const char *hash_key)
{
    const char *slash = strchr(hash_key, '/');
    int plen = slash ? (int)(slash - hash_key) + 1 : 0;

    return ra_asprintf("%.*slast-rollout", plen, hash_key);
}

char *rollout__recent_key(const char *hash_key)
{
    const char *slash = strchr(hash_key, '/');
    int plen = slash ? (int)(slash - hash_key) + 1 : 0;

    return ra_asprintf("%.*srecent-rollouts", plen, hash_key);
}

/* The next time of a recent list at *p (skipping what is not a number);
 * 0 and -1 at the end. */
static int next_time(const char **p, long long *t)
{
    while (**p) {
        char *end;
        long long v = strtoll(*p, &end, 10);
        int ok = end != *p && v > 0;
        *p = end;
        while (**p && **p != ',') (*p)++;
        if (**p == ',') (*p)++;
        if (ok) {
            *t = v;
            return 0;
        }
    }
    return -1;
}

static int in_window(long long t, time_t now, int64_t window_s)
{
    return t > (long long)now - window_s && t <= (long long)now + window_s;
}

size_t rollout__recent_count(const char *recent, time_t now, int64_t window_s)
{
    size_t n = 0;
    long long t;
    for (const char *p = recent ? recent : ""; next_time(&p, &t) == 0;)
        if (in_window(t, now, window_s)) n++;
    return n;
}

char *rollout__recent_list(const char *recent, time_t now, int max, int64_t window_s)
{
    long long keep[1024], t;
    size_t n = 0;
    for (const char *p = recent ? recent : ""; next_time(&p, &t) == 0 && n < 1023;)
        if (in_window(t, now, window_s)) keep[n++] = t;
    keep[n++] = (long long)now;
    size_t from = max > 0 && n > (size_t)max ? n - (size_t)max : 0;
    char *out = ra_strdup("");
    for (size_t i = from; i < n; i++) {
        char *next = ra_asprintf("%s%s%lld", out, i > from ? "," : "", keep[i]);
        free(out);
        out = next;
    }
    return out;
}

static const char *json_str(const cJSON *obj, const char *const *path, size_t n)
{
    for (size_t i = 0; i < n && obj; i++) obj = cJSON_GetObjectItemCaseSensitive(obj, path[i]);
    return cJSON_IsString(obj) ? obj->valuestring : NULL;
}

int rollout__parse_state(const char *body, size_t body_len, const char *hash_annotation,
                         struct rollout_state *st)
{
    memset(st, 0, sizeof *st);
    st->root = cJSON_ParseWithLength(body ? body : "", body_len);
    if (!cJSON_IsObject(st->root)) {
        cJSON_Delete(st->root);
        st->root = NULL;
        return -EINVAL;
    }
    char *fk = rollout__files_key(hash_annotation), *lk = rollout__last_key(hash_annotation);
    char *rk = rollout__recent_key(hash_annotation);
    const char *hp[] = {"spec", "template", "metadata", "annotations", hash_annotation};
    const char *fp[] = {"spec", "template", "metadata", "annotations", fk};
    const char *lp[] = {"metadata", "annotations", lk};
    const char *rp[] = {"metadata", "annotations", rk};
    st->current = json_str(st->root, hp, 5);
    st->their_files = json_str(st->root, fp, 5);
    st->last_rollout = json_str(st->root, lp, 3);
    st->recent = json_str(st->root, rp, 3);
    free(fk);
    free(lk);
    free(rk);
    return 0;
}

void rollout__state_free(struct rollout_state *st)
{
    cJSON_Delete(st->root);
    memset(st, 0, sizeof *st);
}

/* Names the paths whose digests differ between our files map and the
 * owner's. */
static void differing_paths(const char *ours, const char *theirs, char *out, size_t outlen)
{
    cJSON *a = ours ? cJSON_Parse(ours) : NULL, *b = theirs ? cJSON_Parse(theirs) : NULL;
    size_t len = 0;
    out[0] = '\0';
    const cJSON *e;
    if (cJSON_IsObject(a)) cJSON_ArrayForEach(e, a)
        {
            const cJSON *o =
                cJSON_IsObject(b) ? cJSON_GetObjectItemCaseSensitive(b, e->string) : NULL;
            if (!o || !cJSON_IsString(o) || !cJSON_IsString(e) ||
                strcmp(o->valuestring, e->valuestring) != 0)
                len += (size_t)snprintf(out + len, len < outlen ? outlen - len : 0, "%s%s",
                                        len ? ", " : "", e->string);
        }
    if (cJSON_IsObject(b)) cJSON_ArrayForEach(e, b)
        {
            if (!cJSON_IsObject(a) || !cJSON_GetObjectItemCaseSensitive(a, e->string))
                len += (size_t)snprintf(out + len, len < outlen ? outlen - len : 0, "%s%s",
                                        len ? ", " : "", e->string);
        }
    if (!out[0]) snprintf(out, outlen, "unknown (no file list on the owner)");
    cJSON_Delete(a);
    cJSON_Delete(b);
}

/* Flips within the window before now, this one not counted. */
static size_t recent_flips(const struct rollout_guard *g, time_t now)
{
    size_t n = 0;
    for (size_t i = 0; g && i < g->nflips && i < ROLLOUT_FLIP_LIMIT; i++)
        if (now - g->flips[i] < ROLLOUT_FLIP_WINDOW_S) n++;
    return n;
}

void rollout__guard_flip(struct rollout_guard *g, time_t now)
{
    size_t keep = 0;
    for (size_t i = 0; i < g->nflips && i < ROLLOUT_FLIP_LIMIT; i++)
        if (now - g->flips[i] < ROLLOUT_FLIP_WINDOW_S) g->flips[keep++] = g->flips[i];
    g->nflips = keep;
    if (g->nflips < ROLLOUT_FLIP_LIMIT) g->flips[g->nflips++] = now;
}

/* Milliseconds to wait for --min-interval since last (RFC 3339 UTC
 * seconds), 0 when it has passed or last is not such a time. */
static uint64_t interval_left(const char *last, uint64_t gap_ms, time_t now)
{
    struct tm tm = {0};
    const char *end;
    if (!last || !gap_ms || !(end = strptime(last, "%Y-%m-%dT%H:%M:%SZ", &tm)) || *end) return 0;
    time_t at = timegm(&tm);
    if (at == (time_t)-1) return 0;
    if (now < at) /* another node's clock runs ahead: wait, unless the time is bogus */
        return (uint64_t)(at - now) <= gap_ms / 1000 ? gap_ms : 0;
    uint64_t ago = (uint64_t)(now - at);
    if (ago > gap_ms / 1000) return 0;
    return ago * 1000 < gap_ms ? gap_ms - ago * 1000 : 0;
}

void rollout__decide(const struct rollout_state *st, const struct rollout_input *in,
                     struct rollout_decision *d)
{
    int blocks = 0;
    const char *why = NULL;

    memset(d, 0, sizeof *d);
    if (in->kind)
        why = kinds_not_rolling(in->kind, st->root, d->warn_buf, sizeof d->warn_buf, &blocks);
    if (why && blocks) {
        d->verdict = ROLLOUT_V_BLOCKED;
        d->owner_blocks = 1;
        snprintf(d->reason, sizeof d->reason, "%s", why);
        return;
    }
    d->warning = why;
    if (st->current && strcmp(st->current, in->hash) == 0) {
        d->verdict = ROLLOUT_V_CURRENT;
        return;
    }
    /* Someone replaced the hash we set with another one: pods disagree. */
    const struct rollout_guard *g = in->guard;
    if (st->current && g && g->last_set[0] && strcmp(st->current, g->last_set) != 0) {
        d->flipped = !in->flip_counted;
        if (recent_flips(g, in->now) + (size_t)d->flipped >= ROLLOUT_FLIP_LIMIT) {
            char paths[1024], raw[sizeof d->reason];
            differing_paths(in->files, st->their_files, paths, sizeof paths);
            snprintf(raw, sizeof raw,
                     "the pod template hash keeps flipping between replicas (%.12s vs %.12s): "
                     "pods see different content; differing paths: %s. Not rolling again.",
                     in->hash, st->current, paths);
            ra_one_line(d->reason, sizeof d->reason, raw); /* paths come from the API */
            d->verdict = ROLLOUT_V_BLOCKED;
            return;
        }
    }
    /* --storm-limit, counted on the owner: every replica's rollouts. */
    size_t rolled =
        in->storm_max > 0 ? rollout__recent_count(st->recent, in->now, in->storm_window_s) : 0;
    if (in->storm_max > 0 && rolled >= (size_t)in->storm_max) {
        d->verdict = ROLLOUT_V_STORM;
        snprintf(d->reason, sizeof d->reason,
                 "the workload was rolled %zu times within %llds (--storm-limit %d/%llds, "
                 "counted across its replicas): not rolling until the content has been "
                 "stable for %llds",
                 rolled, (long long)in->storm_window_s, in->storm_max,
                 (long long)in->storm_window_s, (long long)in->storm_window_s);
        return;
    }
    /* --min-interval per owner, shared by all replicas through the owner. */
    d->wait_ms = interval_left(st->last_rollout, in->min_interval_ms, in->now);
    d->verdict = d->wait_ms ? ROLLOUT_V_WAIT : ROLLOUT_V_PATCH;
}
