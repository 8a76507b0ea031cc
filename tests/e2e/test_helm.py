"""The Helm chart (charts/reload-agent) on the real cluster, with the helm
tests/cluster/build.sh built (up.sh's HELM=), as docs/kubernetes.md "Install" says.

Exclusive: it first removes the kustomize-installed webhook (two webhooks
would both answer), and puts it back at the end when it was there.

- `helm install --wait` into a namespace of its own labelled PodSecurity
  `restricted`: the certs hook Jobs made the Secret before the Deployment
  (else --wait could not finish) and wrote its CA into caBundle, then were
  deleted with their RBAC; an annotated pod is injected and becomes Ready; a
  pod in the webhook's own namespace is not sent to it; the rbac.namespaces
  Role lets the workload's ServiceAccount patch Deployments.
- Renewal as docs/webhook-install.md says (delete the Secret, `helm
  upgrade`) while pods are created, one a second: a new CA in the Secret,
  caBundle the new CA then the previous one; until both webhook pods have
  reloaded the new certificate (their Secret volume refreshed) every pod
  created is injected: no call failed TLS.
- `helm upgrade` to other values (failurePolicy Fail, another sidecar image
  reference, a log level: the Deployment rolls) while pods are created, one
  a second: with Fail, any moment without a serving webhook would refuse a
  pod; every one is created and injected. caBundle and the Secret are the
  same after; new pods get the new sidecar image.
- `helm uninstall --wait`, pods still being created (policy Fail until the
  configuration is gone): every one is created; then nothing of the release
  is left: no MutatingWebhookConfiguration, no Secret (the TLS one included),
  no Job, ServiceAccount, Role, ClusterRole, pod; the Role binding is gone.
"""
import base64
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

from tests.e2e import test_sync
from tests.lib import apps
from tests.lib.cluster import REPO, wait_until
from tests.lib.proc import TestFailure, check

RELEASE = "reload-agent"
CHART = os.path.join(REPO, "charts", "reload-agent")
KUSTOMIZE_SET = os.path.join(REPO, "manifests", "webhook", "certgen")
SIDECAR = "reload-agent"
NEW_SIDECAR_IMAGE = "docker.io/library/reload-agent:0.1.0"  # the same image, another reference
NEVER = {"e2e.reload-agent.io/never": "true"}  # no node has it: the pod stays Pending


def sidecar_image(pod):
    for c in pod["spec"].get("initContainers", []):
        if c["name"] == SIDECAR:
            return c["image"]
    return None


def pending_pod(annotations):
    """An annotated pod that passes PodSecurity restricted and is never
    scheduled: admission is all it costs."""
    sc = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "probe-", "annotations": dict(annotations)},
        "spec": {"nodeSelector": NEVER,
                 "securityContext": {"runAsNonRoot": True, "runAsUser": 65532,
                                     "seccompProfile": {"type": "RuntimeDefault"}},
                 "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10.2",
                                 "volumeMounts": [{"name": "site", "mountPath": "/etc/site"}],
                                 "securityContext": sc}],
                 "volumes": [{"name": "site", "configMap": {"name": "site"}}]}})


class Helm:
    def __init__(self, cluster, home):
        self.c = cluster
        self.bin = cluster.env.get("HELM", "")
        check(self.bin and os.access(self.bin, os.X_OK), "tests/cluster/up.sh printed no usable HELM= (%r)" % self.bin)
        self.env = dict(os.environ, HELM_CACHE_HOME=os.path.join(home, "cache"),
                        HELM_CONFIG_HOME=os.path.join(home, "config"), HELM_DATA_HOME=os.path.join(home, "data"))

    def __call__(self, *args, timeout=420, check_rc=True):
        cmd = [self.bin, "--kubeconfig", self.c.kubeconfig] + list(args)
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, env=self.env)
        except subprocess.TimeoutExpired:
            raise TestFailure("helm %s: no answer in %d s" % (" ".join(args), timeout))
        out, err = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
        if check_rc and p.returncode != 0:
            raise TestFailure("helm %s: exit %d: %s %s" % (" ".join(args), p.returncode, out.strip(), err.strip()))
        return out if check_rc else (p.returncode, out, err)


class PodStream:
    """Creates an annotated pending pod every interval seconds (plus the
    create's own time) in a thread, until stop() (at most limit pods): each
    create's result is recorded."""

    def __init__(self, env, interval=1.0, limit=240):
        self.env, self.interval, self.limit = env, interval, limit
        self.results = []  # (seconds since start, rc, pod or stderr)
        self.done = threading.Event()
        self.t0 = time.monotonic()
        self.th = threading.Thread(target=self.run, daemon=True)
        self.th.start()

    def run(self):
        ann = apps.agent_annotations(action="none")
        while not self.done.is_set() and len(self.results) < self.limit:
            rc, out, err = self.env.kubectl("create", "-f", "-", "-o", "json", input=pending_pod(ann),
                                            check=False, timeout=30)
            self.results.append((time.monotonic() - self.t0, rc, json.loads(out) if rc == 0 else err.strip()))
            self.done.wait(self.interval)

    def stop(self):
        self.done.set()
        self.th.join(60)
        check(not self.th.is_alive(), "the pod stream did not stop")
        return self.results


def pem_certs(b64):
    """The certificates of a base64 caBundle, each as its PEM block."""
    text = base64.b64decode(b64).decode()
    end = "-----END CERTIFICATE-----"
    return [b.strip() + "\n" + end + "\n" for b in text.split(end) if b.strip()]


def refused(results):
    return ["%.1fs: %s" % (t, r) for t, rc, r in results if rc != 0]


def leftovers(c, ns):
    """What is left in namespace ns besides what every namespace has."""
    out = []
    for kind in ("deployments", "replicasets", "pods", "services", "jobs", "poddisruptionbudgets", "roles",
                 "rolebindings", "secrets", "configmaps", "serviceaccounts"):
        for o in c.get(kind, ns=ns)["items"]:
            name = o["metadata"]["name"]
            if (kind, name) in (("configmaps", "kube-root-ca.crt"), ("serviceaccounts", "default")):
                continue
            out.append("%s/%s" % (kind, name))
    return out


def test_helm_install_upgrade_uninstall(env):
    c = env.c
    wh = env.ns + "-wh"
    home = tempfile.mkdtemp(prefix="e2e-helm-")
    helm = Helm(c, home)
    mwc = c.get("mutatingwebhookconfiguration", RELEASE, check=False)
    had_kustomize = mwc is not None and mwc["metadata"].get("labels", {}).get(
        "app.kubernetes.io/managed-by") != "Helm"
    installed = False
    try:
        c.webhook_ready = False
        c.kubectl("delete", "-k", KUSTOMIZE_SET, "--ignore-not-found", "--wait=true", timeout=300)
        check(c.get("mutatingwebhookconfiguration", RELEASE, check=False) is None,
              "the kustomize webhook's configuration is still there")
        env.log("kustomize webhook removed (it was %s)" % ("installed" if had_kustomize else "absent"))

        # ---- install ----
        c.kubectl("create", "namespace", wh)
        c.kubectl("label", "namespace", wh, "pod-security.kubernetes.io/enforce=restricted")
        env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v1")}))
        t0 = time.monotonic()
        installed = True
        helm("install", RELEASE, CHART, "-n", wh, "--create-namespace", "--wait", "--timeout", "5m",
             "--set", "rbac.namespaces[0].namespace=" + env.ns,
             "--set", "rbac.namespaces[0].serviceAccounts[0]=default")
        env.log("helm install --wait: %.1f s" % (time.monotonic() - t0))
        rel = json.loads(helm("list", "-n", wh, "-o", "json"))
        check([r["status"] for r in rel if r["name"] == RELEASE] == ["deployed"], "release not deployed: %r" % rel)
        dep = c.get("deployment", "reload-agent-webhook", ns=wh)
        check(dep["status"].get("readyReplicas") == 2, "webhook replicas not ready: %r" % dep["status"])
        secret = c.get("secret", "reload-agent-webhook-tls", ns=wh)
        check(secret["type"] == "kubernetes.io/tls", "Secret type %r" % secret["type"])
        cfg = c.get("mutatingwebhookconfiguration", RELEASE)
        ca = cfg["webhooks"][0]["clientConfig"].get("caBundle")
        check(ca and ca == secret["data"]["ca.crt"], "caBundle is not the Secret's ca.crt")
        excluded = cfg["webhooks"][0]["namespaceSelector"]["matchExpressions"][0]["values"]
        check(excluded == ["kube-system", wh], "namespaceSelector excludes %r" % excluded)
        want = {"deployments/reload-agent-webhook", "deployments/reload-agent-sync",
                "services/reload-agent-webhook", "poddisruptionbudgets/reload-agent-webhook",
                "roles/reload-agent-sync-lease", "rolebindings/reload-agent-sync-lease",
                "secrets/reload-agent-webhook-tls", "secrets/sh.helm.release.v1.reload-agent.v1",
                "serviceaccounts/reload-agent-webhook", "serviceaccounts/reload-agent-sync"}
        want |= {"replicasets/" + r["metadata"]["name"] for r in c.get("replicasets", ns=wh)["items"]}
        want |= {"pods/" + p["metadata"]["name"] for p in c.get("pods", ns=wh)["items"]}
        check(set(leftovers(c, wh)) == want,
              "after install, %s holds more or less than the release (hooks left?): %r" % (wh, leftovers(c, wh)))
        for kind in ("clusterrole", "clusterrolebinding"):
            check(c.get(kind, "reload-agent-webhook-certs", check=False) is None,
                  "the certs hook's %s is still there" % kind)

        env.apply(apps.nginx_workload("Pod", "up", apps.agent_annotations(action="none")))
        pod = env.get("pod", "up")
        check(sidecar_image(pod) == "reload-agent:0.1.0", "pod 'up' not injected: %r" % pod["spec"].get(
            "initContainers"))
        env.kubectl("wait", "--for=condition=Ready", "pod/up", "--timeout=120s", timeout=130)
        env.wait_agent_event("up", "ready", 60)
        rc, out, err = c.kubectl("create", "-f", "-", "-o", "json", ns=wh, check=False,
                                 input=pending_pod(apps.agent_annotations(action="none")))
        check(rc == 0, "a pod in the webhook's namespace was refused: %s" % err)
        check(sidecar_image(json.loads(out)) is None, "a pod in the webhook's own namespace was injected")
        c.kubectl("delete", "pods", "-l", "!app.kubernetes.io/name", "--wait=false", ns=wh)
        # fast by default: the chart's sync service nudges the pods of an edit
        c.kubectl("rollout", "status", "deployment/reload-agent-sync", "--timeout=120s", ns=wh, timeout=130)
        ips = test_sync.web(env, ensure_webhook=False, svc_ns=wh)
        lat = test_sync.edit(env, ips, "v1", "an edit with the chart's defaults",
                             user="system:serviceaccount:%s:reload-agent-sync" % wh)
        env.log("helm install defaults + the one annotation: apply -> every replica serving in max %.2f s"
                % max(lat))
        env.kubectl("delete", "deployment", "web", "--wait=false")
        can = c.kubectl("auth", "can-i", "patch", "deployments", "--as",
                        "system:serviceaccount:%s:default" % env.ns, ns=env.ns, check=False)[1].strip()
        check(can == "yes", "rbac.namespaces: the default ServiceAccount cannot patch deployments (%r)" % can)

        # ---- renewal as docs/webhook-install.md says: delete the Secret, upgrade; pods created all along ----
        webhook_pods = [p["metadata"]["name"] for p in c.get("pods", ns=wh)["items"]
                        if p["metadata"].get("labels", {}).get("app.kubernetes.io/name") == "reload-agent-webhook"]
        stream = PodStream(env)
        c.kubectl("delete", "secret", "reload-agent-webhook-tls", ns=wh)
        t0 = time.monotonic()
        helm("upgrade", RELEASE, CHART, "-n", wh, "--wait", "--timeout", "5m", "--reuse-values")
        secret = c.get("secret", "reload-agent-webhook-tls", ns=wh)
        check(secret["data"]["ca.crt"] != ca, "the renewal upgrade did not make a new CA")
        bundle = c.get("mutatingwebhookconfiguration", RELEASE)["webhooks"][0]["clientConfig"].get("caBundle")
        check(pem_certs(bundle) == pem_certs(secret["data"]["ca.crt"]) + pem_certs(ca),
              "after the renewal, caBundle is not the new CA then the previous one")
        ca = bundle

        def reloaded():
            return all("certificate reloaded" in c.kubectl("logs", p, ns=wh, timeout=30) for p in webhook_pods)
        wait_until(reloaded, 240, "every webhook pod to reload the renewed certificate", interval=5)
        dt = time.monotonic() - t0
        results = stream.stop()
        bad = refused(results)
        check(not bad, "pods refused during the renewal: %r" % bad)
        images = [sidecar_image(p) for t, rc, p in results]
        check(all(images), "pods created during the renewal without the sidecar: %d of %d (a call failed TLS)" % (
            images.count(None), len(images)))
        env.log("renewal (Secret deleted, helm upgrade): both webhook pods serve the new certificate after "
                "%.1f s; %d pods created meanwhile, all injected" % (dt, len(results)))

        # ---- upgrade, pods created all along ----
        rs_before = {r["metadata"]["name"] for r in c.get("replicasets", ns=wh)["items"]}
        stream = PodStream(env)
        t0 = time.monotonic()
        helm("upgrade", RELEASE, CHART, "-n", wh, "--wait", "--timeout", "5m", "--reuse-values",
             "--set", "webhook.failurePolicy=Fail", "--set", "sidecar.image=" + NEW_SIDECAR_IMAGE,
             "--set", "webhook.logLevel=debug")
        dt = time.monotonic() - t0
        time.sleep(3)
        results = stream.stop()
        bad = refused(results)
        check(not bad, "pods refused during helm upgrade: %r" % bad)
        during = [r for t, rc, r in results if t <= dt]
        check(len(during) >= 5, "only %d pods were created during the upgrade" % len(during))
        images = [sidecar_image(p) for t, rc, p in results]
        check(all(images), "pods created during the upgrade without the sidecar: %d of %d" % (
            images.count(None), len(images)))
        env.log("helm upgrade --wait: %.1f s; %d pods created meanwhile, all injected (%d with the old image, "
                "%d with the new)" % (dt, len(during), images.count("reload-agent:0.1.0"),
                                      images.count(NEW_SIDECAR_IMAGE)))
        rs_after = {r["metadata"]["name"] for r in c.get("replicasets", ns=wh)["items"]}
        check(rs_after - rs_before, "the upgrade did not roll the webhook Deployment")
        cfg = c.get("mutatingwebhookconfiguration", RELEASE)
        check(cfg["webhooks"][0]["failurePolicy"] == "Fail", "failurePolicy not upgraded")
        check(cfg["webhooks"][0]["clientConfig"].get("caBundle") == ca, "the upgrade changed caBundle")
        s2 = c.get("secret", "reload-agent-webhook-tls", ns=wh)
        check(s2["metadata"]["uid"] == secret["metadata"]["uid"] and s2["data"] == secret["data"],
              "the upgrade replaced the TLS Secret")
        check(not c.get("jobs", ns=wh)["items"], "hook Jobs left after the upgrade")
        rc, out, err = env.kubectl("create", "-f", "-", "-o", "json", check=False,
                                   input=pending_pod(apps.agent_annotations(action="none")))
        check(rc == 0 and sidecar_image(json.loads(out)) == NEW_SIDECAR_IMAGE,
              "a pod after the upgrade: %s" % (err or sidecar_image(json.loads(out))))

        # ---- uninstall, pods created all along ----
        stream = PodStream(env, interval=0.1)
        time.sleep(2)
        t0 = time.monotonic() - stream.t0
        helm("uninstall", RELEASE, "-n", wh, "--wait", "--timeout", "5m")
        installed = False
        dt = time.monotonic() - stream.t0 - t0
        time.sleep(2)
        results = stream.stop()
        bad = refused(results)
        check(not bad, "pods refused around helm uninstall (failurePolicy Fail until it went): %r" % bad)
        before = [p for t, rc, p in results if t < t0]
        during = [p for t, rc, p in results if t0 <= t <= t0 + dt]
        after = [p for t, rc, p in results if t > t0 + dt]
        check(before and all(sidecar_image(p) for p in before), "pods before the uninstall not all injected")
        check(after and not any(sidecar_image(p) for p in after), "pods after the uninstall injected")
        env.log("helm uninstall --wait: %.1f s; pods created before/during/after it: %d/%d/%d, none refused "
                "(%d of those during it injected)" % (dt, len(before), len(during), len(after),
                                                       sum(1 for p in during if sidecar_image(p))))
        check(c.get("mutatingwebhookconfiguration", RELEASE, check=False) is None,
              "helm uninstall left the MutatingWebhookConfiguration")
        for kind in ("clusterrole", "clusterrolebinding"):
            check(c.get(kind, "reload-agent-webhook-certs", check=False) is None, "%s left" % kind)
        left = c.kubectl("get", "mutatingwebhookconfigurations,clusterroles,clusterrolebindings,"
                         "validatingadmissionpolicies,validatingadmissionpolicybindings", "-o", "name",
                         "-l", "app.kubernetes.io/instance=" + RELEASE)
        check(not left.strip(), "cluster-scoped objects of the release left: %r" % left)
        def empty():
            left = leftovers(c, wh)
            if left:
                raise TestFailure("left in %s: %s" % (wh, ", ".join(left)))
            return True
        wait_until(empty, 120, "namespace %s to be empty" % wh)
        for kind in ("roles", "rolebindings"):
            check(not c.get(kind, ns=env.ns)["items"], "the rbac.namespaces %s are left in %s" % (kind, env.ns))
        rc, out, err = env.kubectl("create", "-f", "-", "-o", "json", check=False,
                                   input=pending_pod(apps.agent_annotations(action="none")))
        check(rc == 0, "a pod after helm uninstall was refused: %s" % err)
        check(sidecar_image(json.loads(out)) is None, "a pod after helm uninstall was injected")
    finally:
        if installed:
            helm("uninstall", RELEASE, "-n", wh, "--ignore-not-found", "--wait", "--timeout", "5m",
                 check_rc=False)
        c.kubectl("delete", "namespace", wh, "--ignore-not-found", "--wait=false", check=False)
        shutil.rmtree(home, ignore_errors=True)
        c.webhook_ready = False
        if had_kustomize:
            c.ensure_webhook()
            env.log("kustomize webhook reinstalled")


test_helm_install_upgrade_uninstall.exclusive = True
test_helm_install_upgrade_uninstall.timeout = 1200
