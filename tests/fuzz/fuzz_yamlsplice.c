/*
 * fuzz_yamlsplice.c - libFuzzer target for the YAML reader and splicer of
 * `reload-agent inject` (yamldoc/tree.c, yamldoc/splice.c,
 * yamldoc/render.c). For any bytes: yamltree_parse returns 0 or -EINVAL
 * with a message and a line; document byte ranges are in order and inside
 * the input. For each document that converts to a JSON object, operations
 * like the transform's (a key added to the root, a key added to the first
 * nested mapping, an item appended to the first sequence, a scalar
 * replaced) are spliced into the document's text: the result is 0 or
 * -EINVAL with a message, and on 0 the text parses back to exactly one
 * document equal to jsonpatch_apply of the operations (checked here again,
 * independently of the splicer's own check), and splicing is
 * deterministic. Each such document is also written out again in block
 * style with an anchor, a tag (!!map, !!seq) or both, and a comment, on
 * every nested collection (issue 16.1: the splicer must add keys and items
 * to them at their entries' column, not the anchor's), and spliced the
 * same way.
 */
#include "yamldoc/jsonpatch.h"
#include "yamldoc/render.h"
#include "yamldoc/splice.h"
#include "yamldoc/tree.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

/* The pointer (in buf) of the first nested object (want_array 0) or array
 * (1) below v, depth-first, at most 4 levels; 0 when there is none. */
static int find(const cJSON *v, int want_array, char *buf, size_t len, int depth)
{
    if (depth > 4) return 0;
    int i = 0;
    for (const cJSON *it = v->child; it; it = it->next, i++) {
        size_t n = strlen(buf);
        if (cJSON_IsObject(v)) {
            char *esc = jsonpointer_escape(it->string);
            if (!esc) return 0;
            snprintf(buf + n, len - n, "/%s", esc);
            free(esc);
        } else {
            snprintf(buf + n, len - n, "/%d", i);
        }
        if ((want_array ? cJSON_IsArray(it) : cJSON_IsObject(it))) return 1;
        if ((cJSON_IsArray(it) || cJSON_IsObject(it)) && find(it, want_array, buf, len, depth + 1))
            return 1;
        buf[n] = '\0';
    }
    return 0;
}

static void add_op(cJSON *ops, const char *op, const char *path, const char *value_json)
{
    cJSON *o = cJSON_CreateObject();
    CHECK(o);
    cJSON_AddStringToObject(o, "op", op);
    cJSON_AddStringToObject(o, "path", path);
    cJSON_AddItemToObject(o, "value", cJSON_Parse(value_json));
    cJSON_AddItemToArray(ops, o);
}

static void splice_doc(const char *text, size_t len, const cJSON *doc)
{
    char p[512] = "", q[512] = "", path[600], err[512];
    cJSON *ops = cJSON_CreateArray();
    CHECK(ops);
    add_op(ops, "add", "/zz-added", "{\"name\":\"reload-agent\",\"args\":[\"run\",\"--x=1\"]}");
    if (find(doc, 0, p, sizeof p, 0)) {
        snprintf(path, sizeof path, "%s/reload-agent.io~1inject-status", p);
        add_op(ops, "add", path, "\"{\\\"v\\\":1}\"");
    }
    if (find(doc, 1, q, sizeof q, 0)) {
        snprintf(path, sizeof path, "%s/-", q);
        add_op(ops, "add", path, "{\"name\":\"m\",\"readOnly\":true,\"n\":[]}");
    }
    add_op(ops, "replace", "/zz-added/name", "\"yes\"");

    char *out = NULL, *out2 = NULL;
    size_t outlen = 0, outlen2 = 0;
    err[0] = '\0';
    int rc = yamlsplice_apply(text, len, ops, &out, &outlen, err, sizeof err);
    CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
    if (rc == -EINVAL) CHECK(err[0] != '\0' && strlen(err) < sizeof err);
    if (rc == 0) {
        /* an independent check: parse the output, apply the ops ourselves */
        struct yamltree t;
        struct yamltree_error e;
        cJSON *got = NULL, *want = cJSON_Duplicate(doc, 1);
        char perr[256];
        CHECK(strlen(out) == outlen);
        CHECK(yamltree_parse(out, outlen, &t, &e) == 0);
        CHECK(t.ndocs == 1);
        CHECK(yamltree_to_json(t.docs[0].root, &got, &e) == 0);
        CHECK(want && jsonpatch_apply(&want, ops, perr, sizeof perr) == 0);
        CHECK(cJSON_Compare(got, want, 1));
        cJSON_Delete(got);
        cJSON_Delete(want);
        yamltree_free(&t);
        /* deterministic */
        CHECK(yamlsplice_apply(text, len, ops, &out2, &outlen2, err, sizeof err) == 0);
        CHECK(outlen2 == outlen && memcmp(out, out2, outlen) == 0);
        free(out2);
    }
    free(out);
    cJSON_Delete(ops);
}

/* Writes v at column col (the cursor there) as block YAML; props: bit 0
 * an anchor, bit 1 a tag, bit 2 a comment on each nested collection. */
static void emit(struct buf *b, const cJSON *v, size_t col, int props, int *anchors);

static void emit_props(struct buf *b, const cJSON *v, int props, int *anchors)
{
    char a[32];
    if (props & 1) {
        snprintf(a, sizeof a, " &a%d", (*anchors)++);
        buf_puts(b, a);
    }
    if (props & 2) buf_puts(b, cJSON_IsObject(v) ? " !!map" : " !!seq");
    if (props & 4) buf_puts(b, " # c");
}

static int nested(const cJSON *v) { return (cJSON_IsObject(v) || cJSON_IsArray(v)) && v->child; }

static void emit(struct buf *b, const cJSON *v, size_t col, int props, int *anchors)
{
    if (!nested(v)) {
        if (cJSON_IsString(v))
            yamlrender_json_string(b, v->valuestring);
        else
            yamlrender_json(b, v, 0);
        return;
    }
    for (const cJSON *it = v->child; it; it = it->next) {
        if (it != v->child) yamlrender_spaces(b, col);
        if (cJSON_IsObject(v)) {
            yamlrender_json_string(b, it->string);
            buf_add(b, ":", 1);
        } else {
            buf_add(b, "-", 1);
        }
        if (nested(it)) {
            emit_props(b, it, props, anchors);
            buf_add(b, "\n", 1);
            yamlrender_spaces(b, col + 2);
            emit(b, it, col + 2, props, anchors);
        } else {
            buf_add(b, " ", 1);
            emit(b, it, col, props, anchors);
            buf_add(b, "\n", 1);
        }
    }
}

/* doc written with props on its nested collections, then spliced. */
static void splice_decorated(const cJSON *doc, int props)
{
    struct buf b = {0};
    int anchors = 0;
    emit(&b, doc, 0, props, &anchors);
    if (b.oom || !b.p) {
        buf_free(&b);
        return;
    }
    /* it reads back as doc (else the emitter is wrong, not the splicer) */
    struct yamltree t;
    struct yamltree_error e;
    cJSON *back = NULL;
    CHECK(yamltree_parse(b.p, b.len, &t, &e) == 0 && t.ndocs == 1);
    CHECK(yamltree_to_json(t.docs[0].root, &back, &e) == 0 && cJSON_Compare(back, doc, 1));
    cJSON_Delete(back);
    yamltree_free(&t);
    splice_doc(b.p, b.len, doc);
    buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct yamltree t;
    struct yamltree_error e;
    if (size > 16384) return 0;
    int rc = yamltree_parse((const char *)data, size, &t, &e);
    CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
    if (rc == -EINVAL) CHECK(e.msg[0] != '\0' && e.doc >= 1);
    if (rc != 0) return 0;
    size_t prev = 0;
    for (size_t i = 0; i < t.ndocs; i++) {
        CHECK(t.docs[i].start == prev && t.docs[i].start <= t.docs[i].end && t.docs[i].end <= size);
        prev = t.docs[i].end;
    }
    CHECK(t.tail == prev && t.tail <= size);
    for (size_t i = 0; i < t.ndocs && i < 4; i++) {
        cJSON *j = NULL;
        struct yamltree_error ce;
        memset(&ce, 0, sizeof ce);
        rc = yamltree_to_json(t.docs[i].root, &j, &ce);
        CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
        if (rc == -EINVAL) CHECK(ce.msg[0] != '\0');
        if (rc == 0 && cJSON_IsObject(j)) {
            splice_doc((const char *)data + t.docs[i].start, t.docs[i].end - t.docs[i].start, j);
            splice_decorated(j, 1 + (int)(size % 7));
        }
        cJSON_Delete(j);
    }
    yamltree_free(&t);
    return 0;
}
