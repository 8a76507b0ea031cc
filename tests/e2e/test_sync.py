"""The cluster sync service (`reload-agent sync`, docs/sync.md) on the real
cluster, as the chart deploys it: the objects of the chart's
templates/sync.yaml (rendered by helm with sync.enabled and this test's
namespace) applied beside the cluster's webhook. A 3-replica nginx
Deployment with only the opt-in and its action annotations (no fast sync,
no token, no Role) is injected by the webhook; its pods carry
reload-agent.io/sync-objects. Each edit of its ConfigMap is PATCHed onto
every replica by the service's ServiceAccount, once per pod (the audit
log), and reaches every replica. Times are logged, not asserted beyond the
kubelet's own sync period (the nudge must beat it): the split is API write
-> PATCH (audit) -> served.
"""
import json
import os
import subprocess
import time

from tests.lib import apps
from tests.lib.cluster import REPO, http_text, wait_until
from tests.lib.proc import TestFailure, check
from tests.lib.stats import pct

CHART = os.path.join(REPO, "charts", "reload-agent")
RELEASE = "ra-sync"
NAME = "ra-sync-reload-agent-sync"
EDITS = 3


def render(env):
    helm = env.c.env.get("HELM", "")
    check(helm and os.access(helm, os.X_OK), "tests/cluster/up.sh printed no usable HELM= (%r)" % helm)
    p = subprocess.run([helm, "template", RELEASE, CHART, "-n", env.ns, "--show-only",
                        "templates/sync.yaml", "--set", "sync.enabled=true",
                        "--set", "sync.namespaces={%s}" % env.ns],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if p.returncode != 0:
        raise TestFailure("helm template: %s" % p.stderr.decode())
    return p.stdout.decode()


def served(ip):
    st, body = http_text("http://%s:%d/" % (ip, apps.PORT), timeout=1.0)
    return body.strip() if st == 200 else None


def patches(env, since):
    user = "system:serviceaccount:%s:%s" % (env.ns, NAME)
    return env.c.audit(since, lambda e: e.get("verb") == "patch" and
                       e.get("user", {}).get("username") == user and
                       (e.get("objectRef") or {}).get("resource") == "pods" and
                       (e.get("responseStatus") or {}).get("code") == 200)


def cleanup_cluster_scoped(env):
    for kind in ("validatingadmissionpolicybinding", "validatingadmissionpolicy", "clusterrole"):
        env.c.kubectl("delete", kind, NAME, "--ignore-not-found", check=False)


def test_sync_service_nudges_every_replica(env):
    env.c.ensure_webhook()
    cleanup_cluster_scoped(env)
    try:
        env.apply(render(env))
        env.kubectl("rollout", "status", "deployment/" + NAME, "--timeout=180s", timeout=200)
        env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v0")}))
        ann = apps.agent_annotations(action="signal", process="nginx")
        env.apply(apps.nginx_workload("Deployment", "web", ann, replicas=3))
        env.kubectl("rollout", "status", "deployment/web", "--timeout=240s", timeout=260)
        pods = env.ready_pods("app=web")
        check(len(pods) == 3, "want 3 ready replicas: %d" % len(pods))
        for p in pods:
            objs = p["metadata"].get("annotations", {}).get("reload-agent.io/sync-objects")
            check(objs == "configmap/site", "pod %s sync-objects %r" % (p["metadata"]["name"], objs))
            check(not any(v.get("projected") and "serviceAccountToken" in json.dumps(v)
                          for v in p["spec"]["volumes"] if "reload-agent" in v.get("name", "")),
                  "the sidecar got a token")
        ips = {p["metadata"]["name"]: p["status"]["podIP"] for p in pods}
        wait_until(lambda: all(served(ip) == "v0" for ip in ips.values()), 60, "v0 served")
        lat = []
        for i in range(1, EDITS + 1):
            body = "v%d" % i
            since = time.time()
            env.apply(apps.configmap("site", {"site.conf": apps.site_conf(body)}))
            t0 = time.monotonic()
            done = {}
            deadline = t0 + 45  # the kubelet's own sync is 60-90 s away: only a nudge is this fast
            while len(done) < len(ips) and time.monotonic() < deadline:
                for name, ip in ips.items():
                    if name not in done and served(ip) == body:
                        done[name] = time.monotonic() - t0
                time.sleep(0.02)
            check(len(done) == len(ips), "edit %d: served by %r only after 45 s" % (i, sorted(done)))
            lat += done.values()
            time.sleep(2)  # a doubled PATCH would show in the audit log here
            ps = patches(env, since)
            per_pod = {}
            for e in ps:
                per_pod.setdefault(e["objectRef"]["name"], []).append(e)
            check(sorted(per_pod) == sorted(ips) and all(len(v) == 1 for v in per_pod.values()),
                  "edit %d: PATCHes per pod %r" % (i, {k: len(v) for k, v in per_pod.items()}))
            first = min(e["stageTimestamp"] for e in ps)
            env.log("edit %d: served after %s s; PATCHes at %s (apply at %.3f)" % (
                i, ", ".join("%.2f" % done[n] for n in sorted(done)), first, since))
        env.log("apply -> every replica serving: p50 %.2f s, max %.2f s over %d replica-edits"
                % (pct(sorted(lat), 50), max(lat), len(lat)))
    finally:
        cleanup_cluster_scoped(env)
