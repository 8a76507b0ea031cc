"""The agent against the fake API server (tests/lib/fakeapi.py): the
fixture started for one test, the agent run as one of the fixture's pods,
and what the fake recorded (requests, the stored objects, the template
annotations' history, the Events), read back through its control API.
Expected hashes come from tests/lib/refhash.py, the independent reference
implementation of the content hash.

Every wait is bounded in time; the fake is stopped with the test's Env.
"""
import hashlib

from tests.lib import fakeapi, refhash
from tests.lib.proc import check, wait_until

HASH_KEY = "reload-agent.io/config-hash"
FILES_KEY = "reload-agent.io/config-files"
LAST_KEY = "reload-agent.io/last-rollout"
STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"

# ---- the fake, volumes, the agent ----

def fake_for(env, fixture="deployment", pods=1, name="kube"):
    """Starts the fake with fixture (pods of the owner chain) for this test."""
    return fakeapi.launch(env.path(name), fixture=fixture, pods=pods, spawn=env.spawn)


def ref_hash(*roots):
    """The content hash of roots by the reference implementation."""
    return refhash.compute([r.encode() for r in roots])[0]


def update(env, vol, files):
    """One AtomicWriter update; returns the reference hash of the new content."""
    env.awsim(vol, files)
    return ref_hash(vol)


def kube_args(fake, pod=None, token_file=None, annotations=""):
    """The agent's flags that point it at the fake, as pod (the first one)."""
    return ["--kube-api", fake.url, "--kube-ca-file", fake.info["ca"],
            "--kube-token-file", token_file or fake.info["token_file"],
            "--pod-name", pod or fake.info["pods"][0], "--namespace", "default",
            "--annotations", annotations]


def start(env, fake, vol, *extra, pod=None, token_file=None, annotations="", jitter="0s",
          wait_reconcile=True):
    """Starts the agent as `pod` with --action rollout unless extra says
    otherwise; waits for ready and, with wait_reconcile, for the startup
    reconcile event (without an annotations file it is logged once the pod
    was read and the owner resolved, so faults added afterwards hit the
    applies, not the resolution)."""
    args = ["--watch", vol, "--debounce", "50ms", "--resync", "0", "--rollout-jitter", jitter,
            "--retry-initial", "100ms", "--retry-max", "1s"]
    args += kube_args(fake, pod, token_file, annotations)
    if "--action" not in extra:
        args += ["--action", "rollout"]
    a = env.agent(args + list(extra))
    a.wait_event("ready", timeout=15)
    if wait_reconcile:
        a.wait_event("reconcile", timeout=15)
    return a


def clean_exit(test):
    """Decorator: after the test, every agent it started must stop on
    SIGTERM with status 0 and must have written only JSON log lines (a crash,
    a sanitizer report or a stray print fails the test)."""
    def run(env):
        test(env)
        for a in env.agents:
            rc = a.stop()
            check(rc == 0, "agent %d exited with %r on SIGTERM" % (a.pid, rc))
            check(not a.bad_lines, "agent %d wrote non-JSON lines: %r" % (a.pid, a.bad_lines[:5]))
    run.__name__ = test.__name__
    run.__doc__ = test.__doc__
    return run


def requests(fake, method=None, path_suffix=None):
    """The requests the fake recorded, by method and path suffix."""
    st, rs = fake.ctl("GET", "/requests")
    check(st == 200, "requests: %s %s" % (st, rs))
    return [r for r in rs if (method is None or r["method"] == method) and
            (path_suffix is None or r["path"].endswith(path_suffix))]


def history(fake, resource, name):
    """The template annotations of resource/name after each stored change."""
    st, h = fake.ctl("GET", "/history?resource=%s&name=%s" % (resource, name))
    check(st == 200, "history: %s %s" % (st, h))
    return h


def template_changes(h):
    """Persisted changes that changed the template annotations (the history
    starts empty; the fixtures' template annotations start as {})."""
    return [b for a, b in zip([{}] + h, h) if a != b]


def stored(fake, resource, name):
    """The object resource/name as the fake stores it."""
    st, o = fake.ctl("GET", "/object?resource=%s&name=%s" % (resource, name))
    check(st == 200, "object: %s %s" % (st, o))
    return o


def put_object(fake, resource, obj):
    """Stores obj (created or replaced) in the fake."""
    st, r = fake.ctl("POST", "/object", {"resource": resource, "object": obj})
    check(st == 200, "POST /object: %s %s" % (st, r))


def faults(fake, *specs):
    """Arms the fake's faults (tests/lib/fakeapi.md, "Control API")."""
    st, r = fake.ctl("POST", "/faults", list(specs))
    check(st == 200, "faults: %s %s" % (st, r))


def kube_events(fake, reason=None, kind=None, name=None):
    """The Events the fake stored, by reason and involved object."""
    st, evs = fake.ctl("GET", "/events")
    check(st == 200, "events: %s %s" % (st, evs))
    return [e for e in evs if (reason is None or e.get("reason") == reason) and
            (kind is None or e.get("involvedObject", {}).get("kind") == kind) and
            (name is None or e.get("involvedObject", {}).get("name") == name)]


def wait_kube_event(fake, reason, kind, name, timeout=10):
    """Waits for an Event reason on kind/name; returns the ones found."""
    return wait_until(lambda: kube_events(fake, reason, kind, name), timeout,
                      "Event %s on %s/%s" % (reason, kind, name))


def rollouts(a, **match):
    """The agent's rollout events whose fields equal match."""
    return a.matching("rollout", **match)


def wait_rollout(a, timeout=15, **match):
    """Waits for a rollout event with the given fields; returns it."""
    return a.wait_match("rollout", timeout, **match)


def wait_action(a, timeout=15, **match):
    """Waits for an action event with the given fields; returns it."""
    return a.wait_match("action", timeout, **match)


def digest16(content):
    """The first 16 hex digits of content's sha256 (the files annotation)."""
    return hashlib.sha256(content.encode()).hexdigest()[:16]
