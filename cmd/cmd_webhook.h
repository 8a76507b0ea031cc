/*
 * cmd_webhook.h - the `webhook` subcommand: the mutating admission webhook
 * server (webhook/server.h) under its own libuv loop, and the dispatch of
 * `webhook certs` (cmd/cmd_certs.h).
 */
#ifndef RA_CMD_WEBHOOK_H
#define RA_CMD_WEBHOOK_H

/* Runs `reload-agent webhook` with argv[0] = "webhook" (`webhook certs
 * ...` when argv[1] is "certs": cmd_certs). Returns the exit status: 0
 * after a clean shutdown (SIGTERM/SIGINT) or --help; 2 for a usage error or
 * a certificate/key that cannot be loaded at start (a configuration
 * problem: nothing was served); 1 when the address cannot be bound or
 * another runtime failure stops the server. */
int cmd_webhook(int argc, char **argv);

#endif
