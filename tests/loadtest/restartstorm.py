#!/usr/bin/env python3
"""Restart storms on the real cluster (tests/cluster/): what a burst of
ConfigMap edits costs an app the agent restarts, with the kubelet's defaults.

Four pods run side by side, stock nginx serving one ConfigMap key, each with
the agent as a native sidecar (written by hand for restart; for restart-pod
the webhook's, asked for by the annotations, with its rule and state
emptyDir):
  - restart,     --restart-delay 0   the baseline: every change restarts at once
  - restart,     default delay (1m)  the agent coalesces
  - restart-pod, --restart-delay 0   the baseline
  - restart-pod, default delay (1m)
`restart` SIGTERMs nginx's master (shared PID namespace; the kubelet restarts
the container, with its crash-loop backoff: 10 s doubling to 5 min, reset
after 10 min); `restart-pod` exits the agent on its code and the kubelet
restarts every container of the pod in place (RestartAllContainers).

After the pods settle, the ConfigMap of every pod gets --edits edits
--gap seconds apart (5 in a minute by default); then each pod is watched
for --watch seconds. Per pod: the restarts (the app container's
restartCount), the seconds the pod was not Ready, the kubelet's BackOff
events, and when the last edit was first served. --trials repeats it (the
kubelet's sync phase differs each time).

Usage: python3 -m tests.loadtest.restartstorm --binary build/reload-agent [--edits 5] [--gap 12]
                       [--watch 240] [--trials 2] [--json FILE]
"""
import argparse
import json
import os
import threading
import time

from tests.lib import apps
from tests.lib.cluster import Cluster, cluster_env, http_text, lock_cluster, wait_until
from tests.lib.proc import poll

MODES = [("restart", "0"), ("restart", None), ("restart-pod", "0"), ("restart-pod", None)]


def pod_manifest(action, delay):
    """restart: the agent written by hand beside nginx (shared PID
    namespace); restart-pod: the injector's sidecar (the webhook adds it,
    with the rule), asked for by annotations."""
    if action == "restart-pod":
        ann = apps.restart_pod_annotations()
        if delay is None:
            del ann["reload-agent.io/restart-delay"]
        else:
            ann["reload-agent.io/restart-delay"] = delay
        tmpl = apps.pod_template(None, ann)
    else:
        extra = [] if delay is None else ["--restart-delay=" + delay]
        agent = apps.sidecar(["--watch=/etc/nginx/conf.d", "--action=restart", "--process=nginx"] + extra)
        agent["securityContext"].update({"runAsUser": 0, "runAsNonRoot": False})  # nginx's master is root
        tmpl = apps.pod_template(agent)
        tmpl["spec"]["shareProcessNamespace"] = True
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": dict(tmpl["metadata"], name="web"), "spec": tmpl["spec"]}
    return json.dumps(obj)


class Watch(threading.Thread):
    """Polls one pod every 0.5 s: restarts, readiness, what nginx serves."""

    def __init__(self, c, ns, until):
        super().__init__(daemon=True)
        self.c, self.ns, self.until = c, ns, until
        self.restarts, self.not_ready, self.served = [], 0.0, {}

    def run(self):
        state = {"last": time.monotonic(), "prev": 0}
        poll(lambda: self.sample(state), self.until - time.monotonic(), 0.5)

    def sample(self, state):
        """One look at the pod; never done (the window ends the poll)."""
        p = self.c.get("pod", "web", ns=self.ns, check=False)
        now = time.monotonic()
        if p:
            st = p.get("status", {})
            rc = {cs["name"]: cs.get("restartCount", 0) for cs in st.get("containerStatuses", [])}
            n = rc.get("nginx", 0)
            if n > state["prev"]:
                self.restarts.append(time.time())
                state["prev"] = n
            ready = {c["type"]: c["status"] for c in st.get("conditions", [])}.get("Ready") == "True"
            if not ready:
                self.not_ready += now - state["last"]
            ip = st.get("podIP")
            if ip:
                code, body = http_text("http://%s:%d/" % (ip, apps.PORT), timeout=0.4)
                if code == 200 and body.strip() not in self.served:
                    self.served[body.strip()] = time.time()
        state["last"] = now
        return False


def trial(c, a, n):
    nss = []
    for i, (action, delay) in enumerate(MODES):
        ns = "bench-storm-%d-%d" % (n, i)
        c.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=true", timeout=180)
        c.kubectl("create", "namespace", ns)
        wait_until(lambda: c.get("serviceaccount", "default", ns=ns, check=False), 60, "default SA")
        c.kubectl("apply", "-f", "-", ns=ns, input=apps.configmap("site", {"site.conf": apps.site_conf("e0")}))
        c.kubectl("apply", "-f", "-", ns=ns, input=apps.configmap("env", {"GREETING": "hello"}))
        c.kubectl("apply", "-f", "-", ns=ns, input=pod_manifest(action, delay))
        nss.append(ns)
    for ns in nss:
        c.kubectl("wait", "--for=condition=Ready", "pod/web", "--timeout=180s", ns=ns, timeout=200)
    print("restartstorm: trial %d: pods ready; settling %.0f s" % (n, a.settle), flush=True)
    time.sleep(a.settle)
    until = time.monotonic() + a.edits * a.gap + a.watch
    watches = [Watch(c, ns, until) for ns in nss]
    for w in watches:
        w.start()
    t_edits = []
    for e in range(1, a.edits + 1):
        t_edits.append(time.time())
        for ns in nss:
            c.kubectl("apply", "-f", "-", ns=ns, input=apps.configmap("site", {"site.conf": apps.site_conf("e%d" % e)}))
        if e < a.edits:
            time.sleep(a.gap)
    for w in watches:
        w.join(a.edits * a.gap + a.watch + 60)
    out = []
    final = "e%d" % a.edits
    for (action, delay), ns, w in zip(MODES, nss, watches):
        evs = c.get("events", ns=ns)["items"]
        backoff = sum(e.get("count", 1) for e in evs if e.get("reason") == "BackOff")
        r = {"action": action, "delay": delay or "1m (default)", "restarts": len(w.restarts),
             "restart_at_s": [round(t - t_edits[0], 1) for t in w.restarts],
             "not_ready_s": round(w.not_ready, 1), "backoff_events": backoff,
             "final_served_after_last_edit_s": round(w.served[final] - t_edits[-1], 1) if final in w.served else None,
             "versions_served": sorted(w.served, key=w.served.get)}
        out.append(r)
        print("restartstorm: trial %d: %-11s delay %-12s restarts %d at %s s, not ready %5.1f s, BackOff %d, "
              "%s served %s s after the last edit (served: %s)" % (
                  n, action, r["delay"], r["restarts"], r["restart_at_s"], r["not_ready_s"], backoff, final,
                  r["final_served_after_last_edit_s"], ",".join(r["versions_served"])), flush=True)
        c.kubectl("delete", "namespace", ns, "--wait=false", check=False)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--edits", type=int, default=5)
    ap.add_argument("--gap", type=float, default=12.0)
    ap.add_argument("--watch", type=float, default=240.0)
    ap.add_argument("--settle", type=float, default=90.0)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--json", help="also write the figures here")
    a = ap.parse_args()
    lock = lock_cluster()  # noqa: F841 (held until exit)
    c = Cluster(cluster_env(), os.path.abspath(a.binary))
    c.ensure_webhook()
    res = [trial(c, a, n) for n in range(1, a.trials + 1)]
    print("restartstorm: %d edits %.0f s apart, watched %.0f s after the last; per trial:" % (a.edits, a.gap, a.watch))
    for i, (action, delay) in enumerate(MODES):
        rs = [t[i] for t in res]
        print("  %-11s delay %-12s restarts %s  not ready %s s  BackOff events %s" % (
            action, rs[0]["delay"], [r["restarts"] for r in rs], [r["not_ready_s"] for r in rs],
            [r["backoff_events"] for r in rs]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
