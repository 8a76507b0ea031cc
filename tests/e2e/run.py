#!/usr/bin/env python3
"""End-to-end runner: the agent on a real single-node cluster.

Starts (or reuses) the cluster with tests/cluster/up.sh, then runs every
function named test_* of tests/e2e/test_*.py, each with an lib.Env (its own
namespace). Tests run in parallel (-j, default 4): most of their time is
spent waiting for the kubelet, whose ConfigMap refresh takes a minute.
Each test has a time limit (its function's `timeout` attribute, default
600 s); one marked `exclusive` runs alone after the others. A failure prints the test's diagnostic
dump (pods, agent logs, events). Prints one line per test and closes with
"N passed, N failed".

Usage: run.py --binary build/reload-agent [-k SUBSTRING] [-j N] [--keep]
  --keep   leave failed tests' namespaces (and the cluster) for a look
"""
import argparse
import concurrent.futures
import importlib.util
import os
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import lib  # noqa: E402


LOCK = "/var/lock/reload-agent-e2e.lock"


def lock_cluster():
    """Takes the one cluster for this process (every e2e run, bench and load
    test takes it): two runs on one cluster would take each other's webhook
    down. Waits, saying so; the lock goes with the process."""
    import fcntl
    f = open(LOCK, "w")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("e2e: another run holds %s; waiting for it" % LOCK, flush=True)
        fcntl.flock(f, fcntl.LOCK_EX)
    return f


def cluster_env():
    p = subprocess.run(["bash", os.path.join(lib.REPO, "tests/cluster/up.sh")], stdout=subprocess.PIPE,
                       timeout=5400)
    if p.returncode != 0:
        sys.exit("e2e: tests/cluster/up.sh failed (exit %d)" % p.returncode)
    env = {}
    for line in p.stdout.decode().splitlines():
        k, sep, v = line.partition("=")
        if sep:
            env[k] = v
    return env


def discover(sub):
    tests = []
    for fn in sorted(os.listdir(HERE)):
        if not (fn.startswith("test_") and fn.endswith(".py")):
            continue
        spec = importlib.util.spec_from_file_location(fn[:-3], os.path.join(HERE, fn))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for name in sorted(dir(mod)):
            f = getattr(mod, name)
            if name.startswith("test_") and callable(f):
                full = "%s::%s" % (fn[:-3], name)
                if sub in full:
                    tests.append((full, f, getattr(f, "timeout", 600), getattr(f, "exclusive", False)))
    return tests


def run_one(cluster, full, fn, limit, keep, out_lock):
    env = lib.Env(cluster, full)
    t0 = time.monotonic()
    ok = False
    result = {}

    def body():
        try:
            env.setup()
            fn(env)
            result["ok"] = True
        except Exception:
            result["tb"] = traceback.format_exc()

    th = threading.Thread(target=body, daemon=True)
    th.start()
    th.join(limit)
    if th.is_alive():
        result["tb"] = "test exceeded its time limit of %d s\n" % limit
    ok = result.get("ok", False)
    dump = ""
    if not ok:
        try:
            dump = env.dump()
        except Exception:
            dump = "diagnostics failed:\n" + traceback.format_exc()
    env.cleanup(keep=keep and not ok)
    dt = time.monotonic() - t0
    with out_lock:
        print("%s %s (%.0fs)" % ("PASS" if ok else "FAIL", full, dt), flush=True)
        for line in env.out:
            print(line)
        if not ok:
            print(result.get("tb", ""))
            print(dump, flush=True)
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("-k", default="")
    ap.add_argument("-j", type=int, default=int(os.environ.get("E2E_JOBS", "4")))
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    tests = discover(a.k)
    if not tests:
        sys.exit("e2e: no test matches %r" % a.k)
    lock = lock_cluster()  # noqa: F841 (held until exit)
    t0 = time.monotonic()
    cluster = lib.Cluster(cluster_env(), os.path.abspath(a.binary))
    print("e2e: cluster ready in %.0f s; %d tests, %d at a time" % (time.monotonic() - t0, len(tests), a.j),
          flush=True)
    out_lock = threading.Lock()
    # Tests marked exclusive (they take shared parts of the cluster down,
    # such as the webhook) run alone, after the others.
    shared = [t for t in tests if not t[3]]
    alone = [t for t in tests if t[3]]
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.j) as ex:
        futs = [ex.submit(run_one, cluster, full, fn, limit, a.keep, out_lock) for full, fn, limit, _ in shared]
        results = [f.result() for f in futs]
    for full, fn, limit, _ in alone:
        results.append(run_one(cluster, full, fn, limit, a.keep, out_lock))
    passed = sum(1 for r in results if r)
    failed = len(results) - passed
    print("%d passed, %d failed (%.0f s)" % (passed, failed, time.monotonic() - t0))
    sys.exit(0 if failed == 0 else 1)


if __name__ == "__main__":
    main()
