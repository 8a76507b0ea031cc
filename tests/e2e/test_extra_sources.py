"""reload-agent.io/extra-sources on the real kubelet (issue 29 item 1,
docs/extra-sources.md): nginx, injected by the webhook through the real
apiserver, names a ConfigMap it neither mounts nor reads through env. The
object does not exist when the pod starts: the mirror is optional, so the
pod runs. The kubelet fills the sidecar's volume when the ConfigMap is
created, and the agent signals nginx (the pod's action, not a rollout);
an edit does so again. Same pod, same nginx master, no rollout."""
import time

from tests.lib import apps
from tests.lib.cluster import wait_until
from tests.lib.proc import check

EXTRA = "/reload-agent/extra/configmap/flags"


def signals(env, pod):
    return [e for e in env.agent_events(pod)
            if e.get("event") == "action" and e.get("action") == "signal" and e.get("result") == "success"]


def test_extra_source_missing_then_created_then_edited(env):
    env.c.ensure_webhook()
    ann = apps.agent_annotations(action="signal", process="nginx", extra_sources="configmap/flags")
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v1")}))
    env.apply(apps.nginx_workload("Deployment", "web", ann))  # no ConfigMap flags yet
    env.kubectl("rollout", "status", "deployment/web", "--timeout=180s", timeout=200)
    (pod,) = env.ready_pods("app=web")
    name = pod["metadata"]["name"]
    vols = {v["name"]: v for v in pod["spec"]["volumes"]}
    check(vols.get("reload-agent-extra-cm-flags", {}).get("configMap") == {
        "name": "flags", "optional": True, "defaultMode": 420},
        "the extra volume: %r" % vols.get("reload-agent-extra-cm-flags"))
    for c in pod["spec"]["containers"]:
        check(all(m["name"] != "reload-agent-extra-cm-flags" for m in c.get("volumeMounts", [])),
              "container %s mounts the extra source" % c["name"])
    env.wait_agent_event(name, "ready", 60)
    pid = env.exec(name, "nginx", "cat", "/run/nginx.pid").strip()
    gen = env.get("deployment", "web")["metadata"]["generation"]

    t0 = time.monotonic()
    env.apply(apps.configmap("flags", {"feature": "on"}))
    wait_until(lambda: len(signals(env, name)) >= 1, 240, "a signal after the ConfigMap was created")
    env.log("extra source created: signal after %.1f s (kubelet sync + agent)" % (time.monotonic() - t0))
    t0 = time.monotonic()
    env.apply(apps.configmap("flags", {"feature": "off"}))
    wait_until(lambda: len(signals(env, name)) >= 2, 240, "a signal after the edit")
    env.log("extra source edited: signal after %.1f s" % (time.monotonic() - t0))

    changes = [e for e in env.agent_events(name) if e.get("event") == "change"]
    paths = [p for e in changes for p in e.get("added", []) + e.get("modified", [])]
    check(EXTRA + "/feature" in paths, "no change names %s/feature: %r" % (EXTRA, changes))
    pod = env.get("pod", name)
    check(pod["metadata"].get("deletionTimestamp") is None, "the pod is being replaced")
    check(env.exec(name, "nginx", "cat", "/run/nginx.pid").strip() == pid,
          "nginx's master PID changed: it was restarted, not reloaded")
    check(env.get("deployment", "web")["metadata"]["generation"] == gen, "the Deployment was rolled")
    check(len(signals(env, name)) == 2, "signals: %r" % signals(env, name))


test_extra_source_missing_then_created_then_edited.timeout = 900
