"""The webhook installed as docs/webhook-install.md says, through the real
apiserver: an annotated pod is injected at creation, and with every webhook
replica down pods are still created (failurePolicy: Ignore), unchanged."""
import time

from tests.lib import apps
from tests.lib.cluster import wait_until
from tests.lib.proc import check


def injected(pod):
    return any(c["name"] == "reload-agent" for c in pod["spec"].get("initContainers", []))


def test_webhook_injects_and_fails_open(env):
    env.c.ensure_webhook()
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v1")}))
    ann = apps.agent_annotations(action="none")
    env.apply(apps.nginx_workload("Pod", "up", ann))
    pod = env.get("pod", "up")
    check(injected(pod), "the webhook did not inject pod 'up': %r" % pod["spec"].get("initContainers"))
    status = pod["metadata"]["annotations"].get("reload-agent.io/inject-status")
    check(status, "no reload-agent.io/inject-status on the injected pod")
    env.kubectl("wait", "--for=condition=Ready", "pod/up", "--timeout=120s", timeout=130)
    env.wait_agent_event("up", "ready", 60)

    # Every replica down: the API server cannot reach the webhook.
    wh = {"ns": "reload-agent"}
    try:
        env.c.kubectl("scale", "deployment/reload-agent-webhook", "--replicas=0", **wh)
        sel = "app.kubernetes.io/name=reload-agent-webhook"
        wait_until(lambda: env.c.kubectl("get", "pods", "-l", sel, "-o", "name", **wh).strip() == "", 120,
                   "the webhook's pods to be gone")
        t0 = time.monotonic()
        env.apply(apps.nginx_workload("Pod", "down", ann))
        dt = time.monotonic() - t0
        pod = env.get("pod", "down")
        check(not injected(pod), "pod 'down' was injected with the webhook down")
        env.log("pod created with the webhook down in %.1f s (timeoutSeconds 5)" % dt)
        env.kubectl("wait", "--for=condition=Ready", "pod/down", "--timeout=120s", timeout=130)
    finally:
        env.c.kubectl("scale", "deployment/reload-agent-webhook", "--replicas=2", **wh)
        env.c.kubectl("rollout", "status", "deployment/reload-agent-webhook", "--timeout=180s",
                      timeout=200, **wh)


test_webhook_injects_and_fails_open.exclusive = True
