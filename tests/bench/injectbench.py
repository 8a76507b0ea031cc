#!/usr/bin/env python3
"""make bench, inject part: `reload-agent inject` throughput on a stream of
1 000 objects (250 times: a commented ConfigMap, an opted-in Deployment that
mounts it, a Service and a Secret), against baselines that parse the same
stream, measured in the same run.

Figures printed (best of N runs each, alternating):
  - reload-agent inject: CPU seconds (and wall), objects/s, MB/s of input,
    peak RSS;
    it parses, runs the transform on every object, stamps, splices the
    text, and re-parses every spliced document to verify it;
  - baseline 1, PyYAML's libyaml-backed CSafeLoader: parse only;
  - baseline 2, `kubectl annotate --local -o yaml` (an annotation that does
    not exist is removed): kubectl's own decode and encode of every object,
    offline;
  - the ratios inject / baseline (time).
The output must hold 250 injected Deployments (a wrong answer fast is no
answer).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from tests.lib.kubectl import KUBECONFIG

GROUP = """# group {i}: the app's configuration
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-{i}
  namespace: bench
data:
  app.conf: |
    listen = 80{i}
    workers = 4
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-{i}
  namespace: bench
  labels: {{app: app-{i}}}
spec:
  replicas: 2
  selector:
    matchLabels: {{app: app-{i}}}
  template:
    metadata:
      labels:
        app: app-{i}
      annotations:
        reload-agent.io/inject: "true"
        reload-agent.io/action: rollout
    spec:
      containers:
        - name: app
          image: registry.example/app:1.{i}
          args: ["--config", "/etc/app/app.conf"]
          envFrom:
            - secretRef: {{name: app-{i}}}
          volumeMounts:
            - name: conf
              mountPath: /etc/app
      volumes:
        - name: conf
          configMap:
            name: app-{i}
---
apiVersion: v1
kind: Service
metadata:
  name: app-{i}
  namespace: bench
spec:
  selector: {{app: app-{i}}}
  ports:
    - port: 80
      targetPort: 8080
---
apiVersion: v1
kind: Secret
metadata:
  name: app-{i}
  namespace: bench
stringData:
  TOKEN: "t-{i}"
---
"""

def run(args, stdin_path, env=None):
    """Runs args with stdin from a file; returns (wall s, CPU s, peak RSS KiB,
    stdout, stderr). CPU time (user + system, from wait4) is the figure
    compared: the machine may be shared, and waiting for a core is not the
    program's cost."""
    with open(stdin_path, "rb") as fin, tempfile.TemporaryFile() as fout, \
            tempfile.TemporaryFile() as ferr:
        t0 = time.perf_counter()
        p = subprocess.Popen(args, stdin=fin, stdout=fout, stderr=ferr, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        dt = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        fout.seek(0)
        ferr.seek(0)
        out, err = fout.read(), ferr.read()
    if p.returncode != 0:
        sys.exit("%s failed (%d): %s" % (args[0], p.returncode, err.decode(errors="replace")[:400]))
    return dt, ru.ru_utime + ru.ru_stime, ru.ru_maxrss, out, err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--groups", type=int, default=250)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ra-injectbench-")
    try:
        stream = os.path.join(tmp, "stream.yaml")
        with open(stream, "w") as f:
            for i in range(a.groups):
                f.write(GROUP.format(i=i))
        size = os.path.getsize(stream)
        nobj = 4 * a.groups
        kdir = os.path.join(tmp, "kube")
        os.makedirs(kdir)
        with open(os.path.join(kdir, "config"), "w") as f:
            f.write(KUBECONFIG)
        kenv = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": kdir,
                "KUBECONFIG": os.path.join(kdir, "config")}
        kubectl = os.environ.get("KUBECTL") or shutil.which("kubectl")
        cmds = {
            "reload-agent inject": ([a.binary, "inject", "-"], None),
            "PyYAML CSafeLoader (parse only)": (
                [sys.executable, "-c", "import sys, yaml\n"
                 "n = sum(1 for d in yaml.load_all(sys.stdin.buffer, Loader=yaml.CSafeLoader)"
                 " if d)\nprint(n)"], None),
        }
        if kubectl:
            cmds["kubectl annotate --local -o yaml"] = (
                [kubectl, "annotate", "--local", "-f", "-", "-o", "yaml", "bench.example/none-"],
                kenv)
        best = {k: None for k in cmds}
        for _ in range(a.runs):
            for name, (args, env) in cmds.items():
                wall, cpu, rss, out, err = run(args, stream, env)
                if name == "reload-agent inject":
                    n = err.decode().count(" injected\n")
                    if n != a.groups:
                        sys.exit("inject injected %d Deployments, not %d" % (n, a.groups))
                if best[name] is None or cpu < best[name][1]:
                    best[name] = (wall, cpu, rss)
        print("inject bench: %d objects, %.2f MB of YAML (best of %d runs by CPU time)" %
              (nobj, size / 1e6, a.runs))
        t = best["reload-agent inject"][1]
        for name in cmds:
            wall, cpu, rss = best[name]
            line = "  %-34s CPU %.3f s (wall %.3f s)  %7.0f objects/s  %5.2f MB/s  peak RSS %5.1f MiB" % (
                name + ":", cpu, wall, nobj / cpu, size / 1e6 / cpu, rss / 1024)
            if name != "reload-agent inject":
                line += "  inject/this CPU time %.2fx" % (t / cpu)
            print(line)
        if not kubectl:
            print("  (kubectl not found: its baseline was not run)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
