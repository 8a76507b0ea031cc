"""Env-sourced configuration on the real kubelet: a ConfigMap the app reads
through envFrom is mirrored into the agent alone; an edit restarts the app
container in place with env-action restart (the kubelet resolves env again:
printenv shows the new value), and rolls the workload by default."""
import time

from tests.lib import apps
from tests.lib.cluster import grant_role, rolled_out, wait_until
from tests.lib.proc import check


def env_cm(value):
    return apps.configmap("env", {"GREETING": value})


def restarts(pod, container):
    for cs in pod["status"].get("containerStatuses", []):
        if cs["name"] == container:
            return cs.get("restartCount", 0)
    return None


def test_env_restart_in_place(env):
    env.c.ensure_webhook()
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v1")}))
    env.apply(env_cm("hello"))
    ann = apps.agent_annotations(action="signal", process="nginx", env_action="restart")
    env.apply(apps.nginx_workload("Deployment", "web", ann, env_from="env"))
    env.kubectl("rollout", "status", "deployment/web", "--timeout=180s", timeout=200)
    (pod,) = env.ready_pods("app=web")
    name = pod["metadata"]["name"]
    env.wait_agent_event(name, "ready", 60)
    check(env.exec(name, "nginx", "printenv", "GREETING").strip() == "hello", "GREETING is not hello")
    gen = env.get("deployment", "web")["metadata"]["generation"]
    r0 = restarts(pod, "nginx")

    t0 = time.monotonic()
    env.apply(env_cm("bonjour"))
    wait_until(lambda: (restarts(env.get("pod", name), "nginx") or 0) > r0, 240,
               "the nginx container to restart in place")
    env.log("env edit restarted the app in place after %.1f s" % (time.monotonic() - t0))
    env.kubectl("wait", "--for=condition=Ready", "pod/" + name, "--timeout=120s", timeout=130)
    check(env.exec(name, "nginx", "printenv", "GREETING").strip() == "bonjour",
          "printenv GREETING does not show the new value after the restart")
    check(env.get("pod", name)["metadata"].get("deletionTimestamp") is None, "the pod was replaced")
    check(env.get("deployment", "web")["metadata"]["generation"] == gen, "the Deployment was rolled")
    check(restarts(env.get("pod", name), "nginx") == r0 + 1, "more than one restart")


def test_env_default_rolls(env):
    env.c.ensure_webhook()
    grant_role(env)
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v1")}))
    env.apply(env_cm("hello"))
    ann = apps.agent_annotations(rollout_jitter="1s")  # action none; env-action rollout (default)
    env.apply(apps.nginx_workload("Deployment", "web", ann, env_from="env"))
    gen0 = env.get("deployment", "web")["metadata"]["generation"]
    wait_until(lambda: rolled_out(env, "Deployment", "web", gen0, 1), 240, "web ready")
    (pod,) = env.ready_pods("app=web")
    env.wait_agent_event(pod["metadata"]["name"], "ready", 60)

    t0 = time.monotonic()
    env.apply(env_cm("bonjour"))
    wait_until(lambda: rolled_out(env, "Deployment", "web", gen0 + 1, 1), 300, "web rolled once")
    env.log("env edit rolled the Deployment after %.1f s" % (time.monotonic() - t0))
    (pod,) = env.ready_pods("app=web")
    check(env.exec(pod["metadata"]["name"], "nginx", "printenv", "GREETING").strip() == "bonjour",
          "the new pod does not see the new value")


test_env_restart_in_place.timeout = test_env_default_rolls.timeout = 900
