/*
 * jsonpatch.h - RFC 6902 JSON Patch applied to a cJSON document, and RFC
 * 6901 JSON Pointer escaping. Used to turn the transform's operations into
 * an injected object (CLI JSON output, tests, the render-time stamp).
 */
#ifndef RA_INJECT_JSONPATCH_H
#define RA_INJECT_JSONPATCH_H

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

#endif
