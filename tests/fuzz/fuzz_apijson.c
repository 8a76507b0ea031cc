/*
 * fuzz_apijson.c - libFuzzer target for the Kubernetes API replies the
 * agent reads: owner resolution's steps (owner__step in kube/owner.c) and
 * the rollout decision (actions/rollout_decide.c) on the object that would
 * be patched.
 *
 * Input: up to 8 replies separated by NUL bytes, fed to the chain in
 * order, starting at the pod. A reply "!NNN" is that HTTP status with no
 * body, "!" alone a failed request; anything else is a 200 body. The last
 * reply is then decided on as the object of every kind in the table, with
 * a guard and --min-interval taken from its length.
 *
 * Invariants: a finished chain has a status; OWNER_OK names a kind that
 * can roll, its patch type, a valid object name and an /apis/ path; any
 * other status carries a one-line error and no kind; an unfinished chain
 * names a valid object to fetch next. The decision is one of the four
 * verdicts; BLOCKED always says why, the others never; WAIT is within
 * --min-interval; CURRENT only when the template carries our hash; a
 * blocking kinds_not_rolling reason is never PATCHed.
 */
#include "actions/rollout_decide.h"
#include "base/log.h"
#include "kube/k8sname.h"
#include "kube/kube.h"
#include "kube/owner.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

#define HASH "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define KEY "reload-agent.io/config-hash"

static int one_line(const char *s) { return s && s[0] && !strchr(s, '\n'); }

static void check_chain_done(const struct owner__chain *c)
{
    const struct owner_info *o = c->o;

    if (o->status == OWNER_OK) {
        CHECK(o->error == NULL);
        CHECK(o->ki && o->ki->can_roll && o->kind == o->ki->kind);
        CHECK(o->patch_type && o->patch_type == o->ki->patch_type);
        CHECK(k8s_is_dns1123_subdomain(o->name));
        CHECK(strncmp(o->path, "/apis/", 6) == 0 && o->uid && o->api_version);
        CHECK(!o->via_kind || (o->via_name && k8s_is_dns1123_subdomain(o->via_name)));
    } else {
        CHECK(o->status == OWNER_NO_ROLLOUT || o->status == OWNER_API_ERROR);
        CHECK(one_line(o->error));
        CHECK(o->kind == NULL && o->path == NULL);
    }
}

static void decide_as(const struct kinds_kind *k, const char *body, size_t len, size_t salt)
{
    struct rollout_state st;
    struct rollout_guard g = {0};
    struct rollout_decision d;
    char buf[600];
    int blocks = -1;

    if (rollout__parse_state(body, len, KEY, &st) < 0) return;
    if (salt & 1) {
        memcpy(g.last_set, HASH, 64);
        g.last_set[0] = 'f';
    }
    g.nflips = salt % (ROLLOUT_FLIP_LIMIT + 1);
    for (size_t i = 0; i < g.nflips; i++) g.flips[i] = 1767225600 - (time_t)(i * 300);
    struct rollout_input in = {.kind = k,
                               .hash = HASH,
                               .files = (salt & 2) ? "{\"/a\":\"x\"}" : NULL,
                               .min_interval_ms = (salt & 4) ? 60000 : 0,
                               .now = 1767225600,
                               .guard = &g,
                               .flip_counted = (salt & 8) != 0};
    rollout__decide(&st, &in, &d);
    const char *why = kinds_not_rolling(k, st.root, buf, sizeof buf, &blocks);
    CHECK(blocks == 0 || blocks == 1);
    CHECK(!why || (one_line(why) && strlen(why) < sizeof buf));
    switch (d.verdict) {
    case ROLLOUT_V_BLOCKED:
        CHECK(one_line(d.reason) && d.wait_ms == 0);
        CHECK(d.owner_blocks == (why && blocks));
        break;
    case ROLLOUT_V_CURRENT:
        CHECK(st.current && strcmp(st.current, HASH) == 0);
        /* fall through */
    case ROLLOUT_V_PATCH:
    case ROLLOUT_V_WAIT:
        CHECK(d.reason[0] == '\0' && !d.owner_blocks && !(why && blocks));
        CHECK(!d.warning || (why && !blocks && strcmp(d.warning, why) == 0));
        CHECK((d.verdict == ROLLOUT_V_WAIT) == (d.wait_ms > 0));
        CHECK(d.wait_ms <= in.min_interval_ms);
        break;
    default: CHECK(0);
    }
    rollout__state_free(&st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const kinds[] = {"Deployment", "StatefulSet", "DaemonSet", "Rollout",
                                        "ReplicaSet", "Job",         "CronJob"};
    struct owner__chain c;
    const char *p = (const char *)data, *end = p + size, *last = p;
    size_t last_len = 0;
    int more = 1;

    log_configure(RA_LOG_ERROR, RA_LOG_FORMAT_TEXT);
    owner__chain_init(&c, "pod-0");
    for (int step = 0; step < 8 && more && p <= end; step++) {
        const char *nul = memchr(p, '\0', (size_t)(end - p));
        size_t n = nul ? (size_t)(nul - p) : (size_t)(end - p);

        last = p;
        last_len = n;
        if (n >= 1 && p[0] == '!') {
            char code[8] = "";
            memcpy(code, p + 1, n - 1 < 7 ? n - 1 : 7);
            long st = atol(code);
            more = owner__step(&c, "ns", st, st ? NULL : "connection refused", NULL, 0);
        } else {
            more = owner__step(&c, "ns", 200, NULL, p, n);
        }
        if (more) {
            CHECK(k8s_is_dns1123_subdomain(c.name) && c.child);
            char *path = owner__chain_path(&c, "ns");
            CHECK(strncmp(path, "/api", 4) == 0);
            free(path);
        } else {
            check_chain_done(&c);
        }
        if (!nul) break;
        p = nul + 1;
    }
    owner__chain_free(&c);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        decide_as(kinds_named(kinds[k]), last, last_len, last_len + k);
    return 0;
}
