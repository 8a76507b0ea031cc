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
    char *argv[] = {"--debounce", "1m30s", "--watch", "/a", "--watch=/b", "--dry-run",
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
    assert_int_equal(annots(f, "reload-agent.io/debunce=\"1s\""), -22);
    assert_non_null(strstr(f->err, "reload-agent.io/debunce"));
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
        char *argv[] = {"--action", (char *)action_name(a), "--rule", rule, "--process", "p",
                        "--http-url", "http://127.0.0.1:1/", "--exec-command", "true",
                        "--on-start", "skip"};
        assert_int_equal(cfg_layer_init(&l, CFG_SRC_FLAG), 0);
        assert_int_equal(cfg_parse_args(12, argv, &l, &help, f->err, sizeof f->err), 0);
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
    const char *names[] = {"--watch PATH", "--action", "--rule GLOB=ACTION", "--ignore",
                           "--debounce DURATION", "--resync", "--log-format", "--log-level",
                           "--dry-run", "--annotations FILE", "--print-config"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!strstr(h, names[i])) fail_msg("--help lacks %s", names[i]);
    }
    assert_non_null(strstr(h, "(default 200ms)"));
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flags_override_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_annotations_override_flags, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_flag_value_names_option_and_value, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_annotation_value_names_annotation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_annotation_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_annotation_cannot_set_annotations_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_flag_and_missing_value, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rules_parse_and_validate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_action_names_from_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_watch_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_help_lists_every_option, setup, teardown),
        cmocka_unit_test_setup_teardown(test_print_config_shows_sources, setup, teardown),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
