"""signal on the real kubelet: stock nginx (master as root), injected by the
webhook through the real apiserver, reloads a ConfigMap edit in place."""
import time

import apps
from lib import check, http_get, wait_until


def served(ip):
    st, body = http_get("http://%s:%d/" % (ip, apps.PORT))
    return body.strip() if st == 200 else None


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
    for cs in pod["status"].get("containerStatuses", []) + pod["status"].get("initContainerStatuses", []):
        check(cs.get("restartCount", 0) == 0, "container %s restarted" % cs["name"])
    check(env.get("deployment", "web")["metadata"]["generation"] == gen, "the Deployment was rolled")
    acts = [e for e in env.agent_events(name) if e.get("event") == "action"]
    check(any(e.get("action") == "signal" and e.get("result") == "success" for e in acts),
          "no successful signal action in the agent's log: %r" % acts)
