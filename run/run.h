/*
 * run.h - the `run` daemon: configuration, the event loop, live annotation
 * updates and graceful shutdown. Its command line is cmd/cmd_run.h's.
 */
#ifndef RA_RUN_H
#define RA_RUN_H

#include "config/config.h"

/* Runs the agent on the flag layer the command line made (cfg_parse_args),
 * which it takes (the caller no longer frees it): builds the configuration
 * with the annotations file, prints it with --print-config, else runs until
 * SIGTERM/SIGINT. Returns the process exit status: 0 after SIGTERM/SIGINT
 * or --print-config, 2 for invalid configuration, 1 for other start-up
 * failures, --restart-pod-exit-code after the restart-pod action. */
int run_main(struct cfg_layer *flags);

#endif
