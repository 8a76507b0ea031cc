"""The cluster sync service (`reload-agent sync`, docs/sync.md) against the
API double (tests/lib/fakeapi.py): the double with pods that carry the
injector's sync-objects annotation, the service as a process with its log
read by a thread, and readers of the double's request record (watches,
PATCHes of pods)."""
import json
import subprocess
import threading
import time

from tests.lib import fakeapi
from tests.lib.proc import check, wait_until

OBJECTS = "reload-agent.io/sync-objects"
SYNC = "reload-agent.io/sync"


class Sync:
    """A running `reload-agent sync`; its stderr lines in self.lines."""

    def __init__(self, env, fake, identity, *extra, scope=("--namespaces", "default")):
        self.cmd = [env.binary, "sync"] + list(scope) + ["--namespace", "default",
                    "--kube-api", fake.url, "--kube-ca-file", fake.info["ca"],
                    "--kube-token-file", fake.info["token_file"], "--identity", identity,
                    "--lease-duration", "3s", "--lease-retry", "200ms", "--coalesce", "20ms",
                    "--watch-timeout", "60s"] + list(extra)
        self.proc = env.spawn(self.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
        self.lines = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.proc.stderr:
            with self.cond:
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def has(self, text):
        with self.cond:
            return any(text in line for line in self.lines)

    def leader(self):
        """True once it said it became the leader and has not said it stopped."""
        with self.cond:
            state = False
            for line in self.lines:
                if "became the leader" in line:
                    state = True
                elif "is no longer the leader" in line:
                    state = False
            return state

    def stop(self, timeout=10):
        self.proc.terminate()
        return self.proc.wait(timeout)


def pod(name, objects=None, synced=None, ns=None):
    """A pod object for the double: bound to a node that does not exist, with
    the injector's annotation (and a previous nudge's, if any); in namespace
    ns (default: the double's)."""
    ann = {}
    if objects is not None:
        ann[OBJECTS] = objects
    if synced is not None:
        ann[SYNC] = synced
    meta = {"name": name, "annotations": ann}
    if ns is not None:
        meta["namespace"] = ns
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": "nowhere", "containers": [{"name": "app", "image": "x"}]}}


def put(fake, resource, obj):
    st, r = fake.ctl("POST", "/object", {"resource": resource, "object": obj})
    check(st == 200, "POST /object: %s %s" % (st, r))
    return r["metadata"]["resourceVersion"]


def put_many(fake, items):
    """[(resource, object)] in one request; their resourceVersions."""
    st, r = fake.ctl("POST", "/objects", [{"resource": res, "object": o} for res, o in items],
                     timeout=300)
    check(st == 200, "POST /objects: %s %s" % (st, str(r)[:200]))
    return r["resourceVersions"]


def launch(env):
    """The double with no objects."""
    return fakeapi.launch(env.path("kube"), fixture="none", pods=1, spawn=env.spawn)


def requests(fake):
    st, r = fake.ctl("GET", "/requests")
    check(st == 200, "GET /requests: %s" % st)
    return r


def patches(fake, name=None):
    """The PATCHes of pods (of pod name), in order."""
    return [r for r in requests(fake) if r["method"] == "PATCH" and "/pods/" in r["path"] and
            (name is None or r["path"].endswith("/pods/" + name))]


def values(fake, name):
    return [r["body"]["metadata"]["annotations"][SYNC] for r in patches(fake, name)]


def watches_open(fake):
    st, w = fake.ctl("GET", "/watches")
    return [x for x in w if x["name"] is None]


def ready(fake, *svcs, timeout=15):
    """Every service's three watches streaming and one of them leading."""
    wait_until(lambda: len(watches_open(fake)) == 3 * len(svcs), timeout,
               "%d collection watches open" % (3 * len(svcs)))
    wait_until(lambda: sum(s.leader() for s in svcs) == 1, timeout, "one leader")


def lease(fake, name="reload-agent-sync"):
    st, obj = fake.ctl("GET", "/object?resource=leases&name=" + name)
    return obj if st == 200 else None


def settle(seconds):
    """Lets the service act (bounded: a test that expects nothing to happen)."""
    time.sleep(seconds)


def dumps(x):
    return json.dumps(x, indent=1)[:2000]
