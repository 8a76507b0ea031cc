"""Fast sync against the fake API server (tests/lib/fakeapi.py): the agent
as one of the fixture's pods, whose spec names ConfigMaps and Secrets, on a
kubelet-layout volume written by build/tools/awsim. The test plays the
kubelet: it rewrites the volume when it sees the nudge (or does not, to
make the agent re-nudge and fall back). The fake stands in for faults the
real server will not produce on demand: watches dropped, ERROR 410 events,
a 410 status after compaction, malformed events, refused patches, a
rotated token. What the agent did is read from the fake's request record
and from /status, not only from the log.
"""
import json
import os
import time

from tests.lib import fakeapi
from tests.lib.proc import check, free_port, http_get, wait_until
from tests.lib.agent import activity, trace
from tests.lib.fastsync import (SYNC, META, META_LIST, TABLE, put, setup, start, status, requests, patches, nudge_values, NUDGE_FLOOR, steps, nudges, storm, reads_of, kick, in_budget, budget_hits)


def test_watches_are_named_and_metadata_only(env):
    """Every object of the pod spec (volumes, projected sources, env) gets
    one list and one watch with fieldSelector=metadata.name=NAME and the
    metadata-only Accept header; nothing is read without a name."""
    vols = [{"name": "site", "configMap": {"name": "site"}},
            {"name": "creds", "secret": {"secretName": "creds"}},
            {"name": "p", "projected": {"sources": [{"configMap": {"name": "extra"}},
                                                    {"secret": {"name": "tls"}}]}}]
    fake, pod, vol = setup(env, vols, env_from=[{"configMapRef": {"name": "envcm"}}])
    a = start(env, fake, pod, vol)
    # the state asserted below, reached (under load a watch can still be on its way after
    # the agent reports it streaming: the fake records it when it answers)
    wait_until(lambda: len(fake.ctl("GET", "/watches")[1]) == 5, 15, "five watches open at the fake")
    st = status(a)
    got = sorted((o["resource"], o["name"]) for o in st["objects"])
    check(got == [("configmaps", "envcm"), ("configmaps", "extra"), ("configmaps", "site"),
                  ("secrets", "creds"), ("secrets", "tls")], "objects: %r" % got)
    reads = [r for r in requests(fake) if r["method"] == "GET" and
             (r["path"].endswith("/configmaps") or r["path"].endswith("/secrets"))]
    check(len(reads) == 10, "want one list and one watch per object: %r" % [
        (r["path"], r["query"]) for r in reads])
    for r in reads:
        q = r["query"]
        check(q.get("fieldSelector", "").startswith("metadata.name="), "unnamed read: %r" % q)
        if r["path"].endswith("/secrets"):  # a Table without objects: no annotation either
            want = TABLE
            check(q.get("includeObject") == "None", "a Secret read with objects: %r" % q)
        else:
            want = META if q.get("watch") else META_LIST
        check(want in (r.get("accept") or ""), "not metadata only: %r" % r.get("accept"))
        if q.get("watch"):
            check(q.get("allowWatchBookmarks") == "true" and q.get("resourceVersion"),
                  "watch without bookmarks or resourceVersion: %r" % q)
    check(not patches(fake, pod), "a nudge without a change")
    check("c2VjcmV0" not in "\n".join(a.lines), "the agent logged the Secret's data")


def test_nudge_then_synced(env):
    """A ConfigMap edit gives one PATCH of the pod's annotation to the new
    resourceVersion; once the volume changes, the change is synced with one
    nudge (in the log and /status)."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol, "--fast-sync-confirm", "30s")
    rv = put(fake, "configmaps", {"metadata": {"name": "site"}, "data": {"site.conf": "v1"}})
    wait_until(lambda: nudge_values(fake, pod) == [rv], 10, "the nudge")
    check(patches(fake, pod)[0]["content_type"] == "application/merge-patch+json",
          "content type %r" % patches(fake, pod)[0]["content_type"])
    st, obj = fake.ctl("GET", "/object?resource=pods&name=" + pod)
    check(obj["metadata"]["annotations"].get(SYNC) == rv, "the pod's annotation: %r" %
          obj["metadata"]["annotations"])
    env.awsim(vol, {"site.conf": "v1\n"})  # the kubelet's swap
    ev = a.wait_event("fast-sync-synced", timeout=10)[-1]
    check(ev["resource_version"] == rv and ev["nudges"] == 1, "synced: %r" % ev)
    s = status(a)
    check(s["state"] == "idle" and s["synced"] == 1 and s["nudges"] == 1 and
          s["last"]["result"] == "synced", "status: %r" % s)


def test_renudge_then_fallback(env):
    """No content change after a nudge: re-nudge with a new value each time
    (rv, rv.2, rv.3, rv.4), then fall back, in the log and in /status; the
    next edit starts again."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol, "--fast-sync-confirm", "100ms")
    rv = put(fake, "configmaps", {"metadata": {"name": "site"}, "data": {"site.conf": "v1"}})
    ev = a.wait_event("fast-sync-fallback", timeout=15)[-1]
    check(nudge_values(fake, pod) == [rv, rv + ".2", rv + ".3", rv + ".4"],
          "nudges: %r" % nudge_values(fake, pod))
    check(ev["nudges"] == 4 and "periodic sync" in ev["msg"], "fallback: %r" % ev)
    s = status(a)
    check(s["state"] == "fallback" and s["fallback"] and s["fallbacks"] == 1 and
          s["last"]["result"] == "fell back", "status: %r" % s)
    rv2 = put(fake, "configmaps", {"metadata": {"name": "site"}, "data": {"site.conf": "v2"}})
    wait_until(lambda: rv2 in nudge_values(fake, pod), 10, "the next edit's nudge")
    env.awsim(vol, {"site.conf": "v2\n"})
    a.wait_match("fast-sync-synced", timeout=10, resource_version=rv2)
    check(status(a)["state"] == "idle", "not idle after the sync")


def test_refused_nudge_falls_back_at_once(env):
    """A nudge the API server refuses (403: RBAC, or the policy's 422) is not
    repeated: the agent says why and falls back."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol)
    fake.ctl("POST", "/faults", {"method": "PATCH", "path_regex": "/pods/", "status": 403})
    put(fake, "configmaps", {"metadata": {"name": "site"}, "data": {"site.conf": "v1"}})
    a.wait_event("fast-sync-fallback", timeout=10)
    err = a.wait_event("fast-sync-error", timeout=5)[-1]
    check('verb "patch" on resource "pods"' in err["error"], "error: %r" % err["error"])
    # the hint names fast sync's own Role, not the rollout Role of manifests/role.yaml
    check("grant it fast sync's Role" in err["error"] and "reload-agent inject -o rbac" in err["error"]
          and "manifests/role.yaml" not in err["error"], "hint: %r" % err["error"])
    check(len(patches(fake, pod)) == 1, "a refused nudge was repeated")
    s = status(a)
    check(s["patch_errors"] == 1 and s["fallback"] and "patch" in s["last_error"], "status: %r" % s)


def test_watch_faults_recover(env):
    """A dropped stream reconnects (with the backoff), an ERROR 410 event
    relists (after the next step of the backoff), a malformed event is one
    clear error line and a relist."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol, "--fast-sync-confirm", "30s")

    def watches(name):
        return [o for o in status(a)["objects"] if o["name"] == name][0]

    # the drop must find both streams open at the server
    wait_until(lambda: len(fake.ctl("GET", "/watches")[1]) == 2, 15, "both watches open at the fake")
    before = watches("site")["watches"]
    fake.ctl("POST", "/watch", {"action": "drop"})
    wait_until(lambda: watches("site")["watches"] > before and watches("site")["streaming"], 15,
               "the watch to reconnect after a drop")
    lists = watches("site")["lists"]
    fake.ctl("POST", "/watch", {"action": "gone"})
    wait_until(lambda: watches("site")["lists"] > lists and watches("site")["streaming"], 15,
               "a relist after an ERROR 410 event")
    check(watches("site")["gone"] >= 1, "410 not counted: %r" % watches("site"))
    # the errors logged so far (the drops) are not the malformed event's
    seen = len(a.matching("fast-sync-error"))
    fake.ctl("POST", "/watch", {"action": "garbage"})
    a.wait_for(lambda evs: [e for e in [e for e in evs if e.get("event") == "fast-sync-error"][seen:]
                            if "not a JSON object" in e.get("error", "")] or None, 10,
               "the malformed event's fast-sync-error")
    wait_until(lambda: all(o["streaming"] for o in status(a)["objects"]), 30,
               "the watches back after a malformed event")
    check(not patches(fake, pod), "nudged without a change: %r" % nudge_values(fake, pod))


def test_compaction_relist_finds_missed_change(env):
    """Compaction: the watches are dropped, the ConfigMap changes meanwhile,
    two requests fail (503), and resuming from the old resourceVersion is
    answered with the 410 status: the relist finds the missed change and
    nudges it once; the unchanged Secret (resynced from resourceVersion 0)
    is not nudged."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol, "--fast-sync-confirm", "30s")
    wait_until(lambda: len(fake.ctl("GET", "/watches")[1]) == 2, 15, "both watches open at the fake")
    lists = [o for o in status(a)["objects"] if o["name"] == "site"][0]["lists"]
    fake.ctl("POST", "/watch", {"gone_as": "status"})
    fake.ctl("POST", "/faults", {"method": "GET", "path_regex": "/configmaps$", "status": 503,
                                 "count": 2})
    fake.ctl("POST", "/watch", {"action": "drop"})
    rv = put(fake, "configmaps", {"metadata": {"name": "site"}, "data": {"site.conf": "v1"}})
    put(fake, "configmaps", {"metadata": {"name": "unrelated"}, "data": {}})
    fake.ctl("POST", "/watch", {"compact": True})
    # drop, 503, 503, 410: four steps of the backoff (1 + 2 + 4 + 8 s, each up to 125 %)
    wait_until(lambda: rv in nudge_values(fake, pod), 40, "the nudge for the missed change")
    check([o for o in status(a)["objects"] if o["name"] == "site"][0]["lists"] > lists,
          "no relist after the 410 status")
    wait_until(lambda: all(o["streaming"] for o in status(a)["objects"]), 40, "the watches back")
    a.quiet(1)
    check(nudge_values(fake, pod) == [rv], "nudged for an unchanged object: %r" %
          nudge_values(fake, pod))


def test_secret_change_and_relist(env):
    """A Secret is watched as a Table (no object, so not its
    last-applied-configuration annotation either): an edit is nudged with
    its resourceVersion. A relist (410 Gone) is not a change (G2): a Table
    list says no resourceVersion, so the Secret is resynced by a watch from
    resourceVersion 0, whose first event carries it; unchanged, no nudge."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol, "--fast-sync-confirm", "30s")
    rv = put(fake, "secrets", {"metadata": {"name": "creds", "annotations": {
        "kubectl.kubernetes.io/last-applied-configuration": '{"data":{"password":"c2VjcmV0MQ=="}}'}},
        "data": {"password": "c2VjcmV0MQ=="}})
    wait_until(lambda: nudge_values(fake, pod) == [rv], 10, "the Secret's nudge")
    env.awsim(vol, {"site.conf": "v0\n", "password": "secret1"})
    a.wait_match("fast-sync-synced", timeout=10, resource_version=rv)
    fake.ctl("POST", "/watch", {"action": "gone"})
    wait_until(lambda: any(r["query"].get("resourceVersion") == "0" for r in reads_of(fake, "creds")[1])
               and [o for o in status(a)["objects"] if o["name"] == "creds"][0]["streaming"], 15,
               "the Secret resynced by a watch from resourceVersion 0")
    a.quiet(1.5)
    check(nudge_values(fake, pod) == [rv], "a relist nudged: %r" % nudge_values(fake, pod))
    check("c2VjcmV0MQ" not in "\n".join(a.lines), "the Secret's data in the agent's log")


def test_secret_gone_storm_nudges_nothing(env):
    """G2: a 410 on every watch of a Secret that does not change gives no
    PATCH at all; a change made while its watch was down is found by the
    resync and nudged once, with its own resourceVersion."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol, "--fast-sync-confirm", "30s")
    storm(fake, "secrets", "creds", "gone_event")
    kick(fake)
    wait_until(lambda: [o for o in status(a)["objects"] if o["name"] == "creds"][0]["gone"] >= 3, 30,
               "three 410s of the Secret")
    check(not patches(fake, pod), "nudged for an unchanged Secret: %r" % nudge_values(fake, pod))
    storm(fake, "secrets", "creds", "gone_status")
    rv = put(fake, "secrets", {"metadata": {"name": "creds"}, "data": {"password": "c2VjcmV0Mg=="}})
    storm(fake, "secrets", "creds", None)
    wait_until(lambda: nudge_values(fake, pod), 45, "the nudge for the change made while down")
    a.quiet(1.5)
    check(nudge_values(fake, pod) == [rv], "nudges: %r, want [%s]" % (nudge_values(fake, pod), rv))


def test_gone_storm_backs_off(env):
    """G1: a 410 Gone on every watch, as an ERROR event or as the HTTP
    status, relists after the backoff, which grows: within the budget of
    one list and one watch per step (it was 66 pairs in 6 s)."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol, "--fast-sync-confirm", "30s")
    storm(fake, "configmaps", "site", "gone_event")
    storm(fake, "secrets", "creds", "gone_status")
    t0 = kick(fake)
    time.sleep(10)  # the second relist comes 5.25-8.75 s after the kick
    took = time.monotonic() - t0
    ls, ws = in_budget(fake, "site", took)
    check(len(ls) >= 2, "the ConfigMap did not relist after 410s: %d lists" % len(ls))
    in_budget(fake, "creds", took, lists=False)  # a Secret resyncs by a watch, never a list
    check(not patches(fake, pod), "nudged without a change: %r" % nudge_values(fake, pod))
    check(budget_hits(a).get("backoff", 0) >= 1, "no budget hit counted: %r" % budget_hits(a))
    ev = a.wait_event("fast-sync-budget", timeout=5)[0]
    check(ev["level"] in ("warn", "info") and ev["limit"] == "backoff", "budget line: %r" % ev)


def test_early_end_storm_backs_off(env):
    """G3: a stream that ends early is a failure whatever it delivered: after
    a bookmark, or after an event (each a real change), the next watch waits
    the backoff (it was 129 watches, and 135 PATCHes, in 6 s)."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol, "--fast-sync-confirm", "30s")
    storm(fake, "configmaps", "site", "end_after_bookmark")
    storm(fake, "secrets", "creds", "end_after_event")
    t0 = kick(fake)
    time.sleep(8)
    took = time.monotonic() - t0
    in_budget(fake, "site", took)
    _, ws = in_budget(fake, "creds", took)
    check(len(ws) >= 2, "the Secret's watch did not come back: %d" % len(ws))
    got = nudge_values(fake, pod)
    check(got and len(got) <= min(len(ws), nudges(took)), "nudges: %r for %d watches" % (got, len(ws)))
    check(len(set(got)) == len(got), "a change nudged twice: %r" % got)


def test_nudges_have_a_floor(env):
    """G4: a new resourceVersion every 20 ms gives at most one PATCH per
    floor (1 s), each for the newest change, never twice the same (it was 133
    in 6 s); the budget hit is one line at the default level and a metric."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol, "--fast-sync-confirm", "30s")
    fake.ctl("POST", "/requests/clear")
    t0 = time.monotonic()
    storm(fake, "configmaps", "site", "churn", interval_ms=20)
    time.sleep(6)
    storm(fake, "configmaps", "site", None)
    took = time.monotonic() - t0
    got = nudge_values(fake, pod)
    check(2 <= len(got) <= nudges(took), "%d PATCHes in %.1f s, the floor allows %d: %r" % (
        len(got), took, nudges(took), got))
    check(len(set(got)) == len(got), "a change nudged twice: %r" % got)
    times = [r["time"] for r in patches(fake, pod)]
    gaps = [b - x for x, b in zip(times, times[1:])]
    check(all(g >= NUDGE_FLOOR * 0.9 for g in gaps), "PATCHes closer than the floor: %r" % gaps)
    lines = a.of("fast-sync-budget")
    check(lines and lines[0]["level"] == "warn" and lines[0]["limit"] == "nudge_floor",
          "budget lines: %r" % lines)
    check(len(lines) <= 2, "the budget line is not rate-limited: %d lines" % len(lines))
    check(budget_hits(a).get("nudge_floor", 0) >= 10, "metric: %r" % budget_hits(a))


def test_malformed_storm_backoff_grows(env):
    """G5: a malformed event on every watch relists after a backoff that
    grows: a successful list does not reset it (it relisted every ~1 s)."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol, "--fast-sync-confirm", "30s")
    storm(fake, "configmaps", "site", "garbage")
    t0 = kick(fake)
    time.sleep(15)
    took = time.monotonic() - t0
    ls, _ = in_budget(fake, "site", took)
    check(len(ls) >= 2, "no relist after malformed events: %d" % len(ls))
    gaps = [b["time"] - x["time"] for x, b in zip(ls, ls[1:])]
    check(all(b > x for x, b in zip(gaps, gaps[1:])), "the backoff did not grow: %r" % gaps)
    check(a.wait_for(lambda evs: [e for e in evs if e.get("event") == "fast-sync-error" and
                                  "not a JSON object" in e.get("error", "")], 5,
                     "the malformed event's error"), "no error line")


def test_event_for_another_object_is_refused(env):
    """G6: a watch event for another object (a server that ignored the
    field selector) is no change: no PATCH, a clear error naming it, and the
    watch resumes after the backoff (it gave 8 PATCHes)."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol, "--fast-sync-confirm", "30s")
    storm(fake, "configmaps", "site", "other_name", other="someone-else")
    storm(fake, "secrets", "creds", "other_name", other="someone-else")
    t0 = kick(fake)
    time.sleep(6)
    in_budget(fake, "site", time.monotonic() - t0)
    check(not patches(fake, pod), "nudged for another object: %r" % nudge_values(fake, pod))
    errs = [e for e in a.of("fast-sync-error") if "someone-else" in e.get("error", "")]
    check(errs and "field selector" in errs[0]["error"], "errors: %r" % a.of("fast-sync-error"))


def test_older_resource_version_is_no_change(env):
    """G7: resourceVersions that go back (11, 5, 11, 5, ...) are one change,
    the first: an older one, or one already seen, is no change (it gave 13
    PATCHes)."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol, "--fast-sync-confirm", "30s")
    st_, cm = fake.ctl("GET", "/object?resource=configmaps&name=site")
    base = int(cm["metadata"]["resourceVersion"])
    newer, older = str(base + 100), str(base + 50)
    storm(fake, "configmaps", "site", "rvs", rvs=[newer, older], interval_ms=50)
    kick(fake)
    wait_until(lambda: nudge_values(fake, pod), 10, "the first change's nudge")
    a.quiet(3)
    check(nudge_values(fake, pod) == [newer], "nudges: %r, want [%s]" % (nudge_values(fake, pod), newer))


def test_trickling_head_is_reported(env):
    """U1: a watch whose response head trickles (a byte a second) is cut
    after 10 s and reported at the default level, then retried with the
    backoff; once the server answers again, the watch streams (it was
    silent for up to an hour)."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol, "--fast-sync-confirm", "30s")
    storm(fake, "configmaps", "site", "trickle_head", interval_ms=1000)
    t0 = kick(fake)
    ev = a.wait_for(lambda evs: [e for e in evs if e.get("event") == "fast-sync-error" and
                                 "response head" in e.get("error", "")], 25,
                    "the trickling head reported")[0]
    took = time.monotonic() - t0
    check(ev["level"] == "warn" and 9 <= took <= 20, "reported after %.1f s: %r" % (took, ev))
    storm(fake, "configmaps", "site", None)
    wait_until(lambda: [o for o in status(a)["objects"] if o["name"] == "site"][0]["streaming"], 40,
               "the watch streaming again")


def test_token_rotation(env):
    """A rotated token: the open watches go on; after the server drops them,
    the first reconnect's 401 makes the agent re-read the token file, and
    the next one uses the new token."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol, "--fast-sync-confirm", "30s")
    fake.ctl("POST", "/token", {"token": "rotated-" + os.urandom(8).hex()})
    fake.ctl("POST", "/requests/clear")
    fake.ctl("POST", "/watch", {"action": "drop"})
    wait_until(lambda: all(o["streaming"] for o in status(a)["objects"]) and
               any(r["authorized"] and r["query"].get("watch") for r in requests(fake)), 30,
               "the watches back with the new token")
    rv = put(fake, "configmaps", {"metadata": {"name": "site"}, "data": {"site.conf": "v1"}})
    wait_until(lambda: rv in nudge_values(fake, pod), 10, "a nudge with the new token")


def test_objects_from_the_flag(env):
    """--fast-sync-objects names the objects: the pod is not read for them,
    and only those are watched."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol, "--fast-sync-objects", "configmap/site")
    check([(o["resource"], o["name"]) for o in status(a)["objects"]] == [("configmaps", "site")],
          "objects: %r" % status(a)["objects"])
    check(not [r for r in requests(fake) if "/secrets" in r["path"]], "a Secret was read")


def test_bad_objects_flag(env):
    r = env.run([env.binary, "run", "--watch", env.tmp, "--fast-sync",
                 "--fast-sync-objects", "deployment/web"], timeout=20)
    err = r.stderr.decode()
    check(r.returncode == 2 and "--fast-sync-objects" in err and "configmap/NAME" in err,
          "exit %d: %r" % (r.returncode, err))


def test_idle_with_watches_open(env):
    """With the watches open and nothing sent, the agent makes no syscall
    at all: no timer runs while a stream is open (--resync 0)."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol)
    time.sleep(0.5)
    lines = trace(env, a.pid, "fastsync")
    check(lines, "strace recorded nothing at all")
    busy = activity(lines)
    check(not busy, "the idle agent made syscalls with the watches open: %r" % busy[:10])


def test_shutdown_with_requests_in_flight(env):
    """SIGTERM while a nudge is in flight and the watches are open: the agent
    exits 0 at once (every handle closed: uv_loop_close succeeded), and a
    second agent does the same while its pod GET is still unanswered."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol)
    fake.ctl("POST", "/faults", {"method": "PATCH", "path_regex": "/pods/", "delay_ms": 3000})
    put(fake, "configmaps", {"metadata": {"name": "site"}, "data": {"site.conf": "v1"}})
    a.wait_event("fast-sync-nudge", timeout=10)
    t0 = time.monotonic()
    rc = a.stop()
    check(rc == 0, "exit status %r with a nudge in flight" % rc)
    check(time.monotonic() - t0 < 3, "the agent waited for the nudge's reply to exit")
    fake.ctl("POST", "/faults/clear")
    fake.ctl("POST", "/faults", {"method": "GET", "path_regex": "/pods/", "delay_ms": 3000})
    port = free_port()
    b = env.agent(["--watch", vol, "--resync", "0", "--action", "none", "--kube-api", fake.url,
                   "--kube-ca-file", fake.info["ca"], "--kube-token-file", fake.info["token_file"],
                   "--pod-name", pod, "--namespace", "default", "--annotations", "",
                   "--events=false", "--listen", "127.0.0.1:%d" % port, "--fast-sync"])
    b.wait_event("ready", timeout=15)
    rc = b.stop()
    check(rc == 0, "exit status %r with the pod GET in flight" % rc)
