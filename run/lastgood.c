/*
 * lastgood.c - writing, restoring and reading the AtomicWriter-layout
 * copies of --keep-last-good (see lastgood.h). The order of the steps is
 * the kubelet's: the new version's directory and files first, then the
 * ..data rename (the one step a reader can notice), then the top-level
 * links, then the old version's removal.
 */
#include "run/lastgood.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/file.h"
#include "base/log.h"

#define DATA "..data"
#define DATA_TMP "..data_tmp"

/* a "/" b into out; -ENAMETOOLONG when it does not fit. */
static int path2(char *out, size_t n, const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la + 1 + lb + 1 > n) {
        if (n) out[0] = '\0';
        return -ENAMETOOLONG;
    }
    memcpy(out, a, la);
    out[la] = '/';
    memcpy(out + la + 1, b, lb + 1);
    return 0;
}

/* The path of root's entry REL in the manifest, or NULL when the entry is
 * not under root. */
static const char *rel_of(const char *path, const char *root)
{
    size_t n = strlen(root);
    if (strncmp(path, root, n) != 0 || path[n] != '/') return NULL;
    return path + n + 1;
}

/* Removes a directory tree (no symlink is followed: lstat). */
static void remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0) return;
    if (!S_ISDIR(st.st_mode)) {
        unlink(path);
        return;
    }
    DIR *d = opendir(path);
    if (d) {
        struct dirent *de;
        char sub[PATH_MAX];
        while ((de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            (void)path2(sub, sizeof sub, path, de->d_name);
            remove_tree(sub);
        }
        closedir(d);
    }
    rmdir(path);
}

/* mkdir -p of the directories of rel below base (not rel's last part). */
static int make_parents(const char *base, const char *rel, char *err, size_t errlen)
{
    char p[PATH_MAX];
    size_t blen = strlen(base);
    for (const char *s = strchr(rel, '/'); s; s = strchr(s + 1, '/')) {
        snprintf(p, sizeof p, "%s/%.*s", base, (int)(s - rel), rel);
        if (blen + 1 + (size_t)(s - rel) >= sizeof p)
            return ra_errf(err, errlen, -ENAMETOOLONG, "%s: path too long", base);
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            return ra_errf(err, errlen, -errno, "cannot create %s: %s", p, strerror(errno));
    }
    return 0;
}

/* Copies from/REL into ts/REL with from's mode, checking the digest. */
static int copy_entry(const struct hash_entry *e, const char *rel, const char *from, const char *ts,
                      char *err, size_t errlen)
{
    char src[PATH_MAX], dst[PATH_MAX], why[512];
    char *buf;
    size_t len;
    struct stat st;
    unsigned char d[HASH_LEN];
    if (path2(src, sizeof src, from, rel) < 0 || path2(dst, sizeof dst, ts, rel) < 0)
        return ra_errf(err, errlen, -ENAMETOOLONG, "%s/%s: path too long", from, rel);
    int rc = ra_read_file_st(src, LASTGOOD_FILE_MAX, &buf, &len, &st, why, sizeof why);
    if (rc == -ENOENT) return -EAGAIN; /* removed since it was hashed */
    if (rc < 0) return ra_errf(err, errlen, rc, "%s", why);
    hash_bytes(buf, len, d);
    if (memcmp(d, e->digest, HASH_LEN) != 0) {
        free(buf);
        return -EAGAIN;
    }
    if ((rc = make_parents(ts, rel, err, errlen)) < 0) {
        free(buf);
        return rc;
    }
    int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    ssize_t w = fd < 0 ? -1 : write(fd, buf, len);
    rc = fd < 0 || w != (ssize_t)len ? -(errno ? errno : EIO) : 0;
    if (rc == 0 && fchmod(fd, st.st_mode & 07777) < 0) rc = -errno;
    if (fd >= 0 && close(fd) < 0 && rc == 0) rc = -errno;
    free(buf);
    if (rc < 0) return ra_errf(err, errlen, rc, "cannot write %s: %s", dst, strerror(-rc));
    return 0;
}

/* A new, empty version directory in dir, named like the kubelet names it;
 * its name goes into name. */
static int new_version(const char *dir, char *name, size_t n, char *err, size_t errlen)
{
    char tmpl[PATH_MAX], stamp[40];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "..%Y_%m_%d_%H_%M_%S.", &tm);
    snprintf(tmpl, sizeof tmpl, "%s/%sXXXXXX", dir, stamp);
    if (!mkdtemp(tmpl))
        return ra_errf(err, errlen, -errno, "cannot create a directory in %s: %s", dir,
                       strerror(errno));
    chmod(tmpl, 0755); /* readable by the app whatever the umask */
    snprintf(name, n, "%s", strrchr(tmpl, '/') + 1);
    return 0;
}

/* The version ..data points at, into ts ("" if none). */
static void current_version(const char *dir, char *ts, size_t n)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/" DATA, dir);
    ssize_t l = readlink(p, ts, n - 1);
    ts[l > 0 ? l : 0] = '\0';
    if (strchr(ts, '/')) ts[0] = '\0'; /* not a link this module wrote */
}

/* Points ..data at version ts: a ..data_tmp link renamed over it. */
static int swap_data(const char *dir, const char *ts, char *err, size_t errlen)
{
    char tmp[PATH_MAX], data[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/" DATA_TMP, dir);
    snprintf(data, sizeof data, "%s/" DATA, dir);
    unlink(tmp);
    if (symlink(ts, tmp) < 0)
        return ra_errf(err, errlen, -errno, "cannot create %s: %s", tmp, strerror(errno));
    if (rename(tmp, data) < 0) {
        int e = errno;
        unlink(tmp);
        return ra_errf(err, errlen, -e, "cannot rename %s to %s: %s", tmp, data, strerror(e));
    }
    return 0;
}

/* The top-level links of dir follow the version it shows: name -> ..data/name
 * for each top-level name of the version, and links of names it lacks go
 * (only links into ..data are removed: anything else is not ours). */
static int fix_links(const char *dir, char *err, size_t errlen)
{
    char p[PATH_MAX], target[PATH_MAX], want[PATH_MAX];
    DIR *d;
    struct dirent *de;
    snprintf(p, sizeof p, "%s/" DATA, dir);
    if ((d = opendir(p))) {
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.' && de->d_name[1] == '.') continue;
            if (!strcmp(de->d_name, ".")) continue;
            (void)path2(p, sizeof p, dir, de->d_name);
            snprintf(want, sizeof want, DATA "/%s", de->d_name);
            ssize_t l = readlink(p, target, sizeof target - 1);
            if (l >= 0 && (size_t)l == strlen(want) && !memcmp(target, want, (size_t)l)) continue;
            if (symlink(want, p) < 0) {
                int e = errno;
                closedir(d);
                return ra_errf(err, errlen, -e, "cannot create the link %s: %s", p, strerror(e));
            }
        }
        closedir(d);
    }
    if (!(d = opendir(dir)))
        return ra_errf(err, errlen, -errno, "cannot read %s: %s", dir, strerror(errno));
    while ((de = readdir(d))) {
        struct stat st;
        if (de->d_name[0] == '.') continue;
        (void)path2(p, sizeof p, dir, de->d_name);
        ssize_t l = readlink(p, target, sizeof target - 1);
        if (l < 0) continue;
        target[l] = '\0';
        if (strncmp(target, DATA "/", strlen(DATA) + 1) != 0) continue;
        (void)path2(want, sizeof want, dir, target);
        if (lstat(want, &st) < 0) unlink(p);
    }
    closedir(d);
    return 0;
}

/* Writes the entries under root into the new version ts of dir. */
static int fill_version(const struct hash_manifest *m, const char *root, const char *from,
                        const char *tspath, char *err, size_t errlen)
{
    for (size_t i = 0; i < m->n; i++) {
        const char *rel = rel_of(m->v[i].path, root);
        if (!rel) {
            if (!strcmp(m->v[i].path, root))
                return ra_errf(err, errlen, -ENOTDIR,
                               "%s is a file: --keep-last-good copies a directory", root);
            continue;
        }
        int rc = copy_entry(&m->v[i], rel, from, tspath, err, errlen);
        if (rc < 0) return rc;
    }
    return 0;
}

int lastgood_write(const struct hash_manifest *m, const char *root, const char *from,
                   const char *dir, char *old_ts, size_t old_ts_len, char *err, size_t errlen)
{
    char ts[LASTGOOD_TS_MAX], tspath[PATH_MAX], was[LASTGOOD_TS_MAX];
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return ra_errf(err, errlen, -errno, "cannot create %s: %s", dir, strerror(errno));
    current_version(dir, was, sizeof was);
    int rc = new_version(dir, ts, sizeof ts, err, errlen);
    if (rc < 0) return rc;
    (void)path2(tspath, sizeof tspath, dir, ts);
    if ((rc = fill_version(m, root, from, tspath, err, errlen)) < 0 ||
        (rc = swap_data(dir, ts, err, errlen)) < 0) {
        remove_tree(tspath);
        if (rc == -EAGAIN)
            snprintf(err, errlen, "the content of %s changed while it was copied", root);
        return rc;
    }
    rc = fix_links(dir, err, errlen);
    if (old_ts)
        snprintf(old_ts, old_ts_len, "%s", was);
    else if (was[0])
        lastgood_drop(dir, was);
    return rc;
}

int lastgood_restore(const char *dir, const char *old_ts, char *err, size_t errlen)
{
    char now[LASTGOOD_TS_MAX];
    current_version(dir, now, sizeof now);
    int rc = swap_data(dir, old_ts, err, errlen);
    if (rc == 0) rc = fix_links(dir, err, errlen);
    if (rc == 0 && now[0] && strcmp(now, old_ts) != 0) lastgood_drop(dir, now);
    return rc;
}

void lastgood_drop(const char *dir, const char *old_ts)
{
    char p[PATH_MAX];
    if (!old_ts || !old_ts[0] || old_ts[0] != '.' || old_ts[1] != '.' || strchr(old_ts, '/'))
        return;
    (void)path2(p, sizeof p, dir, old_ts);
    remove_tree(p);
}

int lastgood_has_copy(const char *dir)
{
    char p[PATH_MAX];
    struct stat st;
    snprintf(p, sizeof p, "%s/" DATA, dir);
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

void lastgood_tidy(const char *dir)
{
    char cur[LASTGOOD_TS_MAX], p[PATH_MAX];
    DIR *d = opendir(dir);
    struct dirent *de;
    if (!d) return;
    current_version(dir, cur, sizeof cur);
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "..", 2) != 0 || !de->d_name[2] || !strcmp(de->d_name, DATA) ||
            !strcmp(de->d_name, cur))
            continue;
        (void)path2(p, sizeof p, dir, de->d_name);
        remove_tree(p);
    }
    closedir(d);
}

/* base's class for path, or MAIN. */
static unsigned class_in(const struct hash_manifest *base, const char *path)
{
    size_t lo = 0, hi = base->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(base->v[mid].path, path);
        if (c == 0) return base->v[mid].classes;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return HASH_CLASS_MAIN;
}

int lastgood_manifest(const struct hash_manifest *base, const char *root, const char *dir,
                      struct hash_manifest *out, char *err, size_t errlen)
{
    struct hash_manifest live;
    struct hash_error he;
    const char *roots[] = {dir};
    int rc = hash_compute(roots, 1, NULL, &live, &he);
    if (rc < 0)
        return ra_errf(err, errlen, rc, "cannot hash %s: %s %s: %s", dir, he.op, he.path,
                       hash_strerror(rc));
    struct hash_entry *v = calloc(base->n + live.n + 1, sizeof *v);
    char **paths = calloc(live.n + 1, sizeof *paths);
    size_t n = 0, dlen = strlen(dir);
    if (!v || !paths) ra_oom();
    for (size_t i = 0; i < base->n; i++)
        if (!rel_of(base->v[i].path, root)) v[n++] = base->v[i];
    for (size_t i = 0; i < live.n; i++) {
        paths[i] = ra_asprintf("%s%s", root, live.v[i].path + dlen);
        v[n] = live.v[i];
        v[n].path = paths[i];
        v[n].classes = class_in(base, paths[i]);
        n++;
    }
    rc = hash_manifest_from_entries(v, n, out);
    for (size_t i = 0; i < live.n; i++) free(paths[i]);
    free(paths);
    free(v);
    hash_manifest_free(&live);
    if (rc < 0) return ra_errf(err, errlen, rc, "cannot build the manifest of %s", dir);
    return 0;
}
