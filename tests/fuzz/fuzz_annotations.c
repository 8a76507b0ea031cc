/*
 * fuzz_annotations.c - libFuzzer target for annot_parse. Invariants: an
 * accepted file gives strictly sorted, valid keys that annot_get finds;
 * writing the set back in the kubelet's format (key=strconv.Quote(value),
 * '\n'-joined) parses to the same set; adding one final '\n' to a file that
 * has none does not change the outcome; errors name a line.
 */
#include "config/annotations.h"
#include "config/goquote.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

static char *serialize(const struct annot_set *s, size_t *len)
{
    char *buf = NULL, *q;
    size_t k, n = 0;

    for (k = 0; k < s->n; k++) {
        q = gq_quote(s->v[k].val, s->v[k].vlen);
        CHECK(q != NULL);
        size_t kl = strlen(s->v[k].key), ql = strlen(q);
        buf = realloc(buf, n + kl + ql + 3);
        CHECK(buf != NULL);
        if (k) buf[n++] = '\n';
        memcpy(buf + n, s->v[k].key, kl);
        n += kl;
        buf[n++] = '=';
        memcpy(buf + n, q, ql);
        n += ql;
        free(q);
    }
    *len = n;
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    struct annot_set set, again;
    char err[256], *text, *nl;
    size_t k, len;
    int rc, rc2;

    err[0] = '\0';
    rc = annot_parse(in, size, &set, err, sizeof err);
    if (rc != 0) {
        CHECK(set.v == NULL && set.n == 0);
        CHECK(strncmp(err, "line ", 5) == 0 || strcmp(err, "out of memory") == 0);
    } else {
        for (k = 0; k < set.n; k++) {
            CHECK(set.v[k].key[0] != '\0');
            CHECK(strspn(set.v[k].key,
                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._/") ==
                  strlen(set.v[k].key));
            CHECK(k == 0 || strcmp(set.v[k - 1].key, set.v[k].key) < 0);
            CHECK(annot_get(&set, set.v[k].key) == &set.v[k]);
            CHECK(set.v[k].val[set.v[k].vlen] == '\0');
        }
        text = serialize(&set, &len);
        CHECK(annot_parse(text ? text : "", len, &again, err, sizeof err) == 0 && again.n == set.n);
        for (k = 0; k < set.n; k++) {
            CHECK(strcmp(again.v[k].key, set.v[k].key) == 0 && again.v[k].vlen == set.v[k].vlen);
            CHECK(memcmp(again.v[k].val, set.v[k].val, set.v[k].vlen) == 0);
        }
        free(text);
        annot_free(&again);
        annot_free(&set);
    }
    if (size == 0 || in[size - 1] != '\n') {
        nl = malloc(size + 1);
        CHECK(nl != NULL);
        memcpy(nl, in, size);
        nl[size] = '\n';
        rc2 = annot_parse(nl, size + 1, &again, err, sizeof err);
        CHECK((rc == 0) == (rc2 == 0));
        annot_free(&again);
        free(nl);
    }
    return 0;
}
