/*
 * test_notifyfmt.c - the notification bodies (run/notifyfmt.h): each
 * format's shape as its receiver reads it (plain JSON fields; Slack's text
 * and blocks with mrkdwn escaped; Teams' Adaptive Card in a message;
 * Google Chat's text), values escaped as JSON, absent fields left out, and
 * --notify-format's names (config/config.c) in the order of the enum.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <cmocka.h>

#include "config/config.h"
#include "run/notifyfmt.h"

static struct notify_event sample(void)
{
    struct notify_event ev = {.event = "reload",
                              .ok = 1,
                              .action = "signal",
                              .pod = "web-7d9f-abcde",
                              .namespace_ = "shop",
                              .workload = "Deployment/web",
                              .files = {"app.conf", "tls/<cert>&.pem"},
                              .nfiles = 2,
                              .old_hash = "aaaa",
                              .new_hash = "bbbb",
                              .attempt = 1,
                              .time_unix_ms = 1764892800000};
    return ev;
}

static cJSON *render(enum notify_format f, const struct notify_event *ev)
{
    size_t len = 0;
    char *s = notifyfmt_render(f, ev, &len);
    assert_non_null(s);
    assert_int_equal(len, strlen(s));
    cJSON *o = cJSON_Parse(s);
    free(s);
    assert_non_null(o);
    return o;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void test_json(void **s)
{
    (void)s;
    struct notify_event ev = sample();
    cJSON *o = render(NOTIFY_JSON, &ev);
    assert_string_equal(str(o, "source"), "reload-agent");
    assert_string_equal(str(o, "event"), "reload");
    assert_string_equal(str(o, "result"), "success");
    assert_string_equal(str(o, "action"), "signal");
    assert_string_equal(str(o, "pod"), "web-7d9f-abcde");
    assert_string_equal(str(o, "namespace"), "shop");
    assert_string_equal(str(o, "workload"), "Deployment/web");
    assert_string_equal(str(o, "oldHash"), "aaaa");
    assert_string_equal(str(o, "newHash"), "bbbb");
    assert_string_equal(str(o, "time"), "2025-12-05T00:00:00Z");
    assert_string_equal(str(o, "summary"),
                        "signal reload succeeded on pod shop/web-7d9f-abcde (Deployment/web)");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(o, "files");
    assert_int_equal(cJSON_GetArraySize(files), 2);
    assert_string_equal(cJSON_GetArrayItem(files, 1)->valuestring, "tls/<cert>&.pem");
    assert_null(cJSON_GetObjectItemCaseSensitive(o, "detail"));
    assert_null(cJSON_GetObjectItemCaseSensitive(o, "dryRun"));
    cJSON_Delete(o);

    ev.ok = 0;
    ev.detail = "signal: no process named \"app\"\n";
    ev.files_more = 3;
    o = render(NOTIFY_JSON, &ev);
    assert_string_equal(str(o, "result"), "failure");
    assert_string_equal(str(o, "detail"), "signal: no process named \"app\"\n");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(o, "filesMore")->valueint, 3);
    cJSON_Delete(o);
}

static void test_slack(void **s)
{
    (void)s;
    struct notify_event ev = sample();
    ev.event = "rejected";
    ev.ok = 0;
    ev.detail = "exit 1: bad <value>";
    cJSON *o = render(NOTIFY_SLACK, &ev);
    assert_non_null(strstr(str(o, "text"), "rejected"));
    const cJSON *blocks = cJSON_GetObjectItemCaseSensitive(o, "blocks");
    assert_int_equal(cJSON_GetArraySize(blocks), 2);
    const cJSON *head = cJSON_GetArrayItem(blocks, 0), *body = cJSON_GetArrayItem(blocks, 1);
    assert_string_equal(str(head, "type"), "section");
    const cJSON *ht = cJSON_GetObjectItemCaseSensitive(head, "text");
    assert_string_equal(str(ht, "type"), "mrkdwn");
    assert_non_null(strstr(str(ht, "text"), ":warning:"));
    const cJSON *fields = cJSON_GetObjectItemCaseSensitive(body, "fields");
    assert_true(cJSON_GetArraySize(fields) >= 8 && cJSON_GetArraySize(fields) <= 10);
    int files = 0, err = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, fields)
    {
        assert_string_equal(str(f, "type"), "mrkdwn");
        const char *t = str(f, "text");
        if (strncmp(t, "*Files*\n", 8) == 0) {
            files = 1;
            assert_string_equal(t, "*Files*\napp.conf, tls/&lt;cert&gt;&amp;.pem");
        }
        if (strncmp(t, "*Error*\n", 8) == 0) {
            err = 1;
            assert_string_equal(t, "*Error*\nexit 1: bad &lt;value&gt;");
        }
    }
    assert_true(files && err);
    cJSON_Delete(o);
}

static void test_teams(void **s)
{
    (void)s;
    struct notify_event ev = sample();
    cJSON *o = render(NOTIFY_TEAMS, &ev);
    assert_string_equal(str(o, "type"), "message");
    const cJSON *att = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o, "attachments"), 0);
    assert_string_equal(str(att, "contentType"), "application/vnd.microsoft.card.adaptive");
    const cJSON *card = cJSON_GetObjectItemCaseSensitive(att, "content");
    assert_string_equal(str(card, "type"), "AdaptiveCard");
    assert_string_equal(str(card, "version"), "1.4");
    const cJSON *body = cJSON_GetObjectItemCaseSensitive(card, "body");
    assert_string_equal(str(cJSON_GetArrayItem(body, 0), "type"), "TextBlock");
    assert_non_null(strstr(str(cJSON_GetArrayItem(body, 0), "text"), "succeeded"));
    const cJSON *set = cJSON_GetArrayItem(body, 1);
    assert_string_equal(str(set, "type"), "FactSet");
    const cJSON *fact = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(set, "facts"), 0);
    assert_string_equal(str(fact, "title"), "Pod");
    assert_string_equal(str(fact, "value"), "web-7d9f-abcde");
    cJSON_Delete(o);
}

static void test_gchat(void **s)
{
    (void)s;
    struct notify_event ev = sample();
    ev.dry_run = 1;
    cJSON *o = render(NOTIFY_GCHAT, &ev);
    const char *t = str(o, "text");
    assert_non_null(t);
    assert_int_equal(strncmp(t, "*[dry run] signal reload succeeded on pod shop/", 47), 0);
    assert_non_null(strstr(t, "\nFiles: app.conf, tls/<cert>&.pem"));
    assert_non_null(strstr(t, "\nNew hash: bbbb"));
    assert_int_equal(cJSON_GetArraySize(o), 1); /* only text */
    cJSON_Delete(o);
}

/* A bare event: every optional field absent, nothing printed as "(null)". */
static void test_minimal(void **s)
{
    (void)s;
    struct notify_event ev = {.event = "storm-halted"};
    for (int f = NOTIFY_JSON; f <= NOTIFY_GCHAT; f++) {
        char *b = notifyfmt_render((enum notify_format)f, &ev, NULL);
        assert_non_null(b);
        assert_null(strstr(b, "null"));
        cJSON *o = cJSON_Parse(b);
        assert_non_null(o);
        cJSON_Delete(o);
        free(b);
    }
    assert_null(notifyfmt_render((enum notify_format)99, &ev, NULL));
}

/* --notify-format's names are the enum's, in order. */
static void test_config_names(void **s)
{
    (void)s;
    for (int i = 0; notify_format_names[i]; i++) {
        char *argv[] = {"--watch", "/tmp", "--notify-format", (char *)notify_format_names[i]};
        struct cfg_layer l;
        struct config c;
        char err[512];
        int help = 0;
        assert_int_equal(cfg_layer_init(&l, CFG_SRC_FLAG), 0);
        assert_int_equal(cfg_parse_args(4, argv, &l, &help, err, sizeof err), 0);
        assert_int_equal(cfg_build(&l, NULL, &c, err, sizeof err), 0);
        assert_int_equal(c.notify_format, i);
        cfg_free(&c);
        cfg_layer_free(&l);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json),    cmocka_unit_test(test_slack),
        cmocka_unit_test(test_teams),   cmocka_unit_test(test_gchat),
        cmocka_unit_test(test_minimal), cmocka_unit_test(test_config_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
