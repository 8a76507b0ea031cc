/*
 * test_awlayout.c - aw_layout_complete (watch/awlayout.c) on real
 * directories laid out as the kubelet's AtomicWriter leaves them between
 * its steps: committed and linked, a new key not linked yet (step 10 to
 * come), a removed key's link still dangling (step 11 to come), a nested
 * key (one top-level link), no "..data", "..data" not a directory, a
 * missing root.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/helpers.h"
#include "watch/awlayout.h"

static char g_dir[64];

static void at(char *out, const char *rel) { snprintf(out, PATH_MAX, "%s/%s", g_dir, rel); }

static void mk(const char *rel)
{
    char p[PATH_MAX];
    at(p, rel);
    assert_int_equal(mkdir(p, 0755), 0);
}

static void file(const char *rel)
{
    char p[PATH_MAX];
    at(p, rel);
    write_file(p, "x\n");
}

static void link_(const char *target, const char *rel)
{
    char p[PATH_MAX];
    at(p, rel);
    assert_int_equal(symlink(target, p), 0);
}

static int setup(void **state)
{
    (void)state;
    if (make_tmpdir(g_dir, sizeof g_dir, "test_awlayout", 0) < 0) return -1;
    mk("..2026_01_01_00_00_00.1");
    file("..2026_01_01_00_00_00.1/a.conf");
    mk("..2026_01_01_00_00_00.1/sub");
    file("..2026_01_01_00_00_00.1/sub/b.conf");
    link_("..2026_01_01_00_00_00.1", "..data");
    link_("..data/a.conf", "a.conf");
    link_("..data/sub", "sub");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return remove_tmpdir(g_dir);
}

static void committed_and_linked(void **state)
{
    (void)state;
    assert_int_equal(aw_layout_complete(g_dir), 1);
}

static void new_key_without_its_link(void **state)
{
    (void)state;
    file("..2026_01_01_00_00_00.1/new.conf"); /* after step 9, before step 10 */
    assert_int_equal(aw_layout_complete(g_dir), 0);
    link_("..data/new.conf", "new.conf"); /* step 10 */
    assert_int_equal(aw_layout_complete(g_dir), 1);
}

static void removed_keys_link_dangles(void **state)
{
    (void)state;
    link_("..data/gone.conf", "gone.conf"); /* step 11 has not run */
    assert_int_equal(aw_layout_complete(g_dir), 1);
}

static void not_such_a_layout(void **state)
{
    (void)state;
    char p[PATH_MAX];
    at(p, "..data");
    assert_int_equal(unlink(p), 0);
    assert_int_equal(aw_layout_complete(g_dir), -ENOENT);
    write_file(p, "not a directory\n");
    assert_int_equal(aw_layout_complete(g_dir), -ENOTDIR);
    assert_int_equal(aw_layout_complete("/nonexistent/awlayout"), -ENOENT);
    assert_int_equal(aw_layout_complete(""), -EINVAL);
    assert_int_equal(aw_layout_complete(NULL), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(committed_and_linked, setup, teardown),
        cmocka_unit_test_setup_teardown(new_key_without_its_link, setup, teardown),
        cmocka_unit_test_setup_teardown(removed_keys_link_dangles, setup, teardown),
        cmocka_unit_test_setup_teardown(not_such_a_layout, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
