#!/usr/bin/env python3
"""make bench: the cluster sync service (`reload-agent sync`, docs/sync.md)
with 10 000 ConfigMaps, 10 000 Secrets and 1 000 injected pods served by the
API double (tests/lib/fakeapi.py; the pods are Pod objects bound to a node
that does not exist: they never run).

Figures printed, all measured in this run:
  - VmRSS and VmHWM of the service once it has seen every object, beside the
    baseline: the same service in an empty namespace, and their ratio;
  - watches open (at the double) beside what per-pod fast sync would open
    for the same pods (one per object per pod, counted from the pods'
    annotations);
  - PATCHes for one change of a ConfigMap that N pods name (want N), and
    requests for a change of one nobody names (want 0);
  - the time from start to the index holding every pod.
Each pod names three objects: configmap/cm-<i>, configmap/shared-<i % 10>
and secret/s-<i>; cm-<i> and s-<i> for i >= 1000 are named by nobody.

Usage: python3 -m tests.bench.syncbench --binary build/reload-agent
"""
import argparse
import os
import sys
import time

from tests.lib.agent import Env
from tests.lib.proc import memory_kb, wait_until
from tests.lib.syncsvc import Sync, launch, pod, put, put_many, patches, requests, watches_open

CONFIGMAPS = 10000
SECRETS = 10000
PODS = 1000
SHARED = 10


def fill(fake):
    data = {"k": "x" * 512}
    items = [("configmaps", {"metadata": {"name": "shared-%d" % i}, "data": data})
             for i in range(SHARED)]
    items += [("configmaps", {"metadata": {"name": "cm-%d" % i}, "data": data})
              for i in range(CONFIGMAPS - SHARED)]
    for start in range(0, len(items), 1000):
        put_many(fake, items[start:start + 1000])
    secrets = [("secrets", {"metadata": {"name": "s-%d" % i}, "data": {"k": "c2VjcmV0"}})
               for i in range(SECRETS)]
    for start in range(0, len(secrets), 2000):
        put_many(fake, secrets[start:start + 2000])
    pods = [("pods", pod("p-%d" % i, "configmap/cm-%d,configmap/shared-%d,secret/s-%d" %
                         (i, i % SHARED, i))) for i in range(PODS)]
    put_many(fake, pods)


ALL = ("--all-namespaces",)  # the chart's default
NAMED = ("--namespaces", "default")


def serving(svc, fake, n):
    """Waits until the service leads and its n watches are open."""
    wait_until(lambda: len(watches_open(fake)) == n, 120, "the watches open")
    wait_until(svc.leader, 60, "the service leads")


def measure(env, loaded, scope=ALL):
    fake = launch(env)
    if loaded:
        t = time.monotonic()
        fill(fake)
        print("  the double holds %d objects (%.1f s to load)" % (CONFIGMAPS + SECRETS + PODS,
                                                               time.monotonic() - t))
    t0 = time.monotonic()
    svc = Sync(env, fake, "bench", scope=scope)
    # --all-namespaces: the pod watch, and two in the one namespace with pods
    serving(svc, fake, 3 if loaded or scope == NAMED else 1)
    # every pod known: a change of a shared ConfigMap reaches its pods
    base = len(patches(fake))
    rv = put(fake, "configmaps", {"metadata": {"name": "shared-0"}, "data": {"k": "y"}})
    want = PODS // SHARED if loaded else 0
    if loaded:
        wait_until(lambda: len(patches(fake)) - base >= want, 120, "the nudges of shared-0")
    ready_s = time.monotonic() - t0
    time.sleep(2)  # a PATCH more would show here
    got = len(patches(fake)) - base
    mem = memory_kb(svc.proc.pid)
    nreq = len(requests(fake))
    put(fake, "configmaps", {"metadata": {"name": "cm-%d" % (CONFIGMAPS - SHARED - 1)},
                             "data": {"k": "z"}})
    time.sleep(2)
    extra = [r for r in requests(fake)[nreq:] if "/leases/" not in r["path"]]
    out = {"rss": mem["VmRSS"], "hwm": mem["VmHWM"], "watches": len(watches_open(fake)),
           "patches": got, "want": want, "unref": len(extra), "ready_s": ready_s, "rv": rv}
    svc.stop()
    fake.stop()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="build/reload-agent")
    a = ap.parse_args()
    env = Env(os.path.abspath(a.binary), "", "syncbench")
    try:
        print("sync service memory bench (%d ConfigMaps, %d Secrets, %d pods, 3 objects each)"
              % (CONFIGMAPS, SECRETS, PODS))
        empty = measure(env, False)
        env2 = Env(os.path.abspath(a.binary), "", "syncbench-loaded")
        try:
            full = measure(env2, True)
        finally:
            env2.cleanup()
        env3 = Env(os.path.abspath(a.binary), "", "syncbench-named")
        try:
            named = measure(env3, True, NAMED)
        finally:
            env3.cleanup()
    finally:
        env.cleanup()
    print("  --all-namespaces (the chart's default):")
    print("  VmRSS: %d KiB loaded, %d KiB empty (baseline, same run): ratio %.2f"
          % (full["rss"], empty["rss"], full["rss"] / float(empty["rss"])))
    print("  VmHWM: %d KiB loaded, %d KiB empty" % (full["hwm"], empty["hwm"]))
    print("  watches open: %d (per-pod fast sync for the same pods: %d, one per object per pod)"
          % (full["watches"], PODS * 3))
    print("  one change of a ConfigMap %d pods name: %d PATCHes (want %d)"
          % (PODS // SHARED, full["patches"], full["want"]))
    print("  one change of a ConfigMap nobody names: %d requests (want 0)" % full["unref"])
    print("  start to the first change's nudges: %.1f s" % full["ready_s"])
    print("  --namespaces default: VmRSS %d KiB loaded (ratio to the empty baseline %.2f), %d watches, "
          "%d PATCHes (want %d), %d requests for the unnamed change"
          % (named["rss"], named["rss"] / float(empty["rss"]), named["watches"], named["patches"],
             named["want"], named["unref"]))
    ok = all(r["patches"] == r["want"] and r["unref"] == 0 and r["watches"] <= 4 for r in (full, named))
    if not ok:
        sys.exit("syncbench: a budget was not held")


if __name__ == "__main__":
    main()
