/*
 * cmd_inject.c - `reload-agent inject`: the command line, reading the
 * inputs (files, directories walked for manifests, stdin), and writing the
 * result (stdout, or each changed file in place, atomically). The work in
 * between is inject/cli.c.
 */
#include "agent/cmd_inject.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/flags.h"
#include "base/log.h"
#include "inject/cli.h"

#define INJECT_MAX_INPUT (256u << 20) /* bytes per input */

enum { F_FILE = 1, F_ALL, F_OUTPUT, F_IN_PLACE, F_IMAGE };

static const char *const OUTPUTS[] = {"yaml", "json", "patch", NULL};

static const struct flag_def FLAGS[] = {
    {F_FILE, "filename", 'f', FLAG_STR, "PATH", NULL,
     "an input (repeatable; a plain argument works too)"},
    {F_ALL, "all", 0, FLAG_BOOL, NULL, NULL,
     "inject every workload not annotated inject: \"false\""},
    {F_OUTPUT, "output", 'o', FLAG_ENUM, "FORMAT", OUTPUTS,
     "yaml (default: the manifests, each input in its own\n"
     "format), json (one JSON document per document), or\n"
     "patch (per injected object its JSON Patch, as a list\n"
     "of kustomize `patches:` entries; JSON for JSON input)"},
    {F_IN_PLACE, "in-place", 'i', FLAG_BOOL, NULL, NULL,
     "rewrite each changed input file atomically instead\n"
     "of printing (not with stdin; --output yaml only)"},
    {F_IMAGE, "image", 0, FLAG_STR, "IMAGE", NULL,
     "the sidecar image (default " INJECT_DEFAULT_IMAGE ")"},
};

static const struct flags_cmd CMD = {
    .name = "inject",
    .usage = "usage: reload-agent inject [-f FILE|DIR|-]... [FILE|DIR|-]... [--all]\n"
             "                           [--output yaml|json|patch] [-i] [--image IMAGE]\n"
             "\n"
             "Adds the reload-agent sidecar to the workloads of Kubernetes manifests\n"
             "(Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob, Argo\n"
             "Rollout, and the items of a List) whose pod template is annotated\n"
             "reload-agent.io/inject: \"true\" (every workload with --all; \"false\" always\n"
             "opts out). Every other object passes through unchanged.\n"
             "\n"
             "Inputs are YAML streams (several documents) or JSON. With no input, or\n"
             "with -, stdin is read. A directory is walked recursively for *.yaml,\n"
             "*.yml and *.json files in sorted order (names starting with '.' are\n"
             "skipped). YAML comes out as it came in, with the changes spliced in:\n"
             "comments, key order, quoting and blank lines outside the changed nodes\n"
             "are kept byte for byte; JSON comes out as JSON.\n"
             "\n",
    .footer = "\n"
              "An injected workload is also stamped with reload-agent.io/config-hash (the\n"
              "rollout hash the agent will compute) when every ConfigMap and Secret of its\n"
              "rollout-class files is in the input (all inputs count).\n"
              "\n"
              "The report goes to stderr, one line per object (\"deployment/web injected\",\n"
              "\"configmap/app passed through\", \"job/x skipped: <reason>\"), with the\n"
              "stamp (\"... stamped ...\" or \"... not stamped: <why>\") and warnings.\n"
              "Output is all or nothing: on any error (a malformed document is named by\n"
              "file, document number and line) nothing is written and the exit status\n"
              "is 1; a usage error exits with 2.\n",
    .v = FLAGS,
    .n = sizeof FLAGS / sizeof FLAGS[0],
    .positional = 1,
    .usage_on_error = 1,
};

struct inputs {
    struct cli_input *v;
    char **paths; /* NULL for stdin */
    size_t n, cap;
};

static void add_input(struct inputs *in, const char *path)
{
    if (in->n == in->cap) {
        in->cap = in->cap ? in->cap * 2 : 8;
        in->v = realloc(in->v, in->cap * sizeof *in->v);
        in->paths = realloc(in->paths, in->cap * sizeof *in->paths);
        if (!in->v || !in->paths) ra_oom();
    }
    memset(&in->v[in->n], 0, sizeof in->v[0]);
    in->paths[in->n] = ra_strdup(path);
    in->v[in->n].name = path ? in->paths[in->n] : "<stdin>";
    in->n++;
}

static int has_manifest_suffix(const char *name)
{
    size_t n = strlen(name);
    return (n > 5 && strcmp(name + n - 5, ".yaml") == 0) ||
           (n > 4 && strcmp(name + n - 4, ".yml") == 0) ||
           (n > 5 && strcmp(name + n - 5, ".json") == 0);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* Adds the manifests under dir, sorted, recursively. */
static int walk(struct inputs *in, const char *dir, int depth)
{
    struct dirent **ents;
    if (depth > 32) {
        fprintf(stderr, "reload-agent inject: %s: directories nested too deep\n", dir);
        return -ELOOP;
    }
    int n = scandir(dir, &ents, NULL, by_name);
    if (n < 0) {
        int e = errno;
        fprintf(stderr, "reload-agent inject: %s: %s\n", dir, strerror(e));
        return -e;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        const char *name = ents[i]->d_name;
        if (rc == 0 && name[0] != '.') {
            char *p = ra_asprintf("%s/%s", dir, name);
            struct stat st;
            if (stat(p, &st) < 0) {
                int e = errno;
                fprintf(stderr, "reload-agent inject: %s: %s\n", p, strerror(e));
                rc = -e;
            } else if (S_ISDIR(st.st_mode)) {
                rc = walk(in, p, depth + 1);
            } else if (S_ISREG(st.st_mode) && has_manifest_suffix(name)) {
                add_input(in, p);
            }
            free(p);
        }
        free(ents[i]);
    }
    free(ents);
    return rc;
}

static int add_arg(struct inputs *in, const char *a)
{
    struct stat st;
    if (strcmp(a, "-") == 0) {
        add_input(in, NULL);
        return 0;
    }
    if (stat(a, &st) == 0 && S_ISDIR(st.st_mode)) {
        size_t before = in->n;
        char *d = ra_strdup(a);
        size_t l = strlen(d);
        while (l > 1 && d[l - 1] == '/') d[--l] = '\0';
        int rc = walk(in, d, 0);
        free(d);
        if (rc == 0 && in->n == before) {
            fprintf(stderr, "reload-agent inject: %s: no *.yaml, *.yml or *.json files\n", a);
            return -ENOENT;
        }
        return rc;
    }
    add_input(in, a); /* errors (missing, unreadable) when it is read */
    return 0;
}

static int read_fd(int fd, char **buf, size_t *len)
{
    size_t cap = 65536, n = 0;
    char *b = malloc(cap);
    if (!b) ra_oom();
    for (;;) {
        if (cap - n < 4096) {
            if (cap >= INJECT_MAX_INPUT) {
                free(b);
                return -EFBIG;
            }
            cap *= 2;
            if (!(b = realloc(b, cap))) ra_oom();
        }
        ssize_t r = read(fd, b + n, cap - n - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(b);
            return -e;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return 0;
}

static int read_input(struct cli_input *v, const char *path, char **buf)
{
    size_t len = 0;
    int rc;
    if (!path) {
        rc = read_fd(0, buf, &len);
    } else {
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
            rc = -errno;
        } else {
            struct stat st;
            if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
                rc = -EISDIR;
            else
                rc = read_fd(fd, buf, &len);
            close(fd);
        }
    }
    if (rc < 0) {
        fprintf(stderr, "reload-agent inject: %s: %s\n", v->name,
                rc == -EFBIG ? "larger than 256 MiB" : strerror(-rc));
        return rc;
    }
    v->data = *buf;
    v->len = len;
    return 0;
}

/* -i: writes every changed file to a temporary file beside it (same mode,
 * fsync'd), and only when all of them are written renames them over the
 * originals. Returns 0 or 1 (the exit status). */
static int write_in_place(struct inputs *in)
{
    char **tmp = calloc(in->n ? in->n : 1, sizeof *tmp);
    char **real = calloc(in->n ? in->n : 1, sizeof *real);
    int status = 0;
    if (!tmp || !real) ra_oom();
    for (size_t i = 0; i < in->n && status == 0; i++) {
        const struct cli_input *v = &in->v[i];
        struct stat st;
        if (!v->changed) continue;
        if (!(real[i] = realpath(in->paths[i], NULL)) || stat(real[i], &st) < 0) {
            fprintf(stderr, "reload-agent inject: %s: %s\n", v->name, strerror(errno));
            status = 1;
            break;
        }
        char *dcopy = ra_strdup(real[i]), *bcopy = ra_strdup(real[i]);
        tmp[i] = ra_asprintf("%s/.%s.inject-XXXXXX", dirname(dcopy), basename(bcopy));
        free(dcopy);
        free(bcopy);
        int fd = mkstemp(tmp[i]);
        if (fd < 0) {
            fprintf(stderr, "reload-agent inject: %s: cannot create a temporary file: %s\n",
                    v->name, strerror(errno));
            free(tmp[i]);
            tmp[i] = NULL;
            status = 1;
            break;
        }
        size_t off = 0;
        int e = 0;
        while (off < v->outlen && !e) {
            ssize_t w = write(fd, v->out + off, v->outlen - off);
            if (w < 0 && errno == EINTR) continue;
            if (w < 0)
                e = errno;
            else
                off += (size_t)w;
        }
        if (!e && fchmod(fd, st.st_mode & 07777) < 0) e = errno;
        if (!e && fsync(fd) < 0) e = errno;
        if (close(fd) < 0 && !e) e = errno;
        if (e) {
            fprintf(stderr, "reload-agent inject: %s: writing %s: %s\n", v->name, tmp[i],
                    strerror(e));
            status = 1;
        }
    }
    if (status != 0) {
        for (size_t i = 0; i < in->n; i++)
            if (tmp[i]) unlink(tmp[i]);
    }
    for (size_t i = 0; i < in->n && status == 0; i++) {
        if (!tmp[i]) continue;
        if (rename(tmp[i], real[i]) < 0) {
            fprintf(stderr, "reload-agent inject: %s: replacing it: %s\n", in->v[i].name,
                    strerror(errno));
            for (size_t j = i; j < in->n; j++)
                if (tmp[j]) unlink(tmp[j]);
            status = 1;
            break;
        }
        char *dcopy = ra_strdup(real[i]);
        int dfd = open(dirname(dcopy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd); /* the rename is durable; a failure here changes nothing */
            close(dfd);
        }
        free(dcopy);
    }
    for (size_t i = 0; i < in->n; i++) {
        free(tmp[i]);
        free(real[i]);
    }
    free(tmp);
    free(real);
    return status;
}

/* What the command line asks for. */
struct args {
    struct inputs in;
    struct cli_opts o;
    int in_place, stdin_given;
};

static int on_arg(void *ud, const struct flag_def *def, const char *val, int choice)
{
    static const enum cli_output outputs[] = {CLI_OUT_MANIFEST, CLI_OUT_JSON, CLI_OUT_PATCH};
    struct args *a = ud;
    switch (def ? def->id : F_FILE) {
    case F_FILE: a->stdin_given |= strcmp(val, "-") == 0; return add_arg(&a->in, val) < 0 ? 1 : 0;
    case F_ALL: a->o.inject.all = 1; return 0;
    case F_IN_PLACE: a->in_place = 1; return 0;
    case F_OUTPUT: a->o.output = outputs[choice]; return 0;
    case F_IMAGE:
        if (!*val) return flags_usage_error(&CMD, "--image needs a value");
        a->o.inject.image = val;
        return 0;
    }
    return 0;
}

/* The combinations the flags cannot say alone; 0 or the exit status 2. */
static int check_args(struct args *a)
{
    if (a->in.n == 0 && !a->stdin_given) {
        add_input(&a->in, NULL);
        a->stdin_given = 1;
    }
    if (a->in_place && a->stdin_given)
        return flags_usage_error(&CMD, "-i rewrites files in place; it cannot be used with stdin");
    if (a->in_place && a->o.output != CLI_OUT_MANIFEST)
        return flags_usage_error(&CMD,
                                 "-i writes manifests; it cannot be used with --output json or "
                                 "patch");
    int nstdin = 0;
    for (size_t i = 0; i < a->in.n; i++) nstdin += a->in.paths[i] == NULL;
    if (nstdin > 1) return flags_usage_error(&CMD, "stdin (-) given more than once");
    return 0;
}

/* Reads every input, injects, and writes the result; the exit status. */
static int run(struct args *a, char **bufs)
{
    struct inputs *in = &a->in;
    struct cli_result res;
    char err[1024];
    int status = 0;
    for (size_t i = 0; i < in->n; i++)
        if (read_input(&in->v[i], in->paths[i], &bufs[i]) < 0) return 1;
    if (cli_run(in->v, in->n, &a->o, &res, err, sizeof err) < 0) {
        fprintf(stderr, "reload-agent inject: %s\n", err);
        return 1;
    }
    if (a->in_place) {
        status = write_in_place(in);
    } else if (res.outlen &&
               (fwrite(res.out, 1, res.outlen, stdout) != res.outlen || fflush(stdout) != 0)) {
        fprintf(stderr, "reload-agent inject: writing the output: %s\n", strerror(errno));
        status = 1;
    }
    if (status == 0 && res.reportlen) fwrite(res.report, 1, res.reportlen, stderr);
    cli_free(in->v, in->n, &res);
    return status;
}

int cmd_inject(int argc, char **argv)
{
    struct args a;
    char **bufs = NULL;
    int status = 0;

    memset(&a, 0, sizeof a);
    a.o.output = CLI_OUT_MANIFEST;
    if (!flags_parse(&CMD, argc, argv, on_arg, &a, &status) && !(status = check_args(&a))) {
        if (!(bufs = calloc(a.in.n, sizeof *bufs))) ra_oom();
        status = run(&a, bufs);
    }
    for (size_t i = 0; i < a.in.n; i++) {
        free(a.in.paths[i]);
        if (bufs) free(bufs[i]);
    }
    free(bufs);
    free(a.in.v);
    free(a.in.paths);
    return status;
}
