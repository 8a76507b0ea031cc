/*
 * test_injectnote.c - the injector's warnings read from the status
 * annotation (run/injectnote.c): how many are reported, and what a
 * status that is not the injector's JSON does (nothing but a log line).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "run/injectnote.h"
#include "config/annotations.h"

/* Reports the warnings of an annotations file holding inject-status=json. */
static size_t report(const char *json)
{
    char text[8192], err[256];
    FILE *q = fmemopen(text, sizeof text, "w");
    assert_non_null(q);
    fputs("reload-agent.io/inject-status=\"", q);
    for (const char *p = json; *p; p++) {
        if (*p == '"' || *p == '\\') fputc('\\', q);
        fputc(*p, q);
    }
    fputs("\"\n", q);
    fclose(q);
    struct annot_set a = {0};
    assert_int_equal(annot_parse(text, strlen(text), &a, err, sizeof err), 0);
    size_t n = injectnote_report(&a, NULL, "web-1", "default");
    annot_free(&a);
    return n;
}

static void test_counts_string_warnings(void **state)
{
    (void)state;
    assert_int_equal(report("{\"version\":\"0.1.0\",\"mirrors\":[\"cfg\"]}"), 0);
    assert_int_equal(report("{\"warnings\":[\"a\",\"b\"]}"), 2);
    assert_int_equal(report("{\"warnings\":[\"a\",7,null,\"b\"]}"), 2); /* strings only */
    char many[2048] = "{\"warnings\":[";
    for (int i = 0; i < 20; i++) strcat(many, i ? ",\"w\"" : "\"w\"");
    strcat(many, "]}");
    assert_int_equal(report(many), 16); /* INJECT_STATUS_MAX_WARNINGS */
}

static void test_not_the_injectors_json(void **state)
{
    (void)state;
    assert_int_equal(report("not json"), 0);
    assert_int_equal(report("[\"a\"]"), 0);
    assert_int_equal(report("{\"warnings\":\"a\"}"), 0);
    assert_int_equal(injectnote_report(NULL, NULL, NULL, NULL), 0);
    struct annot_set none = {0};
    assert_int_equal(injectnote_report(&none, NULL, "p", "n"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_string_warnings),
        cmocka_unit_test(test_not_the_injectors_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
