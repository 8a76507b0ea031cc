/*
 * test_watch.c - the inotify watcher against real directories on a real loop.
 *
 * Each test gets a fresh temp tree, a uv loop and a watch with a "sentinel"
 * directory root. sync() creates a file in the sentinel and runs the loop
 * until that event is reported: inotify delivers one instance's events in
 * order, so everything done before sync() has been handled by then. That
 * makes "this did NOT call back" checks exact instead of timing-based.
 * Every wait is bounded by a uv_timer deadline and an iteration cap.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/log.h"
#include "watch/watch.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEADLINE_MS 3000
#define MAX_ROOTS 4

struct rec {
    size_t root; /* the index this recorder was registered for */
    int n[5];    /* callbacks by enum watch_why */
    int wrong_root;
    struct watch *close_w; /* if set, watch_close(close_w) from the callback ... */
    int close_on;          /* ... for this why + 1 */
    int *closed;           /* its done counter */
};

struct fx {
    uv_loop_t loop;
    struct watch *w;
    char base[64];
    struct rec sent;
    int nsync;
    struct rec rec[MAX_ROOTS];
    int closed;
};

static void on_done(void *ud) { ++*(int *)ud; }

static void rec_cb(void *ud, size_t root, enum watch_why why)
{
    struct rec *r = ud;
    if (root != r->root) r->wrong_root++;
    r->n[why]++;
    if (r->close_w && r->close_on == (int)why + 1) {
        watch_close(r->close_w, on_done, r->closed);
        r->close_w = NULL;
    }
}

/* A path under the test tree; a small ring of buffers so calls can nest. */
static const char *at(struct fx *f, const char *fmt, ...)
{
    static char ring[8][PATH_MAX];
    static int next;
    char *p = ring[next++ % 8], rel[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof rel);
    snprintf(p, PATH_MAX, "%s/t/%s", f->base, rel);
    return p;
}

static void put(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    assert_int_equal(close(fd), 0);
}

static void mkd(const char *path) { assert_int_equal(mkdir(path, 0755), 0); }

static int rm_one(const char *p, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return type == FTW_DP ? rmdir(p) : unlink(p);
}

static void rm_rf(const char *path)
{
    assert_int_equal(nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
}

static void on_deadline(uv_timer_t *t) { *(int *)t->data = 1; }

/* Runs the loop until pred(arg) holds or the deadline passes; returns pred. */
static int run_until(struct fx *f, int (*pred)(void *), void *arg)
{
    uv_timer_t t;
    int fired = 0;
    assert_int_equal(uv_timer_init(&f->loop, &t), 0);
    t.data = &fired;
    assert_int_equal(uv_timer_start(&t, on_deadline, DEADLINE_MS, 0), 0);
    for (int i = 0; i < 100000 && !fired && !pred(arg); i++) uv_run(&f->loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&f->loop, UV_RUN_NOWAIT); /* completes the timer's close */
    return pred(arg);
}

struct at_least {
    const int *v;
    int min;
};
static int pred_at_least(void *a)
{
    const struct at_least *p = a;
    return *p->v >= p->min;
}
static int wait_count(struct fx *f, const int *v, int min)
{
    struct at_least p = {v, min};
    return run_until(f, pred_at_least, &p);
}

struct wds {
    struct fx *f;
    size_t n;
};
static int pred_wds(void *a)
{
    const struct wds *p = a;
    return watch_wd_count(p->f->w) == p->n;
}
static int wait_wds(struct fx *f, size_t n)
{
    struct wds p = {f, n};
    return run_until(f, pred_wds, &p);
}

/* Everything done to the file system before this call has been handled after it. */
static void sync_events(struct fx *f)
{
    char p[PATH_MAX];
    int want = f->sent.n[WATCH_EVENT] + 1;
    snprintf(p, sizeof p, "%s/s/%d", f->base, f->nsync++);
    put(p, "x");
    assert_true(wait_count(f, &f->sent.n[WATCH_EVENT], want));
}

static size_t add(struct fx *f, int i, const char *path)
{
    size_t idx = 99;
    assert_int_equal(watch_add(f->w, path, rec_cb, &f->rec[i], &idx), 0);
    f->rec[i].root = idx;
    return idx;
}

/* Lets every pending event arrive, then zeroes the recorder. */
static void settle_reset(struct fx *f, struct rec *r)
{
    sync_events(f);
    memset(r->n, 0, sizeof r->n);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    char p[PATH_MAX];
    size_t idx;
    assert_non_null(f);
    snprintf(f->base, sizeof f->base, "/tmp/test_watch-XXXXXX");
    assert_non_null(mkdtemp(f->base));
    snprintf(p, sizeof p, "%s/s", f->base);
    mkd(p);
    snprintf(p, sizeof p, "%s/t", f->base);
    mkd(p);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(watch_create(&f->loop, &f->w), 0);
    snprintf(p, sizeof p, "%s/s", f->base);
    assert_int_equal(watch_add(f->w, p, rec_cb, &f->sent, &idx), 0);
    f->sent.root = idx;
    assert_int_equal(watch_wd_count(f->w), 1);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    if (f->w) watch_close(f->w, on_done, &f->closed);
    for (int i = 0; i < 100 && uv_run(&f->loop, UV_RUN_NOWAIT); i++) {
    }
    if (f->w) assert_int_equal(f->closed, 1);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    assert_int_equal(f->sent.wrong_root, 0);
    for (int i = 0; i < MAX_ROOTS; i++) assert_int_equal(f->rec[i].wrong_root, 0);
    rm_rf(f->base);
    free(f);
    return 0;
}

/* --- a minimal kubelet AtomicWriter (docs/kubernetes-api.md#the-kubelets-atomicwriter) --- */

/* Steps 5-8: new timestamped dir with the payload, "..data_tmp" link. */
static void aw_stage(struct fx *f, const char *vol, const char *ts, const char *content)
{
    mkd(at(f, "%s/%s", vol, ts));
    put(at(f, "%s/%s/a.conf", vol, ts), content);
    put(at(f, "%s/%s/annotations", vol, ts), content);
    mkd(at(f, "%s/%s/conf", vol, ts));
    put(at(f, "%s/%s/conf/app.yaml", vol, ts), content);
    assert_int_equal(symlink(ts, at(f, "%s/..data_tmp", vol)), 0);
}

/* Step 9: the atomic switch. */
static void aw_switch(struct fx *f, const char *vol)
{
    assert_int_equal(rename(at(f, "%s/..data_tmp", vol), at(f, "%s/..data", vol)), 0);
}

/* Initial population: stage, switch, user-visible links. */
static void aw_init(struct fx *f, const char *vol)
{
    mkd(at(f, "%s", vol));
    aw_stage(f, vol, "..2024_05_01_12_00_00.1", "v1");
    aw_switch(f, vol);
    assert_int_equal(symlink("..data/a.conf", at(f, "%s/a.conf", vol)), 0);
    assert_int_equal(symlink("..data/annotations", at(f, "%s/annotations", vol)), 0);
    assert_int_equal(symlink("..data/conf", at(f, "%s/conf", vol)), 0);
}

static void test_kubelet_swap(void **state)
{
    struct fx *f = *state;
    aw_init(f, "vol");
    size_t i = add(f, 0, at(f, "vol"));
    assert_true(watch_is_root_present(f->w, i));
    /* Only the volume dir: no watches below ".." names or through the conf link. */
    assert_int_equal(watch_wd_count(f->w), 2);

    aw_stage(f, "vol", "..2024_05_01_12_01_00.2", "v2");
    sync_events(f);
    assert_int_equal(f->rec[0].n[WATCH_EVENT], 0); /* private names are noise */

    aw_switch(f, "vol");
    /* reported as a swap of ..data only: the top-level entries did not change */
    assert_true(wait_count(f, &f->rec[0].n[WATCH_DATA_LINK], 1));
    rm_rf(at(f, "vol/..2024_05_01_12_00_00.1")); /* step 12 */
    sync_events(f);
    assert_int_equal(f->rec[0].n[WATCH_EVENT], 0);
    /* a new key link is not: the top level changed */
    assert_int_equal(symlink("..data/new.conf", at(f, "vol/new.conf")), 0);
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));
    assert_int_equal(watch_wd_count(f->w), 2);
    assert_int_equal(f->rec[0].n[WATCH_ROOT_GONE] + f->rec[0].n[WATCH_OVERFLOW], 0);
}

static void test_plain_write(void **state)
{
    struct fx *f = *state;
    mkd(at(f, "d"));
    put(at(f, "d/old"), "1");
    add(f, 0, at(f, "d"));
    sync_events(f);
    assert_int_equal(f->rec[0].n[WATCH_EVENT], 0);
    put(at(f, "d/old"), "2");
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));
    settle_reset(f, &f->rec[0]);
    assert_int_equal(unlink(at(f, "d/old")), 0);
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));
}

static void test_new_subdirs(void **state)
{
    struct fx *f = *state;
    mkd(at(f, "d"));
    add(f, 0, at(f, "d"));
    mkd(at(f, "d/s"));
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));
    assert_int_equal(watch_wd_count(f->w), 3);
    settle_reset(f, &f->rec[0]);
    put(at(f, "d/s/f"), "x");
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));

    /* A tree that already has content when its top appears. */
    mkd(at(f, "d/n"));
    mkd(at(f, "d/n/a"));
    mkd(at(f, "d/n/a/b"));
    put(at(f, "d/n/a/b/f"), "x");
    assert_true(wait_wds(f, 6));
    settle_reset(f, &f->rec[0]);
    put(at(f, "d/n/a/b/g"), "x");
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));
    rm_rf(at(f, "d/n"));
    assert_true(wait_wds(f, 3));

    /* Renamed inside the root: still watched, under its new name. */
    assert_int_equal(rename(at(f, "d/s"), at(f, "d/s2")), 0);
    sync_events(f);
    assert_int_equal(watch_wd_count(f->w), 3);
    settle_reset(f, &f->rec[0]);
    put(at(f, "d/s2/f2"), "x");
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));

    /* Moved out of the root: no longer watched. */
    assert_int_equal(rename(at(f, "d/s2"), at(f, "outside")), 0);
    assert_true(wait_wds(f, 2));
    settle_reset(f, &f->rec[0]);
    put(at(f, "outside/f3"), "x");
    sync_events(f);
    assert_int_equal(f->rec[0].n[WATCH_EVENT], 0);
}

static void test_nested_existing_no_symlinks(void **state)
{
    struct fx *f = *state;
    mkd(at(f, "d"));
    mkd(at(f, "d/a"));
    mkd(at(f, "d/a/b"));
    mkd(at(f, "d/a/b/c"));
    mkd(at(f, "d/..private"));
    mkd(at(f, "other"));
    mkd(at(f, "other/deep"));
    assert_int_equal(symlink(at(f, "other"), at(f, "d/link")), 0);
    assert_int_equal(symlink("../other", at(f, "d/a/rel")), 0);
    add(f, 0, at(f, "d"));
    assert_int_equal(watch_wd_count(f->w), 5); /* sentinel, d, a, b, c */

    put(at(f, "other/f"), "x");
    put(at(f, "other/deep/f"), "x");
    put(at(f, "d/..private/f"), "x");
    put(at(f, "d/..private_file"), "x");
    sync_events(f);
    assert_int_equal(f->rec[0].n[WATCH_EVENT], 0);

    put(at(f, "d/a/b/c/f"), "x");
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));
    settle_reset(f, &f->rec[0]);
    put(at(f, "d/..data"), "x"); /* "..data" is the one private name that counts */
    assert_true(wait_count(f, &f->rec[0].n[WATCH_DATA_LINK], 1));
}

static void test_symlink_root(void **state)
{
    struct fx *f = *state;
    mkd(at(f, "real"));
    mkd(at(f, "real/sub"));
    assert_int_equal(symlink("real", at(f, "link")), 0);
    add(f, 0, at(f, "link/"));
    assert_int_equal(watch_wd_count(f->w), 4); /* sentinel, real, real/sub, t (the link's dir) */
    put(at(f, "real/sub/f"), "x");
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));
}

/* A directory root reached through a symlink follows the link when it is
 * retargeted: a kubelet key directory (conf -> ..data/conf), and ln -sfn. */
static void test_symlinked_dir_root_follows_link(void **state)
{
    struct fx *f = *state;
    aw_init(f, "vol");
    size_t i = add(f, 0, at(f, "vol/conf"));
    assert_int_equal(watch_wd_count(f->w), 3); /* sentinel, ..1/conf, vol */
    aw_stage(f, "vol", "..2024_05_01_12_01_00.2", "v2");
    sync_events(f);
    assert_int_equal(f->rec[0].n[WATCH_EVENT], 0);
    aw_switch(f, "vol");
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));
    rm_rf(at(f, "vol/..2024_05_01_12_00_00.1"));
    settle_reset(f, &f->rec[0]);
    assert_true(watch_is_root_present(f->w, i));
    assert_int_equal(watch_wd_count(f->w), 3);
    put(at(f, "vol/..data/conf/new.yaml"), "x"); /* the new timestamped dir is watched */
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));
    sync_events(f);
    assert_int_equal(f->rec[0].n[WATCH_ROOT_GONE], 0);

    mkd(at(f, "rel1"));
    mkd(at(f, "rel2"));
    assert_int_equal(symlink("rel1", at(f, "current")), 0);
    add(f, 1, at(f, "current"));
    assert_int_equal(symlink("rel2", at(f, "current.tmp")), 0);
    assert_int_equal(rename(at(f, "current.tmp"), at(f, "current")), 0);
    assert_true(wait_count(f, &f->rec[1].n[WATCH_EVENT], 1));
    settle_reset(f, &f->rec[1]);
    put(at(f, "rel1/x"), "x");
    sync_events(f);
    assert_int_equal(f->rec[1].n[WATCH_EVENT], 0);
    put(at(f, "rel2/x"), "x");
    assert_true(wait_count(f, &f->rec[1].n[WATCH_EVENT], 1));

    /* Dangling now: gone, and back when the link resolves again. */
    rm_rf(at(f, "rel1"));
    assert_int_equal(symlink("rel1", at(f, "current.tmp")), 0);
    assert_int_equal(rename(at(f, "current.tmp"), at(f, "current")), 0);
    assert_true(wait_count(f, &f->rec[1].n[WATCH_ROOT_GONE], 1));
    mkd(at(f, "rel1"));
    assert_int_equal(unlink(at(f, "current")), 0);
    assert_int_equal(symlink("rel1", at(f, "current")), 0);
    assert_true(wait_count(f, &f->rec[1].n[WATCH_ROOT_BACK], 1));
}

static void test_file_root_atomic_writer(void **state)
{
    struct fx *f = *state;
    aw_init(f, "podinfo");
    size_t i = add(f, 0, at(f, "podinfo/annotations"));
    assert_true(watch_is_root_present(f->w, i));
    assert_int_equal(watch_wd_count(f->w), 2);
    aw_stage(f, "podinfo", "..2024_05_01_12_01_00.2", "v2");
    sync_events(f);
    assert_int_equal(f->rec[0].n[WATCH_EVENT], 0);
    aw_switch(f, "podinfo");
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));
    rm_rf(at(f, "podinfo/..2024_05_01_12_00_00.1"));
    sync_events(f);
    assert_true(watch_is_root_present(f->w, i));
    assert_int_equal(f->rec[0].n[WATCH_ROOT_GONE], 0);
}

static void test_file_root_plain(void **state)
{
    struct fx *f = *state;
    mkd(at(f, "etc"));
    put(at(f, "etc/app.conf"), "1");
    put(at(f, "etc/other.conf"), "1");
    size_t app = add(f, 0, at(f, "etc/app.conf"));
    add(f, 1, at(f, "etc/other.conf"));
    assert_int_equal(watch_wd_count(f->w), 2); /* both share the parent's wd */

    put(at(f, "etc/unrelated"), "x");
    mkd(at(f, "etc/sub"));
    put(at(f, "etc/sub/x"), "x");
    assert_int_equal(unlink(at(f, "etc/unrelated")), 0);
    sync_events(f);
    assert_int_equal(f->rec[0].n[WATCH_EVENT] + f->rec[1].n[WATCH_EVENT], 0);

    put(at(f, "etc/app.conf"), "2");
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));
    sync_events(f);
    assert_int_equal(f->rec[1].n[WATCH_EVENT], 0);

    /* Write a temp file, rename it over other.conf. */
    settle_reset(f, &f->rec[0]);
    put(at(f, "etc/.other.conf.tmp"), "2");
    assert_int_equal(rename(at(f, "etc/.other.conf.tmp"), at(f, "etc/other.conf")), 0);
    assert_true(wait_count(f, &f->rec[1].n[WATCH_EVENT], 1));
    sync_events(f);
    assert_int_equal(f->rec[0].n[WATCH_EVENT], 0);

    /* Deleted: gone and waited for; back when it is written again. */
    assert_int_equal(unlink(at(f, "etc/app.conf")), 0);
    assert_true(wait_count(f, &f->rec[0].n[WATCH_ROOT_GONE], 1));
    assert_false(watch_is_root_present(f->w, app));
    settle_reset(f, &f->rec[1]); /* waiting on etc must not narrow other.conf's events */
    put(at(f, "etc/other.conf"), "3");
    assert_true(wait_count(f, &f->rec[1].n[WATCH_EVENT], 1));
    put(at(f, "etc/app.conf"), "3");
    assert_true(wait_count(f, &f->rec[0].n[WATCH_ROOT_BACK], 1));
    assert_true(watch_is_root_present(f->w, app));
    assert_int_equal(watch_wd_count(f->w), 2);
    settle_reset(f, &f->rec[0]);
    put(at(f, "etc/app.conf"), "4");
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));

    /* Replaced by a directory: re-decided as a directory root. */
    settle_reset(f, &f->rec[1]);
    assert_int_equal(unlink(at(f, "etc/other.conf")), 0);
    mkd(at(f, "etc/other.conf"));
    assert_true(wait_count(f, &f->rec[1].n[WATCH_ROOT_BACK], 1));
    assert_int_equal(watch_wd_count(f->w), 3);
    settle_reset(f, &f->rec[1]);
    put(at(f, "etc/other.conf/inside"), "x");
    assert_true(wait_count(f, &f->rec[1].n[WATCH_EVENT], 1));
}

static int read_log(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    assert_true(n >= 0);
    buf[n] = '\0';
    return (int)n;
}

static int count_substr(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static void test_missing_root(void **state)
{
    struct fx *f = *state;
    char logpath[PATH_MAX], logbuf[8192], want[PATH_MAX + 64];
    snprintf(logpath, sizeof logpath, "%s/log", f->base);
    int logfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(logfd >= 0);
    log_set_fd(logfd);
    log_configure(RA_LOG_DEBUG, RA_LOG_FORMAT_TEXT); /* the watcher logs details at debug level;
                                                  the monitor logs the "waiting" event */

    size_t i = add(f, 0, at(f, "a/b/c"));
    size_t j = add(f, 1, at(f, "x/y/app.conf"));
    assert_false(watch_is_root_present(f->w, i));
    assert_false(watch_is_root_present(f->w, j));
    assert_int_equal(watch_wd_count(f->w), 2); /* sentinel, t (ancestor of both) */

    mkd(at(f, "a"));
    sync_events(f);
    assert_int_equal(watch_wd_count(f->w), 3);
    mkd(at(f, "a/b"));
    put(at(f, "a/b/not-c"), "x");
    sync_events(f);
    assert_false(watch_is_root_present(f->w, i));
    mkd(at(f, "a/b/c"));
    assert_true(wait_count(f, &f->rec[0].n[WATCH_ROOT_BACK], 1));
    assert_true(watch_is_root_present(f->w, i));
    put(at(f, "a/b/c/f"), "x");
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));
    assert_int_equal(f->rec[0].n[WATCH_ROOT_GONE], 0);

    /* Several levels at once, the file root included. */
    mkd(at(f, "x"));
    mkd(at(f, "x/y"));
    put(at(f, "x/y/app.conf"), "x");
    assert_true(wait_count(f, &f->rec[1].n[WATCH_ROOT_BACK], 1));
    assert_true(watch_is_root_present(f->w, j));
    put(at(f, "x/y/app.conf"), "y");
    assert_true(wait_count(f, &f->rec[1].n[WATCH_EVENT], 1));
    assert_int_equal(watch_wd_count(f->w), 3); /* sentinel, a/b/c, x/y */

    log_set_fd(2);
    log_configure(RA_LOG_WARN, RA_LOG_FORMAT_TEXT);
    close(logfd);
    read_log(logpath, logbuf, sizeof logbuf);
    snprintf(want, sizeof want, "watch root %s does not exist yet; waiting for it", at(f, "a/b/c"));
    assert_int_equal(count_substr(logbuf, want), 1);
}

static void test_root_under_a_file(void **state)
{
    struct fx *f = *state;
    put(at(f, "plain"), "x");
    size_t i = add(f, 0, at(f, "plain/conf"));
    assert_false(watch_is_root_present(f->w, i));
    assert_int_equal(unlink(at(f, "plain")), 0);
    mkd(at(f, "plain"));
    mkd(at(f, "plain/conf"));
    assert_true(wait_count(f, &f->rec[0].n[WATCH_ROOT_BACK], 1));
    assert_true(watch_is_root_present(f->w, i));
}

static void test_root_deleted(void **state)
{
    struct fx *f = *state;
    mkd(at(f, "d"));
    mkd(at(f, "d/s"));
    put(at(f, "d/s/f"), "x");
    size_t i = add(f, 0, at(f, "d"));
    assert_int_equal(watch_wd_count(f->w), 3);
    rm_rf(at(f, "d"));
    assert_true(wait_count(f, &f->rec[0].n[WATCH_ROOT_GONE], 1));
    assert_false(watch_is_root_present(f->w, i));
    sync_events(f);
    assert_int_equal(watch_wd_count(f->w), 2); /* sentinel, t */
    assert_int_equal(f->rec[0].n[WATCH_ROOT_BACK], 0);

    mkd(at(f, "d"));
    assert_true(wait_count(f, &f->rec[0].n[WATCH_ROOT_BACK], 1));
    assert_true(watch_is_root_present(f->w, i));
    settle_reset(f, &f->rec[0]);
    put(at(f, "d/f"), "x");
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));
    assert_int_equal(f->rec[0].n[WATCH_ROOT_GONE], 0);
}

static void test_root_replaced_by_rename(void **state)
{
    struct fx *f = *state;
    mkd(at(f, "d"));
    mkd(at(f, "e"));
    size_t i = add(f, 0, at(f, "d"));
    size_t j = add(f, 1, at(f, "e"));

    /* mv d d.old; mv new d */
    mkd(at(f, "new"));
    put(at(f, "new/f"), "x");
    assert_int_equal(rename(at(f, "d"), at(f, "d.old")), 0);
    assert_int_equal(rename(at(f, "new"), at(f, "d")), 0);
    assert_true(wait_count(f, &f->rec[0].n[WATCH_ROOT_BACK], 1));
    assert_int_equal(f->rec[0].n[WATCH_ROOT_GONE], 1);
    assert_true(watch_is_root_present(f->w, i));
    settle_reset(f, &f->rec[0]);
    put(at(f, "d.old/g"), "x");
    sync_events(f);
    assert_int_equal(f->rec[0].n[WATCH_EVENT], 0); /* the old inode is not watched */
    put(at(f, "d/g"), "x");
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));

    /* rename(2) of a new directory over the (empty) root */
    mkd(at(f, "new2"));
    assert_int_equal(rename(at(f, "new2"), at(f, "e")), 0);
    assert_true(wait_count(f, &f->rec[1].n[WATCH_ROOT_BACK], 1));
    assert_int_equal(f->rec[1].n[WATCH_ROOT_GONE], 1);
    assert_true(watch_is_root_present(f->w, j));
    put(at(f, "e/g"), "x");
    assert_true(wait_count(f, &f->rec[1].n[WATCH_EVENT], 1));
    assert_int_equal(watch_wd_count(f->w), 3);
}

static void test_nested_roots_share_wds(void **state)
{
    struct fx *f = *state;
    mkd(at(f, "d"));
    mkd(at(f, "d/s"));
    add(f, 0, at(f, "d"));
    size_t s = add(f, 1, at(f, "d/s"));
    add(f, 2, at(f, "d//"));
    assert_int_equal(watch_wd_count(f->w), 3); /* sentinel, d, d/s */

    put(at(f, "d/s/f"), "x");
    assert_true(wait_count(f, &f->rec[1].n[WATCH_EVENT], 1));
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));
    assert_true(wait_count(f, &f->rec[2].n[WATCH_EVENT], 1));

    rm_rf(at(f, "d/s"));
    assert_true(wait_count(f, &f->rec[1].n[WATCH_ROOT_GONE], 1));
    assert_false(watch_is_root_present(f->w, s));
    sync_events(f);
    assert_int_equal(watch_wd_count(f->w), 2); /* d/s waits on d's own wd */
    assert_int_equal(f->rec[0].n[WATCH_ROOT_GONE], 0);

    mkd(at(f, "d/s"));
    assert_true(wait_count(f, &f->rec[1].n[WATCH_ROOT_BACK], 1));
    assert_true(wait_wds(f, 3));
    settle_reset(f, &f->rec[0]);
    settle_reset(f, &f->rec[1]);
    put(at(f, "d/s/g"), "x");
    assert_true(wait_count(f, &f->rec[1].n[WATCH_EVENT], 1));
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));
    /* d/s no longer waits on d: d's own watch must have survived that. */
    sync_events(f);
    assert_int_equal(f->rec[0].n[WATCH_ROOT_GONE] + f->rec[2].n[WATCH_ROOT_GONE], 0);
    settle_reset(f, &f->rec[0]);
    settle_reset(f, &f->rec[1]);
    settle_reset(f, &f->rec[2]);
    put(at(f, "d/f"), "x");
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));
    assert_true(wait_count(f, &f->rec[2].n[WATCH_EVENT], 1));
    assert_int_equal(f->rec[1].n[WATCH_EVENT], 0);
}

static long read_long(const char *path)
{
    char buf[64] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_true(read(fd, buf, sizeof buf - 1) > 0);
    close(fd);
    return strtol(buf, NULL, 10);
}

/* Without running the loop: 3 events per file, 1.5x the queue of max. */
static void flood(struct fx *f, const char *dir, long max)
{
    for (long k = 0; k < max / 2 + 64; k++) {
        const char *p = at(f, "%s/f%ld", dir, k);
        put(p, "");
        assert_int_equal(unlink(p), 0);
    }
}

static void test_queue_overflow(void **state)
{
    struct fx *f = *state;
    long max = read_long("/proc/sys/fs/inotify/max_queued_events");
    assert_true(max > 0 && max <= 1L << 22);
    mkd(at(f, "d"));
    size_t i = add(f, 0, at(f, "d"));

    flood(f, "d", max);
    /* Created after the overflow: only the rescan can find it. */
    mkd(at(f, "d/late"));
    put(at(f, "d/late/f"), "x");

    assert_true(wait_count(f, &f->rec[0].n[WATCH_OVERFLOW], 1));
    assert_int_equal(f->rec[0].n[WATCH_OVERFLOW], 1);
    assert_int_equal(f->sent.n[WATCH_OVERFLOW], 1); /* every root is told */
    assert_true(watch_events_total(f->w) >= (uint64_t)max);
    assert_true(watch_is_root_present(f->w, i));
    assert_int_equal(watch_wd_count(f->w), 3); /* sentinel, d, d/late */

    settle_reset(f, &f->rec[0]);
    put(at(f, "d/late/g"), "x");
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));
}

/* A root removed during the overflow is reported gone after WATCH_OVERFLOW,
 * unless the WATCH_OVERFLOW callback closed the watch. */
static void test_overflow_gone_and_close(void **state)
{
    struct fx *f = *state;
    long max = read_long("/proc/sys/fs/inotify/max_queued_events");
    mkd(at(f, "d"));
    mkd(at(f, "e"));
    mkd(at(f, "g"));
    add(f, 0, at(f, "e"));
    add(f, 1, at(f, "g"));
    add(f, 2, at(f, "d"));
    flood(f, "d", max);
    rm_rf(at(f, "e"));
    rm_rf(at(f, "g"));
    f->rec[1].close_w = f->w;
    f->rec[1].close_on = WATCH_OVERFLOW + 1;
    f->rec[1].closed = &f->closed;
    assert_true(wait_count(f, &f->closed, 1));
    assert_int_equal(f->rec[0].n[WATCH_OVERFLOW], 1);
    assert_int_equal(f->rec[0].n[WATCH_ROOT_GONE], 1);
    assert_int_equal(f->rec[1].n[WATCH_OVERFLOW], 1);
    assert_int_equal(f->rec[1].n[WATCH_ROOT_GONE], 0); /* closed before it */
    assert_int_equal(f->rec[2].n[WATCH_OVERFLOW], 0);
    f->w = NULL;
}

static void test_close_from_callback(void **state)
{
    struct fx *f = *state;
    mkd(at(f, "d"));
    add(f, 0, at(f, "d"));
    f->rec[0].close_w = f->w;
    f->rec[0].close_on = WATCH_EVENT + 1;
    f->rec[0].closed = &f->closed;
    for (int k = 0; k < 20; k++) put(at(f, "d/f%d", k), "x");
    put(at(f, "../s/late"), "x");
    assert_true(wait_count(f, &f->closed, 1));
    assert_int_equal(f->closed, 1);
    assert_int_equal(f->rec[0].n[WATCH_EVENT], 1); /* none after watch_close */
    assert_int_equal(f->sent.n[WATCH_EVENT], 0);
    f->w = NULL; /* closed and freed; teardown checks uv_loop_close() == 0 */
}

static void test_close_calls_done(void **state)
{
    struct fx *f = *state;
    mkd(at(f, "d"));
    add(f, 0, at(f, "d"));
    put(at(f, "d/f"), "x"); /* pending, never delivered */
    watch_close(f->w, on_done, &f->closed);
    assert_int_equal(f->closed, 0); /* only in the close callback */
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(f->closed, 1);
    assert_int_equal(f->rec[0].n[WATCH_EVENT], 0);
    f->w = NULL;
}

static void test_idle_makes_no_wakeups(void **state)
{
    struct fx *f = *state;
    uv_timer_t t;
    int fired = 0, iterations = 0;
    mkd(at(f, "d"));
    mkd(at(f, "d/s"));
    add(f, 0, at(f, "d"));
    assert_int_equal(uv_timer_init(&f->loop, &t), 0);
    t.data = &fired;
    assert_int_equal(uv_timer_start(&t, on_deadline, 300, 0), 0);
    for (; iterations < 1000 && !fired; iterations++) uv_run(&f->loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_true(fired);
    assert_true(iterations <= 5); /* the timer's wakeup, not a busy loop */
    assert_int_equal(f->rec[0].n[WATCH_EVENT] + f->sent.n[WATCH_EVENT], 0);
    assert_int_equal(watch_events_total(f->w), 0);
}

static void test_bad_input(void **state)
{
    struct fx *f = *state;
    size_t idx = 7;
    assert_int_equal(watch_add(f->w, "", rec_cb, &f->rec[0], &idx), -EINVAL);
    assert_int_equal(watch_add(f->w, NULL, rec_cb, &f->rec[0], &idx), -EINVAL);
    assert_int_equal(watch_add(f->w, at(f, "x"), NULL, NULL, &idx), -EINVAL);
    assert_int_equal(idx, 7);
    assert_false(watch_is_root_present(f->w, 99));
    char longp[PATH_MAX + 16];
    memset(longp, 'a', sizeof longp - 1);
    longp[0] = '/';
    longp[sizeof longp - 1] = '\0';
    assert_int_equal(watch_add(f->w, longp, rec_cb, &f->rec[0], &idx), -ENAMETOOLONG);
    assert_int_equal(watch_wd_count(f->w), 1);
}

/* --- directories that cannot be watched (fs.inotify.max_user_watches) --- */

static const char *enospc_substr; /* paths containing it get ENOSPC */

static int fake_add_watch(int fd, const char *path, uint32_t mask)
{
    if (enospc_substr && strstr(path, enospc_substr)) {
        errno = ENOSPC;
        return -1;
    }
    return inotify_add_watch(fd, path, mask);
}

static void on_unw(void *ud, size_t n)
{
    int *v = ud;
    v[0]++;
    v[1] = (int)n;
}

static void test_unwatched_dirs_counted_and_rearmed(void **state)
{
    struct fx *f = *state;
    int unw[2] = {0, -1}; /* callbacks, last count */
    mkd(at(f, "d"));
    mkd(at(f, "d/ok"));
    mkd(at(f, "d/full1"));
    mkd(at(f, "d/full1/below"));
    watch_set_unwatched_cb(f->w, on_unw, unw);
    enospc_substr = "/full";
    watch__test_add_watch = fake_add_watch;
    add(f, 0, at(f, "d"));
    assert_true(watch_is_root_present(f->w, f->rec[0].root));
    assert_int_equal(watch_unwatched_count(f->w), 1); /* full1 (below it is not reached) */
    assert_int_equal(unw[0], 1);
    assert_int_equal(unw[1], 1);
    /* one created later fails too */
    mkd(at(f, "d/full2"));
    sync_events(f);
    assert_int_equal(watch_unwatched_count(f->w), 2);
    assert_int_equal(unw[1], 2);
    settle_reset(f, &f->rec[0]);
    /* changes in them are not seen */
    put(at(f, "d/full1/a"), "x");
    put(at(f, "d/full1/below/b"), "x");
    sync_events(f);
    assert_int_equal(f->rec[0].n[WATCH_EVENT], 0);
    /* still full: a re-arm changes nothing */
    watch_rearm(f->w);
    assert_int_equal(watch_unwatched_count(f->w), 2);
    assert_int_equal(f->rec[0].n[WATCH_EVENT], 0);
    /* the limit is raised: a re-arm watches both, each reported as changed */
    enospc_substr = NULL;
    watch_rearm(f->w);
    assert_int_equal(watch_unwatched_count(f->w), 0);
    assert_int_equal(unw[1], 0);
    assert_int_equal(f->rec[0].n[WATCH_EVENT], 2);
    /* and now seen, at every level */
    settle_reset(f, &f->rec[0]);
    put(at(f, "d/full1/below/b"), "y");
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 1));
    put(at(f, "d/full2/c"), "y");
    assert_true(wait_count(f, &f->rec[0].n[WATCH_EVENT], 2));
    /* a removed unwatched directory is no longer counted */
    enospc_substr = "/full";
    mkd(at(f, "d/full3"));
    sync_events(f);
    assert_int_equal(watch_unwatched_count(f->w), 1);
    assert_int_equal(rmdir(at(f, "d/full3")), 0);
    sync_events(f);
    assert_int_equal(watch_unwatched_count(f->w), 0);
    assert_int_equal(unw[1], 0);
    watch__test_add_watch = NULL;
    enospc_substr = NULL;
}

static void test_unwatched_root_rearmed(void **state)
{
    struct fx *f = *state;
    mkd(at(f, "r"));
    add(f, 0, at(f, "r"));
    /* the root is replaced while the limit is reached: it cannot be armed */
    enospc_substr = "/r";
    watch__test_add_watch = fake_add_watch;
    assert_int_equal(rename(at(f, "r"), at(f, "old")), 0);
    mkd(at(f, "r"));
    sync_events(f);
    assert_false(watch_is_root_present(f->w, f->rec[0].root));
    assert_int_equal(watch_root_wait_reason(f->w, f->rec[0].root), -EIO);
    assert_int_equal(watch_unwatched_count(f->w), 1);
    enospc_substr = NULL;
    watch_rearm(f->w);
    assert_true(watch_is_root_present(f->w, f->rec[0].root));
    assert_int_equal(watch_unwatched_count(f->w), 0);
    assert_true(f->rec[0].n[WATCH_ROOT_BACK] >= 1);
    watch__test_add_watch = NULL;
}

static void test_symlink_loop_root_reason(void **state)
{
    struct fx *f = *state;
    assert_int_equal(symlink("loop", at(f, "loop")), 0);
    size_t i = add(f, 0, at(f, "loop"));
    assert_false(watch_is_root_present(f->w, i));
    assert_int_equal(watch_root_wait_reason(f->w, i), -ELOOP);
    size_t j = add(f, 1, at(f, "nothing"));
    assert_int_equal(watch_root_wait_reason(f->w, j), -ENOENT);
    /* the loop is fixed: the root arrives */
    assert_int_equal(unlink(at(f, "loop")), 0);
    mkd(at(f, "loop"));
    assert_true(wait_count(f, &f->rec[0].n[WATCH_ROOT_BACK], 1));
    assert_int_equal(watch_root_wait_reason(f->w, i), 0);
}

static int fake_init_emfile(int flags)
{
    (void)flags;
    errno = EMFILE;
    return -1;
}

static void test_instance_limit_named(void **state)
{
    struct fx *f = *state;
    char logpath[PATH_MAX], logbuf[8192];
    struct watch *w2 = NULL;
    snprintf(logpath, sizeof logpath, "%s/log", f->base);
    int logfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(logfd >= 0);
    log_set_fd(logfd);
    watch__test_inotify_init1 = fake_init_emfile;
    assert_int_equal(watch_create(&f->loop, &w2), -EMFILE);
    watch__test_inotify_init1 = NULL;
    log_set_fd(2);
    close(logfd);
    assert_null(w2);
    read_log(logpath, logbuf, sizeof logbuf);
    assert_int_equal(count_substr(logbuf, "fs.inotify.max_user_instances"), 1);
}

int main(void)
{
    log_configure(RA_LOG_WARN, RA_LOG_FORMAT_TEXT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kubelet_swap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plain_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_new_subdirs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nested_existing_no_symlinks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlink_root, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlinked_dir_root_follows_link, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_root_atomic_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_root_plain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_root, setup, teardown),
        cmocka_unit_test_setup_teardown(test_root_under_a_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_root_deleted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_root_replaced_by_rename, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nested_roots_share_wds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_overflow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_overflow_gone_and_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_from_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_calls_done, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_makes_no_wakeups, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unwatched_dirs_counted_and_rearmed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unwatched_root_rearmed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlink_loop_root_reason, setup, teardown),
        cmocka_unit_test_setup_teardown(test_instance_limit_named, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
