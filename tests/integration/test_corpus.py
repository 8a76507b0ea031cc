"""`reload-agent inject --all` on every file of tests/upstream/ (101 real-world
manifests, over 600 objects: Argo CD, Linkerd, Istio, kube-prometheus,
ingress-nginx, Loki, Tempo, microservices-demo, the Kubernetes website and
others; tests/upstream/SOURCES.md names the repository, path and commit of
each, copied byte for byte), with the invariants of issue 16:

  - no internal error: a file is injected (exit 0), or refused with one
    line naming the file, the document and the line (exit 1, nothing
    printed), never "internal error";
  - every document kept (the same number of documents and objects, List
    items counted), and every document none of whose objects was injected
    byte-identical to the input (document bytes cut at PyYAML's marks);
  - idempotent: injecting the output again gives the same bytes, and
    nothing is reported injected;
  - `-o json` equal to the YAML output, object for object (and read back
    by inject unchanged: a stream of JSON documents), and `-o patch`
    applied (python3-jsonpatch) to the input objects equal to it too;
  - every injected sidecar is one the agent accepts: `reload-agent run
    ARGS --print-config --annotations FILE` (the template's annotations as
    the downward-API file holds them) exits 0, it gets a service-account
    token when its configuration uses rollout (else it would exit 2), and
    its pod runs on Linux;
  - all files joined in one run (as `inject DIR` reads them): the same
    documents as the files one by one, and `-o json` of the joined run
    equal to its YAML.

PyYAML (python3-yaml) and python3-jsonpatch read the outputs; they share
no code with the binary. The files are run two at a time (the machine has
two cores); the whole suite takes some tens of seconds.
"""
import json
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor

import jsonpatch
import yaml

from tests.lib.kubectl import json_docs
from tests.lib.proc import TestFailure, check

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "upstream")
AGENT = "reload-agent"
STAMP = "reload-agent.io/config-hash"
OUTCOME = re.compile(r"^(\S+/\S+) (injected|updated: .+|passed through|skipped: .+|unchanged: .+)$")
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def corpus_files():
    names = sorted(n for n in os.listdir(CORPUS) if n != "SOURCES.md")
    with open(os.path.join(CORPUS, "SOURCES.md")) as f:
        listed = set(re.findall(r"^\| (\S+) \|", f.read(), re.M)) - {"file"}
    check(set(names) == listed, "SOURCES.md and tests/upstream differ: %s" %
          sorted(set(names) ^ listed))
    check(len(names) >= 86, "%d corpus files" % len(names))
    return [os.path.join(CORPUS, n) for n in names]


def inject(env, args, stdin=None):
    r = env.run([env.binary, "inject", "--all"] + list(args), input=stdin, timeout=120)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def docs(text):
    """The documents of a YAML (or JSON) stream: [(object or None, source
    text)], the text cut at the parser's document marks."""
    out, start = [], None
    for ev in yaml.parse(text, Loader=Loader):
        if isinstance(ev, yaml.DocumentStartEvent):
            start = ev.start_mark.index
        elif isinstance(ev, yaml.DocumentEndEvent):
            out.append(text[start:ev.end_mark.index])
    # keys as JSON has them (PyYAML reads "5:" as an int key, Go's YAML as "5")
    objs = [json.loads(json.dumps(o)) for o in yaml.load_all(text, Loader=Loader)]
    check(len(objs) == len(out), "document marks: %d, documents: %d" % (len(out), len(objs)))
    return list(zip(objs, out))


def objects_of(doc):
    """The objects a document holds, as the report lists them: a List's
    items, or the document itself; None for an empty document."""
    if doc is None:
        return []
    if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") and \
            isinstance(doc.get("items"), list):
        return doc["items"]
    return [doc]


def outcomes(report):
    """The report's outcome lines, in order (warnings and stamp lines left
    out): one per object, documents without a kind included."""
    out = []
    for line in report.splitlines():
        if line.startswith("  warning: ") or re.match(r"^\S+ (not )?stamped", line):
            continue
        if re.match(r"^Kubernetes 1\.\d+ assumed \(", line):
            continue  # the version an injection assumed (issue 28), not an outcome
        m = OUTCOME.match(line)
        if m:
            out.append(m.group(2))
        elif re.match(r"^(document|item) \d+ .* passed through", line):
            out.append("passed through")
        else:
            raise TestFailure("unexpected report line: %r" % line)
    return out


def template(o):
    t = o
    for k in {"Pod": [], "CronJob": ["spec", "jobTemplate", "spec", "template"]}.get(
            o["kind"], ["spec", "template"]):
        t = t[k]
    return t


def go_quote(s):
    return json.dumps(s, ensure_ascii=True)


def sidecar_accepted(env, o, tag):
    """The injected sidecar of o starts with the agent's own option parser."""
    t = template(o)
    side = [c for c in t["spec"].get("initContainers", []) if c["name"] == AGENT]
    check(len(side) == 1 and side[0].get("restartPolicy") == "Always",
          "%s: no native %s sidecar" % (tag, AGENT))
    path = env.path("annotations-%s" % re.sub(r"[^A-Za-z0-9.-]", "_", tag))
    with open(path, "w") as f:
        f.write("\n".join("%s=%s" % (k, go_quote(v)) for k, v in
                          sorted((t["metadata"].get("annotations") or {}).items())))
    r = env.run([env.binary] + side[0]["args"] + ["--print-config", "--annotations", path])
    check(r.returncode == 0, "%s: the sidecar would not start: %s" %
          (tag, r.stderr.decode(errors="replace").strip()))
    # rollout needs the API: at pod creation the sidecar gets a token unless
    # automountServiceAccountToken is false, then only a mount it has itself
    cfg = dict((l.split("=", 1)[0].strip(), l.split("=", 1)[1].split("#")[0].strip())
               for l in r.stdout.decode().splitlines() if "=" in l)
    rollout = (cfg.get("action") == "rollout" or
               any(x.endswith("=rollout") for x in cfg.get("rule", "").split(",")) or
               (cfg.get("env-watch") and cfg.get("env-action") == "rollout"))
    token = t["spec"].get("automountServiceAccountToken") is not False or any(
        m.get("mountPath", "").rstrip("/") == "/var/run/secrets/kubernetes.io/serviceaccount"
        for m in side[0].get("volumeMounts", []))
    check(not rollout or token, "%s: the sidecar uses rollout but gets no service-account token: "
          "it would exit 2" % tag)
    os_sel = (t["spec"].get("nodeSelector") or {}).get("kubernetes.io/os", "linux")
    check(os_sel == "linux" and (t["spec"].get("os") or {}).get("name", "linux") == "linux",
          "%s: a Linux sidecar in a pod for %s" % (tag, os_sel))


def check_file(env, path):
    """The invariants on one file; returns (its outputs, objects injected),
    or None when the file is refused (one clean line)."""
    name = os.path.basename(path)
    with open(path, "rb") as f:
        src = f.read()
    rc, out, err = inject(env, [path])
    if rc != 0:
        check(rc == 1 and out == b"" and "internal error" not in err and
              re.match(r"^reload-agent inject: %s: document \d+(, line \d+)?: .+\n$" %
                       re.escape(path), err), "%s: exit %d: %s" % (name, rc, err))
        return None
    din, dout = docs(src.decode()), docs(out.decode())
    check(len(din) == len(dout), "%s: %d documents in, %d out" % (name, len(din), len(dout)))
    outs = outcomes(err)
    objs = [o for d, _ in din for o in ([d] if d is not None and not objects_of(d) else
                                        objects_of(d))]
    check(len(outs) == len(objs), "%s: %d report lines for %d objects" % (name, len(outs),
                                                                          len(objs)))
    k, injected = 0, 0
    for (a, ta), (b, tb) in zip(din, dout):
        n = len(objects_of(a)) if objects_of(a) else (1 if a is not None else 0)
        mine = outs[k:k + n]
        k += n
        changed = any(o == "injected" or o.startswith("updated") for o in mine)
        if not changed:
            check(ta == tb, "%s: a document with nothing injected changed" % name)
            continue
        check(len(objects_of(a)) == len(objects_of(b)), "%s: List items lost" % name)
        for oa, ob, what in zip(objects_of(a), objects_of(b), mine):
            if what == "injected":
                injected += 1
                sidecar_accepted(env, ob, "%s-%s-%d" % (name, ob["metadata"].get("name"), k))
            elif not what.startswith("updated"):
                check(oa == ob, "%s: an object not injected changed" % name)
    again_rc, again, err2 = inject(env, ["-"], stdin=out)
    check(again_rc == 0 and again == out, "%s: a second run changed the output" % name)
    check("injected" not in outcomes(err2), "%s: injected twice" % name)
    yobjs = [d for d, _ in dout if d is not None]
    rc, jout, err3 = inject(env, ["-o", "json", path])
    check(rc == 0 and json_docs(jout) == yobjs, "%s: -o json differs from the YAML" % name)
    # ... and reads back (a stream of JSON documents when there are several)
    rc, jagain, err4 = inject(env, ["-"], stdin=jout)
    check(rc == 0 and jagain == jout, "%s: -o json does not read back unchanged: %s" %
          (name, err4[-300:]))
    rc, pout, _ = inject(env, ["-o", "patch", path])
    check(rc == 0, "%s: -o patch failed" % name)
    patches = json.loads(pout) if pout.lstrip().startswith(b"[{") and path.endswith(".json") \
        else yaml.load(pout, Loader=Loader) or []
    by_target = {}
    for p in patches:
        t = p["target"]
        ops = p["patch"] if isinstance(p["patch"], list) else yaml.load(p["patch"], Loader=Loader)
        by_target.setdefault((t.get("kind"), t.get("name"), t.get("namespace")), []).append(ops)
    for oa, ob in zip([o for d, _ in din for o in objects_of(d)],
                      [o for d, _ in dout for o in objects_of(d)]):
        if not isinstance(oa, dict):
            continue
        md = oa.get("metadata") or {}
        key = (oa.get("kind"), md.get("name"), md.get("namespace"))
        got = oa
        for ops in by_target.get(key, [])[:1]:
            got = jsonpatch.apply_patch(oa, ops)
        if key in by_target:
            by_target[key] = by_target[key][1:]
        check(got == ob, "%s: -o patch does not give the output for %s" % (name, key))
    return out, injected


def unstamped(v):
    """v without the stamp (the config-hash annotation) anywhere; an
    annotations map left empty by that goes too."""
    if isinstance(v, list):
        return [unstamped(x) for x in v]
    if not isinstance(v, dict):
        return v
    out = {}
    for k, x in v.items():
        if k == "annotations" and isinstance(x, dict) and STAMP in x:
            x = {a: b for a, b in x.items() if a != STAMP}
            if not x:
                continue
        out[k] = unstamped(x)
    return out


def test_corpus_invariants(env):
    files = corpus_files()
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda p: (p, check_file(env, p)), files))
    ok = [(p, r) for p, r in results if r is not None]
    refused = [os.path.basename(p) for p, r in results if r is None]
    injected = sum(r[1] for _, r in ok)
    check(len(refused) <= 2, "refused: %s" % refused)
    check(injected >= 50, "only %d objects injected" % injected)
    print("  %d files, %d objects injected, refused (a clean error): %s" %
          (len(ok), injected, ", ".join(refused) or "none"))

    # all of them in one run, as `inject DIR` would read them
    d = env.path("all")
    os.makedirs(d)
    for p, _ in ok:
        shutil.copy(p, d)
    rc, out, err = inject(env, [d])
    check(rc == 0, "the joined run: exit %d: %s" % (rc, err[-500:]))
    joined = [o for o, _ in docs(out.decode()) if o is not None]
    one_by_one = [o for _, r in ok for o, _ in docs(r[0].decode()) if o is not None]
    # the stamp may differ, or be there in the joined run only: the joined
    # input holds every file's ConfigMaps and Secrets (a pod of one upstream
    # file may read the Secret of another, as the website's examples do)
    check([json.dumps(unstamped(o), sort_keys=True) for o in joined] ==
          [json.dumps(unstamped(o), sort_keys=True) for o in one_by_one],
          "the joined run holds other documents than the files one by one")
    rc, jout, _ = inject(env, ["-o", "json", d])
    check(rc == 0 and json_docs(jout) == joined, "-o json of the joined run differs from its YAML")
