/*
 * cmd_run.c - `reload-agent run`: the flags into a layer of the option
 * table (config/config.c: the same rules and messages as cmd/flags.h),
 * --help from that table, then the daemon (run/run.c).
 */
#include "cmd/cmd_run.h"

#include <stdio.h>

#include "run/run.h"
#include "config/config.h"

void cmd_run_usage(void)
{
    printf("usage: reload-agent run [flags]\n\n"
           "Watches mounted ConfigMap/Secret volumes (or any directory or file), hashes their\n"
           "content and acts when it really changed.\n\nFlags:\n");
    cfg_print_help(stdout);
}

int cmd_run(int argc, char **argv)
{
    struct cfg_layer flags;
    char err[1024];
    int want_help = 0;

    if (cfg_layer_init(&flags, CFG_SRC_FLAG) < 0) return 1;
    if (cfg_parse_args(argc, argv, &flags, &want_help, err, sizeof err) < 0) {
        cfg_layer_free(&flags);
        fprintf(stderr, "reload-agent: %s\n", err);
        return 2;
    }
    if (want_help) {
        cmd_run_usage();
        cfg_layer_free(&flags);
        return 0;
    }
    return run_main(&flags);
}
