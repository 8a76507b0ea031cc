/*
 * fuzz_watch.c - libFuzzer target for what fast sync reads from the API
 * server: watch event lines and list replies (kwatch__parse_event and
 * kwatch__parse_list in kube/kwatch.c), in both forms (PartialObjectMetadata
 * for ConfigMaps, a Table without objects for Secrets), and the pod spec
 * whose ConfigMaps and Secrets it watches (podrefs_from_pod, kube/podrefs.c).
 *
 * Input: the first byte picks the form (bit 0: Table); the rest is the
 * line, the list and the pod at once.
 *
 * Invariants: a parse either succeeds with a resourceVersion of
 * [A-Za-z0-9._-] (events other than ERROR) and a one-line message (ERROR),
 * or fails with a one-line, non-empty reason; an event's name is a
 * terminated string; two resourceVersions compare
 * antisymmetrically (KEP-5504), and one seen is never a change again; a
 * list that parses gives a
 * list resourceVersion, and an object resourceVersion exactly when the
 * object exists outside the Table form; every name podrefs returns is a
 * valid object name, at most PODREFS_MAX of them, without duplicates.
 */
#include "kube/kube.h"
#include "kube/k8sname.h"
#include "kube/kwatch.h"
#include "kube/podrefs.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

static int one_line(const char *s) { return s && s[0] && !strchr(s, '\n'); }

static int rv_ok(const char *rv)
{
    if (!rv[0]) return 0;
    for (const char *p = rv; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              *p == '-' || *p == '.' || *p == '_'))
            return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int table = data[0] & 1;
    const char *s = (const char *)data + 1;
    size_t n = size - 1;
    char err[512];

    struct kwatch__event ev;
    err[0] = '\0';
    if (kwatch__parse_event(s, n, table, &ev, err, sizeof err) == 0) {
        CHECK(memchr(ev.name, '\0', sizeof ev.name) != NULL);
        if (ev.type == KWATCH__ERROR)
            CHECK(one_line(ev.message));
        else
            CHECK(rv_ok(ev.rv));
    } else {
        CHECK(one_line(err));
    }

    char list_rv[128], obj_rv[128];
    int exists = -1;
    err[0] = '\0';
    if (kwatch__parse_list(s, n, "site", table, list_rv, sizeof list_rv, &exists, obj_rv, err,
                           sizeof err) == 0) {
        CHECK(rv_ok(list_rv));
        CHECK(exists == 0 || exists == 1);
        CHECK(table ? obj_rv[0] == '\0' : (exists ? rv_ok(obj_rv) : obj_rv[0] == '\0'));
        int ab, ba;
        if (kwatch__rv_compare(list_rv, ev.rv, &ab) == 0) {
            CHECK(kwatch__rv_compare(ev.rv, list_rv, &ba) == 0 && ab == -ba);
            CHECK((ab == 0) == (strcmp(list_rv, ev.rv) == 0));
        }
        struct kwatch__rvs rvs;
        memset(&rvs, 0, sizeof rvs);
        kwatch__rvs_raise(&rvs, list_rv);
        if (exists && !table) kwatch__rvs_note(&rvs, obj_rv);
        if (ev.rv[0]) {
            kwatch__rvs_note(&rvs, ev.rv);
            CHECK(!kwatch__rvs_is_new(&rvs, ev.rv, 0));
        }
    } else {
        CHECK(one_line(err));
    }

    struct podrefs r = {0};
    err[0] = '\0';
    if (podrefs_from_pod(s, n, &r, err, sizeof err) == 0) {
        CHECK(r.n <= PODREFS_MAX);
        for (size_t i = 0; i < r.n; i++) {
            CHECK(k8s_is_dns1123_subdomain(r.v[i].name));
            for (size_t j = 0; j < i; j++)
                CHECK(r.v[i].kind != r.v[j].kind || strcmp(r.v[i].name, r.v[j].name) != 0);
        }
    } else {
        CHECK(one_line(err));
    }
    podrefs_free(&r);
    return 0;
}
