/*
 * test_hash.c - unit tests of hash/hash.c on real directories.
 *
 * Expected values never come from the code under test: each test lists the
 * files it expects (logical path and content, in the bytewise order the
 * contract demands), digests each content with the sha256sum tool, writes
 * the manifest of docs/hash.md (contract v2: sha256sum's own line format) to
 * a file and hashes that with sha256sum. Where the test can, the manifest
 * itself comes from sha256sum run over the files.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "hash/hash.h"
#include "hash/hash_test.h"

static char g_tmp[256]; /* this test's scratch directory */
static char g_cwd[PATH_MAX];

/* ---- filesystem helpers ---------------------------------------------- */

/* Returns g_tmp/<rel> in one of a few rotating buffers. */
static const char *P(const char *fmt, ...)
{
    static char bufs[8][PATH_MAX];
    static int k;
    char rel[PATH_MAX - 512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    char *b = bufs[k++ % 8];
    snprintf(b, PATH_MAX, "%s/%s", g_tmp, rel);
    return b;
}

static void mkdirs(const char *path)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        mkdir(p, 0755);
        *s = '/';
    }
    mkdir(p, 0755);
}

static void put(const char *path, const void *data, size_t len)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    assert_non_null(slash);
    *slash = '\0';
    mkdirs(dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
}

static void link_(const char *target, const char *path)
{
    assert_int_equal(symlink(target, path), 0);
}

static void sh(const char *fmt, ...)
{
    char cmd[2 * PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    assert_int_equal(system(cmd), 0);
}

/* ---- the independent oracle ------------------------------------------ */

/* sha256sum of a file, as 64 hex digits. */
static void sha256sum_file(const char *path, char hex[HASH_HEX_LEN + 1])
{
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "sha256sum '%s'", path);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    assert_non_null(fgets(hex, HASH_HEX_LEN + 1, f));
    assert_int_equal(strlen(hex), HASH_HEX_LEN);
    assert_int_equal(pclose(f), 0);
}

static void sha256sum_bytes(const void *data, size_t len, char hex[HASH_HEX_LEN + 1])
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.bytes", g_tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
    sha256sum_file(tmp, hex);
    unlink(tmp);
}

struct exp {
    const char *rel; /* logical path after the prefix */
    const char *data;
    size_t len;
};
#define E(rel, str)                                                                                \
    {                                                                                              \
        rel, str, sizeof(str) - 1                                                                  \
    }

/* One manifest line as GNU sha256sum prints it, written here from the
 * contract's text (the tests below also compare it with sha256sum's own). */
static void put_line(FILE *f, const char *hex, const char *path)
{
    if (strpbrk(path, "\\\n")) fputc('\\', f);
    fprintf(f, "%s  ", hex);
    for (const char *p = path; *p; p++) {
        if (*p == '\\')
            fputs("\\\\", f);
        else if (*p == '\n')
            fputs("\\n", f);
        else
            fputc(*p, f);
    }
    fputc('\n', f);
}

/* sha256sum of the manifest of e[0..n) with logical paths prefix+rel. */
static void manifest_hex(const char *prefix, const struct exp *e, size_t n,
                         char hex[HASH_HEX_LEN + 1])
{
    char tmp[PATH_MAX], path[PATH_MAX], d[HASH_HEX_LEN + 1];
    snprintf(tmp, sizeof tmp, "%s.manifest", g_tmp);
    FILE *f = fopen(tmp, "wb");
    assert_non_null(f);
    for (size_t i = 0; i < n; i++) {
        sha256sum_bytes(e[i].data, e[i].len, d);
        snprintf(path, sizeof path, "%s%s", prefix, e[i].rel);
        put_line(f, d, path);
    }
    assert_int_equal(fclose(f), 0);
    sha256sum_file(tmp, hex);
    unlink(tmp);
}

/* Asserts m holds exactly e[0..n), in that order, with the right digests. */
static void expect_manifest(const struct hash_manifest *m, const char *prefix, const struct exp *e,
                            size_t n)
{
    char want[HASH_HEX_LEN + 1], got[HASH_HEX_LEN + 1], path[PATH_MAX];
    assert_int_equal(m->n, n);
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s%s", prefix, e[i].rel);
        assert_string_equal(m->v[i].path, path);
        assert_int_equal(m->v[i].size, e[i].len);
        sha256sum_bytes(e[i].data, e[i].len, want);
        hash_hex(m->v[i].digest, got);
        assert_string_equal(got, want);
    }
    manifest_hex(prefix, e, n, want);
    hash_hex(m->total, got);
    assert_string_equal(got, want);
}

/* Runs the shell command cmd, which prints a manifest, into a file; the
 * manifest's text goes to text (NUL-terminated, at most cap bytes) and its
 * sha256sum to hex. */
static void manifest_of(const char *cmd, char *text, size_t cap, char hex[HASH_HEX_LEN + 1])
{
    char tmp[PATH_MAX], full[4 * PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.manifest", g_tmp);
    snprintf(full, sizeof full, "(%s) > '%s'", cmd, tmp);
    sh("%s", full);
    FILE *f = fopen(tmp, "rb");
    assert_non_null(f);
    size_t got = fread(text, 1, cap - 1, f);
    assert_true(got < cap - 1); /* all of it */
    text[got] = '\0';
    fclose(f);
    sha256sum_file(tmp, hex);
    unlink(tmp);
}

/* A hash_manifest_line sink that appends to a NUL-terminated buffer. */
struct strbuf {
    char *p;
    size_t n, cap;
};

static void put_str(void *ud, const void *p, size_t n)
{
    struct strbuf *b = ud;
    assert_true(b->n + n < b->cap);
    memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = '\0';
}

/* ---- warnings collector ---------------------------------------------- */

struct warns {
    size_t n;
    enum hash_warning w[32];
    char path[32][PATH_MAX];
};

static void on_warn(void *ud, enum hash_warning w, const char *lpath)
{
    struct warns *ws = ud;
    assert_true(ws->n < 32);
    ws->w[ws->n] = w;
    snprintf(ws->path[ws->n], PATH_MAX, "%s", lpath);
    ws->n++;
}

/* Asserts a warning of kind w was reported for logical path. */
static void expect_warn(const struct warns *ws, enum hash_warning w, const char *path)
{
    for (size_t i = 0; i < ws->n; i++)
        if (ws->w[i] == w && strcmp(ws->path[i], path) == 0) return;
    fail_msg("no warning %d for %s", (int)w, path);
}

static int compute1(const char *root, struct warns *ws, struct hash_manifest *m)
{
    struct hash_opts o = {.warn = on_warn, .ud = ws};
    const char *roots[] = {root};
    struct hash_error err;
    int rc = hash_compute(roots, 1, &o, m, &err);
    if (rc) fprintf(stderr, "hash_compute: %d %s %s\n", rc, err.op, err.path);
    return rc;
}

/* ---- fixtures -------------------------------------------------------- */

static unsigned g_hook_calls; /* attempts of the last computation */
static void (*g_hook_action)(unsigned attempt);

static void hook(unsigned attempt)
{
    if (attempt == 0) g_hook_calls = 0;
    assert_int_equal(attempt, g_hook_calls);
    g_hook_calls++;
    if (g_hook_action) g_hook_action(attempt);
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_tmp, sizeof g_tmp, "/tmp/test_hash.XXXXXX");
    if (!mkdtemp(g_tmp)) return -1;
    if (!getcwd(g_cwd, sizeof g_cwd)) return -1;
    g_hook_calls = 0;
    g_hook_action = NULL;
    hash__test_after_walk = hook;
    return 0;
}

/* As setup, with directory-entry types ignored: every entry is stat'ed. */
static int setup_no_dtype(void **state)
{
    hash__test_no_dtype = 1;
    return setup(state);
}

static int teardown(void **state)
{
    char cmd[PATH_MAX + 64];
    (void)state;
    hash__test_after_walk = NULL;
    hash__test_no_dtype = 0;
    if (chdir(g_cwd) != 0) return -1;
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s' && rm -rf '%s'", g_tmp, g_tmp);
    return system(cmd) == 0 ? 0 : -1;
}

/* kubelet AtomicWriter: writes files into a new timestamped dir of vol. */
static void aw_payload(const char *vol, const char *ts, const struct exp *e, size_t n)
{
    char p[PATH_MAX];
    for (size_t i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s/%s/%s", vol, ts, e[i].rel);
        put(p, e[i].data, e[i].len);
    }
}

/* The atomic switch: ..data_tmp -> ts, renamed over ..data. */
static void aw_switch(const char *vol, const char *ts)
{
    char tmp[PATH_MAX], data[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/..data_tmp", vol);
    snprintf(data, sizeof data, "%s/..data", vol);
    link_(ts, tmp);
    assert_int_equal(rename(tmp, data), 0);
}

static void aw_key_link(const char *vol, const char *key)
{
    char target[PATH_MAX], p[PATH_MAX];
    snprintf(target, sizeof target, "..data/%s", key);
    snprintf(p, sizeof p, "%s/%s", vol, key);
    link_(target, p);
}

/* ---- tests ----------------------------------------------------------- */

static void test_empty_root_and_empty_hash(void **state)
{
    (void)state;
    struct hash_manifest m;
    struct warns ws = {0};
    char want[HASH_HEX_LEN + 1], got[HASH_HEX_LEN + 1];
    unsigned char e[HASH_LEN];
    mkdirs(P("v"));
    assert_int_equal(compute1(P("v"), &ws, &m), 0);
    sha256sum_file("/dev/null", want);
    hash_hex(m.total, got);
    assert_string_equal(got, want);
    hash_empty(e);
    hash_hex(e, got);
    assert_string_equal(got, want);
    assert_int_equal(m.n, 0);
    assert_int_equal(ws.n, 0);
    hash_manifest_free(&m);
    hash_manifest_free(&m); /* safe on a zeroed manifest */
}

static void test_missing_root(void **state)
{
    (void)state;
    struct hash_manifest m;
    struct hash_error err;
    const char *roots[] = {P("nope")};
    assert_int_equal(hash_compute(roots, 1, NULL, &m, &err), -ENOENT);
    assert_int_equal(err.code, -ENOENT);
    assert_string_equal(err.op, "stat");
    assert_string_equal(err.path, P("nope"));
    assert_int_equal(m.n, 0);
    hash_manifest_free(&m);
}

static void test_kubelet_layout(void **state)
{
    (void)state;
    const char *ts = "..2024_05_01_12_00_00.123";
    const struct exp payload[] = {
        E("a.conf", "alpha=1\n"),         E("b.conf", "beta=2\n"),
        E("conf/app.yaml", "port: 80\n"), E("conf/..x", "deeper dot-dot names are user content\n"),
        E("conf/sub/deep.txt", "deep"),
    };
    aw_payload(P("v"), ts, payload, 5);
    link_(ts, P("v/..data"));
    aw_key_link(P("v"), "a.conf");
    aw_key_link(P("v"), "b.conf");
    aw_key_link(P("v"), "conf");
    put(P("v/..private"), "hidden", 6); /* top-level ".." names are skipped */
    struct hash_manifest m;
    struct warns ws = {0};
    assert_int_equal(compute1(P("v"), &ws, &m), 0);
    const struct exp want[] = {payload[0], payload[1], payload[3], payload[2], payload[4]};
    expect_manifest(&m, P("v/"), want, 5);
    assert_int_equal(ws.n, 0);
    assert_int_equal(g_hook_calls, 1); /* stable: no rewalk */
    hash_manifest_free(&m);
}

static void test_plain_nested_empty_binary_fifo(void **state)
{
    (void)state;
    static const char bin[] = {0, 1, 2, 0, (char)0xff, 0, '\n', 0};
    put(P("v/empty"), "", 0);
    put(P("v/bin.dat"), bin, sizeof bin);
    put(P("v/d1/d2/d3/leaf"), "leaf\n", 5);
    put(P("v/d1/top"), "top", 3);
    mkdirs(P("v/emptydir"));
    assert_int_equal(mkfifo(P("v/d1/fifo"), 0644), 0);
    struct hash_manifest m;
    struct warns ws = {0};
    assert_int_equal(compute1(P("v"), &ws, &m), 0);
    const struct exp want[] = {
        {"bin.dat", bin, sizeof bin},
        E("d1/d2/d3/leaf", "leaf\n"),
        E("d1/top", "top"),
        E("empty", ""),
    };
    expect_manifest(&m, P("v/"), want, 4);
    assert_int_equal(ws.n, 1);
    expect_warn(&ws, HASH_WARN_SPECIAL, P("v/d1/fifo"));
    hash_manifest_free(&m);
}

static void test_escaping_symlinks(void **state)
{
    (void)state;
    put(P("outside/secret"), "secret", 6);
    put(P("v/a"), "a", 1);
    put(P("v/sub/b"), "b", 1);
    link_(P("outside/secret"), P("v/abs_escape"));
    link_("../outside/secret", P("v/rel_escape"));
    link_("../outside", P("v/dir_escape"));
    link_("/etc", P("v/sub/etc"));
    link_("../../v/a", P("v/sub/back_in")); /* leaves and re-enters: inside */
    link_("sub", P("v/sublink"));           /* a directory link inside */
    /* a root prefix that is not the root: v2 starts with "v" */
    put(P("v2/x"), "x", 1);
    link_("../v2/x", P("v/prefix_trap"));
    struct hash_manifest m;
    struct warns ws = {0};
    assert_int_equal(compute1(P("v"), &ws, &m), 0);
    const struct exp want[] = {
        E("a", "a"),         E("sub/b", "b"),           E("sub/back_in", "a"),
        E("sublink/b", "b"), E("sublink/back_in", "a"),
    };
    expect_manifest(&m, P("v/"), want, 5);
    assert_int_equal(ws.n, 6); /* sub/etc is met twice: through sub and sublink */
    expect_warn(&ws, HASH_WARN_ESCAPING_SYMLINK, P("v/abs_escape"));
    expect_warn(&ws, HASH_WARN_ESCAPING_SYMLINK, P("v/rel_escape"));
    expect_warn(&ws, HASH_WARN_ESCAPING_SYMLINK, P("v/dir_escape"));
    expect_warn(&ws, HASH_WARN_ESCAPING_SYMLINK, P("v/prefix_trap"));
    expect_warn(&ws, HASH_WARN_ESCAPING_SYMLINK, P("v/sub/etc"));
    expect_warn(&ws, HASH_WARN_ESCAPING_SYMLINK, P("v/sublink/etc"));
    hash_manifest_free(&m);
}

static void test_symlink_loop_and_dir_cycle(void **state)
{
    (void)state;
    put(P("v/f"), "f", 1);
    put(P("v/d/g"), "g", 1);
    link_("self", P("v/self"));
    link_("pong", P("v/ping"));
    link_("ping", P("v/pong"));
    link_("..", P("v/d/up"));  /* the root: an ancestor on the walk path */
    link_(".", P("v/d/here")); /* d itself */
    link_(".", P("v/again"));  /* the root from the top level */
    struct hash_manifest m;
    struct warns ws = {0};
    assert_int_equal(compute1(P("v"), &ws, &m), 0);
    const struct exp want[] = {E("d/g", "g"), E("f", "f")};
    expect_manifest(&m, P("v/"), want, 2);
    assert_int_equal(ws.n, 6);
    expect_warn(&ws, HASH_WARN_LOOP, P("v/self"));
    expect_warn(&ws, HASH_WARN_LOOP, P("v/ping"));
    expect_warn(&ws, HASH_WARN_LOOP, P("v/pong"));
    expect_warn(&ws, HASH_WARN_LOOP, P("v/d/up"));
    expect_warn(&ws, HASH_WARN_LOOP, P("v/d/here"));
    expect_warn(&ws, HASH_WARN_LOOP, P("v/again"));
    hash_manifest_free(&m);
}

static void test_depth_cap(void **state)
{
    (void)state;
    char rel[3 * (HASH_MAX_DEPTH + 2)] = "v";
    char at_cap[sizeof rel + 4], too_deep[sizeof rel + 4];
    for (int i = 1; i <= HASH_MAX_DEPTH + 1; i++) {
        strcat(rel, "/d");
        if (i == HASH_MAX_DEPTH) snprintf(at_cap, sizeof at_cap, "%s/f", rel);
    }
    snprintf(too_deep, sizeof too_deep, "%s/f", rel);
    put(P("%s", at_cap), "ok", 2);
    put(P("%s", too_deep), "no", 2);
    struct hash_manifest m;
    struct warns ws = {0};
    assert_int_equal(compute1(P("v"), &ws, &m), 0);
    const struct exp want[] = {{at_cap + 2, "ok", 2}};
    expect_manifest(&m, P("v/"), want, 1);
    assert_int_equal(ws.n, 1);
    *strrchr(too_deep, '/') = '\0';
    expect_warn(&ws, HASH_WARN_LOOP, P("%s", too_deep));
    hash_manifest_free(&m);
}

static void test_names_are_bytes_sorted_bytewise(void **state)
{
    (void)state;
    const char *names[] = {"a",        "B",    "caf\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac.txt",
                           "\xff\xfe", "x\ny", "back\\slash", "a-b",
                           "a.b"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        put(P("v/%s", names[i]), names[i], strlen(names[i]));
    struct hash_manifest m;
    struct warns ws = {0};
    assert_int_equal(compute1(P("v"), &ws, &m), 0);
    /* bytewise: 'B' 0x42 < 'a' 0x61; "a" < "a-b" < "a.b"; 0xc3 < 0xe6 < 0xff */
    const struct exp want[] = {
        E("B", "B"),
        E("a", "a"),
        E("a-b", "a-b"),
        E("a.b", "a.b"),
        E("back\\slash", "back\\slash"),
        E("caf\xc3\xa9", "caf\xc3\xa9"),
        E("x\ny", "x\ny"),
        E("\xe6\x97\xa5\xe6\x9c\xac.txt", "\xe6\x97\xa5\xe6\x9c\xac.txt"),
        E("\xff\xfe", "\xff\xfe"),
    };
    expect_manifest(&m, P("v/"), want, 9);
    /* the manifest lines are sha256sum's own, escapes included: sha256sum
     * over the same files in the same order prints the same text */
    static char want_text[16384], got_text[16384];
    char want_hex[HASH_HEX_LEN + 1], got_hex[HASH_HEX_LEN + 1];
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "export LC_ALL=C; sha256sum '%s'/*", P("v"));
    manifest_of(cmd, want_text, sizeof want_text, want_hex);
    struct strbuf b = {got_text, 0, sizeof got_text};
    got_text[0] = '\0';
    for (size_t i = 0; i < m.n; i++) hash_manifest_line(&m.v[i], put_str, &b);
    assert_string_equal(got_text, want_text);
    assert_non_null(strstr(got_text, "\\")); /* the escaped lines were there */
    hash_hex(m.total, got_hex);
    assert_string_equal(got_hex, want_hex);
    hash_manifest_free(&m);
}

static void test_file_roots(void **state)
{
    (void)state;
    const char *ts = "..2024_01_01_00_00_00.1";
    const struct exp payload[] = {E("annotations", "reload-agent.io/action=\"signal\"\n")};
    aw_payload(P("podinfo"), ts, payload, 1);
    link_(ts, P("podinfo/..data"));
    aw_key_link(P("podinfo"), "annotations");
    put(P("plain.txt"), "plain", 5);
    const char *roots[] = {P("podinfo/annotations"), P("plain.txt")};
    struct hash_manifest m;
    assert_int_equal(hash_compute(roots, 2, NULL, &m, NULL), 0);
    const struct exp want[] = {E("plain.txt", "plain"),
                               E("podinfo/annotations", "reload-agent.io/action=\"signal\"\n")};
    expect_manifest(&m, P(""), want, 2);
    hash_manifest_free(&m);

    /* a file given with a trailing slash is not a directory */
    struct hash_error err;
    const char *bad[] = {P("plain.txt/")};
    assert_int_equal(hash_compute(bad, 1, NULL, &m, &err), -ENOTDIR);
    assert_string_equal(err.op, "stat");
}

static void test_two_roots_sorted_together(void **state)
{
    (void)state;
    put(P("x/a/f"), "af", 2);
    put(P("x/a/z"), "az", 2);
    put(P("x/a.d/g"), "adg", 3);
    /* given as a, a.d: "x/a.d/g" sorts before "x/a/f" ('.' < '/') */
    const char *roots[] = {P("x/a"), P("x/a.d")};
    struct hash_manifest m;
    assert_int_equal(hash_compute(roots, 2, NULL, &m, NULL), 0);
    const struct exp want[] = {E("a.d/g", "adg"), E("a/f", "af"), E("a/z", "az")};
    expect_manifest(&m, P("x/"), want, 3);
    hash_manifest_free(&m);
}

static void test_relative_trailing_slash_and_overlap(void **state)
{
    (void)state;
    put(P("v/f"), "f", 1);
    put(P("v/sub/g"), "g", 1);
    assert_int_equal(chdir(g_tmp), 0);
    const struct exp want[] = {E("v/f", "f"), E("v/sub/g", "g")};
    const char *forms[][3] = {{"v"}, {"v/"}, {"v//"}, {"v", "v/", "v/sub"}};
    const size_t nforms[] = {1, 1, 1, 3};
    for (size_t i = 0; i < 4; i++) {
        struct hash_manifest m;
        assert_int_equal(hash_compute(forms[i], nforms[i], NULL, &m, NULL), 0);
        expect_manifest(&m, "", want, 2);
        hash_manifest_free(&m);
    }
}

/* Child side of the unreadable tests: exit 0 when hash_compute fails with
 * EACCES, op and path as expected. */
static int unreadable_child(const char *root, const char *op, const char *path)
{
    if (geteuid() == 0 && (setgroups(0, NULL) || setgid(65534) || setuid(65534))) return 10;
    struct hash_manifest m;
    struct hash_error err;
    const char *roots[] = {root};
    int rc = hash_compute(roots, 1, NULL, &m, &err);
    if (rc != -EACCES || err.code != -EACCES) return 11;
    if (strcmp(err.op, op) != 0 || strcmp(err.path, path) != 0) return 12;
    return m.n == 0 && m.v == NULL ? 0 : 13;
}

static void expect_unreadable(const char *root, const char *op, const char *path)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(unreadable_child(root, op, path));
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_unreadable_file_and_dir(void **state)
{
    (void)state;
    assert_int_equal(chmod(g_tmp, 0755), 0); /* reachable by uid 65534 */
    put(P("v/ok"), "ok", 2);
    put(P("v/locked"), "nope", 4);
    assert_int_equal(chmod(P("v/locked"), 0), 0);
    expect_unreadable(P("v"), "open", P("v/locked"));
    assert_int_equal(unlink(P("v/locked")), 0);
    put(P("v/closed/x"), "x", 1);
    assert_int_equal(chmod(P("v/closed"), 0), 0);
    expect_unreadable(P("v"), "opendir", P("v/closed"));
}

/* Child side of the fd-limit tests: lowers RLIMIT_NOFILE so that exactly
 * `spare` more descriptors can be opened, then exits 0 when hash_compute
 * fails with EMFILE (the real errno, not what a later call left behind),
 * op and path as expected. */
static int emfile_child(const char *root, int spare, const char *op, const char *path)
{
    int lowest = open("/dev/null", O_RDONLY | O_CLOEXEC), fds[8], n = 0;
    if (lowest < 0) return 10;
    close(lowest);
    struct rlimit rl = {(rlim_t)(lowest + spare), (rlim_t)(lowest + spare)};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return 11;
    while (n < 8 && (fds[n] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0) n++;
    int e = errno, got = n;
    while (n > 0) close(fds[--n]);
    if (got != spare) return 17; /* a gap below the limit would let more through */
    if (e != EMFILE) return 12;
    struct hash_manifest m;
    struct hash_error err;
    const char *roots[] = {root};
    int rc = hash_compute(roots, 1, NULL, &m, &err);
    if (rc != err.code) return 13;
    if (rc != -EMFILE) {
        fprintf(stderr, "emfile_child: %s %s: %s, want EMFILE\n", err.op, err.path, strerror(-rc));
        return 14;
    }
    if (strcmp(err.op, op) != 0 || strcmp(err.path, path) != 0) {
        fprintf(stderr, "emfile_child: %s %s, want %s %s\n", err.op, err.path, op, path);
        return 15;
    }
    return m.n == 0 && m.v == NULL ? 0 : 16;
}

static void expect_emfile(const char *root, int spare, const char *op, const char *path)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(emfile_child(root, spare, op, path));
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* Issue 9 F13: at the fd limit the error is EMFILE at every step that
 * opens something (the root, a directory below it, a file root), never the
 * errno of a call made after the failure. */
static void test_fd_limit_reports_emfile(void **state)
{
    (void)state;
    put(P("v/d/f"), "f", 1);
    expect_emfile(P("v"), 0, "opendir", P("v"));
    expect_emfile(P("v"), 1, "opendir", P("v/d"));
    expect_emfile(P("v/d/f"), 0, "open", P("v/d/f"));
    /* the message names the limit */
    assert_string_equal(hash_strerror(-EMFILE),
                        "too many open files in this process (RLIMIT_NOFILE)");
    assert_string_equal(hash_strerror(-ENFILE), "too many open files in the system (fs.file-max)");
    assert_string_equal(hash_strerror(-ENOENT), strerror(ENOENT));
}

static void test_diff_and_copy(void **state)
{
    (void)state;
    put(P("v/same"), "same", 4);
    put(P("v/gone"), "gone", 4);
    put(P("v/edit"), "old!", 4);
    put(P("v/grow"), "g", 1);
    struct hash_manifest a, b, c, empty = {0};
    struct warns ws = {0};
    assert_int_equal(compute1(P("v"), &ws, &a), 0);
    assert_int_equal(unlink(P("v/gone")), 0);
    put(P("v/edit"), "new!", 4); /* same size, new digest */
    put(P("v/grow"), "gg", 2);
    put(P("v/added"), "added", 5);
    assert_int_equal(compute1(P("v"), &ws, &b), 0);

    struct hash_diff d;
    assert_int_equal(hash_diff(&a, &b, &d), 0);
    assert_int_equal(d.nadded, 1);
    assert_string_equal(d.added[0], P("v/added"));
    assert_int_equal(d.nremoved, 1);
    assert_string_equal(d.removed[0], P("v/gone"));
    assert_int_equal(d.nmodified, 2);
    assert_string_equal(d.modified[0], P("v/edit"));
    assert_string_equal(d.modified[1], P("v/grow"));
    hash_diff_free(&d);

    assert_int_equal(hash_diff(&empty, &b, &d), 0);
    assert_int_equal(d.nadded, 4);
    assert_int_equal(d.nremoved + d.nmodified, 0);
    hash_diff_free(&d);
    assert_int_equal(hash_diff(&a, &empty, &d), 0);
    assert_int_equal(d.nremoved, 4);
    assert_int_equal(d.nadded + d.nmodified, 0);
    hash_diff_free(&d);

    assert_int_equal(hash_manifest_copy(&b, &c), 0);
    hash_manifest_free(&b); /* the copy must not share memory */
    const struct exp want[] = {E("added", "added"), E("edit", "new!"), E("grow", "gg"),
                               E("same", "same")};
    expect_manifest(&c, P("v/"), want, 4);
    assert_int_equal(hash_diff(&c, &c, &d), 0);
    assert_int_equal(d.nadded + d.nremoved + d.nmodified, 0);
    hash_diff_free(&d);
    hash_manifest_free(&a);
    hash_manifest_free(&c);
}

static unsigned classify(void *ud, const char *path)
{
    size_t n = strlen(path);
    (*(unsigned *)ud)++;
    if (n > 4 && strcmp(path + n - 4, ".tmp") == 0) return 0;
    if (n >= 11 && strcmp(path + n - 11, "jvm.options") == 0)
        return HASH_CLASS_MAIN | HASH_CLASS_SUB;
    return HASH_CLASS_MAIN;
}

static void test_select_ignore_and_sub(void **state)
{
    (void)state;
    put(P("v/app.conf"), "conf", 4);
    put(P("v/scratch.tmp"), "tmp", 3);
    put(P("v/jvm/jvm.options"), "-Xmx1g", 6);
    unsigned calls = 0;
    struct hash_opts o = {.select = classify, .ud = &calls};
    const char *roots[] = {P("v")};
    struct hash_manifest m;
    assert_int_equal(hash_compute(roots, 1, &o, &m, NULL), 0);
    assert_int_equal(calls, 3);
    const struct exp want[] = {E("app.conf", "conf"), E("jvm/jvm.options", "-Xmx1g")};
    expect_manifest(&m, P("v/"), want, 2);
    assert_int_equal(m.v[0].classes, HASH_CLASS_MAIN);
    assert_int_equal(m.v[1].classes, HASH_CLASS_MAIN | HASH_CLASS_SUB);
    assert_int_equal(m.nsub, 1);
    char want_sub[HASH_HEX_LEN + 1], got[HASH_HEX_LEN + 1];
    manifest_hex(P("v/"), &want[1], 1, want_sub);
    hash_hex(m.sub, got);
    assert_string_equal(got, want_sub);
    hash_manifest_free(&m);
}

static void test_ten_thousand_files(void **state)
{
    (void)state;
    static char names[10000][16], data[10000][16];
    static struct exp want[10000];
    for (int d = 0; d < 100; d++) {
        for (int f = 0; f < 100; f++) {
            int i = d * 100 + f;
            snprintf(names[i], sizeof names[i], "d%03d/f%03d", d, f);
            snprintf(data[i], sizeof data[i], "content %d\n", i);
            want[i] = (struct exp){names[i], data[i], strlen(data[i])};
            put(P("v/%s", names[i]), data[i], want[i].len);
        }
    }
    struct hash_manifest m;
    struct warns ws = {0};
    assert_int_equal(compute1(P("v"), &ws, &m), 0);
    assert_int_equal(m.n, 10000);
    /* the whole manifest and its hash from coreutils alone */
    static char want_text[10000 * 128], got_text[10000 * 128];
    char want_hex[HASH_HEX_LEN + 1], got[HASH_HEX_LEN + 1], cmd[PATH_MAX + 128];
    snprintf(cmd, sizeof cmd, "find '%s' -type f | LC_ALL=C sort | xargs sha256sum", P("v"));
    manifest_of(cmd, want_text, sizeof want_text, want_hex);
    struct strbuf b = {got_text, 0, sizeof got_text};
    got_text[0] = '\0';
    for (size_t i = 0; i < m.n; i++) hash_manifest_line(&m.v[i], put_str, &b);
    assert_string_equal(got_text, want_text);
    hash_hex(m.total, got);
    assert_string_equal(got, want_hex);
    hash_manifest_free(&m);
}

/* Rewalk scenarios: a kubelet volume with keys a and conf/x at ts1. */
static const struct exp v1[] = {E("a", "one"), E("conf/x", "x1")};
static const struct exp v2[] = {E("b", "two!"), E("conf/x", "x2, longer")};

static void make_v1(void)
{
    aw_payload(P("v"), "..ts1", v1, 2);
    link_("..ts1", P("v/..data"));
    aw_key_link(P("v"), "a");
    aw_key_link(P("v"), "conf");
}

/* A complete AtomicWriter update from v1 to v2 (key a removed, b added). */
static void full_swap(unsigned attempt)
{
    if (attempt != 0) return;
    aw_payload(P("v"), "..ts2", v2, 2);
    aw_switch(P("v"), "..ts2");
    aw_key_link(P("v"), "b");
    assert_int_equal(unlink(P("v/a")), 0);
    sh("rm -rf '%s'", P("v/..ts1"));
}

static void test_rewalk_on_full_swap(void **state)
{
    (void)state;
    make_v1();
    g_hook_action = full_swap;
    struct hash_manifest m;
    struct warns ws = {0};
    assert_int_equal(compute1(P("v"), &ws, &m), 0);
    assert_int_equal(g_hook_calls, 2);
    expect_manifest(&m, P("v/"), v2, 2);
    assert_int_equal(ws.n, 0);
    hash_manifest_free(&m);
}

/* Only the switch: the old files stay readable, the ..data check must see it. */
static void switch_only(unsigned attempt)
{
    if (attempt != 0) return;
    const struct exp same_keys[] = {E("a", "one, new"), E("conf/x", "x3")};
    aw_payload(P("v"), "..ts2", same_keys, 2);
    aw_switch(P("v"), "..ts2");
}

static void test_rewalk_on_data_link_change(void **state)
{
    (void)state;
    make_v1();
    g_hook_action = switch_only;
    struct hash_manifest m;
    struct warns ws = {0};
    assert_int_equal(compute1(P("v"), &ws, &m), 0);
    assert_int_equal(g_hook_calls, 2);
    const struct exp want[] = {E("a", "one, new"), E("conf/x", "x3")};
    expect_manifest(&m, P("v/"), want, 2);
    hash_manifest_free(&m);
}

static void flip_every_time(unsigned attempt)
{
    char ts[32];
    snprintf(ts, sizeof ts, "..ts%u", attempt + 2);
    aw_payload(P("v"), ts, v1, 2);
    aw_switch(P("v"), ts);
}

static void test_rewalk_gives_up(void **state)
{
    (void)state;
    make_v1();
    g_hook_action = flip_every_time;
    struct hash_manifest m;
    struct hash_error err;
    const char *roots[] = {P("v")};
    assert_int_equal(hash_compute(roots, 1, NULL, &m, &err), -EAGAIN);
    assert_int_equal(err.code, -EAGAIN);
    assert_string_equal(err.op, "rewalk");
    assert_string_equal(err.path, P("v"));
    assert_int_equal(g_hook_calls, HASH_MAX_REWALKS + 1);
    assert_int_equal(m.n, 0);
    hash_manifest_free(&m);
}

static void remove_file(unsigned attempt)
{
    if (attempt == 0) assert_int_equal(unlink(P("v/b")), 0);
}

static void test_rewalk_on_vanished_file(void **state)
{
    (void)state;
    put(P("v/a"), "a", 1);
    put(P("v/b"), "b", 1);
    g_hook_action = remove_file;
    struct hash_manifest m;
    struct warns ws = {0};
    assert_int_equal(compute1(P("v"), &ws, &m), 0);
    assert_int_equal(g_hook_calls, 2);
    const struct exp want[] = {E("a", "a")};
    expect_manifest(&m, P("v/"), want, 1);
    hash_manifest_free(&m);
}

/* /proc files claim size 0 but yield bytes: the size check must catch it. */
static void test_size_mismatch_is_unstable(void **state)
{
    (void)state;
    struct hash_manifest m;
    struct hash_error err;
    const char *roots[] = {"/proc/self/status"};
    assert_int_equal(hash_compute(roots, 1, NULL, &m, &err), -EAGAIN);
    assert_string_equal(err.op, "rewalk");
    assert_string_equal(err.path, "/proc/self/status");
    assert_int_equal(g_hook_calls, HASH_MAX_REWALKS + 1);
    hash_manifest_free(&m);
}

static void test_dangling_link_is_skipped(void **state)
{
    (void)state;
    make_v1();
    link_("..data/removed", P("v/removed")); /* a removed key mid-swap */
    struct hash_manifest m;
    struct warns ws = {0};
    assert_int_equal(compute1(P("v"), &ws, &m), 0);
    assert_int_equal(g_hook_calls, 1);
    expect_manifest(&m, P("v/"), v1, 2);
    assert_int_equal(ws.n, 1);
    expect_warn(&ws, HASH_WARN_DANGLING, P("v/removed"));
    hash_manifest_free(&m);
}

/* Hashes root with opts and asserts the manifest is e[0..n) under prefix. */
static void compute_expect(const struct hash_opts *o, const char *root, const char *prefix,
                           const struct exp *e, size_t n)
{
    const char *roots[] = {root};
    struct hash_manifest m;
    assert_int_equal(hash_compute(roots, 1, o, &m, NULL), 0);
    expect_manifest(&m, prefix, e, n);
    hash_manifest_free(&m);
}

/* Points the symlink path at target instead. */
static void relink(const char *target, const char *path)
{
    assert_int_equal(unlink(path), 0);
    link_(target, path);
}

/* The remembered resolved root must follow the root: a symlinked root that
 * is pointed elsewhere, and a resolved path that now names another
 * directory, both give the content the root names now. */
static void test_cached_root_follows_the_root(void **state)
{
    (void)state;
    struct hash_cache cache = {0};
    struct hash_opts o = {.cache = &cache};
    const struct exp ea[] = {E("f", "content of a")}, ec[] = {E("f", "content of c!")};
    const struct exp ef[] = {E("", "file root")};
    put(P("a/f"), "content of a", 12);
    link_("a", P("root"));
    compute_expect(&o, P("root"), P("root/"), ea, 1);
    compute_expect(&o, P("root"), P("root/"), ea, 1); /* from the cache */
    /* a -> b, a new a with other content, root -> b: same directory as before */
    assert_int_equal(rename(P("a"), P("b")), 0);
    put(P("a/f"), "content of c!", 13);
    relink("b", P("root"));
    compute_expect(&o, P("root"), P("root/"), ea, 1);
    relink("a", P("root")); /* the new a */
    compute_expect(&o, P("root"), P("root/"), ec, 1);
    /* the root turned into a file, then a directory again */
    assert_int_equal(unlink(P("root")), 0);
    put(P("root"), "file root", 9);
    compute_expect(&o, P("root"), P("root"), ef, 1);
    relink("a", P("root"));
    compute_expect(&o, P("root"), P("root/"), ec, 1);
    hash_cache_free(&cache);
    assert_null(cache.v);
}

/* The cache keeps a root's top-level listing until the caller says it may
 * have changed: a ..data swap is read through the kept listing (new
 * content), a new top-level key is not seen until the listing is
 * forgotten, and then it is. */
static void test_cached_listing_until_forgotten(void **state)
{
    (void)state;
    struct hash_cache cache = {0};
    struct hash_opts o = {.cache = &cache};
    make_v1();
    compute_expect(&o, P("v"), P("v/"), v1, 2);

    /* a swap to new content for the same keys, plus a key link the kubelet
     * would announce with an event the caller has not passed on yet */
    const struct exp same_keys[] = {E("a", "one, new"), E("conf/x", "x3"), E("late", "late key")};
    aw_payload(P("v"), "..ts2", same_keys, 3);
    aw_switch(P("v"), "..ts2");
    aw_key_link(P("v"), "late");
    compute_expect(&o, P("v"), P("v/"), same_keys, 2); /* the kept listing: a and conf */

    hash_cache_forget_listing(&cache, P("v"));
    compute_expect(&o, P("v"), P("v/"), same_keys, 3);

    /* forgetting every root (NULL) works too: the late key goes away */
    assert_int_equal(unlink(P("v/late")), 0);
    hash_cache_forget_listing(&cache, NULL);
    compute_expect(&o, P("v"), P("v/"), same_keys, 2);
    hash_cache_free(&cache);
}

/* Reads stop at the fstat size without a read for end-of-file; sizes
 * around the 64 KiB small buffer and the 1 MiB big one (small files before
 * and after a big one, which switches buffers) must still hash exactly. */
static void test_sizes_around_the_read_chunk(void **state)
{
    (void)state;
    static const size_t sizes[] = {0,      1,       65535,   65536,   65537,           131072,
                                   200000, 1048575, 1048576, 1048577, 2 * 1048576 + 1, 3};
    enum { N = sizeof sizes / sizeof *sizes };
    static char data[2 * 1048576 + 1];
    struct exp want[N];
    char names[N][16];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (char)(i * 7 + i / 251);
    for (size_t i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "s%02zu", i);
        want[i] = (struct exp){names[i], data, sizes[i]};
        put(P("v/%s", names[i]), data, sizes[i]);
    }
    struct hash_manifest m;
    struct warns ws = {0};
    assert_int_equal(compute1(P("v"), &ws, &m), 0);
    expect_manifest(&m, P("v/"), want, N);
    hash_manifest_free(&m);
}

int main(void)
{
    alarm(300); /* a hang in the code under test fails the run */
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_empty_root_and_empty_hash),
        T(test_missing_root),
        T(test_kubelet_layout),
        T(test_plain_nested_empty_binary_fifo),
        T(test_escaping_symlinks),
        T(test_symlink_loop_and_dir_cycle),
        T(test_depth_cap),
        T(test_names_are_bytes_sorted_bytewise),
        T(test_file_roots),
        T(test_two_roots_sorted_together),
        T(test_relative_trailing_slash_and_overlap),
        T(test_unreadable_file_and_dir),
        T(test_fd_limit_reports_emfile),
        T(test_diff_and_copy),
        T(test_select_ignore_and_sub),
        T(test_ten_thousand_files),
        T(test_rewalk_on_full_swap),
        T(test_rewalk_on_data_link_change),
        T(test_rewalk_gives_up),
        T(test_rewalk_on_vanished_file),
        T(test_size_mismatch_is_unstable),
        T(test_dangling_link_is_skipped),
        T(test_cached_root_follows_the_root),
        T(test_sizes_around_the_read_chunk),
        T(test_cached_listing_until_forgotten),
#define T_NO_DTYPE(f) {#f " (no d_type)", f, setup_no_dtype, teardown, NULL}
        T_NO_DTYPE(test_kubelet_layout),
        T_NO_DTYPE(test_plain_nested_empty_binary_fifo),
        T_NO_DTYPE(test_escaping_symlinks),
        T_NO_DTYPE(test_symlink_loop_and_dir_cycle),
        T_NO_DTYPE(test_dangling_link_is_skipped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
