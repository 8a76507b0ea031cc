/*
 * jsonpatch.c - RFC 6902 JSON Patch over cJSON, with RFC 6901 JSON
 * Pointers (contract in jsonpatch.h).
 *
 * All or nothing: the operations run on a deep copy of the document, which
 * replaces the caller's only when every operation succeeded. An object
 * member is found by its first occurrence (cJSON keeps duplicate keys; the
 * transform reads the same first one), and `add` of an existing member
 * replaces that occurrence. Numbers, strings and the structure are compared
 * by cJSON_Compare for `test` (objects unordered, arrays ordered).
 */
#include "yamldoc/jsonpatch.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

char *jsonpointer_escape(const char *s)
{
    size_t n = 0;
    for (const char *p = s; *p; p++) n += (*p == '~' || *p == '/') ? 2 : 1;
    char *out = malloc(n + 1), *o = out;
    if (!out) return NULL;
    for (const char *p = s; *p; p++) {
        if (*p == '~' || *p == '/') {
            *o++ = '~';
            *o++ = *p == '~' ? '0' : '1';
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
    return out;
}

long jsonpointer_token(const char *path, size_t len, size_t *i, char *tok, size_t cap)
{
    size_t n = 0;
    int fits = cap > 0;
    while (*i < len && path[*i] != '/') {
        char ch = path[(*i)++];
        if (ch == '~' && *i < len && (path[*i] == '0' || path[*i] == '1'))
            ch = path[(*i)++] == '0' ? '~' : '/';
        if (n + 1 < cap)
            tok[n++] = ch;
        else
            fits = 0;
    }
    if (cap) tok[n] = '\0';
    return fits ? (long)n : -1;
}

const cJSON *jsonpointer_get(const cJSON *doc, const char *path, size_t pathlen)
{
    char tok[JSONPOINTER_TOKEN_MAX + 1];
    size_t i = 0;
    const cJSON *cur = doc;
    while (cur && i < pathlen) {
        if (path[i] != '/') return NULL;
        i++;
        long len = jsonpointer_token(path, pathlen, &i, tok, sizeof tok);
        if (len < 0) return NULL;
        if (cJSON_IsObject(cur)) {
            cur = cJSON_GetObjectItemCaseSensitive(cur, tok);
        } else if (cJSON_IsArray(cur)) {
            char *end;
            if (len == 0 || (len > 1 && tok[0] == '0') || tok[0] < '0' || tok[0] > '9') return NULL;
            unsigned long k = strtoul(tok, &end, 10);
            if (*end || k > INT_MAX) return NULL;
            cur = cJSON_GetArrayItem(cur, (int)k);
        } else {
            return NULL;
        }
    }
    return cur;
}

/* One parsed JSON Pointer: its reference tokens, unescaped. */
struct ptr {
    char **tok;
    size_t n;
};

static void ptr_free(struct ptr *p)
{
    for (size_t i = 0; i < p->n; i++) free(p->tok[i]);
    free(p->tok);
    p->tok = NULL;
    p->n = 0;
}

/* Parses s into p. Returns 0, -EINVAL (why set) or -ENOMEM. */
static int ptr_parse(const char *s, struct ptr *p, const char **why)
{
    p->tok = NULL;
    p->n = 0;
    if (!*s) return 0;
    if (*s != '/') {
        *why = "a JSON Pointer must be empty or start with '/'";
        return -EINVAL;
    }
    size_t cap = 1;
    for (const char *q = s; *q; q++) cap += *q == '/';
    p->tok = calloc(cap, sizeof *p->tok);
    if (!p->tok) return -ENOMEM;
    const char *q = s + 1;
    for (;;) {
        const char *end = strchr(q, '/');
        size_t len = end ? (size_t)(end - q) : strlen(q);
        char *t = malloc(len + 1), *o = t;
        if (!t) {
            ptr_free(p);
            return -ENOMEM;
        }
        p->tok[p->n++] = t;
        for (size_t i = 0; i < len; i++) {
            if (q[i] != '~') {
                *o++ = q[i];
                continue;
            }
            if (i + 1 < len && (q[i + 1] == '0' || q[i + 1] == '1')) {
                *o++ = q[i + 1] == '0' ? '~' : '/';
                i++;
                continue;
            }
            *o = '\0';
            ptr_free(p);
            *why = "'~' must be followed by 0 or 1 in a JSON Pointer";
            return -EINVAL;
        }
        *o = '\0';
        if (!end) break;
        q = end + 1;
    }
    return 0;
}

/* An array index token: digits without a leading zero. Returns the index,
 * or -1 when tok is not one (or is absurdly large). */
static long parse_index(const char *tok)
{
    if (!*tok || (tok[0] == '0' && tok[1]) || strlen(tok) > 9) return -1;
    long v = 0;
    for (const char *p = tok; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

/* The first member of obj named key, or NULL. */
static cJSON *member(const cJSON *obj, const char *key)
{
    for (cJSON *c = obj->child; c; c = c->next)
        if (c->string && strcmp(c->string, key) == 0) return c;
    return NULL;
}

/* Resolves tokens [0, n) of p from root. Returns the node or NULL (why
 * set). */
static cJSON *resolve(cJSON *root, const struct ptr *p, size_t n, const char **why)
{
    cJSON *cur = root;
    for (size_t i = 0; i < n; i++) {
        if (cJSON_IsObject(cur)) {
            cur = member(cur, p->tok[i]);
            if (!cur) {
                *why = "no such member";
                return NULL;
            }
        } else if (cJSON_IsArray(cur)) {
            long idx = parse_index(p->tok[i]);
            if (idx < 0) {
                *why = "not an array index";
                return NULL;
            }
            cur = cJSON_GetArrayItem(cur, (int)idx);
            if (!cur) {
                *why = "array index out of range";
                return NULL;
            }
        } else {
            *why = "a scalar has no members";
            return NULL;
        }
    }
    return cur;
}

/* Names (or unnames, name NULL) a detached node: a copy made by
 * cJSON_Duplicate keeps the member name of its source. Returns 0 or -ENOMEM. */
static int set_name(cJSON *v, const char *name)
{
    char *copy = NULL;
    if (name && !(copy = strdup(name))) return -ENOMEM;
    if (!(v->type & cJSON_StringIsConst)) free(v->string);
    v->type &= ~cJSON_StringIsConst;
    v->string = copy;
    return 0;
}

/* Replaces old (a child of parent) by v (owned; freed on failure). */
static int replace_node(cJSON *parent, cJSON *old, cJSON *v)
{
    if (set_name(v, cJSON_IsObject(parent) ? old->string : NULL) < 0) {
        cJSON_Delete(v);
        return -ENOMEM;
    }
    cJSON_ReplaceItemViaPointer(parent, old, v);
    return 0;
}

/* Inserts item before `before` (a child of arr). Not cJSON_InsertItemInArray:
 * Debian's cJSON 1.7.15-1+deb12u4 refuses every insert before an existing
 * item (it returns false and leaves the array as it was). cJSON's list: the
 * first child's prev is the last child, the last child's next is NULL. */
static void array_insert(cJSON *arr, cJSON *before, cJSON *item)
{
    item->next = before;
    item->prev = before->prev;
    if (before == arr->child)
        arr->child = item;
    else
        item->prev->next = item;
    before->prev = item;
}

struct apply {
    cJSON *doc; /* the working copy */
    char *err;
    size_t errlen;
    size_t index;
    const char *op, *path;
};

static int fail(struct apply *a, const char *fmt, ...)
{
    char why[256];
    RA_VSNPRINTF(why, fmt);
    if (a->errlen)
        snprintf(a->err, a->errlen, "JSON Patch operation %zu (%s %s): %s", a->index,
                 a->op ? a->op : "?", a->path ? a->path : "?", why);
    return -EINVAL;
}

/* Adds value (owned; freed on failure) at p. */
static int do_add(struct apply *a, const struct ptr *p, cJSON *value)
{
    const char *why = "";
    if (p->n == 0) {
        set_name(value, NULL);
        cJSON_Delete(a->doc);
        a->doc = value;
        return 0;
    }
    cJSON *parent = resolve(a->doc, p, p->n - 1, &why);
    const char *last = p->tok[p->n - 1];
    if (!parent) {
        cJSON_Delete(value);
        return fail(a, "the parent does not exist (%s)", why);
    }
    if (cJSON_IsObject(parent)) {
        cJSON *old = member(parent, last);
        if (old) return replace_node(parent, old, value);
        if (!cJSON_AddItemToObject(parent, last, value)) {
            cJSON_Delete(value);
            return -ENOMEM;
        }
        return 0;
    }
    if (cJSON_IsArray(parent)) {
        int size = cJSON_GetArraySize(parent);
        set_name(value, NULL);
        if (strcmp(last, "-") == 0) {
            cJSON_AddItemToArray(parent, value);
            return 0;
        }
        long idx = parse_index(last);
        if (idx < 0 || idx > size) {
            cJSON_Delete(value);
            return fail(a, idx < 0 ? "\"%s\" is not an array index" : "index %s is out of range",
                        last);
        }
        if (idx == size)
            cJSON_AddItemToArray(parent, value);
        else
            array_insert(parent, cJSON_GetArrayItem(parent, (int)idx), value);
        return 0;
    }
    cJSON_Delete(value);
    return fail(a, "the parent is not an object or an array");
}

/* Detaches the node at p (returned, owned by the caller), or NULL. */
static cJSON *do_detach(struct apply *a, const struct ptr *p, int *rc)
{
    const char *why = "";
    if (p->n == 0) {
        *rc = fail(a, "the whole document cannot be removed");
        return NULL;
    }
    cJSON *parent = resolve(a->doc, p, p->n - 1, &why);
    cJSON *node = parent ? resolve(parent, &(struct ptr){p->tok + p->n - 1, 1}, 1, &why) : NULL;
    if (!node) {
        *rc = fail(a, "the target does not exist (%s)", why);
        return NULL;
    }
    *rc = 0;
    return cJSON_DetachItemViaPointer(parent, node);
}

static int has_dup_member(const cJSON *op)
{
    for (const cJSON *c = op->child; c; c = c->next)
        for (const cJSON *d = c->next; d; d = d->next)
            if (c->string && d->string && strcmp(c->string, d->string) == 0) return 1;
    return 0;
}

/* One operation's parsed parts. */
struct op {
    struct ptr path, from; /* from: move and copy only */
    const char *from_s;
    const cJSON *value; /* add, replace and test */
};

static int op_add(struct apply *a, const struct op *o)
{
    cJSON *v = cJSON_Duplicate(o->value, 1);
    return v ? do_add(a, &o->path, v) : -ENOMEM;
}

static int op_remove(struct apply *a, const struct op *o)
{
    int rc;
    cJSON_Delete(do_detach(a, &o->path, &rc));
    return rc;
}

static int op_replace(struct apply *a, const struct op *o)
{
    const char *why = "";
    cJSON *target = resolve(a->doc, &o->path, o->path.n, &why);
    if (!target) return fail(a, "the target does not exist (%s)", why);
    cJSON *v = cJSON_Duplicate(o->value, 1);
    if (!v) return -ENOMEM;
    if (o->path.n == 0) {
        set_name(v, NULL);
        cJSON_Delete(a->doc);
        a->doc = v;
        return 0;
    }
    return replace_node(resolve(a->doc, &o->path, o->path.n - 1, &why), target, v);
}

static int op_move(struct apply *a, const struct op *o)
{
    const char *why = "";
    /* "from" must not be a proper prefix of "path" (a node cannot move into itself) */
    int prefix = o->from.n < o->path.n;
    for (size_t i = 0; prefix && i < o->from.n; i++)
        prefix = !strcmp(o->from.tok[i], o->path.tok[i]);
    if (prefix) return fail(a, "\"from\" is a proper prefix of \"path\"");
    if (!resolve(a->doc, &o->from, o->from.n, &why))
        return fail(a, "from: the source does not exist (%s)", why);
    if (strcmp(o->from_s, a->path) == 0) return 0;
    int rc;
    cJSON *node = do_detach(a, &o->from, &rc);
    return node ? do_add(a, &o->path, node) : rc;
}

static int op_copy(struct apply *a, const struct op *o)
{
    const char *why = "";
    cJSON *src = resolve(a->doc, &o->from, o->from.n, &why);
    if (!src) return fail(a, "from: the source does not exist (%s)", why);
    cJSON *v = cJSON_Duplicate(src, 1);
    return v ? do_add(a, &o->path, v) : -ENOMEM;
}

static int op_test(struct apply *a, const struct op *o)
{
    const char *why = "";
    cJSON *target = resolve(a->doc, &o->path, o->path.n, &why);
    if (!target) return fail(a, "test failed: the target does not exist (%s)", why);
    if (!cJSON_Compare(target, o->value, 1)) return fail(a, "test failed: the value differs");
    return 0;
}

/* The six operations of RFC 6902 section 4: what each needs, and what it
 * does. */
static const struct {
    const char *name;
    int needs_value, needs_from;
    int (*run)(struct apply *, const struct op *);
} OPS[] = {
    {"add", 1, 0, op_add},   {"remove", 0, 0, op_remove}, {"replace", 1, 0, op_replace},
    {"move", 0, 1, op_move}, {"copy", 0, 1, op_copy},     {"test", 1, 0, op_test},
};

static int apply_one(struct apply *a, const cJSON *jo)
{
    const char *why = "";
    a->op = NULL;
    a->path = NULL;
    if (!cJSON_IsObject(jo)) return fail(a, "an operation must be a JSON object");
    const cJSON *jop = member(jo, "op"), *jpath = member(jo, "path"), *jfrom = member(jo, "from");
    struct op o = {.value = member(jo, "value")};
    if (cJSON_IsString(jop)) a->op = jop->valuestring;
    if (cJSON_IsString(jpath)) a->path = jpath->valuestring;
    if (has_dup_member(jo)) return fail(a, "a member appears twice in the operation");
    if (!a->op) return fail(a, "\"op\" is missing or not a string");
    if (!a->path) return fail(a, "\"path\" is missing or not a string");
    size_t k = 0, nops = sizeof OPS / sizeof OPS[0];
    while (k < nops && strcmp(OPS[k].name, a->op) != 0) k++;
    if (k == nops)
        return fail(a, "unknown operation (want add, remove, replace, move, copy or test)");
    if (OPS[k].needs_value && !o.value) return fail(a, "\"value\" is missing");
    if (OPS[k].needs_from && !cJSON_IsString(jfrom))
        return fail(a, "\"from\" is missing or not a string");

    int rc = ptr_parse(a->path, &o.path, &why);
    if (rc == -EINVAL) return fail(a, "%s", why);
    if (rc < 0) return rc;
    if (OPS[k].needs_from) {
        o.from_s = jfrom->valuestring;
        rc = ptr_parse(o.from_s, &o.from, &why);
        if (rc < 0) {
            ptr_free(&o.path);
            return rc == -EINVAL ? fail(a, "from: %s", why) : rc;
        }
    }
    rc = OPS[k].run(a, &o);
    ptr_free(&o.path);
    ptr_free(&o.from);
    return rc;
}

int jsonpatch_apply(cJSON **doc, const cJSON *ops, char *err, size_t errlen)
{
    struct apply a = {.err = err, .errlen = errlen};
    if (errlen) err[0] = '\0';
    if (!cJSON_IsArray(ops)) {
        if (errlen) snprintf(err, errlen, "JSON Patch: the operations must be a JSON array");
        return -EINVAL;
    }
    if (!doc || !*doc) {
        if (errlen) snprintf(err, errlen, "JSON Patch: no document");
        return -EINVAL;
    }
    a.doc = cJSON_Duplicate(*doc, 1);
    if (!a.doc) return -ENOMEM;
    int rc = 0;
    for (const cJSON *op = ops->child; op && rc == 0; op = op->next, a.index++)
        rc = apply_one(&a, op);
    if (rc < 0) {
        if (rc == -ENOMEM && errlen) snprintf(err, errlen, "JSON Patch: out of memory");
        cJSON_Delete(a.doc);
        return rc;
    }
    cJSON_Delete(*doc);
    *doc = a.doc;
    return 0;
}
