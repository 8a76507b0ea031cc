/*
 * test_engine.c - the action state machine on a real loop with real exec
 * actions: rule matching, strongest action, commit only on success, retry
 * with backoff, a newer change superseding a pending retry, a failed reload
 * retried even after the content reverts, and clean shutdown.
 *
 * Manifests are built by hashing real temp directories. The exec action
 * appends a line to a file per run, so the test counts real process runs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config/config.h"
#include "agent/engine.h"
#include "base/log.h"
#include "hash/hash.h"

static char g_dir[256];

static void write_file(const char *name, const char *content)
{
    char p[512];
    snprintf(p, sizeof p, "%s/vol/%s", g_dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(content, f);
    fclose(f);
}

static void manifest(struct hash_manifest *m)
{
    char root[512];
    snprintf(root, sizeof root, "%s/vol", g_dir);
    const char *roots[] = {root};
    assert_int_equal(hash_compute(roots, 1, NULL, m, NULL), 0);
}

static int count_lines(const char *name)
{
    char p[512], buf[256];
    int n = 0;
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    while (fgets(buf, sizeof buf, f)) n++;
    fclose(f);
    return n;
}

/* Builds a config from flags. */
static void config(struct config *c, const char *const *args, int n)
{
    struct cfg_layer l;
    char err[512];
    int help;
    assert_int_equal(cfg_layer_init(&l, CFG_SRC_FLAG), 0);
    assert_int_equal(cfg_parse_args(n, (char **)args, &l, &help, err, sizeof err), 0);
    if (cfg_build(&l, NULL, c, err, sizeof err) != 0) fail_msg("cfg_build: %s", err);
    cfg_layer_free(&l);
}

static void stop_cb(uv_timer_t *t) { uv_stop(t->loop); }

static void run_ms(uv_loop_t *loop, uint64_t ms)
{
    uv_timer_t t;
    uv_timer_init(loop, &t);
    uv_timer_start(&t, stop_cb, ms, 0);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}

static int setup(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(g_dir, sizeof g_dir, "/tmp/ra-test-engine-%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s/vol", g_dir, g_dir);
    assert_int_equal(system(cmd), 0);
    log_configure(RA_LOG_ERROR, RA_LOG_FORMAT_TEXT);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_action_for_first_rule_wins(void **state)
{
    (void)state;
    struct config c;
    const char *args[] = {"--rule", "*.conf=signal", "--rule", "*/jvm.options=exec", "--rule",
                          "*=http", "--action", "none", "--process", "x", "--exec-command",
                          "true", "--http-url", "http://127.0.0.1:1/"};
    config(&c, args, 14);
    assert_int_equal(engine_action_for(&c, "/v/a.conf"), ACTION_SIGNAL);
    assert_int_equal(engine_action_for(&c, "/v/sub/dir/b.conf"), ACTION_SIGNAL); /* '*' crosses '/' */
    assert_int_equal(engine_action_for(&c, "/v/jvm.options"), ACTION_EXEC);
    assert_int_equal(engine_action_for(&c, "/v/other"), ACTION_HTTP);
    cfg_free(&c);
}

struct ctx {
    uv_loop_t loop;
    struct engine *e;
    struct config c;
};

static void ctx_open(struct ctx *x, const char *const *args, int n)
{
    config(&x->c, args, n);
    assert_int_equal(uv_loop_init(&x->loop), 0);
    assert_int_equal(engine_create(&x->loop, &x->c, &x->e), 0);
}

static void ctx_close(struct ctx *x)
{
    engine_close(x->e, NULL, NULL);
    uv_run(&x->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&x->loop), 0);
    cfg_free(&x->c);
}

static void test_exec_success_commits(void **state)
{
    (void)state;
    struct ctx x;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "sh -c 'echo run >> %s/runs'", g_dir);
    const char *args[] = {"--action", "exec", "--exec-command", cmd};
    struct hash_manifest m0 = {0}, m1 = {0};
    write_file("a", "1");
    manifest(&m0);
    ctx_open(&x, args, 4);
    engine_start(x.e, &m0);
    run_ms(&x.loop, 100);
    assert_int_equal(count_lines("runs"), 0); /* --on-start skip: nothing at start */
    write_file("a", "2");
    manifest(&m1);
    engine_observe(x.e, &m1);
    run_ms(&x.loop, 500);
    assert_int_equal(count_lines("runs"), 1);
    struct engine_status st;
    char hex[HASH_HEX_LEN + 1];
    engine_get_status(x.e, &st);
    hash_hex(m1.total, hex);
    assert_string_equal(st.applied, hex);
    assert_string_equal(st.last_result, "success");
    engine_observe(x.e, &m1); /* same content again: nothing */
    run_ms(&x.loop, 300);
    assert_int_equal(count_lines("runs"), 1);
    hash_manifest_free(&m0);
    hash_manifest_free(&m1);
    ctx_close(&x);
}

static void test_failure_retries_then_reverted_content_still_acted(void **state)
{
    (void)state;
    struct ctx x;
    char cmd[600];
    /* Fails while the file "fail" exists; records every run. */
    snprintf(cmd, sizeof cmd, "sh -c 'echo run >> %s/runs; test ! -e %s/fail'", g_dir, g_dir);
    const char *args[] = {"--action", "exec", "--exec-command", cmd, "--retry-initial", "50ms",
                          "--retry-max", "100ms"};
    struct hash_manifest m0 = {0}, m1 = {0};
    write_file("a", "1");
    manifest(&m0);
    write_file("a", "2");
    manifest(&m1);
    char failp[512];
    snprintf(failp, sizeof failp, "%s/fail", g_dir);
    FILE *f = fopen(failp, "w");
    assert_non_null(f);
    fclose(f);

    ctx_open(&x, args, 8);
    engine_start(x.e, &m0);
    engine_observe(x.e, &m1);
    run_ms(&x.loop, 600);
    int failed_runs = count_lines("runs");
    assert_true(failed_runs >= 3); /* retried with backoff, bounded by 100ms */
    struct engine_status st;
    engine_get_status(x.e, &st);
    assert_string_equal(st.last_result, "failure");
    assert_true(st.attempt >= 3);

    /* Content reverts to the applied state: the failed reload is still retried. */
    engine_observe(x.e, &m0);
    unlink(failp);
    run_ms(&x.loop, 400);
    engine_get_status(x.e, &st);
    assert_string_equal(st.last_result, "success");
    assert_int_equal(st.attempt, 0);
    char hex[HASH_HEX_LEN + 1];
    hash_hex(m0.total, hex);
    assert_string_equal(st.applied, hex);
    int after = count_lines("runs");
    run_ms(&x.loop, 300); /* and then it stays quiet */
    assert_int_equal(count_lines("runs"), after);
    hash_manifest_free(&m0);
    hash_manifest_free(&m1);
    ctx_close(&x);
}

static void test_on_start_reload_acts_once(void **state)
{
    (void)state;
    struct ctx x;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "sh -c 'echo run >> %s/runs'", g_dir);
    const char *args[] = {"--action", "exec", "--exec-command", cmd, "--on-start", "reload"};
    struct hash_manifest m0 = {0};
    write_file("a", "1");
    manifest(&m0);
    ctx_open(&x, args, 6);
    engine_start(x.e, &m0);
    run_ms(&x.loop, 500);
    assert_int_equal(count_lines("runs"), 1);
    hash_manifest_free(&m0);
    ctx_close(&x);
}

static void test_rules_pick_only_needed_action(void **state)
{
    (void)state;
    struct ctx x;
    char c1[600];
    snprintf(c1, sizeof c1, "sh -c 'echo run >> %s/runs'", g_dir);
    const char *args[] = {"--rule", "*.conf=exec", "--action", "none", "--exec-command", c1};
    struct hash_manifest m0 = {0}, m1 = {0}, m2 = {0};
    write_file("a.conf", "1");
    write_file("b.txt", "1");
    manifest(&m0);
    ctx_open(&x, args, 6);
    engine_start(x.e, &m0);
    write_file("b.txt", "2"); /* maps to none */
    manifest(&m1);
    engine_observe(x.e, &m1);
    run_ms(&x.loop, 300);
    assert_int_equal(count_lines("runs"), 0);
    write_file("a.conf", "2"); /* maps to exec */
    manifest(&m2);
    engine_observe(x.e, &m2);
    run_ms(&x.loop, 500);
    assert_int_equal(count_lines("runs"), 1);
    hash_manifest_free(&m0);
    hash_manifest_free(&m1);
    hash_manifest_free(&m2);
    ctx_close(&x);
}

static void test_close_waits_for_inflight(void **state)
{
    (void)state;
    struct ctx x;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "sh -c 'sleep 0.3; echo run >> %s/runs'", g_dir);
    const char *args[] = {"--action", "exec", "--exec-command", cmd};
    struct hash_manifest m0 = {0}, m1 = {0};
    write_file("a", "1");
    manifest(&m0);
    write_file("a", "2");
    manifest(&m1);
    ctx_open(&x, args, 4);
    engine_start(x.e, &m0);
    engine_observe(x.e, &m1);
    run_ms(&x.loop, 50); /* the command is running */
    ctx_close(&x);       /* returns only after it finished */
    assert_int_equal(count_lines("runs"), 1);
    hash_manifest_free(&m0);
    hash_manifest_free(&m1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_action_for_first_rule_wins),
        cmocka_unit_test_setup_teardown(test_exec_success_commits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failure_retries_then_reverted_content_still_acted,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_on_start_reload_acts_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rules_pick_only_needed_action, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_waits_for_inflight, setup, teardown),
    };
    return cmocka_run_group_tests_name("engine", tests, NULL, NULL);
}
