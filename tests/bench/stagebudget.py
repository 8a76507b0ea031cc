#!/usr/bin/env python3
"""The cost of staging against the API double: N replicas' stage gates
(build/tools/stagedrive: run/stage.c over real TLS to tests/lib/fakeapi.py)
each hold their "action" for --hold ms. Printed per scenario: the time from
the first replica's go to the last one's release, beside the ideal of the
same run's stage (rounds x hold: what the turns cost with no coordination
overhead at all), the ratio, and the API requests the stage made, by kind,
per replica. The API double is not a real API server: the requests are
what the agent sends, the times include the double's latency.

usage: python3 -m tests.bench.stagebudget --tools build/tools [--hold 500] [--runs 10x1,10x25%,4x1]
"""
import argparse
import collections
import math
import os

from tests.lib import stage as st_lib
from tests.lib.agent import Env


def scenario(tools, n, stage, hold):
    env = Env("", tools, "stagebudget")
    try:
        fake = st_lib.launch(env, n)
        reps = [st_lib.Replica(env, fake, p, stage, [st_lib.H1], "--hold", str(hold))
                for p in fake.info["pods"]]
        st_lib.wait_all(reps, lambda r: r.events("release"), 300, "every release")
        iv = st_lib.intervals(reps)
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
