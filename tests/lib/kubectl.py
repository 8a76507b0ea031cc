"""kubectl as an independent checker, offline: the real kubectl runs only
client-side commands, with a kubeconfig that points at https://127.0.0.1:1
(nothing listens there) and a HOME of its own, to decode YAML into JSON and
to round-trip an object through its compiled-in Go types. Also the JSON
helpers the manifest suites compare with: every leaf of a value, and the
documents of a stream of JSON documents.

kubectl: $KUBECTL, else `kubectl` on PATH; a test that needs it fails
without it.
"""
import json
import os
import re
import shutil
import subprocess

from tests.lib.proc import TestFailure, check

AGENT = "reload-agent"

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: offline
  cluster: {server: "https://127.0.0.1:1"}
contexts:
- name: offline
  context: {cluster: offline, user: offline}
current-context: offline
users:
- name: offline
  user: {token: not-a-secret}
"""


class Kubectl:
    """Runs kubectl client-side only, with a dummy kubeconfig and HOME."""

    def __init__(self, env):
        self.bin = os.environ.get("KUBECTL") or shutil.which("kubectl")
        check(self.bin and os.access(self.bin, os.X_OK),
              "kubectl not found (set $KUBECTL or install it: Debian package kubernetes-client "
              "or the upstream binary); manifests/ cannot be validated without it")
        self.dir = env.path("kubectl")
        os.makedirs(self.dir, exist_ok=True)
        cfg = os.path.join(self.dir, "config")
        with open(cfg, "w") as f:
            f.write(KUBECONFIG)
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.dir,
                    "KUBECONFIG": cfg, "NO_PROXY": "*", "no_proxy": "*"}

    def run(self, args, stdin=None):
        r = subprocess.run([self.bin] + args, input=stdin, capture_output=True, timeout=60,
                           env=self.env, cwd=self.dir)
        if r.returncode != 0:
            raise TestFailure("kubectl %s failed (%d): %s" % (
                " ".join(args), r.returncode, r.stderr.decode(errors="replace").strip()))
        return r.stdout

    def version(self):
        out = self.run(["version", "--client", "-o", "json"])
        return json.loads(out)["clientVersion"]["gitVersion"]

    def minor(self):
        m = re.match(r"v1\.(\d+)\.", self.version())
        check(m, "cannot parse kubectl version %s" % self.version())
        return int(m.group(1))

    def to_json(self, yaml_bytes):
        """Objects of a YAML stream, as kubectl parses them (an annotation
        that does not exist is removed, i.e. nothing changes)."""
        out = self.run(["annotate", "--local", "-f", "-", "-o", "json", "reload-agent.io/none-"],
                       stdin=yaml_bytes).decode()
        dec, objs, i = json.JSONDecoder(), [], 0
        while True:
            while i < len(out) and out[i].isspace():
                i += 1
            if i == len(out):
                break
            o, i = dec.raw_decode(out, i)
            objs += o["items"] if o.get("kind") == "List" else [o]
        return objs

    def typed_round_trip(self, obj):
        path = os.path.join(self.dir, "obj-%s.json" % obj["metadata"]["name"])
        with open(path, "w") as f:
            json.dump(obj, f)
        return json.loads(self.run(["set", "serviceaccount", "--local", "-f", path, AGENT,
                                    "-o", "json"]))


def leaves(v, path=""):
    """{path: scalar} for every scalar in a JSON value (lists by index)."""
    out = {}
    if isinstance(v, dict):
        for k, x in v.items():
            out.update(leaves(x, "%s.%s" % (path, k)))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            out.update(leaves(x, "%s[%d]" % (path, i)))
    else:
        out[path] = v
    return out


def json_docs(out):
    """The documents of a stream of JSON documents (what -o json prints)."""
    dec, i, s, docs = json.JSONDecoder(), 0, out.decode(), []
    while i < len(s):
        while i < len(s) and s[i].isspace():
            i += 1
        if i < len(s):
            o, i = dec.raw_decode(s, i)
            docs.append(o)
    return docs
