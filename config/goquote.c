/*
 * goquote.c - Go double-quoted string literals: decoding (strconv.Unquote,
 * used for the downward-API annotations file, docs/kubernetes-api.md) and encoding
 * (strconv.Quote, used by tests, the inject command and error messages).
 *
 * Quoting needs Go's unicode.IsPrint. We do not carry Unicode tables, so
 * is_print() approximates it: ASCII 0x20-0x7E, and every other valid code
 * point except the ranges in not_print[] (C1 controls, the Zs spaces other
 * than ' ', format characters Cf of the common blocks, line/paragraph
 * separators, private use, noncharacters, tags). Unassigned code points
 * outside those ranges are emitted raw, where Go would escape them; the
 * result still decodes to the same bytes.
 */
#include "config/goquote.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (!err || errlen == 0) return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int hex_val(unsigned char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Describes the byte after a backslash for an error message. */
static void bad_escape(char *err, size_t errlen, unsigned char c, size_t off)
{
    if (c > 0x20 && c < 0x7F)
        set_err(err, errlen, "invalid escape \\%c at offset %zu", c, off);
    else
        set_err(err, errlen, "invalid escape: byte 0x%02x after '\\' at offset %zu", c, off);
}

/* Decodes the escape at s[i] == '\\'; appends to out; returns the input
 * length of the escape or 0 on error (err set). */
static size_t unescape(const unsigned char *s, size_t len, size_t i, char *out, size_t *o,
                       char *err, size_t errlen)
{
    static const char simple_in[] = "abfnrtv\\\"";
    static const char simple_out[] = "\a\b\f\n\r\t\v\\\"";
    const char *p;
    uint32_t v = 0;
    size_t ndig, k;

    if (i + 1 >= len) {
        set_err(err, errlen, "unterminated escape at offset %zu", i);
        return 0;
    }
    unsigned char c = s[i + 1];
    if (c != 0 && (p = strchr(simple_in, c)) != NULL) {
        out[(*o)++] = simple_out[p - simple_in];
        return 2;
    }
    if (c >= '0' && c <= '7') {
        for (k = 1; k <= 3; k++) {
            if (i + k >= len || s[i + k] < '0' || s[i + k] > '7') {
                set_err(err, errlen, "octal escape at offset %zu needs 3 octal digits", i);
                return 0;
            }
            v = v * 8 + (uint32_t)(s[i + k] - '0');
        }
        if (v > 0377) {
            set_err(err, errlen, "octal escape \\%.3s at offset %zu exceeds \\377",
                    (const char *)s + i + 1, i);
            return 0;
        }
        out[(*o)++] = (char)v;
        return 4;
    }
    switch (c) {
    case 'x': ndig = 2; break;
    case 'u': ndig = 4; break;
    case 'U': ndig = 8; break;
    default: bad_escape(err, errlen, c, i); return 0;
    }
    for (k = 0; k < ndig; k++) {
        int h = i + 2 + k < len ? hex_val(s[i + 2 + k]) : -1;
        if (h < 0) {
            set_err(err, errlen, "escape \\%c at offset %zu needs %zu hex digits", c, i, ndig);
            return 0;
        }
        v = v * 16 + (uint32_t)h;
    }
    if (c == 'x') {
        out[(*o)++] = (char)v;
    } else if (v > 0x10FFFF) {
        set_err(err, errlen, "escape \\%c at offset %zu: code point 0x%X is beyond U+10FFFF", c, i,
                v);
        return 0;
    } else if (v >= 0xD800 && v <= 0xDFFF) {
        set_err(err, errlen, "escape \\%c at offset %zu: U+%04X is a surrogate", c, i, v);
        return 0;
    } else {
        *o += ra_utf8_encode(v, out + *o);
    }
    return 2 + ndig;
}

int gq_unquote(const char *str, size_t len, char **out, size_t *outlen, size_t *consumed, char *err,
               size_t errlen)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 1, o = 0, n;
    char *buf;

    *out = NULL;
    if (len == 0 || s[0] != '"') {
        set_err(err, errlen, "expected '\"' at offset 0");
        return -EINVAL;
    }
    /* Every escape decodes to no more bytes than it occupies. */
    buf = malloc(len);
    if (!buf) {
        set_err(err, errlen, "out of memory");
        return -ENOMEM;
    }
    while (i < len && s[i] != '"') {
        if (s[i] == '\n') {
            set_err(err, errlen, "raw newline at offset %zu", i);
            goto fail;
        }
        if (s[i] != '\\') {
            buf[o++] = (char)s[i++];
            continue;
        }
        n = unescape(s, len, i, buf, &o, err, errlen);
        if (n == 0) goto fail;
        i += n;
    }
    if (i >= len) {
        set_err(err, errlen, "unterminated string: no closing '\"' (%zu bytes)", len);
        goto fail;
    }
    buf[o] = '\0';
    *out = buf;
    *outlen = o;
    *consumed = i + 1;
    return 0;
fail:
    free(buf);
    return -EINVAL;
}

static int is_print(int32_t r)
{
    static const int32_t not_print[][2] = {
        {0x0080, 0x00A0},    /* C1 controls, no-break space */
        {0x00AD, 0x00AD},    /* soft hyphen */
        {0x1680, 0x1680},    /* ogham space mark */
        {0x2000, 0x200F},    /* spaces, zero-width and direction marks */
        {0x2028, 0x202F},    /* line/paragraph separators, embeddings, narrow nbsp */
        {0x205F, 0x206F},    /* math space, invisible operators, isolates */
        {0x3000, 0x3000},    /* ideographic space */
        {0xD800, 0xF8FF},    /* surrogates, private use */
        {0xFDD0, 0xFDEF},    /* noncharacters */
        {0xFEFF, 0xFEFF},    /* byte order mark */
        {0xFFF0, 0xFFFB},    /* unassigned, interlinear annotation */
        {0xE0000, 0xE007F},  /* tags */
        {0xF0000, 0x10FFFF}, /* private use planes */
    };
    size_t k;

    if (r < 0x80) return r >= 0x20 && r < 0x7F;
    if ((r & 0xFFFE) == 0xFFFE) return 0; /* U+xFFFE, U+xFFFF noncharacters */
    for (k = 0; k < sizeof not_print / sizeof not_print[0]; k++)
        if (r >= not_print[k][0] && r <= not_print[k][1]) return 0;
    return 1;
}

static size_t hex_escape(unsigned char b, char *out)
{
    static const char hex[] = "0123456789abcdef";

    out[0] = '\\';
    out[1] = 'x';
    out[2] = hex[b >> 4];
    out[3] = hex[b & 0xF];
    return 4;
}

/* Writes the quoted form of the next character of s into out (up to 10
 * bytes) and returns its length; *width is the input bytes it covers. */
static size_t quote_char(const unsigned char *s, size_t len, size_t *width, char *out)
{
    static const char hex[] = "0123456789abcdef";
    static const char simple_in[] = "\a\b\f\n\r\t\v";
    static const char simple_out[] = "abfnrtv";
    int32_t r = ra_utf8_decode((const char *)s, len, width);
    const char *p;
    size_t n, k;

    if (r < 0) return hex_escape(s[0], out); /* invalid UTF-8 byte */
    if (r == '"' || r == '\\') {
        out[0] = '\\';
        out[1] = (char)r;
        return 2;
    }
    if (is_print(r)) {
        memcpy(out, s, *width);
        return *width;
    }
    if (r > 0 && r < 0x20 && (p = strchr(simple_in, r)) != NULL) {
        out[0] = '\\';
        out[1] = simple_out[p - simple_in];
        return 2;
    }
    if (r < 0x20 || r == 0x7F) return hex_escape((unsigned char)r, out);
    n = r < 0x10000 ? 4 : 8;
    out[0] = '\\';
    out[1] = n == 4 ? 'u' : 'U';
    for (k = 0; k < n; k++) out[2 + k] = hex[(r >> (4 * (n - 1 - k))) & 0xF];
    return 2 + n;
}

/* Writes the quoted body (no surrounding quotes) into dst, or only counts
 * when dst is NULL; returns the length. */
static size_t quote_body(char *dst, const unsigned char *s, size_t len)
{
    size_t i = 0, total = 0, width, n;
    char piece[10];

    while (i < len) {
        n = quote_char(s + i, len - i, &width, piece);
        if (dst) memcpy(dst + total, piece, n);
        total += n;
        i += width;
    }
    return total;
}

char *gq_quote(const char *s, size_t len)
{
    size_t n = quote_body(NULL, (const unsigned char *)s, len);
    char *out = malloc(n + 3);

    if (!out) return NULL;
    out[0] = '"';
    quote_body(out + 1, (const unsigned char *)s, len);
    out[n + 1] = '"';
    out[n + 2] = '\0';
    return out;
}

void gq_quote_to(char *dst, size_t dstlen, const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t w = 1, i = 0, width, n;
    char piece[10];

    if (dstlen < 6) { /* too small for `"..."` */
        if (dstlen) dst[0] = '\0';
        return;
    }
    dst[0] = '"';
    while (i < len) {
        n = quote_char(s + i, len - i, &width, piece);
        /* Keep room for `..."` and NUL unless the whole rest fits. */
        if (w + n + 5 > dstlen && w + quote_body(NULL, s + i, len - i) + 2 > dstlen) {
            memcpy(dst + w, "...", 3);
            w += 3;
            break;
        }
        memcpy(dst + w, piece, n);
        w += n;
        i += width;
    }
    dst[w++] = '"';
    dst[w] = '\0';
}
