/*
 * storm.c - the storm breaker's arithmetic (see storm.h).
 */
#include "run/storm.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Keeps the newest max times. */
static void trim(struct storm *s)
{
    size_t keep = s->max > 0 ? (size_t)s->max : 0;
    if (s->n <= keep) return;
    memmove(s->t, s->t + (s->n - keep), keep * sizeof *s->t);
    s->n = keep;
}

void storm_configure(struct storm *s, int max, int64_t window_ms)
{
    s->max = max;
    s->window_ms = window_ms;
    if (max <= 0) s->halted = 0;
    trim(s);
}

void storm_free(struct storm *s)
{
    free(s->t);
    memset(s, 0, sizeof *s);
}

size_t storm_count(const struct storm *s, int64_t now)
{
    size_t c = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->t[i] > now - s->window_ms && s->t[i] <= now + s->window_ms) c++;
    return c;
}

int storm_allows(const struct storm *s, int64_t now)
{
    if (s->max <= 0) return 1;
    if (s->halted) return 0;
    return storm_count(s, now) < (size_t)s->max;
}

void storm_note_action(struct storm *s, int64_t now)
{
    if (s->max <= 0) return;
    int64_t *nt = realloc(s->t, ((size_t)s->max + 1) * sizeof *nt);
    if (!nt) ra_oom();
    s->t = nt;
    s->t[s->n++] = now;
    trim(s);
}

void storm_trip(struct storm *s, int64_t now)
{
    s->halted = 1;
    s->halted_at = now;
}

void storm_content_changed(struct storm *s, int64_t now)
{
    if (now > s->last_change) s->last_change = now;
}

int64_t storm_resume_at(const struct storm *s)
{
    if (!s->halted) return 0;
    int64_t from = s->last_change > s->halted_at ? s->last_change : s->halted_at;
    return from + s->window_ms;
}

int storm_try_resume(struct storm *s, int64_t now)
{
    if (!s->halted || now < storm_resume_at(s)) return 0;
    s->halted = 0;
    s->n = 0;
    return 1;
}

void storm_load(struct storm *s, const int64_t *t, size_t n)
{
    int64_t *nt = realloc(s->t, (n + 1) * sizeof *nt);
    if (!nt) ra_oom();
    s->t = nt;
    memcpy(s->t, t, n * sizeof *t);
    s->n = n;
    qsort(s->t, s->n, sizeof *s->t, cmp_i64);
    trim(s);
}

int64_t storm_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
