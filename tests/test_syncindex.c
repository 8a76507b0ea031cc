/*
 * test_syncindex.c - the sync service's index (sync/index.h): pods from
 * their sync-objects annotation, which pods an object's change reaches,
 * what a change is (baseline, same, older, new), and the bookkeeping of
 * pods and objects that go away.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sync/index.h"

struct seen {
    char pods[16][80];
    size_t n;
};

static void collect(void *ud, const char *ns, const char *pod)
{
    struct seen *s = ud;
    if (s->n < 16) snprintf(s->pods[s->n++], sizeof s->pods[0], "%s/%s", ns, pod);
}

static struct seen pods_of(struct sync_index *ix, enum sync_kind k, const char *ns,
                           const char *name)
{
    struct seen s = {0};
    size_t n = sync_index_pods_of(ix, k, ns, name, collect, &s);
    assert_int_equal(n, s.n);
    return s;
}

/* Exactly the pods that name an object, in their namespace, by kind. */
static void test_pods_of_an_object(void **state)
{
    (void)state;
    struct sync_index *ix = sync_index_new();
    assert_int_equal(sync_index_set_pod(ix, "a", "web-1", "configmap/conf,secret/tls"), 0);
    assert_int_equal(sync_index_set_pod(ix, "a", "web-2", "configmap/conf"), 0);
    assert_int_equal(sync_index_set_pod(ix, "b", "web-1", "configmap/conf"), 0);
    struct seen s = pods_of(ix, SYNC_CONFIGMAP, "a", "conf");
    assert_int_equal(s.n, 2);
    assert_string_equal(s.pods[0], "a/web-1");
    assert_string_equal(s.pods[1], "a/web-2");
    s = pods_of(ix, SYNC_SECRET, "a", "tls");
    assert_int_equal(s.n, 1);
    assert_int_equal(pods_of(ix, SYNC_SECRET, "a", "conf").n, 0);     /* another kind */
    assert_int_equal(pods_of(ix, SYNC_CONFIGMAP, "a", "other").n, 0); /* nobody's */
    assert_int_equal(pods_of(ix, SYNC_CONFIGMAP, "b", "conf").n, 1);
    struct sync_index_stats st;
    sync_index_get_stats(ix, &st);
    assert_int_equal(st.pods, 3);
    assert_int_equal(st.refs, 4);
    assert_int_equal(st.objects, 3);
    sync_index_free(ix);
}

/* A pod's annotation replaces its objects; bad entries are counted and
 * left out; a pod without objects (or removed) is forgotten, and so are
 * the objects nothing else keeps. */
static void test_pod_updates(void **state)
{
    (void)state;
    struct sync_index *ix = sync_index_new();
    assert_int_equal(sync_index_set_pod(ix, "a", "p", "configmap/one,configmap/one"), 0);
    assert_int_equal(sync_index_set_pod(ix, "a", "p", "configmap/two"), 0);
    assert_int_equal(pods_of(ix, SYNC_CONFIGMAP, "a", "one").n, 0);
    assert_int_equal(pods_of(ix, SYNC_CONFIGMAP, "a", "two").n, 1);
    assert_int_equal(
        sync_index_set_pod(ix, "a", "p", "pod/x,configmap/UPPER,secret/,configmap/ok,,secret"), 5);
    assert_int_equal(pods_of(ix, SYNC_CONFIGMAP, "a", "ok").n, 1);
    struct sync_index_stats st;
    sync_index_get_stats(ix, &st);
    assert_int_equal(st.objects, 1);
    assert_int_equal(st.refs, 1);
    assert_int_equal(sync_index_set_pod(ix, "a", "p", "nothing/valid"), 1);
    sync_index_get_stats(ix, &st);
    assert_int_equal(st.pods, 0);
    assert_int_equal(st.objects, 0);
    sync_index_set_pod(ix, "a", "p", "configmap/ok");
    sync_index_remove_pod(ix, "a", "p");
    sync_index_remove_pod(ix, "a", "never");
    sync_index_get_stats(ix, &st);
    assert_int_equal(st.pods, 0);
    assert_int_equal(st.refs, 0);
    assert_int_equal(st.objects, 0);
    sync_index_free(ix);
}

/* At most SYNC_INDEX_MAX_REFS objects from one pod; the rest counted. */
static void test_refs_cap(void **state)
{
    (void)state;
    static char v[(SYNC_INDEX_MAX_REFS + 3) * 16];
    size_t len = 0;
    for (int i = 0; i < SYNC_INDEX_MAX_REFS + 3; i++)
        len += (size_t)snprintf(v + len, sizeof v - len, "%sconfigmap/c%d", i ? "," : "", i);
    struct sync_index *ix = sync_index_new();
    assert_int_equal(sync_index_set_pod(ix, "a", "p", v), 3);
    struct sync_index_stats st;
    sync_index_get_stats(ix, &st);
    assert_int_equal(st.refs, SYNC_INDEX_MAX_REFS);
    sync_index_free(ix);
}

/* The first version is a baseline; the same again, or an older one, is no
 * change; a newer one is; a version that cannot be compared counts when it
 * differs. */
static void test_what_a_change_is(void **state)
{
    (void)state;
    struct sync_index *ix = sync_index_new();
    assert_int_equal(sync_index_object_seen(ix, SYNC_CONFIGMAP, "a", "c", "100"),
                     SYNC_SEEN_BASELINE);
    assert_int_equal(sync_index_object_seen(ix, SYNC_CONFIGMAP, "a", "c", "100"), SYNC_SEEN_SAME);
    assert_int_equal(sync_index_object_seen(ix, SYNC_CONFIGMAP, "a", "c", "99"), SYNC_SEEN_OLDER);
    assert_int_equal(sync_index_object_seen(ix, SYNC_CONFIGMAP, "a", "c", "1000"),
                     SYNC_SEEN_CHANGED);
    assert_int_equal(sync_index_object_seen(ix, SYNC_CONFIGMAP, "a", "c", "999"),
                     SYNC_SEEN_OLDER); /* by length, then digits */
    assert_int_equal(sync_index_object_seen(ix, SYNC_CONFIGMAP, "a", "c", "opaque"),
                     SYNC_SEEN_CHANGED);
    assert_int_equal(sync_index_object_seen(ix, SYNC_CONFIGMAP, "a", "c", "opaque"),
                     SYNC_SEEN_SAME);
    /* the same name as a Secret, or in another namespace: another object */
    assert_int_equal(sync_index_object_seen(ix, SYNC_SECRET, "a", "c", "2000"), SYNC_SEEN_BASELINE);
    assert_int_equal(sync_index_object_seen(ix, SYNC_CONFIGMAP, "b", "c", "2000"),
                     SYNC_SEEN_BASELINE);
    sync_index_free(ix);
}

/* A deleted object nobody names is forgotten (a new one is a baseline);
 * one a pod names keeps its version (a new one is a change). */
static void test_deleted_objects(void **state)
{
    (void)state;
    struct sync_index *ix = sync_index_new();
    sync_index_object_seen(ix, SYNC_SECRET, "a", "free", "10");
    sync_index_object_deleted(ix, SYNC_SECRET, "a", "free");
    assert_int_equal(sync_index_object_seen(ix, SYNC_SECRET, "a", "free", "20"),
                     SYNC_SEEN_BASELINE);
    sync_index_set_pod(ix, "a", "p", "secret/kept");
    sync_index_object_seen(ix, SYNC_SECRET, "a", "kept", "10");
    sync_index_object_deleted(ix, SYNC_SECRET, "a", "kept");
    assert_int_equal(sync_index_object_seen(ix, SYNC_SECRET, "a", "kept", "30"), SYNC_SEEN_CHANGED);
    sync_index_object_deleted(ix, SYNC_SECRET, "a", "never-seen");
    sync_index_free(ix);
}

/* A pod's synced version: at or above a change's, it was nudged for it
 * (by this replica or another); kept across updates of its objects. */
static void test_synced(void **state)
{
    (void)state;
    struct sync_index *ix = sync_index_new();
    sync_index_set_synced(ix, "a", "nobody", "5"); /* not in the index: ignored */
    assert_int_equal(sync_index_synced_since(ix, "a", "nobody", "5"), 0);
    sync_index_set_pod(ix, "a", "p", "configmap/c");
    assert_int_equal(sync_index_synced_since(ix, "a", "p", "5"), 0);
    sync_index_set_synced(ix, "a", "p", "50");
    assert_int_equal(sync_index_synced_since(ix, "a", "p", "49"), 1);
    assert_int_equal(sync_index_synced_since(ix, "a", "p", "50"), 1);
    assert_int_equal(sync_index_synced_since(ix, "a", "p", "51"), 0);
    assert_int_equal(sync_index_synced_since(ix, "a", "p", "x"), 0);
    sync_index_set_pod(ix, "a", "p", "configmap/c,secret/s");
    assert_int_equal(sync_index_synced_since(ix, "a", "p", "50"), 1);
    sync_index_set_synced(ix, "a", "p", NULL);
    assert_int_equal(sync_index_synced_since(ix, "a", "p", "50"), 0);
    sync_index_free(ix);
}

/* Many objects and pods: the tables grow and every reference is found. */
static void test_many(void **state)
{
    (void)state;
    struct sync_index *ix = sync_index_new();
    char name[64], objs[64];
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof name, "c%d", i);
        assert_int_equal(sync_index_object_seen(ix, SYNC_CONFIGMAP, "ns", name, "5"),
                         SYNC_SEEN_BASELINE);
    }
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "pod-%d", i);
        snprintf(objs, sizeof objs, "configmap/c%d,configmap/c%d", i, i % 10);
        sync_index_set_pod(ix, "ns", name, objs);
    }
    assert_int_equal(pods_of(ix, SYNC_CONFIGMAP, "ns", "c999").n, 1);
    assert_int_equal(sync_index_pods_of(ix, SYNC_CONFIGMAP, "ns", "c3", collect, &(struct seen){0}),
                     100); /* pod-3 names c3 twice: once */
    struct sync_index_stats st;
    sync_index_get_stats(ix, &st);
    assert_int_equal(st.objects, 5000);
    assert_int_equal(st.pods, 1000);
    assert_int_equal(st.refs, 1990);
    sync_index_free(ix);
}

/* The pod count per namespace (--all-namespaces opens a namespace's
 * watches on its first pod, closes them after its last): kept by set_pod
 * and remove_pod, pods without objects not counted. */
static void test_pods_per_namespace(void **state)
{
    (void)state;
    struct sync_index *ix = sync_index_new();
    struct sync_index_stats st;
    assert_int_equal(sync_index_pods_in(ix, "a"), 0);
    sync_index_set_pod(ix, "a", "p1", "configmap/c");
    sync_index_set_pod(ix, "a", "p2", "secret/s");
    sync_index_set_pod(ix, "b", "p1", "configmap/c");
    sync_index_set_pod(ix, "c", "p1", "");             /* no object: not indexed */
    sync_index_set_pod(ix, "c", "p2", "deployment/x"); /* none valid: not indexed */
    assert_int_equal(sync_index_pods_in(ix, "a"), 2);
    assert_int_equal(sync_index_pods_in(ix, "b"), 1);
    assert_int_equal(sync_index_pods_in(ix, "c"), 0);
    sync_index_set_pod(ix, "a", "p1", "configmap/d"); /* an update is no new pod */
    assert_int_equal(sync_index_pods_in(ix, "a"), 2);
    sync_index_get_stats(ix, &st);
    assert_int_equal(st.nss, 2);
    sync_index_set_pod(ix, "a", "p1", NULL); /* its annotation gone: forgotten */
    assert_int_equal(sync_index_pods_in(ix, "a"), 1);
    sync_index_remove_pod(ix, "a", "p2");
    sync_index_remove_pod(ix, "a", "p2"); /* twice: no underflow */
    sync_index_remove_pod(ix, "a", "nobody");
    assert_int_equal(sync_index_pods_in(ix, "a"), 0);
    assert_int_equal(sync_index_pods_in(ix, "b"), 1);
    sync_index_get_stats(ix, &st);
    assert_int_equal(st.nss, 1);
    sync_index_set_pod(ix, "a", "p3", "configmap/c"); /* back */
    assert_int_equal(sync_index_pods_in(ix, "a"), 1);
    sync_index_free(ix); /* with namespaces left: no leak (make asan) */
}

static void count_ns(void *ud, const char *ns, size_t pods)
{
    size_t *n = ud;
    assert_true(ns[0] == 'n');
    *n += pods;
}

/* Every namespace with pods, once, with its count; the table grows. */
static void test_each_namespace(void **state)
{
    (void)state;
    struct sync_index *ix = sync_index_new();
    char ns[32], pod[32];
    for (int i = 0; i < 300; i++) {
        snprintf(ns, sizeof ns, "n%d", i % 100);
        snprintf(pod, sizeof pod, "p%d", i);
        sync_index_set_pod(ix, ns, pod, "configmap/c");
    }
    size_t total = 0;
    assert_int_equal(sync_index_each_ns(ix, count_ns, &total), 100);
    assert_int_equal(total, 300);
    assert_int_equal(sync_index_pods_in(ix, "n42"), 3);
    sync_index_free(ix);
}

/* A namespace whose watches were closed forgets its objects' versions:
 * the first version seen again is a baseline (no nudge), even when the
 * object changed meanwhile; other namespaces keep theirs. */
static void test_forget_namespace(void **state)
{
    (void)state;
    struct sync_index *ix = sync_index_new();
    struct sync_index_stats st;
    sync_index_set_pod(ix, "a", "p", "configmap/c");
    assert_int_equal(sync_index_object_seen(ix, SYNC_CONFIGMAP, "a", "c", "10"),
                     SYNC_SEEN_BASELINE);
    assert_int_equal(sync_index_object_seen(ix, SYNC_CONFIGMAP, "a", "lonely", "11"),
                     SYNC_SEEN_BASELINE);
    assert_int_equal(sync_index_object_seen(ix, SYNC_CONFIGMAP, "b", "c", "12"),
                     SYNC_SEEN_BASELINE);
    sync_index_remove_pod(ix, "a", "p"); /* c keeps its version (a pod may name it again) */
    assert_int_equal(sync_index_pods_in(ix, "a"), 0);
    assert_int_equal(sync_index_forget_ns(ix, "a"), 2);
    sync_index_get_stats(ix, &st);
    assert_int_equal(st.objects, 1); /* b/c */
    sync_index_set_pod(ix, "a", "q", "configmap/c");
    assert_int_equal(sync_index_object_seen(ix, SYNC_CONFIGMAP, "a", "c", "20"),
                     SYNC_SEEN_BASELINE);
    assert_int_equal(sync_index_object_seen(ix, SYNC_CONFIGMAP, "a", "c", "21"), SYNC_SEEN_CHANGED);
    assert_int_equal(sync_index_object_seen(ix, SYNC_CONFIGMAP, "b", "c", "12"), SYNC_SEEN_SAME);
    /* a pod still there keeps its reference, the version only is dropped */
    assert_int_equal(sync_index_forget_ns(ix, "a"), 1);
    assert_int_equal(pods_of(ix, SYNC_CONFIGMAP, "a", "c").n, 1);
    assert_int_equal(sync_index_object_seen(ix, SYNC_CONFIGMAP, "a", "c", "22"),
                     SYNC_SEEN_BASELINE);
    assert_int_equal(sync_index_forget_ns(ix, "nowhere"), 0);
    sync_index_free(ix);
}

static void collect_behind(void *ud, const char *ns, const char *pod, enum sync_kind k,
                           const char *name, const char *rv)
{
    struct seen *s = ud;
    if (s->n < 16)
        snprintf(s->pods[s->n++], sizeof s->pods[0], "%s/%s %s/%s@%s", ns, pod, sync_kind_name(k),
                 name, rv);
}

/* The pods behind: nudged before, naming an object seen at a newer
 * version than their last nudge, once each with the newest such object;
 * not a pod never nudged, nor one whose objects are all older or equal. */
static void test_pods_behind(void **state)
{
    (void)state;
    struct sync_index *ix = sync_index_new();
    sync_index_set_pod(ix, "a", "late", "configmap/conf,secret/tls");
    sync_index_set_pod(ix, "a", "current", "configmap/conf");
    sync_index_set_pod(ix, "a", "never", "configmap/conf");
    sync_index_object_seen(ix, SYNC_CONFIGMAP, "a", "conf", "120");
    sync_index_object_seen(ix, SYNC_SECRET, "a", "tls", "130");
    sync_index_set_synced(ix, "a", "late", "100");
    sync_index_set_synced(ix, "a", "current", "120");
    struct seen s = {0};
    assert_int_equal(sync_index_behind(ix, collect_behind, &s), 1);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.pods[0], "a/late secret/tls@130"); /* the newest of its two */
    sync_index_set_synced(ix, "a", "late", "130");
    s.n = 0;
    assert_int_equal(sync_index_behind(ix, collect_behind, &s), 0);
    sync_index_free(ix);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pods_of_an_object),
        cmocka_unit_test(test_pod_updates),
        cmocka_unit_test(test_refs_cap),
        cmocka_unit_test(test_what_a_change_is),
        cmocka_unit_test(test_deleted_objects),
        cmocka_unit_test(test_synced),
        cmocka_unit_test(test_many),
        cmocka_unit_test(test_pods_per_namespace),
        cmocka_unit_test(test_each_namespace),
        cmocka_unit_test(test_forget_namespace),
        cmocka_unit_test(test_pods_behind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
