#!/usr/bin/env python3
"""make bench: the agent's own part, kubelet swap -> signal, on the swap path
(the default: the `..data` rename is acted on at once) against the old
debounced path (--debounce-swaps=true), both measured in this run.

Two agents with the default --debounce (200ms) watch two AtomicWriter
volumes on tmpfs; build/tools/awsim updates them (3 keys, one changed per
update) in alternating rounds, with its stamp right before each rename(2)
(step 9), and build/tools/hupcount stamps each SIGHUP (CLOCK_MONOTONIC both).
Latency = the first signal after an update - that update's rename. Prints
p50/p90/max of each path and the ratio of their p50s (tests/lib/stats.py
percentiles). Target: swap path p50 <= 50 ms.
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from tests.lib.stats import summary

UPDATES = 60
INTERVAL_MS = 400  # more than the debounce: each update is its own evaluation on both paths
ROUNDS = 6
TARGET_MS = 50


class Side:
    """One agent, its app (hupcount) and its volume."""

    def __init__(self, tmp, binary, tools, name, extra):
        self.name, self.tools = name, tools
        self.vol = os.path.join(tmp, name)
        os.makedirs(self.vol)
        self.awsim(["--count", "1"])
        self.pf, self.out = os.path.join(tmp, name + ".pid"), os.path.join(tmp, name + ".hups")
        self.app = subprocess.Popen([os.path.join(tools, "hupcount"), "--pid-file", self.pf,
                                     "--out", self.out], stdin=subprocess.DEVNULL)
        for _ in range(100):
            if os.path.exists(self.pf) and os.path.getsize(self.pf) > 0:
                break
            time.sleep(0.02)
        self.log = open(os.path.join(tmp, name + ".log"), "wb")
        self.agent = subprocess.Popen([binary, "run", "--watch", self.vol, "--action", "signal",
                                       "--pid-file", self.pf, "--resync", "0", "--log-format",
                                       "json", "--log-level", "warn"] + extra,
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=self.log)
        self.stamps = []

    def awsim(self, args):
        r = subprocess.run([os.path.join(self.tools, "awsim"), "--dir", self.vol, "--files", "3",
                            "--seed", "7"] + args, capture_output=True, timeout=600)
        if r.returncode != 0:
            sys.exit("awsim failed: %s" % r.stderr.decode())

    def updates(self, n, stamps):
        self.awsim(["--count", str(n), "--interval-ms", str(INTERVAL_MS), "--stamps", stamps])
        with open(stamps) as f:
            self.stamps += [int(x) for x in f.read().split()]

    def stop(self):
        """Stops agent and app (by PID); returns the latencies in ms."""
        for p in (self.agent, self.app):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)
        self.log.close()
        with open(self.out) as f:
            sigs = [int(x) for x in f.read().split()]
        lat, j = [], 0
        for i, t in enumerate(self.stamps):
            nxt = self.stamps[i + 1] if i + 1 < len(self.stamps) else float("inf")
            while j < len(sigs) and sigs[j] < t:
                j += 1
            if j < len(sigs) and sigs[j] < nxt:
                lat.append((sigs[j] - t) / 1e6)
        return lat


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--tools", required=True)
    ap.add_argument("--updates", type=int, default=UPDATES)
    a = ap.parse_args()
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    tmp = tempfile.mkdtemp(prefix="ra-swap-", dir=shm)
    binary, tools = os.path.abspath(a.binary), os.path.abspath(a.tools)
    sides = []
    try:
        sides = [Side(tmp, binary, tools, "swap", []),
                 Side(tmp, binary, tools, "debounced", ["--debounce-swaps=true"])]
        time.sleep(1.0)  # both baselines taken
        per = max(1, a.updates // ROUNDS)
        for r in range(ROUNDS):
            for s in (sides if r % 2 == 0 else sides[::-1]):
                s.updates(per, os.path.join(tmp, "%s-%d.stamps" % (s.name, r)))
                time.sleep(INTERVAL_MS / 1000)
        time.sleep(1.0)
        res = {s.name: (summary(s.stop()), len(s.stamps)) for s in sides}
    finally:
        for s in sides:
            for p in (s.agent, s.app):
                if p.poll() is None:
                    p.kill()
                    p.wait(5)
        shutil.rmtree(tmp, ignore_errors=True)
    print("\nswap -> signal (AtomicWriter updates on tmpfs, --debounce 200ms, %d ms apart, "
          "%d alternating rounds)" % (INTERVAL_MS, ROUNDS))
    print("%-34s %9s %8s %8s %8s" % ("", "signalled", "p50 ms", "p90 ms", "max ms"))
    label = {"swap": "swap path (default)", "debounced": "debounced (--debounce-swaps=true)"}
    for name in ("swap", "debounced"):
        st, n = res[name]
        if not st["n"]:
            sys.exit("swapbench: the %s agent signalled nothing" % name)
        print("%-34s %5d/%-3d %8.1f %8.1f %8.1f" % (label[name], st["n"], n, st["p50"], st["p90"],
                                                   st["max"]))
    fast, slow = res["swap"][0], res["debounced"][0]
    print("p50 ratio swap/debounced: %.3f" % (fast["p50"] / slow["p50"]))
    print("  [%s] swap path p50 <= %d ms" % ("met" if fast["p50"] <= TARGET_MS else "MISSED",
                                             TARGET_MS))


if __name__ == "__main__":
    main()
