/*
 * tree.h - a YAML (or JSON) stream read with libyaml into node trees
 * that keep every node's byte offsets, line and column, for `reload-agent
 * inject` (the text splicer needs to know where each node is), and the
 * conversion of a node to cJSON with Kubernetes' scalar rules.
 *
 * Scalar resolution (plain, untagged scalars; a quoted or block scalar is
 * always a string), as sigs.k8s.io/yaml resolves them where it matters for
 * manifests, YAML 1.2-like otherwise:
 *   null  ~ null Null NULL and the empty scalar
 *   bool  true True TRUE false False FALSE, and YAML 1.1's y Y yes Yes YES
 *         on On ON / n N no No NO off Off OFF (kubectl reads them so: an
 *         annotation `yes` is an error there, tests/e2e/test_scalars.py)
 *   int   Go's strconv.ParseInt base 0 after removing '_': 12, -3, 0x1F,
 *         0o644, 0b101 and 0644 (octal: 420, as kubectl reads it)
 *   float [-+]?(.N|N(.N*)?)([eE][-+]?N)?   (.inf and .nan: an error, JSON
 *         cannot carry them)
 *   else  a string (timestamps too)
 * Explicit tags !!str !!int !!float !!bool !!null !!map !!seq !!binary
 * !!timestamp and the non-specific "!" are honoured; any other tag is an
 * error. Anchors and aliases are resolved (an alias expansion of more than
 * YAMLTREE_MAX_EXPANSION values is an error: "billion laughs"), merge keys
 * "<<" are resolved (explicit keys win, earlier merged maps win), a
 * duplicate key is an error, a key must be a scalar (its text is the JSON
 * key). Collections nested deeper than YAMLTREE_MAX_DEPTH are refused as
 * they are read (libyaml's scanner is quadratic in flow depth). A byte
 * that is not UTF-8 is reported at its document, line and column.
 */
#ifndef RA_YAMLDOC_TREE_H
#define RA_YAMLDOC_TREE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#define YAMLTREE_MAX_EXPANSION 1000000
#define YAMLTREE_MAX_DEPTH 512

enum yamltree_kind { YAMLTREE_SCALAR, YAMLTREE_SEQ, YAMLTREE_MAP, YAMLTREE_ALIAS };

struct yamltree_node {
    enum yamltree_kind kind;
    int flow;           /* SEQ/MAP: written in flow style ([...] / {...}) */
    int style;          /* SCALAR: libyaml's yaml_scalar_style_t */
    int plain_implicit; /* SCALAR: plain and without a tag */
    const char *tag;    /* explicit tag as libyaml resolved it, or NULL */
    const char *anchor; /* NULL when none */
    const char *value;  /* SCALAR: the value (NUL-terminated, len bytes) */
    size_t len;
    size_t start, end;           /* byte offsets [start, end) in the parsed text; for a
                        * block collection end is where libyaml closed it
                        * (the next token): use yamltree_content_end */
    size_t line, col;            /* 0-based line and column (characters) of start */
    size_t indent, iline;        /* SEQ/MAP in block style: the column (characters) and
                                  * 0-based line of its first entry (a key, or an item's
                                  * "-"), past any anchor, tag or comment that start
                                  * points at ("key: &a\n  x: 1"); else col and line */
    struct yamltree_node **kids; /* SEQ: items; MAP: key0, value0, key1, ... */
    size_t n;                    /* number of entries in kids */
    size_t cap;
    struct yamltree_node *parent;
    struct yamltree_node *target; /* ALIAS: the anchored node */
    int open;                     /* being built (an alias to it is a cycle) */
};

struct yamltree_doc {
    size_t start, end; /* the document's bytes in the text: from the end of
                        * the previous document (or 0) to the end of this
                        * one, with its leading comments, directives, and
                        * "---" / "..." markers */
    struct yamltree_node *root;
    size_t line; /* 1-based line of the root node */
};

struct yamltree_arena;

struct yamltree {
    struct yamltree_doc *docs;
    size_t ndocs;
    size_t tail; /* bytes [tail, len) follow the last document (comments) */
    struct yamltree_arena *arena;
};

/* Error details of yamltree_parse: the 1-based document number and line
 * (0 when unknown) and the problem as libyaml or the tree builder gave it. */
struct yamltree_error {
    size_t doc;
    size_t line;
    char msg[256];
};

/* Parses text[0..len) (UTF-8, an optional BOM; JSON is YAML too) into
 * documents. Returns 0 and fills *out (free with yamltree_free), or -EINVAL
 * with *e filled (a libyaml problem, a duplicate key, an undefined alias, a
 * non-scalar key, a tag that is not supported, UTF-16 input), or -ENOMEM.
 * On failure *out holds nothing to free. */
int yamltree_parse(const char *text, size_t len, struct yamltree *out, struct yamltree_error *e);

/* Frees what yamltree_parse made. Safe on a zeroed struct. */
void yamltree_free(struct yamltree *t);

/* Converts a node (and all it holds) to cJSON with the rules above.
 * Returns 0 and *out (the caller owns it; a JSON null for an empty
 * document), or -EINVAL with e->line and e->msg set (e->doc untouched), or
 * -ENOMEM. */
int yamltree_to_json(const struct yamltree_node *n, cJSON **out, struct yamltree_error *e);

/* The byte offset just past the last character of a node's content: the
 * end of its last scalar (trailing blank lines of a block scalar not
 * counted), alias or flow collection. */
size_t yamltree_content_end(const struct yamltree_node *n, const char *text);

/* The value node of key (exact bytes) in a MAP, or NULL; sets *keyp too. */
struct yamltree_node *yamltree_map_get(const struct yamltree_node *map, const char *key,
                                       size_t keylen, struct yamltree_node **keyp);

#endif
