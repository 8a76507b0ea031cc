/*
 * stagestate.c - a workload's stage as its Lease keeps it, and the pure
 * decisions on it (contract in stagestate.h). Every transform builds a new
 * state from the old one; nothing here does I/O or reads a clock.
 */
#include "run/stagestate.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "kube/k8sname.h"

#define MAX_N 9007199254740991.0 /* 2^53 - 1: exact in a JSON number */

int stagestate_is_hash(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > STAGESTATE_HASH_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

static int is_pod(const char *s)
{
    return s && strlen(s) <= STAGESTATE_POD_MAX && k8s_is_dns1123_subdomain(s);
}

static char *cut_dup(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n > max) n = max;
    char *d = strndup(s, n);
    if (!d) ra_oom();
    return d;
}

void stagestate_free(struct stagestate *s)
{
    for (size_t i = 0; i < s->nactive; i++) free(s->active[i].pod);
    for (size_t i = 0; i < s->nverified; i++) free(s->verified[i]);
    for (size_t i = 0; i < s->nhalted; i++) {
        free(s->halted[i].pod);
        free(s->halted[i].reason);
    }
    free(s->active);
    free(s->verified);
    free(s->halted);
    memset(s, 0, sizeof *s);
}

/* ---- building states ---- */

static void *grow(void *p, size_t n, size_t size)
{
    void *q = realloc(p, (n + 1) * size);
    if (!q) ra_oom();
    return q;
}

static void add_slot(struct stagestate *s, const char *pod, uint64_t n)
{
    s->active = grow(s->active, s->nactive, sizeof *s->active);
    s->active[s->nactive++] = (struct stagestate_slot){ra_strdup(pod), n};
}

static void add_verified(struct stagestate *s, const char *pod)
{
    if (s->nverified >= STAGESTATE_MAX_VERIFIED) { /* the oldest goes */
        free(s->verified[0]);
        memmove(s->verified, s->verified + 1, (s->nverified - 1) * sizeof *s->verified);
        s->nverified--;
    }
    s->verified = grow(s->verified, s->nverified, sizeof *s->verified);
    s->verified[s->nverified++] = ra_strdup(pod);
}

static void add_halt(struct stagestate *s, const char *hash, const char *pod, const char *reason)
{
    if (s->nhalted >= STAGESTATE_MAX_HALTED) { /* the oldest goes */
        free(s->halted[s->nhalted - 1].pod);
        free(s->halted[s->nhalted - 1].reason);
        s->nhalted--;
    }
    s->halted = grow(s->halted, s->nhalted, sizeof *s->halted);
    struct stagestate_halt h = {.pod = ra_strdup(pod),
                                .reason = cut_dup(reason ? reason : "", STAGESTATE_REASON_MAX)};
    snprintf(h.hash, sizeof h.hash, "%s", hash);
    s->halted[s->nhalted++] = h;
}

/* A copy of src: the stage and, unless no_slots, its active slots (the
 * caller adds what it keeps), the verified and the halt records. */
static void copy_state(const struct stagestate *src, struct stagestate *dst, int no_slots)
{
    memset(dst, 0, sizeof *dst);
    memcpy(dst->hash, src->hash, sizeof dst->hash);
    dst->width = src->width;
    dst->ttl_ms = src->ttl_ms;
    for (size_t i = 0; !no_slots && i < src->nactive; i++)
        add_slot(dst, src->active[i].pod, src->active[i].n);
    for (size_t i = 0; i < src->nverified; i++) add_verified(dst, src->verified[i]);
    for (size_t i = 0; i < src->nhalted; i++)
        add_halt(dst, src->halted[i].hash, src->halted[i].pod, src->halted[i].reason);
}

void stagestate_copy(const struct stagestate *src, struct stagestate *dst)
{
    copy_state(src, dst, 0);
}

static void remove_verified(struct stagestate *s, const char *pod)
{
    for (size_t i = 0; i < s->nverified; i++)
        if (strcmp(s->verified[i], pod) == 0) {
            free(s->verified[i]);
            memmove(s->verified + i, s->verified + i + 1,
                    (s->nverified - i - 1) * sizeof *s->verified);
            s->nverified--;
            return;
        }
}

long stagestate_find_slot(const struct stagestate *s, const char *pod)
{
    for (size_t i = 0; i < s->nactive; i++)
        if (strcmp(s->active[i].pod, pod) == 0) return (long)i;
    return -1;
}

const struct stagestate_halt *stagestate_find_halt(const struct stagestate *s, const char *hash)
{
    for (size_t i = 0; i < s->nhalted; i++)
        if (strcmp(s->halted[i].hash, hash) == 0) return &s->halted[i];
    return NULL;
}

/* ---- parsing and printing ---- */

static int bad(char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "the stage record's %s", what);
    return -EINVAL;
}

static int parse_slots(const cJSON *a, struct stagestate *s, char *err, size_t errlen)
{
    const cJSON *it;
    if (!a) return 0;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > STAGESTATE_MAX_ACTIVE)
        return bad(err, errlen, "\"active\" is not an array of at most 1000 slots");
    cJSON_ArrayForEach(it, a)
    {
        const cJSON *pod = cJSON_GetObjectItemCaseSensitive(it, "pod");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(it, "n");
        if (!cJSON_IsString(pod) || !is_pod(pod->valuestring) || !cJSON_IsNumber(n) ||
            n->valuedouble < 0 || n->valuedouble > MAX_N)
            return bad(err, errlen, "active slot is not {\"pod\": NAME, \"n\": COUNT}");
        if (stagestate_find_slot(s, pod->valuestring) >= 0)
            return bad(err, errlen, "active slots name a pod twice");
        add_slot(s, pod->valuestring, (uint64_t)n->valuedouble);
    }
    return 0;
}

static int parse_verified(const cJSON *a, struct stagestate *s, char *err, size_t errlen)
{
    const cJSON *it;
    if (!a) return 0;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > STAGESTATE_MAX_VERIFIED)
        return bad(err, errlen, "\"verified\" is not an array of at most 1000 pods");
    cJSON_ArrayForEach(it, a)
    {
        if (!cJSON_IsString(it) || !is_pod(it->valuestring))
            return bad(err, errlen, "\"verified\" holds something that is not a pod name");
        add_verified(s, it->valuestring);
    }
    return 0;
}

static int parse_halted(const cJSON *a, struct stagestate *s, char *err, size_t errlen)
{
    const cJSON *it;
    if (!a) return 0;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > STAGESTATE_MAX_HALTED)
        return bad(err, errlen, "\"halted\" is not an array of at most 16 records");
    cJSON_ArrayForEach(it, a)
    {
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(it, "hash");
        const cJSON *pod = cJSON_GetObjectItemCaseSensitive(it, "pod");
        const cJSON *why = cJSON_GetObjectItemCaseSensitive(it, "reason");
        if (!cJSON_IsString(h) || !stagestate_is_hash(h->valuestring) || !cJSON_IsString(pod) ||
            !is_pod(pod->valuestring) || (why && !cJSON_IsString(why)))
            return bad(err, errlen,
                       "halt record is not {\"hash\": HASH, \"pod\": NAME, \"reason\": TEXT}");
        add_halt(s, h->valuestring, pod->valuestring, why ? why->valuestring : "");
    }
    return 0;
}

static int parse_head(const cJSON *j, struct stagestate *s, char *err, size_t errlen)
{
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "hash");
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(j, "width");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "ttl_ms");
    if (h && !(cJSON_IsString(h) && (!h->valuestring[0] || stagestate_is_hash(h->valuestring))))
        return bad(err, errlen, "\"hash\" is not a content hash");
    /* 0: no stage open yet (a halt recorded before any stage) */
    if (w && !(cJSON_IsNumber(w) && w->valuedouble >= 0 && w->valuedouble <= STAGESTATE_MAX_WIDTH &&
               w->valuedouble == (int)w->valuedouble))
        return bad(err, errlen, "\"width\" is not a whole number from 0 to 1000");
    if (t && !(cJSON_IsNumber(t) && t->valuedouble >= 0 && t->valuedouble <= MAX_N))
        return bad(err, errlen, "\"ttl_ms\" is not a number of milliseconds (0: unset)");
    if (h) snprintf(s->hash, sizeof s->hash, "%s", h->valuestring);
    s->width = w ? (int)w->valuedouble : 0;
    s->ttl_ms = t ? (uint64_t)t->valuedouble : 0;
    return 0;
}

int stagestate_parse(const char *json, struct stagestate *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!json || !*json) return 0;
    cJSON *j = cJSON_Parse(json);
    int rc;
    if (!cJSON_IsObject(j))
        rc = bad(err, errlen, "value is not a JSON object");
    else if ((rc = parse_head(j, out, err, errlen)) == 0 &&
             (rc = parse_slots(cJSON_GetObjectItemCaseSensitive(j, "active"), out, err, errlen)) ==
                 0 &&
             (rc = parse_verified(cJSON_GetObjectItemCaseSensitive(j, "verified"), out, err,
                                  errlen)) == 0)
        rc = parse_halted(cJSON_GetObjectItemCaseSensitive(j, "halted"), out, err, errlen);
    cJSON_Delete(j);
    if (rc < 0) stagestate_free(out);
    return rc;
}

char *stagestate_print(const struct stagestate *s)
{
    cJSON *j = cJSON_CreateObject(), *a, *o;
    if (!j) ra_oom();
    int ok = cJSON_AddStringToObject(j, "hash", s->hash) &&
             cJSON_AddNumberToObject(j, "width", s->width) &&
             cJSON_AddNumberToObject(j, "ttl_ms", (double)s->ttl_ms) &&
             (a = cJSON_AddArrayToObject(j, "active"));
    for (size_t i = 0; ok && i < s->nactive; i++)
        ok = (o = cJSON_CreateObject()) && cJSON_AddItemToArray(a, o) &&
             cJSON_AddStringToObject(o, "pod", s->active[i].pod) &&
             cJSON_AddNumberToObject(o, "n", (double)s->active[i].n);
    ok = ok && (a = cJSON_AddArrayToObject(j, "verified"));
    for (size_t i = 0; ok && i < s->nverified; i++)
        ok = (o = cJSON_CreateString(s->verified[i])) && cJSON_AddItemToArray(a, o);
    ok = ok && (a = cJSON_AddArrayToObject(j, "halted"));
    for (size_t i = 0; ok && i < s->nhalted; i++)
        ok = (o = cJSON_CreateObject()) && cJSON_AddItemToArray(a, o) &&
             cJSON_AddStringToObject(o, "hash", s->halted[i].hash) &&
             cJSON_AddStringToObject(o, "pod", s->halted[i].pod) &&
             cJSON_AddStringToObject(o, "reason", s->halted[i].reason);
    char *out = ok ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!out) ra_oom();
    return out;
}

/* ---- decisions ---- */

int stagestate_width(int count, int percent, long replicas)
{
    long w = 1;
    if (count > 0)
        w = count;
    else if (percent > 0 && replicas > 0)
        w = (percent * replicas + 99) / 100;
    if (w < 1) w = 1;
    return w > STAGESTATE_MAX_WIDTH ? STAGESTATE_MAX_WIDTH : (int)w;
}

void stagestate_acq_free(struct stagestate_acq *a) { stagestate_free(&a->next); }

/* Counts the slots of others that have not expired; notes the expired. */
static void count_live(const struct stagestate *cur, const char *me, stagestate_expired_fn expired,
                       void *ud, struct stagestate_acq *out)
{
    for (size_t i = 0; i < cur->nactive; i++) {
        const struct stagestate_slot *sl = &cur->active[i];
        if (strcmp(sl->pod, me) == 0) continue;
        if (expired && expired(ud, sl->pod, sl->n)) {
            if (!out->taken_over++) out->taken_pod = sl->pod;
        } else {
            out->live++;
        }
    }
}

/* next = cur's stage with the live slots of others, then me. */
static void take_slot(const struct stagestate *cur, const char *me, stagestate_expired_fn expired,
                      void *ud, struct stagestate_acq *out)
{
    copy_state(cur, &out->next, 1);
    for (size_t i = 0; i < cur->nactive; i++) {
        const struct stagestate_slot *sl = &cur->active[i];
        if (strcmp(sl->pod, me) == 0) {
            out->resumed = 1;
            continue;
        }
        if (!(expired && expired(ud, sl->pod, sl->n))) add_slot(&out->next, sl->pod, sl->n);
    }
    long mine = stagestate_find_slot(cur, me);
    add_slot(&out->next, me, mine >= 0 ? cur->active[mine].n + 1 : 0);
    remove_verified(&out->next, me);
}

void stagestate_acquire(const struct stagestate *cur, const char *me, const char *hash, int width,
                        uint64_t ttl_ms, stagestate_expired_fn expired, void *ud,
                        struct stagestate_acq *out)
{
    memset(out, 0, sizeof *out);
    if ((out->halt = stagestate_find_halt(cur, hash))) {
        out->verdict = STAGESTATE_HALTED;
        return;
    }
    count_live(cur, me, expired, ud, out);
    if (strcmp(cur->hash, hash) == 0) {
        /* a pod that holds a slot of the hash keeps it (its agent restarted) */
        if (stagestate_find_slot(cur, me) < 0 &&
            out->live >= (size_t)(cur->width > 0 ? cur->width : 1)) {
            out->verdict = STAGESTATE_WAIT;
            return;
        }
        take_slot(cur, me, expired, ud, out);
        out->verdict = STAGESTATE_WRITE;
        return;
    }
    /* Another stage (or none): a new one opens once nobody holds a slot of
     * the old, so no more than a width of replicas act at any time. */
    if (out->live > 0) {
        out->verdict = STAGESTATE_WAIT;
        return;
    }
    memset(&out->next, 0, sizeof out->next);
    for (size_t i = 0; i < cur->nhalted; i++)
        add_halt(&out->next, cur->halted[i].hash, cur->halted[i].pod, cur->halted[i].reason);
    snprintf(out->next.hash, sizeof out->next.hash, "%s", hash);
    out->next.width = width < 1 ? 1 : width > STAGESTATE_MAX_WIDTH ? STAGESTATE_MAX_WIDTH : width;
    out->next.ttl_ms = ttl_ms;
    add_slot(&out->next, me, 0);
    out->opened = 1;
    out->verdict = STAGESTATE_WRITE;
}

/* Copies cur into next without me's slot; returns whether it had one. */
static int drop_slot(const struct stagestate *cur, const char *me, struct stagestate *next)
{
    copy_state(cur, next, 1);
    int had = 0;
    for (size_t i = 0; i < cur->nactive; i++) {
        if (strcmp(cur->active[i].pod, me) == 0)
            had = 1;
        else
            add_slot(next, cur->active[i].pod, cur->active[i].n);
    }
    return had;
}

int stagestate_release(const struct stagestate *cur, const char *me, const char *hash, int ok,
                       const char *reason, struct stagestate *next)
{
    int had = drop_slot(cur, me, next);
    int changed = had;
    if (ok && strcmp(cur->hash, hash) == 0) {
        remove_verified(next, me);
        add_verified(next, me);
        changed = 1;
    } else if (!ok && !stagestate_find_halt(cur, hash)) {
        /* newest first: shift the others down */
        add_halt(next, hash, me, reason);
        struct stagestate_halt h = next->halted[next->nhalted - 1];
        memmove(next->halted + 1, next->halted, (next->nhalted - 1) * sizeof *next->halted);
        next->halted[0] = h;
        changed = 1;
    }
    if (!changed) stagestate_free(next);
    return changed;
}

int stagestate_leave(const struct stagestate *cur, const char *me, struct stagestate *next)
{
    if (drop_slot(cur, me, next)) return 1;
    stagestate_free(next);
    return 0;
}

int stagestate_renew(const struct stagestate *cur, const char *me, const char *hash,
                     struct stagestate *next)
{
    long i = stagestate_find_slot(cur, me);
    if (i < 0 || strcmp(cur->hash, hash) != 0) return 0;
    copy_state(cur, next, 0);
    next->active[i].n++;
    return 1;
}
