/*
 * manifests.c - the manifest pipeline of `reload-agent inject`, in memory
 * (see manifests.h): inputs are parsed into documents (yamldoc/tree.h),
 * each object goes through inject_object(), and the operations are
 * spliced into the document's text (yamldoc/splice.h) or rendered as JSON
 * or patches (yamldoc/render.h). Each injected workload gets
 * the render-time stamp (stamp_compute) from every ConfigMap and Secret of
 * the whole input, as one more operation. A workload whose sidecar runs
 * fast sync gets its Role and RoleBinding (inject/rbac.h) as new documents
 * at the end of its input, unless the input holds them already.
 */
#include "inject/manifests.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/log.h"
#include "yamldoc/jsonpatch.h"
#include "yamldoc/jsonstream.h"
#include "inject/rbac.h"
#include "inject/stamp.h"
#include "yamldoc/join.h"
#include "yamldoc/render.h"
#include "yamldoc/splice.h"
#include "yamldoc/tree.h"

/* One document of one input. */
struct doc {
    size_t start, end; /* its bytes in the input */
    size_t vstart;     /* a JSON stream's document: where its value starts */
    cJSON *json;       /* parsed (NULL for an empty document) */
    cJSON *ops;        /* operations on the whole document (prefixed for List items) */
};

struct file {
    struct manifests_input *in;
    int json;   /* the input is JSON: one document, or a stream of them */
    int stream; /* a stream of JSON documents (jsonstream.h) */
    size_t indent;
    struct yamltree t;
    struct doc *docs;
    size_t ndocs;
    cJSON *extra; /* documents to append (fast sync's RBAC), or NULL */
};

struct run {
    const struct manifests_opts *opts;
    struct file *files;
    size_t nfiles;
    struct buf report;
    cJSON *patches;               /* [{target, patch: [ops]}] for MANIFESTS_OUT_PATCH */
    struct stamp_sources sources; /* every ConfigMap and Secret of the input */
    const cJSON **rbac;           /* every Role and RoleBinding of the input, and those added */
    size_t nrbac, rbac_cap;
    int fast_sync; /* some workload runs fast sync */
    int stage;     /* some workload's replicas take turns (staging) */
    int injected;  /* some workload was injected or its stamp replaced */
    char *err;
    size_t errlen;
};

static const char *str_at(const cJSON *o, const char *k1, const char *k2)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k1);
    if (k2) v = cJSON_GetObjectItemCaseSensitive(v, k2);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* "deployment/web" for the report. */
static void object_name(const cJSON *obj, char *buf, size_t len)
{
    const char *kind = str_at(obj, "kind", NULL);
    const char *name = str_at(obj, "metadata", "name");
    const char *gen = str_at(obj, "metadata", "generateName");
    char lk[64];
    size_t i = 0;
    for (; kind && kind[i] && i + 1 < sizeof lk; i++) lk[i] = (char)tolower((unsigned char)kind[i]);
    lk[i] = '\0';
    if (name)
        snprintf(buf, len, "%s/%s", lk, name);
    else if (gen)
        snprintf(buf, len, "%s/%s*", lk, gen);
    else
        snprintf(buf, len, "%s/<no name>", lk);
}

static int is_list(const cJSON *obj)
{
    const char *kind = str_at(obj, "kind", NULL);
    size_t n = kind ? strlen(kind) : 0;
    return n >= 4 && strcmp(kind + n - 4, "List") == 0 &&
           cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(obj, "items"));
}

static void report(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(struct run *r, const char *fmt, ...)
{
    char line[1024];
    RA_VSNPRINTF(line, fmt);
    buf_puts(&r->report, line);
    buf_putc(&r->report, '\n');
}

/* Adds ops (with their paths prefixed) to *dst. */
static int add_ops(cJSON **dst, const cJSON *ops, const char *prefix)
{
    if (!*dst && !(*dst = cJSON_CreateArray())) return -ENOMEM;
    for (const cJSON *op = ops->child; op; op = op->next) {
        cJSON *c = cJSON_Duplicate(op, 1);
        if (!c) return -ENOMEM;
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(c, "path");
        if (*prefix && cJSON_IsString(p)) {
            size_t n = strlen(prefix) + strlen(p->valuestring) + 1;
            char *np = malloc(n);
            if (!np ||
                !cJSON_ReplaceItemInObjectCaseSensitive(
                    c, "path", cJSON_CreateString(strcat(strcpy(np, prefix), p->valuestring)))) {
                free(np);
                cJSON_Delete(c);
                return -ENOMEM;
            }
            free(np);
        }
        cJSON_AddItemToArray(*dst, c);
    }
    return 0;
}

static int add_patch(struct run *r, const cJSON *obj, const cJSON *ops)
{
    cJSON *e = cJSON_CreateObject(), *t = cJSON_CreateObject(), *o = cJSON_Duplicate(ops, 1);
    const char *kind = str_at(obj, "kind", NULL), *name = str_at(obj, "metadata", "name");
    const char *ns = str_at(obj, "metadata", "namespace");
    if (!e || !t || !o || !cJSON_AddItemToObject(e, "target", t)) {
        cJSON_Delete(e);
        cJSON_Delete(t);
        cJSON_Delete(o);
        return -ENOMEM;
    }
    if (!cJSON_AddItemToObject(e, "patch", o)) {
        cJSON_Delete(e);
        cJSON_Delete(o);
        return -ENOMEM;
    }
    if ((kind && !cJSON_AddStringToObject(t, "kind", kind)) ||
        (name && !cJSON_AddStringToObject(t, "name", name)) ||
        (ns && !cJSON_AddStringToObject(t, "namespace", ns)) ||
        !cJSON_AddItemToArray(r->patches, e)) {
        cJSON_Delete(e);
        return -ENOMEM;
    }
    return 0;
}

/* Adds the render-time stamp to the operations of an injected object (or
 * an already injected one, whose stamp may be stale): the annotation op
 * when stamp_compute stamps and the template does not hold that value yet,
 * and the report line. */
static int stamp(struct run *r, struct file *f, size_t di, const cJSON *obj,
                 struct inject_result *res, const char *name, char *line, size_t linelen)
{
    char hex[65], key[256], why[256], perr[256];
    cJSON *copy = cJSON_Duplicate(obj, 1);
    int rc = 0;
    if (!copy) return -ENOMEM;
    if (cJSON_GetArraySize(res->ops) > 0 &&
        (rc = jsonpatch_apply(&copy, res->ops, perr, sizeof perr)) < 0) {
        if (rc != -ENOMEM)
            ra_errf(r->err, r->errlen, rc, "%s: document %zu: %s: %s", f->in->name, di + 1, name,
                    perr);
        goto out;
    }
    const cJSON *tmpl = jsonpointer_get(copy, res->prefix, strlen(res->prefix));
    rc = stamp_compute(tmpl, str_at(obj, "metadata", "namespace"), &r->sources, hex, key,
                       sizeof key, why, sizeof why);
    if (rc < 0) {
        if (rc != -ENOMEM)
            ra_errf(r->err, r->errlen, rc, "%s: document %zu: %s: the config-hash stamp: %s",
                    f->in->name, di + 1, name, why);
        goto out;
    }
    if (rc == 0) {
        snprintf(line, linelen, "%s not stamped: %s", name, why);
        goto out;
    }
    rc = 0;
    snprintf(line, linelen, "%s stamped %s=%.12s\u2026", name, key, hex);
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(tmpl, "metadata"), "annotations");
    const cJSON *cur = cJSON_GetObjectItemCaseSensitive(ann, key);
    if (cJSON_IsString(cur) && strcmp(cur->valuestring, hex) == 0) goto out; /* current */
    cJSON *op = inject_annotation_op(cJSON_GetObjectItemCaseSensitive(tmpl, "metadata"),
                                     res->prefix, key, hex);
    if (!op)
        rc = -ENOMEM;
    else
        cJSON_AddItemToArray(res->ops, op);
out:
    cJSON_Delete(copy);
    return rc;
}

/* Remembers a Role or RoleBinding (borrowed), for rbac_present. */
static int add_rbac_known(struct run *r, const cJSON *o)
{
    const char *kind = str_at(o, "kind", NULL);
    if (!kind || (strcmp(kind, "Role") != 0 && strcmp(kind, "RoleBinding") != 0 &&
                  strcmp(kind, "Lease") != 0))
        return 0;
    if (r->nrbac == r->rbac_cap) {
        size_t nc = r->rbac_cap ? r->rbac_cap * 2 : 8;
        const cJSON **v = realloc(r->rbac, nc * sizeof *v);
        if (!v) return -ENOMEM;
        r->rbac = v;
        r->rbac_cap = nc;
    }
    r->rbac[r->nrbac++] = o;
    return 0;
}

static int same_str(const char *a, const char *b) { return a && b ? !strcmp(a, b) : a == b; }

/* The Role or RoleBinding of the input (or added) with o's kind, name and
 * namespace, or NULL. */
static const cJSON *rbac_present(const struct run *r, const cJSON *o)
{
    for (size_t i = 0; i < r->nrbac; i++)
        if (same_str(str_at(r->rbac[i], "kind", NULL), str_at(o, "kind", NULL)) &&
            same_str(str_at(r->rbac[i], "metadata", "name"), str_at(o, "metadata", "name")) &&
            same_str(str_at(r->rbac[i], "metadata", "namespace"),
                     str_at(o, "metadata", "namespace")))
            return r->rbac[i];
    return NULL;
}

/* Adds doc (owned) to the file's extra documents, unless the input holds
 * it (--output rbac: always), with its report line. */
static int add_extra(struct run *r, struct file *f, cJSON *doc, const char *what)
{
    char name[320];
    object_name(doc, name, sizeof name);
    const cJSON *had = r->opts->output == MANIFESTS_OUT_RBAC ? NULL : rbac_present(r, doc);
    if (had) {
        /* a Lease in the input may hold a stage's state: any is fine */
        int lease = !strcmp(str_at(doc, "kind", NULL), "Lease");
        if (!lease && !cJSON_Compare(had, doc, 1))
            report(r,
                   "  warning: %s is in the input, but not as the injector writes it (%s): "
                   "kept",
                   name, what);
        cJSON_Delete(doc);
        return 0;
    }
    if ((!f->extra && !(f->extra = cJSON_CreateArray())) || add_rbac_known(r, doc) < 0 ||
        !cJSON_AddItemToArray(f->extra, doc)) {
        cJSON_Delete(doc);
        return -ENOMEM;
    }
    report(r, "%s written: %s", name, what);
    return 0;
}

/* Fast sync's Role and RoleBinding (inject/rbac.h) for an injected (or
 * already injected) workload whose sidecar runs it. */
static int add_fast_sync_rbac(struct run *r, struct file *f, const cJSON *obj,
                              const struct inject_result *res, const char *name)
{
    char perr[256], why[256], what[512];
    cJSON *copy = cJSON_Duplicate(obj, 1), *role = NULL, *binding = NULL;
    if (!copy) return -ENOMEM;
    int rc =
        cJSON_GetArraySize(res->ops) > 0 ? jsonpatch_apply(&copy, res->ops, perr, sizeof perr) : 0;
    if (rc == 0) rc = rbac_fast_sync(copy, res->prefix, &role, &binding, why, sizeof why);
    cJSON_Delete(copy);
    if (rc == -EINVAL) {
        r->fast_sync = 1;
        report(r, "%s fast sync: no Role and RoleBinding written: %s", name, why);
        return 0;
    }
    if (rc <= 0) return rc;
    r->fast_sync = 1;
    const cJSON *subj =
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(binding, "subjects"), 0);
    snprintf(what, sizeof what, "the fast sync of %s", name);
    if ((rc = add_extra(r, f, role, what)) < 0) {
        cJSON_Delete(binding);
        return rc;
    }
    snprintf(what, sizeof what, "the fast-sync Role to serviceaccount %s",
             str_at(subj, "name", NULL));
    return add_extra(r, f, binding, what);
}

/* Staging's Role, RoleBinding and Lease (inject/rbac.h) for an injected
 * (or already injected) workload whose sidecar names its workload. */
static int add_stage_rbac(struct run *r, struct file *f, const cJSON *obj,
                          const struct inject_result *res, const char *name)
{
    char perr[256], why[256], what[512];
    cJSON *copy = cJSON_Duplicate(obj, 1), *role = NULL, *binding = NULL, *lease = NULL;
    if (!copy) return -ENOMEM;
    int rc =
        cJSON_GetArraySize(res->ops) > 0 ? jsonpatch_apply(&copy, res->ops, perr, sizeof perr) : 0;
    if (rc == 0) rc = rbac_stage(copy, res->prefix, &role, &binding, &lease, why, sizeof why);
    cJSON_Delete(copy);
    if (rc == -EINVAL) {
        report(r, "%s stage: no Role, RoleBinding and Lease written: %s", name, why);
        return 0;
    }
    if (rc <= 0) return rc;
    r->stage = 1;
    const cJSON *subj =
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(binding, "subjects"), 0);
    snprintf(what, sizeof what, "the stage of %s", name);
    if ((rc = add_extra(r, f, role, what)) < 0) {
        cJSON_Delete(binding);
        cJSON_Delete(lease);
        return rc;
    }
    snprintf(what, sizeof what, "the stage Role to serviceaccount %s", str_at(subj, "name", NULL));
    if ((rc = add_extra(r, f, binding, what)) < 0) {
        cJSON_Delete(lease);
        return rc;
    }
    snprintf(what, sizeof what, "the Lease the replicas of %s take turns on", name);
    return add_extra(r, f, lease, what);
}

/* A ConfigMap or Secret with immutable: true can never change (the API
 * server refuses any update of its data): watching it is pointless, and a
 * new content is a new object, which changes the pod template itself.
 * Warned about in the report (issue 29, docs/inject-cli.md). */
static void warn_immutable(struct run *r, const cJSON *obj, const char *name)
{
    const char *kind = str_at(obj, "kind", NULL);
    if (!kind || (strcmp(kind, "ConfigMap") != 0 && strcmp(kind, "Secret") != 0)) return;
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, "immutable"))) return;
    report(r,
           "  warning: %s is immutable: it can never change, so no agent will ever see it "
           "change; a new content needs a new name, and the new name in the pod template rolls "
           "the workload by itself",
           name);
}

/* Runs the transform on one object (a document, or an item of a List). */
static int process_object(struct run *r, struct file *f, size_t di, const cJSON *obj,
                          const char *prefix)
{
    struct inject_result res;
    char ierr[256], name[320];
    memset(&res, 0, sizeof res);
    object_name(obj, name, sizeof name);
    int rc = inject_object(obj, &r->opts->inject, &res, ierr, sizeof ierr);
    if (rc < 0) {
        if (rc != -ENOMEM)
            ra_errf(r->err, r->errlen, rc, "%s: document %zu: %s: %s", f->in->name, di + 1, name,
                    ierr);
        return rc;
    }
    char sline[1024] = "";
    enum inject_outcome was = res.outcome;
    if ((was == INJECT_INJECTED || was == INJECT_UNCHANGED) &&
        (rc = stamp(r, f, di, obj, &res, name, sline, sizeof sline)) < 0)
        goto out;
    switch (was) {
    case INJECT_INJECTED:
        r->injected = 1;
        report(r, "%s injected", name);
        break;
    case INJECT_UNCHANGED:
        if (cJSON_GetArraySize(res.ops) > 0) /* only the stamp's operation */
            report(r, "%s updated: already injected, its stamp replaced", name);
        else
            report(r, "%s unchanged: already injected", name);
        break;
    case INJECT_SKIPPED: report(r, "%s skipped: %s", name, res.reason); break;
    case INJECT_NOT_WORKLOAD:
        report(r, "%s passed through", name);
        warn_immutable(r, obj, name);
        break;
    }
    if (*sline) report(r, "%s", sline);
    for (size_t i = 0; i < res.nwarnings; i++) report(r, "  warning: %s", res.warnings[i]);
    for (size_t i = 0; i < res.nnotes; i++) report(r, "  %s", res.notes[i]);
    if (res.ops && cJSON_GetArraySize(res.ops) > 0) {
        if ((rc = add_ops(&f->docs[di].ops, res.ops, prefix)) < 0) goto out;
        if (r->opts->output == MANIFESTS_OUT_PATCH && (rc = add_patch(r, obj, res.ops)) < 0)
            goto out;
    }
    if (was == INJECT_INJECTED || was == INJECT_UNCHANGED)
        rc = add_fast_sync_rbac(r, f, obj, &res, name);
    if (rc == 0 && (was == INJECT_INJECTED || was == INJECT_UNCHANGED))
        rc = add_stage_rbac(r, f, obj, &res, name);
out:
    inject_result_free(&res);
    return rc;
}

static int process_doc(struct run *r, struct file *f, size_t di)
{
    const cJSON *j = f->docs[di].json;
    if (!j || cJSON_IsNull(j)) return 0;
    if (!cJSON_IsObject(j) || !str_at(j, "kind", NULL)) {
        report(r, "document %zu of %s passed through: not a Kubernetes object (no kind)", di + 1,
               f->in->name);
        return 0;
    }
    if (!is_list(j)) return process_object(r, f, di, j, "");
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(j, "items");
    int k = 0;
    for (const cJSON *it = items->child; it; it = it->next, k++) {
        char prefix[32];
        if (!cJSON_IsObject(it) || !str_at(it, "kind", NULL)) {
            report(r, "item %d of document %zu of %s passed through: no kind", k, di + 1,
                   f->in->name);
            continue;
        }
        snprintf(prefix, sizeof prefix, "/items/%d", k);
        int rc = process_object(r, f, di, it, prefix);
        if (rc < 0) return rc;
    }
    return 0;
}

static int looks_json(const char *s, size_t n)
{
    size_t i = 0;
    if (n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) i = 3;
    while (i < n && isspace((unsigned char)s[i])) i++;
    return i < n && (s[i] == '{' || s[i] == '[');
}

/* The indentation of a JSON text: the spaces before the first nested
 * line; 4 (kubectl's) when it has none. */
static size_t json_indent(const char *s, size_t n)
{
    const char *nl = memchr(s, '\n', n);
    if (!nl) return 4;
    size_t k = 0;
    while (nl + 1 + k < s + n && nl[1 + k] == ' ') k++;
    return k > 0 && k <= 8 ? k : 4;
}

/* Reads document i of a JSON stream, text[d->vstart, d->end) on lines
 * from line0 (0-based) on: it must be JSON, read with yamltree's rules as
 * any document (duplicate keys are errors). */
static int parse_stream_doc(struct run *r, struct file *f, size_t i, size_t line0)
{
    struct doc *d = &f->docs[i];
    const char *text = f->in->data + d->vstart, *end = NULL;
    size_t len = d->end - d->vstart;
    cJSON *check = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    cJSON_Delete(check);
    long ctl = jsonstream_control_at(text, len);
    if (ctl >= 0) end = text + ctl; /* cJSON lets them through */
    if (!check || end != text + len) {
        size_t line = line0 + 1;
        for (const char *p = text; end && p < end && p < text + len; p++) line += *p == '\n';
        return ra_errf(r->err, r->errlen, -EINVAL,
                       "%s: document %zu, line %zu: not JSON (a stream of JSON documents holds "
                       "only JSON)",
                       f->in->name, i + 1, line);
    }
    struct yamltree t;
    struct yamltree_error e;
    int rc = yamltree_parse(text, len, &t, &e);
    if (rc == 0) {
        memset(&e, 0, sizeof e);
        rc = t.ndocs == 1 ? yamltree_to_json(t.docs[0].root, &d->json, &e) : -EINVAL;
        yamltree_free(&t);
    }
    if (rc == -EINVAL)
        return ra_errf(r->err, r->errlen, rc, "%s: document %zu, line %zu: %s", f->in->name, i + 1,
                       line0 + (e.line ? e.line : 1), e.msg);
    return rc;
}

/* Reads a stream of JSON documents (jsonstream.h) into f. */
static int parse_stream(struct run *r, struct file *f, const struct jsonstream_doc *js, size_t n)
{
    const char *text = f->in->data;
    if (!(f->docs = calloc(n, sizeof *f->docs))) return -ENOMEM;
    f->ndocs = n;
    f->json = f->stream = 1;
    f->indent = json_indent(text, f->in->len);
    size_t prev = 0, line0 = 0;
    for (size_t i = 0; i < n; i++) {
        struct doc *d = &f->docs[i];
        for (size_t k = prev; k < js[i].start; k++) line0 += text[k] == '\n';
        d->start = prev;
        d->vstart = js[i].start;
        d->end = prev = js[i].end;
        int rc = parse_stream_doc(r, f, i, line0);
        if (rc < 0) return rc;
        for (size_t k = js[i].start; k < js[i].end; k++) line0 += text[k] == '\n';
    }
    return 0;
}

static int parse_file(struct run *r, struct file *f)
{
    struct yamltree_error e;
    if (looks_json(f->in->data, f->in->len)) {
        struct jsonstream_doc *js;
        long n = jsonstream_split(f->in->data, f->in->len, &js);
        if (n < 0) return (int)n;
        if (n > 0) {
            int rc = parse_stream(r, f, js, (size_t)n);
            free(js);
            return rc;
        }
    }
    int rc = yamltree_parse(f->in->data, f->in->len, &f->t, &e);
    if (rc < 0) {
        if (rc == -ENOMEM) return rc;
        if (e.line)
            return ra_errf(r->err, r->errlen, rc, "%s: document %zu, line %zu: %s", f->in->name,
                           e.doc ? e.doc : 1, e.line, e.msg);
        return ra_errf(r->err, r->errlen, rc, "%s: document %zu: %s", f->in->name,
                       e.doc ? e.doc : 1, e.msg);
    }
    f->ndocs = f->t.ndocs;
    if (f->ndocs && !(f->docs = calloc(f->ndocs, sizeof *f->docs))) return -ENOMEM;
    for (size_t i = 0; i < f->ndocs; i++) {
        struct doc *d = &f->docs[i];
        d->start = f->t.docs[i].start;
        d->end = f->t.docs[i].end;
        memset(&e, 0, sizeof e);
        if ((rc = yamltree_to_json(f->t.docs[i].root, &d->json, &e)) < 0) {
            if (rc == -ENOMEM) return rc;
            return ra_errf(r->err, r->errlen, rc, "%s: document %zu, line %zu: %s", f->in->name,
                           i + 1, e.line, e.msg);
        }
    }
    f->json = f->ndocs == 1 && looks_json(f->in->data, f->in->len);
    f->indent = f->json ? json_indent(f->in->data, f->in->len) : 4;
    return 0;
}

static int patched(const struct doc *d, cJSON **out, struct run *r, const struct file *f, size_t di)
{
    char perr[256];
    if (!(*out = cJSON_Duplicate(d->json, 1))) return -ENOMEM;
    if (!d->ops) return 0;
    int rc = jsonpatch_apply(out, d->ops, perr, sizeof perr);
    if (rc < 0) {
        cJSON_Delete(*out);
        *out = NULL;
        if (rc != -ENOMEM)
            ra_errf(r->err, r->errlen, rc, "%s: document %zu: %s", f->in->name, di + 1, perr);
    }
    return rc;
}

static int put_joined(struct run *r, const struct manifests_input *in, struct buf *out,
                      size_t skip);

/* Writes one extra document: JSON (indent), or YAML after "---" (sep)
 * with line breaks nl. */
static void put_extra_doc(struct buf *b, const cJSON *doc, int json, size_t indent, int sep,
                          const char *nl)
{
    const struct yamlrender_style st = {2, 0, json ? "\n" : nl};
    if (json) {
        yamlrender_json(b, doc, indent);
    } else {
        if (sep) buf_puts(b, "---");
        if (sep) buf_puts(b, nl);
        yamlrender_inline(b, doc, 0, &st);
    }
    buf_puts(b, json ? "\n" : nl);
}

/* The input's line break: CR LF when its first one is, else LF. */
static const char *input_nl(const struct manifests_input *in)
{
    const char *lf = memchr(in->data, '\n', in->len);
    return lf && lf > in->data && lf[-1] == '\r' ? "\r\n" : "\n";
}

/* Appends the file's extra documents to its rendering *b: JSON after a
 * JSON input (or with --output json), else YAML, each after "---". A
 * YAML text that ends without a line break gets one that changes none of
 * its values (put_joined), or the error. Returns 0, -EINVAL or -ENOMEM. */
static int put_extra(struct run *r, struct file *f, struct buf *b)
{
    int json = f->json || r->opts->output == MANIFESTS_OUT_JSON;
    struct buf nb = {0};
    if (!f->extra) return 0;
    if (b->len && b->p[b->len - 1] != '\n') {
        struct manifests_input tmp = {.name = f->in->name, .out = b->p, .outlen = b->len};
        int rc = 0;
        if (json) {
            buf_add(&nb, b->p, b->len);
            buf_add(&nb, "\n", 1);
        } else {
            rc = put_joined(r, &tmp, &nb, 0);
        }
        if (rc < 0) {
            buf_free(&nb);
            return rc;
        }
        buf_free(b);
        *b = nb;
    }
    for (const cJSON *d = f->extra->child; d; d = d->next)
        put_extra_doc(b, d, json, f->indent, 1, input_nl(f->in));
    return 0;
}

/* An input that is one List document (a kustomize KRM function's
 * ResourceList, kubectl's List) must stay one document: its extra
 * documents become items of the List ("add /items/-"), not documents
 * after it (docs/render-plugins.md). Returns 0 or -ENOMEM. */
static int extra_into_list(struct file *f)
{
    size_t list = f->ndocs, n = 0;
    for (size_t i = 0; i < f->ndocs; i++) {
        if (!f->docs[i].json || cJSON_IsNull(f->docs[i].json)) continue;
        n++;
        if (is_list(f->docs[i].json)) list = i;
    }
    if (!f->extra || n != 1 || list == f->ndocs) return 0;
    struct doc *d = &f->docs[list];
    if (!d->ops && !(d->ops = cJSON_CreateArray())) return -ENOMEM;
    for (cJSON *e = f->extra->child; e; e = e->next) {
        cJSON *op = cJSON_CreateObject(), *v = cJSON_Duplicate(e, 1);
        if (!op || !v || !cJSON_AddStringToObject(op, "op", "add") ||
            !cJSON_AddStringToObject(op, "path", "/items/-")) {
            cJSON_Delete(op);
            cJSON_Delete(v);
            return -ENOMEM;
        }
        cJSON_AddItemToObject(op, "value", v);
        cJSON_AddItemToArray(d->ops, op);
    }
    cJSON_Delete(f->extra);
    f->extra = NULL;
    return 0;
}

/* Renders one input in its own format (or as JSON). */
static int render_file(struct run *r, struct file *f)
{
    struct buf b = {0};
    const char *src = f->in->data;
    int rc = extra_into_list(f);
    if (rc < 0) return rc;
    int changed = 0;
    for (size_t i = 0; i < f->ndocs; i++) changed |= f->docs[i].ops != NULL;
    if (f->stream && changed && r->opts->output != MANIFESTS_OUT_JSON) {
        /* a JSON stream: each changed document rendered in its place */
        size_t pos = 0;
        for (size_t i = 0; i < f->ndocs; i++) {
            const struct doc *d = &f->docs[i];
            cJSON *j = NULL;
            if (!d->ops) continue;
            if ((rc = patched(d, &j, r, f, i)) < 0) goto out;
            buf_add(&b, src + pos, d->vstart - pos);
            yamlrender_json(&b, j, f->indent);
            cJSON_Delete(j);
            pos = d->end;
        }
        buf_add(&b, src + pos, f->in->len - pos);
    } else if (r->opts->output == MANIFESTS_OUT_JSON || (f->json && changed)) {
        for (size_t i = 0; i < f->ndocs; i++) {
            cJSON *j = NULL;
            if (!f->docs[i].json || cJSON_IsNull(f->docs[i].json)) continue;
            if ((rc = patched(&f->docs[i], &j, r, f, i)) < 0) goto out;
            yamlrender_json(&b, j, f->indent);
            buf_add(&b, "\n", 1);
            cJSON_Delete(j);
        }
    } else {
        size_t pos = 0;
        for (size_t i = 0; i < f->ndocs; i++) {
            const struct doc *d = &f->docs[i];
            if (!d->ops) continue;
            char *spl = NULL, serr[512];
            size_t spllen = 0;
            rc = yamlsplice_apply(src + d->start, d->end - d->start, d->ops, &spl, &spllen, serr,
                                  sizeof serr);
            if (rc < 0) {
                if (rc != -ENOMEM)
                    ra_errf(r->err, r->errlen, rc, "%s: document %zu: %s", f->in->name, i + 1,
                            serr);
                goto out;
            }
            buf_add(&b, src + pos, d->start - pos);
            buf_add(&b, spl, spllen);
            free(spl);
            pos = d->end;
        }
        buf_add(&b, src + pos, f->in->len - pos);
    }
    if ((rc = put_extra(r, f, &b)) < 0) goto out;
    if (b.oom) {
        rc = -ENOMEM;
        goto out;
    }
    if (!b.p) {
        /* an empty input, or --output json of only empty documents */
        if (!(b.p = calloc(1, 1))) return -ENOMEM;
    }
    f->in->out = b.p;
    f->in->outlen = b.len;
    f->in->changed = b.len != f->in->len || memcmp(b.p, f->in->data, b.len) != 0;
    return 0;
out:
    buf_free(&b);
    return rc;
}

/* The length of the YAML line break at s[0..n) (LF, CR, CR LF, and
 * libyaml's NEL, LS and PS), or 0. */
static size_t line_break(const char *s, size_t n)
{
    if (n >= 1 && s[0] == '\n') return 1;
    if (n >= 1 && s[0] == '\r') return n >= 2 && s[1] == '\n' ? 2 : 1;
    if (n >= 2 && memcmp(s, "\xC2\x85", 2) == 0) return 2;
    if (n >= 3 && (memcmp(s, "\xE2\x80\xA8", 3) == 0 || memcmp(s, "\xE2\x80\xA9", 3) == 0))
        return 3;
    return 0;
}

/* What must stand between two inputs' YAML in one stream: "" when the
 * next starts with its own "---", "...\n" before a directive, "---\n"
 * else; NULL when the next holds no content (comments, blank lines). */
static const char *separator(const char *next, size_t n)
{
    size_t i = 0;
    if (n >= 3 && memcmp(next, "\xEF\xBB\xBF", 3) == 0) i = 3;
    while (i < n) {
        size_t e = i, br = 0;
        while (e < n && !(br = line_break(next + e, n - e))) e++;
        size_t s = i;
        while (s < e && (next[s] == ' ' || next[s] == '\t')) s++;
        if (s < e && next[s] != '#') {
            /* a marker is "---" at column 0, alone or before a blank
             * ("---:" and an indented "---" are content) */
            if (s == i && e - s >= 3 && memcmp(next + s, "---", 3) == 0 &&
                (e - s == 3 || next[s + 3] == ' ' || next[s + 3] == '\t'))
                return "";
            if (s == i && next[s] == '%') return "...\n";
            return "---\n";
        }
        i = e + (br ? br : 1);
    }
    return NULL; /* only comments and blanks */
}

static void render_patches(struct run *r, struct buf *b, int all_json)
{
    if (all_json) {
        yamlrender_json(b, r->patches, 4);
        buf_add(b, "\n", 1);
        return;
    }
    /* kustomize: a list for `patches:`, each patch a JSON 6902 list as YAML */
    static const struct yamlrender_style st = {2, 0, "\n"};
    if (!r->patches->child) {
        buf_puts(b, "[]\n");
        return;
    }
    for (const cJSON *e = r->patches->child; e; e = e->next) {
        struct buf ops = {0};
        buf_puts(b, "- target:");
        yamlrender_after_key(b, cJSON_GetObjectItemCaseSensitive(e, "target"), 2, &st);
        buf_puts(b, "\n  patch: |-\n    ");
        yamlrender_inline(&ops, cJSON_GetObjectItemCaseSensitive(e, "patch"), 0, &st);
        for (size_t i = 0; i < ops.len; i++) {
            buf_add(b, ops.p + i, 1);
            if (ops.p[i] == '\n') buf_puts(b, "    ");
        }
        b->oom |= ops.oom;
        buf_free(&ops);
        buf_add(b, "\n", 1);
    }
}

/* --output rbac: every file's extra documents, as one YAML stream. */
static void render_rbac(struct run *r, struct buf *b)
{
    int first = 1;
    for (size_t i = 0; i < r->nfiles; i++)
        for (const cJSON *d = r->files[i].extra ? r->files[i].extra->child : NULL; d; d = d->next) {
            put_extra_doc(b, d, 0, 0, !first, "\n");
            first = 0;
        }
}

/* The report's last line when a workload was injected: the Kubernetes
 * version the injection is for (what restart-pod and a Job's restart rule
 * depend on). */
static void kube_version_note(struct run *r)
{
    int minor = r->opts->inject.kube_minor;
    if (minor > 0)
        report(r, "Kubernetes 1.%d assumed (--kube-version)", minor);
    else
        report(r, "Kubernetes 1.%d assumed (the default; --kube-version sets it)",
               INJECT_KUBE_MINOR_DEFAULT);
}

/* The report's last lines when a workload runs fast sync: the policy,
 * which is cluster-scoped and never written; with --output patch, where
 * the Roles are. */
static void fast_sync_notes(struct run *r)
{
    if (r->opts->output == MANIFESTS_OUT_PATCH)
        report(r, "fast sync: patches cannot add objects: write the Roles and RoleBindings with "
                  "--output rbac");
    report(r,
           "fast sync: only the policy makes the Roles' pod patch self-only; apply it once per "
           "cluster: kubectl apply -f %s",
           RBAC_FAST_SYNC_POLICY);
}

static int add_source(struct run *r, const cJSON *o, size_t *cap)
{
    const char *kind = str_at(o, "kind", NULL);
    if (!kind || (strcmp(kind, "ConfigMap") != 0 && strcmp(kind, "Secret") != 0)) return 0;
    if (r->sources.n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        const cJSON **v = realloc(r->sources.objs, nc * sizeof *v);
        if (!v) return -ENOMEM;
        r->sources.objs = v;
        *cap = nc;
    }
    r->sources.objs[r->sources.n++] = o;
    return 0;
}

/* Every ConfigMap and Secret of every input (documents and List items),
 * and every Role and RoleBinding. */
static int collect_sources(struct run *r)
{
    size_t cap = 0;
    for (size_t i = 0; i < r->nfiles; i++)
        for (size_t d = 0; d < r->files[i].ndocs; d++) {
            const cJSON *j = r->files[i].docs[d].json;
            if (!cJSON_IsObject(j)) continue;
            if (is_list(j)) {
                for (const cJSON *it = cJSON_GetObjectItemCaseSensitive(j, "items")->child; it;
                     it = it->next)
                    if (cJSON_IsObject(it) &&
                        (add_source(r, it, &cap) < 0 || add_rbac_known(r, it) < 0))
                        return -ENOMEM;
            } else if (add_source(r, j, &cap) < 0 || add_rbac_known(r, j) < 0) {
                return -ENOMEM;
            }
        }
    return 0;
}

/* 1 if a[0..alen) and b[0..blen) hold the same documents, 0 if not, or
 * -ENOMEM. A text that does not parse holds none. */
static int same_documents(const char *a, size_t alen, const char *b, size_t blen)
{
    struct yamltree ta, tb;
    struct yamltree_error e;
    int rca = yamltree_parse(a, alen, &ta, &e), rcb = yamltree_parse(b, blen, &tb, &e);
    int same = rca == 0 && rcb == 0 && ta.ndocs == tb.ndocs, rc = 0;
    for (size_t i = 0; same && i < ta.ndocs; i++) {
        cJSON *ja = NULL, *jb = NULL;
        if (yamltree_to_json(ta.docs[i].root, &ja, &e) == -ENOMEM ||
            yamltree_to_json(tb.docs[i].root, &jb, &e) == -ENOMEM)
            rc = -ENOMEM;
        same = ja && jb && cJSON_Compare(ja, jb, 1);
        cJSON_Delete(ja);
        cJSON_Delete(jb);
    }
    if (rca == 0) yamltree_free(&ta);
    if (rcb == 0) yamltree_free(&tb);
    if (rca == -ENOMEM || rcb == -ENOMEM) rc = -ENOMEM;
    return rc < 0 ? rc : same;
}

/* Appends input i's YAML rendering to out when another input follows it:
 * with a line break after it, which must not change what it holds (a
 * block scalar at its very end would take the break into its value: its
 * chomping is made strip, yamldoc/join.h). Returns 0, -EINVAL (err set) or
 * -ENOMEM. */
static int put_joined(struct run *r, const struct manifests_input *in, struct buf *out, size_t skip)
{
    const char *text = in->out + skip;
    size_t len = in->outlen - skip;
    char *safe = NULL, *with = NULL;
    size_t safelen = 0;
    int rc = 1;
    if (len && text[len - 1] != '\n') {
        /* the text as it is, with the break: the same documents? */
        if (!(with = malloc(len + 1))) return -ENOMEM;
        memcpy(with, text, len);
        with[len] = '\n';
        rc = same_documents(text, len, with, len + 1);
        free(with);
        if (rc == 0 && (rc = yamljoin_safe_end(text, len, &safe, &safelen)) == 1) {
            size_t n = safelen;
            if (!n || safe[n - 1] != '\n') safe[n++] = '\n'; /* yamljoin leaves room for it */
            rc = same_documents(text, len, safe, n);
        }
    }
    if (rc == 0)
        rc = ra_errf(r->err, r->errlen, -EINVAL,
                     "%s: it ends in a block scalar without a final line break, which joining "
                     "it with the next input would change: add a line break at its end",
                     in->name);
    if (rc > 0) buf_add(out, safe ? safe : text, safe ? safelen : len);
    free(safe);
    if (rc < 0) return rc;
    if (out->len && out->p[out->len - 1] != '\n') buf_add(out, "\n", 1);
    return 0;
}

/* Appends a stream of JSON documents joined with other inputs into a YAML
 * stream: each document after the first on a line after "---" (JSON
 * documents one after the other are no YAML stream). more: another input
 * follows (the text then ends in a line break). Returns 0 or -ENOMEM. */
static int put_stream_joined(struct buf *out, const char *text, size_t len, int more)
{
    struct jsonstream_doc *d = NULL;
    long n = jsonstream_split(text, len, &d);
    if (n < 0) return (int)n;
    size_t pos = 0;
    for (long i = 1; i < n; i++) { /* up to document i, then the separator */
        buf_add(out, text + pos, d[i - 1].end - pos);
        buf_puts(out, "\n---\n");
        pos = d[i].start;
    }
    free(d);
    buf_add(out, text + pos, len - pos);
    if (more && out->len && out->p[out->len - 1] != '\n') buf_add(out, "\n", 1);
    return 0;
}

/* Joins the inputs' renderings into one stream in out: YAML inputs with
 * the separator the next one needs (separator), JSON documents as they
 * are. Returns 0, -EINVAL (err set) or -ENOMEM. */
static int join(struct run *r, struct manifests_input *in, size_t n, struct buf *out)
{
    size_t last = n; /* the last input with some output */
    for (size_t i = 0; i < n; i++)
        if (in[i].outlen) last = i;
    int prev = 0, docs = 0; /* some input before, some document before */
    for (size_t i = 0; i < n; i++) {
        if (in[i].outlen == 0) continue;
        size_t skip = 0;
        int yaml = r->opts->output == MANIFESTS_OUT_YAML;
        if (prev && yaml) {
            /* an input of only comments and blank lines holds no document:
             * after one, "..." ends it (else an indented comment or blank
             * line would read as part of a block scalar it ends in) */
            const char *sep = separator(in[i].out, in[i].outlen);
            buf_puts(out, sep ? sep : docs ? "...\n" : "");
            /* a byte order mark only starts a stream */
            if (in[i].outlen >= 3 && memcmp(in[i].out, "\xEF\xBB\xBF", 3) == 0) skip = 3;
        }
        int rc = 0;
        if (yaml && r->files[i].stream && (prev || i != last))
            rc = put_stream_joined(out, in[i].out + skip, in[i].outlen - skip, i != last);
        else if (yaml && i != last)
            rc = put_joined(r, &in[i], out, skip);
        else
            buf_add(out, in[i].out + skip, in[i].outlen - skip);
        if (rc < 0) return rc;
        prev = 1;
        docs |= r->files[i].ndocs > 0;
    }
    return 0;
}

static void free_files(struct run *r)
{
    free(r->sources.objs);
    free(r->rbac);
    for (size_t i = 0; i < r->nfiles; i++) {
        struct file *f = &r->files[i];
        for (size_t j = 0; j < f->ndocs; j++) {
            cJSON_Delete(f->docs[j].json);
            cJSON_Delete(f->docs[j].ops);
        }
        free(f->docs);
        cJSON_Delete(f->extra);
        yamltree_free(&f->t);
    }
    free(r->files);
    cJSON_Delete(r->patches);
}

int manifests_run(struct manifests_input *in, size_t n, const struct manifests_opts *opts,
                  struct manifests_result *res, char *err, size_t errlen)
{
    struct run r = {.opts = opts, .err = err, .errlen = errlen};
    struct buf out = {0};
    int rc = 0, all_json = n > 0;

    memset(res, 0, sizeof *res);
    for (size_t i = 0; i < n; i++) {
        in[i].out = NULL;
        in[i].outlen = 0;
        in[i].changed = 0;
    }
    if (!(r.files = calloc(n ? n : 1, sizeof *r.files)) || !(r.patches = cJSON_CreateArray())) {
        rc = -ENOMEM;
        goto fail;
    }
    r.nfiles = n;
    for (size_t i = 0; i < n; i++) {
        r.files[i].in = &in[i];
        if ((rc = parse_file(&r, &r.files[i])) < 0) goto fail;
        all_json &= r.files[i].json;
    }
    if ((rc = collect_sources(&r)) < 0) goto fail;
    for (size_t i = 0; i < n; i++)
        for (size_t d = 0; d < r.files[i].ndocs; d++)
            if ((rc = process_doc(&r, &r.files[i], d)) < 0) goto fail;
    for (size_t i = 0; i < n; i++)
        if (opts->output != MANIFESTS_OUT_PATCH && opts->output != MANIFESTS_OUT_RBAC &&
            (rc = render_file(&r, &r.files[i])) < 0)
            goto fail;

    if (opts->output == MANIFESTS_OUT_PATCH) {
        render_patches(&r, &out, all_json);
    } else if (opts->output == MANIFESTS_OUT_RBAC) {
        render_rbac(&r, &out);
    } else if ((rc = join(&r, in, n, &out)) < 0) {
        goto fail;
    }
    if (r.fast_sync) fast_sync_notes(&r);
    if (r.injected) kube_version_note(&r);
    if (r.stage && r.opts->output == MANIFESTS_OUT_PATCH)
        report(&r, "stage: patches cannot add objects: write the Roles, RoleBindings and Leases "
                   "with --output rbac");
    if (out.oom || r.report.oom) {
        rc = -ENOMEM;
        goto fail;
    }
    free_files(&r);
    res->out = out.p;
    res->outlen = out.len;
    res->report = r.report.p;
    res->reportlen = r.report.len;
    return 0;
fail:
    free_files(&r);
    buf_free(&out);
    buf_free(&r.report);
    for (size_t i = 0; i < n; i++) {
        free(in[i].out);
        in[i].out = NULL;
        in[i].outlen = 0;
        in[i].changed = 0;
    }
    if (rc == -ENOMEM) ra_errf(err, errlen, rc, "out of memory");
    return rc;
}

void manifests_free(struct manifests_input *in, size_t n, struct manifests_result *res)
{
    for (size_t i = 0; i < n; i++) {
        free(in[i].out);
        in[i].out = NULL;
    }
    free(res->out);
    free(res->report);
    memset(res, 0, sizeof *res);
}
