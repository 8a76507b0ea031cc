/*
 * file.c - the bounded, non-blocking read of a small regular file
 * (contract in file.h).
 *
 * open(O_NONBLOCK) returns at once even for a FIFO without a writer (where
 * a plain open blocks until one appears) and for devices; fstat on that
 * descriptor then decides, so a file swapped between a stat and the open
 * cannot slip through. Only regular files are read, and never more than
 * max + 1 bytes (the extra byte tells "exactly max" from "larger").
 */
#include "base/file.h"

#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define READ_FIRST 4096 /* first buffer when the size is not known */

const char *ra_file_kind(unsigned mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "an unknown file type";
    }
}

/* Reads fd to EOF into a buffer of at most max + 1 bytes. */
static int read_all(int fd, const char *path, size_t max, size_t hint, char **out, size_t *outlen,
                    char *err, size_t errlen)
{
    size_t len = 0, cap;
    char *buf, *nb;

    if (max > SIZE_MAX / 4) max = SIZE_MAX / 4; /* keeps cap arithmetic exact */
    /* st_size + 1 sees EOF in one pass; procfs files report 0 */
    cap = hint ? hint + 1 : READ_FIRST;
    if (cap > max + 1) cap = max + 1;
    buf = malloc(cap + 1);
    if (!buf) return ra_errf(err, errlen, -ENOMEM, "%s: out of memory", path);
    for (;;) {
        if (len == cap) {
            if (cap > max) break; /* read max + 1 bytes: too large */
            size_t ncap = cap * 2 > max + 1 || cap * 2 < cap ? max + 1 : cap * 2;
            nb = realloc(buf, ncap + 1);
            if (!nb) {
                free(buf);
                return ra_errf(err, errlen, -ENOMEM, "%s: out of memory", path);
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            explicit_bzero(buf, len);
            free(buf);
            if (e == EAGAIN) /* a procfs file that waits for data, like /proc/kmsg */
                return ra_errf(err, errlen, -e,
                               "%s: cannot read: it would block (not an ordinary "
                               "file)",
                               path);
            return ra_errf(err, errlen, -e, "%s: cannot read: %s", path, strerror(e));
        }
        if (r == 0) break;
        len += (size_t)r;
    }
    if (len > max) {
        explicit_bzero(buf, len); /* may hold a secret (a token) */
        free(buf);
        return ra_errf(err, errlen, -EFBIG, "%s: larger than %zu bytes", path, max);
    }
    buf[len] = '\0';
    *out = buf;
    *outlen = len;
    return 0;
}

int ra_read_file_st(const char *path, size_t max, char **buf, size_t *len, struct stat *st,
                    char *err, size_t errlen)
{
    struct stat sb;
    int fd, rc;

    *buf = NULL;
    *len = 0;
    if (err && errlen) err[0] = '\0';
    fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        return ra_errf(err, errlen, -e, "%s: cannot open: %s", path, strerror(e));
    }
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return ra_errf(err, errlen, -e, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return ra_errf(err, errlen, S_ISDIR(sb.st_mode) ? -EISDIR : -EINVAL,
                       "%s: is %s, not a regular file", path, ra_file_kind(sb.st_mode));
    }
    if (sb.st_size > 0 && (unsigned long long)sb.st_size > max) {
        close(fd);
        return ra_errf(err, errlen, -EFBIG, "%s: larger than %zu bytes", path, max);
    }
    rc = read_all(fd, path, max, sb.st_size > 0 ? (size_t)sb.st_size : 0, buf, len, err, errlen);
    close(fd);
    if (rc == 0 && st) *st = sb;
    return rc;
}

int ra_read_file(const char *path, size_t max, char **buf, size_t *len, char *err, size_t errlen)
{
    return ra_read_file_st(path, max, buf, len, NULL, err, errlen);
}

void ra_path_in(const char *dir, const char *name, char *out, size_t n)
{
    size_t l = strlen(dir);
    snprintf(out, n, "%s%s%s", dir, l && dir[l - 1] == '/' ? "" : "/", name);
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -errno;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* A random suffix for a temporary name; the kernel's generator, else the
 * clock and a counter (O_EXCL makes any suffix safe, only a guessed one
 * costs a retry). */
static unsigned long long temp_suffix(void)
{
    static unsigned long long counter;
    unsigned long long r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        r = (unsigned long long)ts.tv_nsec * 2654435761u ^ (unsigned long long)getpid() << 32;
    }
    return (r ^ ++counter) & 0xffffffffffffULL;
}

/* Creates a temporary file of its own beside path ("PATH.tmp-" and 12 hex
 * digits): never an existing name, never through a link. Returns the fd
 * (its name in tmp), or -errno. */
static int open_temp(const char *path, unsigned mode, char *tmp, size_t n)
{
    for (int i = 0; i < 16; i++) {
        if (snprintf(tmp, n, "%s.tmp-%012llx", path, temp_suffix()) >= (int)n) return -ENAMETOOLONG;
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
        if (fd >= 0) return fd;
        if (errno != EEXIST) return -errno;
    }
    return -EEXIST;
}

int ra_write_file_atomic(const char *path, const void *data, size_t len, unsigned mode, char *err,
                         size_t errlen)
{
    char tmp[4200];
    int fd = open_temp(path, mode, tmp, sizeof tmp), rc = fd < 0 ? fd : 0;
    if (rc == 0) rc = write_all(fd, data, len);
    if (rc == 0 && fchmod(fd, (mode_t)mode) < 0) rc = -errno; /* mode exactly, whatever the umask */
    if (rc == 0 && fsync(fd) < 0) rc = -errno;
    if (fd >= 0 && close(fd) < 0 && rc == 0) rc = -errno;
    if (rc == 0 && rename(tmp, path) < 0) rc = -errno;
    if (rc < 0) {
        if (errlen) snprintf(err, errlen, "cannot write %s: %s", path, strerror(-rc));
        if (fd >= 0) (void)unlink(tmp);
    }
    return rc;
}

#define RECORD_PATH_MAX 4096

int ra_record_read(const char *dir, const char *name, size_t max, char **buf, size_t *len,
                   char *err, size_t errlen)
{
    char path[RECORD_PATH_MAX];
    ra_path_in(dir, name, path, sizeof path);
    int rc = ra_read_file(path, max, buf, len, err, errlen);
    if (rc == -ENOENT) {
        if (err && errlen) err[0] = '\0';
        return 0;
    }
    return rc < 0 ? rc : 1;
}

int ra_record_write(const char *dir, const char *name, const void *buf, size_t len, char *err,
                    size_t errlen)
{
    char path[RECORD_PATH_MAX];
    ra_path_in(dir, name, path, sizeof path);
    int rc = ra_write_file_atomic(path, buf, len, 0600, err, errlen);
    if (rc == 0) return 0;
    /* the old record no longer says what is current: it goes */
    size_t l = err && errlen ? strlen(err) : 0;
    if (unlink(path) == 0 || errno == ENOENT) {
        if (l) snprintf(err + l, errlen - l, "; the previous record was removed");
    } else {
        int e = errno;
        if (l)
            snprintf(err + l, errlen - l, "; the previous record could not be removed either: %s",
                     strerror(e));
    }
    return rc;
}

int ra_record_remove(const char *dir, const char *name, char *err, size_t errlen)
{
    char path[RECORD_PATH_MAX];
    ra_path_in(dir, name, path, sizeof path);
    if (unlink(path) == 0 || errno == ENOENT) return 0;
    int e = errno;
    return ra_errf(err, errlen, -e, "cannot remove %s: %s", path, strerror(e));
}
