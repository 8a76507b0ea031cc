/*
 * goquote.h - decoding of Go double-quoted string literals, as written by
 * Go's %q / strconv.Quote (the downward-API annotations file,
 * docs/kubernetes-api.md#the-downward-api-annotations-file).
 *
 * Accepted escapes: \a \b \f \n \r \t \v \\ \" \xHH \ooo (3 octal digits,
 * <= 0377) \uHHHH \UHHHHHHHH (code points <= 0x10FFFF, not surrogates,
 * encoded as UTF-8). Raw bytes other than '"', '\\' and '\n' are copied as
 * they are (Go allows raw UTF-8, and invalid bytes only ever appear escaped).
 */
#ifndef RA_GOQUOTE_H
#define RA_GOQUOTE_H

#include <stddef.h>

/* Decodes the literal at s[0..len). s[0] must be '"'. On success returns 0,
 * *out is a malloc'd buffer holding the decoded bytes plus a terminating NUL
 * (the value itself may contain NUL bytes), *outlen its length without the
 * NUL, and *consumed the number of input bytes up to and including the
 * closing quote. On failure returns -EINVAL (or -ENOMEM), writes a reason
 * naming the byte offset into err, and *out is NULL. */
int gq_unquote(const char *s, size_t len, char **out, size_t *outlen, size_t *consumed, char *err,
               size_t errlen);

/* Encodes bytes as Go's strconv.Quote would (for tests and the inject
 * command). Returns a malloc'd NUL-terminated string or NULL on ENOMEM.
 * Printable runes are emitted raw; Go's unicode.IsPrint is approximated
 * (see goquote.c): unassigned code points are kept raw where Go escapes
 * them. The result always decodes back to the input bytes. */
char *gq_quote(const char *s, size_t len);

/* Like gq_quote but into dst[dstlen] without allocating, for error
 * messages: if the quoted form does not fit, it is cut at a character
 * boundary and ends in `..."`. Always NUL-terminated; a dst shorter than
 * 6 bytes gets an empty string. */
void gq_quote_to(char *dst, size_t dstlen, const char *s, size_t len);

#endif
