/*
 * render.c - cJSON to block YAML and to indented JSON (see
 * render.h).
 */
#include "yamldoc/render.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/utf8.h"

void yamlrender_spaces(struct buf *b, size_t n)
{
    static const char sp[] = "                                ";
    while (n > 0) {
        size_t k = n < sizeof sp - 1 ? n : sizeof sp - 1;
        buf_add(b, sp, k);
        n -= k;
    }
}

static void put_number(struct buf *b, double d)
{
    char num[64];
    if (!isfinite(d)) {
        buf_puts(b, "null");
        return;
    }
    if (d == floor(d) && fabs(d) < 1e15) {
        snprintf(num, sizeof num, "%.0f", d);
    } else {
        snprintf(num, sizeof num, "%.15g", d);
        if (strtod(num, NULL) != d) snprintf(num, sizeof num, "%.17g", d);
        /* YAML needs a digit or '.' to call it a float; %g may print "1e+20" */
    }
    buf_puts(b, num);
}

/* 1 for a code point YAML does not allow unescaped (C0 but tab and line
 * breaks are escaped apart, DEL, C1, the BOM, U+FFFE and U+FFFF). */
static int is_unprintable(int32_t cp)
{
    return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || cp == 0xFEFF || cp == 0xFFFE ||
           cp == 0xFFFF;
}

void yamlrender_json_string(struct buf *b, const char *s)
{
    const char *p = s, *end = s + strlen(s);
    char esc[16];
    buf_add(b, "\"", 1);
    while (p < end) {
        size_t n;
        int32_t cp = ra_utf8_decode(p, (size_t)(end - p), &n);
        if (cp == RA_UTF8_INVALID) {
            /* a byte that is not UTF-8 (base/utf8.h, strict): its value as
             * a code point, not U+FFFD, which would lose it */
            snprintf(esc, sizeof esc, "\\u%04x", (unsigned char)*p);
            buf_puts(b, esc);
            p += n;
            continue;
        }
        switch (cp) {
        case '"': buf_add(b, "\\\"", 2); break;
        case '\\': buf_add(b, "\\\\", 2); break;
        case '\n': buf_add(b, "\\n", 2); break;
        case '\r': buf_add(b, "\\r", 2); break;
        case '\t': buf_add(b, "\\t", 2); break;
        case '\b': buf_add(b, "\\b", 2); break;
        case '\f': buf_add(b, "\\f", 2); break;
        default:
            if (is_unprintable(cp)) { /* in YAML (C0, DEL, C1, BOM, non-characters) */
                snprintf(esc, sizeof esc, "\\u%04x", (unsigned)cp);
                buf_puts(b, esc);
            } else {
                buf_add(b, p, n);
            }
        }
        p += n;
    }
    buf_add(b, "\"", 1);
}

static int plain_safe(const char *s)
{
    static const char *const words[] = {"true", "false", "yes", "no",   "on",
                                        "off",  "y",     "n",   "null", NULL};
    size_t n = strlen(s);
    if (n == 0 || n > 256) return 0;
    unsigned char c0 = (unsigned char)s[0];
    int letter0 = (c0 >= 'a' && c0 <= 'z') || (c0 >= 'A' && c0 <= 'Z') || c0 == '_' || c0 == '/';
    if (c0 >= '0' && c0 <= '9') {
        /* a quantity ("5m", "16Mi"): plain when no YAML 1.1 or 1.2 form reads
         * it as a number or a date, that is when it has a letter other than
         * an exponent's and no 0x/0o/0b prefix ("1e3", "0xFA", "12:30" and
         * "2024-01-02" are quoted) */
        int letter = 0;
        if (c0 == '0' && s[1] && strchr("xXoObB", s[1])) return 0;
        for (const char *p = s; *p; p++)
            if (((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) && *p != 'e' && *p != 'E')
                letter = 1;
        if (!letter) return 0;
    } else if (!letter0) {
        /* "-x" and "--flag" are plain in block context; "-", "-1" are not */
        if (c0 != '-') return 0;
        const char *q = s + 1;
        if (*q == '-') q++;
        if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z'))) return 0;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("_./:=@+-", c)))
            return 0;
    }
    if (s[n - 1] == ':') return 0;
    for (const char *const *w = words; *w; w++)
        if (strcasecmp(s, *w) == 0) return 0;
    return 1;
}

/* Single quotes read back as written for printable text ('' is a quote). */
static int single_quote_safe(const char *s)
{
    const char *p = s, *end = s + strlen(s);
    while (p < end) {
        size_t n;
        int32_t cp = ra_utf8_decode(p, (size_t)(end - p), &n);
        /* an invalid byte, or what YAML would not read back as written (NBSP too) */
        if (cp == RA_UTF8_INVALID || is_unprintable(cp) || cp == 0xA0) return 0;
        p += n;
    }
    /* leading or trailing spaces survive quoting, but keep them visible */
    return *s != ' ' && (!*s || s[strlen(s) - 1] != ' ');
}

void yamlrender_key(struct buf *b, const char *key)
{
    if (plain_safe(key)) {
        buf_puts(b, key);
    } else if (single_quote_safe(key)) {
        buf_add(b, "'", 1);
        for (const char *p = key; *p; p++) buf_add(b, *p == '\'' ? "''" : p, *p == '\'' ? 2 : 1);
        buf_add(b, "'", 1);
    } else {
        yamlrender_json_string(b, key);
    }
}

/* Writes a scalar (or an empty collection as {} or []), or a key when the
 * value is a string, quoting as the header says. */
static void scalar(struct buf *b, const cJSON *v)
{
    if (cJSON_IsString(v))
        yamlrender_key(b, v->valuestring);
    else if (cJSON_IsTrue(v))
        buf_puts(b, "true");
    else if (cJSON_IsFalse(v))
        buf_puts(b, "false");
    else if (cJSON_IsNumber(v))
        put_number(b, v->valuedouble);
    else if (cJSON_IsArray(v))
        buf_puts(b, "[]");
    else if (cJSON_IsObject(v))
        buf_puts(b, "{}");
    else
        buf_puts(b, "null");
}

static int is_block(const cJSON *v) { return (cJSON_IsArray(v) || cJSON_IsObject(v)) && v->child; }

void yamlrender_inline(struct buf *b, const cJSON *v, size_t col, const struct yamlrender_style *st)
{
    if (!is_block(v)) {
        scalar(b, v);
        return;
    }
    for (const cJSON *it = v->child; it; it = it->next) {
        if (it != v->child) {
            buf_puts(b, st->nl);
            yamlrender_spaces(b, col);
        }
        if (cJSON_IsObject(v)) {
            yamlrender_key(b, it->string);
            buf_add(b, ":", 1);
            yamlrender_after_key(b, it, col, st);
        } else {
            buf_add(b, "- ", 2);
            yamlrender_inline(b, it, col + 2, st);
        }
    }
}

void yamlrender_after_key(struct buf *b, const cJSON *v, size_t col,
                          const struct yamlrender_style *st)
{
    if (!is_block(v)) {
        buf_add(b, " ", 1);
        scalar(b, v);
        return;
    }
    size_t c = col + (cJSON_IsObject(v) ? st->step : st->seqoff);
    buf_puts(b, st->nl);
    yamlrender_spaces(b, c);
    yamlrender_inline(b, v, c, st);
}

static void json_at(struct buf *b, const cJSON *v, size_t indent, size_t level)
{
    if (!is_block(v)) {
        if (cJSON_IsString(v))
            yamlrender_json_string(b, v->valuestring);
        else
            scalar(b, v);
        return;
    }
    int obj = cJSON_IsObject(v);
    buf_add(b, obj ? "{" : "[", 1);
    for (const cJSON *it = v->child; it; it = it->next) {
        if (it != v->child) buf_add(b, indent ? "," : ", ", indent ? 1 : 2);
        if (indent) {
            buf_add(b, "\n", 1);
            yamlrender_spaces(b, indent * (level + 1));
        }
        if (obj) {
            yamlrender_json_string(b, it->string);
            buf_add(b, ": ", 2); /* libyaml needs the space in flow YAML */
        }
        json_at(b, it, indent, level + 1);
    }
    if (indent) {
        buf_add(b, "\n", 1);
        yamlrender_spaces(b, indent * level);
    }
    buf_add(b, obj ? "}" : "]", 1);
}

void yamlrender_json(struct buf *b, const cJSON *v, size_t indent) { json_at(b, v, indent, 0); }
