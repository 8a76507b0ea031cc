/*
 * helpers.h - what many C tests do alike: run a libuv loop until a
 * condition holds or a time limit passes, write a small file, and make and
 * remove a temporary directory. Every loop here is bounded in count and in
 * time. Static functions: each test binary that includes this gets its own
 * copy (inline, so that one left unused is no warning). Include it after
 * <cmocka.h>: write_bytes fails the test.
 */
#ifndef RA_TESTS_HELPERS_H
#define RA_TESTS_HELPERS_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

/* The most iterations run_until makes, whatever the loop does. */
#define RUN_UNTIL_MAX_ITERATIONS 10000000L

static inline void helpers_on_deadline(uv_timer_t *t) { *(int *)t->data = 1; }

/* Runs loop (UV_RUN_ONCE at a time) until pred(arg) is true or limit_ms
 * have passed, whichever comes first; returns pred(arg). A timer of its
 * own makes each iteration return by the limit even when nothing else is
 * pending; it is closed before the return (one UV_RUN_NOWAIT pass, which
 * may run other ready callbacks too). */
static inline int run_until(uv_loop_t *loop, int (*pred)(void *), void *arg, uint64_t limit_ms)
{
    uv_timer_t t;
    int fired = 0;

    if (uv_timer_init(loop, &t) != 0) return pred(arg);
    t.data = &fired;
    uv_timer_start(&t, helpers_on_deadline, limit_ms, 0);
    for (long i = 0; i < RUN_UNTIL_MAX_ITERATIONS && !fired && !pred(arg); i++)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT); /* completes the timer's close */
    return pred(arg);
}

static inline int helpers_never(void *arg)
{
    (void)arg;
    return 0;
}

/* Runs loop for limit_ms, for asserting that nothing more happens. */
static inline void run_for(uv_loop_t *loop, uint64_t limit_ms)
{
    run_until(loop, helpers_never, NULL, limit_ms);
}

/* A counter and the value run_until waits for it to reach. */
struct at_least {
    const int *v;
    int min;
};

/* run_until's predicate for struct at_least: *v >= min. */
static inline int at_least(void *arg)
{
    const struct at_least *a = arg;
    return *a->v >= a->min;
}

/* Runs loop until *v >= min or limit_ms pass; returns whether it got there. */
static inline int run_until_count(uv_loop_t *loop, const int *v, int min, uint64_t limit_ms)
{
    struct at_least a = {v, min};
    return run_until(loop, at_least, &a, limit_ms);
}

/* Writes len bytes of data as the whole file path (created 0644 or
 * truncated); fails the test on any error. */
static inline void write_bytes(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

    if (fd < 0) fail_msg("open %s: %s", path, strerror(errno));
    if (write(fd, data, len) != (ssize_t)len) fail_msg("write %s: %s", path, strerror(errno));
    if (close(fd) != 0) fail_msg("close %s: %s", path, strerror(errno));
}

/* Writes the string text as the whole file path (write_bytes). */
static inline void write_file(const char *path, const char *text)
{
    write_bytes(path, text, strlen(text));
}

/* Makes a new directory /tmp/<name>.XXXXXX (/dev/shm with shm, a tmpfs);
 * its path into dir[n]. Returns 0, or -1 (dir is then empty). */
static inline int make_tmpdir(char *dir, size_t n, const char *name, int shm)
{
    const char *base = shm && access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";

    if ((size_t)snprintf(dir, n, "%s/%s.XXXXXX", base, name) >= n || !mkdtemp(dir)) {
        if (n) dir[0] = '\0';
        return -1;
    }
    return 0;
}

static inline int helpers_rm_one(const char *p, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return type == FTW_DP ? rmdir(p) : unlink(p);
}

/* Removes dir and everything under it (symbolic links are not followed).
 * Returns 0, or -1 when something could not be removed. */
static inline int remove_tmpdir(const char *dir)
{
    return dir[0] && nftw(dir, helpers_rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

#endif
