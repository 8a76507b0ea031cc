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

/* The object's name, which kwatch checks against the watched one (G6). */
static void test_event_names(void **state)
{
    (void)state;
    struct kwatch__event ev;
    char err[512], longname[300];

    assert_int_equal(parse("{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"PartialObjectMetadata\","
                           "\"metadata\":{\"name\":\"someone-else\",\"resourceVersion\":\"9\"}}}",
                           &ev, err, sizeof err),
                     0);
    assert_string_equal(ev.name, "someone-else");
    assert_int_equal(parse("{\"type\":\"ADDED\",\"object\":{\"kind\":\"PartialObjectMetadata\","
                           "\"metadata\":{\"resourceVersion\":\"9\"}}}",
                           &ev, err, sizeof err),
                     0);
    assert_string_equal(ev.name, "");
    /* a name longer than any object's: none, so no truncated copy can match */
    memset(longname, 'a', 260);
    longname[260] = '\0';
    char line[600];
    snprintf(line, sizeof line,
             "{\"type\":\"ADDED\",\"object\":{\"kind\":\"PartialObjectMetadata\",\"metadata\":"
             "{\"name\":\"%s\",\"resourceVersion\":\"9\"}}}",
             longname);
    assert_int_equal(parse(line, &ev, err, sizeof err), 0);
    assert_string_equal(ev.name, "");
    table = 1;
    assert_int_equal(
        parse("{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Table\",\"metadata\":"
              "{\"resourceVersion\":\"5\"},\"rows\":[{\"cells\":[\"creds\",\"Opaque\",1,"
              "\"1s\"],\"object\":null}]}}",
              &ev, err, sizeof err),
        0);
    assert_string_equal(ev.name, "creds");
    /* two rows: no single object */
    assert_int_equal(
        parse("{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Table\",\"metadata\":"
              "{\"resourceVersion\":\"5\"},\"rows\":[{\"cells\":[\"creds\"],\"object\":"
              "null},{\"cells\":[\"other\"],\"object\":null}]}}",
              &ev, err, sizeof err),
        0);
    assert_string_equal(ev.name, "");
    table = 0;
}

/* apimachinery's CompareResourceVersion (KEP-5504): decimal, no leading
 * zero, not 0, any length; by length, then digits. */
static void test_rv_compare(void **state)
{
    (void)state;
    static const struct {
        const char *a, *b;
        int rc, cmp;
    } cases[] = {
        {"1", "2", 0, -1},
        {"10", "9", 0, 1},
        {"13898", "13898", 0, 0},
        {"123456789012345678901234567890", "99", 0, 1},
        {"99", "123456789012345678901234567890", 0, -1},
        {"01", "1", -EINVAL, 0},
        {"0", "1", -EINVAL, 0},
        {"1", "", -EINVAL, 0},
        {"x11", "5", -EINVAL, 0},
        {"11", "1.5", -EINVAL, 0},
        {"-1", "1", -EINVAL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int cmp = 42;
        int rc = kwatch__rv_compare(cases[i].a, cases[i].b, &cmp);
        if (rc != cases[i].rc || (rc == 0 && cmp != cases[i].cmp))
            fail_msg("case %zu (%s, %s): rc %d cmp %d", i, cases[i].a, cases[i].b, rc, cmp);
    }
}

/* What is a change (G7, G2): not seen, not at or below the highest known;
 * a resync's first event only when known to be newer. */
static void test_rvs(void **state)
{
    (void)state;
    struct kwatch__rvs r;

    memset(&r, 0, sizeof r);
    kwatch__rvs_note(&r, "9");   /* the listed object */
    kwatch__rvs_raise(&r, "10"); /* the list */
    assert_false(kwatch__rvs_is_new(&r, "9", 0));
    assert_false(kwatch__rvs_is_new(&r, "10", 0)); /* the list holds it: known */
    assert_true(kwatch__rvs_is_new(&r, "11", 0));
    /* 11, 5, 11, 5: one change */
    int changes = 0;
    static const char *const seq[] = {"11", "5", "11", "5", "11", "5"};
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
        changes += kwatch__rvs_is_new(&r, seq[i], 0);
        kwatch__rvs_note(&r, seq[i]);
    }
    assert_int_equal(changes, 1);
    assert_string_equal(r.high, "11");
    /* a resync's first event: the old state is no change, a newer one is */
    assert_false(kwatch__rvs_is_new(&r, "8", 1));
    assert_true(kwatch__rvs_is_new(&r, "12", 1));

    /* a Secret: a Table list says only the list's resourceVersion */
    memset(&r, 0, sizeof r);
    kwatch__rvs_raise(&r, "500");
    assert_false(kwatch__rvs_is_new(&r, "480", 1)); /* unchanged since the list */
    assert_true(kwatch__rvs_is_new(&r, "501", 1));  /* changed while the watch was down */

    /* resourceVersions that do not compare: equality with those seen */
    memset(&r, 0, sizeof r);
    changes = 0;
    static const char *const opaque[] = {"x11", "x5", "x11", "x5"};
    for (size_t i = 0; i < sizeof opaque / sizeof opaque[0]; i++) {
        changes += kwatch__rvs_is_new(&r, opaque[i], 0);
        kwatch__rvs_note(&r, opaque[i]);
    }
    assert_int_equal(changes, 2);
    assert_false(kwatch__rvs_is_new(&r, "x99", 1)); /* cannot be placed: a baseline */
    assert_true(kwatch__rvs_is_new(&r, "x99", 0));
    /* the last KWATCH_SEEN are remembered, the oldest forgotten */
    char v[16];
    for (int i = 0; i < KWATCH_SEEN; i++) {
        snprintf(v, sizeof v, "y%d", i);
        kwatch__rvs_note(&r, v);
    }
    assert_false(kwatch__rvs_is_new(&r, "y0", 0));
    assert_true(kwatch__rvs_is_new(&r, "x11", 0));
}

/* metadata.namespace: what a cluster-scoped watch (the sync service's
 * pods) reads each object's namespace from; a DELETED event carries it too */
static void test_event_namespaces(void **state)
{
    (void)state;
    struct kwatch__event ev;
    char err[512];
    assert_int_equal(parse("{\"type\":\"DELETED\",\"object\":{\"kind\":\"PartialObjectMetadata\","
                           "\"metadata\":{\"name\":\"p\",\"namespace\":\"shop\","
                           "\"resourceVersion\":\"7\"}}}",
                           &ev, err, sizeof err),
                     0);
    assert_string_equal(ev.ns, "shop");
    assert_string_equal(ev.name, "p");
    assert_int_equal(parse("{\"type\":\"ADDED\",\"object\":{\"kind\":\"PartialObjectMetadata\","
                           "\"metadata\":{\"name\":\"p\",\"resourceVersion\":\"7\"}}}",
                           &ev, err, sizeof err),
                     0);
    assert_string_equal(ev.ns, "");
    char line[512];
    snprintf(line, sizeof line,
             "{\"type\":\"ADDED\",\"object\":{\"kind\":\"PartialObjectMetadata\","
             "\"metadata\":{\"name\":\"p\",\"namespace\":\"%064d\",\"resourceVersion\":\"7\"}}}",
             0);
    assert_int_equal(parse(line, &ev, err, sizeof err), 0);
    assert_string_equal(ev.ns, ""); /* longer than a label: none */
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
        cmocka_unit_test(test_events),
        cmocka_unit_test(test_bad_events),
        cmocka_unit_test(test_lists),
        cmocka_unit_test(test_tables),
        cmocka_unit_test(test_event_names),
        cmocka_unit_test(test_rv_compare),
        cmocka_unit_test(test_rvs),
        cmocka_unit_test(test_start_rejects),
        cmocka_unit_test(test_event_namespaces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
