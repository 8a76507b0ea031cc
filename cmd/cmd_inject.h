/*
 * cmd_inject.h - the `reload-agent inject` subcommand: adds the
 * reload-agent sidecar to Kubernetes manifests (files, directories or
 * stdin; YAML or JSON), like `linkerd inject`.
 */
#ifndef RA_CMD_INJECT_H
#define RA_CMD_INJECT_H

/* Runs `reload-agent inject [-f FILE|-]... [FILE|DIR|-]... [--all]
 * [--output yaml|json|patch] [-i] [--image IMAGE]`; argv[0] is "inject".
 * Reads every input first and writes only when all of them were processed
 * without error: the manifests on stdout, or (-i) each changed file
 * replaced atomically. The per-object report goes to stderr. Returns the
 * exit status: 0 success (also --help), 1 an input that cannot be read,
 * parsed or injected, or a write error (nothing written), 2 usage error. */
int cmd_inject(int argc, char **argv);

#endif
