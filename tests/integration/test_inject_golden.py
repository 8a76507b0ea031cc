"""The transform's golden files (tests/golden/inject/), checked by tools the
project did not write, and by the agent that will run the sidecar.

The cmocka test (tests/test_transform.c) compares the transform's output
with the goldens and applies the operations with our own JSON Patch. Here:
  - Debian's python3-jsonpatch (an independent RFC 6902 implementation)
    applies <case>.ops.json to <case>.in.json: the result must equal
    <case>.out.json;
  - every injected object is decoded into kubectl's compiled-in Go types
    and encoded again (`kubectl set serviceaccount --local`, a no-op with
    the object's own ServiceAccount; an Argo Rollout's template goes through
    as a Deployment's, the same PodTemplateSpec type): a wrong type fails,
    a misspelled or unknown field is dropped, which the comparison of every
    leaf detects (a field newer than kubectl's types, NEWER_FIELDS, is left
    out of that comparison, with a line saying so, on a kubectl before its
    release);
  - what only the API server checks and the injection could break: volume
    names unique, container names unique across init and regular
    containers, every volumeMount names a volume, no mountPath twice in a
    container, the sidecar is a native one;
  - the sidecar's args and the pod's annotations (as the downward-API file
    holds them) are accepted by the real agent: `reload-agent run ARGS
    --print-config --annotations FILE` exits 0 (the option parser that would
    exit 2 at start). An agent built without --env-watch (before the env
    options are merged) must reject exactly that flag and nothing else.

kubectl: $KUBECTL, else `kubectl` on PATH (as test_manifests.py).
"""
import glob
import json
import os

import jsonpatch

from tests.lib.kubectl import Kubectl, leaves
from tests.lib.proc import TestFailure, check

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "golden", "inject")
PREFIX = {"Pod": [], "CronJob": ["spec", "jobTemplate", "spec", "template"]}
# Container fields the injection writes that are newer than some kubectl:
# the element of the path, and the first minor release whose types hold
# it (restartPolicyRules: KEP-5307, k8s.io/api v0.34).
NEWER_FIELDS = {".restartPolicyRules": 34}


def cases():
    names = sorted(os.path.basename(p)[:-len(".in.json")]
                   for p in glob.glob(os.path.join(GOLDEN, "*.in.json")))
    check(len(names) >= 20, "golden cases: %d" % len(names))
    out = []
    for n in names:
        with open(os.path.join(GOLDEN, n + ".in.json")) as f:
            src = json.load(f)
        with open(os.path.join(GOLDEN, n + ".ops.json")) as f:
            ops = json.load(f)
        with open(os.path.join(GOLDEN, n + ".out.json")) as f:
            want = json.load(f)
        with open(os.path.join(GOLDEN, n + ".warn.txt")) as f:
            outcome = f.readline().strip()
        out.append((n, src, ops, want, outcome))
    return out


def template(obj):
    t = obj
    for k in PREFIX.get(obj["kind"], ["spec", "template"]):
        t = t[k]
    return t


def test_inject_golden_ops_apply_with_python_jsonpatch(env):
    n_ops = 0
    for name, src, ops, want, outcome in cases():
        got = jsonpatch.apply_patch(src, ops)
        check(got == want, "%s: python3-jsonpatch result differs from %s.out.json" % (name, name))
        check(bool(ops) == outcome.startswith("outcome: injected"),
              "%s: %d operations with %s" % (name, len(ops), outcome))
        n_ops += len(ops)
    print("  %d operations applied" % n_ops)


def injected(with_outcome="outcome: injected"):
    return [(n, w) for n, _, ops, w, o in cases() if o == with_outcome]


def test_inject_golden_outputs_survive_kubectl_typed_round_trip(env):
    k = Kubectl(env)
    done = 0
    unknown = [f for f, minor in NEWER_FIELDS.items() if k.minor() < minor]
    if unknown:
        print("  kubectl %s predates %s: left out of the comparison" % (k.version(), ", ".join(unknown)))
    for name, obj in injected():
        if obj["kind"] == "Rollout":  # no Argo types in kubectl: its PodTemplateSpec as a Deployment's
            obj = {"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": obj["metadata"]["name"]},
                   "spec": {"selector": obj["spec"]["selector"], "template": obj["spec"]["template"]}}
        sa = template(obj)["spec"].get("serviceAccountName", "default")
        path = os.path.join(k.dir, "%s.json" % name)
        with open(path, "w") as f:
            json.dump(obj, f)
        after = leaves(json.loads(k.run(["set", "serviceaccount", "--local", "-f", path, sa,
                                         "-o", "json"])))
        before = leaves(obj)
        lost = sorted(p for p in before if p not in after and not any(f in p for f in unknown))
        changed = sorted(p for p in before if p in after and after[p] != before[p])
        check(not lost, "%s: fields unknown to kubectl %s's types: %s" % (name, k.version(), lost))
        check(not changed, "%s: values changed by the round trip: %s" % (name, changed))
        done += 1
    check(done >= 15, "only %d injected goldens" % done)
    print("  %d objects round-tripped through kubectl %s" % (done, k.version()))


def test_inject_golden_outputs_are_valid_pods(env):
    for name, obj in injected() + injected("outcome: unchanged"):
        spec = template(obj)["spec"]
        vols = [v["name"] for v in spec.get("volumes", [])]
        check(len(vols) == len(set(vols)), "%s: volume names twice: %s" % (name, vols))
        for v in vols:
            check(len(v) <= 63 and v.replace("-", "").isalnum() and v == v.lower(),
                  "%s: volume name %r is not a DNS label" % (name, v))
        conts = spec.get("initContainers", []) + spec["containers"]
        names = [c["name"] for c in conts]
        check(len(names) == len(set(names)), "%s: container names twice: %s" % (name, names))
        for c in conts:
            paths = [m["mountPath"].rstrip("/") for m in c.get("volumeMounts", [])]
            check(len(paths) == len(set(paths)), "%s: %s mounts a path twice: %s" %
                  (name, c["name"], paths))
            claims = [t["metadata"]["name"] for t in obj["spec"].get("volumeClaimTemplates", [])]
            for m in c.get("volumeMounts", []):
                check(m["name"] in vols + claims, "%s: %s mounts %s, which is no volume" %
                      (name, c["name"], m["name"]))
        side = [c for c in spec.get("initContainers", []) if c["name"] == "reload-agent"]
        check(len(side) == 1 and side[0]["restartPolicy"] == "Always",
              "%s: no native reload-agent sidecar" % name)
        check(not [c for c in spec["containers"] if c["name"] == "reload-agent"],
              "%s: a plain reload-agent container" % name)
        sc = side[0]["securityContext"]
        check(sc["capabilities"] == {"drop": ["ALL"]} and sc["allowPrivilegeEscalation"] is False,
              "%s: securityContext %s" % (name, sc))
        if sc.get("runAsUser") != 0:
            check(sc["runAsNonRoot"] is True, "%s: securityContext %s" % (name, sc))
            continue
        # Root only beside a root app that signal/restart must reach: the app
        # states UID 0, or no UID and no runAsNonRoot (an image's default).
        app = spec["containers"][0]
        csc, psc = app.get("securityContext", {}), spec.get("securityContext", {})
        uid = csc.get("runAsUser", psc.get("runAsUser"))
        non_root = csc.get("runAsNonRoot", psc.get("runAsNonRoot"))
        check(sc["runAsNonRoot"] is False and (uid == 0 or (uid is None and non_root is not True)),
              "%s: a root sidecar beside app %s (securityContext %s)" % (name, csc or psc, sc))
        check(spec.get("shareProcessNamespace") is True,
              "%s: a root sidecar that signals nothing" % name)


def go_quote(s):
    """A Go-quoted string as the kubelet writes it in the annotations file
    (json.dumps with ASCII escapes is valid Go syntax)."""
    return json.dumps(s, ensure_ascii=True)


def test_inject_golden_sidecars_start_with_the_real_option_parser(env):
    r = env.run([env.binary, "run", "--help"])
    check(r.returncode == 0, "run --help failed")
    has_env = "--env-watch" in r.stdout.decode()
    checked = 0
    for name, obj in injected() + injected("outcome: unchanged"):
        t = template(obj)
        side = [c for c in t["spec"]["initContainers"] if c["name"] == "reload-agent"][0]
        check(side["args"][0] == "run", "%s: args %s" % (name, side["args"]))
        annots = t["metadata"].get("annotations", {})
        path = env.path("%s.annotations" % name)
        with open(path, "w") as f:
            f.write("\n".join("%s=%s" % (k, go_quote(v)) for k, v in sorted(annots.items())))
        r = env.run([env.binary] + side["args"] + ["--print-config", "--annotations", path])
        err = r.stderr.decode().strip()
        uses_env = any(a.startswith("--env-watch=") for a in side["args"])
        if uses_env and not has_env:
            check(r.returncode == 2 and err.endswith("unknown flag --env-watch (see --help)"),
                  "%s: an agent without --env-watch: rc %d, %s" % (name, r.returncode, err))
            print("  %s: this agent has no --env-watch yet (h-envstamp); rejected only that" % name)
            continue
        if r.returncode != 0:
            raise TestFailure("%s: the sidecar would not start: rc %d: %s" % (name, r.returncode, err))
        cfg = r.stdout.decode()
        for a in side["args"][1:]:
            if a.startswith("--watch="):
                check(a.split("=", 1)[1] in cfg, "%s: %s not in the effective config" % (name, a))
        checked += 1
    check(checked >= 15, "only %d sidecars checked" % checked)
    print("  %d sidecars accepted by the agent's option parser" % checked)
