"""signal on the real kubelet: stock nginx (master as root), injected by the
webhook through the real apiserver, reloads a ConfigMap edit in place, and
the sidecar keeps what it applied in its state emptyDir (--state-dir), read
where the kubelet lays that volume out on the node."""
import hashlib
import json
import os
import time

from tests.lib import apps
from tests.lib.cluster import http_text, wait_until, needs
from tests.lib.proc import check


def served(ip):
    st, body = http_text("http://%s:%d/" % (ip, apps.PORT))
    return body.strip() if st == 200 else None


def applied_state(env, pod):
    """The sidecar's applied state ({path: sha256}) as the kubelet holds it on
    the node: the reload-agent-state emptyDir under the kubelet's --root-dir
    (tests/cluster/up.sh), or None while there is no readable record."""
    path = os.path.join(env.c.env["STATE"], "kubelet", "pods", pod["metadata"]["uid"], "volumes",
                        "kubernetes.io~empty-dir", "reload-agent-state", "applied.json")
    try:
        with open(path, "rb") as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return None
    return {f["path"]: f["sha256"] for f in rec.get("files", [])}


def test_signal_stock_nginx(env):
    env.c.ensure_webhook()
    ann = apps.agent_annotations(action="signal", process="nginx")
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v1")}))
    env.apply(apps.nginx_workload("Deployment", "web", ann))
    env.kubectl("rollout", "status", "deployment/web", "--timeout=180s", timeout=200)
    (pod,) = env.ready_pods("app=web")
    name, ip = pod["metadata"]["name"], pod["status"]["podIP"]
    check(any(c["name"] == "reload-agent" for c in pod["spec"].get("initContainers", [])),
          "the webhook did not inject the sidecar")
    check(served(ip) == "v1", "nginx does not serve v1: %r" % served(ip))
    pid = env.exec(name, "nginx", "cat", "/run/nginx.pid").strip()
    gen = env.get("deployment", "web")["metadata"]["generation"]
    env.wait_agent_event(name, "ready", 60)

    t0 = time.monotonic()
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v2")}))
    wait_until(lambda: served(ip) == "v2", 180, "nginx to serve v2")
    env.log("ConfigMap edit served after %.1f s (kubelet sync + agent)" % (time.monotonic() - t0))

    pod = env.get("pod", name)
    check(pod["metadata"].get("deletionTimestamp") is None, "the pod is being replaced")
    check(env.exec(name, "nginx", "cat", "/run/nginx.pid").strip() == pid,
          "nginx's master PID changed: it was restarted, not reloaded")
    # the sidecar kept what it applied in its state emptyDir (--state-dir):
    # the record names v2's bytes, so a restarted sidecar would not act again
    v1 = hashlib.sha256(apps.site_conf("v1").encode()).hexdigest()
    v2 = hashlib.sha256(apps.site_conf("v2").encode()).hexdigest()
    def records_v2():
        st = applied_state(env, pod)
        return st if st and v2 in st.values() else None
    st = wait_until(records_v2, 30, "the applied state to record v2's site.conf")
    check(v1 not in st.values(), "the applied state still names v1: %r" % st)
    env.log("applied state in the emptyDir: %r" % st)
    for cs in pod["status"].get("containerStatuses", []) + pod["status"].get("initContainerStatuses", []):
        check(cs.get("restartCount", 0) == 0, "container %s restarted" % cs["name"])
    check(env.get("deployment", "web")["metadata"]["generation"] == gen, "the Deployment was rolled")
    acts = [e for e in env.agent_events(name) if e.get("event") == "action"]
    check(any(e.get("action") == "signal" and e.get("result") == "success" for e in acts),
          "no successful signal action in the agent's log: %r" % acts)


needs(core=True)(test_signal_stock_nginx)  # E2E_CORE=1 runs it
