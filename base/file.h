/*
 * file.h - the one bounded file read used on the event loop (annotations
 * file, pid file, service-account token and namespace). It never blocks on
 * a special file: the open is non-blocking and anything that is not a
 * regular file (FIFO, character or block device, socket, directory) is
 * refused before a single byte is read, with an error naming the path and
 * what it is. See docs/errors.md.
 */
#ifndef RA_FILE_H
#define RA_FILE_H

#include <stddef.h>
#include <sys/stat.h>

/* Reads the regular file at path whole, at most max bytes.
 * On success returns 0, *buf (malloc'd, NUL-terminated after *len bytes;
 * the caller frees it) and *len. On failure returns <0, leaves *buf NULL
 * and writes a one-line reason into err (errlen bytes, NUL-terminated; err
 * may be NULL when errlen is 0) that starts with "PATH: ":
 *   -errno of open/fstat/read, the real one (-ENOENT, -EACCES, -EMFILE, ...;
 *             -EAGAIN for a "regular" procfs file that would block, such as
 *             /proc/kmsg: the read is non-blocking too);
 *   -EISDIR   the path is a directory;
 *   -EINVAL   any other non-regular file ("PATH: is a FIFO, not a regular file");
 *   -EFBIG    the file holds more than max bytes ("PATH: larger than N bytes");
 *   -ENOMEM   no memory for the buffer.
 * The file's content never appears in err. Opened with O_NONBLOCK,
 * O_CLOEXEC and O_NOCTTY, so neither a FIFO without a writer nor a device
 * can block the caller. */
int ra_read_file(const char *path, size_t max, char **buf, size_t *len, char *err, size_t errlen);

/* As ra_read_file, and on success *st (if non-NULL) is the fstat of the
 * descriptor the bytes were read from (its mtime dates this content). */
int ra_read_file_st(const char *path, size_t max, char **buf, size_t *len, struct stat *st,
                    char *err, size_t errlen);

/* Writes dir "/" name into out (n bytes, truncated), with no second '/'
 * when dir already ends in one. */
void ra_path_in(const char *dir, const char *name, char *out, size_t n);

/* Replaces the file at path with len bytes of data, atomically: they are
 * written to "PATH.tmp" (created with mode, exactly: the umask does not
 * apply; never through a symbolic link),
 * which is then renamed over path, so a reader sees the old file or the new
 * one, never a part. Returns 0, or -errno with a one-line reason starting
 * "cannot write PATH: " in err (errlen bytes); the temporary file is removed
 * on failure. Blocking: for small files on a local directory (emptyDir). */
int ra_write_file_atomic(const char *path, const void *data, size_t len, unsigned mode, char *err,
                         size_t errlen);

/* What a file type (st_mode & S_IFMT) is called in errors: "a FIFO",
 * "a character device", "a block device", "a socket", "a directory",
 * "a symbolic link", "a regular file", "an unknown file type". Static. */
const char *ra_file_kind(unsigned mode);

#endif
