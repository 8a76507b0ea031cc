/*
 * join.h - a YAML text that ends without a line break, made safe for
 * one to follow: a block scalar ("|", "|+", ">") that runs to the end of
 * the text keeps a final line break in its value, so appending "\n---\n"
 * (joining inputs into one stream) or a key after it (the splicer) would
 * change the value ("a" would read "a\n"). Its chomping indicator is
 * rewritten to strip ("|-"), which reads the same once a break follows;
 * a keep ("|+") scalar whose last line is blank loses that partial line
 * instead (the text then ends in a break).
 */
#ifndef RA_YAMLDOC_JOIN_H
#define RA_YAMLDOC_JOIN_H

#include <stddef.h>

/* For text[0..len): returns 1 and *out (malloc'd, NUL-terminated, *outlen
 * bytes; room for one more byte; the caller frees it) when its last
 * document ends in such a block scalar, rewritten; 0 (and *out NULL) when
 * a line break may follow the text as it is (it ends in one, or in no
 * block scalar, or in a stripped one); -ENOMEM. A text that does not
 * parse is left to its own errors: 0. The caller checks that the result,
 * with the break, reads as the text did (the rewrite is exact when the
 * scalar's last line holds content). */
int yamljoin_safe_end(const char *text, size_t len, char **out, size_t *outlen);

#endif
