/*
 * text.h - the one policy for showing untrusted bytes on one line.
 *
 * Error messages, log messages, /status fields and Kubernetes Events quote
 * text the agent did not write: file names, API answers, annotation values.
 * None of it may break the line that carries it, hide, or forge a second
 * line. The policy, the logger's since issue 9:
 *   - valid UTF-8 is kept as it is (backslashes included);
 *   - a control character (below 0x20, and 0x7f) and every byte that is not
 *     part of valid UTF-8 (base/utf8.h, strict) becomes the text \xHH;
 *   - a C1 control (U+0080-U+009F: NEL is one) and U+2028/U+2029, which
 *     some readers take as a line break, become the text \uHHHH.
 * Hex digits are lowercase. ra_errf (base/log.h) applies it to every
 * message it formats, so every parser error is one line by construction.
 */
#ifndef RA_TEXT_H
#define RA_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* Room ra_text_step may write: "\u2028" is 6 bytes, a code point 4. */
#define RA_TEXT_STEP_MAX 6

/* One step of the policy: writes into out (RA_TEXT_STEP_MAX bytes of
 * room, no NUL) what the first character (or invalid byte) of s[0..n)
 * becomes, sets *width to the input bytes it covers (>= 1), and returns the
 * length written. n must be >= 1. For callers that build their own output
 * (base/log.c's message, which writes \n \r \t as two characters first). */
size_t ra_text_step(const char *s, size_t n, char *out, size_t *width);

/* 1 for the code points above ASCII the policy writes as \uHHHH (C1,
 * U+2028, U+2029), else 0. */
int ra_text_is_break_like(int32_t cp);

/* 1 if s[0..n) passes through the policy unchanged, else 0. */
int ra_text_is_one_line(const char *s, size_t n);

/* Writes src[0..len) into dst (n bytes) under the policy, NUL-terminated
 * (nothing if n is 0), cut before the first character or escape that does
 * not fit, so no escape or UTF-8 sequence is ever split. dst and src must
 * not overlap. Returns the length written (without the NUL). */
size_t ra_one_linen(char *dst, size_t n, const char *src, size_t len);

/* ra_one_linen for the NUL-terminated string src. */
size_t ra_one_line(char *dst, size_t n, const char *src);

/* Rewrites the NUL-terminated string s (in a buffer of n bytes) under the
 * policy in place, cut as ra_one_linen cuts (to at most 4095 bytes when it
 * has to change anything). Allocates nothing: for error buffers. */
void ra_one_line_fix(char *s, size_t n);

/* A malloc'd copy of s under the policy (the caller frees it); NULL for
 * NULL. Aborts through ra_oom() when out of memory. */
char *ra_one_line_dup(const char *s);

#endif
