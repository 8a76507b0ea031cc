#!/usr/bin/env python3
"""The Helm chart (charts/reload-agent) without a cluster: `make test` runs it.

1. `helm lint --strict` with the default values, the cert-manager values and
   values that set every key (tests/chart/values-*.yaml).
2. Golden output: `helm template reload-agent charts/reload-agent -n
   reload-agent` with the default and the cert-manager values must equal
   tests/chart/golden/{default,cert-manager}.yaml byte for byte. They are
   reviewed files: regenerate them on purpose with `make chart-golden`
   (check.py --update) and read the diff.
3. No drift from the kustomize sets: the default render equals `kustomize
   build manifests/webhook/certgen`, the cert-manager render equals `kustomize
   build manifests/webhook/certmanager`, object by object, after removing
   only what Helm adds (the labels helm.sh/chart, app.kubernetes.io/instance,
   version, managed-by, and the helm.sh/ hook annotations). The differences
   the chart has by design are named here and checked exactly: the
   kustomize-only Namespace (a chart installs into the release's namespace),
   the chart-only pre-install Job (the kustomize Job without
   --webhook-config) and the post-delete stand-in Secrets. The chart's
   rbac.namespaces Role equals manifests/role.yaml; fastSync.policy and
   fastSync.namespaces render manifests/fast-sync/policy.yaml and role.yaml.
4. The hooks are ordered as docs/webhook-install.md says; the schema rejects
   typos and bad values, each with a message that names the value (REFUSED),
   and takes the edges of its patterns (ACCEPTED); every string value is
   rendered quoted (with the schema off, a line break and a key in any value
   adds no key to the objects); another release name and namespace reach every
   name and namespace; every flag the chart can pass exists in the binary's
   --help; every values.yaml key is in the chart README's table.

helm and kustomize come from tests/cluster/build.sh (built once from the Go
module proxy, cached in $RA_CLUSTER_CACHE): kustomize at the version the
cluster's kubectl (v1.36.3) embeds, so `kustomize build` is that kubectl's
`kubectl kustomize`. A missing tool is built; a failed build fails the test.

Usage: python3 -m tests.chart.check [--binary build/reload-agent] [--update]
"""
import argparse
import copy
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CHART = os.path.join(ROOT, "charts", "reload-agent")
GOLDEN = os.path.join(HERE, "golden")
HELM_LABELS = {"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/version",
               "app.kubernetes.io/managed-by"}
CASES = {  # golden name -> (values file or None, kustomize set)
    "default": (None, "manifests/webhook/certgen"),
    "cert-manager": (os.path.join(HERE, "values-cert-manager.yaml"), "manifests/webhook/certmanager"),
}
FULL = os.path.join(HERE, "values-full.yaml")
# Goldens with no kustomize counterpart (no drift check): golden name -> values.
GOLDEN_ONLY = {"monitoring": os.path.join(HERE, "values-monitoring.yaml")}
DASHBOARD = os.path.join(CHART, "dashboards", "reload-agent.json")


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def run(cmd, env=None, ok=True):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=1800)
    out, err = p.stdout.decode(), p.stderr.decode()
    if ok and p.returncode != 0:
        raise Fail("%s: exit %d\n%s%s" % (" ".join(cmd), p.returncode, out, err))
    return out if ok else (p.returncode, out, err)


def tool(component, name):
    """The cached (or just built) binary of a build.sh component."""
    out = run(["bash", os.path.join(ROOT, "tests", "cluster", "build.sh"), component])
    for line in out.splitlines():
        k, _, v = line.partition("=")
        if k == component.upper() + "_BIN":
            path = os.path.join(v, name)
            check(os.access(path, os.X_OK), "build.sh %s printed %s, not an executable" % (component, path))
            return path
    raise Fail("build.sh %s printed no %s_BIN= line:\n%s" % (component, component.upper(), out))


class Tools:
    def __init__(self):
        self.helm = tool("helm", "helm")
        self.kustomize = tool("kustomize", "kustomize")
        self.home = tempfile.mkdtemp(prefix="chart-check-")
        self.env = dict(os.environ, HELM_CACHE_HOME=self.home + "/cache", HELM_CONFIG_HOME=self.home + "/config",
                        HELM_DATA_HOME=self.home + "/data", KUBECONFIG=os.devnull)

    def template(self, *args, release="reload-agent", ns="reload-agent", ok=True):
        return run([self.helm, "template", release, CHART, "--namespace", ns] + list(args), env=self.env, ok=ok)

    def lint(self, *args):
        return run([self.helm, "lint", "--strict", CHART] + list(args), env=self.env)

    def build(self, kset):
        return run([self.kustomize, "build", os.path.join(ROOT, kset)])


def docs(text):
    return [d for d in yaml.safe_load_all(text) if d]


def key(o):
    return (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])


def strip_helm(o):
    """o without what Helm adds: its labels (at any depth: pod templates too)
    and its helm.sh/ annotations; an annotations map left empty goes."""
    if isinstance(o, list):
        return [strip_helm(x) for x in o]
    if not isinstance(o, dict):
        return o
    out = {}
    for k, v in o.items():
        if k == "labels" and isinstance(v, dict):
            v = {a: b for a, b in v.items() if a not in HELM_LABELS}
        if k == "annotations" and isinstance(v, dict):
            v = {a: b for a, b in v.items() if not a.startswith("helm.sh/")}
            if not v:
                continue
        out[k] = strip_helm(v)
    return out


def diff_text(a, b, na, nb):
    return "".join(difflib.unified_diff(yaml.safe_dump(a, sort_keys=True).splitlines(True),
                                        yaml.safe_dump(b, sort_keys=True).splitlines(True), na, nb))


def hook(o):
    a = o["metadata"].get("annotations", {})
    if "helm.sh/hook" not in a:
        return None
    return (set(a["helm.sh/hook"].split(",")), int(a.get("helm.sh/hook-weight", "0")),
            set(a.get("helm.sh/hook-delete-policy", "").split(",")))


# ---- 1. lint ----
def lint(t):
    for name, (values, _) in CASES.items():
        t.lint(*(["-f", values] if values else []))
    t.lint("-f", FULL)
    for values in GOLDEN_ONLY.values():
        t.lint("-f", values)
    return "helm lint --strict: default, cert-manager, monitoring and every-key values"


# ---- 2. golden ----
def golden(t, update):
    notes = []
    cases = [(name, values) for name, (values, _) in CASES.items()] + list(GOLDEN_ONLY.items())
    for name, values in cases:
        got = t.template(*(["-f", values] if values else []))
        path = os.path.join(GOLDEN, name + ".yaml")
        if update:
            os.makedirs(GOLDEN, exist_ok=True)
            with open(path, "w") as f:
                f.write(got)
            notes.append("wrote " + os.path.relpath(path, ROOT))
            continue
        check(os.path.exists(path), "%s is missing: make chart-golden writes it" % path)
        with open(path) as f:
            want = f.read()
        if got != want:
            d = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                             os.path.relpath(path, ROOT), "helm template"))
            raise Fail("helm template (%s values) differs from the golden file; if the change is meant, "
                       "run `make chart-golden` and review the diff:\n%s" % (name, d))
        notes.append("%s: %d objects" % (name, len(docs(got))))
    notes.append(dashboard_shipped(t))
    return "golden helm template: " + ", ".join(notes)


def dashboard_shipped(t):
    """The dashboard's ConfigMap holds dashboards/reload-agent.json byte for
    byte, labelled for the Grafana sidecar."""
    objs = docs(t.template("-f", GOLDEN_ONLY["monitoring"]))
    cms = [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-dashboard")]
    check(len(cms) == 1, "monitoring values: want one dashboard ConfigMap, got %d" % len(cms))
    with open(DASHBOARD) as f:
        want = f.read()
    check(cms[0]["data"]["reload-agent.json"] == want, "the dashboard ConfigMap differs from %s" % DASHBOARD)
    check(cms[0]["metadata"]["labels"].get("grafana_dashboard") == "1", "no grafana_dashboard label")
    kinds = sorted(o["kind"] for o in objs if o["kind"] in ("ServiceMonitor", "PodMonitor"))
    check(kinds == ["PodMonitor", "ServiceMonitor"], "monitors %r" % kinds)
    return "the dashboard ConfigMap is dashboards/reload-agent.json"


# ---- 3. drift ----
def drift(t):
    notes = []
    for name, (values, kset) in CASES.items():
        chart = {key(o): o for o in docs(t.template(*(["-f", values] if values else [])))}
        kust = {key(o): o for o in docs(t.build(kset))}
        ns = ("Namespace", "", "reload-agent")
        check(ns in kust, "%s has no Namespace reload-agent any more: update check.py" % kset)
        del kust[ns]
        # chart-only by design
        extra = {k for k in chart if k not in kust}
        standins = {k for k in extra if k[0] == "Secret"}
        want_standins = {("Secret", "reload-agent", "reload-agent-webhook-tls")}
        if name == "cert-manager":
            want_standins.add(("Secret", "reload-agent", "reload-agent-webhook-ca"))
        check(standins == want_standins, "%s: stand-in Secrets %r, want %r" % (name, standins, want_standins))
        for k in standins:
            s = chart[k]
            check(hook(s) == ({"post-delete"}, 0, {"before-hook-creation", "hook-succeeded"}),
                  "%s: %s is not a post-delete stand-in: %r" % (name, k, hook(s)))
            check(set(s) == {"apiVersion", "kind", "metadata", "type"} and s["type"] == "Opaque",
                  "%s: the stand-in %s must be an empty Opaque Secret" % (name, k))
        pre = ("Job", "reload-agent", "reload-agent-webhook-secret")
        if name == "default":
            check(pre in extra, "default: no pre-install Job %s" % (pre,))
            want = copy.deepcopy(kust[("Job", "reload-agent", "reload-agent-webhook-certs")])
            want["metadata"]["name"] = pre[2]
            c0 = want["spec"]["template"]["spec"]["containers"][0]
            c0["args"] = [a for a in c0["args"] if not a.startswith("--webhook-config=")]
            got = strip_helm(chart[pre])
            check(got == want, "default: the pre-install Job is not the kustomize Job without "
                  "--webhook-config:\n" + diff_text(want, got, "kustomize (derived)", "chart"))
        extra -= standins | {pre}
        check(not extra, "%s: objects only the chart has: %r" % (name, sorted(extra)))
        missing = sorted(k for k in kust if k not in chart)
        check(not missing, "%s: objects only %s has: %r" % (name, kset, missing))
        for k in sorted(kust):
            got = strip_helm(chart[k])
            check(got == kust[k], "%s: %s differs from %s (beyond Helm's labels and hook annotations):\n%s" % (
                name, "/".join(k), kset, diff_text(kust[k], got, kset, "chart")))
        notes.append("%s = %s (%d objects)" % (name, kset, len(kust)))

    # the rollout Role equals manifests/role.yaml
    out = t.template("--set", "rbac.namespaces[0].namespace=shop",
                     "--set", "rbac.namespaces[0].serviceAccounts[0]=default",
                     "--set", "rbac.namespaces[0].serviceAccounts[1]=web")
    objs = {key(o): o for o in docs(out)}
    with open(os.path.join(ROOT, "manifests", "role.yaml")) as f:
        role = yaml.safe_load(f)
    got = strip_helm(objs[("Role", "shop", "reload-agent")])
    want = dict(copy.deepcopy(role))
    want["metadata"] = dict(want["metadata"], namespace="shop")
    check(got == want, "the rbac.namespaces Role differs from manifests/role.yaml:\n" +
          diff_text(want, got, "manifests/role.yaml", "chart"))
    rb = objs[("RoleBinding", "shop", "reload-agent")]
    check(rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reload-agent"} and
          rb["subjects"] == [{"kind": "ServiceAccount", "name": n, "namespace": "shop"} for n in ("default", "web")],
          "the rbac.namespaces RoleBinding: %r" % rb)
    noargo = docs(t.template("--set", "rbac.namespaces[0].namespace=shop",
                             "--set", "rbac.namespaces[0].serviceAccounts[0]=default",
                             "--set", "rbac.argoRollouts=false"))
    r2 = [o for o in noargo if o["kind"] == "Role" and o["metadata"]["namespace"] == "shop"][0]
    check(r2["rules"] == [r for r in role["rules"] if r["apiGroups"] != ["argoproj.io"]],
          "rbac.argoRollouts=false must drop exactly the argoproj.io rule")
    notes.append("rbac.namespaces Role = manifests/role.yaml")
    notes.append(fast_sync_no_drift(t))
    return "no drift: " + "; ".join(notes)


def fast_sync_no_drift(t):
    """fastSync.policy renders manifests/fast-sync/policy.yaml and
    fastSync.namespaces the Role of manifests/fast-sync/role.yaml (beyond
    Helm's labels), and neither is rendered by default."""
    check(not [o for o in docs(t.template()) if "fast-sync" in o["metadata"]["name"]],
          "fast-sync objects in the default render")
    objs = {key(o): o for o in docs(t.template(
        "--set", "fastSync.policy=true", "--set", "fastSync.namespaces[0].namespace=shop",
        "--set", "fastSync.namespaces[0].serviceAccounts[0]=default"))}
    name = "reload-agent-fast-sync"
    with open(os.path.join(ROOT, "manifests", "fast-sync", "policy.yaml")) as f:
        for want in yaml.safe_load_all(f):
            got = strip_helm(objs[(want["kind"], "", name)])
            check(got == want, "fastSync.policy: %s differs from manifests/fast-sync/policy.yaml:\n%s"
                  % (want["kind"], diff_text(want, got, "manifests/fast-sync/policy.yaml", "chart")))
    with open(os.path.join(ROOT, "manifests", "fast-sync", "role.yaml")) as f:
        want = yaml.safe_load(f)
    want["metadata"] = dict(want["metadata"], namespace="shop")
    got = strip_helm(objs[("Role", "shop", name)])
    check(got == want, "the fastSync.namespaces Role differs from manifests/fast-sync/role.yaml:\n" +
          diff_text(want, got, "manifests/fast-sync/role.yaml", "chart"))
    rb = objs[("RoleBinding", "shop", name)]
    check(rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name} and
          rb["subjects"] == [{"kind": "ServiceAccount", "name": "default", "namespace": "shop"}],
          "the fastSync.namespaces RoleBinding: %r" % rb)
    return "fastSync = manifests/fast-sync/{policy,role}.yaml"


# ---- 4. hooks, schema, names, flags, README ----
def hooks(t):
    objs = docs(t.template())
    h = {(o["kind"], o["metadata"]["name"]): hook(o) for o in objs if hook(o)}
    every = {"pre-install", "pre-upgrade", "post-install", "post-upgrade"}
    policy = {"before-hook-creation", "hook-succeeded"}
    pre, post = h.get(("Job", "reload-agent-webhook-secret")), h.get(("Job", "reload-agent-webhook-certs"))
    check(pre == ({"pre-install", "pre-upgrade"}, 0, policy), "the Secret Job's hook: %r" % (pre,))
    check(post == ({"post-install", "post-upgrade"}, 0, policy), "the caBundle Job's hook: %r" % (post,))
    rbac = {k: v for k, v in h.items() if k[0] != "Job" and k[0] != "Secret"}
    check(set(k[0] for k in rbac) == {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"},
          "hook RBAC kinds: %r" % sorted(rbac))
    for k, v in rbac.items():
        check(v[0] == every and v[1] < 0 and v[2] == policy, "%s: the Jobs' RBAC must run first in every "
              "install/upgrade phase and go once they succeeded: %r" % ("/".join(k), v))
    jobs = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Job"}
    pre_args = jobs["reload-agent-webhook-secret"]["spec"]["template"]["spec"]["containers"][0]["args"]
    check(not any(a.startswith("--webhook-config") for a in pre_args),
          "the pre-install Job must not touch the configuration (it does not exist yet)")
    for o in objs:  # nothing the release keeps is a hook, and no hook is kept
        if o["kind"] in ("MutatingWebhookConfiguration", "Deployment", "Service"):
            check(hook(o) is None, "%s must be an object of the release, not a hook" % o["kind"])
    return "hooks: RBAC (weight -10) then the Secret Job before, the caBundle Job after; stand-ins post-delete"


# Values the schema must refuse (issue 24 G14, G15, U4), each with the
# path its message must name: (what, values, path in the message).
INJECT_NL = "x\n      hostNetwork: true\n      hostPID: true"
REFUSED = [
    ("a monitor interval that is no Prometheus duration", {"monitoring": {"serviceMonitor": {"interval": "30 s"}}},
     "/monitoring/serviceMonitor/interval"),
    ("a PodMonitor port 0", {"monitoring": {"podMonitor": {"port": 0}}}, "/monitoring/podMonitor/port"),
    ("a dashboard label value with a newline", {"monitoring": {"dashboard": {"labels": {"grafana_dashboard": "1\n  x: y"}}}},
     "/monitoring/dashboard/labels/grafana_dashboard"),
    ("a sync namespace that is no namespace name", {"sync": {"namespaces": ["Shop"]}},
     "/sync/namespaces/0"),
    ("no sync replica", {"sync": {"replicas": 0}}, "/sync/replicas"),
    ("a sync extraArg that is no flag", {"sync": {"extraArgs": ["qps=5"]}}, "/sync/extraArgs/0"),
    ("a newline in priorityClassName", {"webhook": {"priorityClassName": INJECT_NL}}, "/webhook/priorityClassName"),
    ("a priorityClassName that is no object name", {"webhook": {"priorityClassName": "High"}},
     "/webhook/priorityClassName"),
    ("a newline in image.repository", {"image": {"repository": "ra\n      hostPID: true"}}, "/image/repository"),
    ("an image.repository with a space", {"image": {"repository": "ra --privileged"}}, "/image/repository"),
    ("an upper-case image path", {"image": {"repository": "example.com/Reload"}}, "/image/repository"),
    ("an image.repository with a tag", {"image": {"repository": "ra:1.0"}}, "/image/repository"),
    ("a newline in image.tag", {"image": {"tag": "1.0\n      hostPID: true"}}, "/image/tag"),
    ("an image.tag starting with '.'", {"image": {"tag": ".1"}}, "/image/tag"),
    ("an image.tag of 129 characters", {"image": {"tag": "a" * 129}}, "/image/tag"),
    ("webhook arguments in listenHost", {"webhook": {"listenHost": "0.0.0.0\n            - --image=evil"}},
     "/webhook/listenHost"),
    ("a host name in listenHost", {"webhook": {"listenHost": "localhost"}}, "/webhook/listenHost"),
    ("a port in listenHost", {"webhook": {"listenHost": "0.0.0.0:1"}}, "/webhook/listenHost"),
    ("an IPv4 octet over 255", {"webhook": {"listenHost": "10.0.0.256"}}, "/webhook/listenHost"),
    ("a podAnnotations key with a space", {"webhook": {"podAnnotations": {"a b": "x"}}}, "/webhook/podAnnotations"),
    ("a podAnnotations key with a bad prefix", {"webhook": {"podAnnotations": {"Example.com/a": "x"}}},
     "/webhook/podAnnotations"),
    ("a podAnnotations value that is a number", {"webhook": {"podAnnotations": {"a": 1}}},
     "/webhook/podAnnotations/a"),
    ("a podLabels key of 64 characters", {"webhook": {"podLabels": {"k" * 64: "x"}}}, "/webhook/podLabels"),
    ("a podLabels value with a newline", {"webhook": {"podLabels": {"team": "a\n        evil: x"}}},
     "/webhook/podLabels/team"),
    ("a podLabels value of 64 characters", {"webhook": {"podLabels": {"team": "v" * 64}}}, "/webhook/podLabels/team"),
    ("a namespaceSelector matchExpressions key with a space",
     {"webhook": {"namespaceSelector": {"matchExpressions": [{"key": "a b", "operator": "Exists"}]}}},
     "/webhook/namespaceSelector/matchExpressions/0/key"),
    ("an objectSelector matchExpressions value with a newline",
     {"webhook": {"objectSelector": {"matchExpressions": [{"key": "a", "operator": "In", "values": ["x\ny"]}]}}},
     "/webhook/objectSelector/matchExpressions/0/values/0"),
    ("a namespaceSelector matchLabels key with a space",
     {"webhook": {"namespaceSelector": {"matchLabels": {"a b": "x"}}}}, "/webhook/namespaceSelector/matchLabels"),
    ("a nodeSelector value with a space", {"webhook": {"nodeSelector": {"zone": "a b"}}}, "/webhook/nodeSelector/zone"),
    ("webhook.replicas 1e9", {"webhook": {"replicas": 1e9}}, "/webhook/replicas"),
    ("webhook.replicas 0", {"webhook": {"replicas": 0}}, "/webhook/replicas"),
    ("webhook.replicas 2.5", {"webhook": {"replicas": 2.5}}, "/webhook/replicas"),
    ("a newline in sidecar.image", {"sidecar": {"image": "ra\n  x: y"}}, "/sidecar/image"),
    ("a sidecar.image with a space", {"sidecar": {"image": "ra latest"}}, "/sidecar/image"),
    ("a sidecar.image with a bad digest", {"sidecar": {"image": "ra@sha256:1234"}}, "/sidecar/image"),
    ("certgen.backoffLimit 1e9", {"certificates": {"certgen": {"backoffLimit": 1e9}}},
     "/certificates/certgen/backoffLimit"),
    ("certgen.backoffLimit -1", {"certificates": {"certgen": {"backoffLimit": -1}}},
     "/certificates/certgen/backoffLimit"),
    ("a memory limit in millibytes", {"webhook": {"resources": {"limits": {"memory": "64m"}}}},
     "/webhook/resources/limits/memory"),
    ("a memory request that is no quantity", {"certificates": {"certgen": {"resources": {"requests": {"memory": "64MB"}}}}},
     "/certificates/certgen/resources/requests/memory"),
    ("a cpu request that is no quantity", {"webhook": {"resources": {"requests": {"cpu": "fast"}}}},
     "/webhook/resources/requests/cpu"),
    ("a negative memory limit", {"webhook": {"resources": {"limits": {"memory": -1}}}},
     "/webhook/resources/limits/memory"),
    ("a resource name with a space", {"webhook": {"resources": {"limits": {"a b": "1"}}}}, "/webhook/resources/limits"),
    ("a shutdownTimeout that overflows", {"webhook": {"shutdownTimeout": "99999999999h"}}, "/webhook/shutdownTimeout"),
    ("a shutdownTimeout with a space", {"webhook": {"shutdownTimeout": "5 s"}}, "/webhook/shutdownTimeout"),
    ("a shutdownDelay without a unit", {"webhook": {"shutdownDelay": "5"}}, "/webhook/shutdownDelay"),
    ("a negative validity", {"certificates": {"certgen": {"validity": "-1h"}}}, "/certificates/certgen/validity"),
    ("a previousCA that is neither keep nor drop", {"certificates": {"certgen": {"previousCA": "both"}}},
     "/certificates/certgen/previousCA"),
    ("a newline in certManager.duration", {"certificates": {"certManager": {"duration": "1h\n  x: y"}}},
     "/certificates/certManager/duration"),
    ("an empty certManager.renewBefore", {"certificates": {"certManager": {"renewBefore": ""}}},
     "/certificates/certManager/renewBefore"),
]
# Values the schema must take (and the chart render): the edges of the
# patterns above.
ACCEPTED = [
    {"webhook": {"listenHost": "::"}}, {"webhook": {"listenHost": "fd00::1"}},
    {"webhook": {"listenHost": "2001:db8:0:0:0:0:2:1"}}, {"webhook": {"listenHost": "::ffff:10.0.0.1"}},
    {"webhook": {"listenHost": "127.0.0.1"}}, {"webhook": {"listenHost": "255.255.255.255"}},
    {"image": {"repository": "localhost:5000/team/reload-agent", "tag": "v1.2.3-rc.1_b"}},
    {"image": {"repository": "[fd00::1]:5000/ra"}}, {"image": {"repository": "Registry.Example.com/a__b/c-d.e"}},
    {"sidecar": {"image": "registry.example.com:5000/ra:0.1.0@sha256:" + "0" * 64}},
    {"sidecar": {"image": "ra@sha256:" + "a" * 64}}, {"sidecar": {"image": "ra:latest"}},
    {"webhook": {"priorityClassName": "system-node-critical", "replicas": 100,
                 "podAnnotations": {"example.com/note": "any text: {x}\nmore", "a": ""},
                 "podLabels": {"example.com/team": "Platform_1.x", "empty": ""},
                 "resources": {"requests": {"cpu": 0.5, "memory": 16777216, "ephemeral-storage": "1Gi"},
                               "limits": {"cpu": "1500m", "memory": "1.5Gi", "example.com/gpu": 1}}}},
    {"certificates": {"certgen": {"backoffLimit": 0, "validity": "1h30m",
                                  "resources": {"requests": {"memory": "1e6", "cpu": "100u"}}}}},
    {"webhook": {"shutdownTimeout": "1.5s"}}, {"webhook": {"shutdownTimeout": "250ms"}},
    {"webhook": {"shutdownDelay": "0s"}}, {"webhook": {"shutdownDelay": ""}},
    {"certificates": {"certManager": {"duration": "2160h0m0s", "renewBefore": "90m"}}},
]


def values_file(home, i, values):
    path = os.path.join(home, "values-%d.yaml" % i)
    with open(path, "w") as f:
        yaml.safe_dump(values, f)
    return path


def schema(t):
    bad = ["replica=3", "webhook.failurPolicy=Fail", "webhook.failurePolicy=Never", "webhook.timeoutSeconds=31",
           "certificates.source=vault", "image.pullPolicy=Sometimes", "webhook.logLevel=loud",
           "webhook.shutdownTimeout=5", "webhook.shutdownDelay=5", "certificates.certgen.validity=10y",
           "rbac.namespaces[0].namespace=Shop",
           "webhook.extraArgs[0]=image=x", "webhook.podDisruptionBudget.minAvilable=1",
           "certificates.certManager.duration=90d", "webhook.namespaceSelector.matchExpression[0].key=a",
           "sidecar.imag=x", "webhook.replicas=1"]
    for s in bad:
        rc, out, err = t.template("--set", s, ok=False)
        check(rc != 0, "helm template --set %s was accepted: the schema (or a check) must refuse it" % s)
        check("schema" in err or "must be" in err, "--set %s: refused, but not by the schema or a check: %s" % (s, err))
    for i, (what, values, path) in enumerate(REFUSED):
        rc, out, err = t.template("-f", values_file(t.home, i, values), ok=False)
        check(rc != 0, "%s (%r) was accepted: the schema must refuse it" % (what, values))
        check("schema" in err and ("'%s'" % path) in err,
              "%s: refused, but the message does not name %s:\n%s" % (what, path, err))
    for i, values in enumerate(ACCEPTED):
        rc, out, err = t.template("-f", values_file(t.home, 1000 + i, values), ok=False)
        check(rc == 0, "%r is refused: %s" % (values, err))
    rc, out, err = t.template("-f", FULL, ok=False)
    check(rc == 0, "values-full.yaml is refused: %s" % err)
    check(out.count("--previous-ca=drop") == 1, "certificates.certgen.previousCA drop is not rendered once "
          "into the caBundle Job")
    return "schema: %d typos and bad values refused, each naming its value; %d edge values taken" % (
        len(bad) + len(REFUSED), len(ACCEPTED))


def string_leaves(v, path=()):
    """(path, value) of every string in v, list items included."""
    if isinstance(v, dict):
        for k, x in v.items():
            yield from string_leaves(x, path + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from string_leaves(x, path + (i,))
    elif isinstance(v, str):
        yield path, v


def set_at(v, path, x):
    for k in path[:-1]:
        v = v[k]
    v[path[-1]] = x


def has_key(o, name):
    if isinstance(o, dict):
        return name in o or any(has_key(x, name) for x in o.values())
    if isinstance(o, list):
        return any(has_key(x, name) for x in o)
    return False


def quoting(t):
    """Every string value is rendered quoted (issue 24 G14): with the schema
    off, every string value at once ending in a line break and a key (at
    each indentation the templates use) still renders and adds no key; on a
    failure each value alone names the culprits. Two sets of values, so that
    both certificate sources and both image forms (tag, digest) render."""
    with open(FULL) as f:
        full = yaml.safe_load(f)
    cm = copy.deepcopy(full)
    cm["certificates"]["source"] = "cert-manager"
    cm["image"]["digest"] = ""
    n = 0
    for base in (full, cm):
        leaves = [p for p, _ in string_leaves(base) if p != ("certificates", "source")]
        for ind in ("", "  ", "      ", "        ", "            "):
            def clean(paths):
                values = copy.deepcopy(base)
                for p in paths:
                    v = values
                    for k in p:
                        v = v[k]
                    set_at(values, p, (v or "x") + "\n" + ind + "injected: true")
                rc, out, err = t.template("--skip-schema-validation", "-f", values_file(t.home, 2000, values), ok=False)
                return rc == 0 and not has_key(docs(out), "injected")
            if not clean(leaves):
                bad = [".".join(str(k) for k in p) for p in leaves if not clean([p])]
                raise Fail("rendered unquoted (a line break and a key indented %d breaks the render or adds a "
                           "key): %s" % (len(ind), ", ".join(bad) or "only all together"))
        n += len(leaves)
    return "quoting: %d string values with a line break and a key, at 5 indentations: no key added" % n


def names(t, binary):
    """Another release and namespace: every name and namespace follows."""
    notes = []
    for values in ([], ["-f", CASES["cert-manager"][0]], ["-f", FULL]):
        objs = docs(t.template(*values, release="ra", ns="tools"))
        text = yaml.safe_dump_all(objs)
        for o in objs:
            m = o["metadata"]
            if o["kind"] not in ("MutatingWebhookConfiguration", "ClusterRole", "ClusterRoleBinding",
                                 "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
                check(m.get("namespace") in ("tools", "shop", "web"), "%s/%s in namespace %r" % (
                    o["kind"], m["name"], m.get("namespace")))
            check(m["name"].startswith("ra-reload-agent"), "%s/%s is not named after the release" % (
                o["kind"], m["name"]))
        check(not re.search(r"namespace: reload-agent$|: reload-agent/|webhook\.reload-agent|^ *- reload-agent$", text, re.M),
              "a name of the default namespace is hard-coded")
        mwc = [o for o in objs if o["kind"] == "MutatingWebhookConfiguration"][0]
        for w in mwc["webhooks"]:  # the per-pod entry, and the namespace-wide one
            svc = w["clientConfig"]["service"]
            check(svc["namespace"] == "tools" and svc["name"] == "ra-reload-agent-webhook",
                  "service %r" % svc)
            check("tools" in w["namespaceSelector"]["matchExpressions"][0]["values"],
                  "the release's namespace is not excluded")
        dep = [o for o in objs if o["kind"] == "Deployment" and
               o["metadata"]["name"].endswith("-webhook")][0]
        secret = dep["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"]
        for o in objs:
            if o["kind"] == "Job":
                args = o["spec"]["template"]["spec"]["containers"][0]["args"]
                check("--secret-name=" + secret in args and "--service-name=" + svc["name"] in args,
                      "the Job %s does not name the Deployment's Secret and the Service: %r" % (
                          o["metadata"]["name"], args))
                if any(a.startswith("--webhook-config=") for a in args):
                    check("--webhook-config=" + mwc["metadata"]["name"] in args, "--webhook-config: %r" % args)
            if o["kind"] == "ClusterRole" and not o["metadata"]["name"].endswith("-sync"):
                check(o["rules"][0]["resourceNames"] == [mwc["metadata"]["name"]], "ClusterRole resourceNames")
            if o["kind"] == "Certificate" and o["metadata"]["name"] == svc["name"]:
                check(o["spec"]["secretName"] == secret and "ra-reload-agent-webhook.tools.svc" in o["spec"]["dnsNames"],
                      "the serving Certificate: %r" % o["spec"])
        if binary:
            flags(objs, binary)
        notes.append(str(len(objs)))
    return "names: release ra in namespace tools (%s objects)%s" % (
        "/".join(notes), "; every flag is in reload-agent's --help" if binary else "")


def flags(objs, binary):
    helps = {
        "webhook": run([binary, "webhook", "--help"]),
        "certs": run([binary, "webhook", "certs", "--help"]),
        "sync": run([binary, "sync", "--help"]),
    }
    known = {k: set(re.findall(r"^\s+(--[a-z][-a-z0-9]*)", v, re.M)) for k, v in helps.items()}
    for o in objs:
        if o["kind"] not in ("Deployment", "Job"):
            continue
        args = o["spec"]["template"]["spec"]["containers"][0]["args"]
        which = "certs" if args[:2] == ["webhook", "certs"] else "sync" if args[0] == "sync" \
            else "webhook"
        for a in args:
            if a.startswith("--"):
                f = a.split("=", 1)[0]
                check(f in known[which], "%s %s: reload-agent %s has no flag %s" % (
                    o["kind"], o["metadata"]["name"], which, f))


def readme():
    with open(os.path.join(CHART, "values.yaml")) as f:
        values = yaml.safe_load(f)
    with open(os.path.join(CHART, "README.md")) as f:
        text = f.read()
    rows = set(re.findall(r"^\| `([^`]+)` \|", text, re.M))
    leaves = []

    def walk(v, path):
        if isinstance(v, dict) and v and not path.endswith(("resources", "matchLabels")):
            for k, x in v.items():
                walk(x, path + "." + k if path else k)
        else:
            leaves.append(path)
    walk(values, "")
    missing = [p for p in leaves if p not in rows]
    check(not missing, "charts/reload-agent/README.md has no row for: %s" % ", ".join(missing))
    unknown = sorted(rows - set(leaves))
    check(not unknown, "charts/reload-agent/README.md documents keys values.yaml lacks: %s" % ", ".join(unknown))
    return "README: %d values, one row each" % len(leaves)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", help="reload-agent, to check the flags the chart passes")
    ap.add_argument("--update", action="store_true", help="rewrite the golden files")
    a = ap.parse_args()
    t = Tools()
    failed = 0
    try:
        steps = [("lint", lambda: lint(t)), ("golden", lambda: golden(t, a.update)), ("drift", lambda: drift(t)),
                 ("hooks", lambda: hooks(t)), ("schema", lambda: schema(t)), ("quoting", lambda: quoting(t)),
                 ("names", lambda: names(t, a.binary and os.path.abspath(a.binary))), ("readme", readme)]
        for name, fn in steps:
            try:
                print("PASS chart::%s: %s" % (name, fn()), flush=True)
            except Fail as e:
                failed += 1
                print("FAIL chart::%s: %s" % (name, e), flush=True)
    finally:
        shutil.rmtree(t.home, ignore_errors=True)
    print("chart: %d passed, %d failed" % (len(steps) - failed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
