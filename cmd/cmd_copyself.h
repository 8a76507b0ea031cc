/*
 * cmd_copyself.h - `reload-agent copy-self DEST`: copies the running
 * (static) binary to DEST, so that a container of another image (the
 * injector's validator, made from the app's image) can run it from a
 * shared emptyDir without a shell or any tool of its own. With --prepare
 * DIR it also makes DIR/live and DIR/candidate as its user: the copies of
 * --keep-last-good, which a container that mounts them with subPath before
 * the agent runs would otherwise have the kubelet create as root.
 */
#ifndef RA_CMD_COPYSELF_H
#define RA_CMD_COPYSELF_H

/* argv[0] is "copy-self". Returns 0, 1 when the copy fails (said on
 * stderr), 2 for a usage error. */
int cmd_copyself(int argc, char **argv);

#endif
