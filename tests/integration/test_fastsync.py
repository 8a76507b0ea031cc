"""Fast sync against the fake API server (tests/lib/fakeapi.py): the agent
as one of the fixture's pods, whose spec names ConfigMaps and Secrets, on a
kubelet-layout volume written by build/tools/awsim. The test plays the
kubelet: it rewrites the volume when it sees the nudge (or does not, to
make the agent re-nudge and fall back). The fake stands in for faults the
real server will not produce on demand: watches dropped, ERROR 410 events,
a 410 status after compaction, malformed events, refused patches, a
rotated token. What the agent did is read from the fake's request record
and from /status, not only from the log.
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


def test_watches_are_named_and_metadata_only(env):
    """Every object of the pod spec (volumes, projected sources, env) gets
    one list and one watch with fieldSelector=metadata.name=NAME and the
    metadata-only Accept header; nothing is read without a name."""
    vols = [{"name": "site", "configMap": {"name": "site"}},
            {"name": "creds", "secret": {"secretName": "creds"}},
            {"name": "p", "projected": {"sources": [{"configMap": {"name": "extra"}},
                                                    {"secret": {"name": "tls"}}]}}]
    fake, pod, vol = setup(env, vols, env_from=[{"configMapRef": {"name": "envcm"}}])
    a = start(env, fake, pod, vol)
    st = status(a)
    got = sorted((o["resource"], o["name"]) for o in st["objects"])
    check(got == [("configmaps", "envcm"), ("configmaps", "extra"), ("configmaps", "site"),
                  ("secrets", "creds"), ("secrets", "tls")], "objects: %r" % got)
    reads = [r for r in requests(fake) if r["method"] == "GET" and
             (r["path"].endswith("/configmaps") or r["path"].endswith("/secrets"))]
    check(len(reads) == 10, "want one list and one watch per object: %r" % [
        (r["path"], r["query"]) for r in reads])
    for r in reads:
        q = r["query"]
        check(q.get("fieldSelector", "").startswith("metadata.name="), "unnamed read: %r" % q)
        if r["path"].endswith("/secrets"):  # a Table without objects: no annotation either
            want = TABLE
            check(q.get("includeObject") == "None", "a Secret read with objects: %r" % q)
        else:
            want = META if q.get("watch") else META_LIST
        check(want in (r.get("accept") or ""), "not metadata only: %r" % r.get("accept"))
        if q.get("watch"):
            check(q.get("allowWatchBookmarks") == "true" and q.get("resourceVersion"),
                  "watch without bookmarks or resourceVersion: %r" % q)
    check(not patches(fake, pod), "a nudge without a change")
    check("c2VjcmV0" not in "\n".join(a.lines), "the agent logged the Secret's data")


def test_nudge_then_synced(env):
    """A ConfigMap edit gives one PATCH of the pod's annotation to the new
    resourceVersion; once the volume changes, the change is synced with one
    nudge (in the log and /status)."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol, "--fast-sync-confirm", "30s")
    rv = put(fake, "configmaps", {"metadata": {"name": "site"}, "data": {"site.conf": "v1"}})
    wait_until(lambda: nudge_values(fake, pod) == [rv], 10, "the nudge")
    check(patches(fake, pod)[0]["content_type"] == "application/merge-patch+json",
          "content type %r" % patches(fake, pod)[0]["content_type"])
    st, obj = fake.ctl("GET", "/object?resource=pods&name=" + pod)
    check(obj["metadata"]["annotations"].get(SYNC) == rv, "the pod's annotation: %r" %
          obj["metadata"]["annotations"])
    env.awsim(vol, {"site.conf": "v1\n"})  # the kubelet's swap
    ev = a.wait_event("fast-sync-synced", timeout=10)[-1]
    check(ev["resource_version"] == rv and ev["nudges"] == 1, "synced: %r" % ev)
    s = status(a)
    check(s["state"] == "idle" and s["synced"] == 1 and s["nudges"] == 1 and
          s["last"]["result"] == "synced", "status: %r" % s)


def test_renudge_then_fallback(env):
    """No content change after a nudge: re-nudge with a new value each time
    (rv, rv.2, rv.3, rv.4), then fall back, in the log and in /status; the
    next edit starts again."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol, "--fast-sync-confirm", "100ms")
    rv = put(fake, "configmaps", {"metadata": {"name": "site"}, "data": {"site.conf": "v1"}})
    ev = a.wait_event("fast-sync-fallback", timeout=15)[-1]
    check(nudge_values(fake, pod) == [rv, rv + ".2", rv + ".3", rv + ".4"],
          "nudges: %r" % nudge_values(fake, pod))
    check(ev["nudges"] == 4 and "periodic sync" in ev["msg"], "fallback: %r" % ev)
    s = status(a)
    check(s["state"] == "fallback" and s["fallback"] and s["fallbacks"] == 1 and
          s["last"]["result"] == "fell back", "status: %r" % s)
    rv2 = put(fake, "configmaps", {"metadata": {"name": "site"}, "data": {"site.conf": "v2"}})
    wait_until(lambda: rv2 in nudge_values(fake, pod), 10, "the next edit's nudge")
    env.awsim(vol, {"site.conf": "v2\n"})
    a.wait_match("fast-sync-synced", timeout=10, resource_version=rv2)
    check(status(a)["state"] == "idle", "not idle after the sync")


def test_refused_nudge_falls_back_at_once(env):
    """A nudge the API server refuses (403: RBAC, or the policy's 422) is not
    repeated: the agent says why and falls back."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol)
    fake.ctl("POST", "/faults", {"method": "PATCH", "path_regex": "/pods/", "status": 403})
    put(fake, "configmaps", {"metadata": {"name": "site"}, "data": {"site.conf": "v1"}})
    a.wait_event("fast-sync-fallback", timeout=10)
    err = a.wait_event("fast-sync-error", timeout=5)[-1]
    check('verb "patch" on resource "pods"' in err["error"], "error: %r" % err["error"])
    # the hint names fast sync's own Role, not the rollout Role of manifests/role.yaml
    check("grant it fast sync's Role" in err["error"] and "reload-agent inject -o rbac" in err["error"]
          and "manifests/role.yaml" not in err["error"], "hint: %r" % err["error"])
    check(len(patches(fake, pod)) == 1, "a refused nudge was repeated")
    s = status(a)
    check(s["patch_errors"] == 1 and s["fallback"] and "patch" in s["last_error"], "status: %r" % s)


def test_watch_faults_recover(env):
    """Dropped streams reconnect (with the backoff), an ERROR 410 event and a
    410 status relist, a malformed event is one clear error line and a
    relist; a change made while the watches were down is nudged for after
    the relist, an unchanged object is not."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol, "--fast-sync-confirm", "30s")

    def watches(name):
        return [o for o in status(a)["objects"] if o["name"] == name][0]

    # the drop must find both streams open at the server (under ASan the
    # watch requests can still be on their way after fast-sync-start)
    wait_until(lambda: len(fake.ctl("GET", "/watches")[1]) == 2, 15, "both watches open at the fake")
    before = watches("site")["watches"]
    fake.ctl("POST", "/watch", {"action": "drop"})
    wait_until(lambda: watches("site")["watches"] > before and watches("site")["streaming"], 15,
               "the watch to reconnect after a drop")
    lists = watches("site")["lists"]
    fake.ctl("POST", "/watch", {"action": "gone"})
    wait_until(lambda: watches("site")["lists"] > lists and watches("site")["streaming"], 15,
               "a relist after an ERROR 410 event")
    check(watches("site")["gone"] >= 1, "410 not counted: %r" % watches("site"))
    # compaction: the watches are dropped, the ConfigMap changes meanwhile,
    # and resuming from the old resourceVersion is answered 410 Gone
    fake.ctl("POST", "/watch", {"gone_as": "status"})
    lists = watches("site")["lists"]
    fake.ctl("POST", "/faults", {"method": "GET", "path_regex": "/configmaps$", "status": 503,
                                 "count": 2})
    fake.ctl("POST", "/watch", {"action": "drop"})
    rv = put(fake, "configmaps", {"metadata": {"name": "site"}, "data": {"site.conf": "v1"}})
    put(fake, "configmaps", {"metadata": {"name": "unrelated"}, "data": {}})
    fake.ctl("POST", "/watch", {"compact": True})
    wait_until(lambda: rv in nudge_values(fake, pod), 20, "the nudge for the missed change")
    check(watches("site")["lists"] > lists, "no relist after the 410 status")
    # the unchanged ConfigMap is not nudged for; the Secret, relisted as a
    # Table without resourceVersions, is (test_secret_change_and_relist)
    check([v for v in nudge_values(fake, pod) if not v.startswith("list-")] == [rv],
          "nudged for an unchanged object: %r" % nudge_values(fake, pod))
    # the errors logged so far (the drops, the 503s) are not the malformed event's
    seen = len(a.matching("fast-sync-error"))
    fake.ctl("POST", "/watch", {"action": "garbage"})
    a.wait_for(lambda evs: [e for e in [e for e in evs if e.get("event") == "fast-sync-error"][seen:]
                            if "not a JSON object" in e.get("error", "")] or None, 10,
               "the malformed event's fast-sync-error")
    wait_until(lambda: all(o["streaming"] for o in status(a)["objects"]), 20,
               "the watches back after a malformed event")


def test_secret_change_and_relist(env):
    """A Secret is watched as a Table (no object, so not its
    last-applied-configuration annotation either): an edit is nudged with
    its resourceVersion; after a relist, which cannot tell a Table row's
    resourceVersion, it is nudged once more, with a value named after the
    list."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol, "--fast-sync-confirm", "30s")
    rv = put(fake, "secrets", {"metadata": {"name": "creds", "annotations": {
        "kubectl.kubernetes.io/last-applied-configuration": '{"data":{"password":"c2VjcmV0MQ=="}}'}},
        "data": {"password": "c2VjcmV0MQ=="}})
    wait_until(lambda: nudge_values(fake, pod) == [rv], 10, "the Secret's nudge")
    env.awsim(vol, {"site.conf": "v0\n", "password": "secret1"})
    a.wait_match("fast-sync-synced", timeout=10, resource_version=rv)
    fake.ctl("POST", "/watch", {"action": "gone"})
    wait_until(lambda: len(nudge_values(fake, pod)) == 2, 15, "the nudge after the relist")
    check(nudge_values(fake, pod)[1].startswith("list-"), "nudges: %r" % nudge_values(fake, pod))
    check("c2VjcmV0MQ" not in "\n".join(a.lines), "the Secret's data in the agent's log")


def test_token_rotation(env):
    """A rotated token: the open watches go on; after the server drops them,
    the first reconnect's 401 makes the agent re-read the token file, and
    the next one uses the new token."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol, "--fast-sync-confirm", "30s")
    fake.ctl("POST", "/token", {"token": "rotated-" + os.urandom(8).hex()})
    fake.ctl("POST", "/requests/clear")
    fake.ctl("POST", "/watch", {"action": "drop"})
    wait_until(lambda: all(o["streaming"] for o in status(a)["objects"]) and
               any(r["authorized"] and r["query"].get("watch") for r in requests(fake)), 30,
               "the watches back with the new token")
    rv = put(fake, "configmaps", {"metadata": {"name": "site"}, "data": {"site.conf": "v1"}})
    wait_until(lambda: rv in nudge_values(fake, pod), 10, "a nudge with the new token")


def test_objects_from_the_flag(env):
    """--fast-sync-objects names the objects: the pod is not read for them,
    and only those are watched."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol, "--fast-sync-objects", "configmap/site")
    check([(o["resource"], o["name"]) for o in status(a)["objects"]] == [("configmaps", "site")],
          "objects: %r" % status(a)["objects"])
    check(not [r for r in requests(fake) if "/secrets" in r["path"]], "a Secret was read")


def test_bad_objects_flag(env):
    r = env.run([env.binary, "run", "--watch", env.tmp, "--fast-sync",
                 "--fast-sync-objects", "deployment/web"], timeout=20)
    err = r.stderr.decode()
    check(r.returncode == 2 and "--fast-sync-objects" in err and "configmap/NAME" in err,
          "exit %d: %r" % (r.returncode, err))


def test_idle_with_watches_open(env):
    """With the watches open and nothing sent, the agent makes no syscall
    at all: no timer runs while a stream is open (--resync 0)."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol)
    time.sleep(0.5)
    lines = trace(env, a.pid, "fastsync")
    check(lines, "strace recorded nothing at all")
    busy = activity(lines)
    check(not busy, "the idle agent made syscalls with the watches open: %r" % busy[:10])


def test_shutdown_with_requests_in_flight(env):
    """SIGTERM while a nudge is in flight and the watches are open: the agent
    exits 0 at once (every handle closed: uv_loop_close succeeded), and a
    second agent does the same while its pod GET is still unanswered."""
    fake, pod, vol = setup(env)
    a = start(env, fake, pod, vol)
    fake.ctl("POST", "/faults", {"method": "PATCH", "path_regex": "/pods/", "delay_ms": 3000})
    put(fake, "configmaps", {"metadata": {"name": "site"}, "data": {"site.conf": "v1"}})
    a.wait_event("fast-sync-nudge", timeout=10)
    t0 = time.monotonic()
    rc = a.stop()
    check(rc == 0, "exit status %r with a nudge in flight" % rc)
    check(time.monotonic() - t0 < 3, "the agent waited for the nudge's reply to exit")
    fake.ctl("POST", "/faults/clear")
    fake.ctl("POST", "/faults", {"method": "GET", "path_regex": "/pods/", "delay_ms": 3000})
    port = free_port()
    b = env.agent(["--watch", vol, "--resync", "0", "--action", "none", "--kube-api", fake.url,
                   "--kube-ca-file", fake.info["ca"], "--kube-token-file", fake.info["token_file"],
                   "--pod-name", pod, "--namespace", "default", "--annotations", "",
                   "--events=false", "--listen", "127.0.0.1:%d" % port, "--fast-sync"])
    b.wait_event("ready", timeout=15)
    rc = b.stop()
    check(rc == 0, "exit status %r with the pod GET in flight" % rc)
