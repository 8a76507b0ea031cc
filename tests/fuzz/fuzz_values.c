/*
 * fuzz_values.c - libFuzzer target for val_signal, val_bool, val_list and
 * val_uint, all fed the same string. Invariants: accepted signals are in
 * 1..64 and their canonical name parses back to them; lists hold trimmed,
 * non-empty, comma-free items and re-joining them parses to the same list;
 * accepted integers are in range and print back to the input digits.
 */
#include "config/value.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

static void check_signal(const char *s)
{
    char err[160];
    const char *name;
    int sig = 0, back = 0;

    if (val_signal(s, &sig, err, sizeof err) != 0) {
        CHECK(err[0] != '\0');
        return;
    }
    CHECK(sig >= 1 && sig <= 64);
    name = val_signal_name(sig);
    if (name) {
        CHECK(strncmp(name, "SIG", 3) == 0);
        CHECK(val_signal(name, &back, err, sizeof err) == 0 && back == sig);
        CHECK(val_signal(name + 3, &back, err, sizeof err) == 0 && back == sig);
    }
}

static void check_list(const char *s)
{
    char err[160], **items, **again, *joined;
    size_t n, n2, k, len = 0;

    if (val_list(s, &items, &n, err, sizeof err) != 0) {
        CHECK(items == NULL && err[0] != '\0');
        return;
    }
    CHECK(items[n] == NULL);
    for (k = 0; k < n; k++) {
        size_t l = strlen(items[k]);
        CHECK(l > 0 && !strchr(items[k], ','));
        CHECK(items[k][0] != ' ' && items[k][0] != '\t' && items[k][l - 1] != ' ' &&
              items[k][l - 1] != '\t');
        len += l + 1;
    }
    joined = calloc(1, len + 1);
    CHECK(joined != NULL);
    for (k = 0; k < n; k++) {
        if (k) strcat(joined, ",");
        strcat(joined, items[k]);
    }
    CHECK(val_list(joined, &again, &n2, err, sizeof err) == 0 && n2 == n);
    for (k = 0; k < n; k++) CHECK(strcmp(items[k], again[k]) == 0);
    val_list_free(again);
    val_list_free(items);
    free(joined);
}

static void check_uint(const char *s)
{
    char err[160], buf[32];
    uint64_t v = 0;
    const char *digits = s;

    if (val_uint(s, 10, UINT64_MAX - 10, &v, err, sizeof err) != 0) {
        CHECK(err[0] != '\0');
        return;
    }
    CHECK(v >= 10 && v <= UINT64_MAX - 10);
    while (digits[0] == '0' && digits[1]) digits++;
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    CHECK(strcmp(buf, digits) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = strndup((const char *)data, size), err[160];
    int b = -1;

    if (!s) return 0;
    check_signal(s);
    if (val_bool(s, &b, err, sizeof err) == 0)
        CHECK((b == 0 || b == 1) && strlen(s) <= 5);
    else
        CHECK(err[0] != '\0');
    check_list(s);
    check_uint(s);
    free(s);
    return 0;
}
