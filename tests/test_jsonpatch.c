/*
 * test_jsonpatch.c - unit tests for yamldoc/jsonpatch.c: every example of
 * RFC 6902 Appendix A (A.1-A.16) as a case, all-or-nothing on failure,
 * RFC 6901 escaping (~0, ~1, and their order), and the error messages
 * (operation index and path).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "yamldoc/jsonpatch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pcase {
    const char *what, *doc, *patch;
    const char *want; /* the result, or NULL: the patch must fail */
    const char *err;  /* a part of the error message when it fails */
};

static const struct pcase RFC[] = {
    {"A.1 adding an object member", "{\"foo\":\"bar\"}",
     "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\"}]", "{\"baz\":\"qux\",\"foo\":\"bar\"}",
     NULL},
    {"A.2 adding an array element", "{\"foo\":[\"bar\",\"baz\"]}",
     "[{\"op\":\"add\",\"path\":\"/foo/1\",\"value\":\"qux\"}]",
     "{\"foo\":[\"bar\",\"qux\",\"baz\"]}", NULL},
    {"A.3 removing an object member", "{\"baz\":\"qux\",\"foo\":\"bar\"}",
     "[{\"op\":\"remove\",\"path\":\"/baz\"}]", "{\"foo\":\"bar\"}", NULL},
    {"A.4 removing an array element", "{\"foo\":[\"bar\",\"qux\",\"baz\"]}",
     "[{\"op\":\"remove\",\"path\":\"/foo/1\"}]", "{\"foo\":[\"bar\",\"baz\"]}", NULL},
    {"A.5 replacing a value", "{\"baz\":\"qux\",\"foo\":\"bar\"}",
     "[{\"op\":\"replace\",\"path\":\"/baz\",\"value\":\"boo\"}]",
     "{\"baz\":\"boo\",\"foo\":\"bar\"}", NULL},
    {"A.6 moving a value",
     "{\"foo\":{\"bar\":\"baz\",\"waldo\":\"fred\"},\"qux\":{\"corge\":\"grault\"}}",
     "[{\"op\":\"move\",\"from\":\"/foo/waldo\",\"path\":\"/qux/thud\"}]",
     "{\"foo\":{\"bar\":\"baz\"},\"qux\":{\"corge\":\"grault\",\"thud\":\"fred\"}}", NULL},
    {"A.7 moving an array element", "{\"foo\":[\"all\",\"grass\",\"cows\",\"eat\"]}",
     "[{\"op\":\"move\",\"from\":\"/foo/1\",\"path\":\"/foo/3\"}]",
     "{\"foo\":[\"all\",\"cows\",\"eat\",\"grass\"]}", NULL},
    {"A.8 testing a value: success", "{\"baz\":\"qux\",\"foo\":[\"a\",2,\"c\"]}",
     "[{\"op\":\"test\",\"path\":\"/baz\",\"value\":\"qux\"},{\"op\":\"test\",\"path\":\"/foo/1\","
     "\"value\":2}]",
     "{\"baz\":\"qux\",\"foo\":[\"a\",2,\"c\"]}", NULL},
    {"A.9 testing a value: error", "{\"baz\":\"qux\"}",
     "[{\"op\":\"test\",\"path\":\"/baz\",\"value\":\"bar\"}]", NULL,
     "operation 0 (test /baz): test failed"},
    {"A.10 adding a nested member object", "{\"foo\":\"bar\"}",
     "[{\"op\":\"add\",\"path\":\"/child\",\"value\":{\"grandchild\":{}}}]",
     "{\"foo\":\"bar\",\"child\":{\"grandchild\":{}}}", NULL},
    {"A.11 ignoring unrecognized elements", "{\"foo\":\"bar\"}",
     "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\",\"xyz\":123}]",
     "{\"foo\":\"bar\",\"baz\":\"qux\"}", NULL},
    {"A.12 adding to a nonexistent target", "{\"foo\":\"bar\"}",
     "[{\"op\":\"add\",\"path\":\"/baz/bat\",\"value\":\"qux\"}]", NULL,
     "operation 0 (add /baz/bat): the parent does not exist"},
    {"A.13 invalid JSON Patch document", "{\"foo\":\"bar\"}",
     "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\",\"op\":\"remove\"}]", NULL,
     "a member appears twice"},
    {"A.14 ~ escape ordering", "{\"/\":9,\"~1\":10}",
     "[{\"op\":\"test\",\"path\":\"/~01\",\"value\":10}]", "{\"/\":9,\"~1\":10}", NULL},
    {"A.15 comparing strings and numbers", "{\"/\":9,\"~1\":10}",
     "[{\"op\":\"test\",\"path\":\"/~01\",\"value\":\"10\"}]", NULL, "test failed"},
    {"A.16 adding an array value", "{\"foo\":[\"bar\"]}",
     "[{\"op\":\"add\",\"path\":\"/foo/-\",\"value\":[\"abc\",\"def\"]}]",
     "{\"foo\":[\"bar\",[\"abc\",\"def\"]]}", NULL},
};

static const struct pcase MORE[] = {
    {"~1 names a member with a slash", "{\"metadata\":{\"annotations\":{}}}",
     "[{\"op\":\"add\",\"path\":\"/metadata/annotations/"
     "reload-agent.io~1inject\",\"value\":\"true\"}]",
     "{\"metadata\":{\"annotations\":{\"reload-agent.io/inject\":\"true\"}}}", NULL},
    {"~0 names a member with a tilde", "{\"a~b\":1}", "[{\"op\":\"remove\",\"path\":\"/a~0b\"}]",
     "{}", NULL},
    {"a bad escape", "{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"/a~2\"}]", NULL,
     "'~' must be followed by 0 or 1"},
    {"add replaces an existing member", "{\"a\":{\"b\":1}}",
     "[{\"op\":\"add\",\"path\":\"/a\",\"value\":[1]}]", "{\"a\":[1]}", NULL},
    {"add at the end index appends", "{\"a\":[1]}",
     "[{\"op\":\"add\",\"path\":\"/a/1\",\"value\":2}]", "{\"a\":[1,2]}", NULL},
    {"add past the end", "{\"a\":[1]}", "[{\"op\":\"add\",\"path\":\"/a/2\",\"value\":2}]", NULL,
     "index 2 is out of range"},
    {"a leading zero is not an index", "{\"a\":[1,2]}", "[{\"op\":\"remove\",\"path\":\"/a/01\"}]",
     NULL, "not an array index"},
    {"remove with -", "{\"a\":[1]}", "[{\"op\":\"remove\",\"path\":\"/a/-\"}]", NULL,
     "not an array index"},
    {"add to the root replaces the document", "{\"a\":1}",
     "[{\"op\":\"add\",\"path\":\"\",\"value\":[true]}]", "[true]", NULL},
    {"replace the root", "{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"\",\"value\":{\"b\":2}}]",
     "{\"b\":2}", NULL},
    {"remove the root", "{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"\"}]", NULL,
     "the whole document cannot be removed"},
    {"replace a missing member", "{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"/b\",\"value\":2}]",
     NULL, "the target does not exist"},
    {"replace keeps the member's name", "{\"a\":1,\"b\":2}",
     "[{\"op\":\"replace\",\"path\":\"/a\",\"value\":{\"x\":1}},{\"op\":\"test\",\"path\":\"/a/x\","
     "\"value\":1}]",
     "{\"a\":{\"x\":1},\"b\":2}", NULL},
    {"copy", "{\"a\":{\"b\":[1,2]}}", "[{\"op\":\"copy\",\"from\":\"/a/b\",\"path\":\"/c\"}]",
     "{\"a\":{\"b\":[1,2]},\"c\":[1,2]}", NULL},
    {"move into its own child", "{\"a\":{\"b\":{}}}",
     "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a/b/c\"}]", NULL, "proper prefix"},
    {"move onto itself", "{\"a\":1}", "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a\"}]",
     "{\"a\":1}", NULL},
    {"a member of a scalar", "{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/a/b\",\"value\":1}]", NULL,
     "the parent is not an object or an array"},
    {"an unknown op", "{}", "[{\"op\":\"merge\",\"path\":\"/a\"}]", NULL, "unknown operation"},
    {"value missing", "{}", "[{\"op\":\"add\",\"path\":\"/a\"}]", NULL, "\"value\" is missing"},
    {"null is a value", "{}", "[{\"op\":\"add\",\"path\":\"/a\",\"value\":null}]", "{\"a\":null}",
     NULL},
    {"path missing", "{}", "[{\"op\":\"remove\"}]", NULL, "\"path\" is missing"},
    {"a path without a slash", "{}", "[{\"op\":\"remove\",\"path\":\"a\"}]", NULL,
     "must be empty or start with '/'"},
    {"an operation that is not an object", "{}", "[1]", NULL, "must be a JSON object"},
    {"test objects ignore member order", "{\"a\":{\"x\":1,\"y\":2}}",
     "[{\"op\":\"test\",\"path\":\"/a\",\"value\":{\"y\":2,\"x\":1}}]", "{\"a\":{\"x\":1,\"y\":2}}",
     NULL},
    {"test arrays keep order", "{\"a\":[1,2]}",
     "[{\"op\":\"test\",\"path\":\"/a\",\"value\":[2,1]}]", NULL, "test failed"},
    {"the empty member name", "{\"\":{\"\":1}}", "[{\"op\":\"test\",\"path\":\"//\",\"value\":1}]",
     "{\"\":{\"\":1}}", NULL},
};

static void run(const struct pcase *c)
{
    cJSON *doc = cJSON_Parse(c->doc), *ops = cJSON_Parse(c->patch);
    if (!doc || !ops) print_error("%s: bad test JSON\n", c->what);
    assert_non_null(doc);
    assert_non_null(ops);
    char *before = cJSON_PrintUnformatted(doc), err[256] = "";
    cJSON *orig = doc;
    int rc = jsonpatch_apply(&doc, ops, err, sizeof err);
    if (c->want) {
        if (rc != 0) print_error("%s: failed: %s\n", c->what, err);
        assert_int_equal(rc, 0);
        cJSON *want = cJSON_Parse(c->want);
        assert_non_null(want);
        if (!cJSON_Compare(doc, want, 1)) {
            char *got = cJSON_PrintUnformatted(doc);
            print_error("%s: got %s, want %s\n", c->what, got, c->want);
            free(got);
        }
        assert_true(cJSON_Compare(doc, want, 1));
        cJSON_Delete(want);
    } else {
        if (rc != -EINVAL || !strstr(err, c->err))
            print_error("%s: rc %d err \"%s\", want -EINVAL with \"%s\"\n", c->what, rc, err,
                        c->err);
        assert_int_equal(rc, -EINVAL);
        assert_non_null(strstr(err, c->err));
        assert_ptr_equal(doc, orig); /* untouched */
        char *after = cJSON_PrintUnformatted(doc);
        assert_string_equal(before, after);
        free(after);
    }
    free(before);
    cJSON_Delete(doc);
    cJSON_Delete(ops);
}

static void test_rfc6902_appendix_a(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof RFC / sizeof RFC[0]; i++) run(&RFC[i]);
}

static void test_more_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof MORE / sizeof MORE[0]; i++) run(&MORE[i]);
}

/* A failure in the third operation leaves the document as it was, although
 * the first two succeeded on the working copy. */
static void test_all_or_nothing(void **state)
{
    (void)state;
    const char *text = "{\"spec\":{\"volumes\":[{\"name\":\"a\"}]},\"metadata\":{}}";
    cJSON *doc = cJSON_Parse(text), *orig = doc;
    cJSON *ops =
        cJSON_Parse("[{\"op\":\"add\",\"path\":\"/spec/volumes/-\",\"value\":{\"name\":\"b\"}},"
                    "{\"op\":\"remove\",\"path\":\"/metadata\"},"
                    "{\"op\":\"add\",\"path\":\"/spec/initContainers/-\",\"value\":{}}]");
    char err[256];
    assert_int_equal(jsonpatch_apply(&doc, ops, err, sizeof err), -EINVAL);
    assert_ptr_equal(doc, orig);
    assert_string_equal(err, "JSON Patch operation 2 (add /spec/initContainers/-): the parent does "
                             "not exist (no such member)");
    cJSON *want = cJSON_Parse(text);
    assert_true(cJSON_Compare(doc, want, 1));
    cJSON_Delete(want);
    cJSON_Delete(ops);

    /* not an array of operations; no document */
    ops = cJSON_Parse("{\"op\":\"add\"}");
    assert_int_equal(jsonpatch_apply(&doc, ops, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "must be a JSON array"));
    cJSON *none = NULL;
    assert_int_equal(jsonpatch_apply(&none, ops, err, sizeof err), -EINVAL);
    cJSON_Delete(ops);
    cJSON_Delete(doc);
}

/* An empty patch succeeds and changes nothing. */
static void test_empty_patch(void **state)
{
    (void)state;
    cJSON *doc = cJSON_Parse("{\"a\":[1,{\"b\":null}]}"), *ops = cJSON_CreateArray();
    cJSON *want = cJSON_Duplicate(doc, 1);
    char err[64];
    assert_int_equal(jsonpatch_apply(&doc, ops, err, sizeof err), 0);
    assert_true(cJSON_Compare(doc, want, 1));
    cJSON_Delete(doc);
    cJSON_Delete(ops);
    cJSON_Delete(want);
}

/* jsonpointer_get: RFC 6901 section 5's examples, indices, what is not
 * there; jsonpointer_token decodes one token and says when it is too
 * long. */
static void test_pointer_get(void **state)
{
    (void)state;
    cJSON *doc = cJSON_Parse("{\"foo\":[\"bar\",\"baz\"],\"\":0,\"a/b\":1,\"c%d\":2,\"e^f\":3,"
                             "\"g|h\":4,\"i\\\\j\":5,\"k\\\"l\":6,\" \":7,\"m~n\":8}");
    assert_non_null(doc);
    static const struct {
        const char *path;
        const char *json; /* NULL: nothing there */
    } T[] = {
        {"/foo", "[\"bar\",\"baz\"]"},
        {"/foo/0", "\"bar\""},
        {"/", "0"},
        {"/a~1b", "1"},
        {"/c%d", "2"},
        {"/e^f", "3"},
        {"/g|h", "4"},
        {"/i\\j", "5"},
        {"/k\"l", "6"},
        {"/ ", "7"},
        {"/m~0n", "8"},
        {"/foo/2", NULL},
        {"/foo/01", NULL},
        {"/foo/-", NULL},
        {"/foo/0/x", NULL},
        {"/nope", NULL},
        {"foo", NULL},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        const cJSON *v = jsonpointer_get(doc, T[i].path, strlen(T[i].path));
        if (!T[i].json) {
            if (v) fail_msg("%s: found something", T[i].path);
            continue;
        }
        if (!v) fail_msg("%s: nothing found", T[i].path);
        char *got = cJSON_PrintUnformatted(v);
        assert_string_equal(got, T[i].json);
        free(got);
    }
    assert_ptr_equal(jsonpointer_get(doc, "", 0), doc);
    /* only the first pathlen bytes count */
    assert_ptr_equal(jsonpointer_get(doc, "/foo/1/more", 4), cJSON_GetObjectItem(doc, "foo"));
    cJSON_Delete(doc);

    char tok[8];
    size_t i = 1;
    assert_int_equal(jsonpointer_token("/a~1b~0c/d", 10, &i, tok, sizeof tok), 5);
    assert_string_equal(tok, "a/b~c");
    assert_int_equal(i, 8);
    i = 1;
    assert_int_equal(jsonpointer_token("/abcdefgh/x", 11, &i, tok, sizeof tok), -1);
    assert_int_equal(i, 9); /* past the token all the same */
    i = 1;
    assert_int_equal(jsonpointer_token("/~2", 3, &i, tok, sizeof tok), 2); /* kept as is */
    assert_string_equal(tok, "~2");
}

static void test_escape(void **state)
{
    (void)state;
    static const char *const T[][2] = {
        {"reload-agent.io/inject-status", "reload-agent.io~1inject-status"},
        {"a~b", "a~0b"},
        {"~/", "~0~1"},
        {"/~1", "~1~01"},
        {"", ""},
        {"plain", "plain"},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        char *e = jsonpointer_escape(T[i][0]);
        assert_non_null(e);
        assert_string_equal(e, T[i][1]);
        /* the escaped token names the member when used in a pointer */
        cJSON *doc = cJSON_CreateObject();
        cJSON_AddNumberToObject(doc, T[i][0], 1);
        char path[64], patch[160], err[128];
        snprintf(path, sizeof path, "/%s", e);
        snprintf(patch, sizeof patch, "[{\"op\":\"test\",\"path\":\"%s\",\"value\":1}]", path);
        cJSON *ops = cJSON_Parse(patch);
        assert_int_equal(jsonpatch_apply(&doc, ops, err, sizeof err), 0);
        cJSON_Delete(ops);
        cJSON_Delete(doc);
        free(e);
    }
}

/* cJSON allocations fail after a budget: 0 or -ENOMEM, the document as it
 * was on failure, no leak under ASan. */
static long alloc_budget = -1;
static void *budget_malloc(size_t n)
{
    if (alloc_budget == 0) return NULL;
    if (alloc_budget > 0) alloc_budget--;
    return malloc(n);
}

static void test_out_of_memory(void **state)
{
    (void)state;
    const char *text = "{\"a\":{\"b\":[1,2,{\"c\":\"d\"}]},\"e\":\"f\"}";
    cJSON *ops = cJSON_Parse("[{\"op\":\"add\",\"path\":\"/a/b/1\",\"value\":{\"x\":[1,2]}},"
                             "{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/g\"},"
                             "{\"op\":\"move\",\"from\":\"/e\",\"path\":\"/a/e\"},"
                             "{\"op\":\"replace\",\"path\":\"/a/b/0\",\"value\":\"y\"}]");
    assert_non_null(ops);
    cJSON_Hooks hooks = {budget_malloc, free};
    int ok = 0, failed = 0;
    for (long budget = 0; budget < 1000 && !ok; budget++) {
        cJSON *doc = cJSON_Parse(text), *orig = doc;
        char err[256] = "";
        cJSON_InitHooks(&hooks);
        alloc_budget = budget;
        int rc = jsonpatch_apply(&doc, ops, err, sizeof err);
        alloc_budget = -1;
        cJSON_InitHooks(NULL);
        if (rc == 0) {
            ok = 1;
        } else {
            assert_int_equal(rc, -ENOMEM);
            assert_ptr_equal(doc, orig);
            char *now = cJSON_PrintUnformatted(doc);
            cJSON *want = cJSON_Parse(text);
            char *w = cJSON_PrintUnformatted(want);
            assert_string_equal(now, w);
            free(now);
            free(w);
            cJSON_Delete(want);
            failed++;
        }
        cJSON_Delete(doc);
    }
    assert_true(ok);
    assert_true(failed > 5);
    cJSON_Delete(ops);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc6902_appendix_a), cmocka_unit_test(test_more_cases),
        cmocka_unit_test(test_all_or_nothing),     cmocka_unit_test(test_empty_patch),
        cmocka_unit_test(test_pointer_get),        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
