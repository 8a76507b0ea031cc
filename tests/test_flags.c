/*
 * test_flags.c - cmd/flags: the one argv style of the subcommands on a
 * table of its own. What is taken (long and short forms, `=`, values that
 * start with '-', `-` and `--`, the order of flags and arguments), the
 * usage errors and their wording (the same as run's, config/config.c),
 * --help generated from the table, and the shared log rows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cmd/flags.h"

enum { F_ALL = 1, F_FILE, F_OUT };

static const char *const OUTS[] = {"yaml", "json", NULL};

static const struct flag_def ROWS[] = {
    {F_ALL, "all", 0, FLAG_BOOL, NULL, NULL, "every one"},
    {F_FILE, "filename", 'f', FLAG_STR, "PATH", NULL, "an input\n(repeatable)"},
    {F_OUT, "output", 'o', FLAG_ENUM, "FORMAT", OUTS, "yaml or json"},
};

static const struct flags_cmd POS = {.name = "t",
                                     .usage = "usage: t [flags] ARG...\n\n",
                                     .footer = "the end\n",
                                     .v = ROWS,
                                     .n = 3,
                                     .positional = 1,
                                     .usage_on_error = 1,
                                     .log = 1};
static const struct flags_cmd NOPOS = {.name = "u", .usage = "usage: u\n\n", .v = ROWS, .n = 3};

/* What the callback saw, as one string: "all;f=x;o=1;@arg;" */
struct seen {
    char s[512];
    struct flags_log log;
    int stop_at_file; /* return 7 when the file "stop" is given */
};

static int on_arg(void *ud, const struct flag_def *def, const char *v, int choice)
{
    struct seen *z = ud;
    size_t l = strlen(z->s);
    if (flags_log_take(&z->log, def, choice)) {
        snprintf(z->s + l, sizeof z->s - l, "log;");
    } else if (!def) {
        snprintf(z->s + l, sizeof z->s - l, "@%s;", v);
    } else if (def->id == F_ALL) {
        assert_null(v);
        snprintf(z->s + l, sizeof z->s - l, "all;");
    } else if (def->id == F_FILE) {
        snprintf(z->s + l, sizeof z->s - l, "f=%s;", v);
        if (z->stop_at_file && strcmp(v, "stop") == 0) return 7;
    } else {
        snprintf(z->s + l, sizeof z->s - l, "o=%d;", choice);
    }
    return 0;
}

/* Runs flags_parse with stdout and stderr in files; returns what it
 * returned, the status, and what was written. */
static int parse(const struct flags_cmd *c, const char *const *args, struct seen *z, int *status,
                 char *out, char *err, size_t n)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = "cmd";
    for (; args[argc - 1]; argc++) argv[argc] = (char *)args[argc - 1];
    FILE *fo = tmpfile(), *fe = tmpfile();
    assert_non_null(fo);
    assert_non_null(fe);
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2);
    dup2(fileno(fo), 1);
    dup2(fileno(fe), 2);
    memset(z->s, 0, sizeof z->s);
    z->log = (struct flags_log){RA_LOG_INFO, RA_LOG_FORMAT_TEXT};
    *status = -99;
    int rc = flags_parse(c, argc, argv, on_arg, z, status);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    FILE *fs[] = {fo, fe};
    char *bufs[] = {out, err};
    for (int k = 0; k < 2; k++) {
        rewind(fs[k]);
        size_t got = fread(bufs[k], 1, n - 1, fs[k]);
        bufs[k][got] = '\0';
        fclose(fs[k]);
    }
    return rc;
}

static void test_what_is_taken(void **state)
{
    (void)state;
    static const struct {
        const char *args[12];
        const char *seen;
    } t[] = {
        {{NULL}, ""},
        {{"--all", "-f", "a", "--filename", "b", "--filename=c", NULL}, "all;f=a;f=b;f=c;"},
        {{"x", "-f", "-", "-", "y", NULL}, "@x;f=-;@-;@y;"}, /* '-' is an argument */
        {{"-f", "--all", NULL}, "f=--all;"},                 /* a value may start with '-' */
        {{"--filename=", NULL}, "f=;"},                      /* or be empty */
        {{"-o", "json", "--output=yaml", NULL}, "o=1;o=0;"}, /* an enum gives its index */
        {{"--", "--all", "-f", NULL}, "@--all;@-f;"},        /* -- ends the flags */
        {{"--log-level", "debug", "--log-format=json", NULL}, "log;log;"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct seen z = {0};
        char out[256], err[256];
        int status;
        assert_int_equal(parse(&POS, t[i].args, &z, &status, out, err, sizeof out), 0);
        if (strcmp(z.s, t[i].seen) != 0) fail_msg("case %zu: saw %s, want %s", i, z.s, t[i].seen);
        assert_string_equal(out, "");
        assert_string_equal(err, "");
    }
    struct seen z = {0};
    char out[256], err[256];
    int status;
    const char *const logs[] = {"--log-level", "warn", "--log-format", "json", NULL};
    assert_int_equal(parse(&POS, logs, &z, &status, out, err, sizeof out), 0);
    assert_int_equal(z.log.level, RA_LOG_WARN);
    assert_int_equal(z.log.format, RA_LOG_FORMAT_JSON);
}

/* Each usage error: exit status 2, "reload-agent CMD: <why>" on stderr,
 * the callback not called for the bad argument nor for any after it. */
static void test_usage_errors(void **state)
{
    (void)state;
    static const struct {
        const struct flags_cmd *c;
        const char *args[6];
        const char *why, *seen;
    } t[] = {
        {&POS, {"--bogus=1", NULL}, "reload-agent t: unknown flag --bogus\n", ""},
        {&POS, {"-x", "--all", NULL}, "reload-agent t: unknown flag -x\n", ""},
        {&POS, {"-fa", NULL}, "reload-agent t: unknown flag -fa\n", ""}, /* no -fVALUE */
        {&POS,
         {"--all", "-f", NULL},
         "reload-agent t: flag --filename needs a value (PATH)\n",
         "all;"},
        {&POS, {"--all=yes", NULL}, "reload-agent t: flag --all takes no value\n", ""},
        {&POS, {"--help=1", NULL}, "reload-agent t: flag --help takes no value\n", ""},
        {&POS, {"-\x1b[2J", NULL}, "reload-agent t: unknown flag -\\x1b[2J\n", ""}, /* one line */
        {&POS,
         {"-o", "xml\n", NULL},
         "reload-agent t: invalid value for --output: \"xml\\n\": must be one of yaml|json\n",
         ""},
        {&POS,
         {"--log-level", "loud", NULL},
         "reload-agent t: invalid value for --log-level: \"loud\": must be one of "
         "debug|info|warn|error\n",
         ""},
        {&NOPOS, {"--all", "x", NULL}, "reload-agent u: unexpected argument \"x\"\n", "all;"},
        {&NOPOS, {"--log-level", "info", NULL}, "reload-agent u: unknown flag --log-level\n", ""},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct seen z = {0};
        char out[2048], err[2048];
        int status;
        assert_int_equal(parse(t[i].c, t[i].args, &z, &status, out, err, sizeof out), 1);
        assert_int_equal(status, 2);
        if (strncmp(err, t[i].why, strlen(t[i].why)) != 0)
            fail_msg("case %zu: stderr %s, want %s", i, err, t[i].why);
        assert_string_equal(z.s, t[i].seen);
        assert_string_equal(out, "");
        /* then the usage (usage_on_error) or a hint */
        const char *tail = err + strlen(t[i].why);
        if (t[i].c->usage_on_error)
            assert_true(strncmp(tail, "\nusage: t [flags] ARG...\n", 25) == 0);
        else
            assert_string_equal(tail, "(see reload-agent u --help)\n");
    }
}

/* --help and -h print the usage on stdout, end the command with 0, and the
 * arguments after them are not looked at. A callback's exit status ends
 * the parse too. */
static void test_help_and_stop(void **state)
{
    (void)state;
    const char *const h1[] = {"--all", "--help", "--bogus", NULL};
    const char *const h2[] = {"-h", NULL};
    const char *const *hs[] = {h1, h2};
    for (int k = 0; k < 2; k++) {
        struct seen z = {0};
        char out[2048], err[256];
        int status;
        assert_int_equal(parse(&POS, hs[k], &z, &status, out, err, sizeof out), 1);
        assert_int_equal(status, 0);
        assert_string_equal(err, "");
        assert_true(strncmp(out, "usage: t [flags] ARG...\n", 24) == 0);
    }
    struct seen z = {.stop_at_file = 1};
    char out[256], err[256];
    int status;
    const char *const stop[] = {"-f", "a", "-f", "stop", "-f", "b", NULL};
    assert_int_equal(parse(&POS, stop, &z, &status, out, err, sizeof out), 1);
    assert_int_equal(status, 7);
    z.stop_at_file = 1;
    assert_int_equal(parse(&POS, stop, &z, &status, out, err, sizeof out), 1);
    assert_string_equal(z.s, "f=a;f=stop;");
}

/* The help text comes from the table: one column wide enough for the
 * longest flag, continuation lines indented to it, the log rows and -h. */
static void test_generated_help(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    flags_print_usage(&POS, f);
    fclose(f);
    assert_string_equal(buf, "usage: t [flags] ARG...\n"
                             "\n"
                             "  --all                   every one\n"
                             "  -f, --filename PATH     an input\n"
                             "                          (repeatable)\n"
                             "  -o, --output FORMAT     yaml or json\n"
                             "  --log-format text|json  log line format (default text)\n"
                             "  --log-level LEVEL       debug, info, warn or error (default info)\n"
                             "  -h, --help              show this help\n"
                             "the end\n");
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_what_is_taken),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_help_and_stop),
        cmocka_unit_test(test_generated_help),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
