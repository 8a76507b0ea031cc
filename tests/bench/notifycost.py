#!/usr/bin/env python3
"""What notifications (--notify-url, issue 29 item 2) add to a reload,
beside the plain reload, measured in one run on one machine.

Each configuration runs a fresh agent (signal action, --debounce 0) on its
own kubelet-layout volume (build/tools/awsim, 3 files, one changed per
update) with build/tools/hupcount as the app; latency = the SIGHUP the app
receives (CLOCK_MONOTONIC) - the ..data rename(2) of that update (awsim
--stamps). Configurations, each receiver a real HTTP server on 127.0.0.1
in this process (tests/lib/notifysink.py):
  plain     no notification (the baseline);
  sink      every action posted to a receiver that answers 200 at once;
  stuck     to a receiver that never answers (each send waits out
            --notify-timeout 20s; the queue of 8 fills and the rest is
            dropped): the action must not wait for it;
  failing   to a receiver that answers 503 (every notification retried 3
            times with the backoff, then given up).
It also prints how many notifications each receiver got.

usage: python3 -m tests.bench.notifycost --binary build/reload-agent --tools build/tools [--updates N]
"""
import argparse
import statistics
import time

from tests.bench.bench import Bench
from tests.lib.notifysink import Sink
from tests.lib.stats import pct


class _Env:
    """What Sink registers with: the bench stops the sinks itself."""

    def __init__(self):
        self.procs = []


def run_one(b, name, n, interval_ms, extra):
    vol = b.volume("vol-" + name)
    rp, pf, out = b.receiver("app-" + name)
    agent = b.agent(vol, pf, "--debounce", "0", "--resync", "0", *extra)
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
    env = _Env()
    try:
        ok, stuck, failing = Sink(env), Sink(env), Sink(env)
        stuck.hold()
        failing.answer_fail(503)
        configs = [
            ("plain", [], None),
            ("sink", ["--notify-url", ok.url], ok),
            ("stuck", ["--notify-url", stuck.url, "--notify-timeout", "20s", "--notify-queue", "8"],
             stuck),
            ("failing", ["--notify-url", failing.url], failing),
        ]
        res = []
        for name, extra, sink in configs:
            r = run_one(b, name, a.updates, a.interval_ms, extra)
            r["posts"] = len(sink.requests()) if sink else 0
            res.append(r)
        base = res[0]["median_us"]
        print("change -> signal, %d updates %d ms apart, debounce 0 (microseconds):" %
              (a.updates, a.interval_ms))
        for r in res:
            print("  %-8s signalled %3d/%d  median %8.0f  p90 %8.0f  x%.2f of plain  "
                  "(receiver got %d POSTs)" % (r["name"], r["signalled"], r["updates"],
                                               r["median_us"], r["p90_us"], r["median_us"] / base,
                                               r["posts"]))
    finally:
        for s in env.procs:
            s.kill()
        b.cleanup()


if __name__ == "__main__":
    main()
