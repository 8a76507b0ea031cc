/*
 * prom.c - Prometheus text exposition (contract in prom.h).
 */
#include "base/prom.h"

#include <math.h>

void prom_observe(struct prom_hist *h, const struct prom_buckets *bk, double v)
{
    for (size_t i = 0; i < bk->n && i < PROM_BUCKETS_MAX; i++)
        if (v <= bk->le[i]) h->bucket[i]++;
    h->count++;
    h->sum += v;
}

void prom_family(struct buf *b, const char *name, const char *type, const char *help)
{
    buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* v as Prometheus reads it: whole numbers as integers, NaN and infinities
 * by their names. */
static void put_value(struct buf *b, double v)
{
    if (isnan(v))
        buf_puts(b, "NaN");
    else if (isinf(v))
        buf_puts(b, v > 0 ? "+Inf" : "-Inf");
    else if (v == floor(v) && fabs(v) < 1e15)
        buf_printf(b, "%.0f", v);
    else
        buf_printf(b, "%.15g", v);
}

void prom_sample(struct buf *b, const char *name, const char *labels, uint64_t v)
{
    if (labels)
        buf_printf(b, "%s{%s} %llu\n", name, labels, (unsigned long long)v);
    else
        buf_printf(b, "%s %llu\n", name, (unsigned long long)v);
}

void prom_counter(struct buf *b, const char *name, const char *help, uint64_t v)
{
    prom_family(b, name, "counter", help);
    prom_sample(b, name, NULL, v);
}

void prom_gauge(struct buf *b, const char *name, const char *help, double v)
{
    prom_family(b, name, "gauge", help);
    buf_printf(b, "%s ", name);
    put_value(b, v);
    buf_putc(b, '\n');
}

void prom_histogram(struct buf *b, const char *name, const char *help,
                    const struct prom_buckets *bk, const struct prom_hist *h)
{
    prom_family(b, name, "histogram", help);
    for (size_t i = 0; i < bk->n && i < PROM_BUCKETS_MAX; i++)
        buf_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, bk->le[i],
                   (unsigned long long)h->bucket[i]);
    buf_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)h->count);
    buf_printf(b, "%s_sum ", name);
    put_value(b, h->sum);
    buf_printf(b, "\n%s_count %llu\n", name, (unsigned long long)h->count);
}
