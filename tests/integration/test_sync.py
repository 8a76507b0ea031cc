"""The cluster sync service (`reload-agent sync`, docs/sync.md) against the
API double (tests/lib/fakeapi.py): pods that carry the injector's
reload-agent.io/sync-objects annotation, objects changed through the
double's control API. The double stands in for what a real server will not
do on demand: a 410 to every open watch, a leader replica killed at once.
What the service did is read from the double's request record.
"""
import re
import signal
import time

from tests.lib.proc import check, wait_until
from tests.lib.syncsvc import (Sync, launch, pod, put, patches, values, watches_open, ready,
                               lease, requests, settle, SYNC)


def objects(fake):
    put(fake, "configmaps", {"metadata": {"name": "a"}, "data": {"k": "0"}})
    put(fake, "configmaps", {"metadata": {"name": "b"}, "data": {"k": "0"}})
    put(fake, "configmaps", {"metadata": {"name": "lonely"}, "data": {"k": "0"}})
    put(fake, "secrets", {"metadata": {"name": "s"}, "data": {"k": "c2VjcmV0"}})
    put(fake, "pods", pod("p1", "configmap/a,secret/s"))
    put(fake, "pods", pod("p2", "configmap/a"))
    put(fake, "pods", pod("p3", "configmap/b"))
    put(fake, "pods", pod("p4"))  # not injected


def test_sync_nudges_exactly_the_referencing_pods(env):
    """A change PATCHes the annotation of exactly the pods that name the
    object, once each, with KIND/NAME@RV; an object nobody names costs no
    request; every read is a metadata-only watch (a Secret: a Table without
    objects), never a list, never a pod by name."""
    fake = launch(env)
    objects(fake)
    s = Sync(env, fake, "one")
    ready(fake, s)
    settle(0.5)
    check(patches(fake) == [], "a PATCH without a change: %r" % patches(fake))
    rv = put(fake, "configmaps", {"metadata": {"name": "a"}, "data": {"k": "1"}})
    wait_until(lambda: len(patches(fake)) == 2, 10, "the PATCHes of p1 and p2")
    check(values(fake, "p1") == ["configmap/a@" + rv] and values(fake, "p2") == ["configmap/a@" + rv],
          "values: %r %r" % (values(fake, "p1"), values(fake, "p2")))
    check(patches(fake)[0]["content_type"] == "application/merge-patch+json", "content type")
    srv = put(fake, "secrets", {"metadata": {"name": "s"}, "data": {"k": "bmV3"}})
    wait_until(lambda: len(patches(fake)) == 3, 10, "the PATCH of p1 for the Secret")
    check(values(fake, "p1")[-1] == "secret/s@" + srv, "p1: %r" % values(fake, "p1"))
    before = len(requests(fake))
    put(fake, "configmaps", {"metadata": {"name": "lonely"}, "data": {"k": "1"}})
    settle(1.5)
    after = [r for r in requests(fake)[before:] if not r["path"].endswith("/leases/reload-agent-sync")]
    check(after == [], "requests for an object nobody names: %r" % after)
    check(len(patches(fake)) == 3, "PATCHes: %r" % [p["path"] for p in patches(fake)])
    for r in requests(fake):
        if r["path"].endswith(("/configmaps", "/secrets", "/pods")):
            q = r["query"]
            check(q.get("watch") == "1" and q.get("allowWatchBookmarks") == "true",
                  "not a watch: %r" % q)
            want = "as=Table;" if r["path"].endswith("/secrets") else "as=PartialObjectMetadata;"
            check(want in (r.get("accept") or ""), "not metadata only: %r" % r.get("accept"))
            if r["path"].endswith("/secrets"):
                check(q.get("includeObject") == "None", "a Secret with its object: %r" % q)
        check(not (r["method"] == "GET" and "/pods/" in r["path"]), "a pod read: %r" % r["path"])
    check(s.proc.poll() is None, "the service exited")
    check(s.stop() == 0, "exit status on SIGTERM")


def test_sync_burst_coalesced(env):
    """Twenty changes of one object within a moment: each referencing pod
    gets at most two PATCHes (one after the coalescing window, one after
    the 1 s floor), the last for the last version."""
    fake = launch(env)
    objects(fake)
    s = Sync(env, fake, "one")
    ready(fake, s)
    last = None
    for i in range(20):
        last = put(fake, "configmaps", {"metadata": {"name": "a"}, "data": {"k": str(i + 10)}})
    wait_until(lambda: values(fake, "p1")[-1:] == ["configmap/a@" + last] and
               values(fake, "p2")[-1:] == ["configmap/a@" + last], 10, "the last version")
    settle(1.5)
    for p in ("p1", "p2"):
        n = len(values(fake, p))
        check(1 <= n <= 2, "%s got %d PATCHes for a burst: %r" % (p, n, values(fake, p)))
    check(values(fake, "p3") == [], "p3 names another object")
    s.stop()


def test_sync_410_starts_over_from_zero_with_backoff(env):
    """A 410 to every watch: each starts again from resourceVersion 0 after
    the backoff, one request each (no storm); a change made meanwhile is
    seen at its new version and nudged."""
    fake = launch(env)
    objects(fake)
    s = Sync(env, fake, "one")
    ready(fake, s)
    t0 = time.time()
    fake.ctl("POST", "/watch", {"compact": True, "action": "gone"})
    rv = put(fake, "configmaps", {"metadata": {"name": "b"}, "data": {"k": "gap"}})
    wait_until(lambda: values(fake, "p3") == ["configmap/b@" + rv], 10, "the change of the gap")
    wait_until(lambda: len(watches_open(fake)) == 3, 10, "the watches back")
    settle(3)
    again = [r for r in requests(fake) if r["time"] > t0 and r["query"].get("watch") == "1"]
    check(len(again) == 3, "watches after the 410: %r" % [(r["path"], r["query"]) for r in again])
    check(all(r["query"].get("resourceVersion") == "0" for r in again), "not from 0: %r" % again)
    first = min(r["time"] for r in again) - t0
    check(first >= 0.7, "no backoff: the first watch %.2f s after the 410" % first)
    check(s.has("410"), "the 410 is not logged")
    s.stop()


def test_sync_back_after_an_outage_resumes_at_once(env):
    """The API server away for a while (its listener closed: every request
    refused, the watches' backoff climbs to its cap), then back with its
    old resourceVersions gone (a restart). The first answer to any request
    (the Lease's read) cuts each watch's wait short: it resumes within the
    first step, not after the cap step it was in (the listener comes back
    just after a watch began one); the resume is answered 410 and the
    relist from 0 follows at the first step too, not at the step the outage
    reached; the change made meanwhile is nudged. (The e2e test_sync
    restart saw a watch wait 8 s after the route was back, then 9.6 s for
    its relist.)"""
    fake = launch(env)
    objects(fake)
    s = Sync(env, fake, "one", "--watch-retry-base", "200ms", "--watch-retry-cap", "4s")
    ready(fake, s)
    fake.ctl("POST", "/watch", {"action": "bookmark"})  # each watch's resume point
    wait_until(lambda: all(w["bookmarks"] for w in watches_open(fake)), 10, "the bookmarks sent")
    settle(0.3)
    capped = lambda: [line for line in list(s.lines) if re.search(r"next try in [3-5]\d{3} ms", line)]
    fake.ctl("POST", "/listener", {"up": False})
    wait_until(lambda: capped(), 20, "the watches' backoff at its cap")
    rv = put(fake, "configmaps", {"metadata": {"name": "b"}, "data": {"k": "meanwhile"}})
    fake.ctl("POST", "/watch", {"compact": True})
    n = len(capped())
    wait_until(lambda: len(capped()) > n, 20, "a watch beginning a cap step", interval=0.01)
    t0 = time.time()
    fake.ctl("POST", "/listener", {"up": True})
    wait_until(lambda: values(fake, "p3") == ["configmap/b@" + rv], 20, "the change made meanwhile")
    wait_until(lambda: len(watches_open(fake)) == 3, 10, "the watches back")
    back = [r for r in requests(fake) if r["time"] > t0 and r["query"].get("watch") == "1"]
    for path in sorted({r["path"] for r in back}):
        mine = [r for r in back if r["path"] == path]
        check(len(mine) >= 2 and mine[0]["query"].get("resourceVersion") != "0" and
              mine[1]["query"].get("resourceVersion") == "0",
              "%s: want a resume (410) then a watch from 0: %r" % (path, [r["query"] for r in mine]))
        resumed, gap = mine[0]["time"] - t0, mine[1]["time"] - mine[0]["time"]
        check(resumed < 1.5, "%s: resumed %.2f s after the listener came back (its cap step; want "
                             "within the first after the Lease's read, 0.2 s apart)" % (path, resumed))
        check(gap < 1.5, "%s: resumed %.2f s after the listener came back, the relist after its 410 "
                         "waited %.2f s more (the outage's step; want the first, 0.15-0.25 s)"
              % (path, resumed, gap))
    check(s.has("410"), "the 410 is not logged")
    s.stop()


def test_sync_two_replicas_one_leader(env):
    """Two processes: one leads (the Lease names it), a change gives one
    PATCH per pod, not two; killed at once, the other takes over after the
    lease duration and nudges the next change; the pods' annotation keeps
    a replica from nudging again for a change they show."""
    fake = launch(env)
    objects(fake)
    one, two = Sync(env, fake, "one"), Sync(env, fake, "two")
    ready(fake, one, two)
    lead, other = (one, two) if one.leader() else (two, one)
    holder = lease(fake)["spec"]["holderIdentity"]
    check(holder == ("one" if lead is one else "two"), "the Lease names %r" % holder)
    rv = put(fake, "configmaps", {"metadata": {"name": "a"}, "data": {"k": "1"}})
    wait_until(lambda: len(patches(fake)) == 2, 10, "the PATCHes of p1 and p2")
    settle(1)
    check(len(patches(fake)) == 2, "doubled: %r" % values(fake, "p1"))
    lead.proc.send_signal(signal.SIGKILL)
    lead.proc.wait(10)
    wait_until(other.leader, 15, "the other replica leads")
    check(lease(fake)["spec"]["holderIdentity"] != holder, "the Lease still names %r" % holder)
    check(len(patches(fake)) == 2, "the new leader nudged again for a change the pods show: %r"
          % values(fake, "p1"))
    rv2 = put(fake, "configmaps", {"metadata": {"name": "a"}, "data": {"k": "2"}})
    wait_until(lambda: values(fake, "p1")[-1:] == ["configmap/a@" + rv2], 10, "the new leader's")
    check(rv2 != rv, "the same version")
    other.stop()


def test_sync_hung_lease_request_does_not_blind_the_election(env):
    """A Lease request the API server holds (a renewal answered only after
    8 s, as a connection to an API server that went away hangs) is given up
    after a third of the lease duration and tried again at the next period:
    the leader renews in time and never steps down. (Each request of the
    election is one attempt: kube_request's own retries, up to 6 of 10 s,
    kept it blind for up to a minute after an API server came back.)"""
    fake = launch(env)
    objects(fake)
    s = Sync(env, fake, "one", "--lease-duration", "6s")
    ready(fake, s)
    t0 = time.time()
    fake.ctl("POST", "/faults", {"method": "PATCH", "path_regex": "/leases/", "delay_ms": 8000, "count": 1})
    settle(9)
    check(s.has("cannot write Lease"), "the hung renewal was not given up")
    check(not s.has("is no longer the leader"), "the leader stepped down: %r" % s.lines[-5:])
    renewed = [r for r in requests(fake) if r["method"] == "PATCH" and "/leases/" in r["path"]
               and r["time"] > t0 + 3 and r["status"] == 200]
    check(len(renewed) >= 10, "%d renewals in the 6 s after the hung one" % len(renewed))
    rv = put(fake, "configmaps", {"metadata": {"name": "a"}, "data": {"k": "1"}})
    wait_until(lambda: values(fake, "p1") == ["configmap/a@" + rv], 10, "the leader's nudge")
    s.stop()


def outage(fake, seconds):
    """The API server away for seconds (every connection cut, connections
    refused) while configmap a changes; returns its new resourceVersion and
    when the server came back."""
    fake.ctl("POST", "/listener", {"up": False})
    rv = put(fake, "configmaps", {"metadata": {"name": "a"}, "data": {"k": "down"}})
    settle(seconds)
    fake.ctl("POST", "/listener", {"up": True})
    return rv, time.time()


def wait_watches_back(fake, since):
    """The three watches asked again since the server came back (the double
    may still list a cut stream as open until it writes to it; a stream's
    status is recorded when it ends)."""
    def back():
        got = {r["path"].rsplit("/", 1)[1] for r in requests(fake)
               if r["time"] >= since and r["query"].get("watch") == "1" and r["status"] in (None, 200)}
        return got == {"configmaps", "secrets", "pods"}
    wait_until(back, 20, "the three watches back")


def test_sync_api_server_restart(env):
    """The API server goes away (every connection cut, connections
    refused) while an object changes, then comes back: the watches come
    back after their backoff, the change is nudged once per referencing
    pod, the service never exits."""
    fake = launch(env)
    objects(fake)
    s = Sync(env, fake, "one")
    ready(fake, s)
    rv, t_up = outage(fake, 1.5)
    wait_until(lambda: values(fake, "p1") == ["configmap/a@" + rv] and
               values(fake, "p2") == ["configmap/a@" + rv], 20, "the change made while down")
    wait_watches_back(fake, t_up)
    settle(1.5)
    check(len(patches(fake)) == 2, "PATCHes: %r" % [(p["path"], p["body"]) for p in patches(fake)])
    check(s.proc.poll() is None, "the service exited")
    s.stop()


def test_sync_backoff_cap_after_a_long_outage(env):
    """--watch-retry-cap bounds the backoff: during 6 s without an API server
    (base 100 ms: 0.1, 0.2, 0.4 ... would reach 3.2 and 6.4 s under kwatch's
    30 s cap) no wait the service announces is longer than the cap (500 ms,
    at most 125 % of it); the watches come back and the change made while it
    was away is nudged. (The waits are read from its log, not timed.)"""
    fake = launch(env)
    objects(fake)
    s = Sync(env, fake, "one", "--watch-retry-base", "100ms", "--watch-retry-cap", "500ms")
    ready(fake, s)
    rv, t_up = outage(fake, 6)
    wait_watches_back(fake, t_up)
    with s.cond:
        waits = [int(m.group(1)) for m in (re.search(r"next try in (\d+) ms", line) for line in s.lines) if m]
    check(len(waits) >= 9, "only %d failed watch requests in 6 s: %r" % (len(waits), waits))
    check(max(waits) <= 625, "a wait of %d ms under a 500 ms cap: %r" % (max(waits), waits))
    wait_until(lambda: values(fake, "p1") == ["configmap/a@" + rv], 10, "the change made while down")
    s.stop()


def test_sync_change_while_no_replica_ran_is_nudged(env):
    """A change made while no replica watched (the last one stopped, a new
    one started after it: the real cluster's leader change where the
    replacement pod won the Lease) is the new replica's baseline; once it
    leads, it nudges the pods whose last nudge is older than that version,
    once each, and not the pod that was never nudged."""
    fake = launch(env)
    objects(fake)
    put(fake, "pods", pod("p5", "configmap/a"))  # named, never nudged below
    one = Sync(env, fake, "one")
    ready(fake, one)
    rv1 = put(fake, "configmaps", {"metadata": {"name": "a"}, "data": {"k": "1"}})
    wait_until(lambda: values(fake, "p1") == ["configmap/a@" + rv1], 10, "the first change's nudges")
    one.stop()
    fake.ctl("POST", "/object/delete", {"resource": "pods", "name": "p5"})
    put(fake, "pods", pod("p5", "configmap/a"))  # as if it started after the first change
    rv2 = put(fake, "configmaps", {"metadata": {"name": "a"}, "data": {"k": "2"}})
    two = Sync(env, fake, "two")
    wait_until(lambda: values(fake, "p1")[-1:] == ["configmap/a@" + rv2] and
               values(fake, "p2")[-1:] == ["configmap/a@" + rv2], 20, "the missed change's nudges")
    settle(1.5)
    check(values(fake, "p1") == ["configmap/a@" + rv1, "configmap/a@" + rv2] and
          values(fake, "p2") == ["configmap/a@" + rv1, "configmap/a@" + rv2],
          "nudges: p1 %r, p2 %r" % (values(fake, "p1"), values(fake, "p2")))
    check(values(fake, "p5") == [rv for rv in values(fake, "p5") if rv == "configmap/a@" + rv1],
          "the pod never nudged was nudged by the new replica: %r" % values(fake, "p5"))
    check(not patches(fake, "p3"), "p3 names nothing that changed: %r" % values(fake, "p3"))
    two.stop()


def test_sync_deleted_pod_forgotten(env):
    """A pod nudged once and then deleted is forgotten: the next change
    PATCHes only the pods that still exist (no 404 to retry)."""
    fake = launch(env)
    objects(fake)
    s = Sync(env, fake, "one")
    ready(fake, s)
    put(fake, "configmaps", {"metadata": {"name": "a"}, "data": {"k": "1"}})
    wait_until(lambda: len(patches(fake)) == 2, 10, "the PATCHes of p1 and p2")
    fake.ctl("POST", "/object/delete", {"resource": "pods", "name": "p2"})
    settle(1.2)  # the floor between two nudges of p1
    rv = put(fake, "configmaps", {"metadata": {"name": "a"}, "data": {"k": "2"}})
    wait_until(lambda: values(fake, "p1")[-1:] == ["configmap/a@" + rv], 10, "p1's second nudge")
    settle(1)
    check(len(patches(fake, "p2")) == 1, "the deleted pod was patched again: %r" % values(fake, "p2"))
    s.stop()


def test_sync_usage_errors(env):
    """Bad values are refused by name, exit 2, before any request."""
    for args, want in ((["--namespaces", "Bad_NS"], '"Bad_NS" is not a namespace name'),
                       (["--namespaces", "a,a"], '"a" is named twice'),
                       (["--namespaces", "a", "--qps", "0"], "--qps"),
                       (["--namespaces", "a", "--lease-duration", "1s"], "--lease-duration"),
                       (["--namespaces", "a", "--lease-name", "No"], "--lease-name"),
                       (["--namespaces", "a", "--watch-retry-cap", "5ms"], "--watch-retry-cap"),
                       (["--namespaces", "a", "--watch-retry-base", "2s", "--watch-retry-cap", "1s"],
                        "--watch-retry-cap")):
        r = env.run([env.binary, "sync"] + args, timeout=10)
        err = r.stderr.decode()
        check(r.returncode == 2 and want in err, "%r: exit %d, %r" % (args, r.returncode, err))
