/*
 * cmd_ready.c - `reload-agent ready`: its flag, then safestate_check_ready
 * (run/safestate.c).
 */
#include "cmd/cmd_ready.h"

#include <stdio.h>

#include "cmd/flags.h"
#include "run/safestate.h"

enum { F_STATE_DIR = 1 };

static const struct flag_def FLAGS[] = {
    {F_STATE_DIR, "state-dir", 0, FLAG_STR, "DIR", NULL, "the agent's --state-dir (required)"},
};

static const struct flags_cmd CMD = {
    .name = "ready",
    .usage = "usage: reload-agent ready --state-dir DIR\n"
             "\n"
             "Exits 0 when the agent running with --state-dir DIR is ready: its baseline is\n"
             "taken and, with --keep-last-good, the copies the app reads hold validated\n"
             "content; else 1, saying why on stderr. The injector's startupProbe of the agent\n"
             "(exec: no port, no shell), so the app does not start before that.\n"
             "\n",
    .v = FLAGS,
    .n = sizeof FLAGS / sizeof FLAGS[0],
};

static int on_arg(void *ud, const struct flag_def *def, const char *v, int choice)
{
    (void)choice;
    if (def && def->id == F_STATE_DIR) *(const char **)ud = v;
    return 0;
}

int cmd_ready(int argc, char **argv)
{
    const char *dir = NULL;
    char why[4400];
    int status;
    if (flags_parse(&CMD, argc, argv, on_arg, &dir, &status)) return status;
    if (!dir || !*dir) return flags_usage_error(&CMD, "--state-dir is required");
    if (safestate_check_ready(dir, why, sizeof why) < 0) {
        fprintf(stderr, "reload-agent ready: %s\n", why);
        return 1;
    }
    return 0;
}
