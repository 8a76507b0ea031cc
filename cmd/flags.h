/*
 * flags.h - the one command-line style of the subcommands: a table of
 * flags per subcommand, parsed by one function, and --help generated from
 * the same table.
 *
 * `run` takes its flags from the option table of config/config.c (they are
 * also pod annotations); every other subcommand (hash, inject, webhook,
 * webhook certs) declares a struct flags_cmd in its cmd/cmd_*.c. Both
 * follow the same rules and say the same things:
 *   - `--name value` and `--name=value` for a flag that takes a value (the
 *     value may be empty or start with '-'), `-x value` for its short form;
 *     a boolean flag takes no value;
 *   - `-h` and `--help` print the usage on stdout and end the command
 *     (exit 0);
 *   - with positional arguments allowed, `-` is one and `--` ends the flags;
 *   - errors: "unknown flag --x", "flag --x needs a value (METAVAR)",
 *     "flag --x takes no value", "invalid value for --x: \"v\": must be one
 *     of a|b", "unexpected argument \"v\"", printed as "reload-agent CMD:
 *     ..." on stderr, then the usage or a --help hint, with exit status 2
 *     (run says the same from config/config.c, with "(see --help)").
 * The log flags (--log-format, --log-level) are two shared rows, whose
 * choices are base/log.h's names, that a table asks for with .log = 1.
 */
#ifndef RA_FLAGS_H
#define RA_FLAGS_H

#include <stddef.h>
#include <stdio.h>

#include "base/log.h"

enum flag_type {
    FLAG_BOOL, /* no value */
    FLAG_STR,  /* any value */
    FLAG_ENUM, /* one of choices; the callback gets its index */
};

struct flag_def {
    int id;           /* the subcommand's own number for it */
    const char *name; /* long name, without "--" */
    char short_name;  /* 'f' for -f, or 0 */
    enum flag_type type;
    const char *metavar;        /* FLAG_STR, FLAG_ENUM: the value in --help */
    const char *const *choices; /* FLAG_ENUM: NULL-terminated */
    const char *help;           /* may hold '\n': each line is indented */
};

/* The ids of the shared log rows (flags_cmd.log); a subcommand's own ids
 * must differ. */
enum { FLAGS_ID_LOG_FORMAT = -2, FLAGS_ID_LOG_LEVEL = -3 };

struct flags_cmd {
    const char *name;   /* "inject", "webhook certs": in messages */
    const char *usage;  /* the text before the flags in --help (ends with "\n\n") */
    const char *footer; /* the text after them, or NULL */
    const struct flag_def *v;
    size_t n;
    int positional;     /* 1: arguments that are no flag are allowed */
    int usage_on_error; /* 1: a usage error prints the whole usage, else a --help hint */
    int log;            /* 1: the shared --log-format and --log-level rows follow v */
};

/* Called for each flag and each positional argument (def NULL), in the
 * order given. value is the flag's value (NULL for FLAG_BOOL) or the
 * argument; choice is the index of a FLAG_ENUM value (else -1). The
 * strings are argv's. Returns 0 to go on, or the exit status (> 0) to end
 * the command with (the callback has said why, e.g. with
 * flags_usage_error). */
typedef int (*flags_cb)(void *ud, const struct flag_def *def, const char *value, int choice);

/* Parses argv[1..argc) (argv[0] is the subcommand's name) against c.
 * Returns 0 when every argument was taken; or 1 when the command is done,
 * with its exit status in *status: 0 after -h/--help (the usage is on
 * stdout), 2 after a usage error (on stderr), or what cb returned. */
int flags_parse(const struct flags_cmd *c, int argc, char **argv, flags_cb cb, void *ud,
                int *status);

/* Writes c's usage, flag list and footer (the --help text) to f. */
void flags_print_usage(const struct flags_cmd *c, FILE *f);

/* Writes "reload-agent CMD: <message>" (one line under base/text.h's
 * policy, at most 1 KiB) and the usage or a --help hint (as c says) to
 * stderr. Returns 2, the exit status of a usage error. */
int flags_usage_error(const struct flags_cmd *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The log settings the shared rows give, starting at the defaults (info,
 * text). */
struct flags_log {
    enum log_level level;
    enum log_format format;
};

/* Takes a shared log row's value into l: returns 1 if def is one of the
 * rows (choice already checked by flags_parse), else 0 (also for def NULL,
 * a positional argument), for a callback to call first. */
int flags_log_take(struct flags_log *l, const struct flag_def *def, int choice);

#endif
