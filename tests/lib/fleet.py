"""The fleet harness: N agents, one per pod of one Deployment of the fake
API server (tests/lib/fakeapi.py, deployment fixture with N pods), each
watching its own AtomicWriter volume (build/tools/awsim) with --action
rollout, as in a real pod at the same path (./config relative to the
agent's own working directory, so every replica computes the same logical
paths and hash). Used by tests/integration/test_fleet.py (the rollout runs
once) and tests/bench/fleet.py (what it costs).

inotify instances are limited per user (fs.inotify.max_user_instances,
default 128) and an in-cluster agent uses two (content; annotations and
token). Replicas normally sit on different nodes; here, when run as root,
the agents are spread over several UIDs (AGENTS_PER_UID each) so the fleet
does not hit one user's limit.

Agents are started with subprocess directly, log at info level to a file
each (no reader threads, no pipes that could fill up), and are stopped by
PID. Every wait is bounded.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from tests.lib import fakeapi
from tests.lib.proc import TestFailure, check

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REFHASH = os.path.join(ROOT, "tests", "lib", "refhash.py")

DEPLOYMENT = "web"
HASH_ANNOTATION = "reload-agent.io/config-hash"
CONVERGED = ("patched", "already-current")
UID_BASE = 47000      # UIDs for the agents when run as root (no account needed)
AGENTS_PER_UID = 16   # 32 inotify instances per UID


def ref_hash(cwd, path):
    """The content hash by the independent reference (tests/lib/refhash.py),
    run in cwd so that the logical paths are the agent's."""
    r = subprocess.run([sys.executable, REFHASH, path],
                       cwd=cwd, capture_output=True, timeout=30)
    check(r.returncode == 0, "refhash failed: %s" % r.stderr.decode(errors="replace"))
    return r.stdout.decode().split()[0]


def parse_time(iso):
    """Seconds since the epoch of the agent's log time (UTC, ms, 'Z')."""
    import calendar
    base, frac = iso.rstrip("Z").split(".")
    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + int(frac) / 1000.0


class Fleet:
    """N agents, one per pod of the fake Deployment, each watching its own
    copy of one ConfigMap volume with --action rollout. spawn starts the
    fake API server (e.g. lib.Env.spawn); the agents are this object's own
    processes, stopped by stop()."""

    def __init__(self, binary, tools, n, jitter="2s", events=True, spawn=subprocess.Popen):
        self.binary, self.tools, self.n = binary, tools, n
        self.dir = tempfile.mkdtemp(prefix="ra-fleet-")
        os.chmod(self.dir, 0o755)  # readable by the agents' UIDs
        self.jitter, self.events, self.spawn = jitter, events, spawn
        self.fake = None
        self.procs = []

    def pod_dir(self, i):
        return os.path.join(self.dir, "pod-%d" % i)

    def awsim(self, vols, files):
        """One kubelet-style AtomicWriter update of every volume in vols to
        exactly `files`, all at once (one awsim process per volume, started
        together, as the kubelets of many nodes would)."""
        src = os.path.join(self.dir, "payload-%d" % time.monotonic_ns())
        os.makedirs(src)
        for k, v in files.items():
            with open(os.path.join(src, k), "w") as f:
                f.write(v)
        procs = [subprocess.Popen([os.path.join(self.tools, "awsim"), "--dir", v, "--payload",
                                   src], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                 for v in vols]
        errs = []
        for p in procs:
            try:
                _, err = p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate(timeout=5)
            if p.returncode != 0:
                errs.append(err.decode(errors="replace"))
        shutil.rmtree(src, ignore_errors=True)
        check(not errs, "awsim failed: %s" % errs[:3])

    def start(self, files, timeout=60.0):
        """Starts the fake API server and the agents on `files`, and waits
        until every agent has done its startup reconcile."""
        self.fake = fakeapi.launch(os.path.join(self.dir, "api"), fixture="deployment",
                                   pods=self.n, spawn=self.spawn)
        pods = self.fake.info["pods"]
        for f in (self.fake.info["token_file"], self.fake.info["ca"]):
            os.chmod(f, 0o644)
        check(len(pods) == self.n, "fakeapi made %d pods, wanted %d" % (len(pods), self.n))
        vols = [os.path.join(self.pod_dir(i), "config") for i in range(self.n)]
        for v in vols:
            os.makedirs(v)
        self.awsim(vols, files)
        for i, pod in enumerate(pods):
            d = self.pod_dir(i)
            cmd = [self.binary, "run", "--log-format", "json", "--watch", "config",
                   "--action", "rollout", "--rollout-jitter", self.jitter, "--debounce", "50ms",
                   "--annotations", "", "--events=%s" % ("true" if self.events else "false"),
                   "--kube-api", self.fake.url, "--kube-token-file", self.fake.info["token_file"],
                   "--kube-ca-file", self.fake.info["ca"], "--pod-name", pod,
                   "--namespace", self.fake.info["namespace"]]
            ids = {}
            if os.geteuid() == 0:
                uid = UID_BASE + i // AGENTS_PER_UID
                ids = {"user": uid, "group": uid, "extra_groups": []}
            with open(os.path.join(d, "agent.log"), "wb") as log:
                self.procs.append(subprocess.Popen(cmd, cwd=d, stdin=subprocess.DEVNULL,
                                                   stdout=subprocess.DEVNULL, stderr=log, **ids))
        self.wait_all(lambda evs: any(e.get("event") == "reconcile" for e in evs),
                      timeout, "every agent's startup reconcile")

    def events_of(self, i):
        """The JSON log lines of agent i so far (a torn last line is left out)."""
        out = []
        with open(os.path.join(self.pod_dir(i), "agent.log"), "rb") as f:
            for line in f.read().decode("utf-8", "replace").splitlines():
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out

    def wait_all(self, pred, timeout, what):
        """Polls every agent's log until pred(events) holds for all of them."""
        deadline = time.monotonic() + timeout
        pending = set(range(self.n))
        while True:
            for i in list(pending):
                if self.procs[i].poll() is not None:
                    raise TestFailure("agent %d exited (%s) while waiting for %s; log tail: %s" %
                                      (i, self.procs[i].returncode, what, self.tail(i)))
                if pred(self.events_of(i)):
                    pending.discard(i)
            if not pending:
                return
            if time.monotonic() >= deadline:
                i = min(pending)
                raise TestFailure("timed out after %.0fs waiting for %s: %d agents pending, "
                                  "e.g. agent %d: %s" % (timeout, what, len(pending), i,
                                                         self.tail(i)))
            time.sleep(0.2)

    def tail(self, i, lines=8):
        with open(os.path.join(self.pod_dir(i), "agent.log"), "rb") as f:
            return f.read().decode("utf-8", "replace").splitlines()[-lines:]

    def change(self, files):
        """Applies one update to every pod's volume at once. Returns the wall
        time it started."""
        t0 = time.time()
        self.awsim([os.path.join(self.pod_dir(i), "config") for i in range(self.n)], files)
        return t0

    def wait_converged(self, want_hash, timeout):
        """Waits until every agent logged a rollout event (patched or
        already-current) for want_hash; returns, per agent, (result, wall
        time of the rollout event, wall time of its change event). A rollout
        event for another hash or result fails at once."""
        def done(evs):
            ro = [e for e in evs if e.get("event") == "rollout"]
            for e in ro:
                if e.get("hash") != want_hash or e.get("result") not in CONVERGED:
                    raise TestFailure("unexpected rollout event: %s" % json.dumps(e))
            return ro
        self.wait_all(done, timeout, "every agent's rollout event")
        out = []
        for i in range(self.n):
            evs = self.events_of(i)
            ro = [e for e in evs if e.get("event") == "rollout"]
            ch = [e for e in evs if e.get("event") == "change" and e.get("hash") == want_hash]
            check(len(ro) == 1, "agent %d logged %d rollout events for one change" % (i, len(ro)))
            check(len(ch) == 1, "agent %d logged %d change events for one change" % (i, len(ch)))
            out.append((ro[0]["result"], parse_time(ro[0]["time"]), parse_time(ch[0]["time"])))
        return out

    def requests(self):
        st, reqs = self.fake.ctl("GET", "/requests")
        check(st == 200, "GET /requests: %s" % st)
        return reqs

    def history(self):
        st, h = self.fake.ctl("GET", "/history?resource=deployments&name=%s" % DEPLOYMENT)
        check(st == 200, "GET /history: %s %s" % (st, h))
        return h

    def rss_kib(self):
        """[(VmRSS, RssAnon)] in KiB of each running agent."""
        out = []
        for p in self.procs:
            try:
                with open("/proc/%d/status" % p.pid) as f:
                    st = dict(l.split(":", 1) for l in f if ":" in l)
                out.append((int(st["VmRSS"].split()[0]), int(st["RssAnon"].split()[0])))
            except (OSError, KeyError, ValueError):
                pass
        return out

    def stop(self):
        """SIGTERM to every agent (by PID), bounded wait, SIGKILL stragglers;
        then the fake API server. Returns the agents' exit codes."""
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        codes = []
        deadline = time.monotonic() + 10
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
            codes.append(p.returncode)
        if self.fake:
            self.fake.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        return codes


def patch_hashes(reqs):
    """The hash annotation each PATCH of the Deployment carried."""
    out = []
    for r in reqs:
        if r["method"] == "PATCH" and r["path"].endswith("/deployments/" + DEPLOYMENT):
            body = r["body"] if isinstance(r["body"], dict) else {}
            ann = body.get("spec", {}).get("template", {}).get("metadata", {}).get(
                "annotations", {})
            out.append(ann.get(HASH_ANNOTATION))
    return out


def run_one_change(fleet, timeout):
    """Starts the fleet on v1, applies v2 everywhere, waits for convergence.
    Returns a dict of measurements (the callers assert or print them)."""
    fleet.start({"app.conf": "worker_processes 1;\n", "mime.types": "text/html html;\n"})
    check(fleet.history() == [], "the startup reconcile changed the template")
    v2 = {"app.conf": "worker_processes 4;\n", "mime.types": "text/html html;\n"}
    t0 = fleet.change(v2)
    want = ref_hash(fleet.pod_dir(0), "config")
    results = fleet.wait_converged(want, timeout)
    reqs = fleet.requests()
    return {"want": want, "results": results, "t0": t0, "reqs": reqs,
            "patches": patch_hashes(reqs), "history": fleet.history(),
            "rss": fleet.rss_kib()}
