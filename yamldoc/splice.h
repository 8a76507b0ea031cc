/*
 * splice.h - RFC 6902 operations applied to the TEXT of a YAML
 * document, for `reload-agent inject`: every byte outside the nodes an
 * operation changes stays as it was (comments, key order, quoting, blank
 * lines, line endings).
 *
 * Each operation becomes one text edit, made on a fresh parse of the text
 * as the previous edits left it:
 *   - a key that the mapping lacks is added after the mapping's last entry
 *     (after the end of that line, so a trailing comment stays where it
 *     was), with its whole value;
 *   - an item appended to a block sequence goes after the last item, one
 *     inserted before item N goes on its own lines before it;
 *   - an existing value (add on an existing key, replace) is replaced
 *     wholesale;
 *   - a flow collection ([...], {...}) that holds a comment, or sits in
 *     another one, keeps its layout: entries are added in flow style (one
 *     line of JSON) after its last entry or before item N;
 *   - any other flow collection, a scalar or an alias on the way is
 *     replaced by the block rendering of its new value (JSON in a flow
 *     collection);
 *   - any other operation (remove, move, copy, test) re-renders the
 *     document's root.
 * New text is rendered in block style with the document's own indentation
 * (nested mappings' step and whether sequences under a key are indented,
 * detected from the document, else 2 and indented) and line ending (CRLF
 * when the document uses it).
 *
 * The result is then parsed again and compared with jsonpatch_apply() of
 * the operations on the parsed input; a difference is an error (never a
 * wrong document).
 */
#ifndef RA_YAMLDOC_SPLICE_H
#define RA_YAMLDOC_SPLICE_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* Applies ops (a JSON array of RFC 6902 operations) to the YAML document
 * text[0..len) (one document, as a yamltree_doc's bytes: it may hold
 * leading comments, directives, "---" and "..."). On success returns 0 and
 * *out (malloc'd, NUL-terminated, *outlen bytes; the caller frees it).
 * Returns -EINVAL with a message in err when the text is not exactly one
 * document, an operation does not apply (jsonpatch_apply's message), or
 * the spliced text does not parse back to the patched object ("internal
 * error: ..."); -ENOMEM. */
int yamlsplice_apply(const char *text, size_t len, const cJSON *ops, char **out, size_t *outlen,
                     char *err, size_t errlen);

#endif
