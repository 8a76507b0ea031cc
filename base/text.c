/*
 * text.c - untrusted bytes shown on one line (the policy is in text.h).
 */
#include "base/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/utf8.h"

int ra_text_is_break_like(int32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029;
}

size_t ra_text_step(const char *s, size_t n, char *out, size_t *width)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char c = (unsigned char)s[0];
    int32_t cp = ra_utf8_decode(s, n, width);

    if (cp == RA_UTF8_INVALID || c < 0x20 || c == 0x7f) {
        *width = 1;
        out[0] = '\\';
        out[1] = 'x';
        out[2] = hex[c >> 4];
        out[3] = hex[c & 0xF];
        return 4;
    }
    if (ra_text_is_break_like(cp)) {
        out[0] = '\\';
        out[1] = 'u';
        for (int k = 0; k < 4; k++) out[2 + k] = hex[(cp >> (12 - 4 * k)) & 0xF];
        return 6;
    }
    memcpy(out, s, *width);
    return *width;
}

int ra_text_is_one_line(const char *s, size_t n)
{
    char piece[RA_TEXT_STEP_MAX];
    size_t w;
    for (size_t i = 0; i < n; i += w) {
        size_t l = ra_text_step(s + i, n - i, piece, &w);
        if (l != w || memcmp(piece, s + i, l) != 0) return 0;
    }
    return 1;
}

size_t ra_one_linen(char *dst, size_t n, const char *src, size_t len)
{
    char piece[RA_TEXT_STEP_MAX];
    size_t o = 0, w;

    if (n == 0) return 0;
    for (size_t i = 0; i < len; i += w) {
        size_t l = ra_text_step(src + i, len - i, piece, &w);
        if (o + l + 1 > n) break;
        memcpy(dst + o, piece, l);
        o += l;
    }
    dst[o] = '\0';
    return o;
}

size_t ra_one_line(char *dst, size_t n, const char *src)
{
    return ra_one_linen(dst, n, src, strlen(src));
}

void ra_one_line_fix(char *s, size_t n)
{
    char tmp[4096];
    size_t len;

    if (n == 0) return;
    len = strnlen(s, n - 1);
    s[len] = '\0';
    if (ra_text_is_one_line(s, len)) return;
    size_t o = ra_one_linen(tmp, n < sizeof tmp ? n : sizeof tmp, s, len);
    memcpy(s, tmp, o + 1);
}

char *ra_one_line_dup(const char *s)
{
    if (!s) return NULL;
    size_t len = strlen(s), cap = len * RA_TEXT_STEP_MAX + 1;
    char *d = malloc(cap);
    if (!d) ra_oom();
    ra_one_linen(d, cap, s, len);
    return d;
}
