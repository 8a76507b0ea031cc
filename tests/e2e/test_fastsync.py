"""Fast sync on the real cluster (issue 18): the agent watches its pod's
ConfigMaps and Secrets (metadata only, one watch per object, authorized by
RBAC resourceNames) and, on a change, patches the annotation
reload-agent.io/sync of its own pod, so the kubelet refreshes the volume at
once instead of at its periodic sync. The policy in
manifests/fast-sync/policy.yaml makes that patch self-only; its tests use
the very token the kubelet mounts into the pod. No timing is asserted: the
times are logged, and measured in `make bench-cluster` (tests/loadtest/propagation.py).

Set up as a user would (issue 18 item 4): the main scenario applies what
`reload-agent inject` writes (the Deployment with its sidecar's fast-sync
flags, the Role with resourceNames, the RoleBinding); the webhook scenarios
apply what `reload-agent inject -o rbac` prints for the workload, the
per-workload objects a webhook user applies (docs/fast-sync.md). The
policy is applied once per cluster, as documented.
"""
import json
import re
import os
import subprocess
import time

from tests.lib import apps
from tests.lib.cluster import REPO, http_text, wait_until, needs
from tests.lib.proc import TestFailure, check

SYNC_KEY = "reload-agent.io/sync"
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def apply_policy(env):
    """The policy, once per cluster (idempotent)."""
    env.c.kubectl("apply", "-f", os.path.join(REPO, "manifests/fast-sync/policy.yaml"))


def inject_cli(env, workload, *args):
    """`reload-agent inject ARGS -` on the workload (JSON), put in the
    test's namespace as a repository would name it; returns stdout and
    the report."""
    obj = json.loads(workload)
    obj["metadata"]["namespace"] = env.ns
    p = subprocess.run([env.c.binary, "inject"] + list(args) + ["-"], input=json.dumps(obj).encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    if p.returncode != 0:
        raise TestFailure("reload-agent inject %s: %s" % (" ".join(args), p.stderr.decode()))
    env.log("inject %s: %s" % (" ".join(args), p.stderr.decode().strip().replace("\n", "; ")))
    return p.stdout.decode(), p.stderr.decode()


def web_workload(extra_ann=None, cm="site", **kw):
    ann = apps.agent_annotations(action="signal", process="nginx", fast_sync="true")
    ann.update(extra_ann or {})
    return apps.nginx_workload("Deployment", "web", ann, cm=cm, **kw)


def webhook_rbac(env, workload):
    """What a webhook user applies for a workload: the policy once per
    cluster, and the Role and RoleBinding `inject -o rbac` prints."""
    apply_policy(env)
    out, _ = inject_cli(env, workload, "-o", "rbac")
    check("kind: Role" in out and "kind: RoleBinding" in out, "inject -o rbac printed %r" % out)
    env.apply(out)


def hand_rbac(env, configmaps=(), secrets=(), sa="default"):
    """The policy and a Role with resourceNames of exactly these objects,
    bound to sa, written by hand (for the agent without the opt-in, which
    the injector gives no Role)."""
    apply_policy(env)
    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch"]},
             {"apiGroups": ["reload-agent.io"], "resources": ["fastsync"], "verbs": ["nudge"]}]
    if configmaps:
        rules.append({"apiGroups": [""], "resources": ["configmaps"],
                      "resourceNames": list(configmaps), "verbs": ["get", "list", "watch"]})
    if secrets:
        rules.append({"apiGroups": [""], "resources": ["secrets"],
                      "resourceNames": list(secrets), "verbs": ["get", "list", "watch"]})
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "reload-agent-fast-sync"}, "rules": rules}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "reload-agent-fast-sync"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                           "name": "reload-agent-fast-sync"},
               "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": env.ns}]}
    env.apply(json.dumps(role))
    env.apply(json.dumps(binding))


def served(ip):
    st, body = http_text("http://%s:%d/" % (ip, apps.PORT), timeout=1.0)
    return body.strip() if st == 200 else None


def start_web(env, extra_ann=None, cm="site", rbac=True, **kw):
    """The web Deployment, injected by the webhook, with the objects a
    webhook user applies for it (rbac)."""
    workload = web_workload(extra_ann, cm=cm, **kw)
    if rbac:
        webhook_rbac(env, workload)
    env.apply(workload)
    return wait_web(env)


def wait_web(env):
    env.kubectl("rollout", "status", "deployment/web", "--timeout=180s", timeout=200)
    pod = sorted(env.ready_pods("app=web"), key=lambda p: p["metadata"]["name"])[0]
    return pod["metadata"]["name"], pod["status"]["podIP"]


def token_kubectl(env, token, *args, check_rc=False):
    """kubectl as the holder of token (no kubeconfig credentials)."""
    with open(env.c.kubeconfig) as f:
        cfg = f.read()
    server = next(l.split()[1] for l in cfg.splitlines() if l.strip().startswith("server:"))
    ca = next(l.split()[1] for l in cfg.splitlines()
              if l.strip().startswith("certificate-authority:"))
    cmd = [env.c.kubectl_bin, "--kubeconfig", "/dev/null", "--server", server,
           "--certificate-authority", ca, "--token", token, "-n", env.ns] + list(args)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    out = (p.stdout + p.stderr).decode("utf-8", "replace").strip()
    if check_rc and p.returncode != 0:
        raise TestFailure("kubectl %s as the token: %s" % (" ".join(args), out))
    return p.returncode, out


def sync_patches(env, since, pod):
    """The audit log's PATCHes of pod by the namespace's default ServiceAccount."""
    user = "system:serviceaccount:%s:default" % env.ns
    return env.c.audit(since, lambda e: e.get("verb") == "patch" and
                       e.get("user", {}).get("username") == user and
                       (e.get("objectRef") or {}).get("resource") == "pods" and
                       (e.get("objectRef") or {}).get("name") == pod and
                       (e.get("objectRef") or {}).get("namespace") == env.ns)


def test_fast_sync_reloads_nginx(env):
    """Three edits of a ConfigMap reach nginx through the nudge: the agent
    logs fast-sync-synced for each new resourceVersion, the pod's annotation
    carries it, the audit log shows the agent's own patches of its pod,
    nothing restarts and the Deployment is not rolled. Set up by the CLI:
    `reload-agent inject` of the Deployment, applied as it comes out, and
    the policy once per cluster; nothing written by hand. (The webhook
    runs too, as it may in a cluster: it leaves the injected pod as it is.)"""
    env.c.ensure_webhook()
    apply_policy(env)
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v0")}))
    out, report = inject_cli(env, web_workload())
    check("role/reload-agent-fast-sync-deployment-web written" in report, "report: %s" % report)
    env.apply(out)
    role = env.get("role", "reload-agent-fast-sync-deployment-web")
    names = [r.get("resourceNames") for r in role["rules"] if "configmaps" in r["resources"]]
    check(names == [["site"]], "the Role names %r" % names)
    check(not [r for r in role["rules"] if "secrets" in r["resources"]], "the Role grants secrets")
    name, ip = wait_web(env)
    side = [c for c in env.get("pod", name)["spec"]["initContainers"] if c["name"] == "reload-agent"]
    check(len(side) == 1 and "--fast-sync-objects=configmap/site" in side[0]["args"],
          "sidecars %r" % side)
    env.wait_agent_event(name, "fast-sync-start", 60)
    ev = env.wait_agent_event(name, "fast-sync-start", 5)
    check(ev.get("objects") == ["configmap/site"], "fast sync watches %r" % ev.get("objects"))
    check(served(ip) == "v0", "nginx does not serve v0: %r" % served(ip))
    pid = env.exec(name, "nginx", "cat", "/run/nginx.pid").strip()
    gen = env.get("deployment", "web")["metadata"]["generation"]
    t_start = time.time()
    for i in range(1, 4):
        body = "v%d" % i
        t0 = time.monotonic()
        env.apply(apps.configmap("site", {"site.conf": apps.site_conf(body)}))
        rv = env.get("configmap", "site")["metadata"]["resourceVersion"]
        wait_until(lambda: served(ip) == body, 120, "nginx to serve " + body, interval=0.05)
        env.log("edit %d (resourceVersion %s): served after %.2f s" % (i, rv, time.monotonic() - t0))
        synced = env.wait_agent_event(name, "fast-sync-synced", 60,
                                      pred=lambda e: e.get("resource_version") == rv)
        env.log("  agent: %s" % synced.get("msg"))
        ann = env.get("pod", name)["metadata"].get("annotations", {})
        check(ann.get(SYNC_KEY, "").split(".")[0] == rv,
              "the pod's %s is %r, not the ConfigMap's resourceVersion %s" % (SYNC_KEY, ann.get(SYNC_KEY), rv))
    patches = wait_until(lambda: sync_patches(env, t_start, name), 30, "the nudges in the audit log")
    env.log("audit: %d patches of pod %s by the agent's ServiceAccount" % (len(patches), name))
    for e in patches:
        check(e.get("responseStatus", {}).get("code") in (200, None),
              "a nudge was refused: %r" % e.get("responseStatus"))
    check(env.exec(name, "nginx", "cat", "/run/nginx.pid").strip() == pid,
          "nginx's master PID changed: it was restarted, not reloaded")
    pod = env.get("pod", name)
    for cs in pod["status"].get("containerStatuses", []) + pod["status"].get("initContainerStatuses", []):
        check(cs.get("restartCount", 0) == 0, "container %s restarted" % cs["name"])
    check(env.get("deployment", "web")["metadata"]["generation"] == gen, "the Deployment was rolled")


def test_fast_sync_policy_self_only(env):
    """The token the kubelet mounts into the pod (read from the app
    container, the same projected token the sidecar reads) may set its own
    pod's reload-agent.io/sync and nothing else: not another pod, not its
    own image, not another annotation, not a label. A ServiceAccount without
    the fast-sync Role is not restricted by the policy."""
    env.c.ensure_webhook()
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v0")}))
    name, _ = start_web(env, replicas=2)
    pods = [p["metadata"]["name"] for p in env.ready_pods("app=web")]
    check(len(pods) == 2, "want 2 ready pods: %r" % pods)
    other = [p for p in pods if p != name][0]
    token = env.exec(name, "nginx", "cat", TOKEN_PATH).strip()
    rc, out = token_kubectl(env, token, "patch", "pod", name, "--type=merge",
                            "-p", json.dumps({"metadata": {"annotations": {SYNC_KEY: "test-1"}}}))
    check(rc == 0, "the token cannot set its own pod's %s: %s" % (SYNC_KEY, out))
    denials = [
        ("another pod", ["patch", "pod", other, "--type=merge", "-p",
                         json.dumps({"metadata": {"annotations": {SYNC_KEY: "test-2"}}})],
         "may change only its own pod"),
        ("its own image", ["patch", "pod", name, "--type=json", "-p", json.dumps(
            [{"op": "replace", "path": "/spec/containers/0/image", "value": "localhost/evil:1"}])],
         "spec may not change"),
        ("another annotation", ["patch", "pod", name, "--type=merge", "-p",
                                json.dumps({"metadata": {"annotations": {"example.com/x": "1"}}})],
         "only the annotation reload-agent.io/sync"),
        ("a label", ["patch", "pod", name, "--type=merge", "-p",
                     json.dumps({"metadata": {"labels": {"app": "evil"}}})],
         "labels, finalizers and ownerReferences"),
        ("an annotation it removes", ["annotate", "pod", name, "reload-agent.io/inject-"],
         "only the annotation reload-agent.io/sync"),
    ]
    for what, args, want in denials:
        rc, out = token_kubectl(env, token, *args)
        env.log("%s: %s" % (what, out))
        check(rc != 0 and "reload-agent-fast-sync" in out and want in out,
              "patching %s with the agent's token was not denied by the policy: %s" % (what, out))
    pod = env.get("pod", name)
    check(pod["spec"]["containers"][0]["image"] == apps.NGINX_IMAGE, "the image changed")
    check(pod["metadata"]["labels"].get("app") == "web", "the label changed")
    # A ServiceAccount that may patch pods but holds no fast-sync Role: untouched.
    env.kubectl("create", "serviceaccount", "plain")
    env.kubectl("create", "role", "patcher", "--verb=get,patch", "--resource=pods")
    env.kubectl("create", "rolebinding", "patcher", "--role=patcher",
                "--serviceaccount=%s:plain" % env.ns)
    plain = env.kubectl("create", "token", "plain").strip()
    rc, out = token_kubectl(env, plain, "patch", "pod", other, "--type=merge", "-p",
                            json.dumps({"metadata": {"annotations": {"example.com/y": "1"}}}))
    check(rc == 0, "the policy restricted a ServiceAccount without the fast-sync Role: %s" % out)


def test_fast_sync_rbac_resource_names(env):
    """RBAC resourceNames authorize the agent's list and watch because they
    name the object in fieldSelector=metadata.name=NAME; the same token
    cannot list the namespace's ConfigMaps, nor another one by name, and
    the metadata-only list carries no data."""
    env.c.ensure_webhook()
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v0")}))
    env.apply(apps.configmap("other", {"k": "v"}))
    name, _ = start_web(env)
    token = env.exec(name, "nginx", "cat", TOKEN_PATH).strip()
    base = "/api/v1/namespaces/%s/configmaps" % env.ns
    rc, out = token_kubectl(env, token, "get", "--raw", base + "?fieldSelector=metadata.name%3Dsite")
    check(rc == 0 and '"site"' in out, "the named list was refused: %s" % out)
    rc, out = token_kubectl(env, token, "get", "--raw", base + "?fieldSelector=metadata.name%3Dsite"
                            "&watch=1&timeoutSeconds=1")
    check(rc == 0, "the named watch was refused: %s" % out)
    for q in ("", "?fieldSelector=metadata.name%3Dother"):
        rc, out = token_kubectl(env, token, "get", "--raw", base + q)
        check(rc != 0 and "forbidden" in out.lower(), "listing %r was allowed: %s" % (q, out[:300]))
    ev = env.wait_agent_event(name, "fast-sync-start", 60)
    check(ev.get("objects") == ["configmap/site"], "fast sync watches %r" % ev.get("objects"))
    check(not [e for e in env.agent_events(name) if e.get("event") == "fast-sync-error"],
          "the agent reported fast-sync errors: %r" % [e.get("msg") for e in env.agent_events(name)
                                                        if e.get("event") == "fast-sync-error"])


def test_fast_sync_secret(env):
    """A Secret mounted by the pod is watched by name too; an edit reaches
    the volume through the nudge, and the agent never logs its value."""
    env.c.ensure_webhook()
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v0")}))
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
              "stringData": {"password": "s3cr3t-value-0"}}
    env.apply(json.dumps(secret))
    vol = {"name": "creds", "secret": {"secretName": "creds"}}
    mount = {"name": "creds", "mountPath": "/etc/creds"}
    name, _ = start_web(env, extra_volumes=[vol], extra_mounts=[mount])
    ev = env.wait_agent_event(name, "fast-sync-start", 60)
    check(sorted(ev.get("objects", [])) == ["configmap/site", "secret/creds"],
          "fast sync watches %r" % ev.get("objects"))
    secret["stringData"]["password"] = "s3cr3t-value-1"
    t0 = time.monotonic()
    env.apply(json.dumps(secret))
    rv = env.get("secret", "creds")["metadata"]["resourceVersion"]
    env.wait_agent_event(name, "fast-sync-synced", 120, pred=lambda e: e.get("resource_version") == rv)
    wait_until(lambda: env.exec(name, "nginx", "cat", "/etc/creds/password").strip() == "s3cr3t-value-1",
               30, "the new Secret in the volume")
    env.log("Secret edit in the volume after %.2f s" % (time.monotonic() - t0))
    log = env.agent_log(name)
    check("s3cr3t-value" not in log, "the agent logged the Secret's value")


def test_fast_sync_off_by_default(env):
    """Without the opt-in the agent neither watches nor patches its pod
    (even with a Role that would let it), and the injector writes no Role."""
    env.c.ensure_webhook()
    hand_rbac(env, configmaps=["site"])
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v0")}))
    off = {"reload-agent.io/fast-sync": "false"}
    out, _ = inject_cli(env, web_workload(off), "-o", "rbac")
    check(out == "", "inject -o rbac without the opt-in printed %r" % out)
    t0 = time.time()
    name, ip = start_web(env, extra_ann=off, rbac=False)
    env.wait_agent_event(name, "ready", 60)
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v1")}))
    time.sleep(5)
    check(not [e for e in env.agent_events(name) if e.get("event", "").startswith("fast-sync")],
          "fast-sync events without the opt-in")
    user = "system:serviceaccount:%s:default" % env.ns
    mine = env.c.audit(t0, lambda e: e.get("user", {}).get("username") == user and
                       e.get("verb") in ("list", "watch", "patch"))
    check(not mine, "the agent listed, watched or patched without the opt-in: %r" % [
        (e.get("verb"), e.get("requestURI")) for e in mine])
    # the cluster sync service (on by default) may nudge it: KIND/NAME@RV, never the agent's bare RV
    ann = env.get("pod", name)["metadata"].get("annotations", {})
    check(SYNC_KEY not in ann or re.match(r"^(configmap|secret)/[a-z0-9.-]+@[0-9]+$", ann[SYNC_KEY]),
          "the pod has %s=%r without the opt-in, not the sync service's" % (SYNC_KEY, ann.get(SYNC_KEY)))


def test_fast_sync_metadata_edit_falls_back(env):
    """An edit of a ConfigMap's labels only changes its resourceVersion, not
    the bytes the kubelet writes: the agent nudges, sees no content change,
    nudges again with a new value each time (4 in all), then says it falls
    back to the kubelet's periodic sync. Its nudges are the only pod
    patches in the audit log."""
    env.c.ensure_webhook()
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v0")}))
    name, ip = start_web(env, extra_ann={"reload-agent.io/fast-sync-confirm": "200ms",
                                         "reload-agent.io/log-level": "debug"})
    env.wait_agent_event(name, "fast-sync-start", 60)
    t0 = time.time()
    env.kubectl("label", "configmap", "site", "edited=yes")
    rv = env.get("configmap", "site")["metadata"]["resourceVersion"]
    ev = env.wait_agent_event(name, "fast-sync-fallback", 60,
                              pred=lambda e: e.get("resource_version") == rv)
    env.log("agent: %s" % ev.get("msg"))
    check(ev.get("nudges") == 4, "fell back after %r nudges" % ev.get("nudges"))
    values = [e.get("value") for e in env.agent_events(name) if e.get("event") == "fast-sync-nudge"]
    check(values == [rv, rv + ".2", rv + ".3", rv + ".4"], "nudge values %r" % values)
    patches = wait_until(lambda: (lambda p: p if len(p) >= 4 else None)(sync_patches(env, t0, name)),
                         30, "4 nudges in the audit log")
    check(len(patches) == 4, "%d pod patches in the audit log" % len(patches))
    check(served(ip) == "v0", "nginx does not serve v0 any more: %r" % served(ip))


needs(core=True)(test_fast_sync_reloads_nginx)  # E2E_CORE=1 runs it
