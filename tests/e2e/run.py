#!/usr/bin/env python3
"""End-to-end runner: the agent on a real single-node cluster.

Takes the cluster's lock, starts (or reuses) the cluster with
tests/cluster/up.sh, then runs every function named test_* of
tests/e2e/test_*.py, each with a tests.lib.cluster.Env (its own namespace).
Tests run in parallel (-j, default 4): most of their time is spent waiting
for the kubelet, whose ConfigMap refresh takes a minute. Each test has a
time limit (its function's `timeout` attribute, default 600 s); one marked
`exclusive` runs alone after the others. A failure prints the test's
diagnostic dump (pods, agent logs, events). Prints one line per test and closes with
"N passed, N failed".

What a scenario needs (tests.lib.cluster.needs): below its minimum
Kubernetes version its `below` function runs instead (named
"NAME_below_1_N": the documented behaviour of an older cluster), or it is
skipped with the reason. E2E_CORE=1 runs the core scenarios only. A
scenario marked `trial` (not yet green three runs in a row: the house's
rule before CI runs it) is skipped, with its reason, unless E2E_TRIAL=1.
K8S_VERSION (tests/cluster/versions.sh) picks the cluster's version.

Usage (from the repository's root):
  python3 -m tests.e2e.run --binary build/reload-agent [-k SUBSTRING] [-j N] [--keep]
  --keep   leave failed tests' namespaces (and the cluster) for a look
"""
import argparse
import concurrent.futures
import os
import sys
import threading
import time
import traceback

if not __package__:
    sys.exit("run.py is a module: python3 -m tests.e2e.run (from the repository's root)")

from tests.lib.cluster import Cluster, Env, cluster_env, lock_cluster  # noqa: E402
from tests.lib.suite import discover  # noqa: E402

def discover_e2e(sub, core=False):
    """The tests with their time limit and whether they run alone (only the
    core scenarios when core)."""
    return [(full, f, getattr(f, "timeout", 600), getattr(f, "exclusive", False))
            for full, f in discover(__package__, sub) if not core or getattr(f, "core", False)]


def for_version(tests, minor):
    """The tests as they run on Kubernetes 1.minor: a test that needs a later
    version becomes its `below` function, or is dropped (returned apart,
    with the reason)."""
    run, skipped = [], []
    for full, f, limit, alone in tests:
        need = getattr(f, "needs_minor", None)
        if need is None or minor >= need:
            run.append((full, f, limit, alone))
            continue
        why = "needs Kubernetes 1.%d%s" % (need, ": " + f.needs_why if f.needs_why else "")
        if f.needs_below:
            # the name makes the namespace: no brackets, no dots
            run.append(("%s_below_1_%d" % (full, need), f.needs_below, limit, alone))
        else:
            skipped.append((full, why))
    return run, skipped


def run_one(cluster, full, fn, limit, keep, out_lock):
    env = Env(cluster, full)
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
    core = os.environ.get("E2E_CORE", "") not in ("", "0")
    tests = discover_e2e(a.k, core)
    if not tests:
        sys.exit("e2e: no test matches %r%s" % (a.k, " among the core scenarios" if core else ""))
    lock = lock_cluster()  # noqa: F841 (held until exit)
    t0 = time.monotonic()
    cluster = Cluster(cluster_env(), os.path.abspath(a.binary))
    tests, skipped = for_version(tests, cluster.minor)
    if os.environ.get("E2E_TRIAL", "") in ("", "0"):
        skipped += [(full, "a trial (E2E_TRIAL=1 runs it): " + fn.trial) for full, fn, _, _ in tests
                    if getattr(fn, "trial", None)]
        tests = [t for t in tests if not getattr(t[1], "trial", None)]
    print("e2e: Kubernetes %s ready in %.0f s; %d tests%s, %d at a time" % (
        cluster.version, time.monotonic() - t0, len(tests), " (core)" if core else "", a.j), flush=True)
    for full, why in skipped:
        print("SKIP %s: %s" % (full, why), flush=True)
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
    print("%d passed, %d failed%s on Kubernetes %s (%.0f s)" % (
        passed, failed, ", %d skipped" % len(skipped) if skipped else "", cluster.version,
        time.monotonic() - t0))
    sys.exit(0 if failed == 0 else 1)


if __name__ == "__main__":
    main()
