"""`reload-agent inject` on real manifests, with independent checkers.

Inputs: the files of tests/upstream/ named in UPSTREAM (manifests the project
did not write: the Kubernetes website's examples, kubernetes/kubernetes test
data, the prometheus-operator and Argo Rollouts examples; their sources are
in tests/upstream/SOURCES.md) and small
fixtures written here for what they lack (opted-in workloads, Lists, JSON).

Checkers that share no code with the binary: PyYAML (python3-yaml) parses
every output, python3-jsonpatch applies `--output patch`, kubectl decodes the
objects with its own compiled-in types offline (as test_manifests.py does:
`annotate --local`, and `set serviceaccount --local` for a typed round trip
in which an unknown or misspelled field would be dropped), and `kubectl
kustomize` applies the patch output as a kustomization's `patches:`.
"""
import difflib
import errno
import json
import os
import re
import stat
import subprocess
import time

import jsonpatch
import yaml

from tests.lib.kubectl import Kubectl, json_docs, leaves
from tests.lib.proc import check

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UPSTREAM_DIR = os.path.join(ROOT, "tests", "upstream")
# The upstream files that get the strict checks (every one gets the corpus
# checks of test_corpus.py): small examples that cover every workload kind,
# Lists, multi-document streams and the ways a pod names its ConfigMaps.
UPSTREAM = [
    "argo-rollouts-notifications-configmap.yaml", "argo-rollouts-rollout-canary.yaml",
    "k8s-hack-testdata-list.yaml", "k8s-hack-testdata-multi-resource-yaml.yaml",
    "prometheus-operator-deployment.yaml", "website-application-deployment-sidecar.yaml",
    "website-application-guestbook-frontend-deployment.yaml", "website-application-job-cronjob.yaml",
    "website-application-mysql-configmap.yaml", "website-application-mysql-statefulset.yaml",
    "website-application-wordpress-deployment.yaml", "website-configmap-configmaps.yaml",
    "website-configmap-configure-pod.yaml", "website-configmap-env-configmap.yaml",
    "website-controllers-daemonset.yaml", "website-controllers-frontend.yaml", "website-controllers-job.yaml",
    "website-controllers-statefulset.yaml", "website-pods-config-redis-pod.yaml",
    "website-pods-inject-pod-secret-envFrom.yaml", "website-pods-inject-secret.yaml",
    "website-pods-pod-configmap-volume.yaml", "website-pods-pod-projected-svc-token.yaml",
]
AGENT = "reload-agent"
TYPED = {"Pod", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}

WEB = """# the web tier
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web   # keep this comment
  namespace: shop
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels:
        app: web
      annotations:
        reload-agent.io/inject: "true"
        reload-agent.io/action: rollout
    spec:
      containers:
      - name: app
        image: nginx:1.27
        volumeMounts:
        - name: conf
          mountPath: /etc/nginx/conf.d
        - name: extra
          mountPath: /etc/extra.conf
          subPath: extra.conf

      # the volumes
      volumes:
      - name: conf
        configMap:
          name: web-conf
      - name: extra
        configMap:
          name: web-conf
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-conf
  namespace: shop
data:
  default.conf: |
    server { listen 80; }
---
apiVersion: batch/v1
kind: Job
metadata:
  name: once
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox
"""

LIST = """apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: app-conf}
  data: {a.conf: "x=1"}
- apiVersion: batch/v1
  kind: CronJob
  metadata:
    name: nightly
  spec:
    schedule: "0 3 * * *"
    jobTemplate:
      spec:
        template:
          metadata:
            annotations:
              reload-agent.io/inject: "true"
          spec:
            restartPolicy: OnFailure
            containers:
            - name: job
              image: busybox
              envFrom:
              - configMapRef: {name: app-conf}
- apiVersion: v1
  kind: Pod
  metadata:
    name: loner
    annotations:
      reload-agent.io/inject: "true"
  spec:
    containers:
    - name: app
      image: nginx
      volumeMounts:
      - {name: cfg, mountPath: /cfg}
    volumes:
    - name: cfg
      secret: {secretName: s}
"""


def upstream_files():
    out = [os.path.join(UPSTREAM_DIR, f) for f in UPSTREAM]
    missing = [f for f in out if not os.path.isfile(f)]
    check(not missing, "upstream manifests missing: %s" % missing)
    return out


def inject(env, args, stdin=None):
    r = env.run([env.binary, "inject"] + list(args), input=stdin)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def inject_ok(env, args, stdin=None):
    rc, out, err = inject(env, args, stdin)
    check(rc == 0, "inject %s: exit %d: %s" % (" ".join(args), rc, err))
    return out, err


def report(err):
    """{"kind/name": outcome line} from the report (warnings skipped)."""
    rep = {}
    for line in err.splitlines():
        if line.startswith("  warning: ") or re.match(r"^\S+/\S+ (not )?stamped", line) or \
                re.match(r"^Kubernetes 1\.\d+ assumed ", line):
            continue
        m = re.match(r"^(\S+/\S+) (injected|passed through|skipped: .+|unchanged: .+|updated: .+)$",
                     line)
        check(m, "unexpected report line: %r" % line)
        rep[m.group(1)] = m.group(2)
    return rep


def docs_of(text):
    """The documents of a stream split at '---' lines (the upstream files
    and fixtures only use that form)."""
    parts, cur = [], []
    for line in text.splitlines(keepends=True):
        if line.rstrip("\r\n") == "---" and cur:
            parts.append("".join(cur))
            cur = []
        cur.append(line)
    parts.append("".join(cur))
    return parts


def name_of(o):
    return "%s/%s" % (o["kind"].lower(), o["metadata"]["name"])


def objects(docs):
    out = []
    for d in docs:
        if d is None:
            continue
        out += d["items"] if d.get("kind") == "List" else [d]
    return out


def sidecar(o):
    spec = o["spec"]
    if o["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]["template"]["spec"]
    elif o["kind"] != "Pod":
        spec = spec["template"]["spec"]
    cs = [c for c in spec.get("initContainers", []) if c["name"] == AGENT]
    check(len(cs) == 1, "%s: %d %s init containers" % (name_of(o), len(cs), AGENT))
    check(cs[0].get("restartPolicy") == "Always", "%s: not a native sidecar" % name_of(o))
    return cs[0]


def typed_round_trip(k, o):
    """Every leaf survives kubectl's typed decode (except the field set)."""
    back = k.typed_round_trip(o)
    a = {p: v for p, v in leaves(o).items() if "serviceAccount" not in p}
    b = {p: v for p, v in leaves(back).items() if "serviceAccount" not in p}
    lost = sorted(set(a) - set(b))
    check(not lost, "%s: kubectl's types dropped %s" % (name_of(o), lost[:5]))


def only_insertions(before, after, what):
    sm = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    bad = [op for op in sm.get_opcodes() if op[0] in ("delete", "replace")]
    check(not bad, "%s: lines changed or removed, not only added: %s" % (what, bad[:3]))


def comments_survive(before, after, what):
    pos = 0
    for line in before.splitlines():
        i = line.find("#")
        if i < 0:
            continue
        c = line[i:]
        j = after.find(c, pos)
        check(j >= 0, "%s: comment %r lost or out of order" % (what, c))
        pos = j + len(c)


def test_inject_upstream_manifests(env):
    k = Kubectl(env)
    injected = 0
    for path in upstream_files():
        rel = os.path.relpath(path, UPSTREAM_DIR)
        with open(path) as f:
            src = f.read()
        out, err = inject_ok(env, ["--all", path])
        out = out.decode()
        rep = report(err)
        in_objs = objects(list(yaml.safe_load_all(src)))
        out_objs = objects(list(yaml.safe_load_all(out)))
        check(len(in_objs) == len(out_objs), "%s: object count changed" % rel)
        check(sorted(rep) == sorted(name_of(o) for o in in_objs),
              "%s: report %s does not name every object" % (rel, sorted(rep)))
        # kubectl reads every object back
        kobjs = k.to_json(out.encode())
        check(len(kobjs) == len(out_objs), "%s: kubectl read %d objects" % (rel, len(kobjs)))
        for a, b in zip(in_objs, out_objs):
            n = name_of(a)
            if rep[n] == "injected":
                injected += 1
                sidecar(b)
                if b["kind"] in TYPED:
                    typed_round_trip(k, b)
            else:
                check(a == b, "%s: %s (%s) changed" % (rel, n, rep[n]))
        # documents whose objects were not injected are byte-identical
        din, dout = docs_of(src), docs_of(out)
        check(len(din) == len(dout), "%s: document count changed" % rel)
        for i, (a, b) in enumerate(zip(din, dout)):
            objs = objects([yaml.safe_load(a)])
            if all(rep[name_of(o)] != "injected" for o in objs):
                check(a == b, "%s: document %d is not byte-identical" % (rel, i + 1))
        # block YAML gets lines added, never changed; comments survive always
        flow = re.search(r"^\{", src, re.M)
        if not flow:
            only_insertions(src, out, rel)
        comments_survive(src, out, rel)
        # idempotent: injecting the output changes nothing
        again, err2 = inject_ok(env, ["--all", "-"], stdin=out.encode())
        check(again.decode() == out, "%s: a second inject changed the output" % rel)
        check("injected" not in report(err2).values(), "%s: injected twice" % rel)
    check(injected >= 7, "only %d upstream workloads were injected" % injected)


def test_inject_report_names_the_kube_version(env):
    """The report's last line says which Kubernetes version an injection
    assumed (the default 1.36, or --kube-version's); nothing injected: no line."""
    with open(env.path("web.yaml"), "w") as f:
        f.write(WEB)
    _, err = inject_ok(env, [env.path("web.yaml")])
    check(err.splitlines()[-1] == "Kubernetes 1.36 assumed (the default; --kube-version sets it)",
          "report: %s" % err)
    _, err = inject_ok(env, ["--kube-version", "v1.34.4", env.path("web.yaml")])
    check(err.splitlines()[-1] == "Kubernetes 1.34 assumed (--kube-version)", "report: %s" % err)
    with open(env.path("cm.yaml"), "w") as f:
        f.write("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: v}\n")
    _, err = inject_ok(env, [env.path("cm.yaml")])
    check("assumed" not in err, "report without an injection: %s" % err)


def test_inject_opt_in_report_and_warnings(env):
    with open(env.path("web.yaml"), "w") as f:
        f.write(WEB)
    out, err = inject_ok(env, [env.path("web.yaml")])
    lines = err.splitlines()
    check(lines[0] == "deployment/web injected", "report: %s" % lines)
    check(any(l.startswith("  warning: ") and "subPath" in l for l in lines),
          "no subPath warning: %s" % lines)
    check("configmap/web-conf passed through" in lines, "report: %s" % lines)
    check(any(l.startswith("job/once skipped: not opted in") for l in lines), "report: %s" % lines)
    out = out.decode()
    check(out.startswith("# the web tier\n"), "leading comment lost")
    check("  name: web   # keep this comment\n" in out and "      # the volumes\n" in out,
          "comments lost")
    only_insertions(WEB, out, "web.yaml")
    # the second run reports it as already injected
    _, err2 = inject_ok(env, ["-"], stdin=out.encode())
    check("deployment/web unchanged: already injected" in err2.splitlines(), err2)
    # a volume added after the injection: mirrored on the next run, by
    # added lines only (the sidecar's mount and --watch, the status replaced)
    later = out.replace("""        - name: extra
          mountPath: /etc/extra.conf
          subPath: extra.conf
""", """        - name: extra
          mountPath: /etc/extra.conf
          subPath: extra.conf
        - name: later
          mountPath: /etc/later
""", 1).replace("""      - name: extra
        configMap:
          name: web-conf
""", """      - name: extra
        configMap:
          name: web-conf
      - name: later   # added later
        secret: {secretName: later}
""", 1)
    check(later.count("later") == 5, "fixture edit failed")
    out5, err5 = inject_ok(env, ["-"], stdin=later.encode())
    check(report(err5)["deployment/web"] == "injected", err5)
    d = list(difflib.unified_diff(later.splitlines(), out5.decode().splitlines(), lineterm="",
                                  n=0))
    removed = [l for l in d if l.startswith("-") and not l.startswith("---")]
    check(len(removed) == 2 and "inject-status" in removed[0] and "sync-objects" in removed[1],
          "changed lines: %s" % removed)
    added = [l for l in d if l.startswith("+") and "sync-objects" in l]
    check(len(added) == 1 and "configmap/web-conf,secret/later" in added[0],
          "the sync service's objects do not name the later Secret: %s" % added)
    agent = sidecar(yaml.safe_load_all(out5).__next__())
    check("--watch=/etc/later" in agent["args"] and
          {"name": "later", "mountPath": "/etc/later", "readOnly": True} in agent["volumeMounts"],
          "the later volume is not mirrored: %s" % agent)
    # --all injects the Job too (a native sidecar, never a plain container)
    out3, err3 = inject_ok(env, ["--all", env.path("web.yaml")])
    check(report(err3)["job/once"] == "skipped: nothing to watch: the app mounts no ConfigMap, "
          "Secret or projected volume and reads none through env", err3)
    # a hostPID pod is refused with its reason
    _, err4 = inject_ok(env, ["--all", "-"], stdin=b"apiVersion: v1\nkind: Pod\nmetadata:\n"
                        b"  name: h\nspec:\n  hostPID: true\n  containers:\n  - name: a\n"
                        b"    image: x\n")
    check(err4.strip() == "pod/h skipped: hostPID pods are not injected", err4)


def test_inject_list_items(env):
    k = Kubectl(env)
    out, err = inject_ok(env, ["-f", "-"], stdin=LIST.encode())
    rep = report(err)
    check(rep == {"configmap/app-conf": "passed through", "cronjob/nightly": "injected",
                  "pod/loner": "injected"}, "report: %s" % rep)
    docs = list(yaml.safe_load_all(out))
    check(len(docs) == 1 and docs[0]["kind"] == "List", "the List is not one List")
    items = docs[0]["items"]
    check(items[0] == yaml.safe_load(LIST)["items"][0], "the ConfigMap item changed")
    args = sidecar(items[1])["args"]
    check(any(a.startswith("--env-watch=/reload-agent/env/configmap/app-conf") for a in args),
          "CronJob sidecar args: %s" % args)
    check(items[1]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["name"]
          == "job", "the CronJob's containers changed")
    sidecar(items[2])
    for o in k.to_json(out):
        if o["kind"] in TYPED:
            typed_round_trip(k, o)
    only_insertions(LIST, out.decode(), "list")


def test_inject_json_input_and_output(env):
    k = Kubectl(env)
    # kubectl's own JSON (a List of everything in WEB), as `kubectl get -o json` gives
    objs = k.to_json(WEB.encode())
    src = json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}, indent=4) + "\n"
    out, err = inject_ok(env, ["-"], stdin=src.encode())
    got = json.loads(out)  # JSON in, JSON out
    check(got["kind"] == "List" and len(got["items"]) == 3, "not one List of 3")
    check(report(err)["deployment/web"] == "injected", err)
    sidecar(got["items"][0])
    check(got["items"][1] == objs[1] and got["items"][2] == objs[2], "other items changed")
    check(out.decode().startswith("{\n    \"apiVersion\""), "indentation not kept: %r"
          % out[:30])
    # nothing to inject: the JSON comes out byte for byte
    cm = json.dumps(objs[1], indent=2)
    out2, _ = inject_ok(env, ["-"], stdin=cm.encode())
    check(out2.decode() == cm, "a JSON ConfigMap did not pass through byte for byte")
    # --output json: one JSON document per YAML document
    out3, _ = inject_ok(env, ["-o", "json", "-"], stdin=WEB.encode())
    docs = json_docs(out3)
    check([d["kind"] for d in docs] == ["Deployment", "ConfigMap", "Job"], "json docs")
    check(docs[0] == objects(list(yaml.safe_load_all(inject_ok(env, ["-"], WEB.encode())[0])))[0],
          "--output json differs from the YAML output")


def test_inject_patch_output_applies(env):
    k = Kubectl(env)
    src = WEB + "---\n" + LIST
    full, _ = inject_ok(env, ["-"], stdin=src.encode())
    want = {name_of(o): o for o in objects(list(yaml.safe_load_all(full)))}
    orig = {name_of(o): o for o in objects(list(yaml.safe_load_all(src)))}
    out, _ = inject_ok(env, ["-o", "patch", "-"], stdin=src.encode())
    entries = yaml.safe_load(out)
    check(isinstance(entries, list) and len(entries) == 3, "patch entries: %s" % entries)
    for e in entries:
        t = e["target"]
        n = "%s/%s" % (t["kind"].lower(), t["name"])
        ops = yaml.safe_load(e["patch"])
        got = jsonpatch.apply_patch(orig[n], ops)
        check(got == want[n], "%s: the patch does not give the injected object" % n)
    check(entries[0]["target"] == {"kind": "Deployment", "name": "web", "namespace": "shop"},
          "target: %s" % entries[0]["target"])
    # kustomize applies it as it is: paste under `patches:`
    kdir = env.path("kust")
    os.makedirs(kdir)
    with open(os.path.join(kdir, "web.yaml"), "w") as f:
        f.write(WEB)
    with open(os.path.join(kdir, "kustomization.yaml"), "w") as f:
        f.write("resources:\n- web.yaml\npatches:\n")
        f.write(inject_ok(env, ["-o", "patch", os.path.join(kdir, "web.yaml")])[0].decode())
    built = {name_of(o): o for o in k.to_json(k.run(["kustomize", kdir]))}
    check(built["deployment/web"] == k.to_json(yaml.safe_dump(want["deployment/web"]).encode())[0],
          "kustomize with the patch does not build the injected Deployment")
    # JSON input: the patches as JSON, "patch" an array of operations
    jsrc = json.dumps(yaml.safe_load(docs_of(WEB)[0]))
    jout, _ = inject_ok(env, ["-o", "patch", "-"], stdin=jsrc.encode())
    jp = json.loads(jout)
    jwant = json.loads(inject_ok(env, ["-"], stdin=jsrc.encode())[0])
    check(len(jp) == 1 and jsonpatch.apply_patch(json.loads(jsrc), jp[0]["patch"]) == jwant,
          "JSON patch output")


def test_inject_in_place_is_atomic(env):
    d = env.path("m")
    os.makedirs(d)
    a, b, c = (os.path.join(d, n) for n in ("a.yaml", "b.yaml", "c.yaml"))
    with open(a, "w") as f:
        f.write(WEB)
    os.chmod(a, 0o640)
    with open(c, "w") as f:
        f.write("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    with open(b, "w") as f:
        f.write("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  bad: [1, 2\n")
    before = {p: (open(p, "rb").read(), os.stat(p)) for p in (a, b, c)}
    rc, out, err = inject(env, ["-i", a, b, c])
    check(rc == 1, "exit %d with a malformed file" % rc)
    check(("%s: document 1, line 6:" % b) in err, "error: %s" % err)
    check(out == b"", "something was printed")
    for p, (data, st) in before.items():
        check(open(p, "rb").read() == data and os.stat(p).st_ino == st.st_ino,
              "%s was touched although an input failed" % p)
    check(sorted(os.listdir(d)) == ["a.yaml", "b.yaml", "c.yaml"], "temp files left: %s"
          % os.listdir(d))
    os.unlink(b)
    _, err = inject_ok(env, ["-i", a, c])
    check("deployment/web injected" in err, err)
    new = open(a).read()
    check(new != WEB and new.startswith("# the web tier\n"), "a.yaml not rewritten")
    check(new == inject_ok(env, ["-"], stdin=WEB.encode())[0].decode(), "-i differs from stdout")
    st = os.stat(a)
    check(stat.S_IMODE(st.st_mode) == 0o640, "mode not kept: %o" % st.st_mode)
    check(st.st_ino != before[a][1].st_ino, "not replaced by a rename")
    check(os.stat(c).st_ino == before[c][1].st_ino, "an unchanged file was rewritten")
    check(sorted(os.listdir(d)) == ["a.yaml", "c.yaml"], "temp files left")
    # a symlink: its target is rewritten, the link stays a link
    t = os.path.join(d, "target.yaml")
    with open(t, "w") as f:
        f.write(WEB)
    link = env.path("link.yaml")
    os.symlink(t, link)
    inject_ok(env, ["-i", link])
    check(os.path.islink(link) and os.readlink(link) == t, "the symlink was replaced")
    check(open(t).read() == new, "the link's target was not rewritten")
    os.unlink(t)
    rc, _, err = inject(env, ["-i"], stdin=WEB.encode())
    check(rc == 2 and "stdin" in err, "-i with stdin: exit %d: %s" % (rc, err))
    rc, _, err = inject(env, ["-i", "-o", "json", a])
    check(rc == 2, "-i with -o json: exit %d" % rc)


def test_inject_malformed_and_usage_errors(env):
    bad = "a: 1\n---\nb: 2\n---\nkind: ConfigMap\nmetadata:\n  name: x\n  x: [1,\n"
    rc, out, err = inject(env, ["-"], stdin=bad.encode())
    check(rc == 1 and out == b"", "exit %d, %d bytes out" % (rc, len(out)))
    check(re.match(r"^reload-agent inject: <stdin>: document 3, line 9: ", err), err)
    for text, what in (("kind: ConfigMap\nmetadata:\n  name: a\n  name: b\n",
                        "document 1, line 4: duplicate key \"name\""),
                       ("kind: ConfigMap\nmetadata:\n\tname: a\n", "document 1, line 3: "),
                       ("kind: ConfigMap\ndata: *x\n", "undefined alias")):
        rc, out, err = inject(env, ["-"], stdin=text.encode())
        check(rc == 1 and out == b"" and what in err, "%r: exit %d: %s" % (text, rc, err))
    # the good file before the bad one is not printed either
    good = env.path("good.yaml")
    with open(good, "w") as f:
        f.write(WEB)
    missing = env.path("missing.yaml")
    rc, out, err = inject(env, [good, missing])
    check(rc == 1 and out == b"", "exit %d" % rc)
    check(err.strip() == "reload-agent inject: %s: No such file or directory" % missing, err)
    for args in (["--bogus"], ["-o", "xml"], ["--image"]):
        rc, _, err = inject(env, args, stdin=b"")
        check(rc == 2 and "usage:" in err, "%s: exit %d" % (args, rc))
    r = env.run([env.binary, "inject", "--help"])
    check(r.returncode == 0 and b"*.yaml" in r.stdout and b"--output" in r.stdout, "help")


def test_inject_directories_and_streams(env):
    d = env.path("tree")
    os.makedirs(os.path.join(d, "sub"))
    os.makedirs(os.path.join(d, ".hidden"))
    files = {"b.yml": "\ufeffkind: ConfigMap\nmetadata: {name: b}\n",  # a BOM
             "a.yaml": "# a\nkind: ConfigMap\nmetadata: {name: a}",  # no final newline
             "sub/c.json": '{"kind": "ConfigMap", "metadata": {"name": "c"}}',
             "sub/d.txt": "kind: ConfigMap\nmetadata: {name: d}\n",
             ".hidden/e.yaml": "kind: ConfigMap\nmetadata: {name: e}\n",
             "z.yaml": "%YAML 1.1\n---\nkind: ConfigMap\nmetadata: {name: z}\n"}
    for n, t in files.items():
        with open(os.path.join(d, n), "w", encoding="utf-8") as f:
            f.write(t)
    out, err = inject_ok(env, [d])
    check(err.splitlines() == ["configmap/a passed through", "configmap/b passed through",
                               "configmap/c passed through", "configmap/z passed through"],
          "walk order or filter: %s" % err.splitlines())
    names = [o["metadata"]["name"] for o in yaml.safe_load_all(out)]
    check(names == ["a", "b", "c", "z"], "joined stream reads as %s" % names)
    # a joined stream goes through inject again unchanged
    again, _ = inject_ok(env, ["-"], stdin=out)
    check(again == out, "the joined stream is not stable")


def test_inject_stamps_the_config_hash(env):
    """The stamp `inject` writes equals `reload-agent hash` over the volume
    the kubelet's AtomicWriter (build/tools/awsim) lays out from the same
    ConfigMap: every file is rollout-class (action rollout, no rules)."""
    vol = env.path("vol")
    os.makedirs(vol)
    data = {"default.conf": "server { listen 80; }\n", "mime.types": "types {}\n"}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-conf"},
          "data": data}
    dep = yaml.safe_load(WEB.split("---\n")[0])
    dep["metadata"].pop("namespace")
    spec = dep["spec"]["template"]["spec"]
    spec["containers"][0]["volumeMounts"] = [{"name": "conf", "mountPath": vol}]
    spec["volumes"] = [spec["volumes"][0]]
    src = yaml.safe_dump(dep) + "---\n" + yaml.safe_dump(cm)
    out, err = inject_ok(env, ["-"], stdin=src.encode())
    objs = list(yaml.safe_load_all(out))
    ann = objs[0]["spec"]["template"]["metadata"]["annotations"]
    stamp = ann.get("reload-agent.io/config-hash")
    check(stamp and re.match(r"^[0-9a-f]{64}$", stamp), "no stamp: %s" % ann)
    check("deployment/web stamped reload-agent.io/config-hash=%s\u2026" % stamp[:12]
          in err.splitlines(), "report: %s" % err)
    env.awsim(vol, data)
    check(env.hash_of(vol) == stamp, "the stamp differs from reload-agent hash of the volume")
    # idempotent; a content change changes only the stamp
    check(inject_ok(env, ["-"], stdin=out)[0] == out, "stamping twice changed the output")
    changed = out.decode().replace("listen 80", "listen 81")
    again, err2 = inject_ok(env, ["-"], stdin=changed.encode())
    only = [l for l in difflib.unified_diff(changed.splitlines(), again.decode().splitlines(),
                                            lineterm="", n=0) if l[:1] in "+-" and l[:3] not in
            ("+++", "---")]
    check(len(only) == 2 and all("reload-agent.io/config-hash" in l for l in only),
          "a content change changed more than the stamp: %s" % only)
    data2 = dict(data, **{"default.conf": "server { listen 81; }\n"})
    env.awsim(vol, data2)
    new = list(yaml.safe_load_all(again))[0]["spec"]["template"]["metadata"]["annotations"]
    check(new["reload-agent.io/config-hash"] == env.hash_of(vol), "restamp differs from the hash")
    # issue 16.13: the report says the stamp was replaced, not "unchanged"
    check("deployment/web updated: already injected, its stamp replaced" in err2.splitlines(),
          err2)
    check("deployment/web unchanged: already injected" in
          inject_ok(env, ["-"], stdin=again)[1].splitlines(), "not unchanged once restamped")
    # the patch output carries the stamp as one more operation
    p, _ = inject_ok(env, ["-o", "patch", "-"], stdin=src.encode())
    ops = yaml.safe_load(yaml.safe_load(p)[0]["patch"])
    check(ops[-1]["path"] == "/spec/template/metadata/annotations/reload-agent.io~1config-hash"
          and ops[-1]["value"] == stamp, "last op: %s" % ops[-1])
    # without the ConfigMap in the input: no stamp, and the report says why
    out3, err3 = inject_ok(env, ["-"], stdin=yaml.safe_dump(dep).encode())
    check("config-hash" not in out3.decode(), "stamped without its ConfigMap")
    check(any(l.startswith("deployment/web not stamped: ") and "web-conf" in l
              for l in err3.splitlines()), "report: %s" % err3)


def test_inject_joined_inputs_keep_their_values(env):
    """Issue 16.6: a file without a final line break that ends in a `|` or
    `|+` block scalar (microservices-demo's otel-collector ConfigMap): joined
    with the next input, its value is kept, and `-o json` of the same run
    agrees with the YAML output; one whose value a break would change is an
    error naming it."""
    names = []
    for i, tail in enumerate(("|\n    receivers:\n      otlp: {}", "|+\n    x",
                              ">\n    folded\n    text", "|+\n    x\n\n  ")):
        p = env.path("cm%d.yaml" % i)
        with open(p, "w") as f:
            f.write("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm%d\ndata:\n"
                    "  conf: %s" % (i, tail))
        names.append(p)
    last = env.path("z.yaml")
    with open(last, "w") as f:
        f.write("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: z}\n")
    want = [yaml.safe_load(open(p)) for p in names]
    out, _ = inject_ok(env, names + [last])
    got = [d for d in yaml.safe_load_all(out) if d is not None]
    check(got[:4] == want, "joined values changed: %r" % [d["data"] for d in got[:4]])
    check(json_docs(inject_ok(env, ["-o", "json"] + names + [last])[0]) == got,
          "-o json differs from the joined YAML")
    check(inject_ok(env, ["-"], stdin=out)[0] == out, "the joined stream is not stable")
    bad = env.path("bad.yaml")
    with open(bad, "w") as f:
        f.write("a: |\n  x\n\n   ")  # a last line of spaces past the indentation: content
    rc, _, err = inject(env, [bad, last])
    check(rc == 1 and ("%s: it ends in a block scalar without a final line break" % bad) in err,
          "exit %d: %s" % (rc, err))


def test_inject_json_streams(env):
    """Issue 16.8: a stream of JSON documents (what `-o json` prints for
    several documents, and `kubectl get -o json` for several objects) is
    read back: its documents injected like any, the others byte for byte,
    `-o json` equal to it, a second run unchanged; a malformed document is
    named with its line."""
    k = Kubectl(env)
    objs = k.to_json(WEB.encode())
    texts = [json.dumps(o, indent=2) for o in objs]
    src = "\n".join(texts) + "\n"
    out, err = inject_ok(env, ["-"], stdin=src.encode())
    check(report(err)["deployment/web"] == "injected", err)
    got = json_docs(out)
    check(len(got) == 3 and got[1] == objs[1] and got[2] == objs[2], "documents: %r" % got)
    sidecar(got[0])
    s = out.decode()
    check(s.endswith("\n" + texts[1] + "\n" + texts[2] + "\n"), "the other documents changed")
    check(json_docs(inject_ok(env, ["-o", "json", "-"], stdin=src.encode())[0]) == got,
          "-o json differs")
    check(inject_ok(env, ["-"], stdin=out)[0] == out, "a second run changed the stream")
    # -o json's own output of a YAML stream reads back
    j = inject_ok(env, ["-o", "json", "-"], stdin=WEB.encode())[0]
    check(inject_ok(env, ["-"], stdin=j)[0] == j, "-o json output does not read back unchanged")
    bad = texts[0] + "\n" + '{"kind": "ConfigMap",\n "a": 1,\n "a": 2}\n'
    rc, _, err = inject(env, ["-"], stdin=bad.encode())
    line = texts[0].count("\n") + 4
    check(rc == 1 and ("document 2, line %d: duplicate key \"a\"" % line) in err,
          "exit %d: %s" % (rc, err))
    rc, _, err = inject(env, ["-"], stdin=(texts[1] + "\n{a: 1}\n").encode())
    check(rc == 1 and "document 2, line" in err and "not JSON" in err, "exit %d: %s" % (rc, err))
    # joined with YAML inputs, its documents stay documents of one YAML stream
    a, b = env.path("stream.json"), env.path("web.yaml")
    with open(a, "w") as f:
        f.write(src)
    with open(b, "w") as f:
        f.write(WEB)
    for order in ((a, b), (b, a)):
        joined, _ = inject_ok(env, list(order))
        want = [d for p in order for d in (got if p == a else
                                           list(yaml.safe_load_all(inject_ok(env, [b])[0])))]
        check(list(yaml.safe_load_all(joined)) == want, "a joined JSON stream: %r" % joined[:200])
        check(inject_ok(env, ["-"], stdin=joined)[0] == joined, "the joined stream is not stable")


def test_inject_in_place_refuses_a_changed_file_and_keeps_owner_and_links(env):
    """Issue 16.11: -i compares what it read with what is there before the
    rename: a file changed while inject ran is not overwritten (inject is
    held on a FIFO input, read after it, while the test changes it); the
    owner is kept (the tests run as root); a file with hard links is
    refused, not detached from its other names."""
    d = env.path("m")
    os.makedirs(d)
    a, fifo = os.path.join(d, "a.yaml"), os.path.join(d, "held.yaml")
    with open(a, "w") as f:
        f.write(WEB)
    os.mkfifo(fifo)
    p = subprocess.Popen([env.binary, "inject", "-i", a, fifo], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    edited = WEB.replace("keep this comment", "edited meanwhile")
    try:
        # inject opens the FIFO once it has read a.yaml (bounded: 30 s)
        fd, deadline = None, time.monotonic() + 30
        while fd is None and p.poll() is None and time.monotonic() < deadline:
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as e:
                check(e.errno == errno.ENXIO, "opening the FIFO: %s" % e)
                time.sleep(0.02)
        check(fd is not None, "inject never opened its FIFO input")
        with open(a, "w") as g:
            g.write(edited)
        os.write(fd, b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: held}\n")
        os.close(fd)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    err = err.decode()
    check(p.returncode == 1 and ("%s: changed while inject ran: nothing written" % a) in err,
          "exit %d: %s" % (p.returncode, err))
    check(open(a).read() == edited, "the edit made meanwhile was overwritten")
    check(sorted(os.listdir(d)) == ["a.yaml", "held.yaml"], "temp files left: %s" % os.listdir(d))
    # the owner stays
    os.unlink(fifo)
    os.chown(a, 1234, 5678)
    inject_ok(env, ["-i", a])
    st = os.stat(a)
    check((st.st_uid, st.st_gid) == (1234, 5678) and "reload-agent" in open(a).read(),
          "owner %d:%d after -i" % (st.st_uid, st.st_gid))
    # a hard link: refused, both names keep the same content
    b, link = os.path.join(d, "b.yaml"), os.path.join(d, "b-link.yaml")
    with open(b, "w") as f:
        f.write(WEB)
    os.link(b, link)
    rc, _, err = inject(env, ["-i", b])
    check(rc == 1 and ("%s: has 2 hard links" % b) in err, "exit %d: %s" % (rc, err))
    check(open(b).read() == WEB and os.stat(b).st_ino == os.stat(link).st_ino,
          "the hard-linked file was touched")


def test_inject_walk_skips_link_loops_and_dangling_links(env):
    """Issue 16.12: a directory with a symlink loop or a dangling *.yaml
    link is walked: those entries are skipped, each with a report line."""
    d = env.path("tree")
    os.makedirs(os.path.join(d, "sub"))
    with open(os.path.join(d, "a.yaml"), "w") as f:
        f.write("kind: ConfigMap\nmetadata: {name: a}\n")
    os.symlink("nowhere.yaml", os.path.join(d, "dangling.yaml"))
    os.symlink("..", os.path.join(d, "sub", "up"))
    os.symlink("l2", os.path.join(d, "l1"))
    os.symlink("l1", os.path.join(d, "l2"))
    out, err = inject_ok(env, [d])
    lines = err.splitlines()
    check(lines == ["%s/dangling.yaml skipped: a dangling symbolic link" % d,
                    "%s/l1 skipped: a symbolic link loop" % d,
                    "%s/l2 skipped: a symbolic link loop" % d,
                    "%s/sub/up skipped: a symbolic link loop (it leads back to a directory being "
                    "walked)" % d,
                    "configmap/a passed through"], "report: %s" % lines)
    check(out.decode() == "kind: ConfigMap\nmetadata: {name: a}\n", "output %r" % out)


def test_inject_joined_inputs_separators(env):
    """Found by fuzzing the joins (tests/fuzz/fuzz_manifests.c): the separator
    between two inputs follows YAML's rules, so the joined stream holds the
    inputs' documents: "---:" and an indented "---" are content, not a
    marker; a lone CR ends a line; an input of only comments and blank
    lines after a block scalar is kept out of it ("..." ends the document);
    a stream of JSON documents gets "---" between its documents."""
    cases = [
        ("a: 1\n", "---: x\n"),
        ("a: 1\n", "# c\n   ---\n"),
        ("a: 1\n", "# c\rb: 2\n"),
        ("a: |\n  x\n", "    # only a comment\n\n  \n"),
        ('{"a": 1}\n{"b": 2}\n', "c: 3\n"),
    ]
    for i, (first, second) in enumerate(cases):
        a, b = env.path("j%da.yaml" % i), env.path("j%db.yaml" % i)
        with open(a, "w", newline="") as f:
            f.write(first)
        with open(b, "w", newline="") as f:
            f.write(second)
        want = [d for t in (first, second) for d in
                (json_docs(t.encode()) if t.startswith("{") else yaml.safe_load_all(t))
                if d is not None]
        out, _ = inject_ok(env, [a, b])
        got = [d for d in yaml.safe_load_all(out.decode()) if d is not None]
        check(got == want, "case %d: joined %r reads %r, want %r" % (i, out, got, want))
        check(inject_ok(env, ["-"], stdin=out)[0] == out, "case %d: not stable" % i)


FAST = """# the web tier, fast sync on
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
      annotations:
        reload-agent.io/inject: "true"
        reload-agent.io/fast-sync: "true"
        reload-agent.io/action: signal
        reload-agent.io/process: nginx
    spec:
      serviceAccountName: web
      containers:
      - name: app
        image: nginx:1.27
        securityContext: {runAsUser: 101}
        env:
        - name: PASSWORD
          valueFrom:
            secretKeyRef: {name: db, key: password}
        volumeMounts:
        - {name: conf, mountPath: /etc/nginx/conf.d}
      volumes:
      - name: conf
        configMap: {name: site}
      - name: unused
        configMap: {name: not-mounted}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: site, namespace: shop}
data: {site.conf: "v0"}
"""


def test_inject_fast_sync_writes_its_rbac(env):
    """Issue 18 item 4: a workload opted into fast sync comes out with its
    sidecar flags, and after the input's documents the Role (resourceNames
    of exactly the objects it watches) and the RoleBinding to its
    ServiceAccount, which kubectl decodes; the rest of the input is only
    added to; a second run, and -i run twice, change nothing more;
    --output rbac prints only the two; the policy is named, not written."""
    out, err = inject_ok(env, ["-"], stdin=FAST.encode())
    text = out.decode()
    only_insertions(FAST, text, "fast sync")
    docs = list(yaml.safe_load_all(text))
    check([d["kind"] for d in docs] == ["Deployment", "ConfigMap", "Role", "RoleBinding"],
          "kinds: %r" % [d["kind"] for d in docs])
    args = sidecar(docs[0])["args"]
    fs = [a for a in args if a.startswith("--fast-sync")]
    check(fs == ["--fast-sync=true", "--fast-sync-objects=configmap/site",
                 "--fast-sync-objects=secret/db"], "fast-sync args: %r" % fs)
    role, binding = docs[2], docs[3]
    name = "reload-agent-fast-sync-deployment-web"
    check(role["metadata"]["name"] == name and role["metadata"]["namespace"] == "shop",
          "role metadata: %r" % role["metadata"])
    named = {r["resources"][0]: r.get("resourceNames") for r in role["rules"]}
    check(named == {"pods": None, "fastsync": None, "configmaps": ["site"], "secrets": ["db"]},
          "role rules: %r" % role["rules"])
    check(binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                 "name": name}, "roleRef: %r" % binding["roleRef"])
    check(binding["subjects"] == [{"kind": "ServiceAccount", "name": "web", "namespace": "shop"}],
          "subjects: %r" % binding["subjects"])
    back = Kubectl(env).to_json(out)
    check([o["kind"] for o in back] == ["Deployment", "ConfigMap", "Role", "RoleBinding"],
          "kubectl read %r" % [o["kind"] for o in back])
    check(back[2]["rules"] == role["rules"], "kubectl's Role differs: %r" % back[2]["rules"])
    check("kubectl apply -f manifests/fast-sync/policy.yaml" in err, "report: %s" % err)
    check("ValidatingAdmissionPolicy" not in text, "the cluster-scoped policy was written")
    again, err2 = inject_ok(env, ["-"], stdin=out)
    check(again == out, "a second run changed the output")
    check("role/%s passed through" % name in err2, "report: %s" % err2)
    rbac, _ = inject_ok(env, ["-o", "rbac", "-"], stdin=out)
    check([d["kind"] for d in yaml.safe_load_all(rbac.decode())] == ["Role", "RoleBinding"],
          "-o rbac: %s" % rbac.decode()[:300])
    check(list(yaml.safe_load_all(rbac.decode())) == [role, binding], "-o rbac differs")
    p = env.path("fast.yaml")
    with open(p, "w") as f:
        f.write(FAST)
    inject_ok(env, ["-i", p])
    check(open(p, "rb").read() == out, "-i differs from stdout")
    st = os.stat(p).st_ino
    inject_ok(env, ["-i", p])
    check(os.stat(p).st_ino == st, "a second -i rewrote the file")
    rc, hout, _ = inject(env, ["--help"])
    check(b"rbac" in hout and b"fast-sync" in hout, "--help says nothing of fast sync's RBAC")


def test_inject_stage_note_names_the_lease_rbac_grants(env):
    """The stage note names the Lease the agent uses and `-o rbac` grants,
    also for a workload whose name is too long for the plain Lease name
    (kube/lease.h cuts it with a hash): the note once printed the uncut
    name, and cut it at 400 bytes."""
    name = "w" * 240
    text = """apiVersion: apps/v1
kind: Deployment
metadata: {name: %s, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations:
        reload-agent.io/inject: "true"
        reload-agent.io/stage: "1"
        reload-agent.io/action: signal
        reload-agent.io/process: nginx
    spec:
      containers:
      - {name: web, image: nginx, volumeMounts: [{name: site, mountPath: /etc/nginx/conf.d}]}
      volumes: [{name: site, configMap: {name: site}}]
""" % name
    _, err = inject_ok(env, ["-"], stdin=text.encode())
    m = re.search(r"stage: 1 replica\(s\) of deployment/%s at a time, through Lease (\S+) \(Role" % name, err)
    check(m, "no stage note with its Lease: %s" % err[-800:])
    rbac, _ = inject_ok(env, ["-o", "rbac", "-"], stdin=text.encode())
    role = [d for d in yaml.safe_load_all(rbac.decode()) if d["kind"] == "Role"][0]
    leases = [r.get("resourceNames") for r in role["rules"] if r["resources"] == ["leases"]]
    check([m.group(1)] in leases, "the note's Lease %s, the Role's %r" % (m.group(1), leases))
    check(len(m.group(1)) <= 253 and m.group(1) != "reload-agent-stage-deployment-" + name,
          "not cut: %s" % m.group(1))
