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
 * written to a temporary file of its own in the same directory ("PATH.tmp-"
 * and 12 random hex digits, created with mode, exactly (the umask does not apply), by
 * O_CREAT|O_EXCL|O_NOFOLLOW,
 * so a link planted there is never written through), flushed (fsync), and
 * renamed over path, so a reader sees the old file or the new one, never a
 * part. Returns 0, or -errno with a one-line reason starting "cannot write
 * PATH: " in err (errlen bytes); the temporary file is removed on failure
 * and the old file is left as it was. Blocking: for small files on a local
 * directory (emptyDir). */
int ra_write_file_atomic(const char *path, const void *data, size_t len, unsigned mode, char *err,
                         size_t errlen);

/* A small record kept in a directory (the run daemon's --state-dir): one
 * file, name, in dir, written whole and read whole.
 *
 * ra_record_read reads dir/name (a regular file, at most max bytes: see
 * ra_read_file). Returns 1 with *buf (malloc'd, NUL-terminated after *len
 * bytes; the caller frees it), 0 when there is no record (ENOENT: *buf
 * NULL), or -errno with a reason starting "DIR/NAME: " in err.
 *
 * ra_record_write replaces dir/name with len bytes of buf atomically (see
 * ra_write_file_atomic; mode 0600). Returns 0, or -errno with a reason
 * starting "cannot write DIR/NAME: " in err. A record that cannot be
 * replaced no longer says what is current, so on failure the old one is
 * removed too; err ends "; the previous record was removed" or, when that
 * fails as well (a read-only directory), "; the previous record could not
 * be removed either: REASON".
 *
 * ra_record_remove removes dir/name. Returns 0 (also when there was none),
 * or -errno with a reason naming the file in err. */
int ra_record_read(const char *dir, const char *name, size_t max, char **buf, size_t *len,
                   char *err, size_t errlen);
int ra_record_write(const char *dir, const char *name, const void *buf, size_t len, char *err,
                    size_t errlen);
int ra_record_remove(const char *dir, const char *name, char *err, size_t errlen);

/* What a file type (st_mode & S_IFMT) is called in errors: "a FIFO",
 * "a character device", "a block device", "a socket", "a directory",
 * "a symbolic link", "a regular file", "an unknown file type". Static. */
const char *ra_file_kind(unsigned mode);

#endif
