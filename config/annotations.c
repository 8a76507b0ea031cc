/*
 * annotations.c - parser for the downward-API annotations file
 * (docs/kubernetes-api.md#the-downward-api-annotations-file),
 * the source of per-pod reload-agent.io/... options.
 *
 * The kubelet writes `key="go-quoted value"` lines, sorted by key, joined by
 * '\n' with no final newline. We accept exactly that, tolerating one final
 * '\n' and a '\r' at the end of each line (files edited by hand outside
 * Kubernetes). Everything else is an error naming the line. The parsed set
 * is kept sorted by key so lookups are binary searches and duplicates are
 * found in O(n log n) even for a file of the maximum size.
 */
#include "config/annotations.h"

#include "config/goquote.h"
#include "base/file.h"
#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ANNOT_MAX_FILE (1024 * 1024)
#define QUOTED_MAX 72

struct entry {
    struct annot a;
    size_t line;
};

static int key_char_ok(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '/';
}

static int cmp_entry(const void *x, const void *y)
{
    const struct entry *a = x, *b = y;
    int c = strcmp(a->a.key, b->a.key);

    if (c) return c;
    return a->line < b->line ? -1 : a->line > b->line;
}

static void free_entries(struct entry *e, size_t n)
{
    size_t k;

    for (k = 0; k < n; k++) {
        free(e[k].a.key);
        free(e[k].a.val);
    }
    free(e);
}

/* Parses one line (without its '\n' and '\r') into *e. */
static int parse_line(const char *s, size_t len, size_t line, struct entry *e, char *err,
                      size_t errlen)
{
    char q[QUOTED_MAX], qerr[160];
    const char *eq = memchr(s, '=', len);
    size_t klen, vlen, used, k;
    int rc;

    if (len == 0) return ra_errf(err, errlen, -EINVAL, "line %zu: empty line", line);
    if (!eq) {
        gq_quote_to(q, sizeof q, s, len);
        return ra_errf(err, errlen, -EINVAL, "line %zu: missing '=' in %s", line, q);
    }
    klen = (size_t)(eq - s);
    if (klen == 0) return ra_errf(err, errlen, -EINVAL, "line %zu: empty key", line);
    gq_quote_to(q, sizeof q, s, klen);
    for (k = 0; k < klen; k++)
        if (!key_char_ok(s[k]))
            return ra_errf(err, errlen, -EINVAL,
                           "line %zu: invalid character in key %s at offset %zu", line, q, k);
    vlen = len - klen - 1;
    if (vlen == 0 || eq[1] != '"')
        return ra_errf(err, errlen, -EINVAL, "line %zu: value for key %s does not start with '\"'",
                       line, q);
    rc = gq_unquote(eq + 1, vlen, &e->a.val, &e->a.vlen, &used, qerr, sizeof qerr);
    if (rc == -ENOMEM) return ra_errf(err, errlen, rc, "out of memory");
    if (rc)
        return ra_errf(err, errlen, rc, "line %zu: bad quoted value for key %s: %s", line, q, qerr);
    if (used != vlen) {
        free(e->a.val);
        e->a.val = NULL;
        return ra_errf(err, errlen, -EINVAL,
                       "line %zu: unexpected text after the closing quote of key %s", line, q);
    }
    e->a.key = strndup(s, klen);
    if (!e->a.key) {
        free(e->a.val);
        e->a.val = NULL;
        return ra_errf(err, errlen, -ENOMEM, "out of memory");
    }
    e->line = line;
    return 0;
}

int annot_parse(const char *buf, size_t len, struct annot_set *out, char *err, size_t errlen)
{
    struct entry *e;
    const char *p, *nl, *end;
    size_t nlines = 1, n = 0, k, linelen;
    int rc;

    out->v = NULL;
    out->n = 0;
    if (len > 0 && buf[len - 1] == '\n') len--;
    if (len == 0) return 0;
    for (p = buf; (p = memchr(p, '\n', (size_t)(buf + len - p))) != NULL; p++) nlines++;
    e = calloc(nlines, sizeof *e);
    if (!e) return ra_errf(err, errlen, -ENOMEM, "out of memory");
    for (p = buf, end = buf + len; n < nlines; p = nl + 1) {
        nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        linelen = (size_t)(nl - p);
        if (linelen > 0 && p[linelen - 1] == '\r') linelen--;
        rc = parse_line(p, linelen, n + 1, &e[n], err, errlen);
        if (rc) {
            free_entries(e, n);
            return rc;
        }
        n++;
    }
    qsort(e, n, sizeof *e, cmp_entry);
    for (k = 1; k < n; k++) {
        if (strcmp(e[k - 1].a.key, e[k].a.key) == 0) {
            char q[QUOTED_MAX];
            gq_quote_to(q, sizeof q, e[k].a.key, strlen(e[k].a.key));
            rc = ra_errf(err, errlen, -EINVAL, "line %zu: duplicate key %s (first on line %zu)",
                         e[k].line, q, e[k - 1].line);
            free_entries(e, n);
            return rc;
        }
    }
    out->v = malloc(n * sizeof *out->v);
    if (!out->v) {
        free_entries(e, n);
        return ra_errf(err, errlen, -ENOMEM, "out of memory");
    }
    for (k = 0; k < n; k++) out->v[k] = e[k].a;
    out->n = n;
    free(e);
    return 0;
}

int annot_parse_file(const char *path, struct annot_set *out, char *err, size_t errlen)
{
    char perr[256];
    char *data = NULL;
    size_t len = 0;
    int rc;

    out->v = NULL;
    out->n = 0;
    /* Non-blocking and regular files only: a FIFO never stalls the loop. */
    rc = ra_read_file(path, ANNOT_MAX_FILE, &data, &len, err, errlen);
    if (rc) return rc;
    rc = annot_parse(data, len, out, perr, sizeof perr);
    free(data);
    if (rc) return ra_errf(err, errlen, rc, "%s: %s", path, perr);
    return 0;
}

static int cmp_key(const void *key, const void *elem)
{
    return strcmp(key, ((const struct annot *)elem)->key);
}

const struct annot *annot_get(const struct annot_set *s, const char *key)
{
    if (!s->n) return NULL;
    return bsearch(key, s->v, s->n, sizeof *s->v, cmp_key);
}

void annot_free(struct annot_set *s)
{
    size_t k;

    for (k = 0; k < s->n; k++) {
        free(s->v[k].key);
        free(s->v[k].val);
    }
    free(s->v);
    s->v = NULL;
    s->n = 0;
}
