"""The cluster sync service (`reload-agent sync`, docs/sync.md) on the real
cluster, as the default install brings it: `kubectl apply -k
manifests/webhook/certgen` (ensure_webhook) runs Deployment reload-agent-sync
with --all-namespaces beside the webhook. A 3-replica nginx Deployment with
only the opt-in and its action annotations (no fast sync, no token, no Role)
is injected by the webhook; its pods carry reload-agent.io/sync-objects.

- Each edit of its ConfigMap is PATCHed onto every replica by the service's
  ServiceAccount, exactly once per pod (the audit log), and reaches every
  replica before the kubelet's own sync could (45 s; it is 60-90 s away).
  The split is logged per replica: API write -> PATCH (audit) -> the
  kubelet's swap hashed by the agent -> its action -> served.
- The service survives a restart of kube-apiserver (tests/cluster/restart.sh)
  and a leader change (the leader's pod deleted while an edit is made): each
  edit is still nudged exactly once per pod, none lost, none doubled (a new
  leader replays the recent changes, but not to pods that show them), within
  30 s of the apply or of the in-cluster route's return after the restart
  (Route says why the route is not the service's), and within 30 s across
  the leader change. After the restart, serving waits for the kubelet's
  own watches (180 s).
"""
import json
import os
import socket
import subprocess
import threading
import time

from tests.lib import apps
from tests.lib.cluster import REPO, http_text, rfc3339, wait_until
from tests.lib.proc import check
from tests.lib.stats import pct

SVC_NS, NAME = "reload-agent", "reload-agent-sync"
USER = "system:serviceaccount:%s:%s" % (SVC_NS, NAME)
EDITS = 3
ROUTE = ("10.0.0.1", 443)  # the kubernetes Service (tests/cluster/lib.sh API_SERVICE_IP)


def served(ip):
    st, body = http_text("http://%s:%d/" % (ip, apps.PORT), timeout=1.0)
    return body.strip() if st == 200 else None


def patches(env, since, user=USER):
    return env.c.audit(since, lambda e: e.get("verb") == "patch" and
                       e.get("user", {}).get("username") == user and
                       (e.get("objectRef") or {}).get("resource") == "pods" and
                       (e.get("objectRef") or {}).get("namespace") == env.ns and
                       (e.get("responseStatus") or {}).get("code") == 200)


def leading(env, svc_ns):
    """A running replica of the service holds its Lease (a new install
    waits out an old holder's Lease first: edits before that wait too)."""
    lease = env.c.get("lease", NAME, ns=svc_ns, check=False) or {}
    holder = lease.get("spec", {}).get("holderIdentity", "")
    pods = env.c.get("pods", ns=svc_ns)["items"]
    return any(p["metadata"]["name"] == holder and p["status"].get("phase") == "Running" and
               not p["metadata"].get("deletionTimestamp") for p in pods)


def web(env, ensure_webhook=True, svc_ns=SVC_NS):
    """The 3-replica nginx Deployment, injected (by the kustomize webhook,
    installed first, unless ensure_webhook is False); its pods' IPs by
    name, once the sync service in svc_ns has a leader."""
    if ensure_webhook:
        env.c.ensure_webhook()
    wait_until(lambda: leading(env, svc_ns), 60, "a leader of the sync service in %s" % svc_ns)
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v0")}))
    env.apply(apps.nginx_workload("Deployment", "web", apps.agent_annotations(action="signal", process="nginx"),
                                  replicas=3))
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
    return ips


def edit(env, ips, body, what, deadline_s=45, user=USER, patch_within=None, route=None):
    """Applies the edit, waits until every replica serves it (deadline_s at
    most), then checks the audit log: one PATCH of the service (user) per
    pod, each within patch_within s of the apply if given, or of the in-
    cluster route's return if route (a Route) saw it come back later. Logs
    the split of each replica's path (split()), also when it failed.
    Returns the served times (s after the apply)."""
    since = time.time()
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf(body)}))
    t0, t0w = time.monotonic(), time.time()
    done = {}
    while len(done) < len(ips) and time.monotonic() < t0 + deadline_s:
        for name, ip in ips.items():
            if name not in done and served(ip) == body:
                done[name] = time.monotonic() - t0
        time.sleep(0.02)
    if len(done) < len(ips):
        split(env, ips, patches(env, since, user), t0w, done, what)
        check(False, "%s: served by %r only after %d s" % (what, sorted(done), deadline_s))
    time.sleep(3)  # a doubled PATCH would show in the audit log here
    ps = patches(env, since, user)
    per_pod = {}
    for e in ps:
        per_pod.setdefault(e["objectRef"]["name"], []).append(e)
    at = sorted(rfc3339(e["stageTimestamp"]) - t0w for e in ps if e["objectRef"]["name"] in ips)
    env.log("%s: kubectl apply took %.2f s; then the PATCHes at %s s, served at %s s"
            % (what, t0w - since, ", ".join("%.2f" % a for a in at),
               ", ".join("%.2f" % done[n] for n in sorted(done))))
    split(env, ips, ps, t0w, done, what)
    # (other pods of the namespace that mount the ConfigMap get theirs too)
    check(set(ips) <= set(per_pod) and all(len(v) == 1 for v in per_pod.values()),
          "%s: PATCHes of the sync service per pod %r (want one each of %s)" % (
              what, {k: len(v) for k, v in per_pod.items()}, sorted(ips)))
    if patch_within is not None:
        late = 0.0
        if route is not None:
            check(route.at is not None, "%s: the in-cluster route to the API never came back" % what)
            late = max(0.0, route.at - t0w)
            env.log("%s: the in-cluster route to the API (%s) answered %.2f s after the apply"
                    % (what, ROUTE[0], route.at - t0w))
        check(max(at) - late <= patch_within,
              "%s: the service's PATCHes came %.1f s after the apply, %.1f s after the route answered "
              "(want %d s at most)" % (what, max(at), max(at) - late, patch_within))
    return list(done.values())


def split(env, ips, ps, t0w, done, what):
    """Logs each replica's path after the apply: the service's PATCH (the
    audit log), the agent's content change (its log: the kubelet swapped
    the volume and the agent hashed it), the agent's action done, the
    replica serving (the test's poll, every 20 ms). One machine, one
    clock: the agent's log times and the audit's are comparable."""
    patched = {e["objectRef"]["name"]: rfc3339(e["stageTimestamp"]) - t0w for e in ps}
    for name in sorted(ips):
        evs = [e for e in env.agent_events(name) if rfc3339(e.get("time", "")) >= t0w - 1]
        change = next((rfc3339(e["time"]) - t0w for e in evs if e.get("event") == "change"), None)
        act = next((e for e in evs if e.get("event") == "action"), None)
        acted = rfc3339(act["time"]) - t0w if act else None
        fmt = lambda v: "?" if v is None else "%.2f" % v
        env.log("  %s %s: PATCH %s s -> swapped and hashed %s s -> %s done %s s (%.0f ms) -> served %s s"
                % (what, name, fmt(patched.get(name)), fmt(change), act.get("action", "?") if act else "action",
                   fmt(acted), act.get("duration_ms", 0) if act else 0, fmt(done.get(name))))


def test_sync_service_nudges_every_replica(env):
    """The edits a running workload gets: the first right after the pods
    became ready (logged on its own: the kubelet's first syncs of a new pod
    held the nudge's sync 0.6-0.8 s in every run, the split shows it between
    the PATCH and the swap), then EDITS once the pods are 10 s old, whose
    p50 and max are the figures (docs/sync.md#figures)."""
    ips = web(env)
    fresh = edit(env, ips, "v0-fresh", "edit of just-ready pods")
    time.sleep(10)
    lat = []
    for i in range(1, EDITS + 1):
        lat += edit(env, ips, "v%d" % i, "edit %d" % i)
    env.log("apply -> every replica serving: p50 %.2f s, max %.2f s over %d replica-edits "
            "(of the just-ready pods: max %.2f s)" % (pct(sorted(lat), 50), max(lat), len(lat), max(fresh)))


def leader(env):
    lease = env.c.get("lease", NAME, ns=SVC_NS)
    return lease.get("spec", {}).get("holderIdentity", "")


def dump_service(env, svc_ns=SVC_NS):
    """The service's Lease and each replica's log, for a failure's diagnosis."""
    env.log("Lease: %s" % json.dumps((env.c.get("lease", NAME, ns=svc_ns, check=False) or {}).get("spec")))
    for p in env.c.get("pods", ns=svc_ns)["items"]:
        name = p["metadata"]["name"]
        if p["metadata"].get("labels", {}).get("app.kubernetes.io/name") != NAME:
            continue
        rc, out, err = env.c.kubectl("logs", name, ns=svc_ns, check=False, timeout=30)
        env.log("--- log of %s:\n%s" % (name, "\n".join(out.splitlines()[-60:]) if rc == 0 else err))


def test_sync_service_survives_api_restart_and_leader_change(env):
    try:
        restart_and_leader_change(env)
    except Exception:
        dump_service(env)
        raise


class Route(threading.Thread):
    """Watches the in-cluster route to the API (the `kubernetes` Service's
    ClusterIP, ROUTE) from the node: at is the wall time a TCP connection
    first succeeded after start, or None (polled every 0.1 s for 240 s).
    The pods reach the API only that way. On this single-apiserver cluster
    the stopping kube-apiserver empties the Service's endpoints, kube-proxy
    rejects the ClusterIP until its watch of EndpointSlices is back, and
    that watch comes back with client-go's reflector backoff (0.8 s doubling
    to 30 s, jittered up to twice): 0.2-10.9 s after /readyz answered in
    the runs measured. The node's connections pass the same kube-proxy rules
    (nat OUTPUT, filter OUTPUT) as the pods'."""

    def __init__(self):
        super().__init__(daemon=True)
        self.at = None

    def run(self):
        end = time.monotonic() + 240
        while self.at is None and time.monotonic() < end:
            try:
                socket.create_connection(ROUTE, timeout=1).close()
                self.at = time.time()
            except OSError:
                time.sleep(0.1)


def restart_and_leader_change(env):
    ips = web(env)
    edit(env, ips, "v1", "before")
    # kube-apiserver stopped for 3 s and started again: every watch breaks
    restart = os.path.join(REPO, "tests", "cluster", "restart.sh")
    t0 = time.time()
    p = subprocess.run(["bash", restart, "kube-apiserver", "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=180)
    took = time.time() - t0
    check(p.returncode == 0, "restart.sh kube-apiserver: %s" % p.stderr.decode())
    route = Route()
    route.start()
    wait_until(lambda: env.c.kubectl("get", "--raw", "/readyz", check=False)[0] == 0, 120,
               "kube-apiserver ready again")
    env.log("kube-apiserver: restart.sh took %.1f s (%s), /readyz answered %.1f s after its start"
            % (took, p.stderr.decode().strip() or "it obeyed SIGTERM", time.time() - t0))
    # The service's part is bounded: one PATCH per pod within 30 s of the
    # apply, or of the in-cluster route's return if that is later (its
    # watches' backoff step, at most 10 s, the relist after the 410 at the
    # first step, the Lease renewed or taken within a retry period: Route
    # says why the route is not the service's). Serving is the kubelet's: its own
    # watch of the ConfigMap comes back with client-go's reflector backoff
    # (0.8 s doubling to 30 s, jittered up to twice that), and a nudge
    # synced before it finds the kubelet's older copy; the change then
    # waits for the kubelet's periodic sync (60-90 s), as without the
    # service (docs/sync.md#after-an-api-server-restart).
    edit(env, ips, "v2", "after an API server restart", deadline_s=180, patch_within=30, route=route)
    # the leader goes while an edit is made: the other replica takes over
    # and replays it (a graceful delete; its Lease may be released or run out)
    old = leader(env)
    check(old, "no leader holds Lease %s/%s" % (SVC_NS, NAME))
    env.c.kubectl("delete", "pod", old, "--wait=false", ns=SVC_NS)
    edit(env, ips, "v3", "across a leader change", patch_within=30)  # the 15 s lease, then the replay
    wait_until(lambda: leader(env) not in ("", old), 60, "a new leader")
    env.log("the leader changed from %s to %s" % (old, leader(env)))
    edit(env, ips, "v4", "under the new leader")
    env.c.kubectl("rollout", "status", "deployment/" + NAME, "--timeout=120s", ns=SVC_NS, timeout=130)


# it restarts kube-apiserver and deletes a pod of the shared service: alone
test_sync_service_survives_api_restart_and_leader_change.exclusive = True
