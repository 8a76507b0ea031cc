/*
 * cmd_ready.h - `reload-agent ready --state-dir DIR`: exits 0 when the agent
 * whose --state-dir is DIR is ready (run/safestate.h), else 1 with the
 * reason: the injector's exec startupProbe (no port, no shell), which keeps
 * the app from starting before its --keep-last-good copies hold validated
 * content.
 */
#ifndef RA_CMD_READY_H
#define RA_CMD_READY_H

/* argv[0] is "ready". Returns 0 ready, 1 not ready, 2 usage error. */
int cmd_ready(int argc, char **argv);

#endif
