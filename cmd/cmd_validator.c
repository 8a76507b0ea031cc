/*
 * cmd_validator.c - `reload-agent validator`: its flags (one table, --help
 * from it), the check of the socket path, then validator_main
 * (run/validator.c).
 */
#include "cmd/cmd_validator.h"

#include <string.h>

#include "base/log.h"
#include "cmd/flags.h"
#include "config/safeopts.h"
#include "run/validator.h"

enum { F_SOCKET = 1 };

static const struct flag_def FLAGS[] = {
    {F_SOCKET, "socket", 0, FLAG_STR, "PATH", NULL,
     "the unix socket to listen on (required; its directory must\n"
     "exist: the emptyDir the agent mounts too)"},
};

static const struct flags_cmd CMD = {
    .name = "validator",
    .usage = "usage: reload-agent validator --socket PATH [flags]\n"
             "\n"
             "Runs the agent's check commands (--validate, a command --verify) in this\n"
             "container, one at a time, each with the time limit the agent gives: the\n"
             "injector starts it in a container made from the app's own image, with the\n"
             "app's mounts, env and securityContext, so that a checker such as `nginx -t`\n"
             "reads the files as the app would, with no privilege. Protocol: one JSON line\n"
             "{\"argv\":[...],\"timeout_ms\":N} per connection, one JSON line back\n"
             "{\"exit\",\"signal\",\"timed_out\",\"output\"} (see docs/safe-reload.md).\n"
             "\n",
    .v = FLAGS,
    .n = sizeof FLAGS / sizeof FLAGS[0],
    .log = 1,
};

struct args {
    struct validator_opts o;
    struct flags_log log;
};

static int on_arg(void *ud, const struct flag_def *def, const char *v, int choice)
{
    struct args *a = ud;
    if (flags_log_take(&a->log, def, choice)) return 0;
    if (def->id == F_SOCKET) a->o.socket = v;
    return 0;
}

int cmd_validator(int argc, char **argv)
{
    struct args a = {.log = {RA_LOG_INFO, RA_LOG_FORMAT_TEXT}};
    int status;
    char why[128];

    if (flags_parse(&CMD, argc, argv, on_arg, &a, &status)) return status;
    log_configure(a.log.level, a.log.format);
    if (!a.o.socket || !*a.o.socket) return flags_usage_error(&CMD, "--socket is required");
    if (safeopts_check_socket(a.o.socket, why, sizeof why) < 0)
        return flags_usage_error(&CMD, "--socket: %s", why);
    return validator_main(&a.o);
}
