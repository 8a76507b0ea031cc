/*
 * jsonstream.h - a stream of JSON documents (what `kubectl get -o json`
 * prints for several objects, and `reload-agent inject -o json` for several
 * documents): JSON texts one after the other with only white space
 * between them. YAML cannot read it as one stream (a document after the
 * first needs a "---"), so `inject` splits it first.
 */
#ifndef RA_YAMLDOC_JSONSTREAM_H
#define RA_YAMLDOC_JSONSTREAM_H

#include <stddef.h>

/* One JSON document of a stream: bytes [start, end) of the text. */
struct jsonstream_doc {
    size_t start, end;
};

/* Splits text[0..len) (an optional UTF-8 BOM first) into its JSON
 * documents, each an object or an array, when it holds at least two and
 * nothing but white space between and around them. Returns the number of
 * documents and *docs (malloc'd; the caller frees it), 0 when the text is
 * not such a stream (one document, anything else between them, an
 * unbalanced bracket: the YAML reader says what is wrong), or -ENOMEM.
 * Each document is then read on its own, which checks that it is JSON. */
long jsonstream_split(const char *text, size_t len, struct jsonstream_doc **docs);

/* The offset of the first control character (below 0x20) written raw
 * inside a string of the JSON text[0..len), which JSON does not allow (and
 * which a YAML reader would fold into a space), or -1. */
long jsonstream_control_at(const char *text, size_t len);

#endif
