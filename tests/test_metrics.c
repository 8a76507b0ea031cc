/*
 * test_metrics.c - tests of run/metrics.c: every family is rendered with
 * HELP and TYPE, counters pushed through metrics_*() show up exactly, the
 * Kubernetes families appear once the agent has an API client, and the
 * hooks have the shapes kube/ and watch/ call (struct kube_counters,
 * watch_set_counter).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "run/metrics.h"
#include "kube/kube.h"
#include "watch/watch.h"

static char *render(void)
{
    size_t len = 0;
    char *s = metrics_render(&len);

    assert_non_null(s);
    assert_int_equal(strlen(s), len);
    return s;
}

static void expect_line(const char *body, const char *line)
{
    char want[256];

    snprintf(want, sizeof want, "\n%s\n", line);
    if (!strstr(body, want)) fail_msg("no line \"%s\" in:\n%s", line, body);
}

static void expect_family(const char *body, const char *name, const char *type)
{
    char want[256];

    snprintf(want, sizeof want, "# HELP %s ", name);
    if (!strstr(body, want)) fail_msg("no HELP for %s", name);
    snprintf(want, sizeof want, "# TYPE %s %s", name, type);
    expect_line(body, want);
}

static int reset(void **state)
{
    (void)state;
    metrics_reset();
    return 0;
}

static void test_families_at_start(void **state)
{
    char *b = render();

    (void)state;
    expect_family(b, "reload_agent_reloads_total", "counter");
    expect_family(b, "reload_agent_last_reload_successful", "gauge");
    expect_family(b, "reload_agent_last_reload_success_timestamp_seconds", "gauge");
    expect_family(b, "reload_agent_changes_total", "counter");
    expect_family(b, "reload_agent_watch_events_total", "counter");
    expect_family(b, "reload_agent_retries_total", "counter");
    expect_family(b, "reload_agent_config_errors_total", "counter");
    expect_family(b, "reload_agent_action_duration_seconds", "histogram");
    expect_line(b, "reload_agent_changes_total 0");
    expect_line(b, "reload_agent_watch_events_total 0");
    /* no API client: no API families */
    assert_null(strstr(b, "reload_agent_api_requests_total"));
    assert_null(strstr(b, "reload_agent_events_suppressed_total"));
    assert_null(strstr(b, "reload_agent_fast_sync_budget_hits_total"));
    free(b);
}

static void test_pushed_counters(void **state)
{
    /* the hooks as kube/ and watch/ hold them */
    struct kube_counters kc = {.response = metrics_api_response,
                               .event_suppressed = metrics_event_suppressed};
    void (*watch_hook)(void *, uint64_t) = metrics_watch_events;
    char *b;

    (void)state;
    metrics_change();
    metrics_change();
    watch_hook(NULL, 5);
    watch_hook(NULL, 1);
    kc.response(kc.ud, 200);
    kc.response(kc.ud, 200);
    kc.response(kc.ud, 429);
    kc.response(kc.ud, 0);
    kc.event_suppressed(kc.ud);
    metrics_retry();
    metrics_config_error();
    b = render();
    expect_line(b, "reload_agent_changes_total 2");
    expect_line(b, "reload_agent_watch_events_total 6");
    expect_family(b, "reload_agent_api_requests_total", "counter");
    expect_line(b, "reload_agent_api_requests_total{code=\"200\"} 2");
    expect_line(b, "reload_agent_api_requests_total{code=\"429\"} 1");
    expect_line(b, "reload_agent_api_requests_total{code=\"0\"} 1");
    expect_family(b, "reload_agent_events_suppressed_total", "counter");
    expect_line(b, "reload_agent_events_suppressed_total 1");
    expect_line(b, "reload_agent_retries_total 1");
    expect_line(b, "reload_agent_config_errors_total 1");
    free(b);
    metrics_reset();
    b = render();
    expect_line(b, "reload_agent_changes_total 0");
    assert_null(strstr(b, "reload_agent_api_requests_total"));
    free(b);
}

/* With an API client the families show at zero before any request. */
static void test_api_enabled(void **state)
{
    char *b;

    (void)state;
    metrics_api_enabled();
    b = render();
    expect_family(b, "reload_agent_api_requests_total", "counter");
    expect_line(b, "reload_agent_events_suppressed_total 0");
    assert_null(strstr(b, "reload_agent_api_requests_total{"));
    free(b);
}

/* Fast sync's budget: the family at zero once it runs, one line per limit,
 * counted per limit (an unknown limit is ignored). */
static void test_fast_sync_budget(void **state)
{
    char *b;

    (void)state;
    metrics_fast_sync_enabled();
    b = render();
    expect_family(b, "reload_agent_fast_sync_budget_hits_total", "counter");
    expect_line(b, "reload_agent_fast_sync_budget_hits_total{limit=\"backoff\"} 0");
    expect_line(b, "reload_agent_fast_sync_budget_hits_total{limit=\"nudge_floor\"} 0");
    free(b);
    metrics_fast_sync_budget_hit(METRICS_FS_NUDGE_FLOOR);
    metrics_fast_sync_budget_hit(METRICS_FS_NUDGE_FLOOR);
    metrics_fast_sync_budget_hit(METRICS_FS_BACKOFF);
    metrics_fast_sync_budget_hit(METRICS_FS__COUNT);
    b = render();
    expect_line(b, "reload_agent_fast_sync_budget_hits_total{limit=\"backoff\"} 1");
    expect_line(b, "reload_agent_fast_sync_budget_hits_total{limit=\"nudge_floor\"} 2");
    free(b);
    assert_string_equal(metrics_fs_limit_name(METRICS_FS_BACKOFF), "backoff");
}

static void test_many_codes_bounded(void **state)
{
    char *b;

    (void)state;
    for (long c = 100; c < 200; c++) metrics_api_response(NULL, c);
    metrics_api_response(NULL, 100);
    b = render();
    expect_line(b, "reload_agent_api_requests_total{code=\"100\"} 2");
    expect_line(b, "reload_agent_api_requests_total{code=\"131\"} 1");
    assert_null(strstr(b, "{code=\"132\"}"));
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_families_at_start, reset),
        cmocka_unit_test_setup(test_pushed_counters, reset),
        cmocka_unit_test_setup(test_api_enabled, reset),
        cmocka_unit_test_setup(test_fast_sync_budget, reset),
        cmocka_unit_test_setup(test_many_codes_bounded, reset),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
