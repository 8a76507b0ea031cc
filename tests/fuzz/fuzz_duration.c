/*
 * fuzz_duration.c - libFuzzer target for val_duration/val_format_duration.
 * Invariants: an accepted duration is >= 0 and its formatted form parses
 * back to the same value; any int64 formats to a string that parses back
 * (with its sign removed); rejected input always gets a reason.
 */
#include "config/value.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

static void check_format(int64_t ns)
{
    char buf[40], err[128];
    int64_t back;

    val_format_duration(ns, buf, sizeof buf);
    CHECK(strlen(buf) > 1 && strlen(buf) < 32);
    if (ns >= 0) {
        CHECK(val_duration(buf, &back, err, sizeof err) == 0 && back == ns);
    } else if (ns != INT64_MIN) {
        CHECK(buf[0] == '-');
        CHECK(val_duration(buf + 1, &back, err, sizeof err) == 0 && back == -ns);
        CHECK(val_duration(buf, &back, err, sizeof err) != 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = strndup((const char *)data, size), err[160];
    int64_t ns = -1;
    uint64_t raw = 0;

    if (!s) return 0;
    err[0] = '\0';
    if (val_duration(s, &ns, err, sizeof err) == 0) {
        CHECK(ns >= 0);
        check_format(ns);
    } else {
        CHECK(err[0] != '\0' && strlen(err) < sizeof err);
    }
    free(s);
    if (size >= 8) {
        memcpy(&raw, data, 8);
        check_format((int64_t)raw);
    }
    return 0;
}
