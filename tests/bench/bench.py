#!/usr/bin/env python3
"""make bench: reload-agent against an `inotifywait -m | kill -HUP` pipeline,
both measured in this run on the same machine.

Figures printed:
  - change->signal latency (min, median, p99) over N AtomicWriter updates with
    debounce 0, for the agent and for the pipeline, and their ratio;
  - agent idle VmRSS, VmHWM after 1000 reloads, VmRSS after 500 and 1000
    reloads (flat = leak-free);
  - syscalls made by an idle agent over 10 s (strace -c), resync disabled;
  - actions for a burst of 100 updates with the default debounce (the
    kubelet's swaps skip it: the swap path folds a burst for up to 40 ms).
The receiving app is build/tools/hupcount, which timestamps each SIGHUP with
CLOCK_MONOTONIC via sigwaitinfo; build/tools/awsim timestamps each ..data
rename(2) just before the call (a stamp after it can come later than the reaction). Latency = first signal after an update - that update's rename.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from tests.lib.proc import status_kb
from tests.lib.stats import median, pct

UPDATES = 500
INTERVAL_MS = 20
ROUNDS = 10  # the latency updates alternate between agent and pipeline in this many rounds


class Bench:
    def __init__(self, binary, tools):
        self.bin = os.path.abspath(binary)
        self.tools = os.path.abspath(tools)
        # tmpfs when there is one: Secret and projected volumes are tmpfs, and
        # it keeps the disk journal's jitter out of both measurements.
        shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        self.tmp = tempfile.mkdtemp(prefix="ra-bench-", dir=shm)
        self.procs = []

    def path(self, *p):
        return os.path.join(self.tmp, *p)

    def start(self, args, **kw):
        p = subprocess.Popen(args, **kw)
        self.procs.append(p)
        return p

    def stop(self, p, sig=signal.SIGTERM):
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def volume(self, name):
        vol = self.path(name)
        os.makedirs(vol)
        r = subprocess.run([self.tool("awsim"), "--dir", vol, "--count", "1", "--files", "3"],
                           capture_output=True, timeout=30)
        if r.returncode != 0:
            sys.exit("awsim failed: %s" % r.stderr.decode())
        return vol

    def tool(self, name):
        return os.path.join(self.tools, name)

    def receiver(self, name):
        pf = self.path(name + ".pid")
        out = self.path(name + ".sigs")
        p = self.start([self.tool("hupcount"), "--pid-file", pf, "--out", out])
        for _ in range(100):
            if os.path.exists(pf):
                break
            time.sleep(0.02)
        return p, pf, out

    def agent(self, vol, pf, *extra):
        log = open(self.path("agent-%d.log" % len(self.procs)), "wb")
        p = self.start([self.bin, "run", "--watch", vol, "--action", "signal", "--pid-file", pf,
                        "--log-format", "json", "--log-level", "warn"] + list(extra),
                       stderr=log, stdout=subprocess.DEVNULL)
        time.sleep(0.5)
        if p.poll() is not None:
            sys.exit("agent exited early, see %s" % log.name)
        return p

    def updates(self, vol, count, interval_ms, stamps=None):
        args = [self.tool("awsim"), "--dir", vol, "--count", str(count), "--files", "3",
                "--interval-ms", str(interval_ms), "--seed", "7"]
        if stamps:
            args += ["--stamps", stamps]
        r = subprocess.run(args, capture_output=True, timeout=600)
        if r.returncode != 0:
            sys.exit("awsim failed: %s" % r.stderr.decode())

    @staticmethod
    def read_ns(path):
        with open(path) as f:
            return [int(x) for x in f.read().split()]

    def latencies(self, stamps, sigs):
        """For each update, the first signal after it and before the next."""
        lat, j = [], 0
        for i, t in enumerate(stamps):
            nxt = stamps[i + 1] if i + 1 < len(stamps) else float("inf")
            while j < len(sigs) and sigs[j] < t:
                j += 1
            if j < len(sigs) and sigs[j] < nxt:
                lat.append((sigs[j] - t) / 1e3)  # microseconds
        return lat


def summary(name, lat, n):
    """The latency figures of one side (tests/lib/stats.py percentiles)."""
    return {"name": name, "signalled": len(lat), "updates": n, "min_us": min(lat),
            "median_us": median(lat), "p99_us": pct(lat, 99)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--tools", required=True)
    ap.add_argument("--updates", type=int, default=UPDATES)
    a = ap.parse_args()
    if shutil.which("inotifywait") is None or shutil.which("strace") is None:
        sys.exit("bench needs inotifywait and strace (make deps installs them)")
    b = Bench(a.binary, a.tools)
    res = {}
    try:
        # 1+2. latency of the agent and of the pipeline, both running all the
        # time on volumes of their own, fed in alternating rounds so drift in
        # the machine's speed (a shared VM) hits both alike
        vol = b.volume("vol-agent")
        rp, pf, out = b.receiver("agent")
        ag = b.agent(vol, pf, "--debounce", "0", "--resync", "0")
        vol2 = b.volume("vol-pipe")
        rp2, pf2, out2 = b.receiver("pipe")
        pid = open(pf2).read().strip()
        pipe = b.start(["sh", "-c",
                        "inotifywait -m -q -e moved_to --format %%f '%s' | "
                        "while read f; do [ \"$f\" = ..data ] && kill -HUP %s; done" % (vol2, pid)],
                       start_new_session=True)
        time.sleep(0.5)
        stamps = {"agent": [], "pipe": []}
        per_round = max(1, a.updates // ROUNDS)
        for r in range(ROUNDS):
            order = [("agent", vol), ("pipe", vol2)]
            if r % 2:
                order.reverse()
            for name, v in order:
                n = per_round if r < ROUNDS - 1 else a.updates - per_round * (ROUNDS - 1)
                sf = b.path("%s-%d.stamps" % (name, r))
                b.updates(v, n, INTERVAL_MS, sf)
                stamps[name] += b.read_ns(sf)
                time.sleep(0.05)
        time.sleep(0.3)
        b.stop(rp)
        b.stop(rp2)
        agent_lat = b.latencies(stamps["agent"], b.read_ns(out))
        pipe_lat = b.latencies(stamps["pipe"], b.read_ns(out2))
        b.stop(ag)
        os.killpg(pipe.pid, signal.SIGTERM)
        pipe.wait(5)

        res["agent"] = summary("reload-agent", agent_lat, a.updates)
        res["pipeline"] = summary("inotifywait|kill", pipe_lat, a.updates)

        # 3. memory: idle, after 500 and 1000 reloads
        vol3 = b.volume("vol-mem")
        rp3, pf3, out3 = b.receiver("mem")
        ag3 = b.agent(vol3, pf3, "--debounce", "0", "--resync", "0")
        time.sleep(0.5)
        idle_rss = status_kb(ag3.pid, "VmRSS")
        b.updates(vol3, 500, 2)
        time.sleep(0.5)
        rss500 = status_kb(ag3.pid, "VmRSS")
        b.updates(vol3, 500, 2)
        time.sleep(0.5)
        rss1000 = status_kb(ag3.pid, "VmRSS")
        hwm = status_kb(ag3.pid, "VmHWM")
        b.stop(rp3)
        reloads = len(b.read_ns(out3))
        res["memory"] = {"idle_rss_kib": idle_rss, "rss_after_500_kib": rss500,
                         "rss_after_1000_kib": rss1000, "hwm_after_1000_kib": hwm,
                         "reloads": reloads}

        # 4. idle syscalls over 10 s (resync disabled)
        sc = b.path("strace.txt")
        st = subprocess.run(["timeout", "-s", "INT", "10", "strace", "-f", "-c", "-o", sc, "-p",
                             str(ag3.pid)], capture_output=True, timeout=30)
        calls = 0
        with open(sc) as f:
            for line in f:
                parts = line.split()
                if parts and parts[-1] == "total":
                    calls = int(parts[3])  # % time, seconds, usecs/call, calls, [errors], total
        res["idle_syscalls_10s"] = calls
        b.stop(ag3)

        # 5. burst: 100 back-to-back updates, default debounce
        vol4 = b.volume("vol-burst")
        rp4, pf4, out4 = b.receiver("burst")
        ag4 = b.agent(vol4, pf4, "--resync", "0")
        b.updates(vol4, 100, 0)
        time.sleep(1.5)
        b.stop(rp4)
        b.stop(ag4)
        res["burst_100_actions"] = len(b.read_ns(out4))
    finally:
        b.cleanup()

    ag, pp = res["agent"], res["pipeline"]
    print("\nreload-agent benchmark (%d AtomicWriter updates each, %d ms apart, in %d alternating "
          "rounds, debounce 0, volumes in %s)" % (a.updates, INTERVAL_MS, ROUNDS, os.path.dirname(b.tmp)))
    print("%-18s %9s %10s %10s %10s" % ("", "signalled", "min us", "median us", "p99 us"))
    for r in (ag, pp):
        print("%-18s %5d/%-4d %10.0f %10.0f %10.0f" % (r["name"], r["signalled"], r["updates"],
                                                      r["min_us"], r["median_us"], r["p99_us"]))
    print("median ratio agent/pipeline: %.2f   p99 ratio: %.2f" %
          (ag["median_us"] / pp["median_us"], ag["p99_us"] / pp["p99_us"]))
    m = res["memory"]
    print("idle VmRSS: %d KiB; VmRSS after 500 / 1000 reloads: %d / %d KiB; VmHWM after 1000: "
          "%d KiB (%d reloads)" % (m["idle_rss_kib"], m["rss_after_500_kib"],
                                   m["rss_after_1000_kib"], m["hwm_after_1000_kib"], m["reloads"]))
    print("idle syscalls over 10 s (resync off): %d" % res["idle_syscalls_10s"])
    print("actions for a burst of 100 updates (debounce 200ms; the swap path folds a burst for "
          "up to 40 ms): %d" % res["burst_100_actions"])
    targets = [
        ("median latency <= pipeline", ag["median_us"] <= pp["median_us"]),
        ("p99 latency <= 1 ms", ag["p99_us"] <= 1000),
        ("idle RSS <= 3 MiB", m["idle_rss_kib"] <= 3072),
        ("HWM after 1000 reloads <= 4 MiB", m["hwm_after_1000_kib"] <= 4096),
        ("RSS flat 500 -> 1000 reloads (< 64 KiB growth)",
         m["rss_after_1000_kib"] - m["rss_after_500_kib"] < 64),
        ("zero idle syscalls", res["idle_syscalls_10s"] == 0),
        ("every update signalled", ag["signalled"] == a.updates),
    ]
    for name, ok in targets:
        print("  [%s] %s" % ("met" if ok else "MISSED", name))
    with open("build/bench.json", "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
