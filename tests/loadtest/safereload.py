#!/usr/bin/env python3
"""Safe reload against the plain actions on the real cluster (tests/cluster/,
issue 26, docs/safe-reload.md "On the real cluster"): what a broken edit and
a valid edit cost 4 replicas of stock nginx behind a Service, with a client
hitting the Service's ClusterIP every 20 ms from the node.

Each configuration is a Deployment of 4 replicas injected by `reload-agent
inject` (everything it writes applied: the fast-sync and stage Roles, the
Lease), with fast sync on, in its own namespace, one after the other:
  - safe, stage 1:  signal, validate "nginx -t", keep-last-good, verify
                    http://127.0.0.1:8080/, stage "1";
  - safe, no stage: the same with stage "off";
  - restart, stage (the default of restart: one replica at a time);
  - restart, no stage (stage "off"): every replica restarts at once;
the restart configurations with restart-delay 0s (the default, 1m, holds
every restart a minute to coalesce edits: here the cost of the restart
itself is measured).
Per configuration: a valid edit, then the time until all 4 replicas serve it
(polled every 100 ms on the pod IPs) and the client's failed requests
meanwhile; then a broken edit (a missing ";"), watched --watch seconds: the
client's failed requests and the fewest Ready replicas seen.

Usage: python3 -m tests.loadtest.safereload --binary build/reload-agent [--watch 60] [--json FILE]
"""
import argparse
import json
import os
import subprocess
import threading
import time

from tests.lib import apps
from tests.lib.cluster import REPO, Cluster, cluster_env, http_text, lock_cluster, wait_until
from tests.lib.proc import TestFailure, poll

REPLICAS = 4
CONFIGS = [
    ("safe, stage 1", dict(action="signal", process="nginx", validate="nginx -t", keep_last_good="true",
                           verify="http://127.0.0.1:%d/" % apps.PORT, stage="1")),
    ("safe, no stage", dict(action="signal", process="nginx", validate="nginx -t", keep_last_good="true",
                            verify="http://127.0.0.1:%d/" % apps.PORT, stage="off")),
    ("restart, stage 1 (default)", dict(action="restart", process="nginx", restart_delay="0s")),
    ("restart, no stage", dict(action="restart", process="nginx", restart_delay="0s", stage="off")),
]
BROKEN = 'server { listen %d; location / { return 200 "broken\\n" } }\n' % apps.PORT


def inject_apply(c, ns, workload):
    obj = json.loads(workload)
    obj["metadata"]["namespace"] = ns
    p = subprocess.run([c.binary, "inject", "-"], input=json.dumps(obj).encode(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    if p.returncode != 0:
        raise TestFailure("reload-agent inject: %s" % p.stderr.decode())
    c.kubectl("apply", "-f", "-", ns=ns, input=p.stdout.decode())


def service(c, ns):
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
           "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": apps.PORT}]}}
    c.kubectl("apply", "-f", "-", ns=ns, input=json.dumps(svc))
    return c.get("service", "web", ns=ns)["spec"]["clusterIP"]


class Client(threading.Thread):
    """GETs the Service every 20 ms (1 s timeout); counts the answers that
    are not 200 (or none), per window."""

    def __init__(self, ip, until):
        super().__init__(daemon=True)
        self.url, self.until = "http://%s/" % ip, until
        self.lock = threading.Lock()
        self.ok = self.failed = 0
        self.stop = threading.Event()

    def run(self):
        poll(self.step, self.until - time.monotonic(), 0.02)

    def step(self):
        st, _ = http_text(self.url, timeout=1.0)
        with self.lock:
            if st == 200:
                self.ok += 1
            else:
                self.failed += 1
        return self.stop.is_set()

    def take(self):
        with self.lock:
            r = (self.ok, self.failed)
            self.ok = self.failed = 0
        return r


def ready_count(c, ns):
    n = 0
    for p in c.get("pods", ns=ns)["items"]:
        conds = {x["type"]: x["status"] for x in p.get("status", {}).get("conditions", [])}
        n += conds.get("Ready") == "True" and not p["metadata"].get("deletionTimestamp")
    return n


def served(ip):
    st, body = http_text("http://%s:%d/" % (ip, apps.PORT), timeout=0.5)
    return body.strip() if st == 200 else None


def one(c, i, label, ann, a):
    ns = "bench-safe-%d" % i
    c.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=true", timeout=180)
    c.kubectl("create", "namespace", ns)
    wait_until(lambda: c.get("serviceaccount", "default", ns=ns, check=False), 60, "default SA")
    c.kubectl("apply", "-f", "-", ns=ns, input=apps.configmap("site", {"site.conf": apps.site_conf("v1")}))
    annots = apps.agent_annotations(fast_sync="true", **ann)
    inject_apply(c, ns, apps.nginx_workload("Deployment", "web", annots, replicas=REPLICAS))
    ip = service(c, ns)
    c.kubectl("rollout", "status", "deployment/web", "--timeout=300s", ns=ns, timeout=320)
    pods = [p["status"]["podIP"] for p in c.get("pods", ns=ns)["items"]]
    time.sleep(a.settle)
    client = Client(ip, time.monotonic() + 600)
    client.start()
    time.sleep(2)
    client.take()
    t0 = time.monotonic()
    c.kubectl("apply", "-f", "-", ns=ns, input=apps.configmap("site", {"site.conf": apps.site_conf("v2")}))
    done = poll(lambda: all(served(p) == "v2" for p in pods) and time.monotonic(), 240, 0.1)
    valid_s = round(done - t0, 1) if done else None
    ok1, failed1 = client.take()
    time.sleep(a.settle)
    client.take()
    c.kubectl("apply", "-f", "-", ns=ns, input=apps.configmap("site", {"site.conf": BROKEN}))
    low = [REPLICAS]
    poll(lambda: low.append(ready_count(c, ns)) and False, a.watch, 1.0)
    ok2, failed2 = client.take()
    client.stop.set()
    client.join(5)
    r = {"config": label, "valid_edit_all_replicas_s": valid_s, "valid_requests": ok1 + failed1,
         "valid_failed": failed1, "broken_requests": ok2 + failed2, "broken_failed": failed2,
         "broken_min_ready": min(low), "broken_ready_at_end": low[-1]}
    print("safereload: %-28s valid edit on all %d in %s s (%d of %d requests failed); broken edit: %d of %d "
          "failed over %.0f s, Ready replicas min %d, at the end %d" % (
              label, REPLICAS, valid_s, failed1, ok1 + failed1, failed2, ok2 + failed2, a.watch, min(low),
              low[-1]), flush=True)
    c.kubectl("delete", "namespace", ns, "--wait=false", check=False)
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--watch", type=float, default=60.0)
    ap.add_argument("--settle", type=float, default=10.0)
    ap.add_argument("--json", help="also write the figures here")
    a = ap.parse_args()
    lock = lock_cluster()  # noqa: F841 (held until exit)
    c = Cluster(cluster_env(), os.path.abspath(a.binary))
    c.kubectl("apply", "-f", os.path.join(REPO, "manifests/fast-sync/policy.yaml"))
    print("safereload: %s, %d replicas, a client on the Service every 20 ms" % (
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), REPLICAS), flush=True)
    res = [one(c, i, label, ann, a) for i, (label, ann) in enumerate(CONFIGS)]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
