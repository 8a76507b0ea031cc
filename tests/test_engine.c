/*
 * test_engine.c - the action state machine on a real loop.
 *
 * With real exec actions: rule matching, commit only on success, retry with
 * backoff, a failed reload retried even after the content reverts, and
 * clean shutdown. The exec action appends a line to a file per run, so the
 * test counts real process runs.
 *
 * With a fake action registered through the table of actions
 * (action__register_test, the same rows the real actions use): the
 * strongest action wins, retry after failure with backoff (commit only on
 * success), a newer change supersedes a pending retry, an attempt owns its
 * parameters across a live configuration change, and close while an
 * attempt is in flight (exactly one result, the loop closes clean).
 *
 * Manifests are built by hashing real temp directories.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "config/config.h"
#include "actions/action.h"
#include "run/engine.h"
#include "base/backoff.h"
#include "base/log.h"
#include "hash/hash.h"
#include "tests/helpers.h"

static char g_dir[256];

/* Writes content as the file name of the watched volume. */
static void put_file(const char *name, const char *content)
{
    char p[512];
    snprintf(p, sizeof p, "%s/vol/%s", g_dir, name);
    write_file(p, content);
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

static int setup(void **state)
{
    char vol[300];
    (void)state;
    assert_int_equal(make_tmpdir(g_dir, sizeof g_dir, "test_engine", 0), 0);
    snprintf(vol, sizeof vol, "%s/vol", g_dir);
    assert_int_equal(mkdir(vol, 0755), 0);
    log_configure(RA_LOG_ERROR, RA_LOG_FORMAT_TEXT);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return remove_tmpdir(g_dir);
}

static void test_action_for_first_rule_wins(void **state)
{
    (void)state;
    struct config c;
    const char *args[] = {
        "--rule",         "*.conf=signal", "--rule",     "*/jvm.options=exec", "--rule",
        "*=http",         "--action",      "none",       "--process",          "x",
        "--exec-command", "true",          "--http-url", "http://127.0.0.1:1/"};
    config(&c, args, 14);
    assert_int_equal(cfg_action_for(&c, "/v/a.conf"), ACTION_SIGNAL);
    assert_int_equal(cfg_action_for(&c, "/v/sub/dir/b.conf"), ACTION_SIGNAL); /* '*' crosses '/' */
    assert_int_equal(cfg_action_for(&c, "/v/jvm.options"), ACTION_EXEC);
    assert_int_equal(cfg_action_for(&c, "/v/other"), ACTION_HTTP);
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
    put_file("a", "1");
    manifest(&m0);
    ctx_open(&x, args, 4);
    engine_start(x.e, &m0);
    run_for(&x.loop, 100);
    assert_int_equal(count_lines("runs"), 0); /* --on-start skip: nothing at start */
    put_file("a", "2");
    manifest(&m1);
    engine_observe(x.e, &m1);
    run_for(&x.loop, 500);
    assert_int_equal(count_lines("runs"), 1);
    struct engine_status st;
    char hex[HASH_HEX_LEN + 1];
    engine_get_status(x.e, &st);
    hash_hex(m1.total, hex);
    assert_string_equal(st.applied, hex);
    assert_string_equal(st.last_result, "success");
    engine_observe(x.e, &m1); /* same content again: nothing */
    run_for(&x.loop, 300);
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
    const char *args[] = {"--action",        "exec", "--exec-command", cmd,
                          "--retry-initial", "50ms", "--retry-max",    "100ms"};
    struct hash_manifest m0 = {0}, m1 = {0};
    put_file("a", "1");
    manifest(&m0);
    put_file("a", "2");
    manifest(&m1);
    char failp[512];
    snprintf(failp, sizeof failp, "%s/fail", g_dir);
    FILE *f = fopen(failp, "w");
    assert_non_null(f);
    fclose(f);

    ctx_open(&x, args, 8);
    engine_start(x.e, &m0);
    engine_observe(x.e, &m1);
    run_for(&x.loop, 600);
    int failed_runs = count_lines("runs");
    assert_true(failed_runs >= 3); /* retried with backoff, bounded by 100ms */
    struct engine_status st;
    engine_get_status(x.e, &st);
    assert_string_equal(st.last_result, "failure");
    assert_true(st.attempt >= 3);

    /* Content reverts to the applied state: the failed reload is still retried. */
    engine_observe(x.e, &m0);
    unlink(failp);
    run_for(&x.loop, 400);
    engine_get_status(x.e, &st);
    assert_string_equal(st.last_result, "success");
    assert_int_equal(st.attempt, 0);
    char hex[HASH_HEX_LEN + 1];
    hash_hex(m0.total, hex);
    assert_string_equal(st.applied, hex);
    int after = count_lines("runs");
    run_for(&x.loop, 300); /* and then it stays quiet */
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
    put_file("a", "1");
    manifest(&m0);
    ctx_open(&x, args, 6);
    engine_start(x.e, &m0);
    run_for(&x.loop, 500);
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
    put_file("a.conf", "1");
    put_file("b.txt", "1");
    manifest(&m0);
    ctx_open(&x, args, 6);
    engine_start(x.e, &m0);
    put_file("b.txt", "2"); /* maps to none */
    manifest(&m1);
    engine_observe(x.e, &m1);
    run_for(&x.loop, 300);
    assert_int_equal(count_lines("runs"), 0);
    put_file("a.conf", "2"); /* maps to exec */
    manifest(&m2);
    engine_observe(x.e, &m2);
    run_for(&x.loop, 500);
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
    put_file("a", "1");
    manifest(&m0);
    put_file("a", "2");
    manifest(&m1);
    ctx_open(&x, args, 4);
    engine_start(x.e, &m0);
    engine_observe(x.e, &m1);
    run_for(&x.loop, 50); /* the command is running */
    ctx_close(&x);        /* returns only after it finished */
    assert_int_equal(count_lines("runs"), 1);
    hash_manifest_free(&m0);
    hash_manifest_free(&m1);
}

/* ---- the fake action ---- */

/* What the fake actions did, per action. */
static struct fake {
    int starts[ACTION__COUNT];
    int results[ACTION__COUNT]; /* results delivered to the engine */
    int aborts[ACTION__COUNT];
    int fail_left;         /* the next runs that fail */
    int permanent;         /* failures say a retry cannot help */
    uint64_t delay_ms;     /* 0: complete inside start; else via a uv timer */
    uint64_t start_ms[16]; /* loop time of the first starts of any action */
    int nstart_ms;
    char seen_url[256];       /* p->http_url as read when a run completed */
    struct fake_run *pending; /* runs waiting for their timer */
} F;

struct fake_run {
    uv_timer_t t;
    enum action a;
    int fail;
    const struct action_params *p;
    action_done done;
    void *ud;
    struct fake_run *next;
};

static void fake_finish(enum action a, int fail, const struct action_params *p, action_done done,
                        void *ud)
{
    struct action_result r = {fail ? -EIO : 0, fail && F.permanent, fail ? "fake failure" : NULL,
                              0};
    if (a == ACTION_HTTP) snprintf(F.seen_url, sizeof F.seen_url, "%s", p->http_url);
    F.results[a]++;
    done(ud, a, &r);
}

static void fake_run_closed(uv_handle_t *h) { free(h->data); }

static void fake_unlink(struct fake_run *r)
{
    for (struct fake_run **pp = &F.pending; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            return;
        }
}

static void fake_timer(uv_timer_t *t)
{
    struct fake_run *r = t->data;
    fake_unlink(r);
    uv_close((uv_handle_t *)&r->t, fake_run_closed);
    fake_finish(r->a, r->fail, r->p, r->done, r->ud);
}

static void fake_start(enum action a, struct action_env *env, const struct action_params *p,
                       action_done done, void *ud)
{
    int fail = F.fail_left > 0;
    if (fail) F.fail_left--;
    F.starts[a]++;
    if (F.nstart_ms < 16) F.start_ms[F.nstart_ms++] = uv_now(env->loop);
    if (!F.delay_ms) {
        fake_finish(a, fail, p, done, ud);
        return;
    }
    struct fake_run *r = calloc(1, sizeof *r);
    assert_non_null(r);
    *r = (struct fake_run){.a = a, .fail = fail, .p = p, .done = done, .ud = ud, .next = F.pending};
    F.pending = r;
    uv_timer_init(env->loop, &r->t);
    r->t.data = r;
    uv_timer_start(&r->t, fake_timer, F.delay_ms, 0);
}

/* Ends every pending run of a now (as the rollout's abort does). */
static void fake_abort(enum action a)
{
    F.aborts[a]++;
    for (struct fake_run *r = F.pending, *next; r; r = next) {
        next = r->next;
        if (r->a != a) continue;
        fake_unlink(r);
        uv_close((uv_handle_t *)&r->t, fake_run_closed);
        fake_finish(a, 1, r->p, r->done, r->ud);
    }
}

#define FAKE(name, A)                                                                              \
    static void fake_start_##name(struct action_env *env, const struct action_params *p,           \
                                  action_done done, void *ud)                                      \
    {                                                                                              \
        fake_start(A, env, p, done, ud);                                                           \
    }
FAKE(signal, ACTION_SIGNAL)
FAKE(http, ACTION_HTTP)
FAKE(restart, ACTION_RESTART)
FAKE(rollout, ACTION_ROLLOUT)

static void fake_abort_rollout(struct action_env *env)
{
    (void)env;
    fake_abort(ACTION_ROLLOUT);
}

/* signal, http and restart finish or time out on their own; rollout aborts */
static const struct action_ops FAKE_SIGNAL = {fake_start_signal, NULL, NULL};
static const struct action_ops FAKE_HTTP = {fake_start_http, NULL, NULL};
static const struct action_ops FAKE_RESTART = {fake_start_restart, NULL, NULL};
static const struct action_ops FAKE_ROLLOUT = {fake_start_rollout, fake_abort_rollout, NULL};

static int fake_setup(void **state)
{
    memset(&F, 0, sizeof F);
    action__register_test(ACTION_SIGNAL, &FAKE_SIGNAL);
    action__register_test(ACTION_HTTP, &FAKE_HTTP);
    action__register_test(ACTION_RESTART, &FAKE_RESTART);
    action__register_test(ACTION_ROLLOUT, &FAKE_ROLLOUT);
    ra_rng_seed(ra_rng_process(), 1); /* reproducible retry jitter */
    return setup(state);
}

static int fake_teardown(void **state)
{
    for (int a = 0; a < ACTION__COUNT; a++) action__register_test((enum action)a, NULL);
    assert_null(F.pending);
    return teardown(state);
}

/* Rules per extension, and what each action needs to validate; restart
 * is not held (--restart-delay 0) unless a test says otherwise. */
#define FAKE_ARGS                                                                                  \
    "--rule", "*.sig=signal", "--rule", "*.http=http", "--rule", "*.rst=restart", "--action",      \
        "none", "--process", "x", "--http-url", "http://127.0.0.1:1/a", "--restart-delay", "0"
#define NARGS(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void applied_is(struct engine *e, const struct hash_manifest *m)
{
    struct engine_status st;
    char hex[HASH_HEX_LEN + 1];
    engine_get_status(e, &st);
    hash_hex(m->total, hex);
    assert_string_equal(st.applied, hex);
}

static void test_fake_strongest_action_wins(void **state)
{
    (void)state;
    struct ctx x;
    const char *args[] = {FAKE_ARGS};
    struct hash_manifest m0 = {0}, m1 = {0}, m2 = {0};
    put_file("a.sig", "1");
    put_file("b.http", "1");
    put_file("c.rst", "1");
    put_file("d.txt", "1");
    manifest(&m0);
    ctx_open(&x, args, NARGS(args));
    F.delay_ms = 20; /* http and signal finish later, on a timer */
    engine_start(x.e, &m0);
    /* signal and http are equally strong: both run, once; none is dropped */
    put_file("a.sig", "2");
    put_file("b.http", "2");
    put_file("d.txt", "2");
    manifest(&m1);
    engine_observe(x.e, &m1);
    run_for(&x.loop, 200);
    assert_int_equal(F.starts[ACTION_SIGNAL], 1);
    assert_int_equal(F.starts[ACTION_HTTP], 1);
    assert_int_equal(F.starts[ACTION_RESTART], 0);
    applied_is(x.e, &m1);
    /* restart is stronger than signal: only restart runs (synchronously) */
    F.delay_ms = 0;
    put_file("a.sig", "3");
    put_file("c.rst", "2");
    manifest(&m2);
    engine_observe(x.e, &m2);
    run_for(&x.loop, 100);
    assert_int_equal(F.starts[ACTION_RESTART], 1);
    assert_int_equal(F.starts[ACTION_SIGNAL], 1);
    assert_int_equal(F.results[ACTION_RESTART], 1);
    applied_is(x.e, &m2);
    ctx_close(&x);
    hash_manifest_free(&m0);
    hash_manifest_free(&m1);
    hash_manifest_free(&m2);
}

/* A file under an --env-watch root takes --env-action before any rule:
 * with env-action restart, a change there restarts (never the rule's
 * signal); with none, it only records the change. */
static void test_fake_env_root_takes_env_action(void **state)
{
    (void)state;
    struct ctx x;
    char env[512], cmd[600];
    snprintf(env, sizeof env, "%s/vol/env", g_dir);
    snprintf(cmd, sizeof cmd, "mkdir -p %s", env);
    assert_int_equal(system(cmd), 0);
    const char *args[] = {FAKE_ARGS, "--env-watch", env, "--env-action", "restart"};
    struct hash_manifest m0 = {0}, m1 = {0}, m2 = {0}, m3 = {0};
    put_file("env/KEY.sig", "1");
    put_file("a.sig", "1");
    manifest(&m0);
    ctx_open(&x, args, NARGS(args));
    engine_start(x.e, &m0);
    put_file("env/KEY.sig", "2"); /* *.sig=signal, but env wins: restart */
    manifest(&m1);
    engine_observe(x.e, &m1);
    run_for(&x.loop, 100);
    assert_int_equal(F.starts[ACTION_RESTART], 1);
    assert_int_equal(F.starts[ACTION_SIGNAL], 0);
    applied_is(x.e, &m1);
    put_file("a.sig", "2"); /* outside env: the rule */
    manifest(&m2);
    engine_observe(x.e, &m2);
    run_for(&x.loop, 100);
    assert_int_equal(F.starts[ACTION_SIGNAL], 1);
    assert_int_equal(F.starts[ACTION_RESTART], 1);
    ctx_close(&x);
    /* env-action none: the change is recorded, nothing runs */
    const char *args2[] = {FAKE_ARGS, "--env-watch", env, "--env-action", "none"};
    ctx_open(&x, args2, NARGS(args2));
    engine_start(x.e, &m2);
    put_file("env/KEY.sig", "3");
    manifest(&m3);
    engine_observe(x.e, &m3);
    run_for(&x.loop, 100);
    assert_int_equal(F.starts[ACTION_SIGNAL], 1);
    assert_int_equal(F.starts[ACTION_RESTART], 1);
    applied_is(x.e, &m3);
    ctx_close(&x);
    hash_manifest_free(&m0);
    hash_manifest_free(&m1);
    hash_manifest_free(&m2);
    hash_manifest_free(&m3);
}

static void test_fake_retry_with_backoff_commits_on_success(void **state)
{
    (void)state;
    struct ctx x;
    const char *args[] = {FAKE_ARGS, "--retry-initial", "60ms", "--retry-max", "120ms"};
    struct hash_manifest m0 = {0}, m1 = {0};
    struct engine_status st;
    put_file("a.sig", "1");
    manifest(&m0);
    put_file("a.sig", "2");
    manifest(&m1);
    ctx_open(&x, args, NARGS(args));
    engine_start(x.e, &m0);
    F.fail_left = 2;
    engine_observe(x.e, &m1);
    /* the first attempt failed at once: nothing committed, a retry pending */
    assert_int_equal(F.starts[ACTION_SIGNAL], 1);
    engine_get_status(x.e, &st);
    assert_string_equal(st.last_result, "failure");
    assert_true(st.retry_pending);
    assert_true(st.retry_in_ms <= 60);
    applied_is(x.e, &m0);
    run_for(&x.loop, 1000);
    /* two failures, then success: committed, no more attempts */
    assert_int_equal(F.starts[ACTION_SIGNAL], 3);
    applied_is(x.e, &m1);
    engine_get_status(x.e, &st);
    assert_string_equal(st.last_result, "success");
    assert_false(st.retry_pending);
    assert_int_equal(st.attempt, 0);
    /* backoff with equal jitter: at least half the delay between attempts
     * (60ms then 120ms); no upper bound asserted on a loaded machine */
    assert_true(F.start_ms[1] - F.start_ms[0] >= 30);
    assert_true(F.start_ms[2] - F.start_ms[1] >= 60);
    ctx_close(&x);
    hash_manifest_free(&m0);
    hash_manifest_free(&m1);
}

static void test_fake_newer_change_supersedes_pending_retry(void **state)
{
    (void)state;
    struct ctx x;
    const char *args[] = {FAKE_ARGS, "--retry-initial", "1h", "--retry-max", "1h"};
    struct hash_manifest m0 = {0}, m1 = {0}, m2 = {0};
    struct engine_status st;
    put_file("a.sig", "1");
    manifest(&m0);
    put_file("a.sig", "2");
    manifest(&m1);
    put_file("a.sig", "3");
    manifest(&m2);
    ctx_open(&x, args, NARGS(args));
    engine_start(x.e, &m0);
    F.fail_left = 1;
    engine_observe(x.e, &m1);
    run_for(&x.loop, 50);
    engine_get_status(x.e, &st);
    assert_true(st.retry_pending); /* in half an hour at the earliest */
    assert_int_equal(F.starts[ACTION_SIGNAL], 1);
    engine_observe(x.e, &m2); /* supersedes the retry: attempted now, on m2 */
    run_for(&x.loop, 50);
    assert_int_equal(F.starts[ACTION_SIGNAL], 2);
    applied_is(x.e, &m2);
    engine_get_status(x.e, &st);
    assert_false(st.retry_pending);
    assert_string_equal(st.last_result, "success");
    ctx_close(&x);
    hash_manifest_free(&m0);
    hash_manifest_free(&m1);
    hash_manifest_free(&m2);
}

static void test_fake_attempt_owns_its_parameters(void **state)
{
    (void)state;
    struct ctx x;
    const char *args[] = {FAKE_ARGS};
    const char *args2[] = {"--rule", "*.http=http", "--action",
                           "none",   "--http-url",  "http://127.0.0.1:2/changed"};
    struct hash_manifest m0 = {0}, m1 = {0};
    put_file("b.http", "1");
    manifest(&m0);
    put_file("b.http", "2");
    manifest(&m1);
    ctx_open(&x, args, NARGS(args));
    F.delay_ms = 100;
    engine_start(x.e, &m0);
    engine_observe(x.e, &m1);
    run_for(&x.loop, 20);
    assert_int_equal(F.starts[ACTION_HTTP], 1);
    /* a live configuration change while the request is in flight */
    cfg_free(&x.c);
    config(&x.c, args2, 6);
    engine_config_changed(x.e);
    run_for(&x.loop, 300);
    assert_int_equal(F.results[ACTION_HTTP], 1);
    assert_string_equal(F.seen_url, "http://127.0.0.1:1/a"); /* the attempt's own copy */
    applied_is(x.e, &m1);
    ctx_close(&x);
    hash_manifest_free(&m0);
    hash_manifest_free(&m1);
}

static int g_closed;
static void on_engine_closed(void *ud)
{
    (void)ud;
    g_closed++;
}

/* Closes the engine with an attempt of action `a` in flight. */
static void close_in_flight(const char *ext, enum action a, const char *const *args, int n)
{
    struct ctx x;
    struct hash_manifest m0 = {0}, m1 = {0};
    char name[32];
    snprintf(name, sizeof name, "f.%s", ext);
    put_file(name, "1");
    manifest(&m0);
    put_file(name, "2");
    manifest(&m1);
    ctx_open(&x, args, n);
    F.delay_ms = 200;
    g_closed = 0;
    engine_start(x.e, &m0);
    engine_observe(x.e, &m1);
    run_for(&x.loop, 20);
    assert_int_equal(F.starts[a], 1);
    assert_int_equal(F.results[a], 0);
    engine_close(x.e, on_engine_closed, NULL);
    uv_run(&x.loop, UV_RUN_DEFAULT);   /* returns once every handle closed */
    assert_int_equal(F.results[a], 1); /* exactly one result */
    assert_int_equal(F.starts[a], 1);  /* and no new attempt while closing */
    assert_int_equal(g_closed, 1);
    assert_int_equal(uv_loop_close(&x.loop), 0);
    cfg_free(&x.c);
    hash_manifest_free(&m0);
    hash_manifest_free(&m1);
}

static void test_fake_close_while_in_flight(void **state)
{
    (void)state;
    const char *args[] = {FAKE_ARGS};
    /* no abort: the run finishes on its own, then the engine closes */
    close_in_flight("sig", ACTION_SIGNAL, args, NARGS(args));
    assert_int_equal(F.aborts[ACTION_SIGNAL], 0);
}

static void test_fake_close_aborts_rollout_in_flight(void **state)
{
    (void)state;
    const char *args[] = {"--action", "rollout", "--on-start", "skip"};
    /* with an abort: the run ends inside engine_close, synchronously */
    close_in_flight("any", ACTION_ROLLOUT, args, 4);
    assert_int_equal(F.aborts[ACTION_ROLLOUT], 1);
}

/* --restart-delay: a restart waits the delay after the change that first
 * needs it, then acts once on the content of its time (the changes that
 * came meanwhile cost the same restart); in-place actions are not held. */
static void test_fake_restart_delay_coalesces(void **state)
{
    (void)state;
    struct ctx x;
    const char *args[] = {FAKE_ARGS, "--restart-delay", "200ms"};
    struct hash_manifest m0 = {0}, m1 = {0}, m2 = {0}, m3 = {0};
    put_file("a.sig", "1");
    put_file("c.rst", "1");
    manifest(&m0);
    ctx_open(&x, args, NARGS(args));
    engine_start(x.e, &m0);
    uv_update_time(&x.loop);
    uint64_t t0 = uv_now(&x.loop);
    put_file("c.rst", "2");
    manifest(&m1);
    engine_observe(x.e, &m1);
    run_for(&x.loop, 60);
    assert_int_equal(F.starts[ACTION_RESTART], 0); /* held */
    put_file("c.rst", "3");
    put_file("a.sig", "2");
    manifest(&m2);
    engine_observe(x.e, &m2); /* a second change while held: still one restart */
    run_for(&x.loop, 400);
    assert_int_equal(F.starts[ACTION_RESTART], 1);
    assert_int_equal(F.starts[ACTION_SIGNAL], 0); /* restart is the stronger */
    assert_true(F.start_ms[0] >= t0 + 200);       /* from the first change, not the last */
    applied_is(x.e, &m2);
    /* signal alone is never held */
    put_file("a.sig", "3");
    manifest(&m3);
    engine_observe(x.e, &m3);
    run_for(&x.loop, 30);
    assert_int_equal(F.starts[ACTION_SIGNAL], 1);
    applied_is(x.e, &m3);
    ctx_close(&x);
    hash_manifest_free(&m0);
    hash_manifest_free(&m1);
    hash_manifest_free(&m2);
    hash_manifest_free(&m3);
}

/* Runs the loop until the fake restart started n times (bounded: 5 s). */
static void run_until_restarts(uv_loop_t *loop, int n)
{
    for (int i = 0; i < 100 && F.starts[ACTION_RESTART] < n; i++) run_for(loop, 50);
    assert_int_equal(F.starts[ACTION_RESTART], n);
}

/* Issue 24 G12: after a failed restart, a new change neither restarts at
 * once nor cuts the retry's backoff short: the next restart waits
 * --restart-delay from the first change after the failure, and the backoff
 * from the failure; the changes meanwhile cost that one restart. */
static void test_fake_restart_failure_keeps_delay_and_backoff(void **state)
{
    (void)state;
    struct ctx x;
    const char *args[] = {FAKE_ARGS, "--restart-delay", "300ms", "--retry-initial",
                          "400ms",   "--retry-max",     "400ms"};
    struct hash_manifest m0 = {0}, m1 = {0}, m2 = {0}, m3 = {0};
    put_file("c.rst", "1");
    manifest(&m0);
    ctx_open(&x, args, NARGS(args));
    engine_start(x.e, &m0);
    F.fail_left = 1;
    put_file("c.rst", "2");
    manifest(&m1);
    engine_observe(x.e, &m1);
    run_until_restarts(&x.loop, 1); /* held 300 ms, then fails at once */
    assert_int_equal(F.results[ACTION_RESTART], 1);
    uv_update_time(&x.loop);
    uint64_t tf = uv_now(&x.loop);
    put_file("c.rst", "3");
    manifest(&m2);
    engine_observe(x.e, &m2);
    run_for(&x.loop, 100);
    assert_int_equal(F.starts[ACTION_RESTART], 1); /* not at once */
    put_file("c.rst", "4");
    manifest(&m3);
    engine_observe(x.e, &m3);
    run_until_restarts(&x.loop, 2);
    assert_true(F.start_ms[1] >= tf + 300);            /* --restart-delay */
    assert_true(F.start_ms[1] >= F.start_ms[0] + 200); /* the backoff (equal jitter: >= 1/2) */
    run_for(&x.loop, 500);
    assert_int_equal(F.starts[ACTION_RESTART], 2); /* one restart for the three changes */
    applied_is(x.e, &m3);
    ctx_close(&x);
    hash_manifest_free(&m0);
    hash_manifest_free(&m1);
    hash_manifest_free(&m2);
    hash_manifest_free(&m3);
}

static int g_exit_code = -1;
static void on_exit_request(void *ud, int code)
{
    (void)ud;
    g_exit_code = code;
}

static int read_text(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t k = fread(buf, 1, n - 1, f);
    buf[k] = '\0';
    fclose(f);
    return 0;
}

#define RULES88                                                                                    \
    "[{\"action\":\"RestartAllContainers\",\"exitCodes\":{\"operator\":\"In\",\"values\":[88]}}]"

/* The real restart-pod action: it writes its record (why: the changed
 * restart-pod files and the hash) into --state-dir, reports success (the
 * content is applied: every container starts again with it) and asks the
 * daemon to exit with the code; without the exit hook it fails. */
static void test_restart_pod_records_then_asks_to_exit(void **state)
{
    (void)state;
    struct ctx x;
    char sdir[300], rec[600], text[2048];
    snprintf(sdir, sizeof sdir, "%s/state", g_dir);
    assert_int_equal(mkdir(sdir, 0700), 0);
    const char *args[] = {"--rule",
                          "*.rp=restart-pod",
                          "--action",
                          "none",
                          "--restart-delay",
                          "0",
                          "--restart-pod-exit-code",
                          "91",
                          "--restart-policy-rules",
                          "[{\"action\":\"RestartAllContainers\",\"exitCodes\":{\"operator\":"
                          "\"In\",\"values\":[91]}}]",
                          "--state-dir",
                          sdir};
    struct hash_manifest m0 = {0}, m1 = {0}, m2 = {0};
    put_file("a.rp", "1");
    put_file("b.txt", "1");
    manifest(&m0);
    ctx_open(&x, args, NARGS(args));
    engine_start(x.e, &m0);
    /* no exit hook: a failure that says a retry cannot help */
    put_file("a.rp", "2");
    manifest(&m1);
    engine_observe(x.e, &m1);
    run_for(&x.loop, 30);
    struct engine_status st;
    engine_get_status(x.e, &st);
    assert_string_equal(st.last_result, "failure");
    assert_non_null(strstr(st.last_error, "cannot exit"));
    applied_is(x.e, &m0);
    /* with the hook */
    engine_set_exit(x.e, on_exit_request, NULL);
    put_file("a.rp", "3");
    put_file("b.txt", "2");
    manifest(&m2);
    g_exit_code = -1;
    engine_observe(x.e, &m2);
    run_for(&x.loop, 30);
    assert_int_equal(g_exit_code, 91);
    applied_is(x.e, &m2);
    snprintf(rec, sizeof rec, "%s/restart-pod.json", sdir);
    assert_int_equal(read_text(rec, text, sizeof text), 0);
    char hex[HASH_HEX_LEN + 1], want[300];
    hash_hex(m2.total, hex);
    assert_non_null(strstr(text, hex));
    assert_non_null(strstr(text, "\"exit_code\":91"));
    snprintf(want, sizeof want, "%s/vol/a.rp", g_dir);
    assert_non_null(strstr(text, want));
    snprintf(want, sizeof want, "%s/vol/b.txt", g_dir);
    assert_null(strstr(text, want)); /* not a restart-pod file */
    ctx_close(&x);
    hash_manifest_free(&m0);
    hash_manifest_free(&m1);
    hash_manifest_free(&m2);
}

/* --on-start reload acts on the content found at start, but never restarts
 * the pod for it (every container read it when it started; it would loop);
 * after a pod restart the agent made, nothing at all is reloaded. */
static void test_reload_at_start_never_restarts_the_pod(void **state)
{
    (void)state;
    const char *args[] = {
        FAKE_ARGS,    "--rule", "*.rp=restart-pod", "--restart-policy-rules", RULES88,
        "--on-start", "reload"};
    struct hash_manifest m0 = {0};
    put_file("a.sig", "1");
    put_file("e.rp", "1");
    manifest(&m0);
    for (int restarted = 0; restarted < 2; restarted++) {
        struct ctx x;
        memset(&F, 0, sizeof F);
        ctx_open(&x, args, NARGS(args));
        g_exit_code = -1;
        engine_set_exit(x.e, on_exit_request, NULL);
        if (restarted) engine_pod_restarted(x.e);
        engine_start(x.e, &m0);
        run_for(&x.loop, 30);
        assert_int_equal(g_exit_code, -1);
        assert_int_equal(F.starts[ACTION_SIGNAL], restarted ? 0 : 1);
        applied_is(x.e, &m0);
        ctx_close(&x);
    }
    hash_manifest_free(&m0);
}

static void test_table_lookups(void **state)
{
    (void)state;
    enum action a;
    assert_string_equal(action_names_joined(), "none|signal|http|exec|restart|rollout|restart-pod");
    for (int i = 0; i < ACTION__COUNT; i++) {
        assert_int_equal(action_by_name(action_name(i), &a), 0);
        assert_int_equal(a, i);
        assert_string_equal(action_names()[i], action_name(i));
    }
    assert_null(action_names()[ACTION__COUNT]);
    assert_int_equal(action_by_name("reboot", &a), -EINVAL);
    assert_string_equal(action_name(ACTION__COUNT), "?");
    assert_int_equal(action_strongest(0), 0);
    assert_int_equal(action_strongest(ACTION_BIT(ACTION_NONE)), ACTION_BIT(ACTION_NONE));
    unsigned inplace =
        ACTION_BIT(ACTION_SIGNAL) | ACTION_BIT(ACTION_HTTP) | ACTION_BIT(ACTION_EXEC);
    assert_int_equal(action_strongest(inplace | ACTION_BIT(ACTION_NONE)), inplace);
    assert_int_equal(action_strongest(inplace | ACTION_BIT(ACTION_RESTART)),
                     ACTION_BIT(ACTION_RESTART));
    assert_int_equal(action_strongest(~0u), ACTION_BIT(ACTION_ROLLOUT));
    /* restart < restart-pod < rollout */
    assert_int_equal(
        action_strongest(inplace | ACTION_BIT(ACTION_RESTART) | ACTION_BIT(ACTION_RESTART_POD)),
        ACTION_BIT(ACTION_RESTART_POD));
    assert_int_equal(action_strongest(ACTION_BIT(ACTION_RESTART_POD) | ACTION_BIT(ACTION_ROLLOUT)),
                     ACTION_BIT(ACTION_ROLLOUT));
    assert_false(action_posts_pod_events(ACTION_RESTART_POD)); /* it exits: see restartpod.c */
    assert_false(action_posts_pod_events(ACTION_NONE));
    assert_false(action_posts_pod_events(ACTION_ROLLOUT));
    assert_true(action_posts_pod_events(ACTION_SIGNAL));
    assert_true(action_posts_pod_events(ACTION_RESTART));
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
        cmocka_unit_test(test_table_lookups),
        cmocka_unit_test_setup_teardown(test_fake_restart_delay_coalesces, fake_setup,
                                        fake_teardown),
        cmocka_unit_test_setup_teardown(test_fake_restart_failure_keeps_delay_and_backoff,
                                        fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_restart_pod_records_then_asks_to_exit, fake_setup,
                                        fake_teardown),
        cmocka_unit_test_setup_teardown(test_reload_at_start_never_restarts_the_pod, fake_setup,
                                        fake_teardown),
        cmocka_unit_test_setup_teardown(test_fake_env_root_takes_env_action, fake_setup,
                                        fake_teardown),
        cmocka_unit_test_setup_teardown(test_fake_strongest_action_wins, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_fake_retry_with_backoff_commits_on_success, fake_setup,
                                        fake_teardown),
        cmocka_unit_test_setup_teardown(test_fake_newer_change_supersedes_pending_retry, fake_setup,
                                        fake_teardown),
        cmocka_unit_test_setup_teardown(test_fake_attempt_owns_its_parameters, fake_setup,
                                        fake_teardown),
        cmocka_unit_test_setup_teardown(test_fake_close_while_in_flight, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_fake_close_aborts_rollout_in_flight, fake_setup,
                                        fake_teardown),
    };
    return cmocka_run_group_tests_name("engine", tests, NULL, NULL);
}
