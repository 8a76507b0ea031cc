/*
 * log.c - levelled text/JSON line logging to stderr (see log.h).
 *
 * A record renders its fields into a growing buffer; log_rec_end composes
 * the whole line and writes it with one write(2), so lines never interleave.
 * Allocation failure while logging drops fields, never the process.
 */
#include "base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/text.h"
#include "base/utf8.h"

static struct {
    enum log_level min;
    enum log_format fmt;
    int fd;
} g_log = {RA_LOG_INFO, RA_LOG_FORMAT_TEXT, 2};

void log_configure(enum log_level min, enum log_format fmt)
{
    g_log.min = min;
    g_log.fmt = fmt;
}

int log_is_enabled(enum log_level lvl) { return lvl >= g_log.min; }

void log_set_fd(int fd) { g_log.fd = fd; }

const char *const log_level_names[] = {"debug", "info", "warn", "error", NULL};
const char *const log_format_names[] = {"text", "json", NULL};

/* The name of a level ("debug", "info", "warn", "error"). */
static const char *level_name(enum log_level lvl)
{
    return (unsigned)lvl <= RA_LOG_ERROR ? log_level_names[lvl] : "?";
}

/* Appends to b the JSON string literal for bytes s[0..n), quotes
 * included; invalid UTF-8 bytes become the text \\xHH. */
static void json_escape(struct buf *b, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    buf_putc(b, '"');
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        if (c == '"' || c == '\\') {
            buf_putc(b, '\\');
            buf_putc(b, (char)c);
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            const char *e = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
            if (e)
                buf_add(b, e, 2);
            else
                buf_printf(b, "\\u%04x", c);
            i++;
        } else {
            size_t l;
            int32_t cp = ra_utf8_decode(s + i, n - i, &l);
            if (cp == RA_UTF8_INVALID) {
                /* invalid byte: the literal text \xHH (backslash escaped) */
                buf_printf(b, "\\\\x%02x", c);
                i++;
            } else if (ra_text_is_break_like(cp)) {
                buf_printf(b, "\\u%04x", (unsigned)cp & 0xFFFF);
                i += l;
            } else {
                buf_add(b, p + i, l);
                i += l;
            }
        }
    }
    buf_putc(b, '"');
}

/* Text format: strings are written raw unless they contain spaces, quotes,
 * control characters, '=', list punctuation, bytes that are not valid UTF-8
 * or break-like code points: then JSON-quoted (json_escape). */
static void text_value(struct buf *b, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    int plain = n > 0;
    for (size_t i = 0; i < n && plain;) {
        unsigned c = p[i];
        size_t l;
        if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c == 0x7f || c == ',' || c == '[' ||
            c == ']')
            plain = 0;
        int32_t cp = ra_utf8_decode(s + i, n - i, &l);
        if (cp == RA_UTF8_INVALID || ra_text_is_break_like(cp)) plain = 0;
        i += l;
    }
    if (plain)
        buf_add(b, s, n);
    else
        json_escape(b, s, n);
}

/* Text format, the message: written as is, except that no byte of it can
 * end the line or hide: \n \r \t as those two characters, everything else
 * under the one-line policy of base/text.h (other control characters and
 * bytes that are not valid UTF-8 as \xHH, break-like code points as
 * \uHHHH). One record is one line, whatever the message holds. */
static void text_msg(struct buf *b, const char *s, size_t n)
{
    char tmp[RA_TEXT_STEP_MAX];
    for (size_t i = 0; i < n;) {
        char c = s[i];
        size_t l, w;
        if (c == '\n' || c == '\r' || c == '\t') {
            tmp[0] = '\\';
            tmp[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
            l = 2;
            w = 1;
        } else {
            l = ra_text_step(s + i, n - i, tmp, &w);
        }
        buf_add(b, tmp, l);
        i += w;
    }
}

int log_rec_begin(struct log_rec *r, enum log_level lvl, const char *event)
{
    memset(r, 0, sizeof *r);
    if (!log_is_enabled(lvl)) return 0;
    r->active = 1;
    r->lvl = lvl;
    r->event = event;
    return 1;
}

/* Starts a field: its key. Returns 0, or -1 when the record is off or out
 * of memory (the field is dropped). */
static int field_key(struct log_rec *r, const char *key)
{
    if (!r->active || r->fields.oom) return -1;
    if (g_log.fmt == RA_LOG_FORMAT_JSON) {
        buf_putc(&r->fields, ',');
        json_escape(&r->fields, key, strlen(key));
        buf_putc(&r->fields, ':');
    } else {
        buf_putc(&r->fields, ' ');
        buf_puts(&r->fields, key);
        buf_putc(&r->fields, '=');
    }
    return 0;
}

void log_rec_strn(struct log_rec *r, const char *key, const char *val, size_t n)
{
    if (field_key(r, key)) return;
    if (g_log.fmt == RA_LOG_FORMAT_JSON)
        json_escape(&r->fields, val, n);
    else
        text_value(&r->fields, val, n);
    r->nfields++;
}

void log_rec_str(struct log_rec *r, const char *key, const char *val)
{
    if (!val) val = "";
    log_rec_strn(r, key, val, strlen(val));
}

void log_rec_int(struct log_rec *r, const char *key, long long v)
{
    if (field_key(r, key)) return;
    buf_printf(&r->fields, "%lld", v);
    r->nfields++;
}

void log_rec_num(struct log_rec *r, const char *key, double v)
{
    if (field_key(r, key)) return;
    buf_printf(&r->fields, "%.6g", v);
    r->nfields++;
}

void log_rec_bool(struct log_rec *r, const char *key, int v)
{
    if (field_key(r, key)) return;
    buf_puts(&r->fields, v ? "true" : "false");
    r->nfields++;
}

void log_rec_strv(struct log_rec *r, const char *key, const char *const *v, size_t n)
{
    if (field_key(r, key)) return;
    int json = g_log.fmt == RA_LOG_FORMAT_JSON;
    buf_putc(&r->fields, '[');
    for (size_t i = 0; i < n; i++) {
        if (i) buf_putc(&r->fields, ',');
        if (json)
            json_escape(&r->fields, v[i], strlen(v[i]));
        else
            text_value(&r->fields, v[i], strlen(v[i]));
    }
    buf_putc(&r->fields, ']');
    r->nfields++;
}

static void format_time(char *out, size_t n)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t l = strftime(out, n, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + l, n - l, ".%03ldZ", ts.tv_nsec / 1000000);
}

static void write_all(const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(g_log.fd, s, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return; /* nowhere to report a failing stderr */
        }
        s += w;
        n -= (size_t)w;
    }
}

static void rec_vend(struct log_rec *r, const char *fmt, va_list ap)
{
    char msg[2048], ts[40];
    struct buf line = {0};
    if (!r->active) return;
    vsnprintf(msg, sizeof msg, fmt, ap);
    format_time(ts, sizeof ts);
    if (g_log.fmt == RA_LOG_FORMAT_JSON) {
        buf_printf(&line, "{\"time\":\"%s\",\"level\":\"%s\"", ts, level_name(r->lvl));
        if (r->event) {
            buf_puts(&line, ",\"event\":");
            json_escape(&line, r->event, strlen(r->event));
        }
        buf_puts(&line, ",\"msg\":");
        json_escape(&line, msg, strlen(msg));
        buf_add(&line, buf_str(&r->fields), r->fields.len);
        buf_puts(&line, "}\n");
    } else {
        buf_printf(&line, "%s %-5s ", ts, level_name(r->lvl));
        if (r->event) buf_printf(&line, "[%s] ", r->event);
        text_msg(&line, msg, strlen(msg));
        buf_add(&line, buf_str(&r->fields), r->fields.len);
        buf_putc(&line, '\n');
    }
    if (line.p) write_all(line.p, line.len);
    if (line.oom) write_all("\n", 1); /* what fitted, on a line of its own */
    buf_free(&line);
    buf_free(&r->fields);
    r->active = 0;
}

void log_rec_end(struct log_rec *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rec_vend(r, fmt, ap);
    va_end(ap);
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
    struct log_rec r;
    va_list ap;
    if (!log_rec_begin(&r, lvl, NULL)) return;
    va_start(ap, fmt);
    rec_vend(&r, fmt, ap);
    va_end(ap);
}

void ra_oom(void)
{
    static const char msg[] = "reload-agent: out of memory\n";
    write_all(msg, sizeof msg - 1);
    exit(70);
}

char *ra_strdup(const char *s)
{
    char *d;
    if (!s) return NULL;
    if (!(d = strdup(s))) ra_oom();
    return d;
}

char *ra_asprintf(const char *fmt, ...)
{
    va_list ap;
    char *s;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) ra_oom();
    return s;
}

int ra_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;
    if (err && errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
        ra_one_line_fix(err, errlen);
    }
    return rc;
}
