#!/usr/bin/env python3
"""make bench (fleet part): N replicas of one Deployment, each running the
agent with --action rollout against the fake API server, one ConfigMap change
applied to every replica's volume at once; measured with --rollout-jitter 5s
(the default) and 1s.

Figures printed per jitter: template changes (must be 1), PATCH requests,
API requests in total and per agent for the change (startup GETs excluded),
time to convergence (the content change to the last agent's rollout event,
patched or already-current) and the largest agent VmRSS and RssAnon (most
of VmRSS is shared library pages: libcurl, OpenSSL).
The machinery (agents as plain processes logging to files, stopped by PID)
is tests/lib/fleet.py's Fleet.

Usage: python3 -m tests.bench.fleet --binary BUILD/reload-agent --tools BUILD/tools [--agents 100]
Exit status 1 if the template did not change exactly once or an agent did
not converge.
"""
import argparse
import os
import sys

from tests.lib.fleet import Fleet, run_one_change
from tests.lib.proc import TestFailure


def measure(binary, tools, n, jitter):
    fleet = Fleet(binary, tools, n, jitter=jitter, events=True)
    try:
        m = run_one_change(fleet, timeout=120)
    finally:
        fleet.stop()
    change_reqs = [r for r in m["reqs"] if r["time"] >= m["t0"]]
    return {"jitter": jitter, "changes": len(m["history"]), "patches": len(m["patches"]),
            "total": len(m["reqs"]), "per_agent": len(change_reqs) / n,
            "converge": max(t for _, t, _ in m["results"]) - m["t0"],
            "rss": max([r for r, _ in m["rss"]] or [0]),
            "anon": max([a for _, a in m["rss"]] or [0])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--tools", required=True)
    ap.add_argument("--agents", type=int, default=100)
    a = ap.parse_args()
    binary, tools = os.path.abspath(a.binary), os.path.abspath(a.tools)
    rows = []
    try:
        for jitter in ("5s", "1s"):
            rows.append(measure(binary, tools, a.agents, jitter))
    except TestFailure as e:
        print("fleet bench failed: %s" % e)
        return 1
    print("fleet: %d agents, one Deployment, one ConfigMap change" % a.agents)
    print("%-8s %9s %7s %10s %16s %10s %12s %13s" % (
        "jitter", "template", "PATCH", "requests", "req/agent/change", "converged",
        "max VmRSS", "max RssAnon"))
    for r in rows:
        print("%-8s %9d %7d %10d %16.2f %9.2fs %8d KiB %9d KiB" %
              (r["jitter"], r["changes"], r["patches"], r["total"], r["per_agent"],
               r["converge"], r["rss"], r["anon"]))
    ok = all(r["changes"] == 1 for r in rows)
    if not ok:
        print("fleet bench failed: the template did not change exactly once")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
