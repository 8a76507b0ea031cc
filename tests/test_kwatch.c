/*
 * test_kwatch.c - the watch event and list parsers of kube/kwatch.c: what
 * a real API server sends (PartialObjectMetadata events, bookmarks, ERROR
 * 410 with a Status), and the malformed input it must turn into one clear
 * error line, never a crash. The watch's I/O (streams, reconnects, 410
 * relists, token rotation) is tested against the fake API server in
 * tests/integration/test_fastsync.py, through the agent.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kube/kwatch.h"

static int table;

static int parse(const char *line, struct kwatch__event *ev, char *err, size_t n)
{
    err[0] = '\0';
    return kwatch__parse_event(line, strlen(line), table, ev, err, n);
}

static void test_events(void **state)
{
    (void)state;
    struct kwatch__event ev;
    char err[512];

    assert_int_equal(parse("{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"PartialObjectMetadata\","
                           "\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{\"name\":\"site\","
                           "\"resourceVersion\":\"13898\"}}}",
                           &ev, err, sizeof err),
                     0);
    assert_int_equal(ev.type, KWATCH__MODIFIED);
    assert_string_equal(ev.rv, "13898");
    assert_int_equal(parse("{\"type\":\"DELETED\",\"object\":{\"kind\":\"PartialObjectMetadata\","
                           "\"metadata\":{\"resourceVersion\":\"7\"}}}",
                           &ev, err, sizeof err),
                     0);
    assert_int_equal(ev.type, KWATCH__DELETED);
    /* a bookmark as 1.36 sends it after the initial events */
    assert_int_equal(parse("{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"PartialObjectMetadata\","
                           "\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{\"resourceVersion\":"
                           "\"13874\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}",
                           &ev, err, sizeof err),
                     0);
    assert_int_equal(ev.type, KWATCH__BOOKMARK);
    assert_string_equal(ev.rv, "13874");
    /* the real server's answer to a too old resourceVersion */
    assert_int_equal(parse("{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":"
                           "\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old "
                           "resource version: 1 (9014)\",\"reason\":\"Expired\",\"code\":410}}",
                           &ev, err, sizeof err),
                     0);
    assert_int_equal(ev.type, KWATCH__ERROR);
    assert_int_equal(ev.code, 410);
    assert_string_equal(ev.message, "too old resource version: 1 (9014)");
    /* found by fuzz_watch: a code that fits no long, an empty message */
    assert_int_equal(parse("{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"message\":\"\","
                           "\"code\":666666666666666666666666666666666666666666666666666410}}",
                           &ev, err, sizeof err),
                     0);
    assert_int_equal(ev.code, 0);
    assert_string_equal(ev.message, "(no message)");
}

static void test_bad_events(void **state)
{
    (void)state;
    static const struct {
        const char *line, *want;
    } cases[] = {
        {"{not json", "not a JSON object"},
        {"[1,2]", "not a JSON object"},
        {"{\"type\":\"ADDED\"}", "no \"type\" or no \"object\""},
        {"{\"object\":{}}", "no \"type\" or no \"object\""},
        {"{\"type\":\"ADDED\",\"object\":[]}", "no \"type\" or no \"object\""},
        {"{\"type\":\"EXPLODED\\n\",\"object\":{}}", "unknown type \"EXPLODED\\x0a\""},
        /* a server that ignored the metadata-only Accept header */
        {"{\"type\":\"ADDED\",\"object\":{\"kind\":\"Secret\",\"data\":{\"k\":\"c2VjcmV0\"},"
         "\"metadata\":{\"resourceVersion\":\"1\"}}}",
         "holds a Secret, not PartialObjectMetadata"},
        {"{\"type\":\"ADDED\",\"object\":{\"kind\":\"PartialObjectMetadata\",\"metadata\":{}}}",
         "no valid metadata.resourceVersion"},
        {"{\"type\":\"ADDED\",\"object\":{\"kind\":\"PartialObjectMetadata\",\"metadata\":"
         "{\"resourceVersion\":\"1 2\"}}}",
         "no valid metadata.resourceVersion"},
        {"{\"type\":\"ADDED\",\"object\":{\"kind\":\"PartialObjectMetadata\",\"metadata\":"
         "{\"resourceVersion\":\"1\\\"}\"}}}",
         "no valid metadata.resourceVersion"},
        {"{\"type\":\"ADDED\",\"object\":{\"kind\":\"PartialObjectMetadata\",\"metadata\":"
         "{\"resourceVersion\":7}}}",
         "no valid metadata.resourceVersion"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct kwatch__event ev;
        char err[512];
        assert_int_equal(parse(cases[i].line, &ev, err, sizeof err), -EINVAL);
        if (!strstr(err, cases[i].want)) fail_msg("case %zu: %s", i, err);
        assert_null(strchr(err, '\n'));
        assert_null(strstr(err, "c2VjcmV0")); /* never quotes the event */
    }
}

static void test_lists(void **state)
{
    (void)state;
    char rv[128], obj[128], err[512];
    int exists = -1;
    const char *ok = "{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":\"meta.k8s.io/v1\","
                     "\"metadata\":{\"resourceVersion\":\"13874\"},\"items\":[{\"kind\":"
                     "\"PartialObjectMetadata\",\"metadata\":{\"name\":\"site\","
                     "\"resourceVersion\":\"13841\"}}]}";
    assert_int_equal(
        kwatch__parse_list(ok, strlen(ok), "site", 0, rv, sizeof rv, &exists, obj, err, sizeof err),
        0);
    assert_string_equal(rv, "13874");
    assert_int_equal(exists, 1);
    assert_string_equal(obj, "13841");
    const char *empty = "{\"kind\":\"PartialObjectMetadataList\",\"metadata\":{\"resourceVersion\":"
                        "\"5\"},\"items\":[]}";
    assert_int_equal(kwatch__parse_list(empty, strlen(empty), "site", 0, rv, sizeof rv, &exists,
                                        obj, err, sizeof err),
                     0);
    assert_int_equal(exists, 0);
    static const char *const bad[] = {
        "",
        "null",
        "{\"kind\":\"ConfigMapList\",\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[]}",
        "{\"kind\":\"PartialObjectMetadataList\",\"metadata\":{},\"items\":[]}",
        "{\"kind\":\"PartialObjectMetadataList\",\"metadata\":{\"resourceVersion\":\"5\"},"
        "\"items\":{}}",
        "{\"kind\":\"PartialObjectMetadataList\",\"metadata\":{\"resourceVersion\":\"5\"},"
        "\"items\":[{\"metadata\":{\"name\":\"site\"}}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(kwatch__parse_list(bad[i], strlen(bad[i]), "site", 0, rv, sizeof rv,
                                            &exists, obj, err, sizeof err),
                         -EINVAL);
        assert_true(err[0] != '\0');
    }
}

/* Secrets: a Table with includeObject=None, as the real server sends it. */
static void test_tables(void **state)
{
    (void)state;
    struct kwatch__event ev;
    char err[512], rv[128], obj[128];
    int exists = -1;

    table = 1;
    assert_int_equal(parse("{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Table\",\"apiVersion\":"
                           "\"meta.k8s.io/v1\",\"metadata\":{\"resourceVersion\":\"13898\"},"
                           "\"columnDefinitions\":[],\"rows\":[{\"cells\":[\"creds\",\"Opaque\",1,"
                           "\"23s\"],\"object\":null}]}}",
                           &ev, err, sizeof err),
                     0);
    assert_int_equal(ev.type, KWATCH__MODIFIED);
    assert_string_equal(ev.rv, "13898");
    assert_int_equal(
        parse("{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Table\",\"metadata\":"
              "{\"resourceVersion\":\"515\"},\"columnDefinitions\":null,\"rows\":[{"
              "\"cells\":[\"\",\"\",0,\"<unknown>\"],\"object\":{\"kind\":"
              "\"PartialObjectMetadata\",\"metadata\":{\"resourceVersion\":\"515\"}}}]}}",
              &ev, err, sizeof err),
        0);
    assert_string_equal(ev.rv, "515");
    /* includeObject=None ignored: the row holds the Secret */
    assert_int_equal(
        parse("{\"type\":\"ADDED\",\"object\":{\"kind\":\"Table\",\"metadata\":"
              "{\"resourceVersion\":\"5\"},\"rows\":[{\"cells\":[\"creds\"],\"object\":"
              "{\"kind\":\"Secret\",\"data\":{\"k\":\"c2VjcmV0\"}}}]}}",
              &ev, err, sizeof err),
        -EINVAL);
    assert_non_null(strstr(err, "includeObject=None"));
    assert_null(strstr(err, "c2VjcmV0"));
    /* a PartialObjectMetadata where a Table was asked for */
    assert_int_equal(parse("{\"type\":\"ADDED\",\"object\":{\"kind\":\"PartialObjectMetadata\","
                           "\"metadata\":{\"resourceVersion\":\"5\"}}}",
                           &ev, err, sizeof err),
                     -EINVAL);
    table = 0;
    const char *list = "{\"kind\":\"Table\",\"metadata\":{\"resourceVersion\":\"13897\"},"
                       "\"rows\":[{\"cells\":[\"creds\",\"Opaque\",1,\"8s\"],\"object\":null}]}";
    assert_int_equal(kwatch__parse_list(list, strlen(list), "creds", 1, rv, sizeof rv, &exists, obj,
                                        err, sizeof err),
                     0);
    assert_string_equal(rv, "13897");
    assert_int_equal(exists, 1);
    assert_string_equal(obj, "");
    assert_int_equal(kwatch__parse_list(list, strlen(list), "other", 1, rv, sizeof rv, &exists, obj,
                                        err, sizeof err),
                     0);
    assert_int_equal(exists, 0);
    const char *leaky = "{\"kind\":\"Table\",\"metadata\":{\"resourceVersion\":\"1\"},\"rows\":"
                        "[{\"cells\":[\"creds\"],\"object\":{\"kind\":\"Secret\"}}]}";
    assert_int_equal(kwatch__parse_list(leaky, strlen(leaky), "creds", 1, rv, sizeof rv, &exists,
                                        obj, err, sizeof err),
                     -EINVAL);
}

static void test_start_rejects(void **state)
{
    (void)state;
    struct kwatch *w = NULL;
    struct kwatch_opts o = {.resource = "pods", .name = "x"};
    /* checked before the client is touched */
    assert_int_equal(kwatch_start(NULL, &o, NULL, NULL, &w), -EINVAL);
    assert_null(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events),        cmocka_unit_test(test_bad_events),
        cmocka_unit_test(test_lists),         cmocka_unit_test(test_tables),
        cmocka_unit_test(test_start_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
