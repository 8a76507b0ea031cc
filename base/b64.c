/*
 * b64.c - standard base64 encoding and Go-compatible decoding (b64.h).
 */
#include "base/b64.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *ra_b64_encode(const void *p, size_t n)
{
    const unsigned char *s = p;
    if (n > ((size_t)-1 - 1) / 4 * 3 - 3) return NULL;
    char *out = malloc(4 * ((n + 2) / 3) + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) |
                     (i + 2 < n ? s[i + 2] : 0);
        *o++ = A[v >> 18 & 63];
        *o++ = A[v >> 12 & 63];
        *o++ = i + 1 < n ? A[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? A[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

long ra_b64_decode(const char *s, unsigned char **out)
{
    size_t len = strlen(s), n = 0, pad = 0;
    unsigned char *buf = malloc(len / 4 * 3 + 3);
    unsigned q[4];
    int k = 0;
    if (!buf) return -ENOMEM;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (ch == '\r' || ch == '\n') continue;
        if (ch == '=') {
            if (k < 2) goto bad;
            pad++;
            q[k++] = 0;
        } else {
            const char *p = ch ? strchr(A, ch) : NULL;
            if (!p || pad) goto bad;
            q[k++] = (unsigned)(p - A);
        }
        if (k == 4) {
            buf[n++] = (unsigned char)(q[0] << 2 | q[1] >> 4);
            buf[n++] = (unsigned char)(q[1] << 4 | q[2] >> 2);
            buf[n++] = (unsigned char)(q[2] << 6 | q[3]);
            k = 0;
            if (pad) {
                n -= pad;
                /* nothing may follow the padding but line breaks */
                for (size_t j = i + 1; j < len; j++)
                    if (s[j] != '\r' && s[j] != '\n') goto bad;
                break;
            }
        }
    }
    if (k != 0) goto bad;
    buf[n] = '\0';
    *out = buf;
    return (long)n;
bad:
    free(buf);
    return -EINVAL;
}
