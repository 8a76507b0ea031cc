/*
 * test_monitor.c - the monitor's hashing off the loop, on a real loop with
 * real files (on /dev/shm when it is writable, so reading costs little):
 * the baseline runs on a worker while the loop turns, a change during a
 * worker hash drops the stale result and the final content is reported
 * once, and closing the monitor during a hash abandons it (the worker
 * finishes and frees on its own; ASan checks that nothing is used after it
 * is freed). Every wait is bounded by a deadline and an iteration cap.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "actions/action.h"
#include "run/monitor.h"
#include "base/log.h"
#include "tests/helpers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEADLINE_MS 30000
#define BIG (256u << 20)

struct fx {
    uv_loop_t loop;
    char base[64];
    char root[96];
    struct monitor *m;
    int baselines, changes, closed;
    unsigned char last[HASH_LEN];
    int ticks_while_hashing; /* 5 ms timer ticks seen while a worker hashed */
};

static void on_tick(uv_timer_t *t)
{
    struct fx *f = t->data;
    if (f->m && monitor_hashing(f->m)) f->ticks_while_hashing++;
}

static void on_change(void *ud, const struct hash_manifest *cur, const struct hash_diff *d)
{
    struct fx *f = ud;
    (void)d;
    f->changes++;
    memcpy(f->last, cur->total, HASH_LEN);
}

static void on_baseline(void *ud, const struct hash_manifest *base)
{
    struct fx *f = ud;
    f->baselines++;
    memcpy(f->last, base->total, HASH_LEN);
}

static void on_closed(void *ud) { ((struct fx *)ud)->closed++; }

static int hashing(void *arg)
{
    struct fx *f = arg;
    return f->m && monitor_hashing(f->m);
}

static void on_nudge(uv_timer_t *t) { (void)t; }

/* Runs the loop until a worker hashes (or the deadline passes). A 1 ms
 * timer makes each iteration return soon: once a job starts, the loop would
 * otherwise sleep until the job is done. */
static int run_until_hashing(struct fx *f)
{
    uv_timer_t nudge;
    int r;
    assert_int_equal(uv_timer_init(&f->loop, &nudge), 0);
    assert_int_equal(uv_timer_start(&nudge, on_nudge, 1, 1), 0);
    r = run_until(&f->loop, hashing, f, DEADLINE_MS);
    uv_close((uv_handle_t *)&nudge, NULL);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    return r;
}

static void put(const char *dir, const char *name, const char *text, size_t size)
{
    char tmp[PATH_MAX], dst[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/../stage-%s", dir, name);
    snprintf(dst, sizeof dst, "%s/%s", dir, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    static char block[1 << 20];
    size_t tl = strlen(text);
    for (size_t i = 0; i < sizeof block; i++) block[i] = text[i % tl];
    for (size_t left = size; left > 0;) {
        size_t n = left < sizeof block ? left : sizeof block;
        assert_int_equal(write(fd, block, n), (ssize_t)n);
        left -= n;
    }
    assert_int_equal(close(fd), 0);
    assert_int_equal(rename(tmp, dst), 0); /* one event, whole content */
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(make_tmpdir(f->base, sizeof f->base, "test_monitor", 1), 0);
    snprintf(f->root, sizeof f->root, "%s/vol", f->base);
    assert_int_equal(mkdir(f->root, 0755), 0);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    log_configure(RA_LOG_WARN, RA_LOG_FORMAT_TEXT);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    if (f->m) monitor_close(f->m, on_closed, f);
    for (int i = 0; i < 1000 && uv_run(&f->loop, UV_RUN_NOWAIT); i++) {
    }
    assert_int_equal(uv_loop_close(&f->loop), 0);
    assert_int_equal(remove_tmpdir(f->base), 0);
    free(f);
    return 0;
}

static void start(struct fx *f)
{
    const char *roots[] = {f->root};
    struct monitor_opts o = {
        .roots = roots, .nroots = 1, .debounce_ns = 20000000, .baseline = on_baseline};
    assert_int_equal(monitor_start(&f->loop, &o, on_change, f, &f->m), 0);
}

static void expect_hash_of_root(struct fx *f)
{
    const char *roots[] = {f->root};
    struct hash_manifest want = {0};
    assert_int_equal(hash_compute(roots, 1, NULL, &want, NULL), 0);
    assert_memory_equal(f->last, want.total, HASH_LEN);
    hash_manifest_free(&want);
}

/* The baseline of a large tree is hashed by a worker: the loop turns
 * meanwhile, and there is no baseline until the hash is done. */
static void test_baseline_off_the_loop(void **state)
{
    struct fx *f = *state;
    put(f->root, "big", "b", BIG);
    uv_timer_t tick;
    start(f);
    assert_false(monitor_has_baseline(f->m));
    assert_true(run_until_hashing(f));
    assert_false(monitor_is_ready(f->m));
    assert_int_equal(uv_timer_init(&f->loop, &tick), 0);
    tick.data = f;
    assert_int_equal(uv_timer_start(&tick, on_tick, 5, 5), 0);
    assert_true(run_until_count(&f->loop, &f->baselines, 1, DEADLINE_MS));
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(&f->loop, UV_RUN_NOWAIT); /* the handle is on this stack */
    /* 256 MiB take far more than 15 ms to hash: the loop ran its timers */
    assert_true(f->ticks_while_hashing >= 3);
    assert_true(monitor_is_ready(f->m));
    assert_int_equal(f->changes, 0);
    expect_hash_of_root(f);
}

/* A small file changes while the big one is hashed: the stale result is
 * dropped and the final content is reported once. */
static void test_change_during_hash(void **state)
{
    struct fx *f = *state;
    put(f->root, "a", "1", 10);
    put(f->root, "big", "b", BIG);
    start(f);
    assert_true(run_until_count(&f->loop, &f->baselines, 1, DEADLINE_MS));
    put(f->root, "big", "c", BIG);
    assert_true(run_until_hashing(f));
    put(f->root, "a", "2", 10);
    assert_true(run_until_count(&f->loop, &f->changes, 1, DEADLINE_MS));
    /* nothing more follows: let any further evaluation run out */
    run_for(&f->loop, 500);
    assert_false(monitor_hashing(f->m));
    assert_int_equal(f->changes, 1);
    assert_int_equal(monitor_changes(f->m), 1);
    expect_hash_of_root(f);
}

/* The test's own classification, independent of config/rules: *.swp left
 * out, *.pem (and, with conf_rolls, *.conf) in manifest.sub. */
static int g_conf_rolls;
static unsigned by_suffix(void *ud, const char *path)
{
    (void)ud;
    size_t n = strlen(path);
    if (n > 4 && strcmp(path + n - 4, ".swp") == 0) return 0;
    int sub = (n > 4 && strcmp(path + n - 4, ".pem") == 0) ||
              (g_conf_rolls && n > 5 && strcmp(path + n - 5, ".conf") == 0);
    return HASH_CLASS_MAIN | (sub ? HASH_CLASS_SUB : 0);
}

static void expect_classes(struct fx *f, size_t n, size_t nsub)
{
    const char *roots[] = {f->root};
    struct hash_opts ho = {.select = by_suffix};
    struct hash_manifest want = {0};
    const struct hash_manifest *cur = monitor_current(f->m);
    assert_int_equal(hash_compute(roots, 1, &ho, &want, NULL), 0);
    assert_int_equal(cur->n, n);
    assert_int_equal(cur->nsub, nsub);
    assert_memory_equal(cur->total, want.total, HASH_LEN);
    assert_memory_equal(cur->sub, want.sub, HASH_LEN);
    hash_manifest_free(&want);
}

/* The monitor classifies files with its copy of the one path -> action
 * value (config/rules.h): an ignored file is not in the content, a
 * rollout-class file feeds manifest.sub; on the baseline's worker thread
 * and inline, and monitor_set_rules applies to the hashes after it. */
static void test_rules_classify_files(void **state)
{
    struct fx *f = *state;
    put(f->root, "a.conf", "a", 10);
    put(f->root, "tls.pem", "p", 10);
    put(f->root, "x.swp", "s", 10);
    struct path_rules r;
    path_rules_init(&r, ACTION_SIGNAL);
    path_rules_add_ignore(&r, "*.swp");
    path_rules_add_glob(&r, "*.pem", ACTION_ROLLOUT);
    const char *roots[] = {f->root};
    struct monitor_opts o = {
        .roots = roots, .nroots = 1, .debounce_ns = 20000000, .baseline = on_baseline, .rules = &r};
    assert_int_equal(monitor_start(&f->loop, &o, on_change, f, &f->m), 0);
    path_rules_free(&r); /* copied */
    assert_true(run_until_count(&f->loop, &f->baselines, 1, DEADLINE_MS));
    g_conf_rolls = 0;
    expect_classes(f, 2, 1);
    path_rules_init(&r, ACTION_ROLLOUT); /* now everything not ignored rolls */
    path_rules_add_ignore(&r, "*.swp");
    monitor_set_rules(f->m, &r);
    path_rules_free(&r);
    put(f->root, "a.conf", "b", 10);
    put(f->root, "x.swp", "t", 10); /* ignored: not part of the change */
    assert_true(run_until_count(&f->loop, &f->changes, 1, DEADLINE_MS));
    g_conf_rolls = 1;
    expect_classes(f, 2, 2);
}

static int threads(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    assert_non_null(d);
    for (struct dirent *de; (de = readdir(d));) n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Closing the monitor during a hash does not wait for it: the close
 * completes on the loop, and the abandoned worker ends on its own. */
static void test_close_abandons_hash(void **state)
{
    struct fx *f = *state;
    put(f->root, "big", "b", BIG);
    put(f->root, "big2", "d", BIG);
    int before = threads();
    start(f);
    assert_true(run_until_hashing(f));
    assert_int_equal(threads(), before + 1);
    monitor_close(f->m, on_closed, f);
    f->m = NULL;
    assert_true(run_until_count(&f->loop, &f->closed, 1, DEADLINE_MS));
    assert_int_equal(f->baselines, 0);
    /* the worker stops at its next file; bounded wait for it to exit */
    for (int i = 0; i < 300 && threads() > before; i++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(threads(), before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_baseline_off_the_loop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_change_during_hash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_abandons_hash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rules_classify_files, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
