/*
 * cmd_copyself.c - `reload-agent copy-self DEST [--prepare DIR]...`:
 * /proc/self/exe read whole and written to DEST atomically (DEST.tmp, then
 * rename), mode 0755, through base/file.h; and the --keep-last-good
 * directories made as this user.
 */
#include "cmd/cmd_copyself.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"
#include "base/log.h"
#include "cmd/flags.h"
#include "run/lastgood.h"

#define SELF_MAX (256u << 20)

enum { F_PREPARE = 1 };

static const struct flag_def FLAGS[] = {
    {F_PREPARE, "prepare", 0, FLAG_STR, "DIR", NULL,
     "also make DIR/live and DIR/candidate (mode 0755, owned by\n"
     "this user), the copies of --keep-last-good DIR: a\n"
     "container that mounts one with subPath before the agent\n"
     "runs would otherwise have the kubelet make it, as root\n"
     "(repeatable)"},
};

#define PREPARE_MAX 16

struct args {
    const char *dest;
    const char *prepare[PREPARE_MAX];
    size_t nprepare;
};

static const struct flags_cmd CMD = {
    .name = "copy-self",
    .usage = "usage: reload-agent copy-self DEST [--prepare DIR]...\n"
             "\n"
             "Copies this binary (static: it needs nothing from the image it runs in) to DEST,\n"
             "atomically, mode 0755: the injector's init container puts it into an emptyDir\n"
             "from which the validator container, made from the app's image, runs\n"
             "`reload-agent validator`.\n"
             "\n",
    .v = FLAGS,
    .n = sizeof FLAGS / sizeof FLAGS[0],
    .positional = 1,
    .usage_on_error = 1,
};

static int on_arg(void *ud, const struct flag_def *def, const char *v, int choice)
{
    struct args *a = ud;
    (void)choice;
    if (def) {
        if (a->nprepare == PREPARE_MAX)
            return flags_usage_error(&CMD, "at most %d --prepare", PREPARE_MAX);
        if (v[0] != '/')
            return flags_usage_error(&CMD, "--prepare \"%s\": not an absolute path", v);
        a->prepare[a->nprepare++] = v;
        return 0;
    }
    if (a->dest) return flags_usage_error(&CMD, "one DEST only (got \"%s\" too)", v);
    a->dest = v;
    return 0;
}

/* DIR/live and DIR/candidate, made if missing (DIR itself must exist: the
 * emptyDir). Returns 0, or 1 after saying why. */
static int prepare(const char *dir)
{
    static const char *const sub[] = {LASTGOOD_LIVE, LASTGOOD_CANDIDATE};
    for (size_t i = 0; i < 2; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, sub[i]);
        if (mkdir(p, 0755) < 0 && errno != EEXIST) {
            fprintf(stderr, "reload-agent copy-self: cannot create %s: %s\n", p, strerror(errno));
            return 1;
        }
    }
    return 0;
}

int cmd_copyself(int argc, char **argv)
{
    struct args a = {0};
    char *buf, err[4400];
    size_t len;
    int status;
    if (flags_parse(&CMD, argc, argv, on_arg, &a, &status)) return status;
    const char *dest = a.dest;
    if (!dest || !*dest) return flags_usage_error(&CMD, "no DEST given");
    for (size_t i = 0; i < a.nprepare; i++)
        if (prepare(a.prepare[i])) return 1;
    if (ra_read_file("/proc/self/exe", SELF_MAX, &buf, &len, err, sizeof err) < 0) {
        fprintf(stderr, "reload-agent copy-self: cannot read this binary: %s\n", err);
        return 1;
    }
    int rc = ra_write_file_atomic(dest, buf, len, 0755, err, sizeof err);
    free(buf);
    if (rc < 0) {
        fprintf(stderr, "reload-agent copy-self: %s\n", err);
        return 1;
    }
    return 0;
}
