"""rollout on the real controllers: a ConfigMap edit makes the agents of a
Deployment (3 replicas), a StatefulSet and a DaemonSet patch their owner's
pod template exactly once, with the docs/hash.md hash of the new content, and
the controller replaces the pods. The agents run as the workload's own
ServiceAccount with the Role docs/kubernetes.md tells users to bind."""
import time

from tests.lib import apps
from tests.lib.cluster import grant_role, rollout_hash, rolled_out, wait_until, needs
from tests.lib.proc import check

RESOURCE = {"Deployment": "deployments", "StatefulSet": "statefulsets", "DaemonSet": "daemonsets"}
MOUNT = "/etc/nginx/conf.d"


def patches_by_agents(env, kind, name, since):
    res = RESOURCE[kind]
    return env.c.audit(since, lambda ev: (
        ev.get("verb") == "patch" and ev.get("objectRef", {}).get("resource") == res
        and ev["objectRef"].get("namespace") == env.ns and ev["objectRef"].get("name") == name
        and ev.get("user", {}).get("username", "").startswith("system:serviceaccount:")))


def check_one_rollout(env, kind, replicas):
    env.c.ensure_webhook()
    grant_role(env)
    name = "web"
    ann = apps.agent_annotations(action="rollout", rollout_jitter="2s")
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v1")}))
    env.apply(apps.nginx_workload(kind, name, ann, replicas=replicas))
    gen0 = env.get(kind.lower(), name)["metadata"]["generation"]
    wait_until(lambda: rolled_out(env, kind, name, gen0, replicas), 240, "%s/%s ready" % (kind, name))
    pods = env.ready_pods("app=" + name)
    for p in pods:
        env.wait_agent_event(p["metadata"]["name"], "ready", 60)

    t0 = time.time()
    new = apps.site_conf("v2")
    env.apply(apps.configmap("site", {"site.conf": new}))
    wait_until(lambda: env.get(kind.lower(), name)["metadata"]["generation"] == gen0 + 1, 240,
               "one template change of %s/%s" % (kind, name))
    env.log("%s/%s template changed %.1f s after the edit" % (kind, name, time.time() - t0))
    tmpl = env.get(kind.lower(), name)["spec"]["template"]["metadata"]["annotations"]
    want = rollout_hash({MOUNT + "/site.conf": new.encode()})
    check(tmpl.get("reload-agent.io/config-hash") == want,
          "template hash %r, docs/hash.md hash of the new content %r" % (tmpl.get("reload-agent.io/config-hash"), want))
    wait_until(lambda: rolled_out(env, kind, name, gen0 + 1, replicas), 300,
               "the new pods of %s/%s to be ready" % (kind, name))
    env.log("%s/%s rolled out %.1f s after the edit" % (kind, name, time.time() - t0))
    # The new pods' agents find the template current: nothing more happens.
    new_pods = env.ready_pods("app=" + name)
    for p in new_pods:
        env.wait_agent_event(p["metadata"]["name"], "ready", 60)
    time.sleep(15)
    check(env.get(kind.lower(), name)["metadata"]["generation"] == gen0 + 1,
          "the template changed again after the rollout")
    # Replicas racing inside one round trip may both PATCH the same hash;
    # the template still changes once (checked above).
    n = len(patches_by_agents(env, kind, name, t0))
    check(1 <= n <= replicas, "%d PATCHes of %s/%s by agents in the audit log" % (n, kind, name))
    env.log("%d PATCH(es) by agents" % n)


def test_rollout_deployment(env):
    check_one_rollout(env, "Deployment", 3)


def test_rollout_statefulset(env):
    check_one_rollout(env, "StatefulSet", 2)


def test_rollout_daemonset(env):
    check_one_rollout(env, "DaemonSet", 1)


test_rollout_deployment.timeout = test_rollout_statefulset.timeout = test_rollout_daemonset.timeout = 900


needs(core=True)(test_rollout_deployment)  # E2E_CORE=1 runs it
