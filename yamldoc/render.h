/*
 * render.h - cJSON values written as block-style YAML text to splice
 * into a manifest (with the document's indentation and line ending), and as
 * indented JSON, for `reload-agent inject`.
 *
 * Strings are written plain only when every YAML parser reads them back as
 * the same string (letters, digits and _./:=@+- , not a number, date, bool
 * or null word in YAML 1.1 or 1.2: "yes", "on", "0644", "1e3" are quoted,
 * quantities such as "5m" and "16Mi" are not); anything
 * else is single-quoted when printable, double-quoted with JSON escapes
 * otherwise (YAML reads JSON escapes the same way).
 */
#ifndef RA_YAMLDOC_RENDER_H
#define RA_YAMLDOC_RENDER_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "base/buf.h" /* the output: on allocation failure b->oom is set */

/* Writes n spaces. */
void yamlrender_spaces(struct buf *b, size_t n);

/* How a document indents: a nested mapping's keys sit step columns right
 * of its key; a sequence under a mapping key starts seqoff columns right of
 * the key (0: "key:\n- a", 2: "key:\n  - a"). nl is "\n" or "\r\n". */
struct yamlrender_style {
    size_t step;
    size_t seqoff;
    const char *nl;
};

/* Writes v as it reads at a position where the cursor already sits at
 * column col with nothing before it that belongs to v (a document's root,
 * or after "- "): a mapping's first key on the current line and the next
 * keys on new lines at col; a sequence likewise with "- "; a scalar or an
 * empty collection ({} / []) as is. */
void yamlrender_inline(struct buf *b, const cJSON *v, size_t col,
                       const struct yamlrender_style *st);

/* Writes v as the value of a mapping key at column col, the cursor just
 * after the ':': " scalar", or a line break and the nested block. */
void yamlrender_after_key(struct buf *b, const cJSON *v, size_t col,
                          const struct yamlrender_style *st);

void yamlrender_key(struct buf *b, const char *key);

/* Writes v as JSON, indented by indent spaces per level (0: one line with
 * ", " and ": " between entries, valid flow YAML for libyaml too),
 * starting at nesting level 0; no final newline. */
void yamlrender_json(struct buf *b, const cJSON *v, size_t indent);

/* Writes s as a JSON string literal (quotes included). */
void yamlrender_json_string(struct buf *b, const char *s);

#endif
