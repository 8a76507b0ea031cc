/*
 * utf8.h - the one UTF-8 decoder (and encoder) of the program.
 *
 * Decoding is strict, with the semantics of Go's unicode/utf8.DecodeRune:
 * overlong forms, surrogates (U+D800-U+DFFF), code points above U+10FFFF,
 * stray continuation bytes and truncated sequences are all invalid, and an
 * invalid sequence covers exactly one byte, so a caller that escapes it
 * byte by byte and goes on resynchronises at the next byte. Every place
 * that needs to know "is this valid UTF-8, and which code point" (the
 * logger, the one-line text policy of base/text.h, Go quoting) asks here.
 */
#ifndef RA_UTF8_H
#define RA_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* What ra_utf8_decode returns for an invalid (or empty) input. */
#define RA_UTF8_INVALID (-1)

/* Decodes the first UTF-8 sequence of s[0..n). Returns its code point and
 * sets *width to its length (1-4). An invalid sequence returns
 * RA_UTF8_INVALID with *width = 1 (the one byte to skip); n == 0 returns
 * RA_UTF8_INVALID with *width = 0. s is read, never kept. Pure: safe on any
 * thread. */
int32_t ra_utf8_decode(const char *s, size_t n, size_t *width);

/* Writes the UTF-8 encoding of code point cp (<= U+10FFFF, not checked
 * otherwise) into out, which must have room for 4 bytes, and returns its
 * length. No NUL is written. */
size_t ra_utf8_encode(uint32_t cp, char *out);

/* 1 if s[0..n) is entirely valid UTF-8 (an empty string is), else 0. */
int ra_utf8_is_valid(const char *s, size_t n);

#endif
