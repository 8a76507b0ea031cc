"""`reload-agent inject` reads YAML scalars as the cluster's own kubectl
does (sigs.k8s.io/yaml, YAML 1.1 booleans): for each scalar of a table, a
ConfigMap value converted by `inject -o json` equals the value kubectl's
`create --dry-run=client -o json` prints, or both refuse it."""
import json
import os
import subprocess
import tempfile

from tests.lib.proc import check

SCALARS = ["yes", "no", "on", "off", "y", "n", "Yes", "NO", "On", "OFF", "Y", "N", "true", "False",
           "TRUE", "~", "null", "Null", "", "0644", "08", "0o17", "0x1F", "0b101", "+12", "-0", "1_000",
           "1.5", ".5", "1e3", "1e400", "0.1.2", "2001-12-14", "2001-12-14T21:59:43.10-05:00", "12:30",
           "1:20:30", "'yes'", '"on"', "-.inf", ".NaN", "! yes", "!!str yes", "!!bool yes"]


def doc(v):
    return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: %s\n" % v


def kubectl_value(env, path):
    rc, out, err = env.c.kubectl("create", "--dry-run=client", "--validate=false", "-o", "json", "-f", path,
                                 check=False)
    if rc != 0:
        return ("error", err.strip().splitlines()[-1] if err.strip() else "exit %d" % rc)
    return ("value", json.loads(out).get("data", {}).get("a", "<absent>"))


def inject_value(env, path):
    p = subprocess.run([env.c.binary, "inject", "-o", "json", path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    if p.returncode != 0:
        return ("error", p.stderr.decode().strip())
    return ("value", json.loads(p.stdout).get("data", {}).get("a", "<absent>"))


def test_yaml_scalars_as_kubectl_reads_them(env):
    diffs = []
    with tempfile.TemporaryDirectory() as d:
        for i, v in enumerate(SCALARS):
            path = os.path.join(d, "s%d.yaml" % i)
            with open(path, "w") as f:
                f.write(doc(v))
            k, r = kubectl_value(env, path), inject_value(env, path)
            same = k[0] == r[0] and (k[0] == "error" or (type(k[1]) is type(r[1]) and k[1] == r[1]))
            if not same:
                diffs.append("%r: kubectl %r, inject %r" % (v, k, r))
    env.log("%d scalars compared with kubectl" % len(SCALARS))
    check(not diffs, "inject reads these scalars unlike kubectl:\n  " + "\n  ".join(diffs))
