/*
 * test_annotations.c - unit tests for config/annotations.c: the file format
 * of docs/kubernetes-api.md as the kubelet writes it, the tolerated variants (final
 * newline, CRLF), every rejected form with its line-numbered message, and
 * annot_parse_file on real files (missing, directory, exactly 1 MiB, over).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "config/annotations.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[64];

static int make_tmpdir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_annotations.XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state)
{
    char cmd[128];

    (void)state;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void parse_ok(const char *text, struct annot_set *s)
{
    char err[256] = "";
    int rc = annot_parse(text, strlen(text), s, err, sizeof err);

    if (rc != 0) print_error("parse failed: %s\n", err);
    assert_int_equal(rc, 0);
}

static void expect_val(const struct annot_set *s, const char *key, const char *val, size_t vlen)
{
    const struct annot *a = annot_get(s, key);

    if (!a) print_error("key %s missing\n", key);
    assert_non_null(a);
    assert_string_equal(a->key, key);
    assert_int_equal(a->vlen, vlen);
    assert_memory_equal(a->val, val, vlen);
    assert_int_equal(a->val[vlen], '\0');
}

static void expect_error(const char *text, size_t len, const char *msg)
{
    struct annot_set s = {(struct annot *)1, 99};
    char err[256] = "";

    assert_int_equal(annot_parse(text, len, &s, err, sizeof err), -EINVAL);
    assert_null(s.v);
    assert_int_equal(s.n, 0);
    if (strcmp(err, msg) != 0) print_error("got  %s\nwant %s\n", err, msg);
    assert_string_equal(err, msg);
}

/* The length of a literal, so inputs may hold NUL bytes. */
#define EXPECT_ERROR(lit, msg) expect_error(lit, sizeof(lit) - 1, msg)

static void test_spec_example(void **state)
{
    struct annot_set s;

    (void)state;
    parse_ok("app=\"web\"\ntier=\"be\\\"ta\"", &s);
    assert_int_equal(s.n, 2);
    expect_val(&s, "app", "web", 3);
    expect_val(&s, "tier", "be\"ta", 5);
    assert_null(annot_get(&s, "ap"));
    assert_null(annot_get(&s, "tier2"));
    annot_free(&s);
    assert_null(s.v);
    assert_int_equal(s.n, 0);
}

static void test_kubelet_file(void **state)
{
    static const char text[] =
        "kubectl.kubernetes.io/last-applied-configuration=\"{\\\"apiVersion\\\":\\\"v1\\\","
        "\\\"kind\\\":\\\"Pod\\\"}\\n\"\n"
        "kubernetes.io/config.seen=\"2024-05-01T10:00:00.000000000Z\"\n"
        "reload-agent.io/action=\"signal\"\n"
        "reload-agent.io/rule=\"*.conf=signal,jvm.options=rollout\"\n"
        "reload-agent.io/watch=\"/etc/config, /etc/tls\"\n"
        "unicode=\"\xe6\x97\xa5\xe6\x9c\xac \\u00ad\\x00\\t\"";
    struct annot_set s;

    (void)state;
    parse_ok(text, &s);
    assert_int_equal(s.n, 6);
    expect_val(&s, "kubectl.kubernetes.io/last-applied-configuration",
               "{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}\n", 33);
    expect_val(&s, "reload-agent.io/action", "signal", 6);
    expect_val(&s, "reload-agent.io/rule", "*.conf=signal,jvm.options=rollout", 33);
    expect_val(&s, "reload-agent.io/watch", "/etc/config, /etc/tls", 21);
    expect_val(&s, "unicode", "\xe6\x97\xa5\xe6\x9c\xac \xc2\xad\0\t", 11);
    annot_free(&s);
}

static void test_empty_and_newlines(void **state)
{
    struct annot_set s;

    (void)state;
    parse_ok("", &s);
    assert_int_equal(s.n, 0);
    assert_null(annot_get(&s, "a"));
    annot_free(&s);
    parse_ok("\n", &s);
    assert_int_equal(s.n, 0);
    annot_free(&s);
    parse_ok("a=\"1\"\nb=\"2\"\n", &s); /* one final newline is tolerated */
    assert_int_equal(s.n, 2);
    expect_val(&s, "b", "2", 1);
    annot_free(&s);
    parse_ok("a=\"1\"\r\nb=\"2\"\r\n", &s); /* CRLF */
    assert_int_equal(s.n, 2);
    expect_val(&s, "a", "1", 1);
    expect_val(&s, "b", "2", 1);
    annot_free(&s);
    parse_ok("a=\"1\"\r", &s);
    expect_val(&s, "a", "1", 1);
    annot_free(&s);
}

static void test_values(void **state)
{
    struct annot_set s;

    (void)state;
    parse_ok("e=\"\"\neq=\"x=y\"\nnul=\"a\\x00b\\000\"\nsp=\" lead and trail \"", &s);
    expect_val(&s, "e", "", 0);
    expect_val(&s, "eq", "x=y", 3);
    expect_val(&s, "nul", "a\0b\0", 4);
    expect_val(&s, "sp", " lead and trail ", 16);
    annot_free(&s);
}

static void test_unsorted_input_sorted_output(void **state)
{
    struct annot_set s;

    (void)state;
    parse_ok("zeta=\"3\"\nalpha=\"1\"\nmid/x=\"2\"", &s);
    assert_int_equal(s.n, 3);
    assert_string_equal(s.v[0].key, "alpha");
    assert_string_equal(s.v[1].key, "mid/x");
    assert_string_equal(s.v[2].key, "zeta");
    expect_val(&s, "zeta", "3", 1);
    annot_free(&s);
}

static void test_errors(void **state)
{
    (void)state;
    EXPECT_ERROR("a=\"1\"\nfoo", "line 2: missing '=' in \"foo\"");
    EXPECT_ERROR("a=\"1\"\na=\"2\"", "line 2: duplicate key \"a\" (first on line 1)");
    EXPECT_ERROR("b=\"0\"\na=\"1\"\nc=\"\"\na=\"2\"",
                 "line 4: duplicate key \"a\" (first on line 2)");
    EXPECT_ERROR("a=\"x\"y", "line 1: unexpected text after the closing quote of key \"a\"");
    EXPECT_ERROR("a=\"x\" ", "line 1: unexpected text after the closing quote of key \"a\"");
    EXPECT_ERROR("a=\"x\"\"", "line 1: unexpected text after the closing quote of key \"a\"");
    EXPECT_ERROR("a=\"1\"\nx=\"ab\\q\"",
                 "line 2: bad quoted value for key \"x\": invalid escape \\q at offset 3");
    EXPECT_ERROR(
        "x=\"abc",
        "line 1: bad quoted value for key \"x\": unterminated string: no closing '\"' (4 bytes)");
    EXPECT_ERROR("=\"x\"", "line 1: empty key");
    EXPECT_ERROR("a b=\"x\"", "line 1: invalid character in key \"a b\" at offset 1");
    EXPECT_ERROR("k\xc3\xa9=\"x\"", "line 1: invalid character in key \"k\xc3\xa9\" at offset 1");
    EXPECT_ERROR("a=web", "line 1: value for key \"a\" does not start with '\"'");
    EXPECT_ERROR("a=", "line 1: value for key \"a\" does not start with '\"'");
    EXPECT_ERROR("a=\"1\"\n\nb=\"2\"", "line 2: empty line");
    EXPECT_ERROR("a=\"1\"\n\n", "line 2: empty line");
    EXPECT_ERROR("a=\"1\"\x00\"", "line 1: unexpected text after the closing quote of key \"a\"");
    EXPECT_ERROR("\x01\xff", "line 1: missing '=' in \"\\x01\\xff\"");
}

static void test_many_keys(void **state)
{
    size_t n = 20000, k, len = 0;
    char *buf = malloc(n * 32), key[16];
    struct annot_set s;

    (void)state;
    assert_non_null(buf);
    for (k = 0; k < n; k++)
        len += (size_t)sprintf(buf + len, "%sk%zu=\"%zu\"", k ? "\n" : "", n - k, k);
    parse_ok(buf, &s);
    assert_int_equal(s.n, n);
    for (k = 1; k < n; k++) assert_true(strcmp(s.v[k - 1].key, s.v[k].key) < 0);
    snprintf(key, sizeof key, "k%zu", n);
    expect_val(&s, key, "0", 1);
    annot_free(&s);
    /* The same with one duplicate at the very end. */
    len += (size_t)sprintf(buf + len, "\nk7=\"dup\"");
    expect_error(buf, len, "line 20001: duplicate key \"k7\" (first on line 19994)");
    free(buf);
}

static void write_file(const char *path, const char *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
}

static void test_parse_file(void **state)
{
    char path[128], err[256];
    struct annot_set s = {NULL, 0};

    (void)state;
    snprintf(path, sizeof path, "%s/annotations", tmpdir);
    write_file(path, "reload-agent.io/signal=\"SIGUSR1\"\nreload-agent.io/debounce=\"2s\"", 62);
    assert_int_equal(annot_parse_file(path, &s, err, sizeof err), 0);
    assert_int_equal(s.n, 2);
    expect_val(&s, "reload-agent.io/signal", "SIGUSR1", 7);
    annot_free(&s);

    write_file(path, "ok=\"1\"\nbroken", 13);
    assert_int_equal(annot_parse_file(path, &s, err, sizeof err), -EINVAL);
    assert_true(strncmp(err, path, strlen(path)) == 0);
    assert_non_null(strstr(err, ": line 2: missing '=' in \"broken\""));

    snprintf(path, sizeof path, "%s/missing", tmpdir);
    assert_int_equal(annot_parse_file(path, &s, err, sizeof err), -ENOENT);
    assert_true(strncmp(err, path, strlen(path)) == 0);
    assert_non_null(strstr(err, "cannot open"));

    assert_int_equal(annot_parse_file(tmpdir, &s, err, sizeof err), -EISDIR);
    assert_true(strncmp(err, tmpdir, strlen(tmpdir)) == 0);
    assert_null(s.v);
}

static void test_file_size_limit(void **state)
{
    size_t max = 1024 * 1024;
    char *buf = malloc(max + 2), path[128], err[256];
    struct annot_set s;

    (void)state;
    assert_non_null(buf);
    snprintf(path, sizeof path, "%s/big", tmpdir);
    /* Exactly 1 MiB: k="aaa...a" */
    memcpy(buf, "k=\"", 3);
    memset(buf + 3, 'a', max - 4);
    buf[max - 1] = '"';
    write_file(path, buf, max);
    assert_int_equal(annot_parse_file(path, &s, err, sizeof err), 0);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.v[0].vlen, max - 4);
    annot_free(&s);
    /* One byte more (a final newline) is too big, whatever it holds. */
    buf[max] = '\n';
    write_file(path, buf, max + 1);
    assert_int_equal(annot_parse_file(path, &s, err, sizeof err), -EFBIG);
    assert_null(s.v);
    assert_true(strncmp(err, path, strlen(path)) == 0);
    assert_non_null(strstr(err, "larger than 1048576 bytes"));
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_example),
        cmocka_unit_test(test_kubelet_file),
        cmocka_unit_test(test_empty_and_newlines),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_unsorted_input_sorted_output),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_many_keys),
        cmocka_unit_test(test_parse_file),
        cmocka_unit_test(test_file_size_limit),
    };
    return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
