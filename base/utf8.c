/*
 * utf8.c - strict UTF-8 decoding as Go's utf8.DecodeRune, and encoding
 * (see utf8.h).
 */
#include "base/utf8.h"

int32_t ra_utf8_decode(const char *str, size_t n, size_t *width)
{
    const unsigned char *s = (const unsigned char *)str;
    unsigned char b, lo = 0x80, hi = 0xBF;
    size_t need;
    int32_t r;

    *width = n ? 1 : 0;
    if (n == 0) return RA_UTF8_INVALID;
    b = s[0];
    if (b < 0x80) return b;
    if (b >= 0xC2 && b <= 0xDF) {
        need = 2;
        r = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 3;
        r = b & 0x0F;
        if (b == 0xE0) lo = 0xA0; /* overlong */
        if (b == 0xED) hi = 0x9F; /* surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 4;
        r = b & 0x07;
        if (b == 0xF0) lo = 0x90; /* overlong */
        if (b == 0xF4) hi = 0x8F; /* above U+10FFFF */
    } else {
        return RA_UTF8_INVALID; /* a continuation byte, 0xC0, 0xC1, 0xF5-0xFF */
    }
    if (n < need) return RA_UTF8_INVALID;
    for (size_t k = 1; k < need; k++) {
        if (s[k] < lo || s[k] > hi) return RA_UTF8_INVALID;
        lo = 0x80;
        hi = 0xBF;
        r = (r << 6) | (s[k] & 0x3F);
    }
    *width = need;
    return r;
}

size_t ra_utf8_encode(uint32_t r, char *out)
{
    if (r < 0x80) {
        out[0] = (char)r;
        return 1;
    }
    if (r < 0x800) {
        out[0] = (char)(0xC0 | (r >> 6));
        out[1] = (char)(0x80 | (r & 0x3F));
        return 2;
    }
    if (r < 0x10000) {
        out[0] = (char)(0xE0 | (r >> 12));
        out[1] = (char)(0x80 | ((r >> 6) & 0x3F));
        out[2] = (char)(0x80 | (r & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (r >> 18));
    out[1] = (char)(0x80 | ((r >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((r >> 6) & 0x3F));
    out[3] = (char)(0x80 | (r & 0x3F));
    return 4;
}

int ra_utf8_is_valid(const char *s, size_t n)
{
    size_t w;
    for (size_t i = 0; i < n; i += w)
        if (ra_utf8_decode(s + i, n - i, &w) == RA_UTF8_INVALID) return 0;
    return 1;
}
