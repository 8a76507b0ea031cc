/*
 * awsim.c - a fake kubelet AtomicWriter, for the integration tests and the
 * benchmarks.
 *
 * The kubelet updates ConfigMap/Secret/downwardAPI/projected volumes with a
 * fixed sequence of syscalls (docs/kubernetes-api.md#the-kubelets-atomicwriter): a new timestamped
 * directory, a "..data_tmp" symlink renamed onto "..data", then top-level
 * "key -> ..data/key" links, then removal of stale links and of the old
 * directory. The agent's correctness depends on tolerating exactly that
 * stream of inotify events, so this tool reproduces it step by step (the step
 * numbers in the comments are that page's), with the knobs its test doubles list: random
 * write/link/unlink order (seeded), an fsGroup walk (ATTRIB burst), pauses
 * between the late steps, and the pre-2021 "legacy" order.
 *
 *   awsim --dir VOL --payload SRC [--stamps FILE] [common options]
 *       one update: VOL ends up holding exactly the files under SRC.
 *   awsim --dir VOL --count N [--interval-ms MS] [--files K] [--size BYTES]
 *         [--stamps FILE] [--noop] [common options]
 *       N updates of a synthetic payload key-0 .. key-(K-1) (default K=1,
 *       each file BYTES long, default 64, more if the header needs it); each update
 *       changes one file (the content embeds a per-run nonce, so even the
 *       first update differs from whatever VOL held). --noop instead rewrites
 *       the content VOL/..data already holds, N times (the skip path).
 *       --stamps writes one CLOCK_MONOTONIC nanosecond time per update, taken
 *       right before the rename(2) of step 9 (for --noop, after the update);
 *       with --payload, the one update's.
 *   common: [--seed N] [--fsgroup GID] [--pause-ms MS] [--legacy] [--mode OCTAL]
 *       --seed makes the random orders (and ts-dir suffixes) reproducible;
 *       --mode is the file mode (default 0644); --pause-ms sleeps after
 *       steps 8, 9, 10 and 11; --legacy runs step 10 before steps 8-9.
 *   --csi: the Secrets Store CSI driver's writer instead of the kubelet's
 *       (sigs.k8s.io/secrets-store-csi-driver pkg/util/fileutil: WritePayloads
 *       on its AtomicWriter vendored from kubernetes v1.20.6;
 *       docs/csi-secrets.md): first every top-level entry of the payload
 *       that is not a symlink (a file a provider wrote itself) is removed
 *       (cleanupProviderFiles), then the --legacy order, no fsGroup walk, and
 *       an unchanged payload writes nothing at all (step 4 returns).
 *
 * Exit status 0 on success, 1 with a message on stderr on any error.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_KEY_PATH 4096

struct entry {
    char *path; /* cleaned relative path (payload key) */
    unsigned char *data;
    size_t len;
};

struct payload {
    struct entry *v;
    size_t n, cap;
};

/* A growable list of strings. */
struct strv {
    char **v;
    size_t n, cap;
};

struct opts {
    const char *dir, *payload, *stamps;
    uint64_t seed;
    int have_seed, have_fsgroup, legacy, noop, csi;
    gid_t fsgroup;
    mode_t mode;
    long pause_ms, count, interval_ms, files, size;
};

static uint64_t rng_state;

static void die_oom(void)
{
    fputs("awsim: out of memory\n", stderr);
    exit(1);
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) die_oom();
    return p;
}

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (!d) die_oom();
    return d;
}

/* Prints "awsim: OP PATH: strerror" and returns -1. */
static int fail(const char *op, const char *path, int err)
{
    fprintf(stderr, "awsim: %s %s: %s\n", op, path, strerror(err));
    return -1;
}

/* splitmix64: small, seedable, good enough for shuffling. */
static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Returns a random permutation of 0..n-1 (the caller frees it). */
static size_t *shuffled(size_t n)
{
    size_t *ix = xrealloc(NULL, n * sizeof *ix);
    for (size_t i = 0; i < n; i++) ix[i] = i;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(rng_next() % i);
        size_t t = ix[i - 1];
        ix[i - 1] = ix[j];
        ix[j] = t;
    }
    return ix;
}

static void strv_add(struct strv *s, const char *str)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->v = xrealloc(s->v, s->cap * sizeof *s->v);
    }
    s->v[s->n++] = xstrdup(str);
}

static void strv_free(struct strv *s)
{
    for (size_t i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void payload_free(struct payload *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->v[i].path);
        free(p->v[i].data);
    }
    free(p->v);
    memset(p, 0, sizeof *p);
}

/* Adds a payload entry (takes ownership of data). */
static void payload_add(struct payload *p, const char *path, unsigned char *data, size_t len)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 16;
        p->v = xrealloc(p->v, p->cap * sizeof *p->v);
    }
    p->v[p->n++] = (struct entry){xstrdup(path), data, len};
}

static void sleep_ms(long ms)
{
    if (ms <= 0) return;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Joins a and b with '/' into out (PATH_MAX). Returns 0 or -1 (too long). */
static int join(char *out, const char *a, const char *b)
{
    int n = snprintf(out, PATH_MAX, "%s/%s", a, b);
    if (n < 0 || n >= PATH_MAX) {
        fprintf(stderr, "awsim: path too long: %s/%s\n", a, b);
        return -1;
    }
    return 0;
}

/* Like join, but an empty b gives just a, and an empty a just b. */
static int join_rel(char *out, const char *a, const char *b)
{
    if (*a && *b) return join(out, a, b);
    if (snprintf(out, PATH_MAX, "%s", *a ? a : b) >= PATH_MAX) {
        fprintf(stderr, "awsim: path too long: %s%s\n", a, b);
        return -1;
    }
    return 0;
}

/* ---- generic post-order walk (children first, the start path last) ---- */

typedef int (*walk_fn)(void *ud, const char *path, const struct stat *st);

/* Calls fn for every entry under path (not following symlinks), children
 * before their directory, path itself last. Names are read and the directory
 * closed before recursing, so fn may delete entries. */
static int walk_post(const char *path, walk_fn fn, void *ud)
{
    struct stat st;
    if (lstat(path, &st) != 0) return fail("lstat", path, errno);
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) return fail("opendir", path, errno);
        struct strv names = {0};
        struct dirent *de;
        errno = 0;
        while ((de = readdir(d)) != NULL) {
            if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                strv_add(&names, de->d_name);
            errno = 0;
        }
        int rerr = errno;
        closedir(d);
        if (rerr) {
            strv_free(&names);
            return fail("readdir", path, rerr);
        }
        char child[PATH_MAX];
        for (size_t i = 0; i < names.n; i++) {
            if (join(child, path, names.v[i]) != 0 || walk_post(child, fn, ud) != 0) {
                strv_free(&names);
                return -1;
            }
        }
        strv_free(&names);
    }
    return fn(ud, path, &st);
}

/* ---- loading a payload from a directory ---- */

/* Checks a payload key like validatePath (docs/kubernetes-api.md#the-kubelets-atomicwriter). */
static int validate_key(const char *key)
{
    const char *why = NULL;
    if (!*key)
        why = "empty path";
    else if (strlen(key) > MAX_KEY_PATH)
        why = "path longer than 4096 bytes";
    else if (key[0] == '/')
        why = "absolute path";
    else if (strncmp(key, "..", 2) == 0)
        why = "first path element starts with '..' (reserved for the writer)";
    for (const char *s = key; !why && *s;) {
        size_t n = strcspn(s, "/");
        if (n > 255)
            why = "path element longer than 255 bytes";
        else if (n == 2 && s[0] == '.' && s[1] == '.')
            why = "path element '..'";
        s += n + (s[n] == '/');
    }
    if (why) {
        fprintf(stderr, "awsim: invalid payload key '%s': %s\n", key, why);
        return -1;
    }
    return 0;
}

static int read_file(const char *path, unsigned char **data, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail("open", path, errno);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fail("fstat", path, e);
    }
    size_t cap = (size_t)st.st_size + 1, n = 0;
    unsigned char *buf = xrealloc(NULL, cap);
    for (;;) {
        if (n == cap) buf = xrealloc(buf, cap *= 2);
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return fail("read", path, e);
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    *data = buf;
    *len = n;
    return 0;
}

/* Adds every regular file under dir/rel to p, keyed by its relative path. */
static int load_dir(const char *dir, const char *rel, struct payload *p)
{
    char path[PATH_MAX];
    if (join_rel(path, dir, rel) != 0) return -1;
    DIR *d = opendir(path);
    if (!d) return fail("opendir", path, errno);
    struct strv names = {0};
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            strv_add(&names, de->d_name);
    closedir(d);
    int rc = 0;
    for (size_t i = 0; i < names.n && rc == 0; i++) {
        char key[PATH_MAX], full[PATH_MAX];
        struct stat st;
        if (join_rel(key, rel, names.v[i]) != 0 || join(full, dir, key) != 0) {
            rc = -1;
        } else if (lstat(full, &st) != 0) {
            rc = fail("lstat", full, errno);
        } else if (S_ISDIR(st.st_mode)) {
            rc = load_dir(dir, key, p);
        } else if (S_ISREG(st.st_mode)) {
            unsigned char *data;
            size_t len;
            rc = validate_key(key);
            if (rc == 0 && (rc = read_file(full, &data, &len)) == 0) payload_add(p, key, data, len);
        } else {
            fprintf(stderr,
                    "awsim: %s: not a regular file or directory (payload entries must be)\n", full);
            rc = -1;
        }
    }
    strv_free(&names);
    return rc;
}

/* ---- the AtomicWriter steps ---- */

struct old_walk {
    size_t skip;        /* strlen of the old ts dir path + 1 */
    struct strv *found; /* relative paths under the old ts dir */
};

static int collect_old(void *ud, const char *path, const struct stat *st)
{
    struct old_walk *w = ud;
    (void)st;
    if (strlen(path) >= w->skip) /* not the ts dir itself */
        strv_add(w->found, path + w->skip);
    return 0;
}

/* Step 3: pathsToRemove = (all paths under old ts dir) - (payload paths and
 * their parent prefixes). */
static int paths_to_remove(const char *oldts_path, const struct payload *p, struct strv *out)
{
    struct strv found = {0}, keep = {0};
    struct old_walk w = {strlen(oldts_path) + 1, &found};
    int rc = walk_post(oldts_path, collect_old, &w);
    for (size_t i = 0; rc == 0 && i < p->n; i++) {
        char buf[PATH_MAX];
        snprintf(buf, sizeof buf, "%s", p->v[i].path);
        for (;;) {
            strv_add(&keep, buf);
            char *slash = strrchr(buf, '/');
            if (!slash) break;
            *slash = '\0';
        }
    }
    if (keep.n) qsort(keep.v, keep.n, sizeof *keep.v, cmp_str);
    for (size_t i = 0; rc == 0 && i < found.n; i++)
        if (!keep.n || !bsearch(&found.v[i], keep.v, keep.n, sizeof *keep.v, cmp_str))
            strv_add(out, found.v[i]);
    strv_free(&found);
    strv_free(&keep);
    return rc;
}

/* Step 4 for one entry: 1 if T/oldTs/<path> differs from e (or is missing),
 * 0 if identical, -1 on a read error. */
static int entry_differs(const char *oldts_path, const struct entry *e)
{
    char path[PATH_MAX];
    if (join(path, oldts_path, e->path) != 0) return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) ? 1
                                                                       : fail("open", path, errno);
    struct stat st;
    int differs = fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size != e->len;
    unsigned char buf[65536];
    for (size_t off = 0; !differs && off < e->len;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0 || (size_t)r > e->len - off || memcmp(buf, e->data + off, (size_t)r) != 0)
            differs = 1;
        else
            off += (size_t)r;
    }
    close(fd);
    return differs;
}

/* Step 5: mkdir T/..YYYY_MM_DD_HH_MM_SS.<uint32> (UTC) 0700, chmod 0755.
 * Like Go's os.MkdirTemp, a name collision picks a new suffix. */
static int make_ts_dir(const char *dir, char *name, size_t namesz, char *path)
{
    for (int attempt = 0; attempt < 100; attempt++) {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        size_t n = strftime(name, namesz, "..%Y_%m_%d_%H_%M_%S.", &tm);
        snprintf(name + n, namesz - n, "%" PRIu32, (uint32_t)rng_next());
        if (join(path, dir, name) != 0) return -1;
        if (mkdir(path, 0700) == 0) return chmod(path, 0755) == 0 ? 0 : fail("chmod", path, errno);
        if (errno != EEXIST) return fail("mkdir", path, errno);
    }
    fprintf(stderr, "awsim: could not find a free timestamped directory name in %s\n", dir);
    return -1;
}

/* Creates the parent directories of key inside base, mode 0777 & ~umask. */
static int mkdir_parents(const char *base, const char *key)
{
    char path[PATH_MAX];
    if (join(path, base, key) != 0) return -1;
    for (char *s = path + strlen(base) + 1; (s = strchr(s, '/')) != NULL; s++) {
        *s = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST) return fail("mkdir", path, errno);
        *s = '/';
    }
    return 0;
}

/* Step 6 for one entry: create+write with mode, then chmod mode. */
static int write_entry(const char *tspath, const struct entry *e, mode_t mode)
{
    char path[PATH_MAX];
    if (mkdir_parents(tspath, e->path) != 0 || join(path, tspath, e->path) != 0) return -1;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) return fail("open", path, errno);
    for (size_t off = 0; off < e->len;) {
        ssize_t w = write(fd, e->data + off, e->len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            int err = errno;
            close(fd);
            return fail("write", path, err);
        }
        off += (size_t)w;
    }
    if (close(fd) != 0) return fail("close", path, errno);
    return chmod(path, mode) == 0 ? 0 : fail("chmod", path, errno);
}

/* Step 7 for one entry (kubelet volume_linux.go): lchown(-1, gid); no chmod
 * for symlinks; files get mode|0440, directories also setgid and 0110. */
static int fsgroup_entry(void *ud, const char *path, const struct stat *st)
{
    gid_t gid = *(const gid_t *)ud;
    if (lchown(path, (uid_t)-1, gid) != 0) return fail("lchown", path, errno);
    if (S_ISLNK(st->st_mode)) return 0;
    mode_t m = (st->st_mode & 07777) | 0440;
    if (S_ISDIR(st->st_mode)) m |= S_ISGID | 0110;
    return chmod(path, m) == 0 ? 0 : fail("chmod", path, errno);
}

static int remove_entry(void *ud, const char *path, const struct stat *st)
{
    (void)ud;
    int rc = S_ISDIR(st->st_mode) ? rmdir(path) : unlink(path);
    return rc == 0 ? 0 : fail("remove", path, errno);
}

/* Step 10: for each payload path's first element, create T/<first> ->
 * ..data/<first> if it does not exist; in random order. */
static int create_user_links(const char *dir, const struct payload *p)
{
    struct strv firsts = {0};
    for (size_t i = 0; i < p->n; i++) {
        char first[256 + 1];
        snprintf(first, sizeof first, "%.*s", (int)strcspn(p->v[i].path, "/"), p->v[i].path);
        size_t j = 0;
        while (j < firsts.n && strcmp(firsts.v[j], first) != 0) j++;
        if (j == firsts.n) strv_add(&firsts, first);
    }
    size_t *ix = shuffled(firsts.n);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < firsts.n; i++) {
        char link[PATH_MAX], target[PATH_MAX];
        const char *first = firsts.v[ix[i]];
        struct stat st;
        if (join(link, dir, first) != 0 || join(target, "..data", first) != 0)
            rc = -1;
        else if (lstat(link, &st) == 0)
            continue; /* existing links are left alone */
        else if (errno != ENOENT)
            rc = fail("lstat", link, errno);
        else if (symlink(target, link) != 0)
            rc = fail("symlink", link, errno);
    }
    free(ix);
    strv_free(&firsts);
    return rc;
}

/* Step 11: unlink T/p for each removed path without '/', random order; all
 * are tried, the result is the last error. */
static int remove_user_paths(const char *dir, const struct strv *rm)
{
    size_t *ix = shuffled(rm->n);
    int rc = 0;
    for (size_t i = 0; i < rm->n; i++) {
        const char *p = rm->v[ix[i]];
        char path[PATH_MAX];
        if (strchr(p, '/')) continue;
        if (join(path, dir, p) != 0)
            rc = -1;
        else if (unlink(path) != 0)
            rc = fail("unlink", path, errno);
    }
    free(ix);
    return rc;
}

/* One AtomicWriter Write(payload) on o->dir, steps 2-12 (docs/kubernetes-api.md). *switched_ns
 * gets the CLOCK_MONOTONIC time right after step 9, or 0 if the write was
 * skipped (content unchanged). Returns 0 or -1 (message printed). */
/* --csi: the driver's cleanupProviderFiles: the first element of each
 * payload path, when it is there and not a symlink (written by a provider
 * directly, before the driver wrote through its AtomicWriter), removed
 * whole. */
static int cleanup_provider_files(const char *dir, const struct payload *p)
{
    for (size_t i = 0; i < p->n; i++) {
        char first[256 + 1], path[PATH_MAX];
        struct stat st;
        snprintf(first, sizeof first, "%.*s", (int)strcspn(p->v[i].path, "/"), p->v[i].path);
        if (join(path, dir, first) != 0) return -1;
        if (lstat(path, &st) != 0) {
            if (errno == ENOENT) continue;
            return fail("lstat", path, errno);
        }
        if (!S_ISLNK(st.st_mode) && walk_post(path, remove_entry, NULL) != 0) return -1;
    }
    return 0;
}

static int aw_write(const struct opts *o, const struct payload *p, uint64_t *switched_ns)
{
    const char *dir = o->dir;
    char datalink[PATH_MAX], tmplink[PATH_MAX], oldts[PATH_MAX] = "", oldts_path[PATH_MAX] = "";
    char tsname[64], tspath[PATH_MAX];
    struct strv rm = {0};
    size_t *ix = NULL;
    int rc = -1;
    *switched_ns = 0;
    if (join(datalink, dir, "..data") != 0 || join(tmplink, dir, "..data_tmp") != 0) return -1;
    if (o->csi && cleanup_provider_files(dir, p) != 0) return -1;

    /* 2: readlink ..data */
    ssize_t n = readlink(datalink, oldts, sizeof oldts - 1);
    if (n < 0 && errno != ENOENT) return fail("readlink", datalink, errno);
    oldts[n > 0 ? n : 0] = '\0';

    /* 3 + 4: paths to remove, and whether anything differs */
    int should_write = 1;
    if (*oldts) {
        if (join(oldts_path, dir, oldts) != 0 || paths_to_remove(oldts_path, p, &rm) != 0) goto out;
        should_write = rm.n > 0;
        for (size_t i = 0; !should_write && i < p->n; i++) {
            int d = entry_differs(oldts_path, &p->v[i]);
            if (d < 0) goto out;
            should_write = d;
        }
    }
    if (!should_write) { /* nothing to do but step 10 (the CSI driver's: nothing) */
        rc = o->csi ? 0 : create_user_links(dir, p);
        goto out;
    }

    /* 5 + 6: new ts dir, files in random order */
    if (make_ts_dir(dir, tsname, sizeof tsname, tspath) != 0) goto out;
    ix = shuffled(p->n);
    for (size_t i = 0; i < p->n; i++)
        if (write_entry(tspath, &p->v[ix[i]], o->mode) != 0) goto out;

    /* 7: fsGroup walk over the whole volume, the volume dir itself last */
    if (o->have_fsgroup && walk_post(dir, fsgroup_entry, (void *)&o->fsgroup) != 0) goto out;

    /* legacy (before kubernetes#97642): 10 before 8-9 */
    if (o->legacy && create_user_links(dir, p) != 0) goto out;

    /* 8: ..data_tmp -> <newts> */
    if (symlink(tsname, tmplink) != 0) {
        fail("symlink", tmplink, errno);
        goto out;
    }
    sleep_ms(o->pause_ms);

    /* 9: the atomic switch. The stamp is taken just before the syscall: a
     * watcher on the other core can react before this process is scheduled
     * again, so a stamp taken after could come later than the reaction. */
    *switched_ns = mono_ns();
    if (rename(tmplink, datalink) != 0) {
        fail("rename", tmplink, errno);
        goto out;
    }
    sleep_ms(o->pause_ms);

    /* 10: missing top-level links */
    if (!o->legacy) {
        if (create_user_links(dir, p) != 0) goto out;
        sleep_ms(o->pause_ms);
    }

    /* 11: top-level links of removed keys */
    if (remove_user_paths(dir, &rm) != 0) goto out;

    /* 12: the old ts dir */
    if (*oldts) {
        sleep_ms(o->pause_ms);
        if (walk_post(oldts_path, remove_entry, NULL) != 0) goto out;
    }
    rc = 0;
out:
    free(ix);
    strv_free(&rm);
    return rc;
}

/* ---- loop mode ---- */

/* Content of key-<k> at version v: a header naming nonce, key and version
 * (so every version differs), padded with '.' to `size` bytes. */
static void synth_content(struct entry *e, uint64_t nonce, long k, uint64_t v, long size)
{
    char head[96];
    int hn = snprintf(head, sizeof head, "%016" PRIx64 " key-%ld v%" PRIu64 "\n", nonce, k, v);
    size_t len = (size_t)size > (size_t)hn ? (size_t)size : (size_t)hn;
    free(e->data);
    e->data = xrealloc(NULL, len);
    memset(e->data, '.', len);
    memcpy(e->data, head, (size_t)hn);
    e->len = len;
}

static int run_loop(const struct opts *o)
{
    struct payload p = {0};
    uint64_t *version = NULL;
    FILE *stamps = NULL;
    int rc = -1;
    uint64_t nonce = mono_ns() ^ ((uint64_t)getpid() << 32) ^ rng_next();

    if (o->noop) {
        char data[PATH_MAX];
        if (join(data, o->dir, "..data") != 0 || load_dir(data, "", &p) != 0) goto out;
    } else {
        version = xrealloc(NULL, (size_t)o->files * sizeof *version);
        for (long k = 0; k < o->files; k++) {
            char key[32];
            snprintf(key, sizeof key, "key-%ld", k);
            payload_add(&p, key, NULL, 0);
            version[k] = 0;
            synth_content(&p.v[k], nonce, k, 0, o->size);
        }
    }
    if (o->stamps && !(stamps = fopen(o->stamps, "w"))) {
        fail("fopen", o->stamps, errno);
        goto out;
    }
    for (long i = 0; i < o->count; i++) {
        if (!o->noop) {
            long k = i % o->files;
            synth_content(&p.v[k], nonce, k, ++version[k], o->size);
        }
        uint64_t t;
        if (aw_write(o, &p, &t) != 0) goto out;
        if (stamps) fprintf(stamps, "%" PRIu64 "\n", t ? t : mono_ns());
        if (i + 1 < o->count) sleep_ms(o->interval_ms);
    }
    rc = 0;
out:
    if (stamps && fclose(stamps) != 0 && rc == 0) rc = fail("write", o->stamps, errno);
    free(version);
    payload_free(&p);
    return rc;
}

/* --stamps of a --payload update: its one stamp. */
static int write_stamp(const char *path, uint64_t t)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fail("fopen", path, errno);
        return 1;
    }
    fprintf(f, "%" PRIu64 "\n", t);
    if (fclose(f) == 0) return 0;
    fail("write", path, errno);
    return 1;
}

/* ---- command line ---- */

static void usage(FILE *f)
{
    fputs("usage: awsim --dir VOL --payload SRC [--stamps FILE] [options]\n"
          "       awsim --dir VOL --count N [--interval-ms MS] [--files K] [--size BYTES]\n"
          "             [--stamps FILE] [--noop] [options]\n"
          "options: --seed N  --fsgroup GID  --pause-ms MS  --legacy  --csi  --mode OCTAL\n",
          f);
}

/* Parses a non-negative integer in base into *out (<= max). */
static int parse_num(const char *opt, const char *s, int base, unsigned long long max,
                     unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, base);
    if (!*s || *end || errno || v > max || s[0] == '-') {
        fprintf(stderr, "awsim: invalid value for %s: '%s'\n", opt, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.mode = 0644, .files = 1, .size = 64, .count = -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "--legacy")) {
            o->legacy = 1;
            continue;
        }
        if (!strcmp(a, "--noop")) {
            o->noop = 1;
            continue;
        }
        if (!strcmp(a, "--csi")) {
            o->csi = o->legacy = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "awsim: %s: unknown option or missing value\n", a);
            return -1;
        }
        const char *v = argv[++i];
        unsigned long long n;
        if (!strcmp(a, "--dir"))
            o->dir = v;
        else if (!strcmp(a, "--payload"))
            o->payload = v;
        else if (!strcmp(a, "--stamps"))
            o->stamps = v;
        else if (!strcmp(a, "--seed")) {
            if (parse_num(a, v, 10, UINT64_MAX, &n)) return -1;
            o->seed = n;
            o->have_seed = 1;
        } else if (!strcmp(a, "--fsgroup")) {
            if (parse_num(a, v, 10, UINT32_MAX - 1, &n)) return -1;
            o->fsgroup = (gid_t)n;
            o->have_fsgroup = 1;
        } else if (!strcmp(a, "--mode")) {
            if (parse_num(a, v, 8, 07777, &n)) return -1;
            o->mode = (mode_t)n;
        } else if (!strcmp(a, "--pause-ms") || !strcmp(a, "--interval-ms") ||
                   !strcmp(a, "--count") || !strcmp(a, "--files") || !strcmp(a, "--size")) {
            if (parse_num(a, v, 10, 100000000, &n)) return -1;
            long *dst = !strcmp(a, "--pause-ms")      ? &o->pause_ms
                        : !strcmp(a, "--interval-ms") ? &o->interval_ms
                        : !strcmp(a, "--count")       ? &o->count
                        : !strcmp(a, "--files")       ? &o->files
                                                      : &o->size;
            *dst = (long)n;
        } else {
            fprintf(stderr, "awsim: unknown option %s\n", a);
            return -1;
        }
    }
    const char *err = NULL;
    if (!o->dir)
        err = "--dir is required";
    else if (!o->payload == (o->count < 0))
        err = "exactly one of --payload or --count is required";
    else if (o->payload && o->noop)
        err = "--noop needs --count";
    else if (o->count >= 0 && o->files < 1)
        err = "--files must be at least 1";
    else if (o->csi && o->have_fsgroup)
        err = "--csi takes no --fsgroup (the CSI driver's writer has no fsGroup walk)";
    if (err) {
        fprintf(stderr, "awsim: %s\n", err);
        usage(stderr);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o;
    if (parse_args(argc, argv, &o) != 0) return 1;
    rng_state = o.have_seed ? o.seed : mono_ns() ^ ((uint64_t)getpid() << 40);
    struct stat st;
    if (stat(o.dir, &st) != 0) {
        fail("stat", o.dir, errno);
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "awsim: --dir %s: not a directory\n", o.dir);
        return 1;
    }
    if (o.count >= 0) return run_loop(&o) == 0 ? 0 : 1;
    struct payload p = {0};
    uint64_t t;
    int rc = load_dir(o.payload, "", &p) == 0 && aw_write(&o, &p, &t) == 0 ? 0 : 1;
    payload_free(&p);
    if (rc == 0 && o.stamps) rc = write_stamp(o.stamps, t ? t : mono_ns());
    return rc;
}
