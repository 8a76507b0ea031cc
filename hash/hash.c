/*
 * hash.c - the canonical content hash of docs/hash.md (contract in hash.h).
 *
 * One attempt has two phases: walk every root, collecting (logical path,
 * file path) pairs; then sort them bytewise, drop duplicates, stream each
 * file through SHA-256 once for its digest, and hash the manifest lines
 * made of the digests for the total and the sub hash. Anything showing that
 * the tree moved under us (an entry that vanished, a file whose read length
 * differs from its fstat size, a root's "..data" link that changed) marks
 * the attempt unstable, and the whole computation is redone from scratch.
 *
 * Cost matters (docs/performance.md): each root is opened once per attempt and
 * everything below it is looked up relative to that descriptor; entry
 * types come from getdents64, so entries are not stat'ed; with a
 * hash_cache, the root's resolved path and top-level listing are reused
 * between computations (hash.h says when the listing must be forgotten).
 */
#include "hash/hash.h"
#include "hash/hash_cache.h"
#include "hash/hash_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* OpenSSL's SHA-256 (assembly-accelerated) through its direct SHA256_*
 * interface, linked statically: the EVP layer's provider initialisation
 * alone costs about 2 MiB of resident memory, most of the agent's budget
 * (docs/performance.md, memory). The 1.1.1 API level keeps these declarations free of
 * OpenSSL 3.0's deprecation attribute. */
#define OPENSSL_API_COMPAT 0x10101000L
#include <openssl/sha.h>

/* Reads go into a small buffer, malloc'd per computation: a ConfigMap or
 * Secret key is one read. A file larger than that gets a big buffer,
 * mapped for the rest of the computation and unmapped at its end, so an
 * idle agent keeps none of it (docs/hash.md). The sizes can
 * be overridden with -D to measure others (tests/bench/hashbench.py). */
#ifndef SMALL_BUF
#define SMALL_BUF (64 * 1024)
#endif
#ifndef BIG_BUF
#define BIG_BUF (1024 * 1024)
#endif
#define DIRBUF 8192 /* getdents64 buffer per open directory */
#define UNSTABLE 1  /* internal: the attempt saw the tree change; redo it */

void (*hash__test_after_walk)(unsigned attempt);
int hash__test_no_dtype;

struct file {
    char *lpath;  /* logical path */
    char *fspath; /* path to open */
    int dfd;      /* ... relative to this directory fd (AT_FDCWD: as it is) */
    size_t rel;   /* offset in fspath of the part relative to dfd */
};

struct warning {
    enum hash_warning w;
    char *lpath;
};

/* A symlink already resolved during this attempt (e.g. ROOT/..data, which
 * every kubelet key link goes through), so it costs one lookup. */
#define LINK_MEMO 8
struct link_memo {
    char *link;   /* resolved path of the symlink itself */
    char *target; /* what it resolves to (no symlinks left) */
};

struct walk {
    struct link_memo memo[LINK_MEMO];
    size_t nmemo;
    struct file *files;
    size_t nfiles, capfiles;
    struct warning *warns;
    size_t nwarns, capwarns;
    size_t ndirs;
    struct hash_error *err;
    int *rootfds; /* per root: its open directory, or -1 (closed by walk_free) */
    size_t nrootfds;
    int rootfd;                     /* the current root's directory fd, or -1 */
    size_t rootlen;                 /* strlen(rootreal) */
    struct top_list *tops;          /* per root: the top level as read in this attempt */
    const struct top_list *use_top; /* the current root's top level from the cache ... */
    struct top_list *rec_top;       /* ... or where to record it for the cache, or NULL */
    ssize_t *centry;                /* per root: its cache entry's index, or -1 */
    /* The large buffers come last: walk_new() zeroes only what is above. */
    struct {
        dev_t dev;
        ino_t ino;
    } dirs[HASH_MAX_DEPTH + 1]; /* current walk path */
    char rootreal[PATH_MAX];    /* realpath of the current root */
    char ltarget[PATH_MAX];     /* a top-level link's target, read for the listing */
    char lpath[PATH_MAX];       /* logical path being walked */
};

/* A walk with empty lists; the buffers are not cleared (they are written
 * before they are read). NULL on ENOMEM. */
static struct walk *walk_new(void)
{
    struct walk *w = malloc(sizeof *w);
    if (!w) return NULL;
    memset(w, 0, offsetof(struct walk, dirs));
    w->rootfd = -1;
    w->rootreal[0] = w->lpath[0] = '\0';
    return w;
}

/* readlink(root/..data) result, compared before and after an attempt. */
struct datalink {
    int rc; /* 0 or errno */
    char target[PATH_MAX];
};

/* The read buffers, reused across attempts (big: MAP_FAILED until a
 * large file needs it). */
struct hasher {
    unsigned char *small;
    unsigned char *big;
};

static int fail(struct hash_error *err, int code, const char *op, const char *path)
{
    err->code = code;
    err->op = op;
    snprintf(err->path, sizeof err->path, "%s", path);
    return code;
}

/* Remembers where the tree moved, for the "rewalk" error if it never settles. */
static int unstable(struct hash_error *err, const char *path)
{
    snprintf(err->path, sizeof err->path, "%s", path);
    return UNSTABLE;
}

static int grow(void **v, size_t *cap, size_t n, size_t size)
{
    if (n < *cap) return 0;
    size_t ncap = *cap ? *cap * 2 : 64;
    void *p = realloc(*v, ncap * size);
    if (!p) return -ENOMEM;
    *v = p;
    *cap = ncap;
    return 0;
}

static int add_warning(struct walk *w, enum hash_warning kind)
{
    if (grow((void **)&w->warns, &w->capwarns, w->nwarns, sizeof *w->warns))
        return fail(w->err, -ENOMEM, "malloc", w->lpath);
    char *l = strdup(w->lpath);
    if (!l) return fail(w->err, -ENOMEM, "malloc", w->lpath);
    w->warns[w->nwarns++] = (struct warning){kind, l};
    return 0;
}

/* A resolved path inside the current root as a path relative to the root's
 * open directory, stored in *dfd (a shorter lookup for the kernel);
 * anything else as it is, with AT_FDCWD. */
static const char *at_root(const struct walk *w, const char *path, int *dfd)
{
    size_t n = w->rootlen;
    if (w->rootfd >= 0 && n > 1 && strncmp(path, w->rootreal, n) == 0 && path[n] == '/' &&
        path[n + 1]) {
        *dfd = w->rootfd;
        return path + n + 1;
    }
    *dfd = AT_FDCWD;
    return path;
}

static int add_file(struct walk *w, const char *fspath)
{
    if (grow((void **)&w->files, &w->capfiles, w->nfiles, sizeof *w->files))
        return fail(w->err, -ENOMEM, "malloc", fspath);
    char *l = strdup(w->lpath), *f = strdup(fspath);
    if (!l || !f) {
        free(l);
        free(f);
        return fail(w->err, -ENOMEM, "malloc", fspath);
    }
    int dfd;
    size_t rel = (size_t)(at_root(w, f, &dfd) - f);
    w->files[w->nfiles++] = (struct file){l, f, dfd, rel};
    return 0;
}

static void walk_free(struct walk *w)
{
    for (size_t i = 0; i < w->nfiles; i++) {
        free(w->files[i].lpath);
        free(w->files[i].fspath);
    }
    for (size_t i = 0; i < w->nwarns; i++) free(w->warns[i].lpath);
    for (size_t i = 0; i < w->nrootfds; i++) {
        if (w->rootfds[i] >= 0) close(w->rootfds[i]);
        if (w->tops) hash__top_free(&w->tops[i]);
    }
    free(w->rootfds);
    free(w->tops);
    free(w->centry);
    for (size_t i = 0; i < w->nmemo; i++) {
        free(w->memo[i].link);
        free(w->memo[i].target);
    }
    free(w->files);
    free(w->warns);
}

static char *join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    while (a > 0 && dir[a - 1] == '/') a--; /* "/" + name is "/name" */
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

/* Appends "/comp" to the resolved path out (of length *n). */
static int push_comp(char *out, size_t *n, const char *comp, size_t clen)
{
    if (*n == 1 && out[0] == '/') *n = 0;
    if (*n + 1 + clen >= PATH_MAX) return -ENAMETOOLONG;
    out[(*n)++] = '/';
    memcpy(out + *n, comp, clen);
    *n += clen;
    out[*n] = '\0';
    return 0;
}

/* Removes the last component of the resolved path out (of length *n):
 * ".." is lexical once the path is resolved; "/" stays "/". */
static void pop_comp(char *out, size_t *n)
{
    while (*n > 1 && out[*n - 1] != '/') (*n)--;
    *n = *n > 1 ? *n - 1 : 1;
    out[*n] = '\0';
}

/* The resolved target of a symlink met before in this attempt, or NULL. */
static const char *memo_get(const struct walk *w, const char *link)
{
    for (size_t i = 0; i < w->nmemo; i++)
        if (strcmp(w->memo[i].link, link) == 0) return w->memo[i].target;
    return NULL;
}

/* Remembers link -> target for the rest of the attempt (up to LINK_MEMO;
 * a memo lost to memory pressure only costs a readlink). */
static void memo_put(struct walk *w, const char *link, const char *target)
{
    if (w->nmemo >= LINK_MEMO) return;
    char *a = strdup(link), *b = strdup(target);
    if (a && b)
        w->memo[w->nmemo++] = (struct link_memo){a, b};
    else {
        free(a);
        free(b);
    }
}

/* What the symlink at the resolved path `link` says, into tgt (PATH_MAX
 * bytes): known when the caller read it already, else readlinkat. Returns
 * 0 or -errno (-EAGAIN: it is no longer a symlink). */
static int read_target(struct walk *w, const char *link, const char *known, char *tgt)
{
    if (known) {
        size_t tl = strlen(known);
        if (tl >= PATH_MAX) return -ENAMETOOLONG;
        memcpy(tgt, known, tl + 1);
        return 0;
    }
    int ldfd;
    const char *lrel = at_root(w, link, &ldfd);
    ssize_t l = readlinkat(ldfd, lrel, tgt, PATH_MAX - 1);
    if (l < 0) return errno == EINVAL ? -EAGAIN : -errno; /* EINVAL: not a link (now) */
    tgt[l] = '\0';
    return 0;
}

/* Resolves path (relative to the resolved absolute directory base, or
 * absolute) like realpath(3), into out, without looking up base again;
 * symlinks resolved before in this attempt come from the memo. *st gets
 * the stat of the result when *have_st is set (the last step was a
 * lookup). *hops bounds the symlinks followed (ELOOP). Returns 0 or
 * -errno. */
static int resolve_from(struct walk *w, const char *base, const char *path, char *out,
                        struct stat *st, int *have_st, int *hops, const struct stat *first,
                        int first_link, const char *first_target)
{
    char tgt[PATH_MAX], link[PATH_MAX];
    size_t n;
    if (path[0] == '/') base = "/";
    n = strlen(base);
    if (n >= PATH_MAX) return -ENAMETOOLONG;
    memcpy(out, base, n + 1);
    *have_st = 0;
    for (const char *p = path; *p;) {
        while (*p == '/') p++;
        if (!*p) break;
        size_t clen = strcspn(p, "/");
        const char *comp = p;
        const char *known = first_target; /* only ever for the first component */
        first_target = NULL;
        p += clen;
        if (clen == 1 && comp[0] == '.') continue;
        if (clen == 2 && comp[0] == '.' && comp[1] == '.') { /* out is resolved: lexical */
            pop_comp(out, &n);
            *have_st = 0;
            continue;
        }
        size_t parent = n;
        if (push_comp(out, &n, comp, clen) < 0) return -ENAMETOOLONG;
        const char *hit = memo_get(w, out);
        if (hit) {
            n = strlen(hit);
            memcpy(out, hit, n + 1);
            *have_st = 0;
            continue;
        }
        if (first_link) { /* the directory entry said symlink: read it straight away */
            first_link = 0;
            *have_st = 0;
        } else if (first) { /* the caller already lstat'ed the first component */
            *st = *first;
            first = NULL;
            *have_st = 1;
        } else {
            int dfd;
            const char *rel = at_root(w, out, &dfd);
            if (fstatat(dfd, rel, st, AT_SYMLINK_NOFOLLOW) != 0) return -errno;
            *have_st = 1;
        }
        if (*have_st && !S_ISLNK(st->st_mode)) {
            if (*p && !S_ISDIR(st->st_mode)) return -ENOTDIR;
            continue;
        }
        if (++*hops > 40) return -ELOOP;
        int rc = read_target(w, out, known, tgt);
        if (rc < 0) return rc;
        memcpy(link, out, n + 1);
        out[parent ? parent : 1] = '\0'; /* back to the link's directory */
        if (parent == 0) out[0] = '/';
        char dir[PATH_MAX];
        memcpy(dir, out, strlen(out) + 1);
        rc = resolve_from(w, dir, tgt, out, st, have_st, hops, NULL, 0, NULL);
        if (rc < 0) return rc;
        n = strlen(out);
        memo_put(w, link, out);
    }
    return 0;
}

/* Resolves the symlink dirreal/name (dirreal resolved; lst is the link's
 * own lstat, or NULL when only its directory entry said "symlink"; target
 * what it says if already read, else NULL): 0 and
 * out + *st (never a symlink), or -errno (ENOENT/ENOTDIR: dangling, ELOOP;
 * EAGAIN: it is no longer a symlink). */
static int resolve_link(struct walk *w, const char *dirreal, const char *name,
                        const struct stat *lst, const char *target, char *out, struct stat *st)
{
    int have_st = 0, hops = 0;
    int rc = resolve_from(w, dirreal, name, out, st, &have_st, &hops, lst, lst == NULL, target);
    if (rc == 0 && !have_st) {
        int dfd;
        const char *rel = at_root(w, out, &dfd);
        if (fstatat(dfd, rel, st, 0) != 0) rc = -errno;
    }
    return rc;
}

static int inside_root(const struct walk *w, const char *real)
{
    size_t n = strlen(w->rootreal);
    if (strcmp(w->rootreal, "/") == 0) return 1;
    return strncmp(real, w->rootreal, n) == 0 && (real[n] == '\0' || real[n] == '/');
}

static int walk_dir(struct walk *w, const char *fsdir, size_t llen, size_t depth);

/* The symlink `name` in the resolved directory fsdir (logical path
 * w->lpath): followed only when it resolves inside the root. */
static int walk_link(struct walk *w, const char *fsdir, const char *name, const struct stat *lst,
                     const char *target, size_t llen, size_t depth)
{
    char real[PATH_MAX];
    struct stat st;
    int rc = resolve_link(w, fsdir, name, lst, target, real, &st);
    if (rc == -ENOENT || rc == -ENOTDIR) return add_warning(w, HASH_WARN_DANGLING);
    if (rc == -ELOOP) return add_warning(w, HASH_WARN_LOOP);
    if (rc == -EAGAIN) return unstable(w->err, w->lpath);
    if (rc < 0) return fail(w->err, rc, "realpath", fsdir);
    if (!inside_root(w, real)) return add_warning(w, HASH_WARN_ESCAPING_SYMLINK);
    if (S_ISDIR(st.st_mode)) return walk_dir(w, real, llen, depth + 1);
    if (S_ISREG(st.st_mode)) return add_file(w, real);
    return add_warning(w, HASH_WARN_SPECIAL);
}

/* The entry `name` (directory-entry type dtype) of the open directory dfd
 * (file path fsdir). The entry type saves a stat per entry; where the file
 * system does not report it (DT_UNKNOWN) the entry is stat'ed. */
static int walk_entry(struct walk *w, int dfd, const char *fsdir, const char *name,
                      unsigned char dtype, const char *target, size_t llen, size_t depth)
{
    struct stat st;
    int rc;
    if (dtype == DT_LNK) return walk_link(w, fsdir, name, NULL, target, llen, depth);
    if (dtype != DT_REG && dtype != DT_DIR && dtype != DT_UNKNOWN)
        return add_warning(w, HASH_WARN_SPECIAL);
    char *fs = join(fsdir, name);
    if (!fs) return fail(w->err, -ENOMEM, "malloc", fsdir);
    if (dtype == DT_REG)
        rc = add_file(w, fs); /* hash_file checks it is still a regular file */
    else if (dtype == DT_DIR)
        rc = walk_dir(w, fs, llen, depth + 1);
    else if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        rc = errno == ENOENT ? unstable(w->err, fs) : fail(w->err, -errno, "stat", fs);
    else if (S_ISLNK(st.st_mode))
        rc = walk_link(w, fsdir, name, &st, NULL, llen, depth);
    else if (S_ISDIR(st.st_mode))
        rc = walk_dir(w, fs, llen, depth + 1);
    else if (S_ISREG(st.st_mode))
        rc = add_file(w, fs);
    else
        rc = add_warning(w, HASH_WARN_SPECIAL);
    free(fs);
    return rc;
}

/* Walks the entry `name` of the open directory fd (type: DT_*; target:
 * what a symlink says, if already read). */
static int walk_named(struct walk *w, int fd, const char *fsdir, const char *name,
                      unsigned char type, const char *target, size_t llen, size_t depth)
{
    size_t nl = strlen(name);
    if (llen + 1 + nl >= sizeof w->lpath) return fail(w->err, -ENAMETOOLONG, "walk", fsdir);
    w->lpath[llen] = '/';
    memcpy(w->lpath + llen + 1, name, nl + 1);
    int rc = walk_entry(w, fd, fsdir, name, type, target, llen + 1 + nl, depth);
    w->lpath[llen] = '\0';
    return rc;
}

/* The top-level entry `name` of the current root, read from the directory
 * (fd): recorded for the cache when asked to (a symlink's target is read
 * here then, instead of when it is resolved), then walked. */
static int walk_top_entry(struct walk *w, int fd, const char *fsdir, const char *name,
                          unsigned char type, size_t llen)
{
    const char *target = NULL;
    if (w->rec_top && w->rec_top->ok >= 0) {
        if (type == DT_LNK) {
            ssize_t l = readlinkat(fd, name, w->ltarget, sizeof w->ltarget - 1);
            if (l < 0 && (errno == ENOENT || errno == EINVAL)) /* gone, or not a link now */
                return unstable(w->err, w->lpath);
            if (l < 0) return fail(w->err, -errno, "readlink", fsdir);
            w->ltarget[l] = '\0';
            target = w->ltarget;
        }
        hash__top_add(w->rec_top, name, type, target);
    }
    return walk_named(w, fd, fsdir, name, type, target, llen, 0);
}

/* Walks the open directory fd (resolved path fsdir, logical path
 * w->lpath[0..llen)); known is its fstat if the caller has it. At depth 0
 * the entries may come from the cache (w->use_top). The caller closes fd. */
static int walk_open_dir(struct walk *w, int fd, const struct stat *known, const char *fsdir,
                         size_t llen, size_t depth)
{
    struct stat st;
    int rc = 0;
    if (known)
        st = *known;
    else if (fstat(fd, &st) != 0)
        return fail(w->err, -errno, "stat", fsdir);
    for (size_t i = 0; i < w->ndirs; i++)
        if (w->dirs[i].dev == st.st_dev && w->dirs[i].ino == st.st_ino)
            return add_warning(w, HASH_WARN_LOOP);
    w->dirs[w->ndirs].dev = st.st_dev;
    w->dirs[w->ndirs].ino = st.st_ino;
    w->ndirs++;
    if (depth == 0 && w->use_top) {
        const struct top_list *t = w->use_top;
        for (size_t i = 0; i < t->n && rc == 0; i++)
            rc = walk_named(w, fd, fsdir, t->v[i].name, t->v[i].type, t->v[i].target, llen, 0);
        w->ndirs--;
        return rc;
    }
    char *buf = malloc(DIRBUF);
    if (!buf) {
        w->ndirs--;
        return fail(w->err, -ENOMEM, "malloc", fsdir);
    }
    while (rc == 0) {
        ssize_t got = getdents64(fd, buf, DIRBUF);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) rc = fail(w->err, -errno, "readdir", fsdir);
        if (got <= 0) break;
        for (ssize_t off = 0; off < got && rc == 0;) {
            const struct dirent64 *de = (const void *)(buf + off);
            const char *name = de->d_name;
            unsigned char type = hash__test_no_dtype ? DT_UNKNOWN : de->d_type;
            off += de->d_reclen;
            if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
            if (depth > 0) {
                rc = walk_named(w, fd, fsdir, name, type, NULL, llen, depth);
                continue;
            }
            if (strncmp(name, "..", 2) == 0) continue; /* kubelet-private */
            rc = walk_top_entry(w, fd, fsdir, name, type, llen);
        }
    }
    if (rc == 0 && depth == 0 && w->rec_top && w->rec_top->ok == 0) w->rec_top->ok = 1;
    w->ndirs--;
    free(buf);
    return rc;
}

/* Walks directory fsdir (a resolved path), whose logical path is
 * w->lpath[0..llen). A directory that turned into something else since its
 * entry was read makes the attempt unstable. */
static int walk_dir(struct walk *w, const char *fsdir, size_t llen, size_t depth)
{
    if (depth > HASH_MAX_DEPTH) return add_warning(w, HASH_WARN_LOOP);
    int dfd;
    const char *rel = at_root(w, fsdir, &dfd);
    int fd = openat(dfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR || errno == ELOOP
                   ? unstable(w->err, fsdir)
                   : fail(w->err, -errno, "opendir", fsdir);
    int rc = walk_open_dir(w, fd, NULL, fsdir, llen, depth);
    close(fd);
    return rc;
}

/* Reads root/..data into dl: through dfd (the root's open directory) when
 * it is >= 0, else by path. */
static void read_datalink(int dfd, const char *root, struct datalink *dl)
{
    char p[PATH_MAX];
    ssize_t n;
    dl->target[0] = '\0';
    if (dfd >= 0) {
        n = readlinkat(dfd, "..data", dl->target, sizeof dl->target - 1);
    } else if ((size_t)snprintf(p, sizeof p, "%s/..data", root) >= sizeof p) {
        dl->rc = ENAMETOOLONG;
        return;
    } else {
        n = readlink(p, dl->target, sizeof dl->target - 1);
    }
    dl->rc = n < 0 ? errno : 0;
    dl->target[n < 0 ? 0 : n] = '\0';
}

/* Enters rootreal/..data into the link memo from the readlink done at the
 * start of the attempt (the end of the attempt checks it did not change),
 * so the kubelet's key links do not read it again. */
static void seed_datalink(struct walk *w, const struct datalink *dl)
{
    char out[PATH_MAX];
    struct stat st;
    int have_st = 0, hops = 1;
    if (dl->rc != 0 || w->nmemo >= LINK_MEMO) return;
    if (resolve_from(w, w->rootreal, dl->target, out, &st, &have_st, &hops, NULL, 0, NULL) != 0)
        return;
    char *link = join(w->rootreal, "..data");
    if (link) memo_put(w, link, out);
    free(link);
}

/* Walks root number i: a directory through its resolved path (remembered
 * in cache) and its open directory (kept in w->rootfds[i] for the rest of
 * the attempt), or a file root as itself. dl gets the root's ..data link,
 * read first. */
static int walk_root(struct walk *w, size_t i, const char *root, struct datalink *dl,
                     struct hash_cache *cache)
{
    struct stat st;
    size_t n = strlen(root);
    while (n > 0 && root[n - 1] == '/') n--;
    if (n >= sizeof w->lpath) return fail(w->err, -ENAMETOOLONG, "stat", root);
    memcpy(w->lpath, root, n);
    w->lpath[n] = '\0';
    int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
    int e = fd < 0 ? errno : 0; /* before read_datalink's own calls overwrite errno */
    w->rootfds[i] = fd;
    w->rootfd = -1;
    read_datalink(fd, root, dl);
    if (fd < 0) {
        if (stat(root, &st) != 0) return fail(w->err, -errno, "stat", root);
        if (S_ISREG(st.st_mode)) return add_file(w, root);
        if (!S_ISDIR(st.st_mode)) return add_warning(w, HASH_WARN_SPECIAL);
        return fail(w->err, -e, "opendir", root);
    }
    int rc = 0;
    ssize_t ce = -1;
    if (fstat(fd, &st) != 0) {
        rc = fail(w->err, -errno, "stat", root);
    } else if ((ce = hash__cache_lookup(cache, root, &st)) >= 0) {
        const char *real = cache->v[ce].real;
        memcpy(w->rootreal, real, strlen(real) + 1);
    } else if (!realpath(root, w->rootreal)) {
        rc = errno == ENOENT ? unstable(w->err, root) : fail(w->err, -errno, "realpath", root);
    } else {
        struct stat rs; /* the path resolved must still be the directory opened */
        int se = stat(w->rootreal, &rs) == 0 ? 0 : errno;
        if (se != 0 && se != ENOENT && se != ENOTDIR)
            rc = fail(w->err, -se, "stat", w->rootreal);
        else if (se != 0 || rs.st_dev != st.st_dev || rs.st_ino != st.st_ino)
            rc = unstable(w->err, root);
        else
            ce = hash__cache_store(cache, root, &st, w->rootreal);
    }
    if (rc == 0) {
        w->centry[i] = ce;
        w->use_top = ce >= 0 && cache->v[ce].top_valid ? &cache->v[ce].top : NULL;
        w->rec_top = ce >= 0 && !w->use_top ? &w->tops[i] : NULL;
        w->rootfd = fd;
        w->rootlen = strlen(w->rootreal);
        seed_datalink(w, dl);
        w->ndirs = 0;
        rc = walk_open_dir(w, fd, &st, w->rootreal, n, 0); /* walked by its resolved path */
    }
    w->rootfd = -1;
    w->use_top = NULL;
    w->rec_top = NULL;
    return rc;
}

/* After a stable attempt: the top-level listings read in it go to the
 * cache, valid until hash_cache_forget_listing. */
static void keep_listings(struct walk *w, struct hash_cache *cache)
{
    for (size_t i = 0; cache && i < w->nrootfds; i++) {
        ssize_t ce = w->centry[i];
        if (ce < 0 || w->tops[i].ok != 1) continue;
        hash__top_free(&cache->v[ce].top);
        cache->v[ce].top = w->tops[i];
        cache->v[ce].top_valid = 1;
        w->tops[i] = (struct top_list){0};
    }
}

static int cmp_file(const void *a, const void *b)
{
    return strcmp(((const struct file *)a)->lpath, ((const struct file *)b)->lpath);
}

/* Reads one file into e->size and e->digest: its content goes through
 * SHA-256 once, here; the total and the sub hash are computed from the
 * digests (hash_files). */
static int hash_file(struct hasher *h, struct hash_entry *e, const struct file *f,
                     struct hash_error *err)
{
    const char *fspath = f->fspath;
    struct stat st;
    SHA256_CTX c;
    uint64_t got = 0;
    int rc = 0;
    int fd = openat(f->dfd, f->fspath + f->rel, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) return errno == ENOENT ? unstable(err, fspath) : fail(err, -errno, "open", fspath);
    if (fstat(fd, &st) != 0) {
        rc = fail(err, -errno, "stat", fspath);
        goto out;
    }
    if (!S_ISREG(st.st_mode)) { /* replaced since the walk */
        rc = unstable(err, fspath);
        goto out;
    }
    e->size = (uint64_t)st.st_size;
    unsigned char *buf = h->small;
    size_t cap = SMALL_BUF;
    if (e->size >= SMALL_BUF) {
        if (h->big == MAP_FAILED)
            h->big =
                mmap(NULL, BIG_BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (h->big != MAP_FAILED) { /* else the small one does, more slowly */
            buf = h->big;
            cap = BIG_BUF;
        }
    }
    if (SHA256_Init(&c) != 1) {
        rc = fail(err, -EIO, "sha256", fspath);
        goto out;
    }
    /* The last read asks for one byte more than the size fstat gave: a
     * short read there is the end of the file, so no extra read for EOF;
     * a file that grew shows as more bytes (and a later growth as an
     * inotify event). */
    for (;;) {
        uint64_t left = e->size - got;
        size_t want = left < cap ? (size_t)left + 1 : cap;
        ssize_t r = read(fd, buf, want);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            rc = fail(err, -errno, "read", fspath);
            goto out;
        }
        if (r == 0) break;
        got += (uint64_t)r;
        if (got > e->size) break; /* grew while read: stop early */
        if (SHA256_Update(&c, buf, (size_t)r) != 1) {
            rc = fail(err, -EIO, "sha256", fspath);
            goto out;
        }
        if (got == e->size && (size_t)r < want) break;
    }
    if (got != e->size)
        rc = unstable(err, fspath);
    else if (SHA256_Final(e->digest, &c) != 1)
        rc = fail(err, -EIO, "sha256", fspath);
out:
    close(fd);
    return rc;
}

/* A hash_manifest_line sink into a SHA-256 context. */
struct line_sha {
    SHA256_CTX c;
    int bad;
};

static void put_sha(void *ud, const void *p, size_t n)
{
    struct line_sha *l = ud;
    if (SHA256_Update(&l->c, p, n) != 1) l->bad = 1;
}

/* The total (every entry) and the sub hash (HASH_CLASS_SUB entries): the
 * SHA-256 of their manifest lines. */
static int fold_manifest(struct hash_manifest *m, struct hash_error *err)
{
    struct line_sha total = {.bad = 0}, sub = {.bad = 0};
    if (SHA256_Init(&total.c) != 1 || SHA256_Init(&sub.c) != 1)
        return fail(err, -EIO, "sha256", "");
    for (size_t i = 0; i < m->n; i++) {
        hash_manifest_line(&m->v[i], put_sha, &total);
        if (m->v[i].classes & HASH_CLASS_SUB) hash_manifest_line(&m->v[i], put_sha, &sub);
    }
    if (total.bad || sub.bad || SHA256_Final(m->total, &total.c) != 1 ||
        SHA256_Final(m->sub, &sub.c) != 1)
        return fail(err, -EIO, "sha256", "");
    return 0;
}

/* Sorts and dedups w->files, then hashes them into out. */
static int hash_files(struct hasher *h, struct walk *w, const struct hash_opts *opts,
                      struct hash_manifest *out)
{
    size_t n = 0;
    if (w->nfiles) qsort(w->files, w->nfiles, sizeof *w->files, cmp_file);
    for (size_t i = 0; i < w->nfiles; i++) {
        if (n > 0 && strcmp(w->files[n - 1].lpath, w->files[i].lpath) == 0) {
            free(w->files[i].lpath);
            free(w->files[i].fspath);
            continue;
        }
        w->files[n++] = w->files[i];
    }
    w->nfiles = n;
    out->v = calloc(n ? n : 1, sizeof *out->v);
    if (!out->v) return fail(w->err, -ENOMEM, "malloc", "");
    for (size_t i = 0; i < n; i++) {
        struct file *f = &w->files[i];
        unsigned cls = opts && opts->select ? opts->select(opts->ud, f->lpath) : HASH_CLASS_MAIN;
        if (!cls) continue;
        struct hash_entry *e = &out->v[out->n];
        e->path = f->lpath; /* the manifest takes the string */
        f->lpath = NULL;
        e->classes = cls | HASH_CLASS_MAIN;
        out->n++;
        int rc = hash_file(h, e, f, w->err);
        if (rc) return rc;
        if (e->classes & HASH_CLASS_SUB) out->nsub++;
    }
    return fold_manifest(out, w->err);
}

/* One attempt: 0 (out filled, warnings reported), UNSTABLE, or -errno. */
static int attempt(struct hasher *h, const char *const *roots, size_t nroots,
                   const struct hash_opts *opts, unsigned n, struct hash_manifest *out,
                   struct hash_error *err)
{
    struct walk *w = walk_new();
    struct datalink *before = malloc((nroots ? nroots : 1) * sizeof *before);
    struct datalink after;
    int rc = 0;
    if (!w || !before) {
        rc = fail(err, -ENOMEM, "malloc", "");
        goto out;
    }
    w->err = err;
    w->rootfds = malloc((nroots ? nroots : 1) * sizeof *w->rootfds);
    w->tops = calloc(nroots ? nroots : 1, sizeof *w->tops);
    w->centry = malloc((nroots ? nroots : 1) * sizeof *w->centry);
    if (!w->rootfds || !w->tops || !w->centry) {
        free(w->rootfds); /* walk_free sees no roots */
        w->rootfds = NULL;
        rc = fail(err, -ENOMEM, "malloc", "");
        goto out;
    }
    for (; w->nrootfds < nroots; w->nrootfds++) {
        w->rootfds[w->nrootfds] = -1;
        w->centry[w->nrootfds] = -1;
    }
    for (size_t i = 0; i < nroots && rc == 0; i++)
        rc = walk_root(w, i, roots[i], &before[i], opts ? opts->cache : NULL);
    if (rc) goto out;
    if (hash__test_after_walk) hash__test_after_walk(n);
    rc = hash_files(h, w, opts, out);
    for (size_t i = 0; i < nroots && rc == 0; i++) {
        read_datalink(w->rootfds[i], roots[i], &after);
        if (after.rc != before[i].rc || strcmp(after.target, before[i].target) != 0)
            rc = unstable(err, roots[i]);
    }
    if (rc == 0 && opts && opts->warn) {
        for (size_t i = 0; i < w->nwarns; i++)
            opts->warn(opts->ud, w->warns[i].w, w->warns[i].lpath);
    }
    if (rc == 0) keep_listings(w, opts ? opts->cache : NULL);
out:
    if (w) walk_free(w);
    free(w);
    free(before);
    if (rc) hash_manifest_free(out);
    return rc;
}

int hash_compute(const char *const *roots, size_t nroots, const struct hash_opts *opts,
                 struct hash_manifest *out, struct hash_error *err)
{
    struct hash_error dummy;
    struct hasher h;
    int rc;
    if (!err) err = &dummy;
    err->code = 0;
    err->op = NULL;
    err->path[0] = '\0';
    memset(out, 0, sizeof *out);
    h.big = MAP_FAILED;
    h.small = malloc(SMALL_BUF);
    if (!h.small) {
        rc = fail(err, -ENOMEM, "malloc", "");
        goto out;
    }
    for (unsigned n = 0;; n++) {
        rc = attempt(&h, roots, nroots, opts, n, out, err);
        if (rc != UNSTABLE) break;
        if (n == HASH_MAX_REWALKS) {
            err->code = rc = -EAGAIN; /* err->path names the last change seen */
            err->op = "rewalk";
            break;
        }
        /* a kubelet swap takes milliseconds: give it 1, 2, 3 ... ms */
        struct timespec ts = {0, (long)(n + 1) * 1000000L};
        nanosleep(&ts, NULL);
    }
out:
    free(h.small);
    if (h.big != MAP_FAILED) munmap(h.big, BIG_BUF);
    return rc;
}

void hash_manifest_free(struct hash_manifest *m)
{
    for (size_t i = 0; i < m->n; i++) free(m->v[i].path);
    free(m->v);
    memset(m, 0, sizeof *m);
}

const char *hash_strerror(int code)
{
    int e = code < 0 ? -code : code;
    if (e == EMFILE) return "too many open files in this process (RLIMIT_NOFILE)";
    if (e == ENFILE) return "too many open files in the system (fs.file-max)";
    const char *s = strerrordesc_np(e); /* unlike strerror(3), no shared buffer */
    return s ? s : "unknown error";
}

void hash_manifest_line(const struct hash_entry *e, void (*put)(void *ud, const void *p, size_t n),
                        void *ud)
{
    char hex[HASH_HEX_LEN + 1];
    const char *p = e->path, *run = p;
    hash_hex(e->digest, hex);
    if (strpbrk(p, "\\\n")) put(ud, "\\", 1);
    put(ud, hex, HASH_HEX_LEN);
    put(ud, "  ", 2);
    for (; *p; p++) {
        if (*p != '\\' && *p != '\n') continue;
        if (p > run) put(ud, run, (size_t)(p - run));
        put(ud, *p == '\\' ? "\\\\" : "\\n", 2);
        run = p + 1;
    }
    if (p > run) put(ud, run, (size_t)(p - run));
    put(ud, "\n", 1);
}

void hash_hex(const unsigned char d[HASH_LEN], char out[HASH_HEX_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < HASH_LEN; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[HASH_HEX_LEN] = '\0';
}

void hash_empty(unsigned char out[HASH_LEN])
{
    SHA256_CTX c; /* not SHA256(): in OpenSSL 3 it goes through EVP */
    SHA256_Init(&c);
    SHA256_Final(out, &c);
}

int hash_manifest_copy(const struct hash_manifest *src, struct hash_manifest *dst)
{
    *dst = *src;
    dst->n = 0;
    dst->v = calloc(src->n ? src->n : 1, sizeof *dst->v);
    if (!dst->v) return -ENOMEM;
    for (size_t i = 0; i < src->n; i++) {
        dst->v[i] = src->v[i];
        dst->v[i].path = strdup(src->v[i].path);
        if (!dst->v[i].path) {
            hash_manifest_free(dst);
            return -ENOMEM;
        }
        dst->n++;
    }
    return 0;
}

void hash_bytes(const void *p, size_t n, unsigned char out[HASH_LEN])
{
    SHA256_CTX c;
    SHA256_Init(&c);
    SHA256_Update(&c, p, n);
    SHA256_Final(out, &c);
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const struct hash_entry *)a)->path, ((const struct hash_entry *)b)->path);
}

int hash_manifest_from_entries(const struct hash_entry *v, size_t n, struct hash_manifest *out)
{
    struct hash_error err;
    memset(out, 0, sizeof *out);
    out->v = calloc(n ? n : 1, sizeof *out->v);
    if (!out->v) return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        out->v[i] = v[i];
        out->v[i].classes |= HASH_CLASS_MAIN;
        if (!(out->v[i].path = strdup(v[i].path))) {
            hash_manifest_free(out);
            return -ENOMEM;
        }
        out->n++;
        if (out->v[i].classes & HASH_CLASS_SUB) out->nsub++;
    }
    if (n) qsort(out->v, n, sizeof *out->v, cmp_entry);
    for (size_t i = 1; i < n; i++)
        if (strcmp(out->v[i - 1].path, out->v[i].path) == 0) {
            hash_manifest_free(out);
            return -EINVAL;
        }
    int rc = fold_manifest(out, &err);
    if (rc < 0) hash_manifest_free(out);
    return rc;
}

int hash_diff(const struct hash_manifest *old, const struct hash_manifest *new_,
              struct hash_diff *out)
{
    size_t i = 0, j = 0;
    memset(out, 0, sizeof *out);
    out->added = malloc((new_->n + 1) * sizeof *out->added);
    out->removed = malloc((old->n + 1) * sizeof *out->removed);
    out->modified = malloc((new_->n + 1) * sizeof *out->modified);
    if (!out->added || !out->removed || !out->modified) {
        hash_diff_free(out);
        return -ENOMEM;
    }
    while (i < old->n || j < new_->n) {
        int c = i == old->n ? 1 : j == new_->n ? -1 : strcmp(old->v[i].path, new_->v[j].path);
        if (c < 0) {
            out->removed[out->nremoved++] = old->v[i++].path;
        } else if (c > 0) {
            out->added[out->nadded++] = new_->v[j++].path;
        } else {
            if (old->v[i].size != new_->v[j].size ||
                memcmp(old->v[i].digest, new_->v[j].digest, HASH_LEN) != 0)
                out->modified[out->nmodified++] = new_->v[j].path;
            i++;
            j++;
        }
    }
    return 0;
}

void hash_diff_free(struct hash_diff *d)
{
    free(d->added);
    free(d->removed);
    free(d->modified);
    memset(d, 0, sizeof *d);
}
