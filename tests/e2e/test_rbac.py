"""Missing RBAC on the real apiserver: a rollout agent whose ServiceAccount
has no Role says, in its log, which verb on which resource was refused and
what to grant."""
import os

from tests.lib import apps
from tests.lib.cluster import REPO, wait_until
from tests.lib.proc import check


def test_missing_role_is_named(env):
    env.c.ensure_webhook()
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v1")}))
    ann = apps.agent_annotations(action="rollout")
    env.apply(apps.nginx_workload("Deployment", "web", ann))
    env.kubectl("rollout", "status", "deployment/web", "--timeout=180s", timeout=200)
    (pod,) = env.ready_pods("app=web")
    name = pod["metadata"]["name"]
    ev = env.wait_agent_event(name, "owner-error", 90)
    msg = ev.get("error", "")
    env.log("agent: %s" % ev.get("msg"))
    check('cannot get resource "pods"' in msg, "the error does not name the verb and resource: %r" % msg)
    fix = ("kubectl -n {ns} apply -f manifests/role.yaml && kubectl -n {ns} create rolebinding reload-agent "
           "--role=reload-agent --serviceaccount={ns}:default").format(ns=env.ns)
    check(fix in msg, "the error does not say what to grant (%r): %r" % (fix, msg))
    # What it says works: the agent then resolves its owner.
    env.kubectl("apply", "-f", os.path.join(REPO, "manifests/role.yaml"))
    env.kubectl("create", "rolebinding", "reload-agent", "--role=reload-agent",
                "--serviceaccount=%s:default" % env.ns)
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v2")}))
    wait_until(lambda: env.get("deployment", "web")["metadata"]["generation"] > 1, 240,
               "the rollout once the Role is bound")
