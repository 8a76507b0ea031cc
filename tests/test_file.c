/*
 * test_file.c - ra_read_file (base/file.c) on real files: a regular file,
 * one of exactly the limit and one over it, an empty file, a missing path,
 * a directory, a FIFO without a writer (must return at once, not block),
 * a procfs file (size 0, read as it comes), a FIFO that holds data,
 * a symlink to a FIFO, /dev/null and /dev/zero
 * (character devices), a UNIX socket (open fails: ENXIO, the real errno)
 * and a file without read permission (EACCES; as root, which may read it,
 * the read succeeds instead). ra_write_file_atomic: the temporary file is
 * a fresh name, so a hard link or a symbolic link planted at the old fixed
 * name ("PATH.tmp") is neither written through nor in the way, and nothing
 * is left beside the file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/file.h"

static char g_dir[32];

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/test_file.XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[256];
    (void)state;
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s'; rm -rf '%s'", g_dir, g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void path_of(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", g_dir, name);
}

static void write_bytes(const char *path, char ch, size_t n)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (size_t i = 0; i < n; i++) assert_int_equal(fputc(ch, f), ch);
    assert_int_equal(fclose(f), 0);
}

/* Runs ra_read_file and checks that it failed with want, that err names
 * the path and contains `says`, and that nothing was returned. */
static void expect_refused(const char *path, size_t max, int want, const char *says)
{
    char *buf = (char *)1, err[512];
    size_t len = 99;
    int rc = ra_read_file(path, max, &buf, &len, err, sizeof err);
    if (rc != want) print_error("%s: rc %d, want %d (%s)\n", path, rc, want, err);
    assert_int_equal(rc, want);
    assert_null(buf);
    assert_int_equal(len, 0);
    if (!strstr(err, path) || !strstr(err, says)) print_error("err: %s\n", err);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, says));
}

static void test_regular(void **state)
{
    (void)state;
    char path[128], *buf = NULL, err[256];
    size_t len = 0;
    struct stat st;
    path_of(path, sizeof path, "small");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("hello\n\0world", f); /* fputs stops at the NUL: 6 bytes */
    assert_int_equal(fclose(f), 0);
    assert_int_equal(ra_read_file_st(path, 100, &buf, &len, &st, err, sizeof err), 0);
    assert_int_equal(len, 6);
    assert_memory_equal(buf, "hello\n", 7); /* NUL-terminated */
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_size, 6);
    free(buf);
}

static void test_empty(void **state)
{
    (void)state;
    char path[128], *buf = NULL, err[256];
    size_t len = 99;
    path_of(path, sizeof path, "empty");
    write_bytes(path, 'x', 0);
    assert_int_equal(ra_read_file(path, 10, &buf, &len, err, sizeof err), 0);
    assert_non_null(buf);
    assert_int_equal(len, 0);
    assert_int_equal(buf[0], '\0');
    free(buf);
}

static void test_limit(void **state)
{
    (void)state;
    char path[128], *buf = NULL, err[256];
    size_t len = 0;
    path_of(path, sizeof path, "limit");
    write_bytes(path, 'a', 200000);
    assert_int_equal(ra_read_file(path, 200000, &buf, &len, err, sizeof err), 0);
    assert_int_equal(len, 200000);
    assert_int_equal(buf[199999], 'a');
    assert_int_equal(buf[200000], '\0');
    free(buf);
    expect_refused(path, 199999, -EFBIG, "larger than 199999 bytes");
    expect_refused(path, 0, -EFBIG, "larger than 0 bytes");
}

/* procfs files report size 0: the buffer grows as the bytes come. */
static void test_unknown_size(void **state)
{
    (void)state;
    char *buf = NULL, err[256];
    size_t len = 0;
    /* /proc/self/smaps (several KiB per mapping)
     * is far longer than the first 4 KiB buffer */
    assert_int_equal(ra_read_file("/proc/self/smaps", 1 << 20, &buf, &len, err, sizeof err), 0);
    assert_true(len > 4096);
    assert_int_equal(strlen(buf), len);
    assert_non_null(strstr(buf, "test_file"));
    free(buf);
    expect_refused("/proc/self/smaps", 4096, -EFBIG, "larger than 4096 bytes");
}

static void test_missing(void **state)
{
    (void)state;
    char path[128];
    path_of(path, sizeof path, "nope");
    expect_refused(path, 100, -ENOENT, "No such file or directory");
}

static void test_directory(void **state)
{
    (void)state;
    expect_refused(g_dir, 100, -EISDIR, "is a directory, not a regular file");
}

static void alarm_handler(int sig)
{
    (void)sig;
    (void)!write(2, "ra_read_file blocked\n", 21);
    _exit(99);
}

static void test_fifo(void **state)
{
    (void)state;
    char path[128], link[128];
    path_of(path, sizeof path, "fifo");
    path_of(link, sizeof link, "fifo-link");
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(symlink(path, link), 0);
    /* A blocking open would wait for a writer forever: the alarm turns that
     * into a test failure instead of a hang. */
    signal(SIGALRM, alarm_handler);
    alarm(10);
    expect_refused(path, 100, -EINVAL, "is a FIFO, not a regular file");
    expect_refused(link, 100, -EINVAL, "is a FIFO, not a regular file");
    /* Also with a writer holding data: still refused, nothing read. */
    int w = open(path, O_RDWR | O_NONBLOCK);
    assert_true(w >= 0);
    assert_int_equal(write(w, "secret", 6), 6);
    expect_refused(path, 100, -EINVAL, "is a FIFO");
    char b[8];
    assert_int_equal(read(w, b, sizeof b), 6); /* the data is still there */
    close(w);
    alarm(0);
    signal(SIGALRM, SIG_DFL);
}

static void test_char_device(void **state)
{
    (void)state;
    expect_refused("/dev/null", 100, -EINVAL, "is a character device, not a regular file");
    expect_refused("/dev/zero", 100, -EINVAL, "is a character device");
}

static void test_socket(void **state)
{
    (void)state;
    char path[100];
    path_of(path, sizeof path, "sock");
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(s >= 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    /* open(2) on a socket fails with ENXIO: the real errno comes back */
    expect_refused(path, 100, -ENXIO, path);
    close(s);
}

static void test_permission(void **state)
{
    (void)state;
    char sub[128], path[160];
    path_of(sub, sizeof sub, "locked");
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(path, sizeof path, "%s/f", sub);
    write_bytes(path, 'x', 3);
    assert_int_equal(chmod(path, 0), 0);
    if (geteuid() == 0) {
        /* root reads it anyway (CAP_DAC_OVERRIDE); check that instead */
        char *buf = NULL, err[256];
        size_t len = 0;
        assert_int_equal(ra_read_file(path, 10, &buf, &len, err, sizeof err), 0);
        assert_int_equal(len, 3);
        free(buf);
    } else {
        expect_refused(path, 10, -EACCES, "Permission denied");
    }
}

static void test_no_err_buffer(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    assert_int_equal(ra_read_file("/dev/null", 10, &buf, &len, NULL, 0), -EINVAL);
    assert_null(buf);
}

static void test_kind_names(void **state)
{
    (void)state;
    assert_string_equal(ra_file_kind(S_IFIFO), "a FIFO");
    assert_string_equal(ra_file_kind(S_IFSOCK), "a socket");
    assert_string_equal(ra_file_kind(S_IFBLK), "a block device");
    assert_string_equal(ra_file_kind(S_IFLNK), "a symbolic link");
    assert_string_equal(ra_file_kind(0), "an unknown file type");
}

/* The entries of g_dir/sub (not . and ..), sorted, ' '-joined into out. */
static void entries(const char *sub, char *out, size_t n)
{
    char dir[128], cmd[300];
    path_of(dir, sizeof dir, sub);
    snprintf(cmd, sizeof cmd, "ls -A '%s' | tr '\\n' ' '", dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t k = fread(out, 1, n - 1, p);
    out[k] = '\0';
    assert_int_equal(pclose(p), 0);
}

static void read_back(const char *path, const char *want)
{
    char *buf = NULL, err[256];
    size_t len = 0;
    assert_int_equal(ra_read_file(path, 4096, &buf, &len, err, sizeof err), 0);
    assert_string_equal(buf, want);
    free(buf);
}

/* Issue 24 G9: a link planted at "PATH.tmp" (the temporary name the write
 * used to open with O_TRUNC) is not written through: the file it points to
 * keeps its bytes, and the write itself succeeds. */
static void test_atomic_write_ignores_planted_links(void **state)
{
    (void)state;
    char d[128], path[160], tmp[170], victim[128], err[512], ls[512];
    path_of(d, sizeof d, "atomic");
    assert_int_equal(mkdir(d, 0700), 0);
    path_of(victim, sizeof victim, "victim");
    snprintf(path, sizeof path, "%s/rec.json", d);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    write_bytes(victim, 'v', 3);
    assert_int_equal(link(victim, tmp), 0); /* a hard link */
    assert_int_equal(ra_write_file_atomic(path, "new", 3, 0600, err, sizeof err), 0);
    read_back(victim, "vvv");
    read_back(path, "new");
    assert_int_equal(unlink(tmp), 0);
    assert_int_equal(symlink(victim, tmp), 0); /* a symbolic link */
    assert_int_equal(ra_write_file_atomic(path, "newer", 5, 0600, err, sizeof err), 0);
    read_back(victim, "vvv");
    read_back(path, "newer");
    assert_int_equal(unlink(tmp), 0);
    /* only the file is left: no temporary name beside it */
    entries("atomic", ls, sizeof ls);
    assert_string_equal(ls, "rec.json ");
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(st.st_nlink, 1);
}

/* A write that fails leaves no temporary file and says why, naming the
 * path; the old file stays as it was. */
static void test_atomic_write_failure_cleans_up(void **state)
{
    (void)state;
    char d[128], path[160], err[512], ls[512];
    path_of(d, sizeof d, "atomic-fail");
    assert_int_equal(mkdir(d, 0700), 0);
    snprintf(path, sizeof path, "%s/rec.json", d);
    assert_int_equal(ra_write_file_atomic(path, "old", 3, 0600, err, sizeof err), 0);
    /* the rename fails: a directory where the file goes */
    char sub[200];
    snprintf(sub, sizeof sub, "%s/dir.json", d);
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(sub, sizeof sub, "%s/dir.json/x", d);
    write_bytes(sub, 'x', 1);
    snprintf(sub, sizeof sub, "%s/dir.json", d);
    assert_true(ra_write_file_atomic(sub, "new", 3, 0600, err, sizeof err) < 0);
    assert_non_null(strstr(err, "cannot write"));
    assert_non_null(strstr(err, sub));
    entries("atomic-fail", ls, sizeof ls);
    assert_string_equal(ls, "dir.json rec.json ");
    read_back(path, "old");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_regular),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_limit),
        cmocka_unit_test(test_unknown_size),
        cmocka_unit_test(test_missing),
        cmocka_unit_test(test_directory),
        cmocka_unit_test(test_fifo),
        cmocka_unit_test(test_char_device),
        cmocka_unit_test(test_socket),
        cmocka_unit_test(test_permission),
        cmocka_unit_test(test_no_err_buffer),
        cmocka_unit_test(test_kind_names),
        cmocka_unit_test(test_atomic_write_ignores_planted_links),
        cmocka_unit_test(test_atomic_write_failure_cleans_up),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
