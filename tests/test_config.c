/*
 * test_config.c - the option table: CLI parsing, annotation layer,
 * precedence defaults < flags < annotations, error messages, --help and
 * --print-config derived from the table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config/annotations.h"
#include "config/config.h"
#include "kube/podrefs.h"

struct fixture {
    struct cfg_layer flags, annots;
    struct config cfg;
    char err[1024];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(cfg_layer_init(&f->flags, CFG_SRC_FLAG), 0);
    assert_int_equal(cfg_layer_init(&f->annots, CFG_SRC_ANNOTATION), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    cfg_layer_free(&f->flags);
    cfg_layer_free(&f->annots);
    cfg_free(&f->cfg);
    free(f);
    return 0;
}

static int parse(struct fixture *f, int argc, char **argv)
{
    int help = 0;
    return cfg_parse_args(argc, argv, &f->flags, &help, f->err, sizeof f->err);
}

static int annots(struct fixture *f, const char *text)
{
    struct annot_set a = {0};
    char why[256];
    assert_int_equal(annot_parse(text, strlen(text), &a, why, sizeof why), 0);
    int rc = cfg_layer_from_annotations(&a, &f->annots, f->err, sizeof f->err);
    annot_free(&a);
    return rc;
}

static void test_defaults(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(cfg_build(NULL, NULL, &f->cfg, f->err, sizeof f->err), 0);
    assert_int_equal(f->cfg.debounce_ns, 200 * 1000000LL);
    assert_int_equal(f->cfg.resync_ns, 180 * 1000000000LL);
    assert_int_equal(f->cfg.action, ACTION_NONE);
    assert_int_equal(f->cfg.log_level, 1);
    assert_int_equal(f->cfg.watch.n, 0);
    assert_int_equal(f->cfg.dry_run, 0);
}

static void test_flags_override_defaults(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"--debounce",        "1m30s",    "--watch", "/a", "--watch=/b", "--dry-run",
                    "--log-format=json", "--resync", "0"};
    assert_int_equal(parse(f, 9, argv), 0);
    assert_int_equal(cfg_build(&f->flags, NULL, &f->cfg, f->err, sizeof f->err), 0);
    assert_int_equal(f->cfg.debounce_ns, 90 * 1000000000LL);
    assert_int_equal(f->cfg.resync_ns, 0);
    assert_int_equal(f->cfg.watch.n, 2);
    assert_string_equal(f->cfg.watch.v[0], "/a");
    assert_string_equal(f->cfg.watch.v[1], "/b");
    assert_int_equal(f->cfg.dry_run, 1);
    assert_int_equal(f->cfg.log_format, 1);
}

static void test_annotations_override_flags(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"--debounce", "1s", "--watch", "/a", "--log-level", "warn"};
    assert_int_equal(parse(f, 6, argv), 0);
    assert_int_equal(annots(f, "app=\"web\"\n"
                               "reload-agent.io/debounce=\"250ms\"\n"
                               "reload-agent.io/watch=\"/x, /y\"\n"
                               "reload-agent.io/config-hash=\"abc\""),
                     0);
    assert_int_equal(cfg_build(&f->flags, &f->annots, &f->cfg, f->err, sizeof f->err), 0);
    assert_int_equal(f->cfg.debounce_ns, 250 * 1000000LL);
    assert_int_equal(f->cfg.watch.n, 2); /* the annotation list replaces the flags' list */
    assert_string_equal(f->cfg.watch.v[0], "/x");
    assert_string_equal(f->cfg.watch.v[1], "/y");
    assert_int_equal(f->cfg.log_level, 2); /* from the flag: no annotation for it */
}

static void test_bad_flag_value_names_option_and_value(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"--debounce", "5x"};
    assert_int_equal(parse(f, 2, argv), 0);
    assert_int_equal(cfg_build(&f->flags, NULL, &f->cfg, f->err, sizeof f->err), -22);
    assert_non_null(strstr(f->err, "--debounce"));
    assert_non_null(strstr(f->err, "\"5x\""));
}

static void test_bad_annotation_value_names_annotation(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(annots(f, "reload-agent.io/log-level=\"loud\""), 0);
    assert_int_equal(cfg_build(NULL, &f->annots, &f->cfg, f->err, sizeof f->err), -22);
    assert_non_null(strstr(f->err, "reload-agent.io/log-level"));
    assert_non_null(strstr(f->err, "\"loud\""));
}

static void test_unknown_annotation_rejected(void **state)
{
    struct fixture *f = *state;
    /* kept by the layer, judged by cfg_build (it knows --hash-annotation) */
    assert_int_equal(annots(f, "reload-agent.io/debunce=\"1s\""), 0);
    assert_int_equal(cfg_build(NULL, &f->annots, &f->cfg, f->err, sizeof f->err), -22);
    assert_string_equal(f->err, "annotation reload-agent.io/debunce: no such option");
}

/* Frees the built config and the annotation layer, and starts a new one. */
static void renew(struct fixture *f)
{
    cfg_free(&f->cfg);
    memset(&f->cfg, 0, sizeof f->cfg);
    cfg_layer_free(&f->annots);
    assert_int_equal(cfg_layer_init(&f->annots, CFG_SRC_ANNOTATION), 0);
}

/* The rollout writes <key minus -hash>-files beside the hash on the
 * template, so every pod created after a rollout carries it in its
 * annotations file: the agent (and the injector, which judges with this
 * parser) must accept it, for the default key and a custom one. Found on the
 * real cluster: pods created by a rollout were admitted without the sidecar
 * ("annotation reload-agent.io/config-files: no such option"). */
static void test_rollout_files_annotation_accepted(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(annots(f, "reload-agent.io/config-hash=\"abc\"\n"
                               "reload-agent.io/config-files=\"{\\\"/etc/a\\\":\\\"0123\\\"}\""),
                     0);
    assert_int_equal(cfg_build(NULL, &f->annots, &f->cfg, f->err, sizeof f->err), 0);
    renew(f);

    char *argv[] = {"--hash-annotation=reload-agent.io/web-hash"};
    assert_int_equal(parse(f, 1, argv), 0);
    assert_int_equal(annots(f, "reload-agent.io/web-hash=\"abc\"\n"
                               "reload-agent.io/web-files=\"{}\""),
                     0);
    assert_int_equal(cfg_build(&f->flags, &f->annots, &f->cfg, f->err, sizeof f->err), 0);
    renew(f);

    /* another key's files twin is still unknown */
    assert_int_equal(annots(f, "reload-agent.io/other-files=\"{}\""), 0);
    assert_int_equal(cfg_build(&f->flags, &f->annots, &f->cfg, f->err, sizeof f->err), -22);
    assert_string_equal(f->err, "annotation reload-agent.io/other-files: no such option");
}

/* A custom --hash-annotation under reload-agent.io/ is stamped on the
 * template (rollout, inject), so the annotations file carries it: the
 * effective key is accepted, whether the flag or an annotation sets it;
 * any other unknown key, or the default key's custom twin left behind,
 * is still an error. */
static void test_custom_hash_annotation_accepted(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"--hash-annotation=reload-agent.io/web-hash"};
    assert_int_equal(parse(f, 1, argv), 0);
    assert_int_equal(annots(f, "reload-agent.io/web-hash=\"abc\"\n"
                               "reload-agent.io/config-hash=\"def\""),
                     0);
    assert_int_equal(cfg_build(&f->flags, &f->annots, &f->cfg, f->err, sizeof f->err), 0);
    assert_string_equal(f->cfg.hash_annotation, "reload-agent.io/web-hash");
    cfg_free(&f->cfg);

    /* set by annotation, in the same file */
    struct cfg_layer a2;
    struct annot_set set = {0};
    char why[256];
    const char *text = "reload-agent.io/hash-annotation=\"reload-agent.io/web-hash\"\n"
                       "reload-agent.io/web-hash=\"abc\"";
    assert_int_equal(cfg_layer_init(&a2, CFG_SRC_ANNOTATION), 0);
    assert_int_equal(annot_parse(text, strlen(text), &set, why, sizeof why), 0);
    assert_int_equal(cfg_layer_from_annotations(&set, &a2, f->err, sizeof f->err), 0);
    assert_int_equal(cfg_build(NULL, &a2, &f->cfg, f->err, sizeof f->err), 0);
    assert_string_equal(f->cfg.hash_annotation, "reload-agent.io/web-hash");
    cfg_free(&f->cfg);
    /* without it, the same key is unknown */
    assert_int_equal(cfg_build(NULL, &f->annots, &f->cfg, f->err, sizeof f->err), -22);
    assert_string_equal(f->err, "annotation reload-agent.io/web-hash: no such option");
    annot_free(&set);
    cfg_layer_free(&a2);

    /* another unknown key beside the accepted one */
    assert_int_equal(annots(f, "reload-agent.io/web-hash=\"abc\"\nreload-agent.io/nosuch=\"1\""),
                     0);
    assert_int_equal(cfg_build(&f->flags, &f->annots, &f->cfg, f->err, sizeof f->err), -22);
    assert_string_equal(f->err, "annotation reload-agent.io/nosuch: no such option");

    /* a key the agent or the injector reads is refused: the hash would
     * overwrite that setting */
    const char *bad[] = {"reload-agent.io/action", "reload-agent.io/inject",
                         "reload-agent.io/inject-status"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct cfg_layer fl;
        char arg[128], *av[1] = {arg};
        int help = 0;
        snprintf(arg, sizeof arg, "--hash-annotation=%s", bad[i]);
        assert_int_equal(cfg_layer_init(&fl, CFG_SRC_FLAG), 0);
        assert_int_equal(cfg_parse_args(1, av, &fl, &help, f->err, sizeof f->err), 0);
        assert_int_equal(cfg_build(&fl, NULL, &f->cfg, f->err, sizeof f->err), -22);
        assert_non_null(strstr(f->err, "--hash-annotation"));
        assert_non_null(strstr(f->err, bad[i]));
        cfg_layer_free(&fl);
    }
}

/* The injector's keys (inject/transform.c) are not agent options, and the
 * agent skips them: the one list in config.c. */
static void test_injector_annotations_skipped(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(annots(f, "reload-agent.io/config-hash=\"abc\"\n"
                               "reload-agent.io/inject=\"true\"\n"
                               "reload-agent.io/inject-status=\"{}\"\n"
                               "reload-agent.io/sidecar-cpu-request=\"10m\"\n"
                               "reload-agent.io/sidecar-image=\"x:1\"\n"
                               "reload-agent.io/sidecar-memory-limit=\"1Gi\"\n"
                               "reload-agent.io/sidecar-memory-request=\"1Mi\"\n"
                               /* fast sync's nudge, which the kubelet writes into
                                * the file after every nudge */
                               "reload-agent.io/sync=\"12345.2\""),
                     0);
    assert_int_equal(cfg_build(NULL, &f->annots, &f->cfg, f->err, sizeof f->err), 0);
    assert_true(cfg_is_injector_annotation("reload-agent.io/sidecar-image"));
    assert_true(cfg_is_injector_annotation("reload-agent.io/sync"));
    assert_false(cfg_is_injector_annotation("reload-agent.io/action"));
    assert_false(cfg_is_injector_annotation("example.com/inject"));
    assert_false(cfg_is_injector_annotation("reload-agent.io/"));
    /* every key of the list is skipped, none is an option, and each is a
     * whole key under the prefix */
    for (const char *const *k = cfg_injector_annotations; *k; k++) {
        char line[160];
        snprintf(line, sizeof line, "%s=\"x\"", *k);
        cfg_free(&f->cfg);
        cfg_layer_free(&f->annots);
        assert_int_equal(cfg_layer_init(&f->annots, CFG_SRC_ANNOTATION), 0);
        assert_int_equal(annots(f, line), 0);
        assert_int_equal(cfg_build(NULL, &f->annots, &f->cfg, f->err, sizeof f->err), 0);
        assert_true(cfg_is_injector_annotation(*k));
        assert_int_equal(strncmp(*k, CFG_ANNOTATION_PREFIX, strlen(CFG_ANNOTATION_PREFIX)), 0);
    }
}

/* cfg_is_same: an annotations file that changed only outside the options
 * (fast sync's nudge) gives the same configuration; any option differs. */
static void test_is_same(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"--watch", "/tmp", "--debounce", "50ms"};
    assert_int_equal(parse(f, 4, argv), 0);
    assert_int_equal(annots(f, "reload-agent.io/sync=\"1\""), 0);
    assert_int_equal(cfg_build(&f->flags, &f->annots, &f->cfg, f->err, sizeof f->err), 0);
    struct config other;
    cfg_layer_free(&f->annots);
    assert_int_equal(cfg_layer_init(&f->annots, CFG_SRC_ANNOTATION), 0);
    assert_int_equal(annots(f, "reload-agent.io/sync=\"2.2\""), 0);
    assert_int_equal(cfg_build(&f->flags, &f->annots, &other, f->err, sizeof f->err), 0);
    assert_true(cfg_is_same(&f->cfg, &other));
    cfg_free(&other);
    cfg_layer_free(&f->annots);
    assert_int_equal(cfg_layer_init(&f->annots, CFG_SRC_ANNOTATION), 0);
    assert_int_equal(annots(f, "reload-agent.io/debounce=\"60ms\""), 0);
    assert_int_equal(cfg_build(&f->flags, &f->annots, &other, f->err, sizeof f->err), 0);
    assert_false(cfg_is_same(&f->cfg, &other));
    cfg_free(&other);
}

static void test_annotation_cannot_set_annotations_file(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(annots(f, "reload-agent.io/annotations=\"/tmp/x\""), -22);
    assert_non_null(strstr(f->err, "cannot be set by annotation"));
}

static void test_unknown_flag_and_missing_value(void **state)
{
    struct fixture *f = *state;
    char *a1[] = {"--no-such"};
    assert_int_equal(parse(f, 1, a1), -22);
    assert_non_null(strstr(f->err, "--no-such"));
    char *a2[] = {"--debounce"};
    assert_int_equal(parse(f, 1, a2), -22);
    assert_non_null(strstr(f->err, "needs a value"));
    char *a3[] = {"stray"};
    assert_int_equal(parse(f, 1, a3), -22);
    assert_non_null(strstr(f->err, "stray"));
}

static void test_rules_parse_and_validate(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"--rule", "*.conf=none", "--rule", "a=b=none"};
    assert_int_equal(parse(f, 4, argv), 0);
    assert_int_equal(cfg_build(&f->flags, NULL, &f->cfg, f->err, sizeof f->err), 0);
    assert_int_equal(f->cfg.nrules, 2);
    assert_string_equal(f->cfg.rules[0].glob, "*.conf");
    assert_string_equal(f->cfg.rules[1].glob, "a=b"); /* split at the last '=' */
    cfg_free(&f->cfg);

    struct cfg_layer l;
    assert_int_equal(cfg_layer_init(&l, CFG_SRC_FLAG), 0);
    char *bad[] = {"--rule", "*.conf=explode"};
    int help;
    assert_int_equal(cfg_parse_args(2, bad, &l, &help, f->err, sizeof f->err), 0);
    assert_int_equal(cfg_build(&l, NULL, &f->cfg, f->err, sizeof f->err), -22);
    assert_non_null(strstr(f->err, "*.conf=explode"));
    assert_non_null(strstr(f->err, action_names_joined())); /* the names, from the table */
    cfg_layer_free(&l);
}

/* --action and --rule accept exactly the table's names (actions/action.h). */
static void test_action_names_from_table(void **state)
{
    struct fixture *f = *state;
    int help;
    for (int a = 0; a < ACTION__COUNT; a++) {
        struct cfg_layer l;
        char rule[64];
        snprintf(rule, sizeof rule, "*.x=%s", action_name(a));
        char *argv[] = {"--action",
                        (char *)action_name(a),
                        "--rule",
                        rule,
                        "--process",
                        "p",
                        "--http-url",
                        "http://127.0.0.1:1/",
                        "--exec-command",
                        "true",
                        "--on-start",
                        "skip",
                        "--restart-policy-rules",
                        "[{\"action\":\"RestartAllContainers\",\"exitCodes\":{\"operator\":\"In\","
                        "\"values\":[88]}}]"};
        assert_int_equal(cfg_layer_init(&l, CFG_SRC_FLAG), 0);
        assert_int_equal(cfg_parse_args(14, argv, &l, &help, f->err, sizeof f->err), 0);
        if (cfg_build(&l, NULL, &f->cfg, f->err, sizeof f->err) != 0) fail_msg("%s", f->err);
        assert_int_equal(f->cfg.action, a);
        assert_int_equal(f->cfg.rules[0].action, a);
        cfg_free(&f->cfg);
        cfg_layer_free(&l);
    }
    struct cfg_layer l;
    char *bad[] = {"--action", "reboot"};
    assert_int_equal(cfg_layer_init(&l, CFG_SRC_FLAG), 0);
    int rc = cfg_parse_args(2, bad, &l, &help, f->err, sizeof f->err);
    if (rc == 0) rc = cfg_build(&l, NULL, &f->cfg, f->err, sizeof f->err);
    assert_int_equal(rc, -22);
    assert_non_null(strstr(f->err, "reboot"));
    assert_non_null(strstr(f->err, action_names_joined()));
    cfg_layer_free(&l);
}

static void test_duplicate_watch_rejected(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"--watch", "/a", "--watch", "/a"};
    assert_int_equal(parse(f, 4, argv), 0);
    assert_int_equal(cfg_build(&f->flags, NULL, &f->cfg, f->err, sizeof f->err), -22);
    assert_non_null(strstr(f->err, "given twice"));
}

/* Captures what a FILE-writing function prints (malloc'd, NUL-terminated). */
static char *capture(void (*fn)(FILE *, void *), void *arg)
{
    FILE *m = tmpfile();
    assert_non_null(m);
    fn(m, arg);
    long n = ftell(m);
    assert_true(n >= 0);
    char *out = calloc(1, (size_t)n + 1);
    assert_non_null(out);
    rewind(m);
    assert_int_equal(fread(out, 1, (size_t)n, m), (size_t)n);
    fclose(m);
    return out;
}

static void help_fn(FILE *f, void *arg)
{
    (void)arg;
    cfg_print_help(f);
}

static void test_help_lists_every_option(void **state)
{
    (void)state;
    char *h = capture(help_fn, NULL);
    const char *names[] = {
        "--watch PATH",        "--action",           "--rule GLOB=ACTION", "--ignore",
        "--debounce DURATION", "--resync",           "--log-format",       "--log-level",
        "--dry-run",           "--annotations FILE", "--print-config"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!strstr(h, names[i])) fail_msg("--help lacks %s", names[i]);
    }
    assert_non_null(strstr(h, "(default 200ms; range 0 to 1h)"));
    assert_non_null(strstr(h, "(default 100us; range 0 or 100us to 100ms)"));
    free(h);
}

static void print_fn(FILE *out, void *arg)
{
    struct fixture *f = arg;
    cfg_print(out, &f->cfg, &f->flags, &f->annots);
}

static void test_print_config_shows_sources(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"--debounce", "1s", "--resync", "10s"};
    assert_int_equal(parse(f, 4, argv), 0);
    assert_int_equal(annots(f, "reload-agent.io/resync=\"1m0s\""), 0);
    assert_int_equal(cfg_build(&f->flags, &f->annots, &f->cfg, f->err, sizeof f->err), 0);
    char *p = capture(print_fn, f);
    char *line = strstr(p, "debounce");
    assert_non_null(line);
    assert_true(strstr(line, "1s") < strstr(line, "# flag"));
    line = strstr(p, "resync");
    assert_non_null(line);
    assert_non_null(strstr(line, "1m0s"));
    assert_true(strstr(line, "# annotation") < strchr(line, '\n'));
    line = strstr(p, "log-level");
    assert_true(strstr(line, "# default") < strchr(line, '\n'));
    free(p);
}

/* Builds defaults < the flags in argv (NULL-terminated); returns cfg_build's
 * result, the message in f->err. */
static int build_args(struct fixture *f, const char *const *argv)
{
    struct cfg_layer l;
    int help, argc = 0, rc;
    while (argv[argc]) argc++;
    assert_int_equal(cfg_layer_init(&l, CFG_SRC_FLAG), 0);
    assert_int_equal(cfg_parse_args(argc, (char **)argv, &l, &help, f->err, sizeof f->err), 0);
    rc = cfg_build(&l, NULL, &f->cfg, f->err, sizeof f->err);
    if (rc == 0) cfg_free(&f->cfg);
    memset(&f->cfg, 0, sizeof f->cfg);
    cfg_layer_free(&l);
    return rc;
}

/* The documented range of every duration option (docs/configuration.md flags table). */
static const struct {
    const char *name, *min, *max, *below, *above, *range;
    int zero_ok;
} RANGES[] = {
    {"debounce", "0", "1h", NULL, "1h0m0.000000001s", "0 to 1h", 0},
    {"resync", "100ms", "720h", "99ms", "720h1ns", "0 or 100ms to 720h", 1},
    {"http-timeout", "1ms", "24h", "999us", "24h1ns", "1ms to 24h", 0},
    {"exec-timeout", "0", "24h", NULL, "24h1ns", "0 to 24h", 0},
    {"rollout-jitter", "0", "1h", NULL, "1h1ns", "0 to 1h", 0},
    {"restart-timeout", "1ms", "24h", "999999ns", "24h1ns", "1ms to 24h", 0},
    {"retry-initial", "1ms", "24h", "0", "24h1ns", "1ms to 24h", 0},
    {"retry-max", "1ms", "24h", "0", "24h1ns", "1ms to 24h", 0},
    {"min-interval", "0", "24h", NULL, "24h1ns", "0 to 24h", 0},
    {"sched-slice", "100us", "100ms", "99us", "100ms1ns", "0 or 100us to 100ms", 1},
    {"validate-timeout", "100ms", "1h", "99ms", "1h1ns", "100ms to 1h", 0},
    {"verify-timeout", "100ms", "1h", "99ms", "1h1ns", "100ms to 1h", 0},
};

/* Issue 9 F6: the largest duration Go accepts passed every option and
 * overflowed the ns->ms conversions. Each duration option now has a range;
 * values outside it are an error naming the option and the range. */
static void test_duration_ranges(void **state)
{
    struct fixture *f = *state;
    for (size_t i = 0; i < sizeof RANGES / sizeof RANGES[0]; i++) {
        char opt[64], want[128];
        snprintf(opt, sizeof opt, "--%s", RANGES[i].name);
        snprintf(want, sizeof want, "out of range: %s takes %s", opt, RANGES[i].range);
        /* retry-initial <= retry-max is checked too: keep the other one wide. */
        const char *other =
            strcmp(RANGES[i].name, "retry-initial") == 0 ? "--retry-max" : "--retry-initial";
        const char *other_val = other[8] == 'm' ? "24h" : "1ms";
        const char *huge[] = {opt, "2562047h47m16.854775807s", NULL};
        if (build_args(f, huge) != -22 || !strstr(f->err, want) || !strstr(f->err, "2562047h"))
            fail_msg("%s 2562047h47m16.854775807s: %s", opt, f->err);
        const char *above[] = {opt, RANGES[i].above, NULL};
        if (build_args(f, above) != -22 || !strstr(f->err, want))
            fail_msg("%s %s: %s", opt, RANGES[i].above, f->err);
        const char *lo[] = {opt, RANGES[i].min, other, other_val, NULL};
        const char *hi[] = {opt, RANGES[i].max, other, other_val, NULL};
        if (build_args(f, lo) != 0) fail_msg("%s %s refused: %s", opt, RANGES[i].min, f->err);
        if (build_args(f, hi) != 0) fail_msg("%s %s refused: %s", opt, RANGES[i].max, f->err);
        if (RANGES[i].below) {
            const char *below[] = {opt, RANGES[i].below, other, other_val, NULL};
            if (build_args(f, below) != -22 || !strstr(f->err, opt))
                fail_msg("%s %s: %s", opt, RANGES[i].below, f->err);
        }
        if (RANGES[i].zero_ok) {
            const char *zero[] = {opt, "0", NULL};
            if (build_args(f, zero) != 0) fail_msg("%s 0 refused: %s", opt, f->err);
        }
    }
}

/* --sched-slice 1h was accepted; the kernel takes 0.1 to 100 ms. From an
 * annotation too (a live update), naming the annotation and the range. */
static void test_sched_slice_range(void **state)
{
    struct fixture *f = *state;
    const char *h[] = {"--sched-slice", "1h", NULL};
    assert_int_equal(build_args(f, h), -22);
    assert_non_null(strstr(f->err, "--sched-slice"));
    assert_non_null(strstr(f->err, "100us to 100ms"));
    assert_int_equal(annots(f, "reload-agent.io/sched-slice=\"1h\""), 0);
    assert_int_equal(cfg_build(NULL, &f->annots, &f->cfg, f->err, sizeof f->err), -22);
    assert_non_null(strstr(f->err, "annotation reload-agent.io/sched-slice: \"1h\": out of range"));
    const char *ok[] = {"--sched-slice", "2ms", NULL};
    assert_int_equal(build_args(f, ok), 0);
}

/* Issue 9 F7: an --exec-command that cannot be split, or a --hash-annotation
 * that is no annotation key, was accepted and failed every attempt. Refused
 * now, from a flag and from an annotation, with the reason. */
static void test_exec_command_and_hash_annotation_judged(void **state)
{
    struct fixture *f = *state;
    const struct {
        const char *opt, *val, *why;
    } bad[] = {
        {"--exec-command", "sh -c \"echo hi", "unterminated double quote"},
        {"--exec-command", "sh -c 'echo hi", "unterminated single quote"},
        {"--exec-command", "kill -HUP 1 \\", "trailing backslash"},
        {"--exec-command", "   ", "empty command"},
        {"--hash-annotation", "example.com/a/b", "more than one '/'"},
        {"--hash-annotation", "bad key", "[-_.A-Za-z0-9]"},
        {"--hash-annotation", "", "empty annotation key"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *argv[] = {bad[i].opt, bad[i].val, NULL};
        if (build_args(f, argv) != -22 || !strstr(f->err, bad[i].opt) ||
            !strstr(f->err, bad[i].why))
            fail_msg("%s '%s': %s", bad[i].opt, bad[i].val, f->err);
    }
    const char *ok[] = {"--exec-command",
                        "sh -c 'nginx -s reload'",
                        "--hash-annotation",
                        "example.com/config-hash",
                        "--action",
                        "exec",
                        NULL};
    assert_int_equal(build_args(f, ok), 0);
    const char *unset[] = {"--exec-command", "", NULL};
    assert_int_equal(build_args(f, unset), 0);
    assert_int_equal(annots(f, "reload-agent.io/exec-command=\"echo 'x\"\n"
                               "reload-agent.io/hash-annotation=\"a/b\""),
                     0);
    assert_int_equal(cfg_build(NULL, &f->annots, &f->cfg, f->err, sizeof f->err), -22);
    assert_non_null(strstr(f->err, "annotation reload-agent.io/exec-command"));
    assert_non_null(strstr(f->err, "unterminated single quote"));
    cfg_layer_free(&f->annots);
    assert_int_equal(cfg_layer_init(&f->annots, CFG_SRC_ANNOTATION), 0);
    assert_int_equal(annots(f, "reload-agent.io/hash-annotation=\"a/b/\""), 0);
    assert_int_equal(cfg_build(NULL, &f->annots, &f->cfg, f->err, sizeof f->err), -22);
    assert_non_null(strstr(f->err, "annotation reload-agent.io/hash-annotation"));
}

/* Issue 9 F8: rollout from a live update on an agent without an API client
 * was accepted and failed forever. cfg_build_env judges it with what the
 * agent has; without that knowledge (at start) the client is tried later. */
static void test_rollout_needs_an_api_client(void **state)
{
    struct fixture *f = *state;
    const struct cfg_env none = {.kube = CFG_KUBE_NONE}, ready = {.kube = CFG_KUBE_READY};
    assert_int_equal(annots(f, "reload-agent.io/action=\"rollout\""), 0);
    assert_int_equal(cfg_build_env(NULL, &f->annots, &none, &f->cfg, f->err, sizeof f->err), -22);
    assert_non_null(strstr(f->err, "--action rollout"));
    assert_non_null(strstr(f->err, "needs the Kubernetes API client"));
    assert_int_equal(cfg_build_env(NULL, &f->annots, &ready, &f->cfg, f->err, sizeof f->err), 0);
    assert_int_equal(f->cfg.action, ACTION_ROLLOUT);
    cfg_free(&f->cfg);
    assert_int_equal(cfg_build(NULL, &f->annots, &f->cfg, f->err, sizeof f->err), 0);
    cfg_free(&f->cfg);
    cfg_layer_free(&f->annots);
    assert_int_equal(cfg_layer_init(&f->annots, CFG_SRC_ANNOTATION), 0);
    assert_int_equal(annots(f, "reload-agent.io/rule=\"*.conf=none, jvm.options=rollout\""), 0);
    assert_int_equal(cfg_build_env(NULL, &f->annots, &none, &f->cfg, f->err, sizeof f->err), -22);
    assert_non_null(strstr(f->err, "--rule \"jvm.options=rollout\""));
    /* Without rollout, no client is needed. */
    cfg_layer_free(&f->annots);
    assert_int_equal(cfg_layer_init(&f->annots, CFG_SRC_ANNOTATION), 0);
    assert_int_equal(annots(f, "reload-agent.io/rule=\"*.conf=none\""), 0);
    assert_int_equal(cfg_build_env(NULL, &f->annots, &none, &f->cfg, f->err, sizeof f->err), 0);
}

/* Builds a configuration from flags only (argv NULL-terminated) into *c. */
static void build_into(const char *const *argv, struct config *c)
{
    struct cfg_layer l;
    char err[512];
    int help, argc = 0;
    while (argv[argc]) argc++;
    assert_int_equal(cfg_layer_init(&l, CFG_SRC_FLAG), 0);
    assert_int_equal(cfg_parse_args(argc, (char **)argv, &l, &help, err, sizeof err), 0);
    if (cfg_build(&l, NULL, c, err, sizeof err) != 0) fail_msg("%s", err);
    cfg_layer_free(&l);
}

/* --env-watch / --env-action (issue 10): parse, defaults, annotations. */
static void test_env_options_parse_and_defaults(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(cfg_build(NULL, NULL, &f->cfg, f->err, sizeof f->err), 0);
    assert_int_equal(f->cfg.env_watch.n, 0);
    assert_int_equal(f->cfg.env_action, ACTION_ROLLOUT);
    /* rollout by default, but not used without an env root: no reconcile */
    assert_int_equal(f->cfg.on_start, ON_START_SKIP);
    assert_int_equal(cfg_used_actions(&f->cfg), ACTION_BIT(ACTION_NONE));
    cfg_free(&f->cfg);
    char *argv[] = {"--env-watch", "/e/a", "--env-watch=/e/b", "--env-action", "none"};
    assert_int_equal(parse(f, 5, argv), 0);
    assert_int_equal(cfg_build(&f->flags, NULL, &f->cfg, f->err, sizeof f->err), 0);
    assert_int_equal(f->cfg.env_watch.n, 2);
    assert_string_equal(f->cfg.env_watch.v[0], "/e/a");
    assert_string_equal(f->cfg.env_watch.v[1], "/e/b");
    assert_int_equal(f->cfg.env_action, ACTION_NONE);
    cfg_free(&f->cfg);
    /* annotations win: a list replaces the flags' list, the action the flag */
    assert_int_equal(annots(f, "reload-agent.io/env-action=\"restart\"\n"
                               "reload-agent.io/env-watch=\"/x, /y/\"\n"
                               "reload-agent.io/process=\"app\""),
                     0);
    assert_int_equal(cfg_build(&f->flags, &f->annots, &f->cfg, f->err, sizeof f->err), 0);
    assert_int_equal(f->cfg.env_action, ACTION_RESTART);
    assert_int_equal(f->cfg.env_watch.n, 2);
    assert_string_equal(f->cfg.env_watch.v[0], "/x");
    assert_string_equal(f->cfg.env_watch.v[1], "/y/");
    assert_int_equal(cfg_used_actions(&f->cfg),
                     ACTION_BIT(ACTION_NONE) | ACTION_BIT(ACTION_RESTART));
    /* --print-config shows both, with their source */
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    cfg_print(m, &f->cfg, &f->flags, &f->annots);
    fclose(m);
    assert_non_null(strstr(buf, "env-watch        = /x,/y/"));
    assert_non_null(strstr(buf, "env-action       = restart"));
    assert_non_null(strstr(buf, "# annotation"));
    free(buf);
}

static void test_env_action_errors_name_option_and_value(void **state)
{
    struct fixture *f = *state;
    /* an action that exists, but cannot apply to env */
    char *argv[] = {"--env-watch", "/e", "--env-action", "signal"};
    assert_int_equal(parse(f, 4, argv), 0);
    assert_int_equal(cfg_build(&f->flags, NULL, &f->cfg, f->err, sizeof f->err), -22);
    assert_non_null(strstr(f->err, "--env-action"));
    assert_non_null(strstr(f->err, "\"signal\""));
    assert_non_null(strstr(f->err, "rollout|restart|restart-pod|none"));
    assert_int_equal(annots(f, "reload-agent.io/env-action=\"reboot\""), 0);
    assert_int_equal(cfg_build(NULL, &f->annots, &f->cfg, f->err, sizeof f->err), -22);
    assert_non_null(strstr(f->err, "annotation reload-agent.io/env-action"));
    assert_non_null(strstr(f->err, "\"reboot\""));
    /* restart needs its target, as --action restart does */
    cfg_layer_free(&f->annots);
    assert_int_equal(cfg_layer_init(&f->annots, CFG_SRC_ANNOTATION), 0);
    assert_int_equal(annots(f, "reload-agent.io/env-action=\"restart\""), 0);
    cfg_layer_free(&f->flags);
    assert_int_equal(cfg_layer_init(&f->flags, CFG_SRC_FLAG), 0);
    assert_int_equal(parse(f, 2, argv), 0);
    assert_int_equal(cfg_build(&f->flags, &f->annots, &f->cfg, f->err, sizeof f->err), -22);
    assert_non_null(strstr(f->err, "the restart action needs --process NAME or --pid-file PATH"));
}

static void test_env_watch_empty_or_twice_rejected(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"--env-watch", "/e", "--env-watch", "/e"};
    assert_int_equal(parse(f, 4, argv), 0);
    assert_int_equal(cfg_build(&f->flags, NULL, &f->cfg, f->err, sizeof f->err), -22);
    assert_non_null(strstr(f->err, "invalid value for --env-watch: \"/e\" is given twice"));
    cfg_layer_free(&f->flags);
    assert_int_equal(cfg_layer_init(&f->flags, CFG_SRC_FLAG), 0);
    char *argv2[] = {"--env-watch", "", "--env-action", "none"};
    assert_int_equal(parse(f, 4, argv2), 0);
    assert_int_equal(cfg_build(&f->flags, NULL, &f->cfg, f->err, sizeof f->err), -22);
    assert_non_null(strstr(f->err, "invalid value for --env-watch: empty path"));
}

/* An env root overlapping a watch root is allowed; the roots are listed
 * once each. */
static void test_env_watch_overlapping_roots(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"--watch", "/v",          "--watch", "/w",           "--env-watch",
                    "/v/env",  "--env-watch", "/w",      "--env-action", "none"};
    assert_int_equal(parse(f, 10, argv), 0);
    assert_int_equal(cfg_build(&f->flags, NULL, &f->cfg, f->err, sizeof f->err), 0);
    size_t n;
    const char **roots = cfg_watch_roots(&f->cfg, &n);
    assert_int_equal(n, 3);
    assert_string_equal(roots[0], "/v");
    assert_string_equal(roots[1], "/w");
    assert_string_equal(roots[2], "/v/env");
    free(roots);
    /* the env root wins for its files, also when it equals a watch root */
    assert_int_equal(cfg_action_for(&f->cfg, "/v/env/K"), ACTION_NONE);
    assert_int_equal(cfg_action_for(&f->cfg, "/w/K"), ACTION_NONE);
}

/* cfg_action_for: ignore, then env roots, then rules, then --action. */
static void test_env_action_precedence_over_rules(void **state)
{
    struct fixture *f = *state;
    char *argv[] = {"--watch",        "/v",     "--env-watch", "/env/cm/",
                    "--env-watch",    "/env/s", "--rule",      "*.pem=signal",
                    "--rule",         "*=exec", "--action",    "http",
                    "--ignore",       "*/skip", "--process",   "app",
                    "--exec-command", "true",   "--http-url",  "http://127.0.0.1:1/"};
    assert_int_equal(parse(f, 20, argv), 0);
    assert_int_equal(cfg_build(&f->flags, NULL, &f->cfg, f->err, sizeof f->err), 0);
    struct {
        const char *path;
        int action;
    } table[] = {
        {"/env/cm/KEY", ACTION_ROLLOUT},      /* env beats the catch-all rule */
        {"/env/cm/tls.pem", ACTION_ROLLOUT},  /* and a specific one */
        {"/env/cm/dir/deep", ACTION_ROLLOUT}, /* nested (items with paths) */
        {"/env/cm", ACTION_ROLLOUT},          /* a root that is a file */
        {"/env/s/KEY", ACTION_ROLLOUT},       /* root without a trailing '/' */
        {"/env/cm2/KEY", ACTION_EXEC},        /* a sibling is not under the root */
        {"/env/cmKEY", ACTION_EXEC},          /* nor a prefix of a name */
        {"/v/tls.pem", ACTION_SIGNAL},        /* outside env: first rule wins */
        {"/v/app.conf", ACTION_EXEC},         /* the catch-all rule */
        {"/env/cm/skip", CFG_ACTION_IGNORED}, /* --ignore comes first */
        {"/v/skip", CFG_ACTION_IGNORED},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        int a = cfg_action_for(&f->cfg, table[i].path);
        if (a != table[i].action)
            fail_msg("%s: action %d, want %d", table[i].path, a, table[i].action);
        assert_int_equal(cfg_is_ignored(&f->cfg, table[i].path),
                         table[i].action == CFG_ACTION_IGNORED);
    }
    /* env roots use rollout (the default): reconcile at start by default */
    assert_int_equal(f->cfg.on_start, ON_START_RECONCILE);
}

/* Rollout through --env-action needs the API client like a rollout rule. */
static void test_env_rollout_needs_an_api_client(void **state)
{
    struct fixture *f = *state;
    const struct cfg_env none = {.kube = CFG_KUBE_NONE};
    char *argv[] = {"--watch", "/v", "--env-watch", "/e", "--action", "none"};
    assert_int_equal(parse(f, 6, argv), 0);
    assert_int_equal(cfg_build_env(&f->flags, NULL, &none, &f->cfg, f->err, sizeof f->err), -22);
    assert_non_null(strstr(f->err, "--env-action rollout"));
    assert_non_null(strstr(f->err, "needs the Kubernetes API client"));
    assert_int_equal(annots(f, "reload-agent.io/env-action=\"none\""), 0);
    assert_int_equal(cfg_build_env(&f->flags, &f->annots, &none, &f->cfg, f->err, sizeof f->err),
                     0);
    cfg_free(&f->cfg);
    /* an env-action without an env root needs nothing */
    cfg_layer_free(&f->annots);
    assert_int_equal(cfg_layer_init(&f->annots, CFG_SRC_ANNOTATION), 0);
    assert_int_equal(annots(f, "reload-agent.io/env-watch=\"\""), 0);
    assert_int_equal(cfg_build_env(&f->flags, &f->annots, &none, &f->cfg, f->err, sizeof f->err),
                     0);
    assert_int_equal(f->cfg.env_watch.n, 0);
}

static void test_env_watch_changes_the_watch_set(void **state)
{
    struct fixture *f = *state;
    struct config a, b;
    const char *x[] = {"--watch", "/v", "--env-watch", "/e", NULL};
    const char *y[] = {"--watch", "/v", "--env-watch", "/f", NULL};
    build_into(x, &a);
    build_into(y, &b);
    assert_false(cfg_is_same_watch(&a, &b));
    assert_true(cfg_is_same_watch(&a, &a));
    cfg_free(&b);
    const char *z[] = {"--watch", "/v", NULL};
    build_into(z, &b);
    assert_false(cfg_is_same_watch(&a, &b));
    cfg_free(&a);
    cfg_free(&b);
    (void)f;
}

/* Issue 8 item 3: options read once at start are marked in the table
 * (OPT_RESTART_ONLY); cfg_restart_only_changed replaces run.c's list. */
static void test_restart_only_changes(void **state)
{
    (void)state;
    struct config boot, a, b, c, e_off, e_on;
    char names[256];
    const char *boot_args[] = {"--listen", "127.0.0.1:9091", "--debounce", "1s", NULL};
    const char *a_args[] = {
        "--listen", "127.0.0.1:9092", "--kube-api", "https://k:6443", "--debounce", "2s", NULL};
    const char *b_args[] = {"--listen", "127.0.0.1:9091", "--debounce",
                            "5s",       "--events=false", NULL};
    const char *c_args[] = {
        "--listen", "127.0.0.1:9091",    "--pod-name", "web-0",          "--namespace",
        "prod",     "--kube-token-file", "/t",         "--kube-ca-file", "/ca",
        NULL};
    const char *off_args[] = {"--events=false", NULL};
    const char *on_args[] = {"--events=true", NULL};
    build_into(boot_args, &boot);
    build_into(a_args, &a);
    build_into(b_args, &b);
    build_into(c_args, &c);
    build_into(off_args, &e_off);
    build_into(on_args, &e_on);

    assert_int_equal(cfg_restart_only_changed(&boot, NULL, &a, names, sizeof names), 2);
    assert_string_equal(names, "--kube-api, --listen");
    /* Reported once: prev already held these values. */
    assert_int_equal(cfg_restart_only_changed(&boot, &a, &a, names, sizeof names), 0);
    assert_string_equal(names, "");
    /* Back to what is in force, a live-only change, and --events=false
     * (applies live): nothing to restart for. */
    assert_int_equal(cfg_restart_only_changed(&boot, &a, &b, names, sizeof names), 0);
    assert_int_equal(cfg_restart_only_changed(&boot, NULL, &c, names, sizeof names), 4);
    assert_string_equal(names, "--kube-token-file, --kube-ca-file, --pod-name, --namespace");
    /* --events=true needs the restart only if the agent started without. */
    assert_int_equal(cfg_restart_only_changed(&e_off, NULL, &e_on, names, sizeof names), 1);
    assert_string_equal(names, "--events");
    assert_int_equal(cfg_restart_only_changed(&e_on, &e_off, &e_on, names, sizeof names), 0);
    /* names is always terminated, even when short. */
    char tiny[6];
    assert_int_equal(cfg_restart_only_changed(&boot, NULL, &a, tiny, sizeof tiny), 2);
    assert_int_equal(strlen(tiny), 5);

    /* cfg_dup is deep: the copy outlives the original. */
    struct config d;
    cfg_dup(&c, &d);
    cfg_free(&c);
    assert_string_equal(d.pod_name, "web-0");
    assert_int_equal(cfg_restart_only_changed(&d, NULL, &boot, names, sizeof names), 4);
    cfg_free(&d);
    cfg_free(&boot);
    cfg_free(&a);
    cfg_free(&b);
    cfg_free(&e_off);
    cfg_free(&e_on);
}

static void test_restart_only_marked_in_help_and_print(void **state)
{
    struct fixture *f = *state;
    char *h = capture(help_fn, NULL);
    const char *marked[] = {"--listen",       "--kube-api", "--kube-token-file",
                            "--kube-ca-file", "--pod-name", "--namespace"};
    for (size_t i = 0; i < sizeof marked / sizeof marked[0]; i++) {
        char *line = strstr(h, marked[i]);
        assert_non_null(line);
        char *end = strchr(line, '\n');
        char *m = strstr(line, "[restart-only]");
        if (!m || m > end) fail_msg("--help does not mark %s restart-only", marked[i]);
    }
    char *ev = strstr(h, "--events");
    assert_true(strstr(ev, "[restart-only to turn on]") < strchr(ev, '\n'));
    char *deb = strstr(h, "--debounce");
    char *m = strstr(deb, "restart-only");
    assert_true(m == NULL || m > strchr(deb, '\n'));
    free(h);

    char *argv[] = {"--listen", "127.0.0.1:9091"};
    assert_int_equal(parse(f, 2, argv), 0);
    assert_int_equal(cfg_build(&f->flags, &f->annots, &f->cfg, f->err, sizeof f->err), 0);
    char *p = capture(print_fn, f);
    char *line = strstr(p, "\nlisten ");
    assert_non_null(line);
    assert_true(strstr(line, "# flag, restart-only") < strchr(line + 1, '\n'));
    line = strstr(p, "\ndebounce ");
    assert_non_null(line);
    m = strstr(line, "restart-only");
    assert_true(m == NULL || m > strchr(line + 1, '\n'));
    free(p);
}

/* Found by fuzz_options: an unknown flag (or an http URL) holding a control
 * character came back raw in the error, so the error was not one line. */
static void test_errors_are_one_line(void **state)
{
    struct fixture *f = *state;
    char *a1[] = {"--wat\x02-\rlics"};
    assert_int_equal(parse(f, 1, a1), -22);
    assert_null(strpbrk(f->err, "\r\n\x02"));
    assert_non_null(strstr(f->err, "--wat\\x02-\\x0dlics"));
    const char *a2[] = {"--action", "http", "--http-url",
                        "ftp://x\n2026-12-03T00:00:00.000Z info  forged", NULL};
    assert_int_equal(build_args(f, a2), -22);
    assert_null(strchr(f->err, '\n'));
    assert_non_null(strstr(f->err, "ftp://x\\x0a2026"));
}

/* Found by fuzz_options: a value holding a newline split its
 * --print-config line in two (the second could pose as another option). */
static void test_print_config_one_line_per_option(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(
        annots(f, "reload-agent.io/exec-command=\"echo a\\nlisten = 0.0.0.0:1 # flag\""), 0);
    assert_int_equal(cfg_build(&f->flags, &f->annots, &f->cfg, f->err, sizeof f->err), 0);
    char *p = capture(print_fn, f);
    size_t lines = 0;
    for (char *q = p; *q; q++) lines += *q == '\n';
    assert_int_equal(lines, cfg_option_count());
    char *line = strstr(p, "\nexec-command ");
    assert_non_null(line);
    assert_non_null(strstr(line, "\"echo a\\nlisten = 0.0.0.0:1 # flag\""));
    free(p);
}

#define RULES(action, op, codes)                                                                   \
    "[{\"action\":\"" action "\",\"exitCodes\":{\"operator\":\"" op "\",\"values\":[" codes "]}}]"

/* restart-pod exits the agent: accepted only when --restart-policy-rules
 * says the exit code restarts every container (first match decides), at
 * start and on a live update alike; each refusal names what is missing. */
/* --stage (issue 26 item 4): N, P%, auto, off; auto is one at a time for
 * restart and restart-pod; an explicit stage needs an in-place action;
 * --stage-workload is KIND/NAME of a workload that stages. */
static void test_stage_options(void **state)
{
    struct fixture *f = *state;
    struct config c;
    build_into((const char *const[]){"--watch", "/w", "--action", "exec", "--exec-command", "x",
                                     "--stage", "25%", NULL},
               &c);
    assert_int_equal(c.stage_percent, 25);
    assert_int_equal(c.stage_count, 0);
    assert_int_equal(c.stage_default, 0);
    assert_int_equal(c.stage_ttl_ns, INT64_C(30000000000));
    cfg_free(&c);
    build_into(
        (const char *const[]){"--watch", "/w", "--action", "restart", "--process", "app", NULL},
        &c);
    assert_int_equal(c.stage_count, 1);
    assert_int_equal(c.stage_default, 1);
    cfg_free(&c);
    build_into((const char *const[]){"--watch", "/w", "--action", "restart", "--process", "app",
                                     "--stage", "off", NULL},
               &c);
    assert_int_equal(c.stage_count + c.stage_percent, 0);
    cfg_free(&c);
    build_into(
        (const char *const[]){"--watch", "/w", "--action", "signal", "--process", "app", NULL}, &c);
    assert_int_equal(c.stage_count + c.stage_percent, 0); /* auto: off for signal */
    cfg_free(&c);
    build_into((const char *const[]){"--watch", "/w", "--action", "signal", "--process", "app",
                                     "--stage", "3", "--stage-workload", "StatefulSet/db",
                                     "--stage-ttl", "5s", NULL},
               &c);
    assert_int_equal(c.stage_count, 3);
    assert_string_equal(c.stage_workload, "StatefulSet/db");
    assert_int_equal(c.stage_ttl_ns, INT64_C(5000000000));
    cfg_free(&c);

    static const char *const bad[] = {"0", "1001", "0%", "101%", "25%%", "x", "-1", "1.5", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(
            build_args(f, (const char *const[]){"--watch", "/w", "--action", "signal", "--process",
                                                "app", "--stage", bad[i], NULL}),
            -EINVAL);
        assert_non_null(strstr(f->err, "--stage"));
        assert_non_null(strstr(f->err, "P%"));
    }
    assert_int_equal(build_args(f, (const char *const[]){"--watch", "/w", "--action", "rollout",
                                                         "--stage", "1", NULL}),
                     -EINVAL);
    assert_non_null(strstr(f->err, "maxUnavailable"));
    /* rollout alone with the default: no stage, no error */
    assert_int_equal(
        build_args(f, (const char *const[]){"--watch", "/w", "--action", "rollout", NULL}), 0);
    assert_int_equal(
        build_args(f, (const char *const[]){"--watch", "/w", "--stage-workload", "job/x", NULL}),
        -EINVAL);
    assert_non_null(strstr(f->err, "--stage-workload"));
    assert_non_null(strstr(f->err, "KIND/NAME"));
    assert_int_equal(annots(f, "reload-agent.io/stage=\"50%\""), 0);
    assert_int_equal(cfg_build(NULL, &f->annots, &f->cfg, f->err, sizeof f->err), -EINVAL);
    assert_non_null(strstr(f->err, "maxUnavailable")); /* the default action is none */
}

static void test_restart_pod_needs_the_rule(void **state)
{
    struct fixture *f = *state;
    struct {
        const char *rules; /* NULL: the flag is not given */
        const char *code;
        const char *want; /* NULL: accepted; else in the error */
    } cases[] = {
        {RULES("RestartAllContainers", "In", "88"), NULL, NULL},
        {RULES("RestartAllContainers", "In", "3,90"), "90", NULL},
        {RULES("RestartAllContainers", "NotIn", "1,2,70"), NULL, NULL},
        {NULL, NULL, "needs the agent's container to carry restartPolicyRules"},
        {"", NULL, "needs the agent's container to carry restartPolicyRules"},
        {RULES("RestartAllContainers", "In", "88"), "90", "no rule matches exit code 90"},
        {RULES("Restart", "In", "88"), NULL, "rule [0] (action Restart) is the first to match"},
        {"[{\"action\":\"Restart\",\"exitCodes\":{\"operator\":\"In\",\"values\":[88]}},"
         "{\"action\":\"RestartAllContainers\",\"exitCodes\":{\"operator\":\"In\",\"values\":[88]}}"
         "]",
         NULL, "rule [0] (action Restart)"},
        {RULES("RestartAllContainers", "NotIn", "88"), NULL, "no rule matches exit code 88"},
        {RULES("RestartAllContainers", "In", "70"), "70", "70 is the agent's own exit status"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[8];
        int n = 0;
        argv[n++] = "--action";
        argv[n++] = "restart-pod";
        if (cases[i].rules) {
            argv[n++] = "--restart-policy-rules";
            argv[n++] = (char *)cases[i].rules;
        }
        if (cases[i].code) {
            argv[n++] = "--restart-pod-exit-code";
            argv[n++] = (char *)cases[i].code;
        }
        cfg_layer_free(&f->flags);
        assert_int_equal(cfg_layer_init(&f->flags, CFG_SRC_FLAG), 0);
        assert_int_equal(parse(f, n, argv), 0);
        int rc = cfg_build(&f->flags, NULL, &f->cfg, f->err, sizeof f->err);
        if (!cases[i].want) {
            if (rc != 0) fail_msg("case %zu: %s", i, f->err);
            cfg_free(&f->cfg);
            continue;
        }
        assert_int_equal(rc, -EINVAL);
        if (!strstr(f->err, cases[i].want) ||
            !strstr(f->err, cases[i].code && !strcmp(cases[i].code, "70")
                                ? "--restart-pod-exit-code"
                                : "--action restart-pod"))
            fail_msg("case %zu: %s", i, f->err);
    }
    /* a live switch by annotation is judged the same; the rule cannot come
     * from an annotation (it must be what the container carries) */
    char *argv[] = {"--action", "none"};
    cfg_layer_free(&f->flags);
    assert_int_equal(cfg_layer_init(&f->flags, CFG_SRC_FLAG), 0);
    assert_int_equal(parse(f, 2, argv), 0);
    assert_int_equal(annots(f, "reload-agent.io/rule=\"*.conf=restart-pod\""), 0);
    struct cfg_env env = {.kube = CFG_KUBE_NONE};
    assert_int_equal(cfg_build_env(&f->flags, &f->annots, &env, &f->cfg, f->err, sizeof f->err),
                     -EINVAL);
    assert_non_null(strstr(f->err, "--rule \"*.conf=restart-pod\""));
    assert_non_null(strstr(f->err, "restartPolicyRules"));
    cfg_layer_free(&f->annots);
    assert_int_equal(cfg_layer_init(&f->annots, CFG_SRC_ANNOTATION), 0);
    assert_int_equal(annots(f, "reload-agent.io/restart-policy-rules=\"[]\""), -EINVAL);
    assert_non_null(strstr(f->err, "cannot be set by annotation"));
}

/* --restart-policy-rules is judged as the API judges the field: the KEP's
 * "onExit" wrapper, unknown actions and operators, codes out of 0..255
 * and more than 20 rules are errors naming the rule. */
static void test_restart_policy_rules_shape(void **state)
{
    struct fixture *f = *state;
    struct {
        const char *v, *want;
    } bad[] = {
        {"{}", "not a list of rules"},
        {"[", "not valid JSON"},
        {"[{\"action\":\"RestartAllContainers\",\"onExit\":{\"exitCodes\":{\"operator\":\"In\","
         "\"values\":[88]}}}]",
         "rule [0]: unknown key \"onExit\""},
        {RULES("RestartPod", "In", "88"), "action must be Restart or RestartAllContainers"},
        {RULES("Restart", "Is", "88"), "operator must be In or NotIn"},
        {RULES("Restart", "In", "256"), "whole numbers 0 to 255"},
        {RULES("Restart", "In", "1.5"), "whole numbers 0 to 255"},
        {"[{\"action\":\"Restart\"}]", "exitCodes must be an object"},
        {"[{\"action\":\"Restart\",\"exitCodes\":{\"operator\":\"In\",\"values\":[1],\"x\":1}}]",
         "exitCodes: unknown key \"x\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {"--restart-policy-rules", (char *)bad[i].v};
        cfg_layer_free(&f->flags);
        assert_int_equal(cfg_layer_init(&f->flags, CFG_SRC_FLAG), 0);
        assert_int_equal(parse(f, 2, argv), 0);
        assert_int_equal(cfg_build(&f->flags, NULL, &f->cfg, f->err, sizeof f->err), -EINVAL);
        if (!strstr(f->err, bad[i].want) || !strstr(f->err, "--restart-policy-rules"))
            fail_msg("case %zu: %s", i, f->err);
    }
    char many[4096];
    size_t len = 0;
    for (int i = 0; i < 21; i++)
        len += (size_t)snprintf(many + len, sizeof many - len,
                                "%c{\"action\":\"Restart\",\"exitCodes\":{\"operator\":\"In\","
                                "\"values\":[1]}}",
                                i ? ',' : '[');
    snprintf(many + len, sizeof many - len, "]");
    char *argv[] = {"--restart-policy-rules", many};
    cfg_layer_free(&f->flags);
    assert_int_equal(cfg_layer_init(&f->flags, CFG_SRC_FLAG), 0);
    assert_int_equal(parse(f, 2, argv), 0);
    assert_int_equal(cfg_build(&f->flags, NULL, &f->cfg, f->err, sizeof f->err), -EINVAL);
    assert_non_null(strstr(f->err, "more than 20 rules"));
    /* the exit code's range */
    char *code[] = {"--restart-pod-exit-code", "2"};
    cfg_layer_free(&f->flags);
    assert_int_equal(cfg_layer_init(&f->flags, CFG_SRC_FLAG), 0);
    assert_int_equal(parse(f, 2, code), 0);
    assert_int_equal(cfg_build(&f->flags, NULL, &f->cfg, f->err, sizeof f->err), -EINVAL);
    assert_non_null(strstr(f->err, "--restart-pod-exit-code"));
    assert_non_null(strstr(f->err, "3..125"));
}

/* Review 2026-12c §4.2: --fast-sync-objects has one grammar. cfg_build
 * refuses a value exactly when fast sync's parser (kube/podrefs.c) does:
 * before, "configmap/a..b" passed cfg_build and was refused when fast sync
 * started, and "configmaps/app" was refused by cfg_build but taken by fast
 * sync. The kind is singular (the injector's Role reads only that); the
 * message names the value. */
static void test_fast_sync_objects_one_grammar(void **state)
{
    struct fixture *f = *state;
    char long_name[300] = "configmap/";
    memset(long_name + 10, 'a', 254);
    long_name[264] = '\0';
    static const struct {
        const char *spec;
        int ok;
        const char *why;
    } T[] = {
        {"configmap/app", 1, NULL},
        {"secret/db.v1", 1, NULL},
        {"configmaps/app", 0, "(the kind is singular)"},
        {"secrets/db", 0, "(the kind is singular)"},
        {"configmap/a..b", 0, "NAME is not a Kubernetes object name"},
        {"configmap/-a", 0, "NAME is not"},
        {"configmap/App", 0, "NAME is not"},
        {"configmap/", 0, "NAME is not"},
        {"deployment/web", 0, "expected configmap/NAME or secret/NAME"},
        {"app", 0, "expected configmap/NAME or secret/NAME"},
        {NULL, 0, "NAME is not"}, /* long_name: 254 */
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        const char *spec = T[i].spec ? T[i].spec : long_name;
        char *argv[] = {"--fast-sync-objects", (char *)spec};
        cfg_layer_free(&f->flags);
        assert_int_equal(cfg_layer_init(&f->flags, CFG_SRC_FLAG), 0);
        assert_int_equal(parse(f, 2, argv), 0);
        cfg_free(&f->cfg);
        int rc = cfg_build(&f->flags, NULL, &f->cfg, f->err, sizeof f->err);
        struct podrefs r = {0};
        char why[512];
        int prc = podrefs_add_spec(&r, spec, why, sizeof why);
        podrefs_free(&r);
        if (rc != (T[i].ok ? 0 : -22) || prc != (T[i].ok ? 0 : -22))
            print_error("%s: cfg_build %d (%s), fast sync %d (%s)\n", spec, rc, f->err, prc, why);
        assert_int_equal(rc, T[i].ok ? 0 : -22);
        assert_int_equal(prc, rc);
        if (T[i].ok) continue;
        assert_non_null(strstr(f->err, "invalid value for --fast-sync-objects: \""));
        assert_non_null(strstr(f->err, T[i].why));
        assert_non_null(strstr(why, T[i].why));
    }
}

/* The safe-reload options (config/safeopts.c): each combination that
 * cannot work is an error naming the option; the storm limit's "auto"
 * means 5/10m only when rollout is in use. */
struct safe_case {
    const char *args[12];
    const char *err; /* a part of the message, or NULL: accepted */
};

static void build_case(const struct safe_case *c, struct config *out, char *err, size_t n, int *rc)
{
    struct cfg_layer l;
    int help, argc = 0;
    while (c->args[argc]) argc++;
    assert_int_equal(cfg_layer_init(&l, CFG_SRC_FLAG), 0);
    assert_int_equal(cfg_parse_args(argc, (char **)c->args, &l, &help, err, n), 0);
    *rc = cfg_build(&l, NULL, out, err, n);
    cfg_layer_free(&l);
}

static void test_safe_reload_options(void **state)
{
    (void)state;
    static const struct safe_case cases[] = {
        {{"--watch", "/v", "--validate", "nginx -t", "--keep-last-good", "/v=/lkg", "--state-dir",
          "/s", "--verify", "http://127.0.0.1/", NULL},
         NULL},
        {{"--watch", "/v/", "--keep-last-good", "/v=/lkg", "--state-dir", "/s", NULL}, NULL},
        {{"--watch", "/v", "--keep-last-good", "/v=/lkg", NULL}, "needs --state-dir"},
        {{"--watch", "/v", "--keep-last-good", "/w=/lkg", "--state-dir", "/s", NULL},
         "SRC must be one of the --watch roots"},
        {{"--watch", "/v", "--keep-last-good", "/v", "--state-dir", "/s", NULL}, "want SRC=DIR"},
        {{"--watch", "/v", "--keep-last-good", "/v=lkg", "--state-dir", "/s", NULL},
         "DIR must be an absolute path"},
        {{"--watch", "/v", "--keep-last-good", "/v=/v/lkg", "--state-dir", "/s", NULL}, "overlap"},
        {{"--watch", "/v", "--keep-last-good", "/v=/", "--state-dir", "/s", NULL}, "overlap"},
        {{"--watch", "/v", "--watch", "/w", "--keep-last-good", "/v=/lkg", "--keep-last-good",
          "/w=/lkg/x", "--state-dir", "/s", NULL},
         "given twice"},
        {{"--watch", "/v", "--env-watch", "/e", "--keep-last-good", "/e=/lkg", "--state-dir", "/s",
          NULL},
         "--env-watch root"},
        {{"--watch", "/v", "--verify", "http://x/", "--action", "rollout", NULL},
         "roll the workload"},
        {{"--watch", "/v", "--verify", "curl -f x", "--action", "restart-pod",
          "--restart-policy-rules",
          "[{\"action\":\"RestartAllContainers\",\"exitCodes\":{\"operator\":\"In\","
          "\"values\":[88]}}]",
          NULL},
         "restart the pod"},
        {{"--watch", "/v", "--verify", "curl 'x", NULL}, "unterminated single quote"},
        {{"--watch", "/v", "--validate", "nginx \"-t", NULL}, "unterminated double quote"},
        {{"--watch", "/v", "--storm-limit", "3", NULL}, "want N/DURATION"},
        {{"--watch", "/v", "--storm-limit", "0/1m", NULL}, "N from 1 to 1000"},
        {{"--watch", "/v", "--storm-limit", "3/100ms", NULL}, "1s to 24h"},
        {{"--watch", "/v", "--storm-limit", "3/x", NULL}, "the window"},
        {{"--watch", "/v", "--validate-timeout", "1ms", NULL}, "out of range"},
        {{"--watch", "/v", "--validator-socket",
          "/a/very/long/socket/path/that/is/longer/than/the/one/hundred/and/seven/bytes/a/unix/"
          "socket/address/can/hold/x.sock",
          NULL},
         "at most 107 bytes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct config c;
        char err[1024];
        int rc;
        build_case(&cases[i], &c, err, sizeof err, &rc);
        if (!cases[i].err) {
            if (rc != 0) fail_msg("case %zu: %s", i, err);
            cfg_free(&c);
        } else if (rc == 0) {
            cfg_free(&c);
            fail_msg("case %zu accepted, want an error with \"%s\"", i, cases[i].err);
        } else if (!strstr(err, cases[i].err)) {
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err, cases[i].err);
        }
    }
}

static void test_storm_limit_values(void **state)
{
    (void)state;
    static const struct {
        const char *args[6];
        int max;
        int64_t window_s;
    } v[] = {
        {{"--watch", "/v", NULL}, 0, 0},
        {{"--watch", "/v", "--action", "rollout", NULL}, 5, 600},
        {{"--watch", "/v", "--action", "rollout", "--storm-limit", "off"}, 0, 0},
        {{"--watch", "/v", "--storm-limit", "3/1m", NULL}, 3, 60},
        {{"--watch", "/v", "--env-watch", "/e", "--storm-limit", "auto"}, 5, 600},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        struct safe_case sc = {{0}, NULL};
        for (int a = 0; a < 6 && v[i].args[a]; a++) sc.args[a] = v[i].args[a];
        struct config c;
        char err[512];
        int rc;
        build_case(&sc, &c, err, sizeof err, &rc);
        if (rc) fail_msg("case %zu: %s", i, err);
        assert_int_equal(c.storm_max, v[i].max);
        assert_int_equal(c.storm_window_ns, v[i].window_s * 1000000000LL);
        cfg_free(&c);
    }
}

/* keep-last-good as an annotation is the injector's ("true"), skipped by
 * the agent: it never reaches the flag. */
static void test_keep_last_good_annotation_is_the_injectors(void **state)
{
    struct fixture *f = *state;
    assert_true(cfg_is_injector_annotation("reload-agent.io/keep-last-good"));
    assert_int_equal(annots(f, "reload-agent.io/keep-last-good=\"true\"\n"
                               "reload-agent.io/validate=\"nginx -t\""),
                     0);
    char *argv[] = {"--watch", "/v"};
    assert_int_equal(parse(f, 2, argv), 0);
    assert_int_equal(cfg_build(&f->flags, &f->annots, &f->cfg, f->err, sizeof f->err), 0);
    assert_int_equal(f->cfg.keep_last_good.n, 0);
    assert_string_equal(f->cfg.validate, "nginx -t");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stage_options, setup, teardown),
        cmocka_unit_test_setup_teardown(test_injector_annotations_skipped, setup, teardown),
        cmocka_unit_test(test_safe_reload_options),
        cmocka_unit_test(test_storm_limit_values),
        cmocka_unit_test_setup_teardown(test_keep_last_good_annotation_is_the_injectors, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_is_same, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flags_override_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_annotations_override_flags, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_flag_value_names_option_and_value, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_bad_annotation_value_names_annotation, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_unknown_annotation_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rollout_files_annotation_accepted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_custom_hash_annotation_accepted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_annotation_cannot_set_annotations_file, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_unknown_flag_and_missing_value, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rules_parse_and_validate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_action_names_from_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_watch_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_help_lists_every_option, setup, teardown),
        cmocka_unit_test_setup_teardown(test_print_config_shows_sources, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duration_ranges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_slice_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_command_and_hash_annotation_judged, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rollout_needs_an_api_client, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_only_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_only_marked_in_help_and_print, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_errors_are_one_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_print_config_one_line_per_option, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_options_parse_and_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_action_errors_name_option_and_value, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_env_watch_empty_or_twice_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_watch_overlapping_roots, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_action_precedence_over_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_rollout_needs_an_api_client, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_watch_changes_the_watch_set, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_pod_needs_the_rule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_policy_rules_shape, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fast_sync_objects_one_grammar, setup, teardown),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
