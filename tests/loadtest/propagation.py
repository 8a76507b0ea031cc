#!/usr/bin/env python3
"""Propagation on the real cluster (tests/cluster/): the time from
`kubectl apply` of a ConfigMap to the new content being served, with the
kubelet's default settings (syncFrequency 1m plus jitter).

One pod, stock nginx with the injected reload-agent, mounts one ConfigMap of
two keys at /etc/nginx/conf.d; each edit changes both:
  - baseline: /file serves the key index.html as a static file: nginx
    serves the new bytes the moment the kubelet swaps the volume, so this is
    the kubelet's own propagation time;
  - agent: / answers with the body written in site.conf, which nginx reads
    only when the agent's SIGHUP reloads it.
Both are measured on the same pod for the same kubelet swap, so their
difference is what the agent adds. Between edits a random pause (0 to --gap
seconds) samples the kubelet's sync phase as a user's edit would; the pod
is left to settle first (a just-started pod is synced often).

Usage: python3 -m tests.loadtest.propagation --binary build/reload-agent [--edits 10] [--gap 30]
"""
import argparse
import json
import os
import random
import sys
import time

from tests.lib import apps
from tests.lib.cluster import Cluster, cluster_env, lock_cluster, rfc3339, wait_until
from tests.lib.stats import median, summary
from tests.loadtest.measure import wait_served

NS = "bench-propagation"


def manifests(body):
    site = ('server { listen %d; location = /file { default_type text/plain; '
            'alias /etc/nginx/conf.d/index.html; } location / { return 200 "%s\\n"; } }\n' % (apps.PORT, body))
    cm = apps.configmap("content", {"index.html": body + "\n", "site.conf": site})
    pod = apps.nginx_workload("Pod", "web", apps.agent_annotations(action="signal", process="nginx"),
                              cm="content")
    return cm, pod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--edits", type=int, default=10)
    ap.add_argument("--gap", type=float, default=30.0)
    ap.add_argument("--settle", type=float, default=100.0)
    ap.add_argument("--json", help="also write the figures here")
    a = ap.parse_args()
    lock = lock_cluster()  # noqa: F841 (held until exit)
    c = Cluster(cluster_env(), os.path.abspath(a.binary))
    c.ensure_webhook()
    c.kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=true", timeout=180)
    c.kubectl("create", "namespace", NS)
    wait_until(lambda: c.get("serviceaccount", "default", ns=NS, check=False), 60, "default SA")
    for m in manifests("edit-0"):
        c.kubectl("apply", "-f", "-", input=m, ns=NS)
    c.kubectl("wait", "--for=condition=Ready", "pod/web", "--timeout=180s", ns=NS, timeout=200)
    ip = c.get("pod", "web", ns=NS)["status"]["podIP"]
    print("propagation: pod ready; settling %.0f s (a pod is synced often just after it starts)" % a.settle,
          flush=True)
    time.sleep(a.settle)
    rnd = random.Random(20261203)
    targets = [("baseline", "http://%s:%d/file" % (ip, apps.PORT)), ("agent", "http://%s:%d/" % (ip, apps.PORT))]
    base_t, agent_t = [], []
    for i in range(1, a.edits + 1):
        body = "edit-%d" % i
        cm = manifests(body)[0]
        t0 = time.time()
        c.kubectl("apply", "-f", "-", input=cm, ns=NS)
        got, missing = wait_served(targets, body, t0, 240, interval=0.05)
        if missing:
            sys.exit("propagation: edit %d not served within 240 s: %r" % (i, got))
        base_t.append(got["baseline"])
        agent_t.append(got["agent"])
        print("propagation: edit %2d: file swapped (kubelet) after %5.1f s, reloaded content served after %5.1f s"
              % (i, got["baseline"], got["agent"]), flush=True)
        time.sleep(rnd.uniform(0, a.gap))
    # The agent's own share: its log's change -> successful action, per edit.
    own = []
    evs = []
    rc, out, _ = c.kubectl("logs", "web", "-c", "reload-agent", ns=NS, check=False)
    for line in out.splitlines():
        try:
            evs.append(json.loads(line))
        except ValueError:
            pass
    last_change = None
    for e in evs:
        if e.get("event") == "change":
            last_change = rfc3339(e["time"])
        elif e.get("event") == "action" and e.get("result") == "success" and last_change:
            own.append((rfc3339(e["time"]) - last_change) * 1000.0)
            last_change = None
    added = [x - y for x, y in zip(agent_t, base_t)]
    res = {"edits": a.edits, "baseline_s": summary(base_t), "agent_s": summary(agent_t),
           "agent_own_ms_p50": median(own) if own else None, "added_s": summary(added),
           "ratio_p50": median(agent_t) / median(base_t)}
    print("propagation (kubelet defaults, %d edits): apply -> served" % a.edits)
    print("  baseline, the file served as the kubelet swaps it: p50 %.1f s  p90 %.1f s  max %.1f s" % (
        res["baseline_s"]["p50"], res["baseline_s"]["p90"], res["baseline_s"]["max"]))
    print("  reload-agent, nginx reloaded by SIGHUP:           p50 %.1f s  p90 %.1f s  max %.1f s" % (
        res["agent_s"]["p50"], res["agent_s"]["p90"], res["agent_s"]["max"]))
    print("  added by the agent (same pod, same swap): p50 %.2f s, max %.2f s (polled every 50 ms)" % (
        res["added_s"]["p50"], res["added_s"]["max"]))
    own_s = "n/a" if not own else ("%.0f ms" % res["agent_own_ms_p50"] if res["agent_own_ms_p50"] >= 1
                                    else "< 1 ms (the log's resolution)")
    print("  ratio of medians (agent / baseline): %.2f; the agent's own change -> signal: %s (p50)" % (
        res["ratio_p50"], own_s))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    c.kubectl("delete", "namespace", NS, "--wait=false", check=False)


if __name__ == "__main__":
    main()
