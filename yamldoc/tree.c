/*
 * tree.c - libyaml events to node trees with byte offsets (see
 * tree.h), and nodes to cJSON with Kubernetes' scalar rules.
 *
 * libyaml's marks count characters, not bytes; a checkpoint table (the byte
 * offset of every 64th character) turns them into byte offsets. Pure ASCII
 * input (the common case) maps one to one.
 */
#include "yamldoc/tree.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "base/text.h"

#define TAG_PREFIX "tag:yaml.org,2002:"

/* ---- arena ---- */

struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    max_align_t data[];
};

struct yamltree_arena {
    struct arena_block *head;
};

static void *arena_alloc(struct yamltree_arena *a, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (!a->head || a->head->cap - a->head->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        struct arena_block *b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
    }
    void *p = (char *)a->head->data + a->head->used;
    a->head->used += n;
    return p;
}

static char *arena_strdup(struct yamltree_arena *a, const char *s, size_t n)
{
    char *p = arena_alloc(a, n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static void arena_free(struct yamltree_arena *a)
{
    if (!a) return;
    while (a->head) {
        struct arena_block *b = a->head;
        a->head = b->next;
        free(b);
    }
    free(a);
}

/* ---- character index -> byte offset ---- */

struct posmap {
    const char *text;
    size_t len;
    size_t base; /* bytes of a UTF-8 BOM libyaml skipped */
    int ascii;   /* every byte < 0x80: index == offset */
    size_t *cp;  /* cp[k] = byte offset of character 64k */
    size_t ncp;
};

static int posmap_init(struct posmap *m, const char *text, size_t len)
{
    memset(m, 0, sizeof *m);
    m->text = text;
    m->len = len;
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) m->base = 3;
    m->ascii = 1;
    for (size_t i = m->base; i < len; i++)
        if ((unsigned char)text[i] >= 0x80) {
            m->ascii = 0;
            break;
        }
    if (m->ascii) return 0;
    size_t cap = len / 64 + 2;
    m->cp = malloc(cap * sizeof *m->cp);
    if (!m->cp) return -ENOMEM;
    size_t c = 0;
    for (size_t i = m->base; i < len; i++) {
        if (((unsigned char)text[i] & 0xC0) == 0x80) continue;
        if (c % 64 == 0) m->cp[m->ncp++] = i;
        c++;
    }
    if (c % 64 == 0) m->cp[m->ncp++] = len;
    return 0;
}

static size_t posmap_off(const struct posmap *m, size_t idx)
{
    if (m->ascii) return idx + m->base > m->len ? m->len : idx + m->base;
    size_t k = idx / 64;
    if (k >= m->ncp) return m->len;
    size_t b = m->cp[k];
    for (size_t left = idx % 64; left > 0 && b < m->len; left--) {
        b++;
        while (b < m->len && ((unsigned char)m->text[b] & 0xC0) == 0x80) b++;
    }
    return b;
}

/* ---- parsing ---- */

struct anchor {
    const char *name;
    struct yamltree_node *node;
};

struct builder {
    struct yamltree *t;
    struct posmap pm;
    struct yamltree_node **stack;
    size_t depth, stack_cap;
    struct anchor *anchors;
    size_t nanchors, anchors_cap;
    size_t docs_cap;
};

static int fail(struct yamltree_error *e, size_t line, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(struct yamltree_error *e, size_t line, int rc, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        e->line = line;
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        ra_one_line_fix(e->msg, sizeof e->msg); /* values quoted from the input */
    }
    return rc;
}

static int add_kid(struct yamltree_arena *a, struct yamltree_node *p, struct yamltree_node *k)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 4;
        struct yamltree_node **kids = arena_alloc(a, cap * sizeof *kids);
        if (!kids) return -ENOMEM;
        if (p->n) memcpy(kids, p->kids, p->n * sizeof *kids);
        p->kids = kids;
        p->cap = cap;
    }
    p->kids[p->n++] = k;
    k->parent = p;
    return 0;
}

static struct yamltree_node *new_node(struct builder *b, enum yamltree_kind kind,
                                      const yaml_event_t *ev)
{
    struct yamltree_node *n = arena_alloc(b->t->arena, sizeof *n);
    if (!n) return NULL;
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->start = posmap_off(&b->pm, ev->start_mark.index);
    n->end = posmap_off(&b->pm, ev->end_mark.index);
    n->line = ev->start_mark.line;
    n->col = ev->start_mark.column;
    n->indent = n->col;
    n->iline = n->line;
    return n;
}

/* Sets n->indent and n->iline: where the first entry of a block
 * collection starts. libyaml's start mark is at the collection's anchor or
 * tag when it has one ("volumes: &v" then "- name: a" on the next line);
 * the entry follows the properties, blanks, a comment and line breaks. */
static void set_indent(const struct posmap *m, struct yamltree_node *n)
{
    const char *t = m->text;
    size_t i = n->start, col = n->col, line = n->line;
    n->indent = col;
    n->iline = line;
    if (n->flow || i >= m->len || (t[i] != '&' && t[i] != '!')) return;
    while (i < m->len) {
        char ch = t[i];
        if (ch == '&' || ch == '!') { /* a property: up to the next blank */
            while (i < m->len && !strchr(" \t\r\n", t[i])) {
                if (((unsigned char)t[i] & 0xC0) != 0x80) col++;
                i++;
            }
        } else if (ch == ' ' || ch == '\t') {
            i++, col++;
        } else if (ch == '#') {
            while (i < m->len && t[i] != '\n') i++;
        } else if (ch == '\r' || ch == '\n') {
            i += ch == '\r' && i + 1 < m->len && t[i + 1] == '\n' ? 2 : 1;
            col = 0;
            line++;
        } else {
            break;
        }
    }
    n->indent = col;
    n->iline = line;
}

static int set_anchor(struct builder *b, struct yamltree_node *n, const yaml_char_t *anchor)
{
    if (!anchor) return 0;
    n->anchor = arena_strdup(b->t->arena, (const char *)anchor, strlen((const char *)anchor));
    if (!n->anchor) return -ENOMEM;
    if (b->nanchors == b->anchors_cap) {
        size_t cap = b->anchors_cap ? b->anchors_cap * 2 : 8;
        struct anchor *na = realloc(b->anchors, cap * sizeof *na);
        if (!na) return -ENOMEM;
        b->anchors = na;
        b->anchors_cap = cap;
    }
    b->anchors[b->nanchors++] = (struct anchor){n->anchor, n};
    return 0;
}

static int set_tag(struct builder *b, struct yamltree_node *n, const yaml_char_t *tag)
{
    if (!tag) return 0;
    n->tag = arena_strdup(b->t->arena, (const char *)tag, strlen((const char *)tag));
    return n->tag ? 0 : -ENOMEM;
}

/* Attaches a finished or opened node to the open collection (or makes it
 * the document's root). */
static int attach(struct builder *b, struct yamltree_node *n, struct yamltree_error *e)
{
    if (b->depth == 0) {
        struct yamltree_doc *d = &b->t->docs[b->t->ndocs - 1];
        d->root = n;
        d->line = n->line + 1;
        return 0;
    }
    struct yamltree_node *p = b->stack[b->depth - 1];
    if (p->kind == YAMLTREE_MAP && p->n % 2 == 0) {
        const struct yamltree_node *k = n->kind == YAMLTREE_ALIAS ? n->target : n;
        if (k->kind != YAMLTREE_SCALAR)
            return fail(e, n->line + 1, -EINVAL, "a mapping key must be a scalar");
    }
    return add_kid(b->t->arena, p, n) < 0 ? -ENOMEM : 0;
}

static int push(struct builder *b, struct yamltree_node *n)
{
    if (b->depth == b->stack_cap) {
        size_t cap = b->stack_cap ? b->stack_cap * 2 : 32;
        struct yamltree_node **s = realloc(b->stack, cap * sizeof *s);
        if (!s) return -ENOMEM;
        b->stack = s;
        b->stack_cap = cap;
    }
    b->stack[b->depth++] = n;
    n->open = 1;
    return 0;
}

/* A document starts at the end of the previous one (its leading comments,
 * directives and "---" belong to it). */
static int on_document_start(struct builder *b, size_t prev_end)
{
    struct yamltree *t = b->t;
    if (t->ndocs == b->docs_cap) {
        size_t cap = b->docs_cap ? b->docs_cap * 2 : 8;
        struct yamltree_doc *d = realloc(t->docs, cap * sizeof *d);
        if (!d) return -ENOMEM;
        t->docs = d;
        b->docs_cap = cap;
    }
    memset(&t->docs[t->ndocs], 0, sizeof t->docs[0]);
    t->docs[t->ndocs].start = prev_end;
    t->ndocs++;
    b->nanchors = 0; /* anchors are scoped to their document */
    return 0;
}

/* An alias node, pointing at its anchor's node (the latest of that name),
 * which must be complete. */
static int on_alias(struct builder *b, const yaml_event_t *ev, struct yamltree_error *e)
{
    const char *name = (const char *)ev->data.alias.anchor;
    struct yamltree_node *target = NULL, *n;
    for (size_t i = b->nanchors; i > 0 && !target; i--)
        if (strcmp(b->anchors[i - 1].name, name) == 0) target = b->anchors[i - 1].node;
    if (!target) return fail(e, ev->start_mark.line + 1, -EINVAL, "undefined alias *%s", name);
    if (target->open)
        return fail(e, ev->start_mark.line + 1, -EINVAL,
                    "alias *%s refers to a node that contains it", name);
    if (!(n = new_node(b, YAMLTREE_ALIAS, ev))) return -ENOMEM;
    n->target = target;
    return attach(b, n, e);
}

static int on_scalar(struct builder *b, const yaml_event_t *ev, struct yamltree_error *e)
{
    struct yamltree_node *n = new_node(b, YAMLTREE_SCALAR, ev);
    int rc;
    if (!n) return -ENOMEM;
    n->style = ev->data.scalar.style;
    n->plain_implicit = ev->data.scalar.plain_implicit;
    n->len = ev->data.scalar.length;
    if (!(n->value = arena_strdup(b->t->arena, (const char *)ev->data.scalar.value, n->len)))
        return -ENOMEM;
    if ((rc = set_tag(b, n, ev->data.scalar.tag)) < 0) return rc;
    if ((rc = attach(b, n, e)) < 0) return rc;
    return set_anchor(b, n, ev->data.scalar.anchor);
}

/* A sequence or mapping opens: attached, anchored, and pushed until its
 * end event. */
static int on_collection_start(struct builder *b, const yaml_event_t *ev, struct yamltree_error *e)
{
    int seq = ev->type == YAML_SEQUENCE_START_EVENT, rc;
    struct yamltree_node *n = new_node(b, seq ? YAMLTREE_SEQ : YAMLTREE_MAP, ev);
    if (!n) return -ENOMEM;
    n->flow = seq ? ev->data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE
                  : ev->data.mapping_start.style == YAML_FLOW_MAPPING_STYLE;
    if ((rc = set_tag(b, n, seq ? ev->data.sequence_start.tag : ev->data.mapping_start.tag)) < 0)
        return rc;
    set_indent(&b->pm, n);
    if ((rc = attach(b, n, e)) < 0) return rc;
    if ((rc = set_anchor(b, n,
                         seq ? ev->data.sequence_start.anchor : ev->data.mapping_start.anchor)) < 0)
        return rc;
    /* refused as it opens: libyaml's scanner costs O(depth) per token
     * in flow context, so 100 000 '[' would take minutes to read whole */
    if (b->depth >= YAMLTREE_MAX_DEPTH)
        return fail(e, n->line + 1, -EINVAL, "nested deeper than %d levels", YAMLTREE_MAX_DEPTH);
    return push(b, n);
}

static int on_event(struct builder *b, const yaml_event_t *ev, size_t *prev_end,
                    struct yamltree_error *e)
{
    struct yamltree_node *n;
    switch (ev->type) {
    case YAML_DOCUMENT_START_EVENT: return on_document_start(b, *prev_end);
    case YAML_DOCUMENT_END_EVENT:
        *prev_end = posmap_off(&b->pm, ev->end_mark.index);
        b->t->docs[b->t->ndocs - 1].end = *prev_end;
        return 0;
    case YAML_ALIAS_EVENT: return on_alias(b, ev, e);
    case YAML_SCALAR_EVENT: return on_scalar(b, ev, e);
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: return on_collection_start(b, ev, e);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        n = b->stack[--b->depth];
        n->open = 0;
        n->end = posmap_off(&b->pm, ev->end_mark.index);
        return 0;
    default: return 0;
    }
}

/* The number of documents that have started in text[0..len) (at least
 * 1): the document a reader error at offset len is in. */
static size_t docs_before(const char *text, size_t len)
{
    yaml_parser_t p;
    size_t n = 0;
    if (!yaml_parser_initialize(&p)) return 1;
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) break;
        int type = ev.type;
        yaml_event_delete(&ev);
        if (type == YAML_DOCUMENT_START_EVENT) n++;
        if (type == YAML_STREAM_END_EVENT) break;
    }
    yaml_parser_delete(&p);
    return n ? n : 1;
}

/* Fills *e for a failed yaml_parser_parse. libyaml gives no mark for a
 * reader error (a byte that is not UTF-8, a control character), only the
 * byte offset, and reads ahead of the parser: the line, the column and the
 * document are counted here from that offset. */
static void parse_error(const yaml_parser_t *p, const char *text, size_t len, size_t doc,
                        struct yamltree_error *e)
{
    const char *problem = p->problem ? p->problem : "syntax error";
    e->doc = doc;
    e->line = p->problem_mark.line + 1;
    if (p->error == YAML_READER_ERROR && p->problem_offset <= len) {
        size_t off = p->problem_offset, ls = 0, line = 1, col = 1;
        for (size_t i = 0; i < off; i++)
            if (text[i] == '\n' || (text[i] == '\r' && (i + 1 >= len || text[i + 1] != '\n'))) {
                line++;
                ls = i + 1;
            }
        if (ls == 0 && len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) ls = 3; /* a BOM */
        for (size_t i = ls; i < off; i++) col += ((unsigned char)text[i] & 0xC0) != 0x80;
        e->line = line;
        e->doc = docs_before(text, ls);
        snprintf(e->msg, sizeof e->msg, "%s (byte 0x%02x at column %zu)", problem,
                 off < len ? (unsigned char)text[off] : 0, col);
    } else if (p->context) {
        snprintf(e->msg, sizeof e->msg, "%s (%s at line %zu)", problem, p->context,
                 p->context_mark.line + 1);
    } else {
        snprintf(e->msg, sizeof e->msg, "%s", problem);
    }
}

int yamltree_parse(const char *text, size_t len, struct yamltree *out, struct yamltree_error *e)
{
    struct builder b;
    yaml_parser_t p;
    size_t prev_end = 0;
    int rc = 0, done = 0, in_doc = 0;

    memset(out, 0, sizeof *out);
    memset(&b, 0, sizeof b);
    if (e) memset(e, 0, sizeof *e);
    if (!text) text = ""; /* libyaml asserts on a NULL input */
    if (len >= 2 &&
        ((text[0] == '\xFF' && text[1] == '\xFE') || (text[0] == '\xFE' && text[1] == '\xFF'))) {
        if (e) e->doc = 1;
        return fail(e, 1, -EINVAL, "UTF-16 input is not supported: convert it to UTF-8");
    }
    if (!(out->arena = calloc(1, sizeof *out->arena))) return -ENOMEM;
    b.t = out;
    if (posmap_init(&b.pm, text, len) < 0) {
        arena_free(out->arena);
        out->arena = NULL;
        return -ENOMEM;
    }
    if (!yaml_parser_initialize(&p)) {
        free(b.pm.cp);
        arena_free(out->arena);
        out->arena = NULL;
        return -ENOMEM;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    while (!done) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            if (p.error == YAML_MEMORY_ERROR) {
                rc = -ENOMEM;
                break;
            }
            if (e) parse_error(&p, text, len, out->ndocs + (in_doc ? 0 : 1), e);
            rc = -EINVAL;
            break;
        }
        if (ev.type == YAML_DOCUMENT_START_EVENT) in_doc = 1;
        if (ev.type == YAML_DOCUMENT_END_EVENT) in_doc = 0;
        if (ev.type == YAML_STREAM_END_EVENT) done = 1;
        rc = on_event(&b, &ev, &prev_end, e);
        yaml_event_delete(&ev);
        if (rc < 0) {
            if (e && rc == -EINVAL) e->doc = out->ndocs;
            break;
        }
    }
    yaml_parser_delete(&p);
    free(b.pm.cp);
    free(b.stack);
    free(b.anchors);
    if (rc < 0) {
        yamltree_free(out);
        return rc;
    }
    out->tail = prev_end;
    return 0;
}

void yamltree_free(struct yamltree *t)
{
    if (!t) return;
    free(t->docs);
    arena_free(t->arena);
    memset(t, 0, sizeof *t);
}

/* ---- scalars ---- */

static int is_one_of(const char *s, const char *const *words)
{
    for (; *words; words++)
        if (strcmp(s, *words) == 0) return 1;
    return 0;
}

/* Copies in[0..len) without its '_' characters into buf (size bytes, NUL
 * terminated), as yaml.v2 reads numbers. 0 if it does not fit. */
static int without_underscores(const char *in, size_t len, char *buf, size_t size)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (in[i] == '_') continue;
        if (n + 1 >= size) return 0;
        buf[n++] = in[i];
    }
    buf[n] = '\0';
    return 1;
}

/* Go's strconv.ParseInt(s, 0, 64) after removing '_' (yaml.v2). */
static int parse_go_int(const char *in, size_t len, double *out)
{
    char buf[80];
    if (!without_underscores(in, len, buf, sizeof buf)) return 0;
    const char *s = buf;
    int neg = 0;
    if (*s == '+' || *s == '-') neg = *s++ == '-';
    int base = 10;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        base = 16, s += 2;
    else if (s[0] == '0' && (s[1] == 'o' || s[1] == 'O'))
        base = 8, s += 2;
    else if (s[0] == '0' && (s[1] == 'b' || s[1] == 'B'))
        base = 2, s += 2;
    else if (s[0] == '0' && s[1] != '\0')
        base = 8, s += 1;
    if (*s == '\0') return 0;
    uint64_t v = 0;
    for (; *s; s++) {
        int d;
        if (*s >= '0' && *s <= '9')
            d = *s - '0';
        else if (*s >= 'a' && *s <= 'f')
            d = *s - 'a' + 10;
        else if (*s >= 'A' && *s <= 'F')
            d = *s - 'A' + 10;
        else
            return 0;
        if (d >= base) return 0;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) return 0;
        v = v * (uint64_t)base + (uint64_t)d;
    }
    if (neg && v > (uint64_t)INT64_MAX + 1) return 0;
    *out = neg ? -(double)v : (double)v;
    return 1;
}

/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? after removing '_'. */
static int parse_yaml_float(const char *in, size_t len, double *out)
{
    char buf[80];
    if (!without_underscores(in, len, buf, sizeof buf)) return 0;
    const char *s = buf;
    if (*s == '+' || *s == '-') s++;
    size_t digits = 0;
    if (*s == '.') {
        s++;
        while (*s >= '0' && *s <= '9') s++, digits++;
        if (!digits) return 0;
    } else {
        while (*s >= '0' && *s <= '9') s++, digits++;
        if (!digits) return 0;
        if (*s == '.') {
            s++;
            while (*s >= '0' && *s <= '9') s++;
        }
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        size_t ed = 0;
        while (*s >= '0' && *s <= '9') s++, ed++;
        if (!ed) return 0;
    }
    if (*s) return 0;
    char *end;
    double d = strtod(buf, &end);
    if (*end || !isfinite(d)) return 0;
    *out = d;
    return 1;
}

static const char *const NULLS[] = {"~", "null", "Null", "NULL", NULL};
/* YAML 1.1's booleans, as go-yaml v2 (and so sigs.k8s.io/yaml, kubectl's
 * reader) resolves them. */
static const char *const TRUES[] = {"true", "True", "TRUE", "y",  "Y",  "yes",
                                    "Yes",  "YES",  "on",   "On", "ON", NULL};
static const char *const FALSES[] = {"false", "False", "FALSE", "n",   "N",   "no",
                                     "No",    "NO",    "off",   "Off", "OFF", NULL};
static const char *const SPECIAL_FLOATS[] = {".inf",  ".Inf",  ".INF",  "-.inf", "-.Inf",
                                             "-.INF", "+.inf", "+.Inf", "+.INF", ".nan",
                                             ".NaN",  ".NAN",  NULL};

static int scalar_json(const struct yamltree_node *n, cJSON **out, struct yamltree_error *e)
{
    const char *v = n->value;
    const char *tag = n->tag;
    double d;
    if (tag && strcmp(tag, "!") == 0) tag = TAG_PREFIX "str";
    if (!tag && n->style != YAML_PLAIN_SCALAR_STYLE) tag = TAG_PREFIX "str";
    if (!tag) {
        if (n->len == 0 || is_one_of(v, NULLS))
            *out = cJSON_CreateNull();
        else if (is_one_of(v, TRUES))
            *out = cJSON_CreateTrue();
        else if (is_one_of(v, FALSES))
            *out = cJSON_CreateFalse();
        else if (strchr("+-.0123456789", v[0]) && is_one_of(v, SPECIAL_FLOATS))
            return fail(e, n->line + 1, -EINVAL, "%s cannot be represented in JSON", v);
        else if (strchr("+-.0123456789", v[0]) &&
                 (parse_go_int(v, n->len, &d) || parse_yaml_float(v, n->len, &d)))
            *out = cJSON_CreateNumber(d);
        else
            *out = cJSON_CreateString(v);
        return *out ? 0 : -ENOMEM;
    }
    if (strncmp(tag, TAG_PREFIX, strlen(TAG_PREFIX)) != 0)
        return fail(e, n->line + 1, -EINVAL, "unsupported tag %s", tag);
    tag += strlen(TAG_PREFIX);
    if (strcmp(tag, "str") == 0 || strcmp(tag, "binary") == 0 || strcmp(tag, "timestamp") == 0) {
        *out = cJSON_CreateString(v);
    } else if (strcmp(tag, "null") == 0) {
        if (n->len && !is_one_of(v, NULLS))
            return fail(e, n->line + 1, -EINVAL, "!!null value \"%.40s\" is not null", v);
        *out = cJSON_CreateNull();
    } else if (strcmp(tag, "bool") == 0) {
        if (is_one_of(v, TRUES))
            *out = cJSON_CreateTrue();
        else if (is_one_of(v, FALSES))
            *out = cJSON_CreateFalse();
        else
            return fail(e, n->line + 1, -EINVAL, "!!bool value \"%.40s\" is not a bool", v);
    } else if (strcmp(tag, "int") == 0) {
        if (!parse_go_int(v, n->len, &d))
            return fail(e, n->line + 1, -EINVAL, "!!int value \"%.40s\" is not an integer", v);
        *out = cJSON_CreateNumber(d);
    } else if (strcmp(tag, "float") == 0) {
        if (!parse_go_int(v, n->len, &d) && !parse_yaml_float(v, n->len, &d))
            return fail(e, n->line + 1, -EINVAL, "!!float value \"%.40s\" is not a number", v);
        *out = cJSON_CreateNumber(d);
    } else {
        return fail(e, n->line + 1, -EINVAL, "unsupported tag !!%s on a scalar", tag);
    }
    return *out ? 0 : -ENOMEM;
}

/* ---- conversion ---- */

struct conv {
    size_t count;
    struct yamltree_error *e;
};

static int conv(const struct yamltree_node *n, cJSON **out, struct conv *c, int depth);

static int is_merge_key(const struct yamltree_node *k)
{
    if (k->kind == YAMLTREE_ALIAS) return 0;
    return k->kind == YAMLTREE_SCALAR && k->style == YAML_PLAIN_SCALAR_STYLE && !k->tag &&
           strcmp(k->value, "<<") == 0;
}

static int merge_from(cJSON *obj, const struct yamltree_node *src, struct conv *c, int depth)
{
    const struct yamltree_node *m = src->kind == YAMLTREE_ALIAS ? src->target : src;
    if (m->kind != YAMLTREE_MAP)
        return fail(c->e, src->line + 1, -EINVAL,
                    "a merge key (<<) needs a mapping or a sequence of mappings");
    cJSON *v = NULL;
    int rc = conv(m, &v, c, depth + 1);
    if (rc < 0) return rc;
    cJSON *it = v->child;
    while (it) {
        cJSON *next = it->next;
        if (!cJSON_GetObjectItemCaseSensitive(obj, it->string)) {
            cJSON_DetachItemViaPointer(v, it);
            /* cJSON copies the key before it frees the item's old one */
            cJSON_AddItemToObject(obj, it->string, it);
        }
        it = next;
    }
    cJSON_Delete(v);
    return 0;
}

static int conv_map(const struct yamltree_node *n, cJSON **out, struct conv *c, int depth)
{
    cJSON *obj = cJSON_CreateObject();
    int rc = 0;
    if (!obj) return -ENOMEM;
    for (size_t i = 0; i + 1 < n->n; i += 2) {
        const struct yamltree_node *k = n->kids[i];
        if (is_merge_key(k)) continue;
        const struct yamltree_node *ks = k->kind == YAMLTREE_ALIAS ? k->target : k;
        if (cJSON_GetObjectItemCaseSensitive(obj, ks->value)) {
            rc = fail(c->e, k->line + 1, -EINVAL, "duplicate key \"%.80s\"", ks->value);
            goto out;
        }
        cJSON *v = NULL;
        if ((rc = conv(n->kids[i + 1], &v, c, depth + 1)) < 0) goto out;
        if (!cJSON_AddItemToObject(obj, ks->value, v)) {
            cJSON_Delete(v);
            rc = -ENOMEM;
            goto out;
        }
    }
    for (size_t i = 0; i + 1 < n->n; i += 2) {
        if (!is_merge_key(n->kids[i])) continue;
        const struct yamltree_node *v = n->kids[i + 1];
        const struct yamltree_node *vv = v->kind == YAMLTREE_ALIAS ? v->target : v;
        if (vv->kind == YAMLTREE_SEQ) {
            for (size_t j = 0; j < vv->n; j++)
                if ((rc = merge_from(obj, vv->kids[j], c, depth)) < 0) goto out;
        } else if ((rc = merge_from(obj, v, c, depth)) < 0) {
            goto out;
        }
    }
out:
    if (rc < 0) {
        cJSON_Delete(obj);
        return rc;
    }
    *out = obj;
    return 0;
}

static int conv(const struct yamltree_node *n, cJSON **out, struct conv *c, int depth)
{
    *out = NULL;
    if (depth > YAMLTREE_MAX_DEPTH)
        return fail(c->e, n->line + 1, -EINVAL, "nested deeper than %d levels", YAMLTREE_MAX_DEPTH);
    if (++c->count > YAMLTREE_MAX_EXPANSION)
        return fail(c->e, n->line + 1, -EINVAL,
                    "aliases expand to more than %d values (an alias bomb?)",
                    YAMLTREE_MAX_EXPANSION);
    if (n->kind == YAMLTREE_ALIAS) return conv(n->target, out, c, depth + 1);
    if (n->tag && n->kind != YAMLTREE_SCALAR) {
        const char *want = n->kind == YAMLTREE_MAP ? TAG_PREFIX "map" : TAG_PREFIX "seq";
        if (strcmp(n->tag, want) != 0)
            return fail(c->e, n->line + 1, -EINVAL, "unsupported tag %s on a %s", n->tag,
                        n->kind == YAMLTREE_MAP ? "mapping" : "sequence");
    }
    if (n->kind == YAMLTREE_SCALAR) return scalar_json(n, out, c->e);
    if (n->kind == YAMLTREE_MAP) return conv_map(n, out, c, depth);
    cJSON *arr = cJSON_CreateArray();
    if (!arr) return -ENOMEM;
    for (size_t i = 0; i < n->n; i++) {
        cJSON *v = NULL;
        int rc = conv(n->kids[i], &v, c, depth + 1);
        if (rc < 0) {
            cJSON_Delete(arr);
            return rc;
        }
        if (!cJSON_AddItemToArray(arr, v)) {
            cJSON_Delete(v);
            cJSON_Delete(arr);
            return -ENOMEM;
        }
    }
    *out = arr;
    return 0;
}

int yamltree_to_json(const struct yamltree_node *n, cJSON **out, struct yamltree_error *e)
{
    struct conv c = {0, e};
    if (!n) {
        *out = cJSON_CreateNull();
        return *out ? 0 : -ENOMEM;
    }
    return conv(n, out, &c, 0);
}

/* ---- navigation ---- */

size_t yamltree_content_end(const struct yamltree_node *n, const char *text)
{
    if (n->kind == YAMLTREE_SCALAR) {
        if (n->style != YAML_LITERAL_SCALAR_STYLE && n->style != YAML_FOLDED_SCALAR_STYLE)
            return n->end;
        size_t e = n->end;
        while (e > n->start && strchr(" \t\r\n", text[e - 1])) e--;
        return e;
    }
    if (n->kind == YAMLTREE_ALIAS || n->flow || n->n == 0) return n->end;
    return yamltree_content_end(n->kids[n->n - 1], text);
}

struct yamltree_node *yamltree_map_get(const struct yamltree_node *map, const char *key,
                                       size_t keylen, struct yamltree_node **keyp)
{
    if (map->kind != YAMLTREE_MAP) return NULL;
    for (size_t i = 0; i + 1 < map->n; i += 2) {
        const struct yamltree_node *k = map->kids[i];
        if (k->kind == YAMLTREE_ALIAS) k = k->target;
        if (k->kind == YAMLTREE_SCALAR && !is_merge_key(map->kids[i]) && k->len == keylen &&
            memcmp(k->value, key, keylen) == 0) {
            if (keyp) *keyp = map->kids[i];
            return map->kids[i + 1];
        }
    }
    return NULL;
}
