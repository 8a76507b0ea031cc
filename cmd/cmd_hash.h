/*
 * cmd_hash.h - the `reload-agent hash` subcommand: prints the canonical
 * content hash of docs/hash.md so a user or a CI job can reproduce it.
 */
#ifndef RA_CMD_HASH_H
#define RA_CMD_HASH_H

/* Runs `reload-agent hash [--list] PATH...`; argv[0] is "hash".
 * Prints the 64-hex total and a newline on stdout; with --list, first the
 * manifest the total is the SHA-256 of: one line per file "<content
 * sha256>  <logical path>" in sorted order, in GNU sha256sum format (see
 * hash_manifest_line). Skipped entries are logged as warnings on stderr.
 * Returns the exit status: 0 success (also for --help, which prints the
 * usage on stdout), 1 hashing or output error (logged with path and
 * reason), 2 usage error. */
int cmd_hash(int argc, char **argv);

#endif
