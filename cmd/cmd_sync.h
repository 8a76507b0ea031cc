/*
 * cmd_sync.h - `reload-agent sync`: the cluster sync service's flags.
 */
#ifndef RA_CMD_SYNC_H
#define RA_CMD_SYNC_H

/* argv[0] is "sync". Returns the exit status. */
int cmd_sync(int argc, char **argv);

#endif
