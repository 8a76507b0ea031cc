/*
 * test_stagestate.c - the stage record of a workload's Lease and the pure
 * decisions on it (run/stagestate.c): given a state, a hash and this pod,
 * go (write), wait, halted, or take over an expired slot; releases (verified,
 * halted), renewals, a holder that stops; the width of "N" and "P%" (rounded up); the record's
 * JSON, and records that are not one. The Lease name of a workload
 * (kube/lease.c), which the injector's Role must name too.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kube/kinds.h"
#include "kube/lease.h"
#include "run/stagestate.h"

#define H1 "1111111111111111111111111111111111111111111111111111111111111111"
#define H2 "2222222222222222222222222222222222222222222222222222222222222222"

/* The expired slots of a test: pod names, NULL-terminated. */
static int expired_of(void *ud, const char *pod, uint64_t n)
{
    (void)n;
    for (const char *const *p = ud; p && *p; p++)
        if (strcmp(*p, pod) == 0) return 1;
    return 0;
}

static struct stagestate parse(const char *json)
{
    struct stagestate s;
    char err[256];
    assert_int_equal(stagestate_parse(json, &s, err, sizeof err), 0);
    return s;
}

static void acquire(const char *json, const char *me, const char *hash, int width,
                    const char *const *expired, struct stagestate_acq *a)
{
    struct stagestate s = parse(json);
    stagestate_acquire(&s, me, hash, width, 30000, expired_of, (void *)expired, a);
    /* the acquire's pointers go into s: keep what the tests read */
    static char pod[64];
    if (a->taken_pod) {
        snprintf(pod, sizeof pod, "%s", a->taken_pod);
        a->taken_pod = pod;
    }
    static struct stagestate_halt halt;
    static char hpod[64], hreason[256];
    if (a->halt) {
        halt = *a->halt;
        snprintf(hpod, sizeof hpod, "%s", a->halt->pod);
        snprintf(hreason, sizeof hreason, "%s", a->halt->reason);
        halt.pod = hpod;
        halt.reason = hreason;
        a->halt = &halt;
    }
    stagestate_free(&s);
}

static char *printed(const struct stagestate *s) { return stagestate_print(s); }

static void test_open_a_stage(void **state)
{
    (void)state;
    struct stagestate_acq a;
    /* no record yet: the first pod opens the stage and takes a slot */
    acquire(NULL, "web-0", H1, 1, NULL, &a);
    assert_int_equal(a.verdict, STAGESTATE_WRITE);
    assert_true(a.opened);
    char *j = printed(&a.next);
    assert_string_equal(j, "{\"hash\":\"" H1 "\",\"width\":1,\"ttl_ms\":30000,\"active\":"
                           "[{\"pod\":\"web-0\",\"n\":0}],\"verified\":[],\"halted\":[]}");
    free(j);
    stagestate_acq_free(&a);
}

static void test_one_at_a_time(void **state)
{
    (void)state;
    const char *one = "{\"hash\":\"" H1 "\",\"width\":1,\"ttl_ms\":30000,"
                      "\"active\":[{\"pod\":\"web-0\",\"n\":2}],\"verified\":[]}";
    struct stagestate_acq a;
    acquire(one, "web-1", H1, 1, NULL, &a);
    assert_int_equal(a.verdict, STAGESTATE_WAIT);
    assert_int_equal(a.live, 1);
    stagestate_acq_free(&a);

    /* web-0 verified: its slot is free, web-1 takes it */
    const char *freed = "{\"hash\":\"" H1 "\",\"width\":1,\"ttl_ms\":30000,"
                        "\"active\":[],\"verified\":[\"web-0\"]}";
    acquire(freed, "web-1", H1, 1, NULL, &a);
    assert_int_equal(a.verdict, STAGESTATE_WRITE);
    assert_false(a.opened);
    assert_int_equal(a.next.nactive, 1);
    assert_string_equal(a.next.active[0].pod, "web-1");
    assert_int_equal(a.next.nverified, 1);
    stagestate_acq_free(&a);

    /* a width of 2 lets a second one in, not a third */
    const char *two = "{\"hash\":\"" H1 "\",\"width\":2,\"ttl_ms\":30000,"
                      "\"active\":[{\"pod\":\"web-0\",\"n\":0}]}";
    acquire(two, "web-1", H1, 2, NULL, &a);
    assert_int_equal(a.verdict, STAGESTATE_WRITE);
    assert_int_equal(a.next.nactive, 2);
    stagestate_acq_free(&a);
    const char *full = "{\"hash\":\"" H1 "\",\"width\":2,\"ttl_ms\":30000,"
                       "\"active\":[{\"pod\":\"web-0\",\"n\":0},{\"pod\":\"web-1\",\"n\":0}]}";
    acquire(full, "web-2", H1, 2, NULL, &a);
    assert_int_equal(a.verdict, STAGESTATE_WAIT);
    stagestate_acq_free(&a);
    /* the open stage keeps its own width, whatever this pod would choose */
    acquire(full, "web-2", H1, 5, NULL, &a);
    assert_int_equal(a.verdict, STAGESTATE_WAIT);
    stagestate_acq_free(&a);
}

static void test_take_over_expired(void **state)
{
    (void)state;
    const char *held = "{\"hash\":\"" H1 "\",\"width\":1,\"ttl_ms\":30000,"
                       "\"active\":[{\"pod\":\"web-0\",\"n\":4}]}";
    const char *const dead[] = {"web-0", NULL};
    struct stagestate_acq a;
    acquire(held, "web-1", H1, 1, dead, &a);
    assert_int_equal(a.verdict, STAGESTATE_WRITE);
    assert_int_equal(a.taken_over, 1);
    assert_string_equal(a.taken_pod, "web-0");
    assert_int_equal(a.live, 0);
    assert_int_equal(a.next.nactive, 1); /* web-0's slot is dropped */
    assert_string_equal(a.next.active[0].pod, "web-1");
    stagestate_acq_free(&a);
    /* alive: wait */
    acquire(held, "web-1", H1, 1, NULL, &a);
    assert_int_equal(a.verdict, STAGESTATE_WAIT);
    assert_int_equal(a.taken_over, 0);
    stagestate_acq_free(&a);
}

static void test_resume_own_slot(void **state)
{
    (void)state;
    /* the agent restarted while its pod held a slot: it keeps it even when
     * the stage is full, and its renewal count moves on */
    const char *full = "{\"hash\":\"" H1 "\",\"width\":1,\"ttl_ms\":30000,"
                       "\"active\":[{\"pod\":\"web-1\",\"n\":7}]}";
    struct stagestate_acq a;
    acquire(full, "web-1", H1, 1, NULL, &a);
    assert_int_equal(a.verdict, STAGESTATE_WRITE);
    assert_true(a.resumed);
    assert_int_equal(a.next.nactive, 1);
    assert_int_equal(a.next.active[0].n, 8);
    stagestate_acq_free(&a);
}

static void test_halted(void **state)
{
    (void)state;
    const char *halted = "{\"hash\":\"" H1 "\",\"width\":1,\"active\":[],"
                         "\"halted\":[{\"hash\":\"" H1 "\",\"pod\":\"web-0\","
                         "\"reason\":\"verify: http 500\"}]}";
    struct stagestate_acq a;
    acquire(halted, "web-3", H1, 1, NULL, &a);
    assert_int_equal(a.verdict, STAGESTATE_HALTED);
    assert_string_equal(a.halt->pod, "web-0");
    assert_string_equal(a.halt->reason, "verify: http 500");
    stagestate_acq_free(&a);
    /* the next different content starts a new stage; the halt record stays */
    acquire(halted, "web-3", H2, 1, NULL, &a);
    assert_int_equal(a.verdict, STAGESTATE_WRITE);
    assert_true(a.opened);
    assert_string_equal(a.next.hash, H2);
    assert_int_equal(a.next.nhalted, 1);
    stagestate_acq_free(&a);
    /* a late replica that sees H1 after H2 was staged still gets halted */
    const char *later = "{\"hash\":\"" H2 "\",\"width\":1,\"active\":[],"
                        "\"halted\":[{\"hash\":\"" H1 "\",\"pod\":\"web-0\",\"reason\":\"x\"}]}";
    acquire(later, "web-2", H1, 1, NULL, &a);
    assert_int_equal(a.verdict, STAGESTATE_HALTED);
    stagestate_acq_free(&a);
}

static void test_new_stage_waits_for_holders(void **state)
{
    (void)state;
    /* H2 opens only once nobody holds a slot of H1 (never more than a
     * width of replicas acting at once) */
    const char *busy = "{\"hash\":\"" H1 "\",\"width\":3,\"ttl_ms\":30000,"
                       "\"active\":[{\"pod\":\"web-0\",\"n\":0}],\"verified\":[\"web-1\"]}";
    struct stagestate_acq a;
    acquire(busy, "web-2", H2, 3, NULL, &a);
    assert_int_equal(a.verdict, STAGESTATE_WAIT);
    stagestate_acq_free(&a);
    const char *const dead[] = {"web-0", NULL};
    acquire(busy, "web-2", H2, 3, dead, &a);
    assert_int_equal(a.verdict, STAGESTATE_WRITE);
    assert_true(a.opened);
    assert_int_equal(a.next.width, 3);
    assert_int_equal(a.next.nverified, 0);
    stagestate_acq_free(&a);
    /* this pod's own slot of the old stage does not hold the new one back */
    const char *mine = "{\"hash\":\"" H1 "\",\"width\":1,\"active\":[{\"pod\":\"web-2\",\"n\":0}]}";
    acquire(mine, "web-2", H2, 1, NULL, &a);
    assert_int_equal(a.verdict, STAGESTATE_WRITE);
    assert_true(a.opened);
    stagestate_acq_free(&a);
}

static void test_release(void **state)
{
    (void)state;
    struct stagestate cur = parse("{\"hash\":\"" H1 "\",\"width\":1,\"ttl_ms\":30000,"
                                  "\"active\":[{\"pod\":\"web-0\",\"n\":1}],"
                                  "\"verified\":[\"web-1\"]}");
    struct stagestate next;
    assert_int_equal(stagestate_release(&cur, "web-0", H1, 1, NULL, &next), 1);
    assert_int_equal(next.nactive, 0);
    assert_int_equal(next.nverified, 2);
    assert_string_equal(next.verified[1], "web-0");
    stagestate_free(&next);
    /* a failed verification halts the hash for all */
    assert_int_equal(stagestate_release(&cur, "web-0", H1, 0, "verify failed", &next), 1);
    assert_int_equal(next.nactive, 0);
    assert_int_equal(next.nhalted, 1);
    assert_string_equal(next.halted[0].hash, H1);
    assert_string_equal(next.halted[0].pod, "web-0");
    assert_string_equal(next.halted[0].reason, "verify failed");
    /* newest first; a hash halted once is not recorded again */
    struct stagestate two;
    assert_int_equal(stagestate_release(&next, "web-1", H2, 0, "rejected", &two), 1);
    assert_string_equal(two.halted[0].hash, H2);
    assert_string_equal(two.halted[1].hash, H1);
    struct stagestate three;
    assert_int_equal(stagestate_release(&two, "web-2", H2, 0, "again", &three), 0);
    stagestate_free(&two);
    stagestate_free(&next);
    /* a rejection before any acquire, on another stage: recorded */
    assert_int_equal(stagestate_release(&cur, "web-3", H2, 0, "nginx -t failed", &next), 1);
    assert_int_equal(next.nactive, 1);
    assert_non_null(stagestate_find_halt(&next, H2));
    stagestate_free(&next);
    /* a verified release of an old stage by a pod with no slot: nothing */
    assert_int_equal(stagestate_release(&cur, "web-3", H2, 1, NULL, &next), 0);
    stagestate_free(&cur);
}

static void test_halted_list_bounded(void **state)
{
    (void)state;
    struct stagestate cur = {0}, next;
    for (int i = 0; i < STAGESTATE_MAX_HALTED + 4; i++) {
        char h[8];
        snprintf(h, sizeof h, "%x", i + 1);
        assert_int_equal(stagestate_release(&cur, "web-0", h, 0, "r", &next), 1);
        stagestate_free(&cur);
        cur = next;
    }
    assert_int_equal(cur.nhalted, STAGESTATE_MAX_HALTED);
    assert_string_equal(cur.halted[0].hash, "14"); /* the newest */
    stagestate_free(&cur);
}

static void test_renew(void **state)
{
    (void)state;
    struct stagestate cur = parse("{\"hash\":\"" H1 "\",\"width\":1,"
                                  "\"active\":[{\"pod\":\"web-0\",\"n\":1}]}");
    struct stagestate next;
    assert_int_equal(stagestate_renew(&cur, "web-0", H1, &next), 1);
    assert_int_equal(next.active[0].n, 2);
    stagestate_free(&next);
    /* taken over (no slot), or the stage moved on */
    assert_int_equal(stagestate_renew(&cur, "web-1", H1, &next), 0);
    assert_int_equal(stagestate_renew(&cur, "web-0", H2, &next), 0);
    /* a holder that stops gives its slot back, without a verdict */
    assert_int_equal(stagestate_leave(&cur, "web-0", &next), 1);
    assert_int_equal(next.nactive, 0);
    assert_int_equal(next.nverified, 0);
    assert_int_equal(next.nhalted, 0);
    stagestate_free(&next);
    assert_int_equal(stagestate_leave(&cur, "web-1", &next), 0);
    stagestate_free(&cur);
}

static void test_width(void **state)
{
    (void)state;
    assert_int_equal(stagestate_width(1, 0, 10), 1);
    assert_int_equal(stagestate_width(3, 0, -1), 3);
    /* P% rounds up, like maxSurge, and is at least 1 */
    assert_int_equal(stagestate_width(0, 25, 4), 1);
    assert_int_equal(stagestate_width(0, 25, 10), 3);
    assert_int_equal(stagestate_width(0, 25, 1), 1);
    assert_int_equal(stagestate_width(0, 50, 3), 2);
    assert_int_equal(stagestate_width(0, 100, 7), 7);
    assert_int_equal(stagestate_width(0, 1, 0), 1);
    assert_int_equal(stagestate_width(0, 25, -1), 1); /* replicas unknown */
    assert_int_equal(stagestate_width(0, 100, 100000), STAGESTATE_MAX_WIDTH);
}

static void test_parse_errors(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "not json",
        "[]",
        "{\"hash\":\"XYZ\"}",
        "{\"hash\":7}",
        "{\"width\":-1}",
        "{\"width\":1.5}",
        "{\"width\":1e9}",
        "{\"ttl_ms\":-1}",
        "{\"active\":{}}",
        "{\"active\":[{\"pod\":\"Not_A_Pod\",\"n\":0}]}",
        "{\"active\":[{\"pod\":\"a\",\"n\":-1}]}",
        "{\"active\":[{\"pod\":\"a\"}]}",
        "{\"active\":[{\"pod\":\"a\",\"n\":0},{\"pod\":\"a\",\"n\":1}]}",
        "{\"verified\":[1]}",
        "{\"halted\":[{\"hash\":\"" H1 "\"}]}",
        "{\"halted\":[{\"hash\":\"" H1 "\",\"pod\":\"a\",\"reason\":3}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct stagestate s;
        char err[256] = "";
        assert_int_equal(stagestate_parse(bad[i], &s, err, sizeof err), -EINVAL);
        assert_true(strncmp(err, "the stage record", 16) == 0);
        assert_null(strstr(err, "Not_A_Pod")); /* the value is never quoted */
    }
    /* round trip */
    const char *j = "{\"hash\":\"" H1 "\",\"width\":2,\"ttl_ms\":5000,\"active\":[{\"pod\":\"a\","
                    "\"n\":3}],\"verified\":[\"b\"],\"halted\":[{\"hash\":\"" H2 "\",\"pod\":"
                    "\"c\",\"reason\":\"why\"}]}";
    struct stagestate s = parse(j);
    char *out = stagestate_print(&s);
    assert_string_equal(out, j);
    free(out);
    stagestate_free(&s);
    /* a halt recorded before any stage opened prints and parses again */
    struct stagestate none = {0}, halted;
    assert_int_equal(stagestate_release(&none, "web-0", H1, 0, "rejected", &halted), 1);
    out = stagestate_print(&halted);
    struct stagestate back = parse(out);
    assert_non_null(stagestate_find_halt(&back, H1));
    free(out);
    stagestate_free(&back);
    stagestate_free(&halted);
    assert_true(stagestate_is_hash(H1));
    assert_false(stagestate_is_hash(""));
    assert_false(stagestate_is_hash(H1 "0"));
    assert_false(stagestate_is_hash("ABC"));
}

static void test_lease_name(void **state)
{
    (void)state;
    char n[LEASE_NAME_MAX + 1], m[LEASE_NAME_MAX + 1];
    assert_int_equal(lease_name_for("Deployment", "web", n, sizeof n), 0);
    assert_string_equal(n, "reload-agent-stage-deployment-web");
    assert_int_equal(lease_name_for("StatefulSet", "db.x", n, sizeof n), 0);
    assert_string_equal(n, "reload-agent-stage-statefulset-db.x");
    assert_int_equal(lease_name_for("Deployment", "Web", n, sizeof n), -EINVAL);
    assert_int_equal(lease_name_for("", "web", n, sizeof n), -EINVAL);
    assert_int_equal(lease_name_for("Deployment", "web", n, 10), -EINVAL);
    /* too long: cut, with a hash suffix; two long names stay apart */
    char longname[254];
    memset(longname, 'a', 253);
    longname[253] = '\0';
    longname[240] = '.';
    assert_int_equal(lease_name_for("Deployment", longname, n, sizeof n), 0);
    assert_int_equal(strlen(n), LEASE_NAME_MAX);
    longname[0] = 'b';
    assert_int_equal(lease_name_for("Deployment", longname, m, sizeof m), 0);
    assert_string_not_equal(n, m);
    assert_int_equal(strncmp(n, "reload-agent-stage-deployment-a", 31), 0);

    const struct kinds_kind *ki;
    const char *name;
    assert_int_equal(lease_parse_workload("deployment/web", &ki, &name), 0);
    assert_string_equal(ki->kind, "Deployment");
    assert_string_equal(name, "web");
    assert_int_equal(lease_parse_workload("Rollout/r", &ki, &name), 0);
    assert_string_equal(ki->group, "argoproj.io");
    assert_int_equal(lease_parse_workload("job/x", &ki, &name), -EINVAL);
    assert_int_equal(lease_parse_workload("deployment/", &ki, &name), -EINVAL);
    assert_int_equal(lease_parse_workload("deployment", &ki, &name), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_a_stage),
        cmocka_unit_test(test_one_at_a_time),
        cmocka_unit_test(test_take_over_expired),
        cmocka_unit_test(test_resume_own_slot),
        cmocka_unit_test(test_halted),
        cmocka_unit_test(test_new_stage_waits_for_holders),
        cmocka_unit_test(test_release),
        cmocka_unit_test(test_halted_list_bounded),
        cmocka_unit_test(test_renew),
        cmocka_unit_test(test_width),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_lease_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
