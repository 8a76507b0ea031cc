/*
 * cmd_run.h - the command line of `reload-agent run` (the default
 * subcommand): its flags are the option table of config/config.c, which the
 * pod annotations share, and --help is generated from that table.
 */
#ifndef RA_CMD_RUN_H
#define RA_CMD_RUN_H

/* Parses argv[0..argc) (the arguments after the subcommand name, or all of
 * them when `run` is implied) and runs the agent (run_main). Returns the
 * exit status: 0 after --help or a clean shutdown, 2 for a usage error or
 * an invalid configuration, 1 for other start-up failures. */
int cmd_run(int argc, char **argv);

/* Prints `run`'s usage (the flags from the option table) to stdout. */
void cmd_run_usage(void);

#endif
