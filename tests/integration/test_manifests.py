"""Offline validation of manifests/ with the real kubectl and the real agent.

No cluster is used and nothing leaves the machine: kubectl gets a kubeconfig
pointing at https://127.0.0.1:1 (nothing listens there) and only runs
client-side commands:
  - `kubectl kustomize manifests/` builds the set (YAML syntax, the
    kustomization's resource list, the namespace transformer);
  - `kubectl annotate --local -o json` turns YAML into JSON (no PyYAML needed);
  - `kubectl set serviceaccount --local` decodes each workload into kubectl's
    compiled-in Go types and encodes it again (a no-op change, since the
    workloads already use that ServiceAccount): a wrong type fails to decode,
    and a misspelled or unknown field is dropped, which the test detects by
    comparing every leaf of the input with the round-tripped object.
kubectl cannot check what only the API server checks (admission, defaults,
OpenAPI validation needs the server), so the tests add explicit checks: the
Role is exactly the least privilege the agent needs, the agent runs as a
native sidecar with the fields the docs promise, and its args and pod
annotations are accepted by `reload-agent run --print-config` (the real
option parser, which rejects unknown flags and bad values with exit 2).

kubectl: $KUBECTL, else `kubectl` on PATH. If missing, the tests fail.
"""
import os
import re

from tests.lib.proc import check
from tests.lib.kubectl import Kubectl, leaves

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MANIFESTS = os.path.join(ROOT, "manifests")
FILES = ["role.yaml", "rbac.yaml", "configmap.yaml", "deployment-signal.yaml", "statefulset-rollout.yaml"]
AGENT = "reload-agent"
PREFIX = "reload-agent.io/"

# The requests the agent makes: owner chain GETs (kube/owner.c), template
# PATCHes (actions/rollout.c), core/v1 Event POSTs (kube/kevents.c). The
# usual reloader Role also grants cronjobs get and events patch; the agent
# never fetches a CronJob nor updates an Event. See role.yaml.
LEAST_PRIVILEGE = {
    ("", "pods"): {"get"},
    ("apps", "replicasets"): {"get"},
    ("apps", "deployments"): {"get", "patch"},
    ("apps", "statefulsets"): {"get", "patch"},
    ("apps", "daemonsets"): {"get", "patch"},
    ("batch", "jobs"): {"get"},
    ("argoproj.io", "rollouts"): {"get", "patch"},
    ("", "events"): {"create"},
}

# Fields newer than some kubectl releases: (path regex, first minor version
# whose types know it). An older kubectl drops them in the round trip; they
# are then left to the explicit checks below (restartPolicy: Always is
# checked in test_manifests_agent_is_a_hardened_native_sidecar).
NEWER_FIELDS = [(r"\.spec\.template\.spec\.initContainers\[\d+\]\.restartPolicy$", 28)]

def built(env):
    k = Kubectl(env)
    objs = k.to_json(k.run(["kustomize", MANIFESTS]))
    return k, objs


def by_kind(objs, kind):
    return [o for o in objs if o["kind"] == kind]


def workloads(objs):
    return by_kind(objs, "Deployment") + by_kind(objs, "StatefulSet")


def agent_container(w):
    spec = w["spec"]["template"]["spec"]
    cs = [c for c in spec.get("initContainers", []) if c["name"] == AGENT]
    check(len(cs) == 1, "%s: no initContainer named %s" % (w["metadata"]["name"], AGENT))
    return cs[0]


def app_containers(w):
    return w["spec"]["template"]["spec"]["containers"]


def flag_value(args, name):
    vals = [a.split("=", 1)[1] for a in args if a.startswith("--%s=" % name)]
    return vals[-1] if vals else None


def help_flags(env):
    r = env.run([env.binary, "run", "--help"])
    check(r.returncode == 0, "run --help failed")
    return set(re.findall(r"^\s+--([a-z][a-z0-9-]*)", r.stdout.decode(), re.M))


def test_manifests_kustomize_builds_the_whole_set(env):
    k, objs = built(env)
    print("  kubectl %s" % k.version())
    for f in FILES:
        check(os.path.exists(os.path.join(MANIFESTS, f)), "manifests/%s missing" % f)
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in objs)
    check(kinds == sorted([("ServiceAccount", AGENT), ("Role", AGENT), ("RoleBinding", AGENT),
                           ("ConfigMap", "web-nginx-conf"), ("ConfigMap", "kv-redis-conf"),
                           ("Deployment", "web"), ("Service", "kv"), ("StatefulSet", "kv")]),
          "objects built: %s" % kinds)
    for o in objs:
        check(o.get("apiVersion") and o["metadata"].get("namespace") == "default",
              "%s/%s: apiVersion or namespace missing" % (o["kind"], o["metadata"]["name"]))
    # Every file also parses on its own (kubectl apply -f FILE).
    for f in FILES:
        with open(os.path.join(MANIFESTS, f), "rb") as fh:
            check(k.to_json(fh.read()), "manifests/%s holds no object" % f)


def test_manifests_namespace_overlay_rewrites_the_binding(env):
    k = Kubectl(env)
    overlay = env.path("overlay")
    os.makedirs(overlay)
    with open(os.path.join(overlay, "kustomization.yaml"), "w") as f:
        # `bases` (deprecated, still read by kustomize v5) so that the
        # kustomize v2 inside kubectl < 1.21 reads it too.
        f.write("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                "namespace: prod\nbases:\n  - %s\n" % os.path.relpath(MANIFESTS, overlay))
    objs = k.to_json(k.run(["kustomize", overlay]))
    check(all(o["metadata"]["namespace"] == "prod" for o in objs), "namespace not applied")
    rb = by_kind(objs, "RoleBinding")[0]
    check(rb["subjects"] == [{"kind": "ServiceAccount", "name": AGENT, "namespace": "prod"}],
          "RoleBinding subjects after the overlay: %s" % rb["subjects"])


def test_manifests_workloads_survive_kubectl_typed_round_trip(env):
    k, objs = built(env)
    ws = workloads(objs)
    check(len(ws) == 2, "workloads: %d" % len(ws))
    for w in ws:
        before = leaves(w)
        after = leaves(k.typed_round_trip(w))
        lost = sorted(p for p in before if p not in after)
        newer = [p for p in lost for rx, minor in NEWER_FIELDS
                 if re.search(rx, p) and k.minor() < minor]
        if newer:
            print("  note: kubectl %s predates %s; checked explicitly instead" %
                  (k.version(), newer))
        lost = [p for p in lost if p not in newer]
        changed = sorted(p for p in before if p in after and after[p] != before[p])
        check(not lost, "%s/%s: fields unknown to kubectl %s's types (misspelled, or newer "
              "than this kubectl): %s" % (w["kind"], w["metadata"]["name"], k.version(), lost))
        check(not changed, "%s/%s: values changed by the round trip: %s" %
              (w["kind"], w["metadata"]["name"], changed))


def test_manifests_role_is_exactly_least_privilege(env):
    _, objs = built(env)
    roles = by_kind(objs, "Role")
    check(len(roles) == 1 and not by_kind(objs, "ClusterRole"), "want one Role, no ClusterRole")
    got = {}
    for rule in roles[0]["rules"]:
        check(set(rule) <= {"apiGroups", "resources", "verbs"},
              "rule with extra keys (resourceNames/nonResourceURLs?): %s" % rule)
        for g in rule["apiGroups"]:
            for r in rule["resources"]:
                check("*" not in (g, r) and "*" not in rule["verbs"], "wildcard in %s" % rule)
                got.setdefault((g, r), set()).update(rule["verbs"])
    check(got == LEAST_PRIVILEGE, "Role grants %s, the agent needs %s" % (
        sorted((k, sorted(v)) for k, v in got.items()),
        sorted((k, sorted(v)) for k, v in LEAST_PRIVILEGE.items())))
    rb = by_kind(objs, "RoleBinding")[0]
    check(rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                            "name": roles[0]["metadata"]["name"]}, "roleRef: %s" % rb["roleRef"])
    sa = by_kind(objs, "ServiceAccount")
    check([s["metadata"]["name"] for s in sa] == [AGENT], "ServiceAccounts: %s" % sa)
    check(rb["subjects"] == [{"kind": "ServiceAccount", "name": AGENT,
                              "namespace": sa[0]["metadata"]["namespace"]}],
          "RoleBinding subjects: %s" % rb["subjects"])


def test_manifests_agent_is_a_hardened_native_sidecar(env):
    _, objs = built(env)
    cms = {c["metadata"]["name"] for c in by_kind(objs, "ConfigMap")}
    for w in workloads(objs):
        name = "%s/%s" % (w["kind"], w["metadata"]["name"])
        tmpl = w["spec"]["template"]
        spec = tmpl["spec"]
        check(w["spec"]["selector"]["matchLabels"].items() <= tmpl["metadata"]["labels"].items(),
              "%s: selector does not match the template labels" % name)
        check(spec.get("serviceAccountName") == AGENT, "%s: serviceAccountName" % name)
        a = agent_container(w)
        check(a.get("restartPolicy") == "Always", "%s: sidecar restartPolicy must be Always" % name)
        check(a["image"] == "reload-agent:0.1.0", "%s: image %s" % (name, a["image"]))
        env_refs = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
                    for e in a.get("env", [])}
        check(env_refs.get("POD_NAME") == "metadata.name" and
              env_refs.get("POD_NAMESPACE") == "metadata.namespace", "%s: POD_NAME/POD_NAMESPACE "
              "must come from the downward API: %s" % (name, env_refs))
        sc = a.get("securityContext", {})
        check(sc.get("readOnlyRootFilesystem") is True and sc.get("allowPrivilegeEscalation") is
              False and sc.get("capabilities", {}).get("drop") == ["ALL"] and
              not sc.get("capabilities", {}).get("add") and not sc.get("privileged"),
              "%s: agent securityContext not hardened: %s" % (name, sc))
        res = a.get("resources", {})
        check(res.get("requests", {}).get("cpu") and res.get("requests", {}).get("memory") and
              res.get("limits", {}).get("memory"), "%s: agent resources: %s" % (name, res))
        # Volumes: every mount names a volume; ConfigMaps exist; no subPath on
        # ConfigMap mounts (never updated); the podinfo file is where the agent looks.
        vols = {v["name"]: v for v in spec["volumes"]}
        for c in [a] + app_containers(w):
            for m in c.get("volumeMounts", []):
                check(m["name"] in vols, "%s: %s mounts unknown volume %s" %
                      (name, c["name"], m["name"]))
                if "configMap" in vols[m["name"]]:
                    check("subPath" not in m and "subPathExpr" not in m,
                          "%s: %s mounts ConfigMap %s with subPath (never updated)" %
                          (name, c["name"], m["name"]))
        for v in vols.values():
            if "configMap" in v:
                check(v["configMap"]["name"] in cms, "%s: ConfigMap %s not in manifests/" %
                      (name, v["configMap"]["name"]))
        mounts = {m["mountPath"]: vols[m["name"]] for m in a["volumeMounts"]}
        podinfo = mounts.get("/etc/podinfo", {}).get("downwardAPI", {}).get("items", [])
        check({"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}} in
              podinfo, "%s: no downwardAPI annotations file at /etc/podinfo: %s" % (name, podinfo))
        # The watched path is a ConfigMap the app mounts at the same place.
        args = a["args"]
        check(args[0] == "run", "%s: args must start with the run subcommand" % name)
        watch = flag_value(args, "watch")
        check(watch and "configMap" in mounts.get(watch, {}),
              "%s: --watch %s is not a ConfigMap mount of the agent" % (name, watch))
        app_mounts = [(c["name"], m["name"]) for c in app_containers(w)
                      for m in c.get("volumeMounts", []) if m["mountPath"] == watch]
        check(app_mounts and all(v == [m for m in a["volumeMounts"]
                                       if m["mountPath"] == watch][0]["name"]
                                 for _, v in app_mounts),
              "%s: the app does not mount the watched volume at %s" % (name, watch))
        # Probes hit the port the agent listens on, on all addresses.
        listen = flag_value(args, "listen")
        check(listen and listen.rsplit(":", 1)[0] in ("0.0.0.0", "[::]", ""),
              "%s: --listen %s is not reachable by kubelet probes" % (name, listen))
        port = int(listen.rsplit(":", 1)[1])
        for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
            p = a.get(probe, {}).get("httpGet", {})
            check(p.get("path") == path and p.get("port") == port,
                  "%s: %s should GET %s on %d: %s" % (name, probe, path, port, p))


def test_manifests_args_and_annotations_accepted_by_the_agent(env):
    _, objs = built(env)
    known = help_flags(env)
    check({"watch", "action", "listen", "rollout-jitter"} <= known, "run --help parse: %s" % known)
    for w in workloads(objs):
        name = "%s/%s" % (w["kind"], w["metadata"]["name"])
        args = agent_container(w)["args"]
        for a in args[1:]:
            check(a.startswith("--") and "=" in a, "%s: arg %r: use --flag=value" % (name, a))
            check(a[2:].split("=", 1)[0] in known, "%s: %s is not a run flag" % (name, a))
        # The pod-template annotations as the downward API writes them
        # (key="Go-quoted value" lines), read by the real parser.
        ann = w["spec"]["template"]["metadata"].get("annotations", {})
        path = env.path("annotations-%s" % w["metadata"]["name"])
        with open(path, "w") as f:
            for key, v in sorted(ann.items()):
                f.write('%s="%s"\n' % (key, v.replace("\\", "\\\\").replace('"', '\\"')))
        for key in ann:
            if key.startswith(PREFIX):
                check(key[len(PREFIX):] in known, "%s: annotation %s names no flag" % (name, key))
        r = env.run([env.binary] + args + ["--annotations=" + path, "--print-config"])
        check(r.returncode == 0, "%s: the agent rejects its args/annotations: %s" %
              (name, r.stderr.decode(errors="replace")))
        eff = dict(re.findall(r"^(\S+)\s+= (.*?)\s+#", r.stdout.decode(), re.M))
        for key, v in ann.items():
            if key.startswith(PREFIX):
                check(re.search(r"^%s\s+= .*# annotation$" % re.escape(key[len(PREFIX):]),
                                r.stdout.decode(), re.M),
                      "%s: annotation %s not in force: %s" % (name, key, eff.get(key[len(PREFIX):])))


def test_manifests_signal_and_rollout_examples(env):
    _, objs = built(env)
    web = [w for w in workloads(objs) if w["metadata"]["name"] == "web"][0]
    kv = [w for w in workloads(objs) if w["metadata"]["name"] == "kv"][0]
    # signal: shared PID namespace and the kill(2) UID rule (same UID as the
    # app, or root); capabilities cannot help a non-root agent.
    wa = agent_container(web)
    check(flag_value(wa["args"], "action") == "signal" and
          flag_value(wa["args"], "process") == "nginx", "web agent args: %s" % wa["args"])
    check(web["spec"]["template"]["spec"].get("shareProcessNamespace") is True,
          "web: the signal action needs shareProcessNamespace: true")
    uid = wa["securityContext"].get("runAsUser")
    nginx = [c for c in app_containers(web) if c["name"] == "nginx"][0]
    check(uid == 0 or uid == nginx.get("securityContext", {}).get("runAsUser"),
          "web: agent UID %s cannot signal nginx running as %s" %
          (uid, nginx.get("securityContext", {}).get("runAsUser")))
    # rollout: the action, a rolling update strategy, no PID sharing needed.
    ka = agent_container(kv)
    check(flag_value(ka["args"], "action") == "rollout", "kv agent args: %s" % ka["args"])
    check(kv["spec"].get("updateStrategy", {}).get("type", "RollingUpdate") == "RollingUpdate",
          "kv: OnDelete would make the template patch replace nothing")
    check(not kv["spec"]["template"]["spec"].get("shareProcessNamespace"),
          "kv: rollout does not need shareProcessNamespace")
    check(kv["spec"]["serviceName"] in [s["metadata"]["name"] for s in by_kind(objs, "Service")],
          "kv: serviceName has no Service")
