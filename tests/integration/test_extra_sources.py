"""reload-agent.io/extra-sources (issue 29 item 1, docs/extra-sources.md):
`reload-agent inject` (the real binary) on a Deployment that names a
ConfigMap it neither mounts nor reads through env, then the real agent run
with the sidecar's args as inject wrote them (the in-container paths under
/reload-agent mapped into a temporary directory), on that ConfigMap laid
out by the kubelet's AtomicWriter (build/tools/awsim):

- a change of the extra source reloads the app with the pod's action
  (signal: a SIGHUP to a real process), not the env sources' rollout, and
  a per-file rule of the pod applies to it (a key ruled `none` changes
  nothing);
- the render-time stamp counts the extra source when the ConfigMap is in
  the input (it equals the hash of its files at their container paths,
  computed here from the test's own model), and is not written when the
  ConfigMap is not in the input (optional on the volume, yet not known).
"""
import hashlib
import json
import os

import yaml

from tests.lib.agent import QUIET, hupcount, hups_received, lines_of, volume
from tests.lib.kube import HASH_KEY
from tests.lib.proc import check

EXTRA = "/reload-agent/extra/configmap/flags"


def deployment(annotations, with_configmap=True, flags=None):
    ann = {"reload-agent.io/inject": "true", "reload-agent.io/extra-sources": "configmap/flags"}
    ann.update(annotations)
    docs = [{"apiVersion": "apps/v1", "kind": "Deployment",
             "metadata": {"name": "web", "namespace": "default"},
             "spec": {"selector": {"matchLabels": {"app": "web"}},
                      "template": {"metadata": {"labels": {"app": "web"}, "annotations": ann},
                                   "spec": {"containers": [{"name": "app", "image": "app:1"}]}}}}]
    if with_configmap:
        docs.append({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "flags", "namespace": "default"}, "data": flags or {}})
    return docs


def inject(env, docs):
    """Runs `reload-agent inject` on docs; returns (the output's documents,
    the report)."""
    path = env.path("in-%d.yaml" % len(os.listdir(env.tmp)))
    with open(path, "w") as f:
        yaml.safe_dump_all(docs, f)
    r = env.run([env.binary, "inject", "-f", path])
    check(r.returncode == 0, "inject: %s" % r.stderr.decode(errors="replace"))
    return list(yaml.safe_load_all(r.stdout)), r.stderr.decode()


def sidecar(dep):
    side = [c for c in dep["spec"]["template"]["spec"]["initContainers"]
            if c["name"] == "reload-agent"]
    check(len(side) == 1, "no sidecar in %r" % dep)
    return side[0]


def test_extra_source_reloads_with_the_pods_action(env):
    pid_file, out = env.path("app.pid"), env.path("hup.out")
    p = hupcount(env, pid_file, out)
    ann = {"reload-agent.io/action": "signal", "reload-agent.io/pid-file": pid_file,
           "reload-agent.io/rule": "*/quiet=none"}
    out_docs, report = inject(env, deployment(ann))
    check("deployment/web injected" in report, "report: %s" % report)
    dep = out_docs[0]
    side = sidecar(dep)
    check("--watch=" + EXTRA in side["args"], "args %r lack the extra source's --watch" % side["args"])
    vols = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
    check(vols.get("reload-agent-extra-cm-flags") ==
          {"name": "reload-agent-extra-cm-flags", "configMap": {"name": "flags", "optional": True}},
          "the extra volume: %r" % vols.get("reload-agent-extra-cm-flags"))
    check({"name": "reload-agent-extra-cm-flags", "mountPath": EXTRA, "readOnly": True}
          in side["volumeMounts"], "the sidecar's mounts: %r" % side["volumeMounts"])
    check(all("reload-agent-extra" not in json.dumps(c) for c in dep["spec"]["template"]["spec"]["containers"]),
          "the app container got the extra source")

    # the pod, here: the volume as the kubelet writes it, the annotations file
    root = env.path("pod")
    vol = os.path.join(root, EXTRA.lstrip("/"))
    os.makedirs(vol)
    os.makedirs(os.path.join(root, "reload-agent", "state"))
    env.awsim(vol, {"feature-a": "off\n", "quiet": "0\n"}, "--seed", "1")
    podinfo = volume(env, {"annotations": "".join(
        "%s=%s\n" % (k, json.dumps(v))
        for k, v in sorted(dep["spec"]["template"]["metadata"]["annotations"].items()))},
        name="podinfo")
    args = [a.replace("=/reload-agent/", "=" + root + "/reload-agent/") for a in side["args"][1:]]
    args += ["--annotations", os.path.join(podinfo, "annotations"), "--debounce", "50ms",
             "--resync", "0"]
    a = env.agent(args)
    a.wait_event("ready", timeout=15)

    env.awsim(vol, {"feature-a": "on\n", "quiet": "0\n"})
    a.wait_match("action", 10.0, action="signal", result="success")
    env.awsim(vol, {"feature-a": "on\n", "quiet": "1\n"})  # ruled none by the pod's rule
    a.wait_event("change", count=2, timeout=10)
    a.quiet(QUIET)
    acts = [e["action"] for e in a.of("action")]
    check(acts == ["signal", "none"], "actions %r: want signal, then none (the rule)" % acts)
    check(hups_received(p, out) == 1, "SIGHUPs: %r" % lines_of(out))
    check(not a.of("rollout") and not a.of("reconcile"), "an extra source rolled like an env source")


def test_stamp_counts_the_extra_source(env):
    flags = {"feature-a": "on\n", "limits.yaml": "rps: 10\n"}
    ann = {"reload-agent.io/action": "rollout"}
    out_docs, report = inject(env, deployment(ann, flags=flags))
    got = out_docs[0]["spec"]["template"]["metadata"]["annotations"].get(HASH_KEY)
    manifest = "".join("%s  %s/%s\n" % (hashlib.sha256(flags[k].encode()).hexdigest(), EXTRA, k)
                       for k in sorted(flags))
    want = hashlib.sha256(manifest.encode()).hexdigest()
    check(got == want, "stamp %r, want %s (report: %s)" % (got, want, report))

    out_docs, report = inject(env, deployment(ann, with_configmap=False))
    check(HASH_KEY not in out_docs[0]["spec"]["template"]["metadata"]["annotations"],
          "stamped without the ConfigMap in the input")
    check("deployment/web not stamped: configmap/flags is not in the input" in report,
          "report: %s" % report)
