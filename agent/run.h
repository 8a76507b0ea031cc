/*
 * run.h - the `run` subcommand: configuration, the event loop, live
 * annotation updates and graceful shutdown.
 */
#ifndef RA_RUN_H
#define RA_RUN_H

/* Runs the agent with the arguments after the subcommand name. Returns the
 * process exit status: 0 after SIGTERM/SIGINT, 2 for invalid configuration,
 * 1 for other start-up failures. */
int run_main(int argc, char **argv);

/* Prints `run` usage (flags from the option table) to stdout. */
void run_usage(void);

#endif
