/*
 * prom.h - metrics in the Prometheus text exposition format 0.0.4, written
 * into a struct buf (base/buf.h): a family's HELP and TYPE lines, counter
 * and gauge samples, and histograms with their observations. Both
 * /metrics, the agent's (run/metrics.c) and the webhook's
 * (webhook/whmetrics.c), are written with it, so a new metric is one call
 * in either program.
 *
 * Names, label text and help are the caller's constants: nothing here
 * escapes them (a help text must not hold a line break, a label value no
 * '"' or '\'). Values print as integers when they are whole (so a Unix
 * time reads as one), else with 15 significant digits.
 */
#ifndef RA_PROM_H
#define RA_PROM_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define PROM_BUCKETS_MAX 16

/* A histogram's bucket bounds: n upper bounds (le), ascending, at most
 * PROM_BUCKETS_MAX. PROM_BUCKETS(array) makes one from a static array. */
struct prom_buckets {
    const double *le;
    size_t n;
};
#define PROM_BUCKETS(a)                                                                            \
    {                                                                                              \
        (a), sizeof(a) / sizeof((a)[0])                                                            \
    }

/* A histogram's counts; zero it ({0}) to start. */
struct prom_hist {
    uint64_t bucket[PROM_BUCKETS_MAX]; /* observations <= le[i] (cumulative) */
    uint64_t count;
    double sum;
};

/* Counts one observation v in h, whose bounds are bk. */
void prom_observe(struct prom_hist *h, const struct prom_buckets *bk, double v);

/* "# HELP name help" and "# TYPE name type" (counter, gauge, histogram). */
void prom_family(struct buf *b, const char *name, const char *type, const char *help);

/* One counter sample: "name{labels} v", or "name v" when labels is NULL
 * (a labelled family: prom_family, then one prom_sample per label set). */
void prom_sample(struct buf *b, const char *name, const char *labels, uint64_t v);

/* A family of one unlabelled sample: HELP, TYPE counter or gauge, the
 * sample. */
void prom_counter(struct buf *b, const char *name, const char *help, uint64_t v);
void prom_gauge(struct buf *b, const char *name, const char *help, double v);

/* A histogram family: HELP, TYPE, name_bucket{le="..."} per bound and
 * le="+Inf", name_sum, name_count. */
void prom_histogram(struct buf *b, const char *name, const char *help,
                    const struct prom_buckets *bk, const struct prom_hist *h);

#endif
