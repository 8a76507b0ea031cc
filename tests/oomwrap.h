/*
 * oomwrap.h - one allocation counter for the out-of-memory sweeps (STYLE
 * item 13, libuv's test-loop-oom.c): the test binary is linked with
 * -Wl,--wrap= for libc's allocators (malloc, calloc, realloc, strdup,
 * vasprintf; Makefile: OOM_WRAP), so every allocation of the code under
 * test goes through the counter below: the transform's own, cJSON's
 * (its default hooks are malloc and realloc) and libyaml's alike. A sweep
 * arms the counter with oom_fail_from(n): allocations 0..n-1 succeed, the
 * n-th and every later one fail, until oom_off() (oom_fail_once(n): only
 * the n-th fails). Raising n until a run needs fewer than n allocations
 * tries every failure point once.
 *
 * The config parser's entry points the transform calls (cfg_parse_args,
 * cfg_layer_from_annotations, cfg_build) abort on OOM by the folder's
 * rule (docs/errors.md, "Out of memory"): they are wrapped too, and the
 * counter pauses while they run, so the sweep covers exactly the code that
 * promises -ENOMEM.
 *
 * Include this header in one test file per binary; it defines the
 * wrappers.
 */
#ifndef RA_TESTS_OOMWRAP_H
#define RA_TESTS_OOMWRAP_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"

static long oom__at = -1; /* the first allocation that fails; -1: none */
static long oom__count;   /* allocations counted since oom_fail_from */
static int oom__failed;   /* some allocation failed */
static int oom__paused;   /* inside a call that aborts on OOM by policy */
static int oom__once;     /* only allocation oom__at fails */

/* From now on the n-th counted allocation (from 0) and every later one
 * fail. */
static inline void oom_fail_from(long n)
{
    oom__at = n;
    oom__count = 0;
    oom__failed = 0;
    oom__paused = 0;
    oom__once = 0;
}

/* From now on only the n-th counted allocation (from 0) fails. */
static inline void oom_fail_once(long n)
{
    oom_fail_from(n);
    oom__once = 1;
}

/* Stops failing (and counting). */
static inline void oom_off(void) { oom__at = -1; }

/* 1 if an allocation failed since oom_fail_from. */
static inline int oom_failed(void) { return oom__failed; }

/* 1 if the next allocation is to fail (and counts it). */
static inline int oom__fail(void)
{
    if (oom__at < 0 || oom__paused) return 0;
    long i = oom__count++;
    if (i < oom__at || (oom__once && i > oom__at)) return 0;
    oom__failed = 1;
    return 1;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
int __real_vasprintf(char **out, const char *fmt, va_list ap);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
int __wrap_vasprintf(char **out, const char *fmt, va_list ap);

void *__wrap_malloc(size_t n) { return oom__fail() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return oom__fail() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return oom__fail() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return oom__fail() ? NULL : __real_strdup(s); }
int __wrap_vasprintf(char **out, const char *fmt, va_list ap)
{
    if (oom__fail()) return -1;
    return __real_vasprintf(out, fmt, ap);
}

/* The config parser: its allocations abort by policy, so none is
 * counted. */
int __real_cfg_parse_args(int argc, char **argv, struct cfg_layer *flags, int *help, char *err,
                          size_t errlen);
int __real_cfg_layer_from_annotations(const struct annot_set *a, struct cfg_layer *l, char *err,
                                      size_t errlen);
int __real_cfg_build(const struct cfg_layer *flags, const struct cfg_layer *annots,
                     struct config *out, char *err, size_t errlen);
int __wrap_cfg_parse_args(int argc, char **argv, struct cfg_layer *flags, int *help, char *err,
                          size_t errlen);
int __wrap_cfg_layer_from_annotations(const struct annot_set *a, struct cfg_layer *l, char *err,
                                      size_t errlen);
int __wrap_cfg_build(const struct cfg_layer *flags, const struct cfg_layer *annots,
                     struct config *out, char *err, size_t errlen);

int __wrap_cfg_parse_args(int argc, char **argv, struct cfg_layer *flags, int *help, char *err,
                          size_t errlen)
{
    oom__paused++;
    int rc = __real_cfg_parse_args(argc, argv, flags, help, err, errlen);
    oom__paused--;
    return rc;
}

int __wrap_cfg_layer_from_annotations(const struct annot_set *a, struct cfg_layer *l, char *err,
                                      size_t errlen)
{
    oom__paused++;
    int rc = __real_cfg_layer_from_annotations(a, l, err, errlen);
    oom__paused--;
    return rc;
}

int __wrap_cfg_build(const struct cfg_layer *flags, const struct cfg_layer *annots,
                     struct config *out, char *err, size_t errlen)
{
    oom__paused++;
    int rc = __real_cfg_build(flags, annots, out, err, errlen);
    oom__paused--;
    return rc;
}

#endif
