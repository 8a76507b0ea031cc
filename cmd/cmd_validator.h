/*
 * cmd_validator.h - `reload-agent validator --socket PATH`: the server of
 * the validator protocol (run/validator.h), run in the injector's
 * validator container from the app's image.
 */
#ifndef RA_CMD_VALIDATOR_H
#define RA_CMD_VALIDATOR_H

/* argv[0] is "validator". Returns the exit status: 0 after SIGTERM/SIGINT
 * (or --help), 1 when it cannot listen, 2 for a usage error. */
int cmd_validator(int argc, char **argv);

#endif
