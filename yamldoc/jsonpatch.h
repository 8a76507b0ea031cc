/*
 * jsonpatch.h - RFC 6902 JSON Patch applied to a cJSON document, and RFC
 * 6901 JSON Pointers (escaping a token, decoding one, looking a pointer
 * up). Used to turn the transform's operations into an injected object
 * (`inject`'s JSON output and stamp, the splicer's check, tests).
 */
#ifndef RA_YAMLDOC_JSONPATCH_H
#define RA_YAMLDOC_JSONPATCH_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* Applies ops (a JSON array of operations: add, remove, replace, move,
 * copy, test) to *doc in order. All or nothing: on any failure *doc is left
 * as it was. Returns 0, or -EINVAL with a message naming the operation's
 * index and path in err (a missing parent, an index out of range, a failed
 * test, a malformed operation), or -ENOMEM. */
int jsonpatch_apply(cJSON **doc, const cJSON *ops, char *err, size_t errlen);

/* Returns a malloc'd copy of s with '~' written as "~0" and '/' as "~1"
 * (one JSON Pointer reference token), or NULL on OOM. */
char *jsonpointer_escape(const char *s);

/* The longest reference token jsonpointer_get resolves, in bytes. */
#define JSONPOINTER_TOKEN_MAX 1023

/* Decodes the reference token of the RFC 6901 pointer path[0..len) that
 * starts at path[*i] (just after its '/'): "~0" is '~' and "~1" '/' (any
 * other '~' is kept), into tok (cap bytes, NUL-terminated), and moves *i
 * to the '/' after it (or to len). Returns the token's length, or -1 when
 * it does not fit in cap (tok then holds a prefix; *i is past the token
 * all the same). */
long jsonpointer_token(const char *path, size_t len, size_t *i, char *tok, size_t cap);

/* The JSON value at the RFC 6901 pointer path[0..pathlen) in doc ("" is
 * doc itself), or NULL when nothing is there, an array index is not a
 * decimal without leading zeros, or a token is longer than
 * JSONPOINTER_TOKEN_MAX. The result points into doc (borrowed: valid while
 * doc is). Allocates nothing. */
const cJSON *jsonpointer_get(const cJSON *doc, const char *path, size_t pathlen);

#endif
