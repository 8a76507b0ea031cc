"""The webhook installed as docs/webhook-install.md says, through the real
apiserver: an annotated pod is injected at creation, and with every webhook
replica down pods are still created (failurePolicy: Ignore), unchanged.
With no --kube-version flag it reads the cluster's version from the API
server (GET /version, with its pods' ServiceAccount token and no Role)."""
import time

from tests.lib import apps
from tests.lib.cluster import needs, wait_until
from tests.lib.proc import check

WEBHOOK_SELECTOR = "app.kubernetes.io/name=reload-agent-webhook"


def webhook_logs(c):
    """The logs of every webhook replica, joined."""
    out = c.kubectl("logs", "-l", WEBHOOK_SELECTOR, "--tail=-1", "--prefix", ns="reload-agent",
                    timeout=60)
    return out


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


def test_webhook_reads_the_cluster_version(env):
    """Each replica logs the version it read from the API server, which is
    the cluster's (no flag; no Role binds its ServiceAccount), and is ready."""
    env.c.ensure_webhook()
    want = "Kubernetes 1.%d in force for injection (the API server says %s)" % (
        env.c.minor, env.c.version)
    pods = [p for p in env.c.get("pods", ns="reload-agent")["items"]
            if p["metadata"].get("labels", {}).get("app.kubernetes.io/name") ==
            "reload-agent-webhook" and not p["metadata"].get("deletionTimestamp")]
    names = [p["metadata"]["name"] for p in pods]
    check(len(names) == 2, "webhook pods %r" % names)
    wait_until(lambda: all(want in env.c.kubectl("logs", n, ns="reload-agent") for n in names), 60,
               "every webhook replica to log %r" % want)
    logs = webhook_logs(env.c)
    check("cannot read the API server's version" not in logs, "a lookup failed: %s" % logs[-2000:])
    for p in pods:
        spec = p["spec"]
        check(spec.get("automountServiceAccountToken") is True, "the webhook pod mounts no token")
    env.log("the webhook read %s from the API server with no flag" % env.c.version)


needs(core=True)(test_webhook_injects_and_fails_open)
needs(core=True)(test_webhook_reads_the_cluster_version)
