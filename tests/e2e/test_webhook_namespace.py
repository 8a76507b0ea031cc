"""Namespace-wide opt-in (issue 27 item 3, docs/webhook-install.md#namespace-wide-opt-in),
through the real apiserver and the webhook installed as the docs say: in a
namespace labelled reload-agent.io/inject=enabled a pod without the
annotation is injected (the second webhook entry's namespaceSelector: the
webhook reads no namespace), a pod annotated "false" is not, and before the
label nothing is."""
import json

from tests.lib import apps
from tests.lib.cluster import wait_until
from tests.lib.proc import check

LABEL = "reload-agent.io/inject"


def injected(pod):
    return any(c["name"] == "reload-agent" for c in pod["spec"].get("initContainers", []))


def dry_run_injected(env, name, annotations):
    """Whether a Pod created now (server-side dry run: admission runs, nothing
    is stored) would be injected."""
    out = env.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                      input=apps.nginx_workload("Pod", name, annotations))
    return injected(json.loads(out))


def test_webhook_namespace_wide(env):
    env.c.ensure_webhook()
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v1")}))
    quiet = {"reload-agent.io/log-format": "json"}  # no reload-agent.io/inject
    check(not dry_run_injected(env, "before", quiet),
          "a pod of a namespace without the label was injected")

    env.c.kubectl("label", "namespace", env.ns, LABEL + "=enabled")
    # the API server's namespace cache follows the label within moments
    wait_until(lambda: dry_run_injected(env, "probe", quiet), 30,
               "a dry-run pod of the labelled namespace to be injected")
    env.apply(apps.nginx_workload("Pod", "quiet", quiet))
    pod = env.get("pod", "quiet")
    check(injected(pod), "pod 'quiet' of the labelled namespace was not injected")
    check(pod["metadata"]["annotations"].get("reload-agent.io/inject-status"),
          "no reload-agent.io/inject-status on the injected pod")
    env.kubectl("wait", "--for=condition=Ready", "pod/quiet", "--timeout=120s", timeout=130)
    env.wait_agent_event("quiet", "ready", 60)

    env.apply(apps.nginx_workload("Pod", "out", dict(quiet, **{LABEL: "false"})))
    check(not injected(env.get("pod", "out")), "pod 'out' (inject: \"false\") was injected")
    env.apply(apps.nginx_workload("Pod", "asked", apps.agent_annotations(action="none")))
    asked = env.get("pod", "asked")
    check(injected(asked) and sum(c["name"] == "reload-agent"
                                  for c in asked["spec"]["initContainers"]) == 1,
          "pod 'asked' (inject: \"true\") should have exactly one sidecar")
    env.log("labelled namespace: quiet injected and ready, opt-out left alone, opt-in once")


test_webhook_namespace_wide.exclusive = True
