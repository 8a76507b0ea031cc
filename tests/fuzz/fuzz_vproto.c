/*
 * fuzz_vproto.c - libFuzzer target for the validator protocol's parsers
 * (run/vproto.c), which read what comes over the validator's socket.
 * Invariants: a request either decodes into 1..VPROTO_ARGV_MAX words with a
 * timeout in range, which encode and decode back to the same, or is
 * refused with a reason; a reply either decodes (its output within the
 * bound it was sent with) or is refused with a reason and nothing to free.
 */
#include "run/vproto.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "actions/exec.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

static void request(const char *s, size_t n)
{
    char **argv, **back, why[256] = "";
    uint64_t t, t2;
    if (vproto_request_decode(s, n, &argv, &t, why, sizeof why) < 0) {
        CHECK(why[0] != '\0');
        return;
    }
    size_t words = 0;
    while (argv[words]) words++;
    CHECK(words >= 1 && words <= VPROTO_ARGV_MAX && argv[0][0]);
    CHECK(t >= 1 && t <= VPROTO_TIMEOUT_MAX_MS);
    char *line = vproto_request_encode(argv, t);
    if (line) { /* a decoded request re-encodes, unless its escapes grew it past the bound */
        CHECK(vproto_request_decode(line, strlen(line), &back, &t2, why, sizeof why) == 0);
        CHECK(t2 == t);
        for (size_t i = 0; i < words; i++) CHECK(back[i] && !strcmp(back[i], argv[i]));
        CHECK(!back[words]);
        exec_argv_free(back);
        free(line);
    }
    exec_argv_free(argv);
}

static void reply(const char *s, size_t n)
{
    struct vproto_result r;
    char *store, why[256] = "", desc[1200];
    if (vproto_reply_decode(s, n, &r, &store, why, sizeof why) < 0) {
        CHECK(why[0] != '\0' && store == NULL);
        return;
    }
    CHECK(r.output && strlen(r.output) == r.output_len);
    CHECK(r.ran || r.error);
    vproto_describe(&r, 1000, desc, sizeof desc);
    char *again = vproto_reply_encode(&r);
    CHECK(again && again[strlen(again) - 1] == '\n');
    free(again);
    free(store);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    request((const char *)data, size);
    reply((const char *)data, size);
    return 0;
}
