/*
 * main.c - subcommand dispatch: run (default), hash, inject, webhook (and
 * webhook certs, through cmd_webhook), validator, ready, copy-self,
 * version. Each subcommand parses its
 * own flags in cmd/cmd_<name>.c.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cmd_copyself.h"
#include "cmd/cmd_hash.h"
#include "cmd/cmd_ready.h"
#include "cmd/cmd_inject.h"
#include "cmd/cmd_webhook.h"
#include "cmd/cmd_run.h"
#include "cmd/cmd_sync.h"
#include "cmd/cmd_validator.h"
#include "base/backoff.h"

static void usage(FILE *f)
{
    fprintf(
        f, "usage: reload-agent [run] [flags]     watch and act on content changes\n"
           "       reload-agent hash [--list] PATH...  print the content hash\n"
           "       reload-agent inject [-f FILE|DIR|-]... [--all] [-o yaml|json|patch] [-i]\n"
           "                                        add the sidecar to manifests\n"
           "       reload-agent webhook [flags]     serve the injection webhook\n"
           "       reload-agent webhook certs ...   create the webhook's TLS Secret, set caBundle\n"
           "       reload-agent validator --socket PATH  run the agent's checks in the app's "
           "image\n"
           "       reload-agent ready --state-dir DIR  exit 0 once the agent is ready\n"
           "       reload-agent sync --all-namespaces | --namespaces NS[,NS...]\n"
           "                                        the cluster sync service (docs/sync.md)\n"
           "       reload-agent copy-self DEST      copy this binary to DEST (mode 0755)\n"
           "       reload-agent version             print version and git commit\n"
           "       reload-agent SUBCOMMAND --help\n");
}

int main(int argc, char **argv)
{
    /* Jitter (rollout, retry backoff) must differ between replicas. */
    ra_rng_seed_process();
    /* Every evaluation allocates and frees the same ~100 KiB (the hash's
     * read buffer and walk state). Keep it in the heap instead of giving it
     * back with brk(2) and faulting fresh pages in the next time. */
    mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
    if (argc >= 2 && strcmp(argv[1], "version") == 0) {
        printf("reload-agent %s (commit %s)\n", RA_VERSION, RA_GIT_COMMIT);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "hash") == 0) return cmd_hash(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "inject") == 0) return cmd_inject(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "webhook") == 0) return cmd_webhook(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "validator") == 0) return cmd_validator(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "sync") == 0) return cmd_sync(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "ready") == 0) return cmd_ready(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "copy-self") == 0) return cmd_copyself(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "run") == 0) return cmd_run(argc - 2, argv + 2);
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
                      strcmp(argv[1], "help") == 0)) {
        usage(stdout);
        printf("\n");
        cmd_run_usage();
        return 0;
    }
    if (argc >= 2 && argv[1][0] != '-') {
        fprintf(stderr, "reload-agent: unknown subcommand \"%s\"\n", argv[1]);
        usage(stderr);
        return 2;
    }
    return cmd_run(argc - 1, argv + 1);
}
