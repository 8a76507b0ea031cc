/*
 * flags.c - one table-driven argv parser and --help for the subcommands
 * (see flags.h).
 */
#include "cmd/flags.h"

#include <stdarg.h>
#include <string.h>

#include "base/text.h"
#include "config/goquote.h"

static const struct flag_def LOG_ROWS[] = {
    {FLAGS_ID_LOG_FORMAT, "log-format", 0, FLAG_ENUM, "text|json", log_format_names,
     "log line format (default text)"},
    {FLAGS_ID_LOG_LEVEL, "log-level", 0, FLAG_ENUM, "LEVEL", log_level_names,
     "debug, info, warn or error (default info)"},
};
#define NLOG (sizeof LOG_ROWS / sizeof LOG_ROWS[0])

static const struct flag_def HELP_ROW = {0, "help", 'h', FLAG_BOOL, NULL, NULL, "show this help"};

/* Row i of c's flags: its own, then the log rows, then --help. */
static size_t nrows(const struct flags_cmd *c) { return c->n + (c->log ? NLOG : 0) + 1; }

static const struct flag_def *row(const struct flags_cmd *c, size_t i)
{
    if (i < c->n) return &c->v[i];
    if (c->log && i < c->n + NLOG) return &LOG_ROWS[i - c->n];
    return &HELP_ROW;
}

int flags_usage_error(const struct flags_cmd *c, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ra_one_line_fix(msg, sizeof msg); /* an argument quoted raw cannot break the line */
    fprintf(stderr, "reload-agent %s: %s", c->name, msg);
    if (c->usage_on_error) {
        fputs("\n\n", stderr);
        flags_print_usage(c, stderr);
    } else {
        fprintf(stderr, "\n(see reload-agent %s --help)\n", c->name);
    }
    return 2;
}

/* The row named by a (after "--", up to '=' if any, or the one letter of
 * "-x"), or NULL. */
static const struct flag_def *lookup(const struct flags_cmd *c, const char *a, size_t *namelen)
{
    if (a[1] != '-') {
        *namelen = 1;
        for (size_t i = 0; a[2] == '\0' && i < nrows(c); i++)
            if (row(c, i)->short_name && row(c, i)->short_name == a[1]) return row(c, i);
        return NULL;
    }
    const char *name = a + 2, *eq = strchr(name, '=');
    *namelen = eq ? (size_t)(eq - name) : strlen(name);
    for (size_t i = 0; i < nrows(c); i++)
        if (strlen(row(c, i)->name) == *namelen && memcmp(row(c, i)->name, name, *namelen) == 0)
            return row(c, i);
    return NULL;
}

static int bad_choice(const struct flags_cmd *c, const struct flag_def *d, const char *v)
{
    char q[200], list[256];
    size_t l = 0;
    list[0] = '\0';
    for (int i = 0; d->choices[i] && l < sizeof list; i++)
        l += (size_t)snprintf(list + l, sizeof list - l, "%s%s", i ? "|" : "", d->choices[i]);
    gq_quote_to(q, sizeof q, v, strlen(v));
    return flags_usage_error(c, "invalid value for --%s: %s: must be one of %s", d->name, q, list);
}

/* Takes one flag argument (a starts with '-'); *i moves past a value it
 * reads. Returns 0 to go on, or 1 with *status set. */
static int take_flag(const struct flags_cmd *c, int argc, char **argv, int *i, flags_cb cb,
                     void *ud, int *status)
{
    const char *a = argv[*i], *eq = a[1] == '-' ? strchr(a, '=') : NULL, *v = NULL;
    size_t len;
    const struct flag_def *d = lookup(c, a, &len);
    if (!d) {
        *status =
            flags_usage_error(c, "unknown flag %.*s", (int)(a[1] == '-' ? len + 2 : strlen(a)), a);
        return 1;
    }
    if (d->type == FLAG_BOOL && eq) {
        *status = flags_usage_error(c, "flag --%s takes no value", d->name);
        return 1;
    }
    if (d == &HELP_ROW) {
        flags_print_usage(c, stdout);
        *status = 0;
        return 1;
    }
    if (d->type != FLAG_BOOL) {
        if (eq)
            v = eq + 1;
        else if (*i + 1 < argc)
            v = argv[++*i];
        else {
            *status = flags_usage_error(c, "flag --%s needs a value (%s)", d->name, d->metavar);
            return 1;
        }
    }
    int choice = -1;
    if (d->type == FLAG_ENUM) {
        for (int k = 0; d->choices[k] && choice < 0; k++)
            if (strcmp(d->choices[k], v) == 0) choice = k;
        if (choice < 0) {
            *status = bad_choice(c, d, v);
            return 1;
        }
    }
    int rc = cb(ud, d, v, choice);
    if (rc > 0) *status = rc;
    return rc > 0;
}

int flags_parse(const struct flags_cmd *c, int argc, char **argv, flags_cb cb, void *ud,
                int *status)
{
    int opts_done = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!opts_done && c->positional && strcmp(a, "--") == 0) {
            opts_done = 1;
        } else if (!opts_done && a[0] == '-' && a[1] != '\0') {
            if (take_flag(c, argc, argv, &i, cb, ud, status)) return 1;
        } else if (!c->positional) {
            char q[200];
            gq_quote_to(q, sizeof q, a, strlen(a));
            *status = flags_usage_error(c, "unexpected argument %s", q);
            return 1;
        } else {
            int rc = cb(ud, NULL, a, -1);
            if (rc > 0) {
                *status = rc;
                return 1;
            }
        }
    }
    return 0;
}

/* "-f, --filename PATH", "--all" */
static void head_of(const struct flag_def *d, char *out, size_t n)
{
    const char *mv = d->type == FLAG_BOOL ? "" : d->metavar;
    if (d->short_name)
        snprintf(out, n, "-%c, --%s%s%s", d->short_name, d->name, *mv ? " " : "", mv);
    else
        snprintf(out, n, "--%s%s%s", d->name, *mv ? " " : "", mv);
}

void flags_print_usage(const struct flags_cmd *c, FILE *f)
{
    char head[96];
    size_t w = 0;
    fputs(c->usage, f);
    for (size_t i = 0; i < nrows(c); i++) {
        head_of(row(c, i), head, sizeof head);
        if (strlen(head) > w) w = strlen(head);
    }
    for (size_t i = 0; i < nrows(c); i++) {
        const char *h = row(c, i)->help, *nl;
        head_of(row(c, i), head, sizeof head);
        fprintf(f, "  %-*s", (int)w + 1, head);
        for (; (nl = strchr(h, '\n')) != NULL; h = nl + 1)
            fprintf(f, " %.*s\n  %-*s", (int)(nl - h), h, (int)w + 1, "");
        fprintf(f, " %s\n", h);
    }
    if (c->footer) fputs(c->footer, f);
}

int flags_log_take(struct flags_log *l, const struct flag_def *def, int choice)
{
    if (def == &LOG_ROWS[0])
        l->format = (enum log_format)choice;
    else if (def == &LOG_ROWS[1])
        l->level = (enum log_level)choice;
    else
        return 0;
    return 1;
}
