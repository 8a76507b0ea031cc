#!/usr/bin/env python3
"""The cost of staging against the API double: N replicas' stage gates
(build/tools/stagedrive: run/stage.c over real TLS to tests/k8s/fakeapi.py)
each hold their "action" for --hold ms. Printed per scenario: the time from
the first replica's go to the last one's release, beside the ideal of the
same run's stage (rounds x hold: what the turns cost with no coordination
overhead at all), the ratio, and the API requests the stage made, by kind,
per replica. The API double is not a real API server: the requests are
what the agent sends, the times include the double's latency.

usage: stagebudget.py --tools build/tools [--hold 500] [--runs 10x1,10x25%,4x1]
"""
import argparse
import collections
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "k8s"))
import lib  # noqa: E402
import test_stage  # noqa: E402


def scenario(tools, n, stage, hold):
    env = lib.Env("", tools, "stagebudget")
    try:
        fake = test_stage.launch(env, n)
        reps = [test_stage.Replica(env, fake, p, stage, [test_stage.H1], "--hold", str(hold))
                for p in fake.info["pods"]]
        test_stage.wait_all(reps, lambda r: r.events("release"), 300, "every release")
        iv = test_stage.intervals(reps)
        took = (iv[-1][1] - iv[0][0]) / 1000.0
        st, rs = fake.ctl("GET", "/requests")
        kinds = collections.Counter()
        for r in rs:
            parts = r["path"].rstrip("/").split("/")
            coll = parts[-1] == "leases"  # the collection: a list, a watch or a create
            what = "watch" if r["query"].get("watch") else \
                "list" if coll and r["method"] == "GET" else r["method"]
            res = parts[-1] if coll else parts[-2]
            kinds["%s %s %s" % (what, res, r["status"])] += 1
        width = int(stage) if not stage.endswith("%") else math.ceil(int(stage[:-1]) * n / 100)
        ideal = math.ceil(n / width) * hold / 1000.0
        for r in reps:
            r.stop()
        print("%2d replicas, stage %-4s hold %d ms: first go to last release %.2f s, ideal "
              "%.2f s (x%.2f); %d requests (%.1f per replica): %s" %
              (n, stage, hold, took, ideal, took / ideal, len(rs), len(rs) / n,
               ", ".join("%s: %d" % kv for kv in sorted(kinds.items()))), flush=True)
    finally:
        env.cleanup()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tools", required=True)
    ap.add_argument("--hold", type=int, default=500)
    ap.add_argument("--runs", default="4x1,10x1,10x25%")
    a = ap.parse_args()
    for run in a.runs.split(","):
        n, stage = run.split("x")
        scenario(os.path.abspath(a.tools), int(n), stage, a.hold)


if __name__ == "__main__":
    main()
