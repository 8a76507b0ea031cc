/*
 * splice.c - JSON Patch operations as text edits on a YAML document
 * (see splice.h): locate the node with yamltree, render the new text
 * with yamlrender, splice, and verify the result against jsonpatch_apply.
 */
#include "yamldoc/splice.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "yamldoc/jsonpatch.h"
#include "yamldoc/join.h"
#include "yamldoc/render.h"
#include "yamldoc/tree.h"

/* One parsed state of the document text. */
struct state {
    const char *text;
    size_t len;
    struct yamltree t;
    struct yamltree_node *root;
    cJSON *json;
    struct yamlrender_style st;
};

static void state_free(struct state *s)
{
    yamltree_free(&s->t);
    cJSON_Delete(s->json);
    memset(s, 0, sizeof *s);
}

/* Finds the document's indentation: the first nested block mapping under
 * a key (step) and the first block sequence under a key (seqoff). */
static void find_indent(const struct yamltree_node *n, long *step, long *seqoff)
{
    if (n->kind != YAMLTREE_MAP && n->kind != YAMLTREE_SEQ) return;
    if (n->flow) return;
    if (n->kind == YAMLTREE_MAP) {
        for (size_t i = 0; i + 1 < n->n; i += 2) {
            const struct yamltree_node *k = n->kids[i], *v = n->kids[i + 1];
            if (v->kind == YAMLTREE_MAP && !v->flow && *step < 0 && v->iline > k->line &&
                v->indent > k->col)
                *step = (long)(v->indent - k->col);
            if (v->kind == YAMLTREE_SEQ && !v->flow && *seqoff < 0 && v->iline > k->line &&
                v->indent >= k->col)
                *seqoff = (long)(v->indent - k->col);
        }
    }
    for (size_t i = 0; i < n->n && (*step < 0 || *seqoff < 0); i++)
        find_indent(n->kids[i], step, seqoff);
}

static int state_load(struct state *s, const char *text, size_t len, char *err, size_t errlen)
{
    struct yamltree_error e;
    memset(s, 0, sizeof *s);
    s->text = text;
    s->len = len;
    int rc = yamltree_parse(text, len, &s->t, &e);
    if (rc < 0) return rc == -ENOMEM ? rc : ra_errf(err, errlen, rc, "line %zu: %s", e.line, e.msg);
    if (s->t.ndocs != 1) {
        state_free(s);
        return ra_errf(err, errlen, -EINVAL, "the text holds %zu documents, not one", s->t.ndocs);
    }
    s->root = s->t.docs[0].root;
    if ((rc = yamltree_to_json(s->root, &s->json, &e)) < 0) {
        state_free(s);
        return rc == -ENOMEM ? rc : ra_errf(err, errlen, rc, "line %zu: %s", e.line, e.msg);
    }
    long step = -1, seqoff = -1;
    if (s->root) find_indent(s->root, &step, &seqoff);
    s->st.step = step > 0 ? (size_t)step : 2;
    s->st.seqoff = seqoff >= 0 ? (size_t)seqoff : s->st.step;
    const char *nl = memchr(text, '\n', len);
    s->st.nl = nl && nl > text && nl[-1] == '\r' ? "\r\n" : "\n";
    return 0;
}

/* One edit: bytes [start, end) become repl. */
struct edit {
    size_t start, end;
    struct buf repl;
};

static size_t line_end(const struct state *s, size_t pos)
{
    while (pos < s->len && s->text[pos] != '\n') pos++;
    if (pos < s->len && pos > 0 && s->text[pos - 1] == '\r') pos--;
    return pos;
}

static int replace_node(const struct state *s, const struct yamltree_node *x, const cJSON *v,
                        struct edit *ed, char *err, size_t errlen)
{
    const struct yamltree_node *p = x->parent;
    ed->end = yamltree_content_end(x, s->text);
    if (p && p->flow) {
        /* inside a flow collection: the new value as one line of JSON */
        ed->start = x->start;
        if (ed->end < ed->start) ed->end = ed->start;
        yamlrender_json(&ed->repl, v, 0);
    } else if (p && p->kind == YAMLTREE_MAP) {
        /* the value of key k: from just after the ':' */
        const struct yamltree_node *k = NULL;
        for (size_t i = 1; i < p->n; i += 2)
            if (p->kids[i] == x) k = p->kids[i - 1];
        if (!k) return ra_errf(err, errlen, -EINVAL, "internal error: a key node is missing");
        size_t c = yamltree_content_end(k, s->text);
        while (c < s->len && strchr(" \t\r\n", s->text[c])) c++;
        if (c >= s->len || s->text[c] != ':')
            return ra_errf(err, errlen, -EINVAL,
                           "line %zu: cannot find the ':' after a key (complex keys are not "
                           "supported)",
                           k->line + 1);
        ed->start = c + 1;
        if (ed->end < ed->start) ed->end = ed->start;
        yamlrender_after_key(&ed->repl, v, k->col, &s->st);
    } else {
        ed->start = x->start;
        yamlrender_inline(&ed->repl, v, x->col, &s->st);
    }
    return 0;
}

static void add_key(const struct state *s, const struct yamltree_node *m, const char *key,
                    const cJSON *v, struct edit *ed)
{
    ed->start = ed->end = line_end(s, yamltree_content_end(m, s->text));
    buf_puts(&ed->repl, s->st.nl);
    yamlrender_spaces(&ed->repl, m->indent);
    yamlrender_key(&ed->repl, key);
    buf_add(&ed->repl, ":", 1);
    yamlrender_after_key(&ed->repl, v, m->indent, &s->st);
}

static void append_item(const struct state *s, const struct yamltree_node *q, const cJSON *v,
                        struct edit *ed)
{
    ed->start = ed->end = line_end(s, yamltree_content_end(q, s->text));
    buf_puts(&ed->repl, s->st.nl);
    yamlrender_spaces(&ed->repl, q->indent);
    buf_add(&ed->repl, "- ", 2);
    yamlrender_inline(&ed->repl, v, q->indent + 2, &s->st);
}

/* A flow collection that holds a comment keeps its layout (entries are
 * added in flow style); one without is replaced by its block rendering. */
static int keep_flow(const struct state *s, const struct yamltree_node *n)
{
    if (n->parent && n->parent->flow) return 1;
    return memchr(s->text + n->start, '#', n->end - n->start) != NULL;
}

/* Adds an entry (key: value, or an item) at the end of a flow collection,
 * or before item idx of a flow sequence. */
static void flow_add(const struct state *s, const struct yamltree_node *c, const char *key,
                     size_t idx, const cJSON *v, struct edit *ed)
{
    if (c->kind == YAMLTREE_SEQ && idx < c->n) {
        ed->start = ed->end = c->kids[idx]->start;
        yamlrender_json(&ed->repl, v, 0);
        buf_puts(&ed->repl, ", ");
        return;
    }
    if (c->n > 0) {
        ed->start = yamltree_content_end(c->kids[c->n - 1], s->text);
        buf_puts(&ed->repl, ", ");
    } else {
        size_t p = c->start;
        while (p < c->end && s->text[p] != '{' && s->text[p] != '[') p++;
        ed->start = p + 1;
    }
    ed->end = ed->start;
    if (key) {
        yamlrender_json_string(&ed->repl, key);
        buf_puts(&ed->repl, ": ");
    }
    yamlrender_json(&ed->repl, v, 0);
}

/* Inserts before item idx when its "- " starts its line; returns 0, or 1
 * when the layout does not allow it. */
static int insert_item(const struct state *s, const struct yamltree_node *q, size_t idx,
                       const cJSON *v, struct edit *ed)
{
    size_t p = q->kids[idx]->start;
    while (p > 0 && s->text[p - 1] == ' ') p--;
    if (p == 0 || s->text[p - 1] != '-') return 1;
    p--;
    size_t ls = p;
    while (ls > 0 && s->text[ls - 1] == ' ') ls--;
    if (ls > 0 && s->text[ls - 1] != '\n') return 1;
    if (p - ls != q->indent) return 1;
    ed->start = ed->end = ls;
    yamlrender_spaces(&ed->repl, q->indent);
    buf_add(&ed->repl, "- ", 2);
    yamlrender_inline(&ed->repl, v, q->indent + 2, &s->st);
    buf_puts(&ed->repl, s->st.nl);
    return 0;
}

/* Plans the edit of an operation whose last token is item idx of the
 * sequence seq (at path[0..here) of the operation's path, an add or a
 * replace): an add appends
 * or inserts the value, a replace replaces the item; an insert the layout
 * does not allow re-renders the whole sequence from after. */
static int plan_item(const struct state *s, struct yamltree_node *seq, size_t idx, const cJSON *op,
                     const char *path, size_t here, const cJSON *after, struct edit *ed, char *err,
                     size_t errlen)
{
    const cJSON *jop = cJSON_GetObjectItemCaseSensitive(op, "op");
    int is_add = cJSON_IsString(jop) && strcmp(jop->valuestring, "add") == 0;
    const cJSON *nv = cJSON_GetObjectItemCaseSensitive(op, "value");
    if (!nv) return ra_errf(err, errlen, -EINVAL, "operation %s has no value", path);
    if (is_add && seq->flow && idx <= seq->n) {
        flow_add(s, seq, NULL, idx, nv, ed);
        return 0;
    }
    if (is_add && idx == seq->n) {
        append_item(s, seq, nv, ed);
        return 0;
    }
    if (idx >= seq->n)
        return ra_errf(err, errlen, -EINVAL, "internal error: index out of range in %s", path);
    if (is_add && insert_item(s, seq, idx, nv, ed) == 0) return 0;
    if (!is_add) return replace_node(s, seq->kids[idx], nv, ed, err, errlen);
    const cJSON *sv = jsonpointer_get(after, path, here);
    if (!sv) return ra_errf(err, errlen, -EINVAL, "internal error: %s", path);
    return replace_node(s, seq, sv, ed, err, errlen);
}

/* Plans the edit for one operation on state s, given the patched document
 * after it. */
static int plan(const struct state *s, const cJSON *op, const cJSON *after, struct edit *ed,
                char *err, size_t errlen)
{
    const cJSON *jop = cJSON_GetObjectItemCaseSensitive(op, "op");
    const cJSON *jpath = cJSON_GetObjectItemCaseSensitive(op, "path");
    const char *name = cJSON_IsString(jop) ? jop->valuestring : "";
    const char *path = cJSON_IsString(jpath) ? jpath->valuestring : "";
    int is_add = strcmp(name, "add") == 0;
    struct yamltree_node *cur = s->root;
    char tok[JSONPOINTER_TOKEN_MAX + 1];
    size_t i = 0, plen = strlen(path);

    if (!cur || (!is_add && strcmp(name, "replace") != 0) || !*path) {
        /* re-render the whole root */
        if (!cur) return ra_errf(err, errlen, -EINVAL, "the document is empty");
        return replace_node(s, cur, after, ed, err, errlen);
    }
    while (path[i] == '/') {
        size_t here = i; /* pointer of cur = path[0..here) */
        i++;
        long tl = jsonpointer_token(path, plen, &i, tok, sizeof tok);
        if (tl < 0)
            return ra_errf(err, errlen, -EINVAL, "a token of %.200s is longer than %zu bytes", path,
                           sizeof tok - 1);
        size_t len = (size_t)tl;
        int last = path[i] == '\0';
        if (cur->kind == YAMLTREE_ALIAS || cur->kind == YAMLTREE_SCALAR ||
            (cur->flow && !keep_flow(s, cur))) {
            const cJSON *v = jsonpointer_get(after, path, here);
            if (!v)
                return ra_errf(err, errlen, -EINVAL, "internal error: %.*s not found", (int)here,
                               path);
            return replace_node(s, cur, v, ed, err, errlen);
        }
        const cJSON *v = jsonpointer_get(after, path, last ? plen : i);
        if (cur->kind == YAMLTREE_MAP) {
            struct yamltree_node *val = yamltree_map_get(cur, tok, len, NULL);
            if (!val || last) {
                if (!v) return ra_errf(err, errlen, -EINVAL, "internal error: %s not found", path);
                if (val) return replace_node(s, val, v, ed, err, errlen);
                if (cur->flow)
                    flow_add(s, cur, tok, 0, v, ed);
                else
                    add_key(s, cur, tok, v, ed);
                return 0;
            }
            cur = val;
            continue;
        }
        /* a sequence */
        size_t idx = cur->n;
        if (strcmp(tok, "-") != 0) {
            char *end;
            idx = strtoul(tok, &end, 10);
            if (*end || len == 0)
                return ra_errf(err, errlen, -EINVAL, "internal error: bad index in %s", path);
        }
        if (last) return plan_item(s, cur, idx, op, path, here, after, ed, err, errlen);
        if (idx >= cur->n)
            return ra_errf(err, errlen, -EINVAL, "internal error: index out of range in %s", path);
        cur = cur->kids[idx];
    }
    return ra_errf(err, errlen, -EINVAL, "bad path \"%s\"", path);
}

static int apply_one(const char *text, size_t len, const cJSON *op, char **out, size_t *outlen,
                     char *err, size_t errlen)
{
    struct state s;
    struct edit ed;
    cJSON *after = NULL, *ops1 = NULL;
    char perr[256];
    int rc = state_load(&s, text, len, err, errlen);
    if (rc < 0) return rc;
    memset(&ed, 0, sizeof ed);
    if (!(after = cJSON_Duplicate(s.json, 1)) || !(ops1 = cJSON_CreateArray())) {
        rc = -ENOMEM;
        goto out;
    }
    cJSON *opc = cJSON_Duplicate(op, 1);
    if (!opc || !cJSON_AddItemToArray(ops1, opc)) {
        cJSON_Delete(opc);
        rc = -ENOMEM;
        goto out;
    }
    if ((rc = jsonpatch_apply(&after, ops1, perr, sizeof perr)) < 0) {
        if (rc != -ENOMEM) ra_errf(err, errlen, rc, "%s", perr);
        goto out;
    }
    if ((rc = plan(&s, op, after, &ed, err, errlen)) < 0) goto out;
    if (ed.repl.oom) {
        rc = -ENOMEM;
        goto out;
    }
    size_t n = ed.start + ed.repl.len + (len - ed.end);
    char *o = malloc(n + 1);
    if (!o) {
        rc = -ENOMEM;
        goto out;
    }
    memcpy(o, text, ed.start);
    if (ed.repl.len) memcpy(o + ed.start, ed.repl.p, ed.repl.len);
    memcpy(o + ed.start + ed.repl.len, text + ed.end, len - ed.end);
    o[n] = '\0';
    *out = o;
    *outlen = n;
out:
    buf_free(&ed.repl);
    cJSON_Delete(after);
    cJSON_Delete(ops1);
    state_free(&s);
    return rc;
}

int yamlsplice_apply(const char *text, size_t len, const cJSON *ops, char **out, size_t *outlen,
                     char *err, size_t errlen)
{
    struct state s0, s1;
    cJSON *want = NULL;
    char *cur = NULL, perr[256];
    size_t curlen = len;
    int rc;

    *out = NULL;
    *outlen = 0;
    if (!cJSON_IsArray(ops))
        return ra_errf(err, errlen, -EINVAL, "the operations are not an array");
    if ((rc = state_load(&s0, text, len, err, errlen)) < 0) return rc;
    want = s0.json;
    s0.json = NULL;
    state_free(&s0);
    if ((rc = jsonpatch_apply(&want, ops, perr, sizeof perr)) < 0) {
        if (rc != -ENOMEM) ra_errf(err, errlen, rc, "%s", perr);
        goto fail;
    }
    if (!(cur = malloc(len + 1))) {
        rc = -ENOMEM;
        goto fail;
    }
    memcpy(cur, text, len);
    cur[len] = '\0';
    /* a block scalar at the very end, with no line break after it, would
     * take the break before an appended key into its value */
    char *safe = NULL;
    size_t safelen = 0;
    if ((rc = yamljoin_safe_end(cur, curlen, &safe, &safelen)) < 0) goto fail;
    if (rc == 1) {
        free(cur);
        cur = safe;
        curlen = safelen;
    }
    int k = 0;
    for (const cJSON *op = ops->child; op; op = op->next, k++) {
        char *next = NULL;
        size_t nlen = 0;
        char oerr[300];
        if ((rc = apply_one(cur, curlen, op, &next, &nlen, oerr, sizeof oerr)) < 0) {
            if (rc != -ENOMEM) ra_errf(err, errlen, rc, "operation %d: %s", k, oerr);
            goto fail;
        }
        free(cur);
        cur = next;
        curlen = nlen;
    }
    if ((rc = state_load(&s1, cur, curlen, perr, sizeof perr)) < 0) {
        if (rc != -ENOMEM)
            ra_errf(err, errlen, rc, "internal error: the spliced YAML does not parse: %s", perr);
        goto fail;
    }
    int same = cJSON_Compare(s1.json, want, 1);
    state_free(&s1);
    if (!same) {
        rc = ra_errf(err, errlen, -EINVAL,
                     "internal error: the spliced YAML does not read back as the patched object "
                     "(nothing written; please report this with the input)");
        goto fail;
    }
    cJSON_Delete(want);
    *out = cur;
    *outlen = curlen;
    return 0;
fail:
    cJSON_Delete(want);
    free(cur);
    return rc;
}
