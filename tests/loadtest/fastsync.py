#!/usr/bin/env python3
"""Fast sync on the real cluster (tests/cluster/), side by side with the
kubelet's defaults, in one run (issue 18).

Two nginx Deployments, the same in everything but the annotation
reload-agent.io/fast-sync ("false" and "true"), mount the same ConfigMap
(site.conf); the injected agent reloads nginx with SIGHUP. Each edit of the
ConfigMap is timed on both pods at once: from `kubectl apply` to the new
body being served by nginx (polled every 50 ms). Between edits a random
pause (0 to --gap s) samples the kubelet's sync phase as a user's edit
would; the pods are left to settle first.

Also measured, for the fast-sync pod:
  - API requests per edit, from the apiserver's audit log (requests whose
    user carries the pod's name claim): the nudges (PATCH of the pod) and
    anything else; watch requests are not in the audit log (the cluster's
    policy leaves watches out), their reconnects are counted by the agent
    (/status is not reachable here: its log's fast-sync events are read);
  - nudges per change (the kubelet race: more than one means the first
    nudge found the kubelet's ConfigMap cache still old);
  - the agent's memory (VmRSS, VmHWM of its process, read on the node) with
    the watches open, beside the fast-sync-off agent's;
  - its idle wake-ups: strace -f -p PID for --idle-trace seconds with no
    edit, counting epoll_wait returns (watch traffic: bookmarks).

Usage: python3 -m tests.loadtest.fastsync --binary build/reload-agent [--edits 20] [--gap 10]
       [--settle 60] [--idle-trace 90] [--json FILE]
"""
import argparse
import json
import os
import re
import random
import signal
import statistics
import subprocess
import sys
import time

from tests.lib import apps
from tests.lib.cluster import REPO, Cluster, cluster_env, lock_cluster, rfc3339, wait_until
from tests.lib.proc import memory_kb
from tests.lib.stats import summary
from tests.loadtest.measure import wait_served

NS = "bench-fastsync"
EPOLL_RETURN = re.compile(r"^\d+\s+(?:<\.\.\. )?epoll_p?wait\b.*\)\s+= ")


def manifests(body):
    cm = apps.configmap("site", {"site.conf": apps.site_conf(body)})
    deps = []
    for name, fast in (("slow", "false"), ("fast", "true")):
        ann = apps.agent_annotations(action="signal", process="nginx", fast_sync=fast)
        deps.append(apps.nginx_workload("Deployment", name, ann, cm="site"))
    return cm, deps


def injected(binary, workload):
    """`reload-agent inject` of a Deployment (in NS), as a user applies it:
    with fast sync on, its Role (resourceNames: site) and RoleBinding
    follow it in the output (issue 18 item 4)."""
    obj = json.loads(workload)
    obj["metadata"]["namespace"] = NS
    p = subprocess.run([binary, "inject", "-"], input=json.dumps(obj).encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    if p.returncode != 0:
        raise SystemExit("reload-agent inject: " + p.stderr.decode())
    return p.stdout.decode()


def agent_pid(pod):
    """The PID (on the node) of the agent process of pod: the process named
    reload-agent whose environment has POD_NAME=pod."""
    want = ("POD_NAME=%s" % pod).encode()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/comm" % d) as f:
                if f.read().strip() != "reload-agent":
                    continue
            with open("/proc/%s/environ" % d, "rb") as f:
                if want in f.read().split(b"\0"):
                    return int(d)
        except OSError:
            continue
    return None


def idle_wakeups(pid, seconds):
    """epoll_wait returns of the agent's loop in seconds of strace, and
    the trace's other completed calls (what the loop did when it woke)."""
    out = "/tmp/bench-fastsync.%d.strace" % pid
    p = subprocess.Popen(["strace", "-f", "-p", str(pid), "-e", "trace=all", "-o", out],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    time.sleep(seconds)
    p.send_signal(signal.SIGINT)
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(5)
    with open(out) as f:
        lines = f.read().splitlines()
    os.unlink(out)
    wakes = sum(1 for l in lines if EPOLL_RETURN.match(l))
    calls = {}
    for l in lines:
        m = re.match(r"^\d+\s+(\w+)\(", l)
        if m and "unfinished" not in l:
            calls[m.group(1)] = calls.get(m.group(1), 0) + 1
    return wakes, calls


def agent_events(c, pod):
    rc, out, _ = c.kubectl("logs", pod, "-c", "reload-agent", ns=NS, check=False)
    evs = []
    for line in out.splitlines():
        try:
            evs.append(json.loads(line))
        except ValueError:
            pass
    return evs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--edits", type=int, default=20)
    ap.add_argument("--gap", type=float, default=10.0)
    ap.add_argument("--settle", type=float, default=60.0)
    ap.add_argument("--idle-trace", type=float, default=90.0)
    ap.add_argument("--json", help="also write the figures here")
    a = ap.parse_args()
    lock = lock_cluster()  # noqa: F841 (held until exit)
    c = Cluster(cluster_env(), os.path.abspath(a.binary))
    c.ensure_webhook()
    c.kubectl("apply", "-f", os.path.join(REPO, "manifests/fast-sync/policy.yaml"))
    c.kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=true", timeout=180)
    c.kubectl("create", "namespace", NS)
    wait_until(lambda: c.get("serviceaccount", "default", ns=NS, check=False), 60, "default SA")
    cm, deps = manifests("edit-0")
    c.kubectl("apply", "-f", "-", input=cm, ns=NS)
    for d in deps:
        c.kubectl("apply", "-f", "-", input=injected(a.binary, d), ns=NS)
    pods = {}
    for name in ("slow", "fast"):
        c.kubectl("rollout", "status", "deployment/" + name, "--timeout=180s", ns=NS, timeout=200)
        items = json.loads(c.kubectl("get", "pods", "-l", "app=" + name, "-o", "json", ns=NS))["items"]
        p = [i for i in items if not i["metadata"].get("deletionTimestamp")][0]
        pods[name] = (p["metadata"]["name"], p["status"]["podIP"])
    print("fastsync bench: pods %s ready; settling %.0f s" % (
        ", ".join("%s=%s" % (k, v[0]) for k, v in pods.items()), a.settle), flush=True)
    time.sleep(a.settle)
    pid = {k: agent_pid(v[0]) for k, v in pods.items()}
    mem_before = {k: memory_kb(v) for k, v in pid.items() if v}
    rnd = random.Random(20261203)
    times = {"slow": [], "fast": []}
    targets = [(k, "http://%s:%d/" % (ip, apps.PORT)) for k, (_, ip) in pods.items()]
    t_loop = time.time()
    for i in range(1, a.edits + 1):
        body = "edit-%d" % i
        t0 = time.time()
        c.kubectl("apply", "-f", "-", input=manifests(body)[0], ns=NS)
        got, missing = wait_served(targets, body, t0, 240, interval=0.05)
        if missing:
            sys.exit("fastsync bench: edit %d not served within 240 s: %r" % (i, got))
        for k in got:
            times[k].append(got[k])
        print("fastsync bench: edit %2d: fast sync off %5.1f s, on %5.2f s" % (i, got["slow"], got["fast"]),
              flush=True)
        time.sleep(rnd.uniform(0, a.gap))
    t_end = time.time()
    # API requests per edit: the audit log, by the pod's name claim.
    per_pod = {}
    for ev in c.audit(t_loop):
        extra = ev.get("user", {}).get("extra", {})
        pn = (extra.get("authentication.kubernetes.io/pod-name") or [None])[0]
        if pn not in (pods["fast"][0], pods["slow"][0]) or _rfc(ev) > t_end + 5:
            continue
        key = "%s %s" % (ev.get("verb"), (ev.get("objectRef") or {}).get("resource"))
        per_pod.setdefault(pn, {}).setdefault(key, 0)
        per_pod[pn][key] += 1
    evs = agent_events(c, pods["fast"][0])
    synced = [e for e in evs if e.get("event") == "fast-sync-synced"]
    fallbacks = [e for e in evs if e.get("event") == "fast-sync-fallback"]
    nudges = [e.get("nudges", 0) for e in synced]
    mem_after = {k: memory_kb(v) for k, v in pid.items() if v}
    print("fastsync bench: tracing the fast-sync agent's idle loop for %.0f s" % a.idle_trace, flush=True)
    wakes, calls = idle_wakeups(pid["fast"], a.idle_trace) if pid.get("fast") else (None, {})
    res = {"edits": a.edits, "off_s": summary(times["slow"]), "on_s": summary(times["fast"]),
           "requests": per_pod, "requests_per_edit": {
               k: {kk: vv / float(a.edits) for kk, vv in v.items()} for k, v in per_pod.items()},
           "synced": len(synced), "fallbacks": len(fallbacks),
           "nudges_per_change": {"mean": statistics.mean(nudges) if nudges else None,
                                 "max": max(nudges) if nudges else None,
                                 "more_than_one": sum(1 for n in nudges if n > 1)},
           "memory_kib": {"before": mem_before, "after": mem_after},
           "idle": {"seconds": a.idle_trace, "epoll_returns": wakes, "calls": calls},
           "raw_s": times}
    print("fastsync bench (kubelet defaults, %d edits, one run): apply -> served by nginx" % a.edits)
    for k, label in (("off_s", "fast sync off (the kubelet's periodic sync)"),
                     ("on_s", "fast sync on  (watch + nudge)             ")):
        s = res[k]
        print("  %s p50 %6.2f s  p90 %6.2f s  max %6.2f s" % (label, s["p50"], s["p90"], s["max"]))
    print("  API requests by the fast-sync pod's token during the edits: %s (per edit: %s)" % (
        per_pod.get(pods["fast"][0]), res["requests_per_edit"].get(pods["fast"][0])))
    print("  API requests by the fast-sync-off pod's token: %s" % per_pod.get(pods["slow"][0]))
    print("  changes synced %d, fallbacks %d, nudges per change: mean %s, max %s, >1 in %d" % (
        len(synced), len(fallbacks), res["nudges_per_change"]["mean"], res["nudges_per_change"]["max"],
        res["nudges_per_change"]["more_than_one"]))
    print("  memory (KiB) with the watches open: %s" % json.dumps(mem_after))
    print("  idle loop of the fast-sync agent over %.0f s: %s epoll_wait returns; calls %s" % (
        a.idle_trace, wakes, json.dumps(calls)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    c.kubectl("delete", "namespace", NS, "--wait=false", check=False)


def _rfc(ev):
    return rfc3339(ev.get("stageTimestamp", ""))


if __name__ == "__main__":
    main()
