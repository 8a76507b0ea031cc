/*
 * test_yamlsplice.c - the YAML text splicer of `reload-agent inject`
 * (yamldoc/splice.c, over yamldoc/tree.c and yamldoc/render.c):
 * each case applies JSON Patch operations to a YAML document and compares
 * the exact output text, on tricky layouts: keys added to nested and root
 * mappings, items appended to indented and unindented ("- name" at the
 * key's column) sequences, flow collections replaced by block ones, CRLF
 * line endings, comments between items, no trailing newline, multi-byte
 * characters before the edit (libyaml counts characters, not bytes), tabs
 * (an error), anchors and merge keys, a null value, block scalars, escaped
 * pointer tokens, inserts, replaces and a remove. The splicer's own check
 * (re-parse, compare with jsonpatch_apply) is exercised by a case it must
 * refuse: appending to an anchored sequence an alias also reads.
 * Also the scalar resolution of yamldoc/tree.c (Kubernetes' rules).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "yamldoc/join.h"
#include "yamldoc/render.h"
#include "yamldoc/splice.h"
#include "yamldoc/tree.h"

/* Splices ops (JSON text) into in; returns the output (malloc'd) or NULL
 * with the error in err. */
static char *splice(const char *in, const char *ops_json, int *rc, char *err, size_t errlen)
{
    cJSON *ops = cJSON_Parse(ops_json);
    char *out = NULL;
    size_t outlen = 0;
    assert_non_null(ops);
    err[0] = '\0';
    *rc = yamlsplice_apply(in, strlen(in), ops, &out, &outlen, err, errlen);
    cJSON_Delete(ops);
    if (*rc == 0) {
        assert_non_null(out);
        assert_int_equal(strlen(out), outlen);
    }
    return out;
}

static void expect(const char *in, const char *ops, const char *want)
{
    char err[512];
    int rc;
    char *out = splice(in, ops, &rc, err, sizeof err);
    if (rc != 0) fail_msg("splice failed: %s", err);
    if (strcmp(out, want) != 0) fail_msg("got:\n%s\n--- want:\n%s", out, want);
    free(out);
}

static void expect_error(const char *in, const char *ops, const char *needle)
{
    char err[512];
    int rc;
    char *out = splice(in, ops, &rc, err, sizeof err);
    assert_null(out);
    assert_int_equal(rc, -EINVAL);
    if (!strstr(err, needle)) fail_msg("error \"%s\" lacks \"%s\"", err, needle);
}

static void add_key_to_nested_map(void **state)
{
    (void)state;
    expect("metadata:\n"
           "  name: web  # the name\n"
           "spec:\n"
           "  replicas: 1\n",
           "[{\"op\":\"add\",\"path\":\"/metadata/annotations\","
           "\"value\":{\"a/b\":\"x y\",\"k\":\"1\",\"n\":\"no\",\"cpu\":\"5m\","
           "\"mem\":\"1.5Gi\",\"h\":\"0xFA\",\"e\":\"1e3\",\"t\":\"12:30\",\"d\":\"2024-01-02\"}}]",
           "metadata:\n"
           "  name: web  # the name\n"
           "  annotations:\n"
           "    a/b: 'x y'\n"
           "    k: '1'\n"
           "    'n': 'no'\n"
           "    cpu: 5m\n"
           "    mem: 1.5Gi\n"
           "    h: '0xFA'\n"
           "    e: '1e3'\n"
           "    t: '12:30'\n"
           "    d: '2024-01-02'\n"
           "spec:\n"
           "  replicas: 1\n");
}

static void add_key_to_root_and_four_space_indent(void **state)
{
    (void)state;
    expect("spec:\n"
           "    containers:\n"
           "        - name: app\n",
           "[{\"op\":\"add\",\"path\":\"/spec/volumes\",\"value\":[{\"name\":\"v\","
           "\"configMap\":{\"name\":\"c\"}}]},"
           "{\"op\":\"add\",\"path\":\"/status\",\"value\":{}}]",
           "spec:\n"
           "    containers:\n"
           "        - name: app\n"
           "    volumes:\n"
           "        - name: v\n"
           "          configMap:\n"
           "              name: c\n"
           "status: {}\n");
}

static void append_to_indented_sequence_with_comments(void **state)
{
    (void)state;
    expect(
        "volumes:\n"
        "  - name: a   # first\n"
        "    emptyDir: {}\n"
        "  # between the items\n"
        "\n"
        "  - name: b\n"
        "    emptyDir: {}\n"
        "# after the list\n"
        "other: 1\n",
        "[{\"op\":\"add\",\"path\":\"/volumes/-\",\"value\":{\"name\":\"c\",\"x\":[\"p\",\"q\"]}}]",
        "volumes:\n"
        "  - name: a   # first\n"
        "    emptyDir: {}\n"
        "  # between the items\n"
        "\n"
        "  - name: b\n"
        "    emptyDir: {}\n"
        "  - name: c\n"
        "    x:\n"
        "      - p\n"
        "      - q\n"
        "# after the list\n"
        "other: 1\n");
}

static void append_to_unindented_sequence(void **state)
{
    (void)state;
    /* kubectl's layout: "- name" at the column of its key */
    expect("spec:\n"
           "  containers:\n"
           "  - name: app\n"
           "    args:\n"
           "    - a\n"
           "  volumes:\n"
           "  - name: v\n",
           "[{\"op\":\"add\",\"path\":\"/spec/containers/-\","
           "\"value\":{\"name\":\"side\",\"args\":[\"run\"]}},"
           "{\"op\":\"add\",\"path\":\"/spec/initContainers\",\"value\":[{\"name\":\"i\"}]}]",
           "spec:\n"
           "  containers:\n"
           "  - name: app\n"
           "    args:\n"
           "    - a\n"
           "  - name: side\n"
           "    args:\n"
           "    - run\n"
           "  volumes:\n"
           "  - name: v\n"
           "  initContainers:\n"
           "  - name: i\n");
}

static void flow_collections_become_block(void **state)
{
    (void)state;
    expect("metadata:\n"
           "  annotations: {a: b}   # keep me\n"
           "spec:\n"
           "  initContainers: []\n"
           "  volumes: [{name: x, emptyDir: {}}]\n",
           "[{\"op\":\"add\",\"path\":\"/metadata/annotations/c\",\"value\":\"d\"},"
           "{\"op\":\"add\",\"path\":\"/spec/initContainers/-\",\"value\":{\"name\":\"s\"}},"
           "{\"op\":\"add\",\"path\":\"/spec/volumes/0/emptyDir/medium\",\"value\":\"Memory\"}]",
           "metadata:\n"
           "  annotations:\n"
           "    a: b\n"
           "    c: d   # keep me\n"
           "spec:\n"
           "  initContainers:\n"
           "    - name: s\n"
           "  volumes:\n"
           "    - name: x\n"
           "      emptyDir:\n"
           "        medium: Memory\n");
}

static void flow_with_comments_keeps_its_layout(void **state)
{
    (void)state;
    /* kubernetes/website writes some examples as commented flow YAML */
    expect("---\n"
           "{\n"
           "  kind: \"Pod\",\n"
           "  spec: {\n"
           "    volumes: [\n"
           "      # a comment\n"
           "      { name: \"a\" },\n"
           "    ],\n"
           "    containers: [], # none yet\n"
           "  },\n"
           "}\n",
           "[{\"op\":\"add\",\"path\":\"/spec/volumes/-\",\"value\":{\"name\":\"b\"}},"
           "{\"op\":\"add\",\"path\":\"/spec/containers/-\",\"value\":\"c\"},"
           "{\"op\":\"add\",\"path\":\"/spec/x\",\"value\":{\"y\":[1,\"z\"]}},"
           "{\"op\":\"add\",\"path\":\"/metadata\",\"value\":{}},"
           "{\"op\":\"add\",\"path\":\"/spec/volumes/0\",\"value\":true}]",
           "---\n"
           "{\n"
           "  kind: \"Pod\",\n"
           "  spec: {\n"
           "    volumes: [\n"
           "      # a comment\n"
           "      true, { name: \"a\" }, {\"name\": \"b\"},\n"
           "    ],\n"
           "    containers: [\"c\"], \"x\": {\"y\": [1, \"z\"]}, # none yet\n"
           "  }, \"metadata\": {},\n"
           "}\n");
}

static void crlf_line_endings(void **state)
{
    (void)state;
    expect("# c\r\n"
           "spec:\r\n"
           "  containers:\r\n"
           "  - name: app\r\n",
           "[{\"op\":\"add\",\"path\":\"/spec/containers/-\",\"value\":{\"name\":\"b\",\"k\":1}},"
           "{\"op\":\"add\",\"path\":\"/spec/x\",\"value\":true}]",
           "# c\r\n"
           "spec:\r\n"
           "  containers:\r\n"
           "  - name: app\r\n"
           "  - name: b\r\n"
           "    k: 1\r\n"
           "  x: true\r\n");
}

static void no_trailing_newline(void **state)
{
    (void)state;
    expect("a:\n  b: 1", "[{\"op\":\"add\",\"path\":\"/a/c\",\"value\":[\"x\"]}]",
           "a:\n  b: 1\n  c:\n    - x");
    expect("a:\n- 1", "[{\"op\":\"add\",\"path\":\"/a/-\",\"value\":2}]", "a:\n- 1\n- 2");
}

static void multibyte_before_the_edit(void **state)
{
    (void)state;
    /* libyaml's marks count characters: "é" and "€" are 2 and 3 bytes */
    expect("# héllo €\n"
           "a:\n"
           "  b: ünïcode   # ¡\n"
           "c: d\n",
           "[{\"op\":\"add\",\"path\":\"/a/e\",\"value\":\"ß\"}]",
           "# héllo €\n"
           "a:\n"
           "  b: ünïcode   # ¡\n"
           "  e: 'ß'\n"
           "c: d\n");
}

static void byte_order_mark(void **state)
{
    (void)state;
    /* libyaml skips the BOM: offsets start after it (and it stays) */
    expect("\xEF\xBB\xBF# é\na:\n  b: 1\n", "[{\"op\":\"add\",\"path\":\"/a/c\",\"value\":2}]",
           "\xEF\xBB\xBF# é\na:\n  b: 1\n  c: 2\n");
}

static void tabs_are_an_error(void **state)
{
    (void)state;
    expect_error("a:\n\tb: 1\n", "[{\"op\":\"add\",\"path\":\"/c\",\"value\":1}]", "line 2");
}

static void anchors_and_merge_keys(void **state)
{
    (void)state;
    /* the alias's node is replaced by its new value; the anchor stays */
    expect("base: &b\n"
           "  x: 1\n"
           "spec: *b\n",
           "[{\"op\":\"add\",\"path\":\"/spec/z\",\"value\":2}]",
           "base: &b\n"
           "  x: 1\n"
           "spec:\n"
           "  x: 1\n"
           "  z: 2\n");
    /* a key that only a merge provides gets an explicit entry, which wins */
    expect("defaults: &d\n"
           "  labels:\n"
           "    a: b\n"
           "meta:\n"
           "  <<: *d\n"
           "  name: n\n",
           "[{\"op\":\"add\",\"path\":\"/meta/labels/c\",\"value\":\"d\"}]",
           "defaults: &d\n"
           "  labels:\n"
           "    a: b\n"
           "meta:\n"
           "  <<: *d\n"
           "  name: n\n"
           "  labels:\n"
           "    a: b\n"
           "    c: d\n");
}

/* Issue 16.1: an anchor or a tag on the mapping or sequence that gets a key
 * or an item (no alias anywhere): the new entry takes the column of the
 * collection's first entry, not the anchor's. */
static void anchors_and_tags_on_appended_nodes(void **state)
{
    (void)state;
    expect("meta:\n"
           "  annotations: &ann\n"
           "    a: b\n",
           "[{\"op\":\"add\",\"path\":\"/meta/annotations/c\",\"value\":\"d\"}]",
           "meta:\n"
           "  annotations: &ann\n"
           "    a: b\n"
           "    c: d\n");
    expect("meta:\n"
           "  annotations: !!map\n"
           "    a: b\n",
           "[{\"op\":\"add\",\"path\":\"/meta/annotations/c\",\"value\":\"d\"}]",
           "meta:\n"
           "  annotations: !!map\n"
           "    a: b\n"
           "    c: d\n");
    /* an indentless sequence, an anchor and a comment before its first item */
    expect("spec:\n"
           "  volumes: &vols # the volumes\n"
           "  - name: a\n",
           "[{\"op\":\"add\",\"path\":\"/spec/volumes/-\",\"value\":{\"name\":\"b\"}}]",
           "spec:\n"
           "  volumes: &vols # the volumes\n"
           "  - name: a\n"
           "  - name: b\n");
    expect("spec:\n"
           "  volumes: !!seq\n"
           "    - name: a\n",
           "[{\"op\":\"add\",\"path\":\"/spec/volumes/0\",\"value\":{\"name\":\"b\"}}]",
           "spec:\n"
           "  volumes: !!seq\n"
           "    - name: b\n"
           "    - name: a\n");
    /* a key added to an anchored pod spec, with a nested block */
    expect("template:\n"
           "  spec: &ps\n"
           "    containers:\n"
           "    - name: app\n",
           "[{\"op\":\"add\",\"path\":\"/template/spec/initContainers\","
           "\"value\":[{\"name\":\"x\",\"args\":[\"run\"]}]}]",
           "template:\n"
           "  spec: &ps\n"
           "    containers:\n"
           "    - name: app\n"
           "    initContainers:\n"
           "    - name: x\n"
           "      args:\n"
           "      - run\n");
    /* the root, anchored and tagged */
    expect("--- !!map &root\n"
           "a: 1\n",
           "[{\"op\":\"add\",\"path\":\"/b\",\"value\":2}]",
           "--- !!map &root\n"
           "a: 1\n"
           "b: 2\n");
}

static void anchored_sequence_is_refused(void **state)
{
    (void)state;
    /* splicing into x would change y (an alias of it) too: the check must
     * catch it rather than write a document that reads differently */
    expect_error("x: &v\n"
                 "  - a\n"
                 "y: *v\n",
                 "[{\"op\":\"add\",\"path\":\"/x/-\",\"value\":\"b\"}]", "internal error");
}

static void null_and_empty_values(void **state)
{
    (void)state;
    expect("metadata:\n"
           "  annotations:\n"
           "  name: x\n",
           "[{\"op\":\"add\",\"path\":\"/metadata/annotations\",\"value\":{\"k\":\"v\"}}]",
           "metadata:\n"
           "  annotations:\n"
           "    k: v\n"
           "  name: x\n");
    expect("a: ~ # none\n", "[{\"op\":\"replace\",\"path\":\"/a\",\"value\":[1,2]}]",
           "a:\n  - 1\n  - 2 # none\n");
}

static void block_scalar_last(void **state)
{
    (void)state;
    expect("data:\n"
           "  a.conf: |\n"
           "    line 1\n"
           "    line 2\n"
           "\n"
           "kind: ConfigMap\n",
           "[{\"op\":\"add\",\"path\":\"/data/b\",\"value\":\"two\\nlines\"}]",
           "data:\n"
           "  a.conf: |\n"
           "    line 1\n"
           "    line 2\n"
           "  b: \"two\\nlines\"\n"
           "\n"
           "kind: ConfigMap\n");
}

/* Issue 16.6: a block scalar at the very end of a text without a final
 * line break ("a: |\n  x", its value "x"): a line break after it, from a
 * joined stream's separator or a key the splicer appends, would read as
 * part of its value ("x\n"). yamljoin_safe_end rewrites it to strip
 * chomping, or (keep, last line blank) drops the blank partial line. */
static void block_scalar_at_the_end_without_a_line_break(void **state)
{
    (void)state;
    static const char *const T[][2] = {
        {"a: |\n  x", "a: |-\n  x"},
        {"a: >\n  x\n  y", "a: >-\n  x\n  y"},
        {"a: |2\n   x", "a: |-2\n   x"},
        {"a: |+\n  x", "a: |-\n  x"},
        {"a: !!str &k |2+\n   x", "a: !!str &k |2-\n   x"},
        {"a: |+\n  x\n\n  ", "a: |+\n  x\n\n"},
        {"a: |-\n  x", NULL},      /* a break changes nothing */
        {"a: |\n  x\n\n  ", NULL}, /* clip, blank last line: the same */
        {"a: |\n  x\n", NULL},     /* ends in a break */
        {"a: x", NULL},            /* no block scalar */
        {"a: |\n  x\n# c", NULL},  /* a comment ends it */
        {"- a\n- |\n  x", "- a\n- |-\n  x"},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        char *out = NULL;
        size_t len = 0;
        int rc = yamljoin_safe_end(T[i][0], strlen(T[i][0]), &out, &len);
        if (rc != (T[i][1] ? 1 : 0) || (out && strcmp(out, T[i][1]) != 0))
            fail_msg("%zu \"%s\": rc %d, \"%s\"", i, T[i][0], rc, out ? out : "");
        if (out) assert_int_equal(strlen(out), len);
        free(out);
    }
    /* the splicer: a key appended after it keeps its value */
    expect("metadata:\n"
           "  annotations:\n"
           "    note: |\n"
           "      hello",
           "[{\"op\":\"add\",\"path\":\"/metadata/annotations/k\",\"value\":\"v\"}]",
           "metadata:\n"
           "  annotations:\n"
           "    note: |-\n"
           "      hello\n"
           "    k: v");
}

static void escaped_tokens_replace_insert(void **state)
{
    (void)state;
    expect("metadata:\n"
           "  annotations:\n"
           "    reload-agent.io/inject-status: old   # c\n"
           "list:\n"
           "  - b\n",
           "[{\"op\":\"replace\",\"path\":\"/metadata/annotations/reload-agent.io~1inject-status\","
           "\"value\":\"{\\\"v\\\":1}\"},"
           "{\"op\":\"add\",\"path\":\"/list/0\",\"value\":\"a\"},"
           "{\"op\":\"add\",\"path\":\"/metadata/annotations/t~0x\",\"value\":\"yes\"}]",
           "metadata:\n"
           "  annotations:\n"
           "    reload-agent.io/inject-status: '{\"v\":1}'   # c\n"
           "    't~x': 'yes'\n"
           "list:\n"
           "  - a\n"
           "  - b\n");
}

static void remove_rerenders_the_root(void **state)
{
    (void)state;
    expect("a: 1  # gone with the root\nb: [x]\n", "[{\"op\":\"remove\",\"path\":\"/a\"}]",
           "b:\n  - x\n");
}

static void document_markers_kept(void **state)
{
    (void)state;
    expect("# lead\n%YAML 1.1\n---\na: {}\n...\n",
           "[{\"op\":\"add\",\"path\":\"/a/b\",\"value\":\"c\"}]",
           "# lead\n%YAML 1.1\n---\na:\n  b: c\n...\n");
}

static void bad_ops_are_errors(void **state)
{
    (void)state;
    /* jsonpatch_apply refuses an add under a missing parent */
    expect_error("a: 1\n", "[{\"op\":\"add\",\"path\":\"/x/y\",\"value\":1}]", "operation");
    expect_error("a: 1\n---\nb: 2\n", "[{\"op\":\"add\",\"path\":\"/x\",\"value\":1}]", "not one");
}

/* ---- yamltree: scalar resolution and errors ---- */

static cJSON *to_json(const char *text, struct yamltree_error *e, int *rc)
{
    struct yamltree t;
    cJSON *j = NULL;
    *rc = yamltree_parse(text, strlen(text), &t, e);
    if (*rc < 0) return NULL;
    assert_true(t.ndocs >= 1);
    *rc = yamltree_to_json(t.docs[0].root, &j, e);
    yamltree_free(&t);
    return j;
}

static void scalars_as_kubernetes_reads_them(void **state)
{
    (void)state;
    struct yamltree_error e;
    int rc;
    cJSON *j = to_json("{a: 0644, b: 0o10, c: 0x1F, d: 1_000, e: '12', f: yes, g: on, h: ~,"
                       " i: True, j: 1.5e3, k: .5, l: 2001-12-14, m: \"null\", n: !!str 7,"
                       " o: 089, p: -12, q: +3}",
                       &e, &rc);
    assert_int_equal(rc, 0);
    char *s = cJSON_PrintUnformatted(j);
    assert_string_equal(s, "{\"a\":420,\"b\":8,\"c\":31,\"d\":1000,\"e\":\"12\",\"f\":true,"
                           "\"g\":true,\"h\":null,\"i\":true,\"j\":1500,\"k\":0.5,"
                           "\"l\":\"2001-12-14\",\"m\":\"null\",\"n\":\"7\",\"o\":89,\"p\":-12,"
                           "\"q\":3}");
    free(s);
    cJSON_Delete(j);
    /* YAML 1.1 booleans, as kubectl's sigs.k8s.io/yaml reads them (an
     * annotation "yes" is an error there, a boolean field "on" is true);
     * tests/e2e/test_scalars.py checks the table against the real kubectl. */
    j = to_json(
        "[y, Y, yes, Yes, YES, on, On, ON, n, N, no, No, NO, off, Off, OFF, 'yes', yES, !!bool on]",
        &e, &rc);
    assert_int_equal(rc, 0);
    s = cJSON_PrintUnformatted(j);
    assert_string_equal(s, "[true,true,true,true,true,true,true,true,false,false,false,false,false,"
                           "false,false,false,\"yes\",\"yES\",true]");
    free(s);
    cJSON_Delete(j);
}

static void tree_errors_name_the_line(void **state)
{
    (void)state;
    struct yamltree_error e;
    int rc;
    assert_null(to_json("a: 1\nb: 2\na: 3\n", &e, &rc));
    assert_int_equal(rc, -EINVAL);
    assert_int_equal(e.line, 3);
    assert_non_null(strstr(e.msg, "duplicate key \"a\""));
    assert_null(to_json("a: *nope\n", &e, &rc));
    assert_int_equal(e.line, 1);
    assert_non_null(strstr(e.msg, "undefined alias"));
    assert_null(to_json("a: !custom x\n", &e, &rc));
    assert_non_null(strstr(e.msg, "unsupported tag"));
    assert_null(to_json("x: 1\ny: .inf\n", &e, &rc));
    assert_int_equal(e.line, 2);
    assert_null(to_json("a: [1, 2\nb: 3\n", &e, &rc));
    assert_int_equal(rc, -EINVAL);
    assert_true(e.line >= 2);
    /* a billion laughs stops at the expansion limit */
    assert_null(to_json("a: &a [x,x,x,x,x,x,x,x,x,x]\n"
                        "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
                        "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
                        "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
                        "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
                        "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
                        "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]\n",
                        &e, &rc));
    assert_non_null(strstr(e.msg, "aliases expand"));
}

/* Expects yamltree_parse of text to fail at document doc, line line, with
 * needle in the message. */
static void expect_parse_error(const char *text, size_t len, size_t doc, size_t line,
                               const char *needle)
{
    struct yamltree t;
    struct yamltree_error e;
    assert_int_equal(yamltree_parse(text, len, &t, &e), -EINVAL);
    if (e.doc != doc || e.line != line || !strstr(e.msg, needle))
        fail_msg("document %zu, line %zu: \"%s\"; want document %zu, line %zu, \"%s\"", e.doc,
                 e.line, e.msg, doc, line, needle);
}

/* Issue 16.2: a byte that is not UTF-8 (or a control character) is
 * reported where it is, not at document 1, line 1: libyaml gives only its
 * offset, and reads ahead of the parser. */
static void reader_errors_name_document_and_line(void **state)
{
    (void)state;
    static const char two[] = "a: 1\n---\nb: 2\nc: \"x\xffy\"\n";
    expect_parse_error(two, sizeof two - 1, 2, 4,
                       "invalid leading UTF-8 octet (byte 0xff at column 6)");
    static const char ctl[] = "a: 1\r\n---\r\nb: 2\r\nc: x\x01y\r\n";
    expect_parse_error(ctl, sizeof ctl - 1, 2, 4,
                       "control characters are not allowed (byte 0x01 at column 5)");
    static const char bom[] = "\xEF\xBB\xBF"
                              "a: \xc3\xa9\xc3";
    expect_parse_error(bom, sizeof bom - 1, 1, 1, "(byte 0xc3 at column 5)");
    /* far beyond libyaml's read-ahead: the 3001st document */
    size_t n = 3000 * 9 + 32, o = 0;
    char *big = malloc(n);
    assert_non_null(big);
    for (int i = 0; i < 3000; i++) o += (size_t)snprintf(big + o, n - o, "a: 1\n---\n");
    o += (size_t)snprintf(big + o, n - o, "b: |\n  ok\n  \xfe\n");
    expect_parse_error(big, o, 3001, 6003, "(byte 0xfe at column 3)");
    free(big);
}

/* Issue 16.10: deep flow nesting is refused while libyaml reads it (its
 * scanner is quadratic in flow depth: 100 000 '[' took 41 s to read
 * whole), before the rest of the input. The inputs are cut off after their
 * opening brackets: the error must be the depth, at line 1, not the syntax
 * error at the end that a full read finds first. */
static void deep_nesting_is_refused_early(void **state)
{
    (void)state;
    static const char *const open[] = {"[", "{a: ", "[{a: "};
    for (size_t k = 0; k < sizeof open / sizeof open[0]; k++) {
        size_t n = 100000, w = strlen(open[k]), o = 0;
        char *text = malloc(n * w + 1);
        assert_non_null(text);
        for (size_t i = 0; i < n; i++, o += w) memcpy(text + o, open[k], w);
        text[o] = '\0';
        struct yamltree t;
        struct yamltree_error e;
        int rc = yamltree_parse(text, o, &t, &e);
        free(text);
        assert_int_equal(rc, -EINVAL);
        if (e.doc != 1 || e.line != 1 || !strstr(e.msg, "nested deeper than 512 levels"))
            fail_msg("\"%s\" x %zu: document %zu, line %zu: %s", open[k], n, e.doc, e.line, e.msg);
    }
}

static void documents_and_their_bytes(void **state)
{
    (void)state;
    static const char text[] = "# one\na: 1\n---\nb: 2\n...\n# tail\n";
    struct yamltree t;
    struct yamltree_error e;
    assert_int_equal(yamltree_parse(text, strlen(text), &t, &e), 0);
    assert_int_equal(t.ndocs, 2);
    assert_int_equal(t.docs[0].start, 0);
    assert_int_equal(t.docs[1].start, t.docs[0].end);
    assert_memory_equal(text + t.docs[1].start, "---\nb: 2\n...", t.docs[1].end - t.docs[1].start);
    assert_string_equal(text + t.tail, "\n# tail\n");
    yamltree_free(&t);
    /* a malformed third document: its number and line */
    static const char bad[] = "a: 1\n---\nb: 2\n---\nc: [\n";
    assert_int_equal(yamltree_parse(bad, strlen(bad), &t, &e), -EINVAL);
    assert_int_equal(e.doc, 3);
    assert_int_equal(e.line, 6);
}

/* Strings are decoded strictly (base/utf8.h): every byte that is not
 * UTF-8 (overlong forms, surrogates, above U+10FFFF, truncated sequences)
 * is written as its value's escape, never passed through raw or decoded
 * to another character; valid text is kept, what YAML cannot print is
 * escaped, and such a string is never single-quoted. */
static void strings_decoded_strictly(void **state)
{
    (void)state;
    static const struct {
        const char *in, *json;
    } T[] = {
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e",
         "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e\""},
        {"a\xc0\x80z", "\"a\\u00c0\\u0080z\""},                   /* overlong NUL */
        {"\xed\xa0\x80", "\"\\u00ed\\u00a0\\u0080\""},            /* a surrogate */
        {"\xf4\x90\x80\x80", "\"\\u00f4\\u0090\\u0080\\u0080\""}, /* above U+10FFFF */
        {"\xe2\x82", "\"\\u00e2\\u0082\""},                       /* truncated */
        {"\xf8\x88\x80\x80\x80", "\"\\u00f8\\u0088\\u0080\\u0080\\u0080\""},
        {"nel\xc2\x85 tab\t", "\"nel\\u0085 tab\\t\""},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        struct buf b = {0};
        yamlrender_json_string(&b, T[i].in);
        assert_false(b.oom);
        assert_string_equal(b.p, T[i].json);
        buf_free(&b);
        /* as a key or scalar: double-quoted unless all of it is valid and printable */
        yamlrender_key(&b, T[i].in);
        if (i == 0)
            assert_string_equal(b.p, "'caf\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e'");
        else
            assert_string_equal(b.p, T[i].json);
        buf_free(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(add_key_to_nested_map),
        cmocka_unit_test(strings_decoded_strictly),
        cmocka_unit_test(add_key_to_root_and_four_space_indent),
        cmocka_unit_test(append_to_indented_sequence_with_comments),
        cmocka_unit_test(append_to_unindented_sequence),
        cmocka_unit_test(flow_collections_become_block),
        cmocka_unit_test(flow_with_comments_keeps_its_layout),
        cmocka_unit_test(crlf_line_endings),
        cmocka_unit_test(no_trailing_newline),
        cmocka_unit_test(multibyte_before_the_edit),
        cmocka_unit_test(byte_order_mark),
        cmocka_unit_test(tabs_are_an_error),
        cmocka_unit_test(anchors_and_merge_keys),
        cmocka_unit_test(anchors_and_tags_on_appended_nodes),
        cmocka_unit_test(anchored_sequence_is_refused),
        cmocka_unit_test(null_and_empty_values),
        cmocka_unit_test(block_scalar_last),
        cmocka_unit_test(block_scalar_at_the_end_without_a_line_break),
        cmocka_unit_test(escaped_tokens_replace_insert),
        cmocka_unit_test(remove_rerenders_the_root),
        cmocka_unit_test(document_markers_kept),
        cmocka_unit_test(bad_ops_are_errors),
        cmocka_unit_test(scalars_as_kubernetes_reads_them),
        cmocka_unit_test(tree_errors_name_the_line),
        cmocka_unit_test(reader_errors_name_document_and_line),
        cmocka_unit_test(deep_nesting_is_refused_early),
        cmocka_unit_test(documents_and_their_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
