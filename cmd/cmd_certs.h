/*
 * cmd_certs.h - the command line of `reload-agent webhook certs`: flags
 * parsed from a table (cmd/flags.h) into a struct certs_opts, checked,
 * and the job of webhook/certs.h run with them.
 */
#ifndef RA_CMD_CERTS_H
#define RA_CMD_CERTS_H

/* Runs `reload-agent webhook certs [flags]` with argv[0] = "certs".
 * Returns the exit status: 0 done (also --help), 1 an API or certificate
 * error (webhook_certs_run), 2 a usage error. */
int cmd_certs(int argc, char **argv);

#endif
