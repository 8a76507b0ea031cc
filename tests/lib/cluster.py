"""The cluster harness of the e2e suite, the load test and the cluster
benches (the real single-node cluster of tests/cluster/).

Cluster: the one cluster, taken under its lock (every e2e run, bench and
load test takes it) and started or reused by tests/cluster/up.sh, whose
KEY=VALUE lines it keeps (kubectl, kubeconfig, audit log); kubectl calls
with bounded timeouts; the webhook install. Env: one test's namespace, its
waits, and its diagnostic dump (pods, the agent's log, events) when it
fails. Also what several e2e scenarios do alike: the Role a user binds
(grant_role), a workload rolled out (rolled_out). needs(): what a scenario
needs of the cluster (a minimum Kubernetes version) and whether it is one
of the core scenarios (E2E_CORE=1); the runner reads it.

Every wait is bounded in time; nothing here kills a process.
"""
import calendar
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import threading
import time

from tests.lib import proc
from tests.lib.proc import TestFailure

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
AGENT_CONTAINER = "reload-agent"
LOCK = "/var/lock/reload-agent-e2e.lock"
POLL = 0.5  # seconds between two looks at the cluster (a kubectl call costs tens of ms)


def needs(minor=None, why="", below=None, core=False):
    """What an e2e scenario needs, as attributes the runner reads:
    minor: the Kubernetes 1.x minor it needs (why: the feature, named in the
    output); below it the runner runs `below` instead (a function of env that
    asserts the documented behaviour of an older cluster), or skips the
    scenario when there is none. core: one of the scenarios E2E_CORE=1 runs."""
    def mark(f):
        f.needs_minor, f.needs_why, f.needs_below, f.core = minor, why, below, core
        return f
    return mark


def parse_minor(version):
    """The minor of "v1.34.4" (what K8S_VERSION and kubectl print): 34."""
    parts = version.lstrip("v").split(".")
    if len(parts) < 2 or parts[0] != "1" or not parts[1].rstrip("+").isdigit():
        raise TestFailure("not a Kubernetes 1.x version: %r" % version)
    return int(parts[1].rstrip("+"))


def wait_until(pred, timeout, what, interval=POLL):
    """proc.wait_until at the cluster's pace."""
    return proc.wait_until(pred, timeout, what, interval)


def lock_cluster():
    """Takes the one cluster for this process (every e2e run, bench and load
    test takes it): two runs on one cluster would take each other's webhook
    down. Waits, saying so; the lock goes with the process (keep the
    returned file)."""
    f = open(LOCK, "w")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("cluster: another run holds %s; waiting for it" % LOCK, flush=True)
        fcntl.flock(f, fcntl.LOCK_EX)
    return f


def cluster_env():
    """Starts (or reuses) the cluster with tests/cluster/up.sh; its KEY=VALUE
    lines as a dict. Exits the process when up.sh fails."""
    p = subprocess.run(["bash", os.path.join(REPO, "tests/cluster/up.sh")], stdout=subprocess.PIPE,
                       timeout=5400)
    if p.returncode != 0:
        sys.exit("cluster: tests/cluster/up.sh failed (exit %d)" % p.returncode)
    env = {}
    for line in p.stdout.decode().splitlines():
        k, sep, v = line.partition("=")
        if sep:
            env[k] = v
    return env


def rollout_hash(files):
    """The content hash of docs/hash.md over {logical path: bytes}: one
    sha256sum-style manifest line per file, sorted by path, hashed.
    Independent of the agent's code (the oracle of the rollout tests)."""
    lines = []
    for path in sorted(files, key=lambda p: p.encode()):
        lines.append("%s  %s\n" % (hashlib.sha256(files[path]).hexdigest(), path))
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def http_text(url, timeout=3.0):
    """GET url from the host (pod IPs sit on the cluster's own bridge):
    (status, body text), or (None, error text) when there is no answer: a
    pod that does not answer yet is a state to wait through, not a failure."""
    try:
        st, body = proc.http_get(url, timeout)
    except TestFailure as e:
        return None, str(e)
    return st, body.decode("utf-8", "replace")


class Cluster:
    """The running cluster, from up.sh's KEY=VALUE lines."""

    def __init__(self, env, binary):
        self.env = env
        self.binary = binary
        self.kubectl_bin = env["KUBECTL"]
        self.kubeconfig = env["KUBECONFIG"]
        self.audit_log = env["AUDIT_LOG"]
        self.version = env.get("K8S_VERSION", "v1.36.3")  # up.sh's line: the version running
        self.minor = parse_minor(self.version)
        self.lock = threading.Lock()
        self.webhook_ready = False

    def kubectl(self, *args, input=None, check=True, timeout=60, ns=None):
        cmd = [self.kubectl_bin, "--kubeconfig", self.kubeconfig]
        if ns:
            cmd += ["-n", ns]
        cmd += list(args)
        try:
            p = subprocess.run(cmd, input=input.encode() if isinstance(input, str) else input,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TestFailure("kubectl %s: no answer in %d s" % (" ".join(args), timeout))
        out, err = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
        if check and p.returncode != 0:
            raise TestFailure("kubectl %s: exit %d: %s" % (" ".join(args), p.returncode, err.strip()))
        return out if check else (p.returncode, out, err)

    def get(self, kind, name=None, ns=None, check=True):
        """The object (or list) as a dict; None when it does not exist and
        check is False."""
        args = ["get", kind] + ([name] if name else []) + ["-o", "json"]
        if check:
            return json.loads(self.kubectl(*args, ns=ns))
        rc, out, err = self.kubectl(*args, ns=ns, check=False)
        return json.loads(out) if rc == 0 else None

    def audit(self, since=0.0, pred=None):
        """Audit events (dicts) whose stageTimestamp is at or after since (a
        Unix time), filtered by pred. The log rotates at 200 MB; the suite
        writes far less."""
        out = []
        paths = [self.audit_log]
        for path in paths:
            try:
                with open(path, "rb") as f:
                    for raw in f:
                        try:
                            ev = json.loads(raw)
                        except ValueError:
                            continue
                        if ev.get("stage") != "ResponseComplete":
                            continue
                        if rfc3339(ev.get("stageTimestamp", "")) < since:
                            continue
                        if pred is None or pred(ev):
                            out.append(ev)
            except FileNotFoundError:
                pass
        return out

    def webhook_outdated(self, name="reload-agent-webhook"):
        """True when a running pod of Deployment name (in reload-agent) runs
        an image that is not the imported one."""
        want = agent_image_id(self.env["STATE"])
        pods = self.get("pods", ns="reload-agent")["items"]
        ids = [cs.get("imageID") for p in pods if p["metadata"].get("labels", {}).get(
            "app.kubernetes.io/name") == name for cs in p["status"].get("containerStatuses", [])]
        return want is None or any(i != want for i in ids)

    def rerun_certs_if_entry_new(self):
        """A reused cluster whose certs Job ran before a webhook entry was
        added (the namespace-wide one, issue 27): the new entry has no
        caBundle, so the Job runs again (a completed Job never reruns)."""
        mwc = self.get("mutatingwebhookconfiguration", "reload-agent", check=False) or {}
        job = self.get("job", "reload-agent-webhook-certs", ns="reload-agent", check=False) or {}
        if (job.get("status", {}).get("succeeded") and
                any("caBundle" not in w.get("clientConfig", {}) for w in mwc.get("webhooks", []))):
            self.kubectl("delete", "job", "reload-agent-webhook-certs", "--wait=true",
                         ns="reload-agent", timeout=120)
            self.kubectl("apply", "-k", os.path.join(REPO, "manifests/webhook/certgen"), timeout=120)

    def ensure_webhook(self):
        """Installs the webhook exactly as docs/webhook-install.md says
        (kubectl apply -k manifests/webhook/certgen, the cluster sync service
        included) once per run, and waits until the certificate Job completed
        and both Deployments are rolled out."""
        with self.lock:
            if self.webhook_ready:
                return
            self.kubectl("apply", "-k", os.path.join(REPO, "manifests/webhook/certgen"), timeout=120)
            # A reused cluster may run an older build of the image under the
            # same tag: restart it then, so the webhook is the tree under test.
            for name in ("reload-agent-webhook", "reload-agent-sync"):
                if self.webhook_outdated(name):
                    self.kubectl("rollout", "restart", "deployment/" + name, ns="reload-agent")
            self.rerun_certs_if_entry_new()
            wait_until(lambda: (self.get("job", "reload-agent-webhook-certs", ns="reload-agent")
                                .get("status", {}).get("succeeded")),
                       180, "the webhook certs Job to succeed")
            for name in ("reload-agent-webhook", "reload-agent-sync"):
                self.kubectl("rollout", "status", "deployment/" + name, "--timeout=180s",
                             ns="reload-agent", timeout=200)
            self.webhook_ready = True


def agent_image_id(state):
    """The image ID (sha256:...) images.sh last imported as the agent."""
    path = os.path.join(state, "images", "docker.io_library_reload-agent_0.1.0.id")
    try:
        with open(path) as f:
            return "sha256:" + f.read().strip()
    except OSError:
        return None


def rfc3339(s):
    """Seconds since the epoch of an RFC 3339 UTC time with microseconds."""
    if not s:
        return 0.0
    base, _, frac = s.rstrip("Z").partition(".")
    t = calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S"))
    return t + (float("0." + frac) if frac else 0.0)


class Env:
    """One test: its namespace (created fresh, deleted after), its output
    buffer (printed by the runner) and its diagnostic dump."""

    def __init__(self, cluster, name):
        self.c = cluster
        self.name = name
        short = name.split("::")[-1].replace("test_", "").replace("_", "-")[:40].strip("-")
        self.ns = "e2e-" + short
        self.out = []
        self.t0 = time.time()

    def log(self, msg):
        self.out.append("  [%5.1fs] %s" % (time.time() - self.t0, msg))

    def setup(self):
        rc, _, _ = self.c.kubectl("get", "namespace", self.ns, check=False)
        if rc == 0:
            self.c.kubectl("delete", "namespace", self.ns, "--wait=true", timeout=180)
        self.c.kubectl("create", "namespace", self.ns)
        wait_until(lambda: self.c.get("serviceaccount", "default", ns=self.ns, check=False),
                   60, "the default ServiceAccount of " + self.ns)

    def cleanup(self, keep=False):
        if not keep:
            self.c.kubectl("delete", "namespace", self.ns, "--wait=false", check=False)

    def kubectl(self, *args, **kw):
        kw.setdefault("ns", self.ns)
        return self.c.kubectl(*args, **kw)

    def get(self, kind, name=None, check=True):
        return self.c.get(kind, name, ns=self.ns, check=check)

    def apply(self, text, server_side=False):
        args = ["apply", "-f", "-"] + (["--server-side"] if server_side else [])
        return self.kubectl(*args, input=text)

    def pods(self, selector):
        return self.get("pods", None)["items"] if not selector else json.loads(
            self.kubectl("get", "pods", "-l", selector, "-o", "json"))["items"]

    def ready_pods(self, selector):
        out = []
        for p in self.pods(selector):
            if p["metadata"].get("deletionTimestamp"):
                continue
            conds = {c["type"]: c["status"] for c in p.get("status", {}).get("conditions", [])}
            if conds.get("Ready") == "True":
                out.append(p)
        return out

    def exec(self, pod, container, *cmd, check=True):
        return self.kubectl("exec", pod, "-c", container, "--", *cmd, check=check, timeout=30)

    def agent_log(self, pod, previous=False):
        args = ["logs", pod, "-c", AGENT_CONTAINER] + (["--previous"] if previous else [])
        rc, out, err = self.kubectl(*args, check=False)
        return out if rc == 0 else ""

    def agent_events(self, pod):
        """The agent's JSON log lines as dicts (the injected sidecar logs
        text by default; tests that read events set --log-format json)."""
        evs = []
        for line in self.agent_log(pod).splitlines():
            try:
                evs.append(json.loads(line))
            except ValueError:
                pass
        return evs

    def wait_agent_event(self, pod, event, timeout, pred=None):
        """The first agent log event named event (and matching pred) of pod."""
        def found():
            for e in self.agent_events(pod):
                if e.get("event") == event and (pred is None or pred(e)):
                    return e
            return None
        return wait_until(found, timeout, "agent event %r in pod %s" % (event, pod))

    def events(self):
        return self.get("events")["items"]

    def dump(self):
        """What a failing test leaves for a post-mortem: pods, the agent's
        log of each pod, the namespace's events."""
        lines = ["----- diagnostics for namespace %s" % self.ns]
        rc, out, err = self.kubectl("get", "all", "-o", "wide", check=False)
        lines.append(out or err)
        pods = self.get("pods", check=False) or {"items": []}
        for p in pods["items"]:
            name = p["metadata"]["name"]
            st = p.get("status", {})
            lines.append("pod %s phase=%s" % (name, st.get("phase")))
            for cs in st.get("initContainerStatuses", []) + st.get("containerStatuses", []):
                lines.append("  container %s ready=%s restarts=%s state=%s" % (
                    cs["name"], cs.get("ready"), cs.get("restartCount"), json.dumps(cs.get("state"))))
            if any(c["name"] == AGENT_CONTAINER for c in p["spec"].get("initContainers", [])):
                lines.append("  --- agent log of %s:" % name)
                lines += ["    " + l for l in self.agent_log(name).splitlines()[-60:]]
        rc, out, err = self.kubectl("get", "events", "--sort-by=.lastTimestamp", check=False)
        lines.append("--- events:")
        lines.append(out or err)
        return "\n".join(lines)


# ---- what several scenarios do alike ----

def grant_role(env, sa="default"):
    """What docs/kubernetes.md "RBAC for injected workloads" tells a user to run."""
    env.kubectl("apply", "-f", os.path.join(REPO, "manifests/role.yaml"))
    env.kubectl("create", "rolebinding", "reload-agent", "--role=reload-agent",
                "--serviceaccount=%s:%s" % (env.ns, sa))


def rolled_out(env, kind, name, gen, want):
    """True when the controller has observed generation gen and every pod
    runs the current template and is ready."""
    o = env.get(kind.lower(), name)
    st = o.get("status", {})
    if st.get("observedGeneration") != gen:
        return False
    if kind == "Deployment":
        return (st.get("updatedReplicas") == want and st.get("readyReplicas") == want
                and st.get("replicas") == want and st.get("availableReplicas") == want)
    if kind == "StatefulSet":
        return (st.get("updatedReplicas") == want and st.get("readyReplicas") == want
                and st.get("currentRevision") == st.get("updateRevision"))
    return (st.get("updatedNumberScheduled") == want and st.get("numberReady") == want
            and st.get("desiredNumberScheduled") == want)
