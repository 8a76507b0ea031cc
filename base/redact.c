/*
 * redact.c - URL, header and message redaction (see redact.h).
 */
#include "base/redact.h"

#include <string.h>

/* An output buffer that counts what it could not hold. */
struct sink {
    char *out;
    size_t cap, len;
};

static void put(struct sink *s, const char *p, size_t n)
{
    if (s->len < s->cap) {
        size_t room = s->cap - 1 - s->len;
        memcpy(s->out + s->len, p, n < room ? n : room);
        s->out[s->len + (n < room ? n : room)] = '\0';
    }
    s->len += n;
}

static void puts_(struct sink *s, const char *p) { put(s, p, strlen(p)); }

static size_t finish(struct sink *s)
{
    if (s->cap) s->out[s->len < s->cap ? s->len : s->cap - 1] = '\0';
    return s->len;
}

/* The parts of a URL: [scheme://][userinfo@]rest[?query][#fragment]. */
struct url_parts {
    size_t auth;     /* where the authority starts (after "://"), 0 if none */
    size_t at;       /* index of the userinfo's '@', or (size_t)-1 */
    size_t query;    /* index of '?', or the length */
    size_t fragment; /* index of '#', or the length */
    size_t len;
};

static void split(const char *u, struct url_parts *p)
{
    const char *sep = strstr(u, "://");
    p->len = strlen(u);
    p->auth = sep ? (size_t)(sep - u) + 3 : 0;
    size_t end = p->auth + strcspn(u + p->auth, "/?#");
    p->at = (size_t)-1;
    for (size_t i = p->auth; i < end; i++)
        if (u[i] == '@') p->at = i; /* the last '@' ends the userinfo */
    p->fragment = end + strcspn(u + end, "#");
    const char *q = memchr(u + end, '?', p->fragment - end);
    p->query = q ? (size_t)(q - u) : p->fragment;
}

size_t redact_url(const char *url, char *out, size_t outlen)
{
    struct sink s = {out, outlen, 0};
    struct url_parts p;
    const char *u = url ? url : "";
    split(u, &p);
    if (p.at != (size_t)-1) {
        put(&s, u, p.auth);
        puts_(&s, REDACTED);
        put(&s, u + p.at, p.query - p.at);
    } else {
        put(&s, u, p.query);
    }
    if (p.query < p.fragment) { /* ?name=value&name2=value2: the names stay */
        size_t i = p.query;
        while (i < p.fragment) {
            size_t seg = i + 1 + strcspn(u + i + 1, "&#");
            if (seg > p.fragment) seg = p.fragment;
            const char *eq = memchr(u + i, '=', seg - i);
            if (eq) {
                put(&s, u + i, (size_t)(eq - (u + i)) + 1);
                puts_(&s, REDACTED);
            } else {
                put(&s, u + i, seg - i); /* a bare name carries no value */
            }
            i = seg;
        }
    }
    if (p.fragment < p.len) puts_(&s, "#" REDACTED);
    return finish(&s);
}

size_t redact_header(const char *h, char *out, size_t outlen)
{
    struct sink s = {out, outlen, 0};
    const char *colon = h ? strchr(h, ':') : NULL;
    if (colon) {
        put(&s, h, (size_t)(colon - h));
        puts_(&s, ": " REDACTED);
    } else {
        puts_(&s, REDACTED);
    }
    return finish(&s);
}

size_t redact_text(const char *text, const char *url, char *out, size_t outlen)
{
    struct sink s = {out, outlen, 0};
    struct url_parts p;
    const char *t = text ? text : "", *u = url ? url : "";
    char red[2048];
    split(u, &p);
    redact_url(u, red, sizeof red);
    /* the secrets, longest first: the URL, its userinfo, its query */
    struct {
        const char *p;
        size_t n;
        const char *with;
    } sec[3] = {{u, p.len, red},
                {u + p.auth, p.at != (size_t)-1 ? p.at - p.auth : 0, REDACTED},
                {u + p.query, p.fragment - p.query, "?" REDACTED}};
    while (*t) {
        int hit = 0;
        for (int k = 0; k < 3 && !hit; k++)
            if (sec[k].n > 1 && strncmp(t, sec[k].p, sec[k].n) == 0) {
                puts_(&s, sec[k].with);
                t += sec[k].n;
                hit = 1;
            }
        if (!hit) put(&s, t++, 1);
    }
    return finish(&s);
}

size_t redact_url_origin(const char *url, char *out, size_t outlen)
{
    struct sink s = {out, outlen, 0};
    struct url_parts p;
    const char *u = url ? url : "";
    split(u, &p);
    size_t host = p.at != (size_t)-1 ? p.at + 1 : p.auth;
    size_t end = p.auth + strcspn(u + p.auth, "/?#");
    put(&s, u, p.auth);
    put(&s, u + host, end - host);
    if (end < p.len && strcmp(u + end, "/") != 0) puts_(&s, "/" REDACTED);
    return finish(&s);
}

size_t redact_text_origin(const char *text, const char *url, char *out, size_t outlen)
{
    struct sink s = {out, outlen, 0};
    struct url_parts p;
    const char *t = text ? text : "", *u = url ? url : "";
    char red[2048];
    split(u, &p);
    redact_url_origin(u, red, sizeof red);
    size_t end = p.auth + strcspn(u + p.auth, "/?#");
    struct {
        const char *p;
        size_t n;
        const char *with;
    } sec[3] = {{u, p.len, red},
                {u + p.auth, p.at != (size_t)-1 ? p.at - p.auth : 0, REDACTED},
                {u + end, p.len - end, "/" REDACTED}};
    while (*t) {
        int hit = 0;
        for (int k = 0; k < 3 && !hit; k++)
            if (sec[k].n > 1 && strncmp(t, sec[k].p, sec[k].n) == 0) {
                puts_(&s, sec[k].with);
                t += sec[k].n;
                hit = 1;
            }
        if (!hit) put(&s, t++, 1);
    }
    return finish(&s);
}
