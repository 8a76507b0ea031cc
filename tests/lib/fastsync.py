"""The fast-sync harness shared by the suites that drive the agent against
the API double (tests/lib/fakeapi.py): the fixture's pod and its objects,
the agent as that pod's sidecar on an awsim volume, and readers of the
double's request record (lists, watches, PATCHes, storms) and of /status.
"""
import json
import os
import time

from tests.lib import fakeapi
from tests.lib.proc import check, free_port, http_get, wait_until
from tests.lib.agent import activity, trace


SYNC = "reload-agent.io/sync"
META = "as=PartialObjectMetadata;"
META_LIST = "as=PartialObjectMetadataList;"
TABLE = "as=Table;"


def put(fake, resource, obj):
    st, r = fake.ctl("POST", "/object", {"resource": resource, "object": obj})
    check(st == 200, "POST /object: %s %s" % (st, r))
    return r["metadata"]["resourceVersion"]


def setup(env, volumes=None, env_from=None):
    fake = fakeapi.launch(env.path("kube"), spawn=env.spawn)
    pod = fake.info["pods"][0]
    st, p = fake.ctl("GET", "/object?resource=pods&name=" + pod)
    p["spec"]["volumes"] = volumes if volumes is not None else [
        {"name": "site", "configMap": {"name": "site"}},
        {"name": "creds", "secret": {"secretName": "creds"}}]
    if env_from:
        p["spec"]["containers"][0]["envFrom"] = env_from
    put(fake, "pods", p)
    put(fake, "configmaps", {"metadata": {"name": "site"}, "data": {"site.conf": "v0"}})
    put(fake, "secrets", {"metadata": {"name": "creds"}, "data": {"password": "c2VjcmV0MA=="}})
    vol = env.path("vol")
    os.mkdir(vol)
    env.awsim(vol, {"site.conf": "v0\n"}, "--seed", "1")
    return fake, pod, vol


def start(env, fake, pod, vol, *extra):
    port = free_port()
    args = ["--watch", vol, "--debounce", "20ms", "--resync", "0", "--action", "none",
            "--kube-api", fake.url, "--kube-ca-file", fake.info["ca"],
            "--kube-token-file", fake.info["token_file"], "--pod-name", pod,
            "--namespace", "default", "--annotations", "", "--events=false",
            "--listen", "127.0.0.1:%d" % port, "--fast-sync", "--fast-sync-confirm", "300ms"]
    a = env.agent(args + list(extra))
    a.wait_event("ready", timeout=15)
    a.wait_event("fast-sync-start", timeout=15)
    a.port = port
    wait_until(lambda: all(o["streaming"] for o in status(a)["objects"]), 15,
               "every watch streaming")
    return a


def status(a):
    st, body = http_get("http://127.0.0.1:%d/status" % a.port)
    check(st == 200, "/status: %s" % st)
    return json.loads(body)["fast_sync"]


def requests(fake):
    st, rs = fake.ctl("GET", "/requests")
    check(st == 200, "requests: %s" % st)
    return rs


def patches(fake, pod):
    return [r for r in requests(fake) if r["method"] == "PATCH" and r["path"].endswith("/pods/" + pod)]


def nudge_values(fake, pod):
    return [((r["body"] or {}).get("metadata") or {}).get("annotations", {}).get(SYNC)
            for r in patches(fake, pod)]


# ---- the API budget (docs/fast-sync.md "The API budget"), as the tests check it ----

BACKOFF_BASE, BACKOFF_CAP, JITTER_LOW = 1.0, 30.0, 0.75  # seconds; a delay is 75-125 % of its step
NUDGE_FLOOR = 1.0  # seconds between two PATCHes of the pod


def steps(seconds):
    """The most backoff steps (each at most one list and one watch of an object) that fit in
    `seconds` from a failure: one per delay, each at least 75 % of 1 s x 2^(n-1) capped at
    30 s, plus the step in flight when the count started."""
    n, t = 0, 0.0
    while True:
        t += JITTER_LOW * min(BACKOFF_BASE * 2 ** n, BACKOFF_CAP)
        if t > seconds:
            return n + 1
        n += 1


def nudges(seconds):
    """The most PATCHes in `seconds`: one per floor, plus the one in flight."""
    return int(seconds / NUDGE_FLOOR) + 1


def storm(fake, resource, name, mode, **kw):
    """Sets (mode None: removes) the fake's storm for every watch of one object."""
    st, r = fake.ctl("POST", "/storm", dict(kw, resource=resource, name=name, mode=mode))
    check(st == 200, "POST /storm: %s %r" % (st, r))


def reads_of(fake, name):
    """(lists, watches) of one object among the recorded requests."""
    rs = [r for r in requests(fake) if r["method"] == "GET" and
          r["query"].get("fieldSelector") == "metadata.name=" + name]
    return ([r for r in rs if not r["query"].get("watch")], [r for r in rs if r["query"].get("watch")])


def kick(fake):
    """Clears the request record, then ends every open stream at once (a stream that ends
    that early is a failure: the first backoff step)."""
    fake.ctl("POST", "/requests/clear")
    fake.ctl("POST", "/watch", {"action": "end"})
    return time.monotonic()


def in_budget(fake, name, seconds, lists=True):
    """Checks one object's lists and watches since the kick against the budget."""
    ls, ws = reads_of(fake, name)
    most = steps(seconds)
    check(len(ws) <= most and (len(ls) <= most if lists else not ls),
          "%s: %d lists and %d watches in %.0f s, the budget allows %d of each: %r" % (
              name, len(ls), len(ws), seconds, most,
              [(r["query"].get("watch"), r["query"].get("resourceVersion")) for r in ls + ws]))
    return ls, ws


def budget_hits(a):
    """reload_agent_fast_sync_budget_hits_total by limit, from /metrics."""
    st, body = http_get("http://127.0.0.1:%d/metrics" % a.port)
    check(st == 200, "/metrics: %s" % st)
    out = {}
    for line in body.decode().splitlines():
        if line.startswith("reload_agent_fast_sync_budget_hits_total{"):
            out[line.split('limit="')[1].split('"')[0]] = float(line.rsplit(" ", 1)[1])
    return out
