"""Fleet test: many replicas of one Deployment, one ConfigMap change, one
rollout.

Every replica of a Deployment runs the agent and sees the same ConfigMap
change at about the same time (each kubelet updates its own copy of the
volume). The rollout action must roll the workload once: a random
--rollout-jitter spreads the replicas, the first one PATCHes the pod
template, the others GET the owner, see the hash already there and stop
(already-current). This file runs that for real: N agent processes against
the fake API server (tests/k8s/fakeapi.py, deployment fixture with N pods),
each with its own AtomicWriter volume (build/tools/awsim) mounted, as in a
real pod, at the same path (./config relative to the agent's own working
directory, so every replica computes the same logical paths and hash).

inotify instances are limited per user (fs.inotify.max_user_instances,
default 128) and an in-cluster agent uses two (content; annotations and
token). Replicas normally sit on different nodes; here, when run as root,
the agents are spread over several UIDs (AGENTS_PER_UID each) so the fleet
does not hit one user's limit.

The Fleet class is shared with the benchmark (tests/bench/fleet.py). Agents
are started with subprocess directly, log at info level to a file each (no
reader threads, no pipes that could fill up), and are stopped by PID.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "k8s"))
import fakeapi  # noqa: E402
from lib import TestFailure, check  # noqa: E402

DEPLOYMENT = "web"
HASH_ANNOTATION = "reload-agent.io/config-hash"
CONVERGED = ("patched", "already-current")
UID_BASE = 47000      # UIDs for the agents when run as root (no account needed)
AGENTS_PER_UID = 16   # 32 inotify instances per UID


def ref_hash(cwd, path):
    """The content hash by the independent reference (tests/refhash.py)."""
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "refhash.py"), path],
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


N_AGENTS = 50
MAX_REQUESTS_PER_AGENT = 6  # startup: pod, RS, Deployment; change: GET (+ PATCH, Event)


def test_fleet_one_change_rolls_once(env):
    fleet = Fleet(env.binary, env.tools, N_AGENTS, jitter="2s", events=True, spawn=env.spawn)
    try:
        m = run_one_change(fleet, timeout=60)
        h, patches, reqs = m["history"], m["patches"], m["reqs"]
        # The template changed exactly once, to the content's hash.
        check(len(h) == 1, "template changed %d times: %s" % (len(h), h))
        check(h[0].get(HASH_ANNOTATION) == m["want"],
              "template hash %s, content hash %s" % (h[0].get(HASH_ANNOTATION), m["want"]))
        # Racing PATCHes (two replicas inside one API round trip) are allowed
        # but must agree; how many race depends on the machine's speed, so
        # the count is reported, not bounded (the jitter spread is checked
        # below).
        check(len(patches) >= 1, "no PATCH was sent")
        check(set(patches) == {m["want"]}, "PATCHes carried other hashes: %s" % patches)
        results = [r for r, _, _ in m["results"]]
        check(results.count("patched") == len(patches),
              "%d agents logged patched, %d PATCHes sent" % (results.count("patched"),
                                                             len(patches)))
        check(results.count("already-current") == N_AGENTS - len(patches), str(results))
        # Bounded API traffic, all of it answered successfully.
        bad = [(r["method"], r["path"], r["status"]) for r in reqs if r["status"] not in (200, 201)]
        check(not bad, "failed API requests: %s" % bad[:5])
        check(len(reqs) <= MAX_REQUESTS_PER_AGENT * N_AGENTS,
              "%d API requests for %d agents" % (len(reqs), N_AGENTS))
        # Events: the patching replica(s) announce the rollout on the Deployment.
        st, evs = fleet.fake.ctl("GET", "/events")
        trig = [e for e in evs if e.get("reason") == "RolloutTriggered"]
        check(st == 200 and 1 <= len(trig) <= len(patches), "RolloutTriggered events: %s" % trig)
        check(all(e["involvedObject"]["kind"] == "Deployment" and
                  e["involvedObject"]["name"] == DEPLOYMENT for e in trig), str(trig))
        # The jitter is random per replica: the delays from each agent's
        # change to its rollout spread over the 2 s window (50 uniform draws
        # all inside 1 s: probability about 1e-13; identical draws in every
        # process, e.g. an unseeded PRNG, give a spread of a few ms).
        delays = [t - c for _, t, c in m["results"]]
        check(max(delays) - min(delays) >= 1.0,
              "rollout delays after the change span only %.3fs of the 2s jitter: %s" %
              (max(delays) - min(delays), sorted("%.3f" % d for d in delays)[:10]))
        last = max(t for _, t, _ in m["results"])
        print("  fleet: %d agents, %d template change, %d PATCH, %d requests (%.2f/agent), "
              "converged %.2fs after the change, max RSS %d KiB (anonymous %d KiB)" %
              (N_AGENTS, len(h), len(patches), len(reqs), len(reqs) / N_AGENTS,
               last - m["t0"], max([r for r, _ in m["rss"]] or [0]),
               max([a for _, a in m["rss"]] or [0])))
    finally:
        codes = fleet.stop()
    check(all(c == 0 for c in codes), "agents exited with %s" % sorted(set(codes)))
