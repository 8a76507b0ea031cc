/*
 * test_rollout.c - table-driven tests of the rollout decision
 * (actions/rollout_decide.c) and of the owner chain's steps
 * (owner__step in kube/owner.c) that choose the object it patches. Both
 * are pure: owner JSON in, decision out; no loop, no server (the chain
 * against a real API double is tests/test_owner.c, the whole action
 * tests/integration/test_k8s.py).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "actions/rollout_decide.h"
#include "base/log.h"
#include "kube/owner.h"

#define NOW 1767225600 /* 2026-01-01T00:00:00Z */
#define OURS "1111111111111111111111111111111111111111111111111111111111111111"
#define THEIRS "2222222222222222222222222222222222222222222222222222222222222222"
#define OLD "3333333333333333333333333333333333333333333333333333333333333333"
#define KEY "reload-agent.io/config-hash"

/* ---- the decision ---- */

struct decide_case {
    const char *name;
    const char *kind; /* of the patched object */
    const char *obj;  /* its GET reply; "@" stands for the hash annotation key */
    uint64_t min_interval_ms;
    const char *last_set; /* guard: the hash we set last, NULL = none */
    int recent_flips;     /* guard: flips within the window */
    int old_flips;        /* guard: flips outside it */
    int flip_counted;     /* the apply already recorded its flip */
    enum rollout_verdict want;
    uint64_t want_wait_ms;
    int want_flipped;
    int want_owner_blocks;
    const char *want_text; /* substring of reason (BLOCKED) or warning, NULL = none */
};

#define TPL(ann) "\"spec\":{\"template\":{\"metadata\":{\"annotations\":{" ann "}}}"
#define LAST(t) "\"metadata\":{\"annotations\":{\"reload-agent.io/last-rollout\":\"" t "\"}}"

static const struct decide_case DECIDE[] = {
    {"no hash yet: patch", "Deployment", "{" TPL("") "}}", 0, NULL, 0, 0, 0, ROLLOUT_V_PATCH, 0, 0,
     0, NULL},
    {"another hash: patch", "StatefulSet", "{" TPL("\"@\":\"" OLD "\"") "}}", 0, NULL, 0, 0, 0,
     ROLLOUT_V_PATCH, 0, 0, 0, NULL},
    {"already current", "Deployment", "{" TPL("\"@\":\"" OURS "\"") "}}", 0, NULL, 0, 0, 0,
     ROLLOUT_V_CURRENT, 0, 0, 0, NULL},
    {"already current beats the guard", "Deployment", "{" TPL("\"@\":\"" OURS "\"") "}}", 0, THEIRS,
     2, 0, 0, ROLLOUT_V_CURRENT, 0, 0, 0, NULL},
    {"paused Deployment: patch and warn", "Deployment", "{" TPL("") ",\"paused\":true}}", 0, NULL,
     0, 0, 0, ROLLOUT_V_PATCH, 0, 0, 0, "spec.paused is true"},
    {"paused false: no warning", "Deployment", "{" TPL("") ",\"paused\":false}}", 0, NULL, 0, 0, 0,
     ROLLOUT_V_PATCH, 0, 0, 0, NULL},
    {"OnDelete StatefulSet: patch and warn", "StatefulSet",
     "{" TPL("") ",\"updateStrategy\":{\"type\":\"OnDelete\"}}}", 0, NULL, 0, 0, 0, ROLLOUT_V_PATCH,
     0, 0, 0, "updateStrategy OnDelete"},
    {"OnDelete DaemonSet, already current", "DaemonSet",
     "{" TPL("\"@\":\"" OURS "\"") ",\"updateStrategy\":{\"type\":\"OnDelete\"}}}", 0, NULL, 0, 0,
     0, ROLLOUT_V_CURRENT, 0, 0, 0, "updateStrategy OnDelete"},
    {"RollingUpdate DaemonSet: no warning", "DaemonSet",
     "{" TPL("") ",\"updateStrategy\":{\"type\":\"RollingUpdate\"}}}", 0, NULL, 0, 0, 0,
     ROLLOUT_V_PATCH, 0, 0, 0, NULL},
    {"OnDelete means nothing to a Deployment", "Deployment",
     "{" TPL("") ",\"updateStrategy\":{\"type\":\"OnDelete\"}}}", 0, NULL, 0, 0, 0, ROLLOUT_V_PATCH,
     0, 0, 0, NULL},
    {"Rollout: patch", "Rollout", "{" TPL("") "}}", 0, NULL, 0, 0, 0, ROLLOUT_V_PATCH, 0, 0, 0,
     NULL},
    {"paused Rollout: patch and warn", "Rollout", "{" TPL("") ",\"paused\":true}}", 0, NULL, 0, 0,
     0, ROLLOUT_V_PATCH, 0, 0, 0, "the Rollout will not progress"},
    {"Rollout with a Deployment workloadRef is never patched", "Rollout",
     "{\"spec\":{\"workloadRef\":{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\","
     "\"name\":\"web\"}}}",
     0, NULL, 0, 0, 0, ROLLOUT_V_BLOCKED, 0, 0, 1,
     "spec.workloadRef names Deployment web: the pod template lives there"},
    {"Rollout with another workloadRef: blocked", "Rollout",
     "{\"spec\":{\"workloadRef\":{\"apiVersion\":\"apps/v1\",\"kind\":\"StatefulSet\","
     "\"name\":\"db\"}}}",
     0, NULL, 0, 0, 0, ROLLOUT_V_BLOCKED, 0, 0, 1,
     "names StatefulSet db (apps/v1), not an apps/v1 Deployment"},
    {"workloadRef Deployment of another group: blocked", "Rollout",
     "{\"spec\":{\"workloadRef\":{\"apiVersion\":\"extensions/v1beta1\","
     "\"kind\":\"Deployment\",\"name\":\"web\"}}}",
     0, NULL, 0, 0, 0, ROLLOUT_V_BLOCKED, 0, 0, 1, "not an apps/v1 Deployment"},
    {"API text in the reason stays one line", "Rollout",
     "{\"spec\":{\"workloadRef\":{\"apiVersion\":\"apps/v1\",\"kind\":\"Stateful\\nSet\","
     "\"name\":\"db\\r\"}}}",
     0, NULL, 0, 0, 0, ROLLOUT_V_BLOCKED, 0, 0, 1, "names Stateful\\x0aSet db\\x0d (apps/v1)"},
    {"a Deployment workloadRef's name stays one line", "Rollout",
     "{\"spec\":{\"workloadRef\":{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\","
     "\"name\":\"web\\nforged\"}}}",
     0, NULL, 0, 0, 0, ROLLOUT_V_BLOCKED, 0, 0, 1,
     "names Deployment web\\x0aforged: the pod template lives there"},
    {"guard: API paths in the reason stay one line", "Deployment",
     "{" TPL("\"@\":\"" THEIRS "\",\"reload-agent.io/config-files\":"
             "\"{\\\"/v/a\\\\nforged\\\":\\\"aaaa\\\"}\"") "}}",
     0, OLD, 2, 0, 0, ROLLOUT_V_BLOCKED, 0, 1, 0, "/v/a\\x0aforged"},
    {"workloadRef not an object: blocked", "Rollout", "{\"spec\":{\"workloadRef\":\"web\"}}", 0,
     NULL, 0, 0, 0, ROLLOUT_V_BLOCKED, 0, 0, 1, "spec.workloadRef is not an object"},
    {"workloadRef null: a plain Rollout", "Rollout", "{" TPL("") ",\"workloadRef\":null}}", 0, NULL,
     0, 0, 0, ROLLOUT_V_PATCH, 0, 0, 0, NULL},
    {"min-interval: rolled 10 s ago, wait 50 s", "Deployment",
     "{" LAST("2025-12-31T23:59:50Z") "," TPL("") "}}", 60000, NULL, 0, 0, 0, ROLLOUT_V_WAIT, 50000,
     0, 0, NULL},
    {"min-interval: rolled 2 min ago, patch", "Deployment",
     "{" LAST("2025-12-31T23:58:00Z") "," TPL("") "}}", 60000, NULL, 0, 0, 0, ROLLOUT_V_PATCH, 0, 0,
     0, NULL},
    {"min-interval: exactly at the interval, patch", "Deployment",
     "{" LAST("2025-12-31T23:59:00Z") "," TPL("") "}}", 60000, NULL, 0, 0, 0, ROLLOUT_V_PATCH, 0, 0,
     0, NULL},
    {"min-interval off", "Deployment", "{" LAST("2025-12-31T23:59:59Z") "," TPL("") "}}", 0, NULL,
     0, 0, 0, ROLLOUT_V_PATCH, 0, 0, 0, NULL},
    {"min-interval: a clock 5 s ahead, wait", "Deployment",
     "{" LAST("2026-01-01T00:00:05Z") "," TPL("") "}}", 60000, NULL, 0, 0, 0, ROLLOUT_V_WAIT, 60000,
     0, 0, NULL},
    {"min-interval: a bogus future time is ignored", "Deployment",
     "{" LAST("2999-01-01T00:00:00Z") "," TPL("") "}}", 60000, NULL, 0, 0, 0, ROLLOUT_V_PATCH, 0, 0,
     0, NULL},
    {"min-interval: a malformed time is ignored", "Deployment",
     "{" LAST("yesterday") "," TPL("") "}}", 60000, NULL, 0, 0, 0, ROLLOUT_V_PATCH, 0, 0, 0, NULL},
    {"min-interval: trailing junk is malformed", "Deployment",
     "{" LAST("2025-12-31T23:59:50Zjunk") "," TPL("") "}}", 60000, NULL, 0, 0, 0, ROLLOUT_V_PATCH,
     0, 0, 0, NULL},
    {"already current beats min-interval", "Deployment",
     "{" LAST("2025-12-31T23:59:50Z") "," TPL("\"@\":\"" OURS "\"") "}}", 60000, NULL, 0, 0, 0,
     ROLLOUT_V_CURRENT, 0, 0, 0, NULL},
    {"guard: our hash replaced, first flip: patch", "Deployment",
     "{" TPL("\"@\":\"" THEIRS "\"") "}}", 0, OLD, 0, 0, 0, ROLLOUT_V_PATCH, 0, 1, 0, NULL},
    {"guard: second flip: patch", "Deployment", "{" TPL("\"@\":\"" THEIRS "\"") "}}", 0, OLD, 1, 0,
     0, ROLLOUT_V_PATCH, 0, 1, 0, NULL},
    {"guard: third flip in the window: blocked", "Deployment",
     "{" TPL("\"@\":\"" THEIRS "\",\"reload-agent.io/config-files\":"
             "\"{\\\"/v/a\\\":\\\"aaaa\\\",\\\"/v/b\\\":\\\"bbbb\\\"}\"") "}}",
     0, OLD, 2, 0, 0, ROLLOUT_V_BLOCKED, 0, 1, 0,
     "keeps flipping between replicas (111111111111 vs 222222222222): pods see different "
     "content; differing paths: /v/b. Not rolling again."},
    {"guard: a flip this apply recorded before its min-interval wait counts once", "Deployment",
     "{" TPL("\"@\":\"" THEIRS "\"") "}}", 0, OLD, 2, 0, 1, ROLLOUT_V_PATCH, 0, 0, 0, NULL},
    {"guard: ... and a third real flip still blocks", "Deployment",
     "{" TPL("\"@\":\"" THEIRS "\"") "}}", 0, OLD, 3, 0, 1, ROLLOUT_V_BLOCKED, 0, 0, 0,
     "keeps flipping"},
    {"guard: old flips do not count", "Deployment", "{" TPL("\"@\":\"" THEIRS "\"") "}}", 0, OLD, 0,
     3, 0, ROLLOUT_V_PATCH, 0, 1, 0, NULL},
    {"guard: the annotation still holds what we set: no flip", "Deployment",
     "{" TPL("\"@\":\"" OLD "\"") "}}", 0, OLD, 2, 0, 0, ROLLOUT_V_PATCH, 0, 0, 0, NULL},
    {"guard: the annotation removed: no flip", "Deployment", "{" TPL("") "}}", 0, OLD, 2, 0, 0,
     ROLLOUT_V_PATCH, 0, 0, 0, NULL},
    {"guard before min-interval", "Deployment",
     "{" LAST("2025-12-31T23:59:50Z") "," TPL("\"@\":\"" THEIRS "\"") "}}", 60000, OLD, 2, 0, 0,
     ROLLOUT_V_BLOCKED, 0, 1, 0, "keeps flipping"},
    {"a non-string annotation is no hash", "Deployment", "{" TPL("\"@\":7") "}}", 0, OLD, 2, 0, 0,
     ROLLOUT_V_PATCH, 0, 0, 0, NULL},
};

/* Replaces "@" with the hash annotation key. */
static char *expand(const char *in)
{
    size_t n = 1;
    for (const char *p = in; *p; p++) n += *p == '@' ? strlen(KEY) : 1;
    char *out = malloc(n), *o = out;
    assert_non_null(out);
    for (const char *p = in; *p; p++) {
        if (*p == '@') {
            memcpy(o, KEY, strlen(KEY));
            o += strlen(KEY);
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
    return out;
}

static void run_decide(const struct decide_case *c, struct rollout_decision *d)
{
    struct rollout_guard g = {0};
    struct rollout_state st;
    char *body = expand(c->obj);
    const char *files = "{\"/v/a\":\"aaaa\",\"/v/b\":\"cccc\"}";
    int i;

    if (c->last_set) snprintf(g.last_set, sizeof g.last_set, "%s", c->last_set);
    for (i = 0; i < c->old_flips && g.nflips < ROLLOUT_FLIP_LIMIT; i++)
        g.flips[g.nflips++] = NOW - ROLLOUT_FLIP_WINDOW_S - 1 - i;
    for (i = 0; i < c->recent_flips && g.nflips < ROLLOUT_FLIP_LIMIT; i++)
        g.flips[g.nflips++] = NOW - 60 * (i + 1);
    struct rollout_input in = {.kind = kinds_named(c->kind),
                               .hash = OURS,
                               .files = files,
                               .min_interval_ms = c->min_interval_ms,
                               .now = NOW,
                               .guard = &g,
                               .flip_counted = c->flip_counted};
    assert_non_null(in.kind);
    assert_int_equal(rollout__parse_state(body, strlen(body), KEY, &st), 0);
    rollout__decide(&st, &in, d);
    rollout__state_free(&st);
    free(body);
}

static void test_decide_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof DECIDE / sizeof DECIDE[0]; i++) {
        const struct decide_case *c = &DECIDE[i];
        struct rollout_decision d;
        const char *text;

        run_decide(c, &d);
        text = d.verdict == ROLLOUT_V_BLOCKED ? d.reason : d.warning;
        if (d.verdict != c->want || d.wait_ms != c->want_wait_ms || d.flipped != c->want_flipped ||
            d.owner_blocks != c->want_owner_blocks ||
            (c->want_text ? !text || !strstr(text, c->want_text) : text != NULL))
            fail_msg("case \"%s\": verdict %d wait %llu flipped %d owner_blocks %d text \"%s\"",
                     c->name, d.verdict, (unsigned long long)d.wait_ms, d.flipped, d.owner_blocks,
                     text ? text : "(none)");
        if (d.verdict != ROLLOUT_V_BLOCKED) assert_string_equal(d.reason, "");
    }
}

/* --storm-limit counted on the owner (issue 26): the times of the
 * workload's last rollouts, by any replica, in its metadata annotation
 * recent-rollouts; storm_max of them within the window hold the rollout
 * back; older ones, junk and an absent list do not; the list the PATCH
 * writes keeps the window's and adds now, the newest storm_max. */
static void test_storm_limit_on_the_owner(void **state)
{
    (void)state;
    static const struct {
        const char *recent; /* NULL: no annotation */
        int max;
        enum rollout_verdict want;
    } cases[] = {
        {NULL, 3, ROLLOUT_V_PATCH},
        {"1767225001,1767225300,1767225599", 3, ROLLOUT_V_STORM}, /* 3 within 10 min */
        {"1767225001,1767225300,1767225599", 4, ROLLOUT_V_PATCH},
        {"1767225001,1767225300,1767225599", 0, ROLLOUT_V_PATCH}, /* off */
        {"1767224000,1767225300,1767225599", 3, ROLLOUT_V_PATCH}, /* one is older */
        {"x,,1767225300,junk,1767225599,-5", 2, ROLLOUT_V_STORM},
        {"", 1, ROLLOUT_V_PATCH},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[512];
        struct rollout_state st;
        struct rollout_decision d;
        if (cases[i].recent)
            snprintf(body, sizeof body,
                     "{\"metadata\":{\"annotations\":{\"reload-agent.io/recent-rollouts\":"
                     "\"%s\"}}," TPL("") "}}",
                     cases[i].recent);
        else
            snprintf(body, sizeof body, "{" TPL("") "}}");
        struct rollout_input in = {.kind = kinds_named("Deployment"),
                                   .hash = OURS,
                                   .now = NOW,
                                   .storm_max = cases[i].max,
                                   .storm_window_s = 600};
        assert_int_equal(rollout__parse_state(body, strlen(body), KEY, &st), 0);
        rollout__decide(&st, &in, &d);
        rollout__state_free(&st);
        if (d.verdict != cases[i].want)
            fail_msg("case %zu: verdict %d, want %d (%s)", i, d.verdict, cases[i].want, d.reason);
        if (d.verdict == ROLLOUT_V_STORM)
            assert_non_null(strstr(d.reason, "counted across its replicas"));
    }
    char *l = rollout__recent_list("1767224000,1767225300,x,1767225599", NOW, 3, 600);
    assert_string_equal(l, "1767225300,1767225599,1767225600");
    free(l);
    l = rollout__recent_list("1767225300,1767225599", NOW, 2, 600);
    assert_string_equal(l, "1767225599,1767225600");
    free(l);
    l = rollout__recent_list(NULL, NOW, 5, 600);
    assert_string_equal(l, "1767225600");
    free(l);
    char *k = rollout__recent_key("example.com/web-hash");
    assert_string_equal(k, "example.com/recent-rollouts");
    free(k);
}

static void test_parse_state(void **state)
{
    struct rollout_state st;
    static const char body[] = "{\"metadata\":{\"annotations\":{\"x.io/last-rollout\":\"t\"}},"
                               "\"spec\":{\"template\":{\"metadata\":{\"annotations\":{"
                               "\"x.io/h-hash\":\"H\",\"x.io/h-files\":\"F\"}}}}}";

    (void)state;
    assert_int_equal(rollout__parse_state(body, sizeof body - 1, "x.io/h-hash", &st), 0);
    assert_string_equal(st.current, "H");
    assert_string_equal(st.their_files, "F");
    assert_string_equal(st.last_rollout, "t");
    rollout__state_free(&st);
    /* a body need not be terminated: only body_len bytes count */
    assert_int_equal(rollout__parse_state("{}garbage", 2, "k", &st), 0);
    assert_null(st.current);
    rollout__state_free(&st);
    assert_int_equal(rollout__parse_state("[1]", 3, "k", &st), -EINVAL);
    assert_int_equal(rollout__parse_state("not json", 8, "k", &st), -EINVAL);
    assert_int_equal(rollout__parse_state(NULL, 0, "k", &st), -EINVAL);
}

static void test_keys(void **state)
{
    char *k;

    (void)state;
    k = rollout__files_key("reload-agent.io/config-hash");
    assert_string_equal(k, "reload-agent.io/config-files");
    free(k);
    k = rollout__files_key("example.com/sum");
    assert_string_equal(k, "example.com/sum-files");
    free(k);
    k = rollout__last_key("reload-agent.io/config-hash");
    assert_string_equal(k, "reload-agent.io/last-rollout");
    free(k);
    k = rollout__last_key("plain");
    assert_string_equal(k, "last-rollout");
    free(k);
}

/* The guard records at most ROLLOUT_FLIP_LIMIT flips and forgets old ones. */
static void test_guard_flip(void **state)
{
    struct rollout_guard g = {0};

    (void)state;
    rollout__guard_flip(&g, NOW - ROLLOUT_FLIP_WINDOW_S - 5);
    rollout__guard_flip(&g, NOW - 10);
    assert_int_equal(g.nflips, 2);
    rollout__guard_flip(&g, NOW);
    assert_int_equal(g.nflips, 2); /* the old one is gone */
    assert_true(g.flips[0] == NOW - 10 && g.flips[1] == NOW);
    rollout__guard_flip(&g, NOW);
    rollout__guard_flip(&g, NOW);
    assert_int_equal(g.nflips, ROLLOUT_FLIP_LIMIT);
}

/* ---- the chain: which object is patched ---- */

#define POD_OF(kind, av, name, uid)                                                                \
    "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"pu\",\"ownerReferences\":["      \
    "{\"apiVersion\":\"" av "\",\"kind\":\"" kind "\",\"name\":\"" name "\",\"uid\":\"" uid        \
    "\",\"controller\":true}]}}"
#define RS_OF(kind, av, name, uid)                                                                 \
    "{\"metadata\":{\"name\":\"rs\",\"uid\":\"ru\",\"ownerReferences\":[{\"apiVersion\":\"" av     \
    "\",\"kind\":\"" kind "\",\"name\":\"" name "\",\"uid\":\"" uid "\",\"controller\":true}]}}"
#define ROLLOUT_REF(ref)                                                                           \
    "{\"apiVersion\":\"argoproj.io/v1alpha1\",\"metadata\":{\"name\":\"web\",\"uid\":\"wu\"},"     \
    "\"spec\":{\"workloadRef\":" ref "}}"
#define DEPLOY(name, uid, extra)                                                                   \
    "{\"apiVersion\":\"apps/v1\",\"metadata\":{\"name\":\"" name "\",\"uid\":\"" uid "\"},"        \
    "\"spec\":{\"template\":{\"metadata\":{\"annotations\":{}}}" extra "}}"

struct chain_case {
    const char *name;
    const char *replies[5]; /* in order; "!404" = that HTTP status, no body */
    enum owner_status want_status;
    const char *want_kind, *want_name, *want_path; /* OWNER_OK */
    const char *want_via;                          /* "Kind/name" or NULL */
    const char *want_error;                        /* substring, !OWNER_OK */
    enum rollout_verdict want;                     /* decide on the last reply (OWNER_OK) */
};

static const struct chain_case CHAIN[] = {
    {"Deployment",
     {POD_OF("ReplicaSet", "apps/v1", "rs", "ru"), RS_OF("Deployment", "apps/v1", "web", "du"),
      DEPLOY("web", "du", "")},
     OWNER_OK,
     "Deployment",
     "web",
     "/apis/apps/v1/namespaces/ns/deployments/web",
     NULL,
     NULL,
     ROLLOUT_V_PATCH},
    {"Rollout workloadRef to a Deployment: the Deployment is patched",
     {POD_OF("ReplicaSet", "apps/v1", "rs", "ru"),
      RS_OF("Rollout", "argoproj.io/v1alpha1", "web", "wu"),
      ROLLOUT_REF("{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"name\":\"tpl\"}"),
      DEPLOY("tpl", "tu", "")},
     OWNER_OK,
     "Deployment",
     "tpl",
     "/apis/apps/v1/namespaces/ns/deployments/tpl",
     "Rollout/web",
     NULL,
     ROLLOUT_V_PATCH},
    {"... and a paused referenced Deployment is still patched",
     {POD_OF("ReplicaSet", "apps/v1", "rs", "ru"),
      RS_OF("Rollout", "argoproj.io/v1alpha1", "web", "wu"),
      ROLLOUT_REF("{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"name\":\"tpl\"}"),
      DEPLOY("tpl", "tu", ",\"paused\":true")},
     OWNER_OK,
     "Deployment",
     "tpl",
     "/apis/apps/v1/namespaces/ns/deployments/tpl",
     "Rollout/web",
     NULL,
     ROLLOUT_V_PATCH},
    {"Rollout workloadRef to a StatefulSet: blocked",
     {POD_OF("ReplicaSet", "apps/v1", "rs", "ru"),
      RS_OF("Rollout", "argoproj.io/v1alpha1", "web", "wu"),
      ROLLOUT_REF("{\"apiVersion\":\"apps/v1\",\"kind\":\"StatefulSet\",\"name\":\"db\"}")},
     OWNER_NO_ROLLOUT,
     NULL,
     NULL,
     NULL,
     "Rollout/web",
     "Rollout web: spec.workloadRef names StatefulSet db (apps/v1), not an apps/v1 Deployment",
     0},
    {"Rollout workloadRef without a name: blocked",
     {POD_OF("ReplicaSet", "apps/v1", "rs", "ru"),
      RS_OF("Rollout", "argoproj.io/v1alpha1", "web", "wu"),
      ROLLOUT_REF("{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\"}")},
     OWNER_NO_ROLLOUT,
     NULL,
     NULL,
     NULL,
     "Rollout/web",
     "Rollout web's spec.workloadRef names Deployment \"\", which is not a valid object name",
     0},
    {"Rollout workloadRef to a Deployment that cannot be read: blocked",
     {POD_OF("ReplicaSet", "apps/v1", "rs", "ru"),
      RS_OF("Rollout", "argoproj.io/v1alpha1", "web", "wu"),
      ROLLOUT_REF("{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"name\":\"tpl\"}"), "!404"},
     OWNER_NO_ROLLOUT,
     NULL,
     NULL,
     NULL,
     "Rollout/web",
     "cannot get Deployment tpl named by Rollout web's spec.workloadRef: unexpected HTTP "
     "status 404",
     0},
    {"a plain Rollout is patched itself",
     {POD_OF("ReplicaSet", "apps/v1", "rs", "ru"),
      RS_OF("Rollout", "argoproj.io/v1alpha1", "web", "wu"),
      "{\"metadata\":{\"name\":\"web\",\"uid\":\"wu\"},\"spec\":{}}"},
     OWNER_OK,
     "Rollout",
     "web",
     "/apis/argoproj.io/v1alpha1/namespaces/ns/rollouts/web",
     NULL,
     NULL,
     ROLLOUT_V_PATCH},
    {"a pod may not be controlled by a Deployment",
     {POD_OF("Deployment", "apps/v1", "web", "du")},
     OWNER_NO_ROLLOUT,
     NULL,
     NULL,
     NULL,
     NULL,
     "pod p is controlled by Deployment web (apps/v1), which cannot be rolled: only "
     "Deployment, StatefulSet, DaemonSet and Argo Rollout can",
     0},
    {"API text in the error stays one line",
     {POD_OF("Node\\nlevel=error msg=forged", "v1", "n", "nu")},
     OWNER_NO_ROLLOUT,
     NULL,
     NULL,
     NULL,
     NULL,
     "pod p is controlled by Node\\x0alevel=error msg=forged n (v1)",
     0},
    {"a ReplicaSet may not be controlled by a StatefulSet",
     {POD_OF("ReplicaSet", "apps/v1", "rs", "ru"), RS_OF("StatefulSet", "apps/v1", "db", "su")},
     OWNER_NO_ROLLOUT,
     NULL,
     NULL,
     NULL,
     NULL,
     "ReplicaSet rs is controlled by StatefulSet db (apps/v1), which cannot be rolled",
     0},
    {"StatefulSet",
     {POD_OF("StatefulSet", "apps/v1", "db", "su"),
      "{\"metadata\":{\"name\":\"db\",\"uid\":\"su\"},\"spec\":{\"updateStrategy\":"
      "{\"type\":\"OnDelete\"}}}"},
     OWNER_OK,
     "StatefulSet",
     "db",
     "/apis/apps/v1/namespaces/ns/statefulsets/db",
     NULL,
     NULL,
     ROLLOUT_V_PATCH},
    {"a recreated Deployment is not the owner",
     {POD_OF("ReplicaSet", "apps/v1", "rs", "ru"), RS_OF("Deployment", "apps/v1", "web", "du"),
      DEPLOY("web", "other", "")},
     OWNER_API_ERROR,
     NULL,
     NULL,
     NULL,
     NULL,
     "Deployment web has uid other, but ReplicaSet rs references uid du (recreated?)",
     0},
};

static void test_chain_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof CHAIN / sizeof CHAIN[0]; i++) {
        const struct chain_case *c = &CHAIN[i];
        struct owner__chain ch;
        const char *last = NULL;
        size_t step;
        int more = 1;

        owner__chain_init(&ch, "p");
        for (step = 0; more && step < 5 && c->replies[step]; step++) {
            const char *r = c->replies[step];
            last = r;
            if (r[0] == '!')
                more = owner__step(&ch, "ns", atol(r + 1), NULL, NULL, 0);
            else
                more = owner__step(&ch, "ns", 200, NULL, r, strlen(r));
        }
        if (more || (step < 5 && c->replies[step]))
            fail_msg("case \"%s\": the chain stopped after %zu replies (more %d)", c->name, step,
                     more);
        struct owner_info *o = ch.o;
        if (o->status != c->want_status)
            fail_msg("case \"%s\": status %d, want %d: %s", c->name, o->status, c->want_status,
                     o->error ? o->error : "");
        if (c->want_via) {
            char via[300];
            assert_non_null(o->via_kind);
            snprintf(via, sizeof via, "%s/%s", o->via_kind, o->via_name);
            assert_string_equal(via, c->want_via);
        } else {
            assert_null(o->via_kind);
        }
        if (c->want_status != OWNER_OK) {
            if (!o->error || !strstr(o->error, c->want_error))
                fail_msg("case \"%s\": error \"%s\"", c->name, o->error ? o->error : "");
            assert_null(o->kind);
        } else {
            struct rollout_state st;
            struct rollout_decision d;
            struct rollout_input in = {.kind = o->ki, .hash = OURS, .now = NOW};

            assert_null(o->error);
            assert_string_equal(o->kind, c->want_kind);
            assert_string_equal(o->name, c->want_name);
            assert_string_equal(o->path, c->want_path);
            assert_string_equal(o->patch_type, o->ki->patch_type);
            /* decide on the object that is patched */
            assert_int_equal(rollout__parse_state(last, strlen(last), KEY, &st), 0);
            rollout__decide(&st, &in, &d);
            rollout__state_free(&st);
            if (d.verdict != c->want)
                fail_msg("case \"%s\": verdict %d: %s", c->name, d.verdict, d.reason);
        }
        owner__chain_free(&ch);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decide_table), cmocka_unit_test(test_parse_state),
        cmocka_unit_test(test_keys),         cmocka_unit_test(test_guard_flip),
        cmocka_unit_test(test_chain_table),  cmocka_unit_test(test_storm_limit_on_the_owner),
    };

    log_configure(RA_LOG_ERROR, RA_LOG_FORMAT_TEXT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
