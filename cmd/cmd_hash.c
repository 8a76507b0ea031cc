/*
 * cmd_hash.c - `reload-agent hash [--list] PATH...`: computes the canonical
 * content hash with hash_compute() and prints it (and with --list first
 * the manifest it is the SHA-256 of, in sha256sum format), so the hash the
 * agent acts on can be reproduced outside it, with coreutils alone.
 */
#include "cmd/cmd_hash.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/flags.h"
#include "base/log.h"
#include "hash/hash.h"

enum { F_LIST = 1 };

static const struct flag_def FLAGS[] = {
    {F_LIST, "list", 0, FLAG_BOOL, NULL, NULL,
     "first print the manifest, so that\n"
     "reload-agent hash --list PATH... | head -n -1 | sha256sum\n"
     "reproduces the hash"},
};

static const struct flags_cmd CMD = {
    .name = "hash",
    .usage = "usage: reload-agent hash [--list] PATH...\n"
             "\n"
             "Prints the canonical SHA-256 of the user-visible content under the PATHs\n"
             "(directories or files), as the agent computes it: the SHA-256 of the\n"
             "manifest, one line per file sorted bytewise by logical path, exactly as GNU\n"
             "sha256sum prints it: <sha256 of content>  <logical path>.\n"
             "\n",
    .v = FLAGS,
    .n = sizeof FLAGS / sizeof FLAGS[0],
    .positional = 1,
    .usage_on_error = 1,
};

struct args {
    const char **paths;
    size_t npaths;
    int list;
};

static int on_arg(void *ud, const struct flag_def *def, const char *value, int choice)
{
    struct args *a = ud;
    (void)choice;
    if (!def)
        a->paths[a->npaths++] = value;
    else if (def->id == F_LIST)
        a->list = 1;
    return 0;
}

static void on_warn(void *ud, enum hash_warning w, const char *lpath)
{
    static const char *const what[] = {
        [HASH_WARN_ESCAPING_SYMLINK] = "symlink points outside its root, not followed",
        [HASH_WARN_LOOP] = "symlink loop, directory cycle or too deep, not followed",
        [HASH_WARN_DANGLING] = "dangling symlink, skipped",
        [HASH_WARN_SPECIAL] = "not a regular file or directory, skipped",
    };
    struct log_rec r;
    (void)ud;
    if (log_rec_begin(&r, RA_LOG_WARN, "hash_skip")) {
        log_rec_str(&r, "path", lpath);
        log_rec_end(&r, "%s", what[w]);
    }
}

static void put_stdout(void *ud, const void *p, size_t n)
{
    (void)ud;
    fwrite(p, 1, n, stdout); /* errors: checked once, after the last line */
}

int cmd_hash(int argc, char **argv)
{
    struct args a = {calloc((size_t)(argc > 0 ? argc : 1), sizeof *a.paths), 0, 0};
    int status = 0;
    if (!a.paths) {
        fputs("reload-agent hash: out of memory\n", stderr);
        return 1;
    }
    if (flags_parse(&CMD, argc, argv, on_arg, &a, &status)) {
        free(a.paths);
        return status;
    }
    if (a.npaths == 0) {
        free(a.paths);
        return flags_usage_error(&CMD, "no PATH given");
    }
    struct hash_opts ho = {.warn = on_warn};
    struct hash_manifest m;
    struct hash_error err;
    int rc = hash_compute(a.paths, a.npaths, &ho, &m, &err);
    free(a.paths);
    if (rc < 0) {
        struct log_rec r;
        if (log_rec_begin(&r, RA_LOG_ERROR, "hash_error")) {
            log_rec_str(&r, "path", err.path); /* a field: escaped, unlike the message */
            if (rc == -EAGAIN && strcmp(err.op, "rewalk") == 0)
                log_rec_end(&r, "content kept changing while being hashed (%d attempts)",
                            HASH_MAX_REWALKS + 1);
            else
                log_rec_end(&r, "cannot hash: %s failed: %s", err.op, hash_strerror(rc));
        }
        return 1;
    }
    char hex[HASH_HEX_LEN + 1];
    for (size_t i = 0; a.list && i < m.n; i++) hash_manifest_line(&m.v[i], put_stdout, NULL);
    hash_hex(m.total, hex);
    printf("%s\n", hex);
    hash_manifest_free(&m);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        log_error("hash: cannot write the output: %s", strerror(errno));
        status = 1;
    }
    return status;
}
