"""GitOps on the real cluster: manifests rendered by `reload-agent inject`
(which stamps the template with the rollout hash of the ConfigMap in the
same input) are applied with kubectl; a ConfigMap change applied with the
re-rendered manifests rolls the Deployment once, by its controller, and no
agent ever PATCHes (the apiserver's audit log is the oracle)."""
import os
import subprocess
import tempfile
import time

import apps
from lib import check, rollout_hash, wait_until
from test_rollout import grant_role, rolled_out

MANIFEST = """\
# a GitOps repository's file, as a user writes it
apiVersion: v1
kind: ConfigMap
metadata:
  name: app
data:
  app.conf: |
    {body}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
      annotations:
        reload-agent.io/inject: "true"
        reload-agent.io/action: rollout
        reload-agent.io/log-format: json
    spec:
      terminationGracePeriodSeconds: 5
      containers:
        - name: nginx
          image: {image}
          imagePullPolicy: Never
          volumeMounts:
            - name: app
              mountPath: /etc/app
      volumes:
        - name: app
          configMap:
            name: app
"""


def render(env, d, body):
    """Writes the repository file with body and renders it with inject."""
    src = os.path.join(d, "app.yaml")
    with open(src, "w") as f:
        f.write(MANIFEST.format(body=body, image=apps.NGINX_IMAGE))
    p = subprocess.run([env.c.binary, "inject", src], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=30)
    check(p.returncode == 0, "inject failed: %s" % p.stderr.decode())
    env.log("inject: " + p.stderr.decode().strip().replace("\n", "; "))
    return p.stdout.decode()


def agent_patches(env, since):
    return env.c.audit(since, lambda ev: (
        ev.get("verb") == "patch" and ev.get("objectRef", {}).get("namespace") == env.ns
        and ev.get("user", {}).get("username", "").startswith("system:serviceaccount:" + env.ns + ":")))


def test_gitops_stamp_rolls_without_agent_patch(env):
    env.c.ensure_webhook()
    grant_role(env)  # the agents could PATCH: the test shows they need not
    t_start = time.time()
    with tempfile.TemporaryDirectory() as d:
        out = render(env, d, "level=1")
        env.apply(out)
        gen0 = env.get("deployment", "web")["metadata"]["generation"]
        wait_until(lambda: rolled_out(env, "Deployment", "web", gen0, 2), 240, "web ready")
        stamp0 = env.get("deployment", "web")["spec"]["template"]["metadata"]["annotations"].get(
            "reload-agent.io/config-hash")
        check(stamp0 == rollout_hash({"/etc/app/app.conf": b"level=1\n"}),
              "the rendered stamp %r is not the docs/hash.md hash of the ConfigMap" % stamp0)
        for p in env.ready_pods("app=web"):
            env.wait_agent_event(p["metadata"]["name"], "ready", 60)

        t0 = time.time()
        env.apply(render(env, d, "level=2"))
    wait_until(lambda: rolled_out(env, "Deployment", "web", gen0 + 1, 2), 300,
               "the controller to roll web once")
    env.log("rolled by the controller %.1f s after the apply" % (time.time() - t0))
    stamp1 = env.get("deployment", "web")["spec"]["template"]["metadata"]["annotations"].get(
        "reload-agent.io/config-hash")
    check(stamp1 == rollout_hash({"/etc/app/app.conf": b"level=2\n"}), "new stamp %r" % stamp1)
    new = env.ready_pods("app=web")
    for p in new:
        env.wait_agent_event(p["metadata"]["name"], "ready", 60)
    # Long enough for any agent of the old pods still running to see the
    # kubelet's update (one sync period and its jitter) and the new pods'
    # startup reconcile.
    time.sleep(20)
    check(env.get("deployment", "web")["metadata"]["generation"] == gen0 + 1,
          "the template changed more than once")
    pat = agent_patches(env, t_start)
    check(not pat, "agents PATCHed: %r" % [(e["objectRef"], e["user"]["username"]) for e in pat])
    for p in new:
        evs = env.agent_events(p["metadata"]["name"])
        check(not [e for e in evs if e.get("event") == "rollout"],
              "an agent of the new pods rolled: %r" % evs)


test_gitops_stamp_rolls_without_agent_patch.timeout = 900
