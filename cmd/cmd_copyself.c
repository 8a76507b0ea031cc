/*
 * cmd_copyself.c - `reload-agent copy-self DEST`: /proc/self/exe read
 * whole and written to DEST atomically (DEST.tmp, then rename), mode 0755,
 * through base/file.h.
 */
#include "cmd/cmd_copyself.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/file.h"
#include "base/log.h"
#include "cmd/flags.h"

#define SELF_MAX (256u << 20)

static const struct flags_cmd CMD = {
    .name = "copy-self",
    .usage = "usage: reload-agent copy-self DEST\n"
             "\n"
             "Copies this binary (static: it needs nothing from the image it runs in) to DEST,\n"
             "atomically, mode 0755: the injector's init container puts it into an emptyDir\n"
             "from which the validator container, made from the app's image, runs\n"
             "`reload-agent validator`.\n"
             "\n",
    .positional = 1,
    .usage_on_error = 1,
};

static int on_arg(void *ud, const struct flag_def *def, const char *v, int choice)
{
    const char **dest = ud;
    (void)choice;
    if (def) return 0;
    if (*dest) return flags_usage_error(&CMD, "one DEST only (got \"%s\" too)", v);
    *dest = v;
    return 0;
}

int cmd_copyself(int argc, char **argv)
{
    const char *dest = NULL;
    char *buf, err[4400];
    size_t len;
    int status;
    if (flags_parse(&CMD, argc, argv, on_arg, &dest, &status)) return status;
    if (!dest || !*dest) return flags_usage_error(&CMD, "no DEST given");
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
