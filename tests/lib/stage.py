"""Staging's test harness (tests/integration/test_stage.py, tests/bench/stagebudget.py):
build/tools/stagedrive replicas (the agent's stage gate over real TLS to the API
double), their verdict and release lines, and the Lease read back from the double."""
import json
import signal
import subprocess
import threading

from tests.lib import fakeapi
from tests.lib.proc import TestFailure, check, wait_until

H1 = "a1" * 32
H2 = "b2" * 32
ANNOTATION = "reload-agent.io/stage"


class Replica:
    """One stagedrive process (a replica's gate), its lines collected."""

    def __init__(self, env, fake, pod, stage, hashes, *extra):
        self.pod = pod
        self.lines = []
        self.cond = threading.Condition()
        self.log = env.path("stagedrive-%s.log" % pod)
        args = [env.tool("stagedrive"), "--kube-api", fake.url,
                "--kube-token-file", fake.info["token_file"], "--kube-ca-file", fake.info["ca"],
                "--pod-name", pod, "--namespace", fake.info["namespace"], "--stage", stage]
        for h in hashes:
            args += ["--hash", h]
        with open(self.log, "wb") as err:
            self.proc = env.spawn(args + list(extra), stdout=subprocess.PIPE, stderr=err,
                                  stdin=subprocess.DEVNULL)
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for raw in self.proc.stdout:
            try:
                ev = json.loads(raw)
            except ValueError:
                continue
            with self.cond:
                self.lines.append(ev)
                self.cond.notify_all()

    def events(self, kind=None):
        with self.cond:
            return [e for e in self.lines if kind is None or e["event"] == kind]

    def verdicts(self):
        return [e["verdict"] for e in self.events("verdict")]

    def logged(self, text):
        with open(self.log, "rb") as f:
            return text in f.read().decode("utf-8", "replace")

    def tail(self, n=15):
        with open(self.log, "rb") as f:
            return f.read().decode("utf-8", "replace").splitlines()[-n:]

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.t.join(5)
        return self.proc.returncode


def launch(env, pods, fixture="deployment"):
    return fakeapi.launch(env.path("kube"), fixture=fixture, pods=pods, spawn=env.spawn)


def wait_all(replicas, pred, timeout, what):
    def done():
        for r in replicas:
            if r.proc.poll() is not None and not pred(r):
                raise TestFailure("replica %s exited (%s) before %s; log: %s" %
                                  (r.pod, r.proc.returncode, what, r.tail()))
        return all(pred(r) for r in replicas)
    try:
        wait_until(done, timeout, what, interval=0.1)
    except TestFailure:
        for r in replicas:
            print("---- %s: %s" % (r.pod, r.events()))
            for line in r.tail():
                print("   " + line)
        raise


def intervals(replicas, h=H1):
    """(go time, release time, pod) of every replica that acted on h."""
    out = []
    for r in replicas:
        go = [e["t"] for e in r.events("verdict") if e["verdict"] == "go" and e["hash"] == h]
        rel = [e["t"] for e in r.events("release") if e["hash"] == h]
        for i, t in enumerate(go):
            out.append((t, rel[i] if i < len(rel) else None, r.pod))
    return sorted(out)


def max_overlap(iv):
    """The most replicas between go and release at any one time."""
    edges = sorted([(g, 1) for g, _, _ in iv] + [(r, -1) for _, r, _ in iv if r is not None])
    cur = best = 0
    for _, d in edges:
        cur += d
        best = max(best, cur)
    return best


def lease(fake, name="reload-agent-stage-deployment-web"):
    st, obj = fake.ctl("GET", "/object?resource=leases&name=" + name)
    check(st == 200, "the Lease %s: %s %s" % (name, st, obj))
    return obj, json.loads(obj["metadata"].get("annotations", {}).get(ANNOTATION, "{}"))


def requests(fake, path_part):
    st, rs = fake.ctl("GET", "/requests")
    check(st == 200, "requests: %s" % st)
    return [r for r in rs if path_part in r["path"]]


def stop_all(replicas):
    for r in replicas:
        rc = r.stop()
        check(rc == 0, "replica %s exited %s; log: %s" % (r.pod, rc, r.tail()))
