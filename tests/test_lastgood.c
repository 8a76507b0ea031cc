/*
 * test_lastgood.c - the --keep-last-good copies (run/lastgood.c) on real
 * temp directories: the kubelet's layout (..<timestamp>/, ..data renamed,
 * top-level links), a new version replacing the old one with the links of
 * removed names gone, the previous version kept and restored, a file that
 * changed since it was hashed refused (-EAGAIN, the copy untouched), the
 * leftovers of a stopped agent tidied, and the manifest of what the copy
 * shows in the engine's terms.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
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

#include "hash/hash.h"
#include "run/lastgood.h"

static char g_top[PATH_MAX], g_src[PATH_MAX + 8], g_dir[PATH_MAX + 8];

static void put(const char *rel, const char *content, mode_t mode)
{
    char p[2 * PATH_MAX], d[2 * PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", g_src, rel);
    snprintf(d, sizeof d, "%s", p);
    *strrchr(d, '/') = '\0';
    mkdir(d, 0755);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(content, f);
    fclose(f);
    chmod(p, mode);
}

static char *slurp(const char *rel)
{
    static char buf[256];
    char p[2 * PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", g_dir, rel);
    FILE *f = fopen(p, "r");
    if (!f) return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void manifest(struct hash_manifest *m)
{
    const char *roots[] = {g_src};
    assert_int_equal(hash_compute(roots, 1, NULL, m, NULL), 0);
}

static int versions(void)
{
    DIR *d = opendir(g_dir);
    struct dirent *de;
    int n = 0;
    assert_non_null(d);
    while ((de = readdir(d)))
        if (!strncmp(de->d_name, "..", 2) && de->d_name[2] && strcmp(de->d_name, "..data")) n++;
    closedir(d);
    return n;
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_top, sizeof g_top, "/tmp/test_lastgood.XXXXXX");
    assert_non_null(mkdtemp(g_top));
    snprintf(g_src, sizeof g_src, "%s/src", g_top);
    snprintf(g_dir, sizeof g_dir, "%s/live", g_top);
    assert_int_equal(mkdir(g_src, 0755), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_top);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static void test_layout_and_swap(void **state)
{
    (void)state;
    struct hash_manifest m;
    char err[512], old[LASTGOOD_TS_MAX], link[PATH_MAX], p[2 * PATH_MAX];
    put("app.conf", "v1\n", 0644);
    put("conf.d/a.conf", "a1\n", 0600);
    manifest(&m);
    assert_false(lastgood_has_copy(g_dir));
    assert_int_equal(lastgood_write(&m, g_src, g_src, g_dir, NULL, 0, err, sizeof err), 0);
    hash_manifest_free(&m);
    assert_true(lastgood_has_copy(g_dir));
    snprintf(p, sizeof p, "%s/..data", g_dir);
    ssize_t l = readlink(p, link, sizeof link - 1);
    assert_true(l > 2);
    link[l] = '\0';
    assert_int_equal(strncmp(link, "..", 2), 0);
    assert_null(strchr(link, '/'));
    snprintf(p, sizeof p, "%s/app.conf", g_dir);
    l = readlink(p, link, sizeof link - 1);
    link[l] = '\0';
    assert_string_equal(link, "..data/app.conf");
    assert_string_equal(slurp("app.conf"), "v1\n");
    assert_string_equal(slurp("conf.d/a.conf"), "a1\n");
    struct stat st;
    snprintf(p, sizeof p, "%s/conf.d/a.conf", g_dir);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600); /* the source's mode */

    /* v2 drops conf.d: its link goes, the old version is kept when asked */
    snprintf(p, sizeof p, "rm -rf '%s/conf.d'", g_src);
    assert_int_equal(system(p), 0);
    put("app.conf", "v2\n", 0644);
    put("new.conf", "n\n", 0644);
    manifest(&m);
    assert_int_equal(lastgood_write(&m, g_src, g_src, g_dir, old, sizeof old, err, sizeof err), 0);
    hash_manifest_free(&m);
    assert_true(old[0] == '.');
    assert_string_equal(slurp("app.conf"), "v2\n");
    assert_string_equal(slurp("new.conf"), "n\n");
    assert_null(slurp("conf.d/a.conf"));
    snprintf(p, sizeof p, "%s/conf.d", g_dir);
    assert_int_equal(lstat(p, &st), -1);
    assert_int_equal(versions(), 2);

    /* back to v1: conf.d is there again, new.conf gone, one version left */
    assert_int_equal(lastgood_restore(g_dir, old, err, sizeof err), 0);
    assert_string_equal(slurp("app.conf"), "v1\n");
    assert_string_equal(slurp("conf.d/a.conf"), "a1\n");
    assert_null(slurp("new.conf"));
    assert_int_equal(versions(), 1);
}

static void test_changed_content_is_refused(void **state)
{
    (void)state;
    struct hash_manifest m;
    char err[512];
    put("app.conf", "v1\n", 0644);
    manifest(&m);
    assert_int_equal(lastgood_write(&m, g_src, g_src, g_dir, NULL, 0, err, sizeof err), 0);
    hash_manifest_free(&m);
    put("app.conf", "v2\n", 0644);
    manifest(&m);
    put("app.conf", "v3, after the hash\n", 0644);
    assert_int_equal(lastgood_write(&m, g_src, g_src, g_dir, NULL, 0, err, sizeof err), -EAGAIN);
    assert_non_null(strstr(err, "changed while it was copied"));
    assert_string_equal(slurp("app.conf"), "v1\n"); /* untouched */
    assert_int_equal(versions(), 1);                /* the half-made version went */
    hash_manifest_free(&m);
    /* a file root is not a directory to copy */
    char file[2 * PATH_MAX];
    snprintf(file, sizeof file, "%s/app.conf", g_src);
    const char *roots[] = {file};
    assert_int_equal(hash_compute(roots, 1, NULL, &m, NULL), 0);
    assert_int_equal(lastgood_write(&m, file, g_src, g_dir, NULL, 0, err, sizeof err), -ENOTDIR);
    hash_manifest_free(&m);
}

static void test_tidy_and_manifest(void **state)
{
    (void)state;
    struct hash_manifest m, live;
    char err[512], p[2 * PATH_MAX];
    put("app.conf", "v1\n", 0644);
    manifest(&m);
    assert_int_equal(lastgood_write(&m, g_src, g_src, g_dir, NULL, 0, err, sizeof err), 0);
    /* a stopped agent's leftovers */
    snprintf(p, sizeof p, "%s/..2026_01_01_00_00_00.abcdef", g_dir);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/..data_tmp", g_dir);
    assert_int_equal(symlink("..2026_01_01_00_00_00.abcdef", p), 0);
    assert_int_equal(versions(), 3);
    lastgood_tidy(g_dir);
    assert_int_equal(versions(), 1);
    assert_string_equal(slurp("app.conf"), "v1\n");
    /* what the copy shows, with the source's paths: the same manifest */
    assert_int_equal(lastgood_manifest(&m, g_src, g_dir, &live, err, sizeof err), 0);
    assert_memory_equal(live.total, m.total, HASH_LEN);
    hash_manifest_free(&live);
    put("app.conf", "v2\n", 0644);
    struct hash_manifest m2;
    manifest(&m2);
    assert_int_equal(lastgood_manifest(&m2, g_src, g_dir, &live, err, sizeof err), 0);
    assert_memory_equal(live.total, m.total, HASH_LEN); /* the copy still shows v1 */
    hash_manifest_free(&live);
    hash_manifest_free(&m2);
    hash_manifest_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_layout_and_swap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_changed_content_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tidy_and_manifest, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
