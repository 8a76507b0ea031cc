"""Helpers for the end-to-end suite on the real cluster (tests/cluster/).

Cluster: the KEY=VALUE lines of tests/cluster/up.sh (kubectl, kubeconfig,
audit log), kubectl calls with bounded timeouts, the webhook install.
Env: one test's namespace, its waits, and its diagnostic dump (pods, the
agent's log, events) when it fails.

Every wait is bounded in time; nothing here kills a process.
"""
import hashlib
import json
import os
import subprocess
import threading
import time
import urllib.error
import urllib.request

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
AGENT_CONTAINER = "reload-agent"


class TestFailure(AssertionError):
    pass


def check(cond, msg="check failed"):
    if not cond:
        raise TestFailure(msg)


def wait_until(pred, timeout, what, interval=0.5):
    """Polls pred() until it returns a true value (returned) or raises
    TestFailure after timeout seconds, naming what it waited for and the
    last value pred returned."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            v = pred()
        except TestFailure as e:
            v, last = None, str(e)
        if v:
            return v
        if v is not None:
            last = v
        if time.monotonic() >= deadline:
            raise TestFailure("timed out after %.0f s waiting for %s (last: %r)" % (timeout, what, last))
        time.sleep(interval)


def rollout_hash(files):
    """The content hash of docs/hash.md over {logical path: bytes}: one
    sha256sum-style manifest line per file, sorted by path, hashed.
    Independent of the agent's code (the oracle of the rollout tests)."""
    lines = []
    for path in sorted(files, key=lambda p: p.encode()):
        lines.append("%s  %s\n" % (hashlib.sha256(files[path]).hexdigest(), path))
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def http_get(url, timeout=3.0):
    """GET url from the host (pod IPs sit on the cluster's own bridge):
    (status, body text), or (None, error text) when there is no answer."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except (OSError, urllib.error.URLError) as e:
        return None, str(e)


class Cluster:
    """The running cluster, from up.sh's KEY=VALUE lines."""

    def __init__(self, env, binary):
        self.env = env
        self.binary = binary
        self.kubectl_bin = env["KUBECTL"]
        self.kubeconfig = env["KUBECONFIG"]
        self.audit_log = env["AUDIT_LOG"]
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
                        if _rfc3339(ev.get("stageTimestamp", "")) < since:
                            continue
                        if pred is None or pred(ev):
                            out.append(ev)
            except FileNotFoundError:
                pass
        return out

    def webhook_outdated(self):
        """True when a running webhook pod's image is not the imported one."""
        want = agent_image_id(self.env["STATE"])
        pods = self.get("pods", ns="reload-agent")["items"]
        ids = [cs.get("imageID") for p in pods if p["metadata"].get("labels", {}).get(
            "app.kubernetes.io/name") == "reload-agent-webhook" for cs in p["status"].get("containerStatuses", [])]
        return want is None or any(i != want for i in ids)

    def ensure_webhook(self):
        """Installs the webhook exactly as docs/webhook-install.md says
        (kubectl apply -k manifests/webhook/certgen) once per run, and waits
        until the certificate Job completed and both replicas are ready."""
        with self.lock:
            if self.webhook_ready:
                return
            self.kubectl("apply", "-k", os.path.join(REPO, "manifests/webhook/certgen"), timeout=120)
            # A reused cluster may run an older build of the image under the
            # same tag: restart it then, so the webhook is the tree under test.
            if self.webhook_outdated():
                self.kubectl("rollout", "restart", "deployment/reload-agent-webhook", ns="reload-agent")
            wait_until(lambda: (self.get("job", "reload-agent-webhook-certs", ns="reload-agent")
                                .get("status", {}).get("succeeded")),
                       180, "the webhook certs Job to succeed")
            self.kubectl("rollout", "status", "deployment/reload-agent-webhook", "--timeout=180s",
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


def _rfc3339(s):
    """Seconds since the epoch of an RFC 3339 UTC time with microseconds."""
    import calendar
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
