"""Fast sync's API budget under every storm at once (issue 24; the budget is
written down in docs/fast-sync.md "The API budget"): one agent watches one
object per storm of the API double (tests/lib/fakeapi.py, a test double:
POST /storm), all storming together for 30 s, and the requests the double
recorded must stay inside the budget: per object one list and one watch per
backoff step, PATCHes only for real changes, one per change, at most one
per floor; the budget hits are counted in /metrics and said once per
minute and limit in the log.
"""
import os
import time

from tests.lib import fastsync as fs
from tests.lib.proc import check, wait_until


STORM_SECONDS = 30

# object -> (resource, storm mode, storm options)
STORMS = {
    "g1-event": ("configmaps", "gone_event", {}),
    "g1-status": ("configmaps", "gone_status", {}),
    "g2-secret": ("secrets", "gone_event", {}),
    "g2-secret-status": ("secrets", "gone_status", {}),
    "g3-bookmark": ("configmaps", "end_after_bookmark", {}),
    "g3-event": ("configmaps", "end_after_event", {}),
    "g4-churn": ("configmaps", "churn", {"interval_ms": 20}),
    "g5-garbage": ("configmaps", "garbage", {}),
    "g6-other": ("configmaps", "other_name", {"other": "someone-else"}),
    "g7-rvs": ("configmaps", "rvs", {"interval_ms": 50}),
    "u1-trickle": ("configmaps", "trickle_head", {"interval_ms": 1000}),
}
CHANGING = ("g3-event", "g4-churn")  # the storms whose object really changes


def test_api_budget_under_every_storm(env):
    fake, pod, vol = fs.setup(env, volumes=[])
    for name, (resource, _, _) in STORMS.items():
        fs.put(fake, resource, {"metadata": {"name": name}, "data": {"k": "djA="}})
    objs = []
    for name, (resource, _, _) in STORMS.items():
        objs += ["--fast-sync-objects", "%s/%s" % (resource[:-1], name)]
    a = fs.start(env, fake, pod, vol, "--fast-sync-confirm", "30s", *objs)
    wait_until(lambda: len(fake.ctl("GET", "/watches")[1]) == len(STORMS), 15,
               "every watch open at the fake")
    st_, cm = fake.ctl("GET", "/object?resource=configmaps&name=g7-rvs")
    base = int(cm["metadata"]["resourceVersion"])
    newer = str(base + 1000000)
    for name, (resource, mode, opts) in STORMS.items():
        if mode == "rvs":
            opts = dict(opts, rvs=[newer, str(base + 500000)])
        fs.storm(fake, resource, name, mode, **opts)
    t0 = fs.kick(fake)
    time.sleep(STORM_SECONDS)
    took = time.monotonic() - t0
    reqs = fs.requests(fake)
    counts = {name: tuple(len(x) for x in fs.reads_of(fake, name)) for name in STORMS}
    print("in %.1f s (lists, watches): %s; PATCHes %d; agent log lines %d" % (
        took, counts, len(fs.patches(fake, pod)), len(a.lines)))
    for name, (resource, mode, _) in STORMS.items():
        ls, ws = fs.reads_of(fake, name)
        most = fs.steps(took)
        if mode == "trickle_head":  # each watch waits 10 s for its head, then the backoff
            most = int(took / 10) + 1
        check(len(ws) <= most and len(ls) <= most,
              "%s (%s): %d lists and %d watches in %.0f s, the budget allows %d of each" % (
                  name, mode, len(ls), len(ws), took, most))
        check(len(ws) >= 1, "%s (%s): no watch at all in %.0f s" % (name, mode, took))
        if resource == "secrets":
            check(not ls, "%s: a Secret was relisted (a Table list cannot say its "
                          "resourceVersion): %d lists" % (name, len(ls)))
    # PATCHes: only for real changes (and the first of the rvs that go back), one per change
    # (re-nudges carry a suffix), at most one per floor
    got = [v for v in fs.nudge_values(fake, pod)]
    check(got and len(got) <= fs.nudges(took), "%d PATCHes in %.0f s, the floor allows %d: %r" % (
        len(got), took, fs.nudges(took), got))
    changes = {newer}
    for name in CHANGING:
        changes |= {c["rv"] for c in fake.ctl("GET", "/changes?resource=configmaps&name=" + name)[1]}
    firsts = [v for v in got if "." not in v]
    check(len(set(firsts)) == len(firsts), "a change nudged twice: %r" % firsts)
    check(all(v.split(".")[0] in changes for v in got),
          "nudged for what did not change: %r" % [v for v in got if v.split(".")[0] not in changes])
    times = [r["time"] for r in reqs if r["method"] == "PATCH"]
    check(all(b - x >= fs.NUDGE_FLOOR * 0.9 for x, b in zip(times, times[1:])),
          "PATCHes closer than the floor: %r" % [round(b - x, 3) for x, b in zip(times, times[1:])])
    # counted and said, once per minute and limit, at the default level
    hits = fs.budget_hits(a)
    check(hits.get("backoff", 0) >= 1 and hits.get("nudge_floor", 0) >= 1, "metric: %r" % hits)
    lines = a.of("fast-sync-budget")
    for limit in ("backoff", "nudge_floor"):
        mine = [e for e in lines if e["limit"] == limit]
        check(len(mine) == 1 and mine[0]["level"] == "warn",
              "%s: want one warn line in %.0f s, got %r" % (limit, took, mine))
    s = fs.status(a)
    check(s["budget_hits"]["backoff"] == hits["backoff"], "status %r vs metric %r" % (
        s["budget_hits"], hits))
    for name, (resource, _, _) in STORMS.items():
        fs.storm(fake, resource, name, None)
    check(a.proc.poll() is None, "the agent exited")
