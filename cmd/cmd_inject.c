/*
 * cmd_inject.c - `reload-agent inject`: the command line, reading the
 * inputs (files, directories walked for manifests, stdin), and writing the
 * result (stdout, or each changed file in place, atomically). The work in
 * between is the manifest pipeline, inject/manifests.c.
 */
#include "cmd/cmd_inject.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/flags.h"
#include "base/log.h"
#include "inject/manifests.h"

#define INJECT_MAX_INPUT (256u << 20) /* bytes per input */

enum { F_FILE = 1, F_ALL, F_OUTPUT, F_IN_PLACE, F_IMAGE, F_KUBE_VERSION };

_Static_assert(INJECT_KUBE_MINOR_DEFAULT == 36, "--kube-version's help names the default");

static const char *const OUTPUTS[] = {"yaml", "json", "patch", "rbac", NULL};

static const struct flag_def FLAGS[] = {
    {F_FILE, "filename", 'f', FLAG_STR, "PATH", NULL,
     "an input (repeatable; a plain argument works too)"},
    {F_ALL, "all", 0, FLAG_BOOL, NULL, NULL,
     "inject every workload not annotated inject: \"false\""},
    {F_OUTPUT, "output", 'o', FLAG_ENUM, "FORMAT", OUTPUTS,
     "yaml (default: the manifests, each input in its own\n"
     "format), json (one JSON document per document), or\n"
     "patch (per injected object its JSON Patch, as a list\n"
     "of kustomize `patches:` entries; JSON for JSON input),\n"
     "or rbac (only the Roles and RoleBindings fast sync\n"
     "needs, as YAML)"},
    {F_IN_PLACE, "in-place", 'i', FLAG_BOOL, NULL, NULL,
     "rewrite each changed input file atomically instead\n"
     "of printing (not with stdin; --output yaml only);\n"
     "a file changed meanwhile or with hard links is refused"},
    {F_IMAGE, "image", 0, FLAG_STR, "IMAGE", NULL,
     "the sidecar image (default " INJECT_DEFAULT_IMAGE ")"},
    {F_KUBE_VERSION, "kube-version", 0, FLAG_STR, "VERSION", NULL,
     "the Kubernetes version of the target cluster, e.g.\n"
     "1.35 (default 1.36): restart-pod is refused below\n"
     "1.36, restart's rule on the app left out below 1.35"},
};

static const struct flags_cmd CMD = {
    .name = "inject",
    .usage = "usage: reload-agent inject [-f FILE|DIR|-]... [FILE|DIR|-]... [--all]\n"
             "                           [--output yaml|json|patch|rbac] [-i] [--image IMAGE]\n"
             "                           [--kube-version VERSION]\n"
             "\n"
             "Adds the reload-agent sidecar to the workloads of Kubernetes manifests\n"
             "(Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob, Argo\n"
             "Rollout, and the items of a List) whose pod template is annotated\n"
             "reload-agent.io/inject: \"true\" (every workload with --all; \"false\" always\n"
             "opts out). Every other object passes through unchanged.\n"
             "\n"
             "Inputs are YAML streams (several documents) or JSON (one document, or\n"
             "a stream of them). With no input, or with -, stdin is read. A directory\n"
             "is walked recursively for *.yaml, *.yml and *.json files in sorted order\n"
             "(names starting with '.' are skipped, and dangling links and link loops\n"
             "too, with a report line). YAML comes out as it came in, with the changes\n"
             "spliced in: comments, key order, quoting and blank lines outside the\n"
             "changed nodes are kept byte for byte; JSON comes out as JSON.\n"
             "\n",
    .footer = "\n"
              "An injected workload is also stamped with reload-agent.io/config-hash (the\n"
              "rollout hash the agent will compute) when every ConfigMap and Secret of its\n"
              "rollout-class files is in the input (all inputs count).\n"
              "\n"
              "A workload annotated reload-agent.io/fast-sync: \"true\" gets, after its\n"
              "input's documents (as items when the input is one List, such as a kustomize\n"
              "KRM function's ResourceList), the Role (get, list, watch on exactly the\n"
              "ConfigMaps and Secrets its sidecar watches, by resourceNames; its own pod's\n"
              "annotation patch) and the RoleBinding to its ServiceAccount, unless the\n"
              "input holds them. The policy that makes the patch self-only is\n"
              "cluster-scoped and never written: kubectl apply -f\n"
              "manifests/fast-sync/policy.yaml, once.\n"
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
    struct manifests_input *v;
    char **paths; /* NULL for stdin */
    size_t n, cap;
    char *skipped; /* report lines of the entries a directory walk skipped */
};

/* A directory on the path of the walk (a symlink back to one is a loop). */
struct walk_dir {
    dev_t dev;
    ino_t ino;
    const struct walk_dir *up;
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

/* Adds a report line for an entry the walk skipped. */
static void skip(struct inputs *in, const char *path, const char *why)
{
    char *line = ra_asprintf("%s%s skipped: %s\n", in->skipped ? in->skipped : "", path, why);
    free(in->skipped);
    in->skipped = line;
}

static int walk(struct inputs *in, const char *dir, int depth, const struct walk_dir *up);

/* One entry p (name) of a walked directory: a manifest is added, a
 * directory walked, a dangling link or a link loop skipped with a report
 * line. Returns 0 or -errno. */
static int walk_entry(struct inputs *in, const char *p, const char *name, int depth,
                      const struct walk_dir *up)
{
    struct stat st, lst;
    if (stat(p, &st) < 0) {
        int e = errno;
        if (e == ELOOP || (e == ENOENT && lstat(p, &lst) == 0 && S_ISLNK(lst.st_mode))) {
            if (has_manifest_suffix(name) || e == ELOOP)
                skip(in, p, e == ELOOP ? "a symbolic link loop" : "a dangling symbolic link");
            return 0;
        }
        fprintf(stderr, "reload-agent inject: %s: %s\n", p, strerror(e));
        return -e;
    }
    if (S_ISDIR(st.st_mode)) {
        for (const struct walk_dir *d = up; d; d = d->up)
            if (d->dev == st.st_dev && d->ino == st.st_ino) {
                skip(in, p, "a symbolic link loop (it leads back to a directory being walked)");
                return 0;
            }
        return walk(in, p, depth + 1, up);
    }
    if (S_ISREG(st.st_mode) && has_manifest_suffix(name)) add_input(in, p);
    return 0;
}

/* Adds the manifests under dir, sorted, recursively. */
static int walk(struct inputs *in, const char *dir, int depth, const struct walk_dir *up)
{
    struct dirent **ents;
    struct stat st;
    if (depth > 32) {
        fprintf(stderr, "reload-agent inject: %s: directories nested too deep\n", dir);
        return -ELOOP;
    }
    int n = stat(dir, &st) == 0 ? scandir(dir, &ents, NULL, by_name) : -1;
    if (n < 0) {
        int e = errno;
        fprintf(stderr, "reload-agent inject: %s: %s\n", dir, strerror(e));
        return -e;
    }
    struct walk_dir here = {st.st_dev, st.st_ino, up};
    int rc = 0;
    for (int i = 0; i < n; i++) {
        const char *name = ents[i]->d_name;
        if (rc == 0 && name[0] != '.') {
            char *p = ra_asprintf("%s/%s", dir, name);
            rc = walk_entry(in, p, name, depth, &here);
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
        int rc = walk(in, d, 0, NULL);
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

static int read_input(struct manifests_input *v, const char *path, char **buf)
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

/* Writes v's output to a new temporary file beside real (st: real's
 * status), with real's mode, and its owner where this process may set it,
 * fsync'd. Returns the temporary file's path (malloc'd), or NULL (the
 * error reported). */
static char *write_temp(const struct manifests_input *v, const char *real, const struct stat *st)
{
    char *dcopy = ra_strdup(real), *bcopy = ra_strdup(real);
    char *tmp = ra_asprintf("%s/.%s.inject-XXXXXX", dirname(dcopy), basename(bcopy));
    free(dcopy);
    free(bcopy);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        fprintf(stderr, "reload-agent inject: %s: cannot create a temporary file: %s\n", v->name,
                strerror(errno));
        free(tmp);
        return NULL;
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
    /* the owner as far as allowed (root may set both; others their groups) */
    if (!e && fchown(fd, st->st_uid, st->st_gid) < 0) (void)fchown(fd, (uid_t)-1, st->st_gid);
    if (!e && fchmod(fd, st->st_mode & 07777) < 0) e = errno;
    if (!e && fsync(fd) < 0) e = errno;
    if (close(fd) < 0 && !e) e = errno;
    if (e) {
        fprintf(stderr, "reload-agent inject: %s: writing %s: %s\n", v->name, tmp, strerror(e));
        unlink(tmp);
        free(tmp);
        return NULL;
    }
    return tmp;
}

/* 1 if real still holds what was read as v (nothing changed it while
 * inject ran), else 0 with the reason reported. */
static int unchanged_since_read(const struct manifests_input *v, const char *real)
{
    char *now = NULL;
    size_t len = 0;
    int fd = open(real, O_RDONLY | O_CLOEXEC | O_NOCTTY),
        rc = fd < 0 ? -errno : read_fd(fd, &now, &len);
    if (fd >= 0) close(fd);
    int same = rc == 0 && len == v->len && memcmp(now, v->data, len) == 0;
    free(now);
    if (rc < 0)
        fprintf(stderr, "reload-agent inject: %s: reading it again: %s\n", v->name, strerror(-rc));
    else if (!same)
        fprintf(stderr, "reload-agent inject: %s: changed while inject ran: nothing written\n",
                v->name);
    return same;
}

/* -i: writes every changed file to a temporary file beside it (same mode
 * and owner, fsync'd), checks that no original changed since it was read,
 * and only then renames them over the originals. A file with more than
 * one hard link is refused (a rename would leave the other names with the
 * old content). Returns 0 or 1 (the exit status). */
static int write_in_place(struct inputs *in)
{
    char **tmp = calloc(in->n ? in->n : 1, sizeof *tmp);
    char **real = calloc(in->n ? in->n : 1, sizeof *real);
    int status = 0;
    if (!tmp || !real) ra_oom();
    for (size_t i = 0; i < in->n && status == 0; i++) {
        const struct manifests_input *v = &in->v[i];
        struct stat st;
        if (!v->changed) continue;
        if (!(real[i] = realpath(in->paths[i], NULL)) || stat(real[i], &st) < 0) {
            fprintf(stderr, "reload-agent inject: %s: %s\n", v->name, strerror(errno));
            status = 1;
        } else if (st.st_nlink > 1) {
            fprintf(stderr,
                    "reload-agent inject: %s: has %ju hard links, which -i would break (the "
                    "others would keep the old content): inject it to stdout instead\n",
                    v->name, (uintmax_t)st.st_nlink);
            status = 1;
        } else if (!(tmp[i] = write_temp(v, real[i], &st))) {
            status = 1;
        }
    }
    for (size_t i = 0; i < in->n && status == 0; i++)
        if (tmp[i] && !unchanged_since_read(&in->v[i], real[i])) status = 1;
    for (size_t i = 0; i < in->n && status == 0; i++) {
        if (!tmp[i]) continue;
        if (rename(tmp[i], real[i]) < 0) {
            fprintf(stderr, "reload-agent inject: %s: replacing it: %s\n", in->v[i].name,
                    strerror(errno));
            status = 1;
            break;
        }
        free(tmp[i]);
        tmp[i] = NULL;
        char *dcopy = ra_strdup(real[i]);
        int dfd = open(dirname(dcopy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd); /* the rename is durable; a failure here changes nothing */
            close(dfd);
        }
        free(dcopy);
    }
    for (size_t i = 0; i < in->n; i++) {
        if (tmp[i]) unlink(tmp[i]);
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
    struct manifests_opts o;
    int in_place, stdin_given;
};

static int on_arg(void *ud, const struct flag_def *def, const char *val, int choice)
{
    static const enum manifests_output outputs[] = {MANIFESTS_OUT_YAML, MANIFESTS_OUT_JSON,
                                                    MANIFESTS_OUT_PATCH, MANIFESTS_OUT_RBAC};
    struct args *a = ud;
    switch (def ? def->id : F_FILE) {
    case F_FILE: a->stdin_given |= strcmp(val, "-") == 0; return add_arg(&a->in, val) < 0 ? 1 : 0;
    case F_ALL: a->o.inject.all = 1; return 0;
    case F_IN_PLACE: a->in_place = 1; return 0;
    case F_OUTPUT: a->o.output = outputs[choice]; return 0;
    case F_KUBE_VERSION:
        if (inject_parse_kube_version(val, &a->o.inject.kube_minor) < 0)
            return flags_usage_error(&CMD,
                                     "--kube-version: \"%s\" is not a Kubernetes version "
                                     "(want 1.N or v1.N.P)",
                                     val);
        return 0;
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
    if (a->in_place && a->o.output != MANIFESTS_OUT_YAML)
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
    struct manifests_result res;
    char err[1024];
    int status = 0;
    for (size_t i = 0; i < in->n; i++)
        if (read_input(&in->v[i], in->paths[i], &bufs[i]) < 0) return 1;
    if (manifests_run(in->v, in->n, &a->o, &res, err, sizeof err) < 0) {
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
    if (status == 0 && in->skipped) fputs(in->skipped, stderr);
    if (status == 0 && res.reportlen) fwrite(res.report, 1, res.reportlen, stderr);
    manifests_free(in->v, in->n, &res);
    return status;
}

int cmd_inject(int argc, char **argv)
{
    struct args a;
    char **bufs = NULL;
    int status = 0;

    memset(&a, 0, sizeof a);
    a.o.output = MANIFESTS_OUT_YAML;
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
    free(a.in.skipped);
    return status;
}
