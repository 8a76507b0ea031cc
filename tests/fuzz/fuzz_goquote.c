/*
 * fuzz_goquote.c - libFuzzer target for config/goquote.c. Invariants:
 * quoting any bytes and unquoting gives the bytes back; a literal that
 * unquotes re-quotes to a literal that unquotes to the same bytes; the
 * bounded gq_quote_to output is a prefix of gq_quote's (or all of it).
 */
#include "config/goquote.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

/* Unquotes the whole of q (a gq_quote result) and checks it equals s. */
static void check_round_trip(const char *q, const char *s, size_t len)
{
    char err[128], *out;
    size_t outlen, used;

    CHECK(gq_unquote(q, strlen(q), &out, &outlen, &used, err, sizeof err) == 0);
    CHECK(used == strlen(q));
    CHECK(outlen == len && memcmp(out, s, len) == 0 && out[outlen] == '\0');
    free(out);
}

static void check_bounded(const char *q, const char *s, size_t len, size_t dstlen)
{
    char dst[64];
    size_t n, qlen = strlen(q);

    memset(dst, 'X', sizeof dst);
    gq_quote_to(dst, dstlen, s, len);
    n = strlen(dst);
    CHECK(n < dstlen);
    if (qlen < dstlen) {
        CHECK(strcmp(dst, q) == 0);
    } else {
        CHECK(n >= 5 && memcmp(dst + n - 4, "...\"", 4) == 0);
        CHECK(memcmp(dst, q, n - 4) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    char err[128], *out, *q;
    size_t outlen, used;
    int rc;

    q = gq_quote(s, size);
    if (!q) return 0;
    CHECK(q[0] == '"');
    check_round_trip(q, s, size);
    check_bounded(q, s, size, 6 + size % 58);
    free(q);

    err[0] = '\0';
    rc = gq_unquote(s, size, &out, &outlen, &used, err, sizeof err);
    if (rc == 0) {
        CHECK(used >= 2 && used <= size && s[used - 1] == '"');
        CHECK(out[outlen] == '\0');
        q = gq_quote(out, outlen);
        if (q) check_round_trip(q, out, outlen);
        free(q);
        free(out);
    } else {
        CHECK(rc == -22 /* EINVAL */ && out == NULL && err[0] != '\0');
    }
    return 0;
}
