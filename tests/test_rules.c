/*
 * test_rules.c - config/rules: the one path -> action decision.
 *
 * The configurations and paths the monitor's copy of the decision was once
 * compared on (tests/test_engine.c kept two implementations equal) are now
 * one table of expected actions, written from the rule of config.h
 * (--ignore, then the --env-watch roots, then the first matching --rule,
 * else --action) and checked on the value cfg_build makes. Then the value
 * on its own: built by hand, deep-copied, and the "under a root"
 * predicate.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "actions/action.h"
#include "base/log.h"
#include "config/config.h"
#include "config/rules.h"

#define IGN PATH_RULES_IGNORED
#define NONE ACTION_NONE
#define SIG ACTION_SIGNAL
#define RST ACTION_RESTART
#define ROLL ACTION_ROLLOUT

struct want {
    const char *path;
    int action;
};

static const struct {
    const char *args[24];
    struct want want[12];
} TABLE[] = {
    {{"--action", "rollout", NULL}, {{"/v/app.conf", ROLL}, {"/e/cm/KEY", ROLL}}},
    {{"--action", "signal", "--process", "x", NULL}, {{"/v/tls.pem", SIG}, {"/e/s", SIG}}},
    {{"--rule", "*.pem=signal", "--rule", "*/jvm.options=rollout", "--action", "signal",
      "--process", "x", NULL},
     {{"/v/app.conf", SIG},
      {"/v/tls.pem", SIG},
      {"/v/jvm.options", ROLL},
      {"/other/jvm.options", ROLL}, /* '*' crosses '/' */
      {"/e/cm/tls.pem", SIG}}},
    {{"--watch", "/v", "--env-watch", "/v/env", "--action", "signal", "--process", "x", NULL},
     {{"/v/env/KEY", ROLL}, /* --env-action defaults to rollout */
      {"/v/env", ROLL},     /* the root itself */
      {"/v/envy/KEY", SIG}, /* a prefix of a name is not under the root */
      {"/v/app.conf", SIG}}},
    {{"--env-watch", "/e/cm/", "--env-watch", "/e/s", "--rule", "*=rollout", "--env-action",
      "restart", "--process", "x", NULL},
     {{"/e/cm/KEY", RST}, /* the root beats the catch-all rule */
      {"/e/cm/tls.pem", RST},
      {"/e/cm/d/x", RST}, /* nested */
      {"/e/cm", RST},     /* a trailing '/' on the root is not part of it */
      {"/e/cmx/KEY", ROLL},
      {"/e/s/KEY", RST},
      {"/e/s", RST},
      {"/v/app.conf", ROLL}}},
    {{"--env-watch", "/e/cm", "--rule", "*.pem=rollout", "--rule", "*=signal", "--env-action",
      "none", "--action", "rollout", "--process", "x", NULL},
     {{"/e/cm/KEY", NONE},
      {"/e/cm/tls.pem", NONE}, /* the root beats a specific rule too */
      {"/e/cmx/KEY", SIG},
      {"/v/tls.pem", ROLL}, /* the first matching rule */
      {"/v/app.conf", SIG},
      {"/e/s", SIG}}},
    {{"--env-watch", "/", "--rule", "*=signal", "--process", "x", NULL},
     {{"/v/app.conf", ROLL}, {"/other/jvm.options", ROLL}, {"/e/s", ROLL}}},
    {{"--env-watch", "/e/cm", "--ignore", "*/skip", "--action", "rollout", NULL},
     {{"/e/cm/skip", IGN}, /* --ignore before everything */
      {"/v/skip", IGN},
      {"/e/cm/KEY", ROLL},
      {"/v/skipped", ROLL}}},
    {{"--ignore", "*.swp", "--ignore", "/v/tmp/*", "--rule", "*.swp=signal", "--action", "none",
      "--process", "x", NULL},
     {{"/v/a.swp", IGN}, /* an ignore glob beats a rule that names the file */
      {"/v/tmp/x/y", IGN},
      {"/v/tmpx", NONE}}},
};

static void build(struct config *c, const char *const *args)
{
    struct cfg_layer l;
    char err[512];
    int help, argc = 0;
    while (args[argc]) argc++;
    assert_int_equal(cfg_layer_init(&l, CFG_SRC_FLAG), 0);
    assert_int_equal(cfg_parse_args(argc, (char **)args, &l, &help, err, sizeof err), 0);
    if (cfg_build(&l, NULL, c, err, sizeof err) != 0) fail_msg("cfg_build: %s", err);
    cfg_layer_free(&l);
}

/* The value cfg_build makes decides each path of the table; the wrappers
 * (cfg_action_for, cfg_is_ignored) and a copy (what the monitor's hashing
 * thread reads) decide the same. */
static void test_table_on_the_value_cfg_build_makes(void **state)
{
    (void)state;
    int checked = 0;
    for (size_t i = 0; i < sizeof TABLE / sizeof TABLE[0]; i++) {
        struct config c, dup;
        struct path_rules copy;
        build(&c, TABLE[i].args);
        cfg_dup(&c, &dup);
        path_rules_copy(&copy, &c.path_rules);
        for (const struct want *w = TABLE[i].want; w->path; w++, checked++) {
            int a = path_rules_action(&c.path_rules, w->path);
            if (a != w->action)
                fail_msg("config %zu (%s ...), %s: action %d, want %d", i, TABLE[i].args[0],
                         w->path, a, w->action);
            assert_int_equal(cfg_action_for(&c, w->path), w->action);
            assert_int_equal(cfg_is_ignored(&c, w->path), w->action == IGN);
            assert_int_equal(path_rules_is_ignored(&c.path_rules, w->path), w->action == IGN);
            assert_int_equal(path_rules_action(&copy, w->path), w->action);
            assert_int_equal(cfg_action_for(&dup, w->path), w->action);
        }
        path_rules_free(&copy);
        cfg_free(&dup);
        cfg_free(&c);
    }
    assert_int_equal(checked, 37);
}

/* The value on its own, built by hand: rules match in the order added, the
 * ignore globs first; a root matches itself and what lies under it. */
static void test_built_by_hand(void **state)
{
    (void)state;
    struct path_rules r;
    path_rules_init(&r, ACTION_HTTP);
    path_rules_add_ignore(&r, "*.swp");
    path_rules_add_root(&r, "/e/", ACTION_RESTART);
    path_rules_add_glob(&r, "*.conf", ACTION_SIGNAL);
    path_rules_add_glob(&r, "/v/[ab].txt", ACTION_EXEC);
    static const struct want w[] = {
        {"/e", ACTION_RESTART},
        {"/e/x.conf", ACTION_RESTART},
        {"/ex/a.conf", ACTION_SIGNAL},
        {"/v/d/x.conf", ACTION_SIGNAL},
        {"/e/a.swp", IGN},
        {"/v/a.txt", ACTION_EXEC},
        {"/v/c.txt", ACTION_HTTP},
        {"/v/other", ACTION_HTTP},
    };
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        if (path_rules_action(&r, w[i].path) != w[i].action)
            fail_msg("%s: action %d, want %d", w[i].path, path_rules_action(&r, w[i].path),
                     w[i].action);
    path_rules_free(&r);
    assert_int_equal(r.n + r.nignore, 0);
    assert_int_equal(path_rules_action(&r, "/e/x.conf"), ACTION_NONE); /* empty again */
    struct path_rules zero = {0};
    assert_int_equal(path_rules_action(&zero, "/any"), ACTION_NONE);
    assert_false(path_rules_is_ignored(&zero, "/any"));
    path_rules_free(&zero);
}

/* A copy owns its strings: the original can go (ASan would see a shallow
 * copy read freed memory). */
static void test_copy_is_deep(void **state)
{
    (void)state;
    struct path_rules r, c;
    char glob[] = "*.pem", root[] = "/env";
    path_rules_init(&r, ACTION_SIGNAL);
    path_rules_add_ignore(&r, "*~");
    path_rules_add_root(&r, root, ACTION_ROLLOUT);
    path_rules_add_glob(&r, glob, ACTION_EXEC);
    glob[0] = root[1] = 'x'; /* the value kept its own copies */
    path_rules_copy(&c, &r);
    path_rules_free(&r);
    assert_int_equal(path_rules_action(&c, "/env/k"), ACTION_ROLLOUT);
    assert_int_equal(path_rules_action(&c, "/v/tls.pem"), ACTION_EXEC);
    assert_int_equal(path_rules_action(&c, "/v/a~"), IGN);
    assert_int_equal(path_rules_action(&c, "/v/a"), ACTION_SIGNAL);
    path_rules_free(&c);
}

static void test_is_under(void **state)
{
    (void)state;
    static const struct {
        const char *root, *path;
        int under;
    } t[] = {
        {"/", "/any/path", 1}, {"/a//", "/a/b", 1}, {"/a", "/ab", 0},        {"/a", "/a", 1},
        {"/a/", "/a", 1},      {"/a/b", "/a", 0},   {"/a/b", "/a/b/c/d", 1}, {"/a", "/b/a", 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (path_rules_is_under(t[i].root, t[i].path) != t[i].under)
            fail_msg("is_under(%s, %s) != %d", t[i].root, t[i].path, t[i].under);
    }
}

int main(void)
{
    log_configure(RA_LOG_ERROR, RA_LOG_FORMAT_TEXT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_on_the_value_cfg_build_makes),
        cmocka_unit_test(test_built_by_hand),
        cmocka_unit_test(test_copy_is_deep),
        cmocka_unit_test(test_is_under),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
