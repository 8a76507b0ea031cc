/*
 * jsonscan.c - counts the values of a JSON text and finds request.uid
 * (see jsonscan.h), with an explicit stack of open containers: the path
 * matters only at depths 1 ("request" in the review) and 2 ("uid").
 */
#include "webhook/jsonscan.h"

#include <string.h>

#define MAX_DEPTH 1000

struct scan {
    const char *s;
    size_t n, i;
};

/* White space as cJSON skips it: every byte up to 32. */
static void skip_ws(struct scan *sc)
{
    while (sc->i < sc->n && (unsigned char)sc->s[sc->i] <= 32) sc->i++;
}

/* A string at sc->i (its opening quote): moves past it. Returns 0, or -1
 * when it does not end; *plain is 0 when it holds an escape. Any byte may
 * be in it (cJSON lets control characters through). */
static int skip_string(struct scan *sc, int *plain)
{
    *plain = 1;
    for (sc->i++; sc->i < sc->n; sc->i++) {
        char c = sc->s[sc->i];
        if (c == '\\') {
            *plain = 0;
            sc->i++;
        } else if (c == '"') {
            sc->i++;
            return 0;
        }
    }
    return -1;
}

/* A number or a literal at sc->i: moves past its characters. */
static int skip_atom(struct scan *sc)
{
    size_t start = sc->i;
    while (sc->i < sc->n && sc->s[sc->i] && strchr("+-.0123456789eEtruefalsn", sc->s[sc->i]))
        sc->i++;
    return sc->i > start ? 0 : -1;
}

/* 1 if the string at [from, to) (quotes included) is the key k. */
static int key_is(const struct scan *sc, size_t from, size_t to, const char *k)
{
    size_t len = strlen(k);
    return to - from == len + 2 && memcmp(sc->s + from + 1, k, len) == 0;
}

long jsonscan_values(const char *s, size_t n, char *uid, size_t uidlen)
{
    struct scan sc = {s, n, n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0};
    char stack[MAX_DEPTH]; /* '{' or '[' of each open container */
    /* want: the value is request.uid; only the first "request" and its
     * first "uid" count (as a JSON parser's lookup finds them) */
    int depth = 0, in_request = 0, want = 0, seen_request = 0, seen_uid = 0;
    long count = 0;
    if (uidlen) uid[0] = '\0';
    for (;;) {
        skip_ws(&sc);
        if (sc.i >= n) return count;
        char c = s[sc.i];
        int plain;
        count++;
        if (c == '{' || c == '[') {
            if (depth == MAX_DEPTH) return count;
            stack[depth++] = c;
            want = 0;
            sc.i++;
            skip_ws(&sc);
            if (sc.i < n && (s[sc.i] == '}' || s[sc.i] == ']')) {
                if (s[sc.i] != (c == '{' ? '}' : ']')) return count;
                depth--;
                sc.i++;
                goto after_value;
            }
            if (c == '[') continue;
            goto key;
        } else if (c == '"') {
            size_t from = sc.i;
            if (skip_string(&sc, &plain) < 0) return count;
            size_t len = sc.i - from - 2;
            if (want && plain && len < uidlen) {
                memcpy(uid, s + from + 1, len);
                uid[len] = '\0';
            }
        } else if (skip_atom(&sc) < 0) {
            return count;
        }
        want = 0;
    after_value:
        for (;;) {
            skip_ws(&sc);
            if (depth == 0) return count; /* trailing data is the caller's */
            if (sc.i >= n) return count;
            char close = stack[depth - 1] == '{' ? '}' : ']';
            if (s[sc.i] == close) {
                if (depth == 2 && close == '}') in_request = 0;
                depth--;
                sc.i++;
                continue;
            }
            if (s[sc.i] != ',') return count;
            sc.i++;
            if (close == ']') break;
            goto key;
        }
        continue;
    key:
        skip_ws(&sc);
        if (sc.i >= n || s[sc.i] != '"') return count;
        size_t from = sc.i;
        if (skip_string(&sc, &plain) < 0) return count;
        want = depth == 2 && in_request && !seen_uid && key_is(&sc, from, sc.i, "uid");
        seen_uid |= want;
        if (depth == 1) {
            in_request = !seen_request && key_is(&sc, from, sc.i, "request");
            seen_request |= in_request;
        }
        skip_ws(&sc);
        if (sc.i >= n || s[sc.i] != ':') return count;
        sc.i++;
    }
}
