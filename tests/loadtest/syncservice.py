#!/usr/bin/env python3
"""The cluster sync service on the real cluster (tests/cluster/), against
the kubelet's defaults as the baseline, in one run (issue 27).

The default install (`kubectl apply -k manifests/webhook/certgen`: the
webhook and `reload-agent sync --all-namespaces`) and a 3-replica nginx
Deployment with nothing but the opt-in and its action annotations
(injected by the webhook: no fast sync, no token in the pod). Each edit of
its ConfigMap is timed on every replica at once: from the end of `kubectl
apply` to the new body being served by nginx (polled every 50 ms).

  1. --edits edits with the service running (a random pause of 0 to --gap
     s between them), after the pods settled --settle s; the service's
     PATCHes per edit from the apiserver's audit log (one per replica).
  2. the baseline: the service scaled to 0 replicas, then --baseline-edits
     edits served by the kubelet's own periodic sync (60-90 s each); the
     service is scaled back afterwards, whatever happened.

Also read: the service replicas' memory (VmRSS, VmHWM, read on the node).
Printed: p50, p90, max of each, and the ratio of the p50s.

Usage: python3 -m tests.loadtest.syncservice --binary build/reload-agent [--edits 10]
       [--baseline-edits 4] [--gap 3] [--settle 15] [--json FILE]
"""
import argparse
import json
import os
import random
import sys
import time

from tests.lib import apps
from tests.lib.cluster import Cluster, cluster_env, lock_cluster, rfc3339, wait_until
from tests.lib.stats import summary
from tests.loadtest.measure import Procs, proc_sample, wait_served

NS = "bench-syncservice"
SVC_NS, SVC = "reload-agent", "reload-agent-sync"
USER = "system:serviceaccount:%s:%s" % (SVC_NS, SVC)


def edits(c, targets, first, count, gap, timeout, rnd, label):
    """count edits of the ConfigMap, numbered from first; each timed on
    every target. Returns [(apply end, {replica: seconds})]."""
    out = []
    for i in range(first, first + count):
        body = "edit-%d" % i
        c.kubectl("apply", "-f", "-", input=apps.configmap("site", {"site.conf": apps.site_conf(body)}),
                  ns=NS)
        t0 = time.time()
        got, missing = wait_served(targets, body, t0, timeout, interval=0.05)
        if missing:
            sys.exit("syncservice bench: %s edit %d not served by %r within %d s" % (label, i, missing, timeout))
        out.append((t0, got))
        print("syncservice bench: %s edit %2d: every replica serving after %6.2f s" % (
            label, i, max(got.values())), flush=True)
        time.sleep(rnd.uniform(0, gap))
    return out


def patches(c, since, until, pods):
    """The service's PATCHes of the pods between since and until (audit log)."""
    return [e for e in c.audit(since) if e.get("verb") == "patch" and
            e.get("user", {}).get("username") == USER and
            (e.get("objectRef") or {}).get("name") in pods and
            rfc3339(e.get("stageTimestamp", "")) <= until]


def scale(c, replicas):
    c.kubectl("scale", "deployment/" + SVC, "--replicas=%d" % replicas, ns=SVC_NS)
    if replicas:
        c.kubectl("rollout", "status", "deployment/" + SVC, "--timeout=180s", ns=SVC_NS, timeout=200)
    else:
        wait_until(lambda: not [p for p in c.get("pods", ns=SVC_NS)["items"]
                                if p["metadata"].get("labels", {}).get("app.kubernetes.io/name") == SVC],
                   120, "the service's pods gone")


def service_memory(c):
    pods = [p for p in c.get("pods", ns=SVC_NS)["items"]
            if p["metadata"].get("labels", {}).get("app.kubernetes.io/name") == SVC]
    pids = Procs(c).container_pids(pods, "sync")
    return {name: proc_sample(pid)[:2] for name, pid in pids.items() if proc_sample(pid)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--edits", type=int, default=10)
    ap.add_argument("--baseline-edits", type=int, default=4)
    ap.add_argument("--gap", type=float, default=3.0)
    ap.add_argument("--settle", type=float, default=15.0)
    ap.add_argument("--json", help="also write the figures here")
    a = ap.parse_args()
    lock = lock_cluster()  # noqa: F841 (held until exit)
    c = Cluster(cluster_env(), os.path.abspath(a.binary))
    c.ensure_webhook()
    replicas = c.get("deployment", SVC, ns=SVC_NS)["spec"]["replicas"]
    c.kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=true", timeout=180)
    c.kubectl("create", "namespace", NS)
    wait_until(lambda: c.get("serviceaccount", "default", ns=NS, check=False), 60, "default SA")
    c.kubectl("apply", "-f", "-", input=apps.configmap("site", {"site.conf": apps.site_conf("edit-0")}), ns=NS)
    c.kubectl("apply", "-f", "-", ns=NS, input=apps.nginx_workload(
        "Deployment", "web", apps.agent_annotations(action="signal", process="nginx"), replicas=3))
    c.kubectl("rollout", "status", "deployment/web", "--timeout=240s", ns=NS, timeout=260)
    pods = [p for p in c.get("pods", ns=NS)["items"] if not p["metadata"].get("deletionTimestamp")]
    if len(pods) != 3 or any(p["metadata"].get("annotations", {}).get("reload-agent.io/sync-objects") !=
                             "configmap/site" for p in pods):
        sys.exit("syncservice bench: want 3 injected pods naming configmap/site: %r" % [
            (p["metadata"]["name"], p["metadata"].get("annotations", {}).get("reload-agent.io/sync-objects"))
            for p in pods])
    names = [p["metadata"]["name"] for p in pods]
    targets = [(p["metadata"]["name"], "http://%s:%d/" % (p["status"]["podIP"], apps.PORT)) for p in pods]
    print("syncservice bench: pods %s ready; settling %.0f s" % (", ".join(names), a.settle), flush=True)
    time.sleep(a.settle)
    rnd = random.Random(20261206)
    t_on = time.time()
    on = edits(c, targets, 1, a.edits, a.gap, 60, rnd, "service on ")
    time.sleep(3)  # a late or doubled PATCH shows in the audit log by now
    ps = patches(c, t_on, time.time(), names)
    mem = service_memory(c)
    try:
        scale(c, 0)
        off = edits(c, targets, a.edits + 1, a.baseline_edits, a.gap, 240, rnd, "service off")
    finally:
        scale(c, replicas)
    on_all = [s for _, got in on for s in got.values()]
    off_all = [s for _, got in off for s in got.values()]
    on_max = [max(got.values()) for _, got in on]
    off_max = [max(got.values()) for _, got in off]
    res = {"edits": a.edits, "baseline_edits": a.baseline_edits, "replicas": len(names),
           "service_s": summary(on_all), "service_every_replica_s": summary(on_max),
           "kubelet_s": summary(off_all), "kubelet_every_replica_s": summary(off_max),
           "patches": len(ps), "patches_per_replica_per_edit": len(ps) / float(a.edits * len(names)),
           "service_memory_kib": mem,
           "raw": {"service": [got for _, got in on], "kubelet": [got for _, got in off]}}
    s, k = res["service_every_replica_s"], res["kubelet_every_replica_s"]
    print("syncservice bench (one run): apply -> every one of %d replicas serving" % len(names))
    print("  sync service (default install)   %2d edits: p50 %6.2f s  p90 %6.2f s  max %6.2f s" % (
        a.edits, s["p50"], s["p90"], s["max"]))
    print("  kubelet defaults (service at 0)  %2d edits: p50 %6.2f s  p90 %6.2f s  max %6.2f s" % (
        a.baseline_edits, k["p50"], k["p90"], k["max"]))
    print("  ratio of the p50s: %.4f (the service's p50 is %.0f times shorter)" % (
        s["p50"] / k["p50"], k["p50"] / s["p50"]))
    print("  the service's PATCHes: %d for %d edits x %d replicas (%.2f per replica per edit)" % (
        len(ps), a.edits, len(names), res["patches_per_replica_per_edit"]))
    print("  the service's replicas (VmRSS, VmHWM KiB): %s" % json.dumps(mem))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    c.kubectl("delete", "namespace", NS, "--wait=false", check=False)


if __name__ == "__main__":
    main()
