/*
 * test_statedir.c - --state-dir (run/statedir.c). The applied state: a
 * manifest written and read back folds to the same totals; no record is 0;
 * every malformed record is -EINVAL with the file named; the write is
 * atomic (nothing is left beside the record). The restart-pod record:
 * rendered, taken once, a malformed one reported and removed.
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/file.h"
#include "hash/hash.h"
#include "run/statedir.h"

static char g_dir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/ra-test-statedir-%d", (int)getpid());
    return mkdir(g_dir, 0700);
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A record's head that names no pod field (matches any pod). */
#define HEAD "\"version\":2,\"pod\":{\"name\":\"\",\"uid\":\"\",\"sandbox\":\"\"},"

static void write_named(const char *name, const char *text)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void write_record(const char *text) { write_named(STATEDIR_APPLIED, text); }

/* The names in g_dir, sorted, each followed by a space. */
static void entries(char *out, size_t n)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | tr '\\n' ' '", g_dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t k = fread(out, 1, n - 1, p);
    out[k] = '\0';
    assert_int_equal(pclose(p), 0);
}

static void test_round_trip(void **state)
{
    (void)state;
    struct hash_entry v[3] = {
        {"/etc/app/b.conf", 3, {1, 2, 3}, HASH_CLASS_MAIN},
        {"/etc/app/a \"quoted\"\nname", 0, {0xff}, HASH_CLASS_MAIN | HASH_CLASS_SUB},
        {"/etc/app/c", 1u << 20, {0x10, 0x20}, HASH_CLASS_MAIN}};
    struct hash_manifest m, back;
    char err[512];
    assert_int_equal(hash_manifest_from_entries(v, 3, &m), 0);
    assert_int_equal(statedir_applied_save(g_dir, NULL, &m, err, sizeof err), 0);
    assert_int_equal(statedir_applied_load(g_dir, NULL, &back, err, sizeof err), 1);
    assert_int_equal(back.n, 3);
    assert_int_equal(back.nsub, 1);
    assert_memory_equal(back.total, m.total, HASH_LEN);
    assert_memory_equal(back.sub, m.sub, HASH_LEN);
    for (size_t i = 0; i < 3; i++) {
        assert_string_equal(back.v[i].path, m.v[i].path);
        assert_int_equal(back.v[i].size, m.v[i].size);
        assert_memory_equal(back.v[i].digest, m.v[i].digest, HASH_LEN);
    }
    char ls[400];
    entries(ls, sizeof ls); /* nothing beside the record */
    assert_string_equal(ls, STATEDIR_APPLIED " ");
    hash_manifest_free(&back);
    /* an empty manifest is a record too (nothing was mounted) */
    struct hash_manifest empty;
    assert_int_equal(hash_manifest_from_entries(NULL, 0, &empty), 0);
    assert_int_equal(statedir_applied_save(g_dir, NULL, &empty, err, sizeof err), 0);
    assert_int_equal(statedir_applied_load(g_dir, NULL, &back, err, sizeof err), 1);
    assert_int_equal(back.n, 0);
    assert_memory_equal(back.total, empty.total, HASH_LEN);
    hash_manifest_free(&back);
    hash_manifest_free(&empty);
    hash_manifest_free(&m);
}

static void test_no_record(void **state)
{
    (void)state;
    struct hash_manifest back;
    char err[512] = "";
    assert_int_equal(statedir_applied_load(g_dir, NULL, &back, err, sizeof err), 0);
    assert_int_equal(back.n, 0);
    assert_string_equal(err, "");
}

static void test_malformed(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "not json",
        "[]",
        "{\"files\":[]}",
        "{\"version\":3,\"files\":[]}",
        /* version 1 named no pod */
        "{\"version\":1,\"files\":[]}",
        "{\"version\":2,\"files\":[]}",
        "{\"version\":2,\"pod\":{\"name\":\"a\"},\"files\":[]}",
        "{" HEAD "\"files\":{}}",
        "{" HEAD "\"files\":[{\"path\":\"/a\",\"size\":1,\"classes\":1}]}",
        "{" HEAD "\"files\":[{\"path\":\"/a\",\"size\":1,\"sha256\":\"00\",\"classes\":1}]}",
        "{" HEAD "\"files\":[{\"path\":\"\",\"size\":1,\"sha256\":"
        "\"0000000000000000000000000000000000000000000000000000000000000000\",\"classes\":1}]}",
        "{" HEAD "\"files\":[{\"path\":\"/a\",\"size\":-1,\"sha256\":"
        "\"0000000000000000000000000000000000000000000000000000000000000000\",\"classes\":1}]}",
        "{" HEAD "\"files\":[{\"path\":\"/a\",\"size\":1,\"sha256\":"
        "\"000000000000000000000000000000000000000000000000000000000000000G\",\"classes\":1}]}",
        "{" HEAD "\"files\":[{\"path\":\"/a\",\"size\":1,\"sha256\":"
        "\"0000000000000000000000000000000000000000000000000000000000000000\",\"classes\":0}]}",
        /* issue 24 G8: numbers a cast cannot hold, or not whole */
        "{" HEAD "\"files\":[{\"path\":\"/a\",\"size\":1e300,\"sha256\":"
        "\"0000000000000000000000000000000000000000000000000000000000000000\",\"classes\":1}]}",
        "{" HEAD "\"files\":[{\"path\":\"/a\",\"size\":1.5,\"sha256\":"
        "\"0000000000000000000000000000000000000000000000000000000000000000\",\"classes\":1}]}",
        "{" HEAD "\"files\":[{\"path\":\"/a\",\"size\":1e999,\"sha256\":"
        "\"0000000000000000000000000000000000000000000000000000000000000000\",\"classes\":1}]}",
        "{" HEAD "\"files\":[{\"path\":\"/a\",\"size\":1,\"sha256\":"
        "\"0000000000000000000000000000000000000000000000000000000000000000\",\"classes\":1.5}]}",
        "{" HEAD "\"files\":[{\"path\":\"/a\",\"size\":1,\"sha256\":"
        "\"0000000000000000000000000000000000000000000000000000000000000000\",\"classes\":1e300}]}",
        "{\"version\":1e300,\"files\":[]}",
        /* two entries with one path */
        "{" HEAD "\"files\":[{\"path\":\"/a\",\"size\":1,\"sha256\":"
        "\"0000000000000000000000000000000000000000000000000000000000000000\",\"classes\":1},"
        "{\"path\":\"/a\",\"size\":1,\"sha256\":"
        "\"0000000000000000000000000000000000000000000000000000000000000000\",\"classes\":1}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct hash_manifest back;
        char err[512] = "";
        write_record(bad[i]);
        assert_int_equal(statedir_applied_load(g_dir, NULL, &back, err, sizeof err), -EINVAL);
        assert_non_null(strstr(err, STATEDIR_APPLIED));
        assert_non_null(strstr(err, "not the applied state"));
        assert_int_equal(back.n, 0);
    }
    /* the reason names the field and what it must be */
    struct hash_manifest back;
    char err[512] = "";
    write_record("{" HEAD "\"files\":[{\"path\":\"/a\",\"size\":1e300,\"sha256\":"
                 "\"0000000000000000000000000000000000000000000000000000000000000000\","
                 "\"classes\":1}]}");
    assert_int_equal(statedir_applied_load(g_dir, NULL, &back, err, sizeof err), -EINVAL);
    if (!strstr(err, "files[0].size") || !strstr(err, "whole number"))
        fail_msg("the reason does not name the field: %s", err);
}

static void test_unwritable_dir_is_named(void **state)
{
    (void)state;
    struct hash_manifest m;
    char err[512] = "";
    assert_int_equal(hash_manifest_from_entries(NULL, 0, &m), 0);
    assert_true(statedir_applied_save("/nonexistent-ra-dir", NULL, &m, err, sizeof err) < 0);
    assert_non_null(strstr(err, "/nonexistent-ra-dir/" STATEDIR_APPLIED));
    hash_manifest_free(&m);
}

/* Thousands of files: refused with -EFBIG, and an older record goes with
 * it (never read back stale). */
static void test_too_large_removes_the_old_record(void **state)
{
    (void)state;
    struct hash_manifest m, back;
    char err[512] = "";
    assert_int_equal(hash_manifest_from_entries(NULL, 0, &m), 0);
    assert_int_equal(statedir_applied_save(g_dir, NULL, &m, err, sizeof err), 0);
    hash_manifest_free(&m);
    size_t n = 4000;
    struct hash_entry *v = calloc(n, sizeof *v);
    char(*names)[48] = calloc(n, sizeof *names);
    assert_non_null(v);
    assert_non_null(names);
    for (size_t i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "/etc/app/file-%05zu.conf", i);
        v[i].path = names[i];
        v[i].classes = HASH_CLASS_MAIN;
    }
    assert_int_equal(hash_manifest_from_entries(v, n, &m), 0);
    assert_int_equal(statedir_applied_save(g_dir, NULL, &m, err, sizeof err), -EFBIG);
    assert_non_null(strstr(err, "4000 files"));
    assert_int_equal(statedir_applied_load(g_dir, NULL, &back, err, sizeof err), 0);
    hash_manifest_free(&m);
    free(v);
    free(names);
}

static void test_restart_record_round_trip(void **state)
{
    (void)state;
    char err[512], hash[65], ls[400];
    struct statedir_restart out;
    memset(hash, 'a', 64);
    hash[64] = '\0';
    assert_int_equal(statedir_restart_take(g_dir, NULL, &out, err, sizeof err), 0); /* none yet */
    char *rec = statedir_restart_render(NULL, 88, hash, "/etc/app/a.conf, /etc/app/b");
    assert_int_equal(
        ra_record_write(g_dir, STATEDIR_RESTART_POD, rec, strlen(rec), err, sizeof err), 0);
    free(rec);
    entries(ls, sizeof ls);
    assert_string_equal(ls, STATEDIR_RESTART_POD " ");
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    assert_int_equal(statedir_restart_take(g_dir, NULL, &out, err, sizeof err), 1);
    assert_true(out.time_ms <= (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000);
    assert_true(out.time_ms > ((int64_t)now.tv_sec - 60) * 1000);
    assert_int_equal(out.exit_code, 88);
    assert_string_equal(out.hash, hash);
    assert_string_equal(out.files, "/etc/app/a.conf, /etc/app/b");
    statedir_restart_free(&out);
    /* taken once */
    assert_int_equal(statedir_restart_take(g_dir, NULL, &out, err, sizeof err), 0);
    entries(ls, sizeof ls);
    assert_string_equal(ls, "");
    /* no files named: NULL */
    rec = statedir_restart_render(NULL, 88, hash, NULL);
    write_named(STATEDIR_RESTART_POD, rec);
    free(rec);
    assert_int_equal(statedir_restart_take(g_dir, NULL, &out, err, sizeof err), 1);
    assert_null(out.files);
}

#define HEX63 "000000000000000000000000000000000000000000000000000000000000000"
#define HEX64 HEX63 "0"

static void test_restart_record_malformed_is_reported_and_removed(void **state)
{
    (void)state;
    char path[300], err[512];
    struct statedir_restart out;
    snprintf(path, sizeof path, "%s/" STATEDIR_RESTART_POD, g_dir);
    static const char *const bad[] = {
        "",
        "not json",
        "{\"time_ms\":\"soon\"}",
        "{\"time_ms\":1,\"exit_code\":88}",
        /* the format before the pod was named: no version */
        "{\"time_ms\":1,\"exit_code\":88,\"hash\":\"" HEX64 "\"}",
        /* issue 24 G8: numbers a cast cannot hold, or not whole, or out of range */
        "{" HEAD "\"time_ms\":1e300,\"exit_code\":88,\"hash\":\"" HEX64 "\"}",
        "{" HEAD "\"time_ms\":-1,\"exit_code\":88,\"hash\":\"" HEX64 "\"}",
        "{" HEAD "\"time_ms\":1.5,\"exit_code\":88,\"hash\":\"" HEX64 "\"}",
        "{" HEAD "\"time_ms\":1,\"exit_code\":1e300,\"hash\":\"" HEX64 "\"}",
        "{" HEAD "\"time_ms\":1,\"exit_code\":256,\"hash\":\"" HEX64 "\"}",
        "{" HEAD "\"time_ms\":1,\"exit_code\":-1,\"hash\":\"" HEX64 "\"}",
        /* a hash that is not 64 hex */
        "{" HEAD "\"time_ms\":1,\"exit_code\":88,\"hash\":\"abc\"}",
        "{" HEAD "\"time_ms\":1,\"exit_code\":88,\"hash\":\"" HEX63 "G\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_named(STATEDIR_RESTART_POD, bad[i]);
        int rc = statedir_restart_take(g_dir, NULL, &out, err, sizeof err);
        if (rc != -EINVAL) fail_msg("taken (%d): %s", rc, bad[i]);
        assert_non_null(strstr(err, "not the record reload-agent writes"));
        assert_non_null(strstr(err, path));
        assert_int_equal(access(path, F_OK), -1);
        assert_int_equal(statedir_restart_take(g_dir, NULL, &out, err, sizeof err), 0);
    }
}

/* Issue 24 U2: every record names the pod that wrote it; one from another
 * pod (name, UID or sandbox differ where both are known) is not used:
 * -ESTALE, naming both. */
static void test_records_of_another_pod_are_not_used(void **state)
{
    (void)state;
    struct hash_manifest m, back;
    struct statedir_restart rec;
    char err[1024] = "", hash[65];
    memset(hash, 'a', 64);
    hash[64] = '\0';
    assert_int_equal(hash_manifest_from_entries(NULL, 0, &m), 0);
    unsetenv("POD_UID");
    setenv("POD_NAME", "web-a", 1);
    assert_int_equal(statedir_applied_save(g_dir, NULL, &m, err, sizeof err), 0);
    assert_int_equal(statedir_applied_load(g_dir, NULL, &back, err, sizeof err), 1);
    hash_manifest_free(&back);
    setenv("POD_NAME", "web-b", 1);
    assert_int_equal(statedir_applied_load(g_dir, NULL, &back, err, sizeof err), -ESTALE);
    if (!strstr(err, STATEDIR_APPLIED) ||
        !strstr(err, "another pod (pod web-a, this one is web-b)"))
        fail_msg("err: %s", err);
    /* --pod-name is this pod's name when given */
    assert_int_equal(statedir_applied_load(g_dir, "web-a", &back, err, sizeof err), 1);
    hash_manifest_free(&back);
    /* the UID, when the pod gives it */
    setenv("POD_UID", "uid-1", 1);
    assert_int_equal(statedir_applied_save(g_dir, NULL, &m, err, sizeof err), 0);
    setenv("POD_UID", "uid-2", 1);
    assert_int_equal(statedir_applied_load(g_dir, NULL, &back, err, sizeof err), -ESTALE);
    assert_non_null(strstr(err, "pod UID uid-1, this one is uid-2"));
    unsetenv("POD_UID");
    assert_int_equal(statedir_applied_load(g_dir, NULL, &back, err, sizeof err), 1); /* unknown */
    hash_manifest_free(&back);
    /* the sandbox: another network namespace or another boot */
    write_record("{\"version\":2,\"pod\":{\"name\":\"\",\"uid\":\"\",\"sandbox\":"
                 "\"0-0-0/net:1\"},\"files\":[]}");
    assert_int_equal(statedir_applied_load(g_dir, NULL, &back, err, sizeof err), -ESTALE);
    assert_non_null(strstr(err, "sandbox 0-0-0/net:1, this one is "));
    /* the restart-pod record: not taken, and removed */
    setenv("POD_NAME", "web-a", 1);
    char *text = statedir_restart_render(NULL, 88, hash, NULL);
    write_named(STATEDIR_RESTART_POD, text);
    free(text);
    setenv("POD_NAME", "web-b", 1);
    assert_int_equal(statedir_restart_take(g_dir, NULL, &rec, err, sizeof err), -ESTALE);
    assert_non_null(strstr(err, "another pod (pod web-a, this one is web-b)"));
    assert_int_equal(statedir_restart_take(g_dir, NULL, &rec, err, sizeof err), 0);
    unsetenv("POD_NAME");
    hash_manifest_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
        cmocka_unit_test(test_unwritable_dir_is_named),
        cmocka_unit_test_setup_teardown(test_too_large_removes_the_old_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_record_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_records_of_another_pod_are_not_used, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_record_malformed_is_reported_and_removed,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
