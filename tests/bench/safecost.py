#!/usr/bin/env python3
"""The cost of the safe-reload steps before the action (issue 26), beside
the plain reload, measured in one run on one machine.

Each configuration runs a fresh agent (signal action, --debounce 0) on its
own kubelet-layout volume (build/tools/awsim, 3 files, one changed per
update) with build/tools/hupcount as the app; latency = the SIGHUP the app
receives (CLOCK_MONOTONIC, sigwaitinfo) - the ..data rename(2) of that
update (awsim --stamps). Configurations:
  plain       no safe-reload step (the baseline);
  validate    --validate true, run by the agent;
  validator   --validate true through `reload-agent validator` on a unix socket;
  lkg         the same, with --keep-last-good: the candidate copy, the check,
              the swap of the live copy (two AtomicWriter writes).
The checker is `true`, so the figures are the steps' own cost (a real
checker adds its run time: nginx -t takes about 10-30 ms). --verify is not
measured: it follows the action (the app is signalled first) and its first
try waits 500 ms by design.

usage: python3 -m tests.bench.safecost --binary build/reload-agent --tools build/tools [--updates N]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

from tests.bench.bench import Bench
from tests.lib.stats import pct


def run_one(b, name, n, interval_ms, extra):
    vol = b.volume("vol-" + name)
    rp, pf, out = b.receiver("app-" + name)
    agent = b.agent(vol, pf, "--debounce", "0", "--resync", "0", *extra(name))
    stamps = b.path(name + ".stamps")
    b.updates(vol, n, interval_ms, stamps)
    time.sleep(1.0)
    b.stop(agent)
    b.stop(rp)
    lat = b.latencies(b.read_ns(stamps), b.read_ns(out))
    return {"name": name, "signalled": len(lat), "updates": n,
            "median_us": statistics.median(lat) if lat else float("nan"),
            "p90_us": pct(lat, 90) if lat else float("nan")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--tools", required=True)
    ap.add_argument("--updates", type=int, default=100)
    ap.add_argument("--interval-ms", type=int, default=200)
    a = ap.parse_args()
    b = Bench(a.binary, a.tools)
    try:
        sock = b.path("v.sock")
        vlog = open(b.path("validator.log"), "wb")
        b.start([b.bin, "validator", "--socket", sock, "--log-level", "warn"], stdout=vlog,
                stderr=vlog)
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.02)
        os.makedirs(b.path("state"))
        configs = {
            "plain": lambda n: [],
            "validate": lambda n: ["--validate", "true"],
            "validator": lambda n: ["--validate", "true", "--validator-socket", sock],
            "lkg": lambda n: ["--validate", "true", "--validator-socket", sock, "--state-dir",
                              b.path("state"), "--keep-last-good",
                              "%s=%s" % (b.path("vol-" + n), b.path("lkg"))],
        }
        res = [run_one(b, name, a.updates, a.interval_ms, extra)
               for name, extra in configs.items()]
        base = res[0]["median_us"]
        print("change -> signal, %d updates %d ms apart, debounce 0 (microseconds):" %
              (a.updates, a.interval_ms))
        for r in res:
            print("  %-10s signalled %3d/%d  median %8.0f  p90 %8.0f  x%.2f of plain" %
                  (r["name"], r["signalled"], r["updates"], r["median_us"], r["p90_us"],
                   r["median_us"] / base))
    finally:
        b.cleanup()


if __name__ == "__main__":
    main()
