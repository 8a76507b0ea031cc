#!/usr/bin/env python3
"""The render plugins (plugins/, docs/render-plugins.md) with the real helm
and kustomize: `make plugins` runs it, `make test` too.

1. Helm 4: `helm plugin install plugins/helm/reload-agent` (a postrenderer/v1
   plugin, local directory), then `helm template --post-renderer
   reload-agent` of the chart written for this test (tests/plugins/chart: a
   ConfigMap and a Deployment opted in, action rollout): the Deployment has
   the sidecar and the stamp reload-agent.io/config-hash, which equals the
   hash of the ConfigMap's files at their mount path (computed here from the
   rendered ConfigMap, docs/hash.md); a value the pods read from the
   ConfigMap changes the stamp, one they do not (replicas, logLevel) leaves
   it; --post-renderer-args reach inject (--image); the output without the
   plugin equals `reload-agent inject` of `helm template` (the plugin adds
   nothing of its own); inject's report reaches $RELOAD_AGENT_REPORT (Helm
   drops a post-renderer's stderr); an inject error (a workload whose volumes is not a list,
   with --set broken=true) fails the helm command.
2. kustomize: a kustomization whose `transformers:` names the KRM exec
   function plugins/kustomize/reload-agent-inject, built with `kustomize
   build --enable-alpha-plugins --enable-exec`: the sidecar, the same stamp,
   and with fast sync on, its Role and RoleBinding among the resources.

helm and kustomize come from tests/cluster/build.sh (cached in
$RA_CLUSTER_CACHE; a missing one is built). Every command is bounded in
time. Usage: python3 -m tests.plugins.check [--binary build/reload-agent]
"""
import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CHART = os.path.join(HERE, "chart")
HELM_PLUGIN = os.path.join(ROOT, "plugins", "helm", "reload-agent")
KRM_FN = os.path.join(ROOT, "plugins", "kustomize", "reload-agent-inject")
HASH_KEY = "reload-agent.io/config-hash"
MOUNT = "/usr/share/nginx/html"


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def run(cmd, env=None, ok=True, stdin=None):
    p = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                       timeout=1800)
    out, err = p.stdout.decode(), p.stderr.decode()
    if ok and p.returncode != 0:
        raise Fail("%s: exit %d\n%s%s" % (" ".join(cmd), p.returncode, out, err))
    return out if ok else (p.returncode, out, err)


def tool(component, name):
    """The cached (or just built) binary of a tests/cluster/build.sh component."""
    out = run(["bash", os.path.join(ROOT, "tests", "cluster", "build.sh"), component])
    for line in out.splitlines():
        k, _, v = line.partition("=")
        if k == component.upper() + "_BIN":
            path = os.path.join(v, name)
            check(os.access(path, os.X_OK), "build.sh %s printed %s, not an executable" % (component, path))
            return path
    raise Fail("build.sh %s printed no %s_BIN= line:\n%s" % (component, component.upper(), out))


def objects(text):
    return [d for d in yaml.safe_load_all(text) if d]


def one(objs, kind):
    got = [o for o in objs if o.get("kind") == kind]
    check(len(got) == 1, "%d %s objects in %r" % (len(got), kind, [o.get("kind") for o in objs]))
    return got[0]


def sidecar(dep):
    side = [c for c in dep["spec"]["template"]["spec"].get("initContainers", [])
            if c["name"] == "reload-agent"]
    check(len(side) == 1, "no reload-agent sidecar in %s" % dep["metadata"]["name"])
    return side[0]


def stamp_of(dep):
    return dep["spec"]["template"]["metadata"].get("annotations", {}).get(HASH_KEY)


def content_hash(cm, mount):
    """docs/hash.md over the ConfigMap's files at mount (every file of the
    volume rollout-class): the SHA-256 of the sha256sum-format manifest."""
    data = cm.get("data", {})
    lines = "".join("%s  %s/%s\n" % (hashlib.sha256(data[k].encode()).hexdigest(), mount, k)
                    for k in sorted(data, key=lambda k: ("%s/%s" % (mount, k)).encode()))
    return hashlib.sha256(lines.encode()).hexdigest()


class Helm:
    def __init__(self, binary, home):
        self.bin = tool("helm", "helm")
        self.env = dict(os.environ, HELM_CACHE_HOME=home + "/cache", HELM_CONFIG_HOME=home + "/config",
                        HELM_DATA_HOME=home + "/data", KUBECONFIG=os.devnull, RELOAD_AGENT=binary)

    def __call__(self, *args, ok=True):
        return run([self.bin] + list(args), env=self.env, ok=ok)

    def template(self, *args, ok=True):
        return self("template", "web", CHART, "--namespace", "prod", *args, ok=ok)


def check_helm(binary, home):
    helm = Helm(binary, home)
    helm("plugin", "install", HELM_PLUGIN)
    listed = helm("plugin", "list")
    check("reload-agent" in listed and "postrenderer/v1" in listed, "helm plugin list: %s" % listed)

    plain = helm.template()
    out = helm.template("--post-renderer", "reload-agent")
    objs = objects(out)
    dep, cm = one(objs, "Deployment"), one(objs, "ConfigMap")
    side = sidecar(dep)
    check("--watch=" + MOUNT in side["args"], "sidecar args %r" % side["args"])
    want = content_hash(cm, MOUNT)
    check(stamp_of(dep) == want, "stamp %r, want the ConfigMap's hash %s" % (stamp_of(dep), want))
    injected = run([binary, "inject", "-f", "-"], stdin=plain.encode())
    check(out == injected, "the post-renderer's output differs from `reload-agent inject` of "
          "`helm template`")
    print("ok helm: --post-renderer reload-agent: sidecar, stamp %s…" % want[:12])

    other = stamp_of(one(objects(helm.template("--post-renderer", "reload-agent", "--set",
                                               "site.app\\.conf=workers 4\\n")), "Deployment"))
    check(other and other != want, "a changed ConfigMap value kept the stamp %r" % other)
    same = stamp_of(one(objects(helm.template("--post-renderer", "reload-agent", "--set", "replicas=3",
                                              "--set", "logLevel=debug")), "Deployment"))
    check(same == want, "values the ConfigMap does not hold changed the stamp: %r" % same)
    print("ok helm: the stamp follows the ConfigMap's content only")

    img = sidecar(one(objects(helm.template("--post-renderer", "reload-agent", "--post-renderer-args",
                                            "--image=registry.example/reload-agent:9")),
                      "Deployment"))["image"]
    check(img == "registry.example/reload-agent:9", "--post-renderer-args --image: sidecar image %r" % img)
    print("ok helm: --post-renderer-args reach inject")

    report = os.path.join(home, "report.txt")
    helm.env["RELOAD_AGENT_REPORT"] = report
    helm.template("--post-renderer", "reload-agent")
    with open(report) as f:
        text = f.read()
    check("deployment/web injected" in text, "RELOAD_AGENT_REPORT holds %r" % text)
    rc, _, err = helm.template("--post-renderer", "reload-agent", "--set", "broken=true", ok=False)
    check(rc != 0, "helm succeeded though inject refused its input")
    with open(report) as f:
        text = f.read()
    check("spec.template.spec.volumes" in text, "RELOAD_AGENT_REPORT lacks inject's error: %r" % text)
    del helm.env["RELOAD_AGENT_REPORT"]
    print("ok helm: an inject error fails helm (exit %d)" % rc)


KUSTOMIZATION = """resources:
- deployment.yaml
- configmap.yaml
transformers:
- reload-agent.yaml
"""

FN = """apiVersion: reload-agent.io/v1
kind: Inject
metadata:
  name: reload-agent
  annotations:
    config.kubernetes.io/function: |
      exec:
        path: %s
"""


def check_kustomize(binary, work, helm_out):
    kustomize = tool("kustomize", "kustomize")
    objs = objects(helm_out)
    dep, cm = one(objs, "Deployment"), one(objs, "ConfigMap")
    d = os.path.join(work, "kust")
    os.makedirs(d)
    # the chart's objects as plain files, fast sync on
    dep = yaml.safe_load(yaml.safe_dump(dep))
    dep["spec"]["template"]["metadata"]["annotations"]["reload-agent.io/fast-sync"] = "true"
    for name, obj in (("deployment.yaml", dep), ("configmap.yaml", cm)):
        with open(os.path.join(d, name), "w") as f:
            yaml.safe_dump(obj, f)
    with open(os.path.join(d, "kustomization.yaml"), "w") as f:
        f.write(KUSTOMIZATION)
    with open(os.path.join(d, "reload-agent.yaml"), "w") as f:
        f.write(FN % KRM_FN)
    env = dict(os.environ, RELOAD_AGENT=binary)
    out = run([kustomize, "build", "--enable-alpha-plugins", "--enable-exec", d], env=env)
    objs = objects(out)
    kdep = one(objs, "Deployment")
    side = sidecar(kdep)
    check("--fast-sync=true" in side["args"], "sidecar args %r" % side["args"])
    want = content_hash(one(objs, "ConfigMap"), MOUNT)
    check(stamp_of(kdep) == want, "kustomize stamp %r, want %s" % (stamp_of(kdep), want))
    role, binding = one(objs, "Role"), one(objs, "RoleBinding")
    check(role["metadata"]["namespace"] == "prod" and binding["roleRef"]["name"] == role["metadata"]["name"],
          "fast sync's Role and RoleBinding: %r %r" % (role["metadata"], binding["roleRef"]))
    check(not [o for o in objs if o.get("kind") == "Inject"], "the function's config is in the output")
    print("ok kustomize: the KRM exec function: sidecar, stamp %s…, fast sync's Role and "
          "RoleBinding" % want[:12])

    env["RELOAD_AGENT_ARGS"] = "--image registry.example/reload-agent:9"
    img = sidecar(one(objects(run([kustomize, "build", "--enable-alpha-plugins", "--enable-exec", d],
                                  env=env)), "Deployment"))["image"]
    check(img == "registry.example/reload-agent:9", "RELOAD_AGENT_ARGS --image: sidecar image %r" % img)
    print("ok kustomize: RELOAD_AGENT_ARGS reach inject")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "reload-agent"))
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    work = tempfile.mkdtemp(prefix="plugins-check-")
    try:
        check_helm(binary, work)
        helm = Helm(binary, work)
        check_kustomize(binary, work, helm.template())
    except (Fail, subprocess.TimeoutExpired) as e:
        print("FAIL %s" % e)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("plugins: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
