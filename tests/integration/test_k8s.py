"""Kubernetes integration tests: the real agent against the fake API server.

Every test starts tests/k8s/fakeapi.py (real TLS on loopback, CA-verified,
bearer token checked on every request) with one of its owner-chain fixtures
and runs `reload-agent run` as one of the fixture's pods, on a kubelet-layout
volume written by build/tools/awsim. What the agent did is read back from the
fake (recorded requests, the stored object, its template-annotation history,
the stored Events), not only from the agent's log. Expected hashes come from
tests/refhash.py, the independent reference implementation of the documented
hash; expected messages and behaviour from docs/kubernetes-api.md and the
task contract of the rollout action.
"""
import hashlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time

from lib import check, http_get, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "k8s"))
sys.path.insert(0, os.path.join(HERE, ".."))
import fakeapi  # noqa: E402
import refhash  # noqa: E402

HASH_KEY = "reload-agent.io/config-hash"
FILES_KEY = "reload-agent.io/config-files"
LAST_KEY = "reload-agent.io/last-rollout"
STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
QUIET = 1.0  # seconds of silence after which "nothing more happens" is asserted

# fixture -> (resource, owner name, Kind, patch content type)
OWNERS = {
    "deployment": ("deployments", "web", "Deployment", STRATEGIC),
    "paused-deployment": ("deployments", "web", "Deployment", STRATEGIC),
    "statefulset": ("statefulsets", "db", "StatefulSet", STRATEGIC),
    "ondelete-statefulset": ("statefulsets", "db", "StatefulSet", STRATEGIC),
    "daemonset": ("daemonsets", "agent", "DaemonSet", STRATEGIC),
    "rollout": ("rollouts", "web", "Rollout", MERGE),
}


# ---- the fake, volumes, the agent ----

def fake_for(env, fixture="deployment", pods=1, name="kube"):
    return fakeapi.launch(env.path(name), fixture=fixture, pods=pods, spawn=env.spawn)


def volume(env, files, name="vol"):
    vol = env.path(name)
    os.mkdir(vol)
    env.awsim(vol, files, "--seed", "1")
    return vol


def ref_hash(*roots):
    return refhash.compute([r.encode() for r in roots])[0]


def update(env, vol, files):
    """One AtomicWriter update; returns the reference hash of the new content."""
    env.awsim(vol, files)
    return ref_hash(vol)


def kube_args(fake, pod=None, token_file=None, annotations=""):
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
    st, rs = fake.ctl("GET", "/requests")
    check(st == 200, "requests: %s %s" % (st, rs))
    return [r for r in rs if (method is None or r["method"] == method) and
            (path_suffix is None or r["path"].endswith(path_suffix))]


def history(fake, resource, name):
    st, h = fake.ctl("GET", "/history?resource=%s&name=%s" % (resource, name))
    check(st == 200, "history: %s %s" % (st, h))
    return h


def template_changes(h):
    """Persisted changes that changed the template annotations (the history
    starts empty; the fixtures' template annotations start as {})."""
    return [b for a, b in zip([{}] + h, h) if a != b]


def stored(fake, resource, name):
    st, o = fake.ctl("GET", "/object?resource=%s&name=%s" % (resource, name))
    check(st == 200, "object: %s %s" % (st, o))
    return o


def put_object(fake, resource, obj):
    st, r = fake.ctl("POST", "/object", {"resource": resource, "object": obj})
    check(st == 200, "POST /object: %s %s" % (st, r))


def faults(fake, *specs):
    st, r = fake.ctl("POST", "/faults", list(specs))
    check(st == 200, "faults: %s %s" % (st, r))


def kube_events(fake, reason=None, kind=None, name=None):
    st, evs = fake.ctl("GET", "/events")
    check(st == 200, "events: %s %s" % (st, evs))
    return [e for e in evs if (reason is None or e.get("reason") == reason) and
            (kind is None or e.get("involvedObject", {}).get("kind") == kind) and
            (name is None or e.get("involvedObject", {}).get("name") == name)]


def wait_kube_event(fake, reason, kind, name, timeout=10):
    return wait_until(lambda: kube_events(fake, reason, kind, name), timeout,
                      "Event %s on %s/%s" % (reason, kind, name))


def rollouts(a, **match):
    return a.matching("rollout", **match)


def wait_rollout(a, timeout=15, **match):
    return a.wait_match("rollout", timeout, **match)


def wait_action(a, timeout=15, **match):
    return a.wait_match("action", timeout, **match)


def digest16(content):
    return hashlib.sha256(content.encode()).hexdigest()[:16]


def check_patch_body(req, h, files):
    """The PATCH sets the hash and the files map in the template, and
    last-rollout (RFC3339 UTC) in the owner's metadata."""
    body = req["body"]
    check(isinstance(body, dict), "PATCH body is not JSON: %r" % body)
    ann = body["spec"]["template"]["metadata"]["annotations"]
    check(ann.get(HASH_KEY) == h, "patched hash %r, want %s" % (ann.get(HASH_KEY), h))
    check(json.loads(ann[FILES_KEY]) == files, "files annotation %r, want %r" %
          (ann.get(FILES_KEY), files))
    last = body["metadata"]["annotations"][LAST_KEY]
    time.strptime(last, "%Y-%m-%dT%H:%M:%SZ")  # raises if not RFC3339 UTC seconds


# ---- 1. every owner kind: exactly one PATCH per content change ----

def owner_patched_once(env, fixture):
    resource, name, kind, ctype = OWNERS[fixture]
    fake = fake_for(env, fixture)
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, fake, vol)
    check(history(fake, resource, name) == [], "the owner changed before any content change")
    h = update(env, vol, {"app.conf": "v1\n"})
    ev = wait_rollout(a, result="patched")
    check(ev["hash"] == h and ev["owner"] == "%s/%s" % (kind, name), "rollout event %r" % ev)
    wait_action(a, action="rollout", result="success")
    wait_kube_event(fake, "RolloutTriggered", kind, name)
    a.quiet(QUIET)
    patches = requests(fake, "PATCH")
    check(len(patches) == 1, "%d PATCHes: %r" % (len(patches), patches))
    p = patches[0]
    check(p["path"] == "/apis/%s/namespaces/default/%s/%s" % (
        "argoproj.io/v1alpha1" if fixture == "rollout" else "apps/v1", resource, name),
        "PATCH path %s" % p["path"])
    check(p["content_type"].split(";")[0] == ctype, "content type %r, want %s" %
          (p["content_type"], ctype))
    check(p["query"].get("fieldManager") == "reload-agent", "query %r" % p["query"])
    check(p["status"] == 200, "PATCH answered %r" % p["status"])
    check_patch_body(p, h, {vol + "/app.conf": digest16("v1\n")})
    changes = template_changes(history(fake, resource, name))
    check(len(changes) == 1 and changes[0].get(HASH_KEY) == h, "template changes %r" % changes)
    check(stored(fake, resource, name)["spec"]["template"]["metadata"]["annotations"][HASH_KEY]
          == h, "stored template hash")
    ev = kube_events(fake, "RolloutTriggered", kind, name)[0]
    check(ev["type"] == "Normal" and ev["involvedObject"]["namespace"] == "default" and
          ev["involvedObject"].get("uid") == stored(fake, resource, name)["metadata"]["uid"],
          "RolloutTriggered event %r" % ev)


@clean_exit
def test_rollout_patches_deployment_once(env):
    owner_patched_once(env, "deployment")


@clean_exit
def test_rollout_patches_statefulset_once(env):
    owner_patched_once(env, "statefulset")


@clean_exit
def test_rollout_patches_daemonset_once(env):
    owner_patched_once(env, "daemonset")


@clean_exit
def test_rollout_patches_argo_rollout_with_merge_patch(env):
    owner_patched_once(env, "rollout")


# ---- 2. owners that cannot be rolled ----

def not_rollable(env, fixture, words):
    fake = fake_for(env, fixture)
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, fake, vol)
    update(env, vol, {"app.conf": "v1\n"})
    ev = wait_rollout(a, result="failed")
    check(ev.get("blocked") is True, "not marked blocked: %r" % ev)
    err = ev.get("error", "")
    for w in words:
        check(w in err, "error %r does not say %r" % (err, w))
    wait_action(a, action="rollout", result="failure")
    gets = len(requests(fake, "GET"))
    a.quiet(2.0)
    check(len(requests(fake, "GET")) == gets, "the agent kept polling the API after a permanent "
          "failure (%d GETs, then %d)" % (gets, len(requests(fake, "GET"))))
    check(not a.of("retry"), "a retry was scheduled: %r" % a.of("retry"))
    check(not requests(fake, "PATCH"), "something was patched: %r" % requests(fake, "PATCH"))
    # the next content change tries again (and fails the same way)
    update(env, vol, {"app.conf": "v2\n"})
    a.wait_for(lambda evs: len([e for e in evs if e.get("event") == "rollout" and
                                e.get("blocked")]) >= 2, 10, "a second blocked rollout")
    check(not requests(fake, "PATCH"), "something was patched on the second change")


@clean_exit
def test_cronjob_pod_is_not_rolled(env):
    not_rollable(env, "cronjob", ["immutable", "nightly-123", "CronJob"])


@clean_exit
def test_job_pod_is_not_rolled(env):
    not_rollable(env, "job", ["immutable", "migrate"])


@clean_exit
def test_bare_pod_is_not_rolled(env):
    not_rollable(env, "bare-pod", ["no controller", "restart"])


@clean_exit
def test_orphan_replicaset_is_not_rolled(env):
    not_rollable(env, "orphan-rs", ["no controller", "cache-6b5f4d7c8"])


# ---- 2b. Argo Rollout with spec.workloadRef ----

REF_PATH = "/apis/apps/v1/namespaces/default/deployments/web-template"


@clean_exit
def test_workloadref_rollout_patches_the_referenced_deployment(env):
    """A Rollout whose spec.workloadRef names a Deployment takes its pod
    template from that Deployment: the Deployment's template is patched
    (strategic merge, the apps/v1 rule), the Rollout never; the Event goes
    to the Rollout, the pod's workload. A second change finds the template
    current after another replica set it."""
    fake = fake_for(env, "workloadref-rollout")
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, fake, vol)
    h = update(env, vol, {"app.conf": "v1\n"})
    ev = wait_rollout(a, result="patched")
    check(ev["hash"] == h and ev["owner"] == "Deployment/web-template" and
          ev.get("via") == "Rollout/web", "rollout event %r" % ev)
    wait_action(a, action="rollout", result="success")
    wait_kube_event(fake, "RolloutTriggered", "Rollout", "web")
    a.quiet(QUIET)
    patches = requests(fake, "PATCH")
    check([p["path"] for p in patches] == [REF_PATH], "PATCHes %r" % patches)
    check(not requests(fake, "PATCH", "/rollouts/web"), "the Rollout was patched")
    check(patches[0]["content_type"].split(";")[0] == STRATEGIC and patches[0]["status"] == 200,
          "PATCH %r" % patches[0])
    check_patch_body(patches[0], h, {vol + "/app.conf": digest16("v1\n")})
    check(history(fake, "rollouts", "web") == [], "the Rollout was changed: %r" %
          history(fake, "rollouts", "web"))
    check("template" not in stored(fake, "rollouts", "web")["spec"], "the Rollout got a template")
    changes = template_changes(history(fake, "deployments", "web-template"))
    check(len(changes) == 1 and changes[0].get(HASH_KEY) == h, "template changes %r" % changes)
    ev = kube_events(fake, "RolloutTriggered", "Rollout", "web")[0]
    check(ev["involvedObject"].get("uid") == stored(fake, "rollouts", "web")["metadata"]["uid"]
          and "web-template" in ev["message"], "RolloutTriggered event %r" % ev)
    # the already-current check reads the Deployment's template: a second
    # agent acting on the same content at start finds it there
    a2 = start(env, fake, vol, "--on-start", "reload", wait_reconcile=False)
    ev = wait_rollout(a2, result="already-current")
    check(ev["hash"] == h and ev["owner"] == "Deployment/web-template", "rollout event %r" % ev)
    a2.quiet(QUIET)
    check(len(requests(fake, "PATCH")) == 1, "PATCHes %r" % requests(fake, "PATCH"))


@clean_exit
def test_workloadref_to_other_kind_is_skipped(env):
    """A workloadRef that does not name an apps/v1 Deployment: no PATCH at
    all, the result is blocked with the reason, a warning, and a
    RolloutSkipped Event on the Rollout."""
    fake = fake_for(env, "workloadref-other")
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, fake, vol)
    update(env, vol, {"app.conf": "v1\n"})
    ev = wait_rollout(a, result="failed")
    check(ev.get("blocked") is True and ev.get("via") == "Rollout/web", "rollout event %r" % ev)
    for w in ("spec.workloadRef", "PodTemplate web-template", "not an apps/v1 Deployment"):
        check(w in ev.get("error", ""), "error %r does not say %r" % (ev.get("error"), w))
    check(ev.get("level") == "warn", "not a warning: %r" % ev)
    skipped = wait_kube_event(fake, "RolloutSkipped", "Rollout", "web")
    check(skipped[0]["type"] == "Warning" and "PodTemplate" in skipped[0]["message"],
          "RolloutSkipped %r" % skipped)
    wait_action(a, action="rollout", result="failure")
    a.quiet(QUIET)
    check(not requests(fake, "PATCH"), "something was patched: %r" % requests(fake, "PATCH"))
    check(not a.of("retry"), "a permanent failure was retried: %r" % a.of("retry"))


@clean_exit
def test_workloadref_unreadable_deployment_is_skipped(env):
    """The referenced Deployment cannot be read (404): blocked with the
    reason, a RolloutSkipped Event on the Rollout, no PATCH."""
    fake = fake_for(env, "workloadref-rollout")
    vol = volume(env, {"app.conf": "v0\n"})
    faults(fake, {"method": "GET", "path_regex": "/deployments/web-template$", "status": 404})
    a = start(env, fake, vol)
    update(env, vol, {"app.conf": "v1\n"})
    ev = wait_rollout(a, result="failed")
    check(ev.get("blocked") is True, "not blocked: %r" % ev)
    err = ev.get("error", "")
    check("web-template" in err and "workloadRef" in err, "error %r" % err)
    wait_kube_event(fake, "RolloutSkipped", "Rollout", "web")
    a.quiet(QUIET)
    check(not requests(fake, "PATCH"), "something was patched: %r" % requests(fake, "PATCH"))


@clean_exit
def test_workloadref_deployment_deleted_later_is_skipped(env):
    """The referenced Deployment disappears after the agent resolved it:
    the GET gets 404, the owner is resolved again on the retry, and the
    rollout is blocked with a RolloutSkipped Event on the Rollout."""
    fake = fake_for(env, "workloadref-rollout")
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, fake, vol)
    faults(fake, {"method": "GET", "path_regex": "/deployments/web-template$", "status": 404})
    update(env, vol, {"app.conf": "v1\n"})
    ev = wait_rollout(a, result="failed", blocked=True)
    check("web-template" in ev.get("error", "") and ev.get("via") == "Rollout/web",
          "rollout event %r" % ev)
    wait_kube_event(fake, "RolloutSkipped", "Rollout", "web")
    a.quiet(QUIET)
    check(not requests(fake, "PATCH"), "something was patched: %r" % requests(fake, "PATCH"))


# ---- 3. two replicas, one rollout ----

@clean_exit
def test_two_replicas_roll_once(env):
    fake = fake_for(env, pods=2)
    vol = volume(env, {"app.conf": "v0\n"})
    pods = fake.info["pods"]
    agents = [start(env, fake, vol, pod=p, jitter="2s") for p in pods]
    h = update(env, vol, {"app.conf": "v1\n"})
    for a in agents:
        a.wait_for(lambda evs: [e for e in evs if e.get("event") == "rollout" and
                                e.get("result") in ("patched", "already-current")], 15,
                   "a rollout result")
    results = sorted(rollouts(a)[0]["result"] for a in agents)
    for a in agents:
        check(rollouts(a)[0]["hash"] == h, "rollout hash %r" % rollouts(a)[0])
    time.sleep(QUIET)
    patches = requests(fake, "PATCH")
    changes = template_changes(history(fake, "deployments", "web"))
    check(len(changes) == 1 and changes[0][HASH_KEY] == h, "template changes %r" % changes)
    if len(patches) == 1:
        check(results == ["already-current", "patched"], "results %r with one PATCH" % results)
    else:  # both GETs came before either PATCH: a race, still one template change
        check(len(patches) == 2 and results == ["patched", "patched"],
              "%d PATCHes, results %r" % (len(patches), results))


# ---- 4. conflict ----

@clean_exit
def test_conflict_is_retried(env):
    fake = fake_for(env)
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, fake, vol)
    faults(fake, {"method": "PATCH", "status": 409, "count": 1})
    h = update(env, vol, {"app.conf": "v1\n"})
    ev = wait_rollout(a, result="failed")
    check("modified" in ev.get("error", "") and not ev.get("blocked"), "409 rollout %r" % ev)
    wait_action(a, action="rollout", result="failure")
    a.wait_event("retry")
    wait_rollout(a, result="patched", hash=h)
    a.quiet(QUIET)
    patches = requests(fake, "PATCH")
    check([p["status"] for p in patches] == [409, 200], "PATCH answers %r" %
          [p["status"] for p in patches])
    changes = template_changes(history(fake, "deployments", "web"))
    check(len(changes) == 1 and changes[0][HASH_KEY] == h, "template changes %r" % changes)


# ---- 5. Retry-After ----

@clean_exit
def test_retry_after_is_honoured(env):
    fake = fake_for(env)
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, fake, vol)
    path = "/apis/apps/v1/namespaces/default/deployments/web"
    faults(fake, {"method": "GET", "path_regex": "/deployments/web$", "status": 429,
                  "plain": True, "retry_after": 2, "count": 1})
    fake.ctl("POST", "/requests/clear")
    h = update(env, vol, {"app.conf": "v1\n"})
    wait_rollout(a, result="patched", hash=h, timeout=20)
    reqs = [r for r in requests(fake) if r["path"] == path]
    check(len(reqs) >= 3 and reqs[0]["status"] == 429 and reqs[0]["fault"],
          "requests to the owner: %r" % [(r["method"], r["status"]) for r in reqs])
    gap = reqs[1]["time"] - reqs[0]["time"]
    check(gap >= 2.0, "the next request came %.2fs after the 429 with Retry-After: 2" % gap)
    check(reqs[1]["method"] == "GET" and reqs[1]["status"] == 200, "then %r" % reqs[1])
    check([r["method"] for r in reqs].count("PATCH") == 1, "PATCHes %r" % reqs)
    changes = template_changes(history(fake, "deployments", "web"))
    check(len(changes) == 1 and changes[0][HASH_KEY] == h, "template changes %r" % changes)


# ---- 6. token rotation ----

@clean_exit
def test_token_rotation_mid_run(env):
    fake = fake_for(env)
    tokdir = env.path("kube-api-access")
    os.mkdir(tokdir)
    env.awsim(tokdir, {"token": fake.token(), "ca.crt": open(fake.info["ca"]).read(),
                       "namespace": "default"}, "--seed", "2")
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, fake, vol, token_file=os.path.join(tokdir, "token"))
    h1 = update(env, vol, {"app.conf": "v1\n"})
    wait_rollout(a, result="patched", hash=h1)
    # The Event about that rollout is posted after it: let it land first, or
    # it can meet the rotated server before the new token file is written
    # (two 401s that say nothing about the agent).
    wait_until(lambda: requests(fake, "POST", "/events"), 10, "the Event of the first rollout")
    new = secrets.token_urlsafe(32)
    st, _ = fake.ctl("POST", "/token", {"token": new})
    check(st == 200, "rotating the fake's token")
    env.awsim(tokdir, {"token": new, "ca.crt": open(fake.info["ca"]).read(),
                       "namespace": "default"})
    h2 = update(env, vol, {"app.conf": "v2\n"})
    wait_rollout(a, result="patched", hash=h2)
    unauthorized = [r for r in requests(fake) if r["status"] == 401]
    check(len(unauthorized) <= 1, "%d requests got 401" % len(unauthorized))
    changes = template_changes(history(fake, "deployments", "web"))
    check([c[HASH_KEY] for c in changes] == [h1, h2], "template changes %r" % changes)
    check(all(r["authorized"] for r in requests(fake, "PATCH")), "a PATCH was unauthorized")


# ---- 7. API down for 30 s ----

@clean_exit
def test_api_down_30s_then_back(env):
    fake = fake_for(env)
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, fake, vol)
    fake.ctl("POST", "/requests/clear")
    st, _ = fake.ctl("POST", "/listener", {"up": False})
    check(st == 200, "listener down")
    t0 = time.monotonic()
    update(env, vol, {"app.conf": "v1\n"})
    a.wait_for(lambda evs: [e for e in evs if e.get("event") == "action" and
                            e.get("result") == "failure"], 20, "a failure while the API is down")
    h = update(env, vol, {"app.conf": "v2\n"})  # a second change during the outage
    time.sleep(max(0.0, 30.0 - (time.monotonic() - t0)))
    fails = [e for e in a.of("action") if e.get("result") == "failure"]
    check(len(fails) >= 2 and a.of("retry"), "%d failures, %d retries during the outage" %
          (len(fails), len(a.of("retry"))))
    check(all("connect" in e.get("error", "").lower() and "127.0.0.1" in e["error"]
              for e in fails), "failures that do not say the API is unreachable: %r" % fails)
    check(not rollouts(a, result="patched"), "patched while the API was down")
    check(not requests(fake), "requests arrived while the listener was down")
    st, _ = fake.ctl("POST", "/listener", {"up": True})
    check(st == 200, "listener up")
    wait_rollout(a, result="patched", hash=h, timeout=20)
    a.quiet(QUIET)
    check(len(requests(fake, "PATCH")) == 1, "PATCHes %r" % requests(fake, "PATCH"))
    changes = template_changes(history(fake, "deployments", "web"))
    check(len(changes) == 1 and changes[0][HASH_KEY] == h == ref_hash(vol),
          "template changes %r, content %s" % (changes, h))


# ---- 8. startup reconcile ----

def annotations_file(env, pairs):
    p = env.path("annotations")
    with open(p, "w") as f:
        f.write("".join('%s="%s"\n' % kv for kv in pairs.items()))
    return p


def reconcile_case(env, pod_hash, from_file):
    """Starts an agent whose pod was created with template hash pod_hash
    (None: no annotation; "current": the content's hash), read from an
    annotations file or from the pod; returns (agent, fake, content hash)."""
    fake = fake_for(env)
    vol = volume(env, {"app.conf": "v0\n"})
    h = ref_hash(vol)
    if pod_hash == "current":
        pod_hash = h
    pod = fake.info["pods"][0]
    ann = ""
    if from_file:
        ann = annotations_file(env, {HASH_KEY: pod_hash} if pod_hash else {"team": "a"})
    elif pod_hash:
        obj = stored(fake, "pods", pod)
        obj["metadata"]["annotations"][HASH_KEY] = pod_hash
        put_object(fake, "pods", obj)
    a = start(env, fake, vol, annotations=ann)
    ev = a.of("reconcile")[0]
    check(ev["hash"] == h and ev["pod_hash"] == (pod_hash or ""), "reconcile event %r" % ev)
    return a, fake, h


def reconcile_rolled_once(a, fake, h):
    """The startup reconcile rolled: one patch, to hash h."""
    check(a.of("reconcile")[0]["rollout"] is True, "reconcile did not roll")
    wait_rollout(a, result="patched", hash=h)
    a.quiet(QUIET)
    check(len(requests(fake, "PATCH")) == 1, "PATCHes %r" % requests(fake, "PATCH"))


@clean_exit
def test_reconcile_rolls_when_pod_hash_differs_in_file(env):
    a, fake, h = reconcile_case(env, "ab" * 32, True)
    reconcile_rolled_once(a, fake, h)
    changes = template_changes(history(fake, "deployments", "web"))
    check(len(changes) == 1 and changes[0][HASH_KEY] == h, "template changes %r" % changes)


@clean_exit
def test_reconcile_no_rollout_when_pod_hash_equal(env):
    a, fake, _ = reconcile_case(env, "current", True)
    no_rollout_after_reconcile(a, fake)


@clean_exit
def test_reconcile_no_rollout_when_pod_hash_absent(env):
    a, fake, _ = reconcile_case(env, None, True)
    no_rollout_after_reconcile(a, fake)


@clean_exit
def test_reconcile_from_pod_when_no_annotations_file(env):
    a, fake, h = reconcile_case(env, "cd" * 32, False)
    reconcile_rolled_once(a, fake, h)
    check(stored(fake, "deployments", "web")["spec"]["template"]["metadata"]["annotations"]
          [HASH_KEY] == h, "stored template hash")


def no_rollout_after_reconcile(a, fake):
    check(a.of("reconcile")[0]["rollout"] is False, "reconcile wanted a rollout")
    a.quiet(QUIET)
    check(not a.of("rollout") and not a.of("action"), "acted at start: %r" %
          (a.of("rollout") + a.of("action")))
    check(not requests(fake, "PATCH"), "PATCHes %r" % requests(fake, "PATCH"))
    gets = requests(fake, "GET", "/deployments/web")
    check(len(gets) == 1, "owner GETs beyond the resolution: %d" % len(gets))


# ---- 9. RBAC ----

@clean_exit
def test_forbidden_patch_names_the_rbac_rule(env):
    fake = fake_for(env)
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, fake, vol)
    faults(fake, {"method": "PATCH", "status": 403})
    h = update(env, vol, {"app.conf": "v1\n"})
    ev = wait_rollout(a, result="failed")
    err = ev.get("error", "")
    for w in ("patch", "deployments", "apps"):
        check(w in err, "403 error %r does not name %r" % (err, w))
    act = wait_action(a, action="rollout", result="failure")
    check("deployments" in act.get("error", ""), "action error %r" % act)
    check(not template_changes(history(fake, "deployments", "web")), "changed despite 403")
    # once RBAC is fixed, a retry lands the patch
    fake.ctl("POST", "/faults/clear")
    wait_rollout(a, result="patched", hash=h, timeout=15)


# ---- 10. paused / OnDelete ----

def warned_but_patched(env, fixture, word):
    resource, name, kind, _ = OWNERS[fixture]
    fake = fake_for(env, fixture)
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, fake, vol)
    h = update(env, vol, {"app.conf": "v1\n"})
    wait_rollout(a, result="patched", hash=h)
    warns = [e for e in a.events if e.get("level") == "warn" and word in e.get("msg", "")]
    check(warns, "no warning mentioning %r" % word)
    ev = wait_kube_event(fake, "RolloutSkipped", kind, name)[0]
    check(ev["type"] == "Warning" and word in ev["message"], "RolloutSkipped event %r" % ev)
    changes = template_changes(history(fake, resource, name))
    check(len(changes) == 1 and changes[0][HASH_KEY] == h, "template changes %r" % changes)


@clean_exit
def test_paused_deployment_warns_and_patches(env):
    warned_but_patched(env, "paused-deployment", "paused")


@clean_exit
def test_ondelete_statefulset_warns_and_patches(env):
    warned_but_patched(env, "ondelete-statefulset", "OnDelete")


# ---- 11. oscillation guard ----

@clean_exit
def test_oscillation_guard_stops_patching(env):
    fake = fake_for(env)
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, fake, vol)
    path = "/apis/apps/v1/namespaces/default/deployments/web"
    other = {HASH_KEY: "ee" * 32, FILES_KEY: json.dumps({vol + "/app.conf": "0123456789abcdef"})}
    patched = 0
    for i in range(1, 4):  # three patches, each overwritten by "another replica"
        h = update(env, vol, {"app.conf": "v%d\n" % i})
        wait_rollout(a, result="patched", hash=h)
        patched += 1
        st, _, body = fake.api("PATCH", path, {"spec": {"template": {"metadata": {
            "annotations": other}}}}, MERGE)
        check(st == 200, "flipping the annotation: %s %s" % (st, body))
    check(len(requests(fake, "PATCH", "/deployments/web")) == patched + 3, "PATCH count")
    h = update(env, vol, {"app.conf": "v4\n"})
    ev = wait_rollout(a, result="failed", hash=h)
    check(ev.get("blocked") is True, "not blocked: %r" % ev)
    check("app.conf" in ev.get("error", ""), "error does not name the path: %r" % ev)
    skipped = wait_kube_event(fake, "RolloutSkipped", "Deployment", "web")
    check(any(vol + "/app.conf" in e["message"] and e["type"] == "Warning" for e in skipped),
          "RolloutSkipped events %r" % skipped)
    gets = len(requests(fake, "GET"))
    a.quiet(2.0)
    check(len(requests(fake, "GET")) == gets and not a.of("retry"), "kept retrying after block")
    # the agent stays blocked: another change is not patched either
    update(env, vol, {"app.conf": "v5\n"})
    a.wait_for(lambda evs: len([e for e in evs if e.get("event") == "rollout" and
                                e.get("blocked")]) >= 2, 10, "a second blocked rollout")
    agent_patches = [r for r in requests(fake, "PATCH") if r["query"].get("fieldManager") ==
                     "reload-agent"]
    check(len(agent_patches) == patched, "agent PATCHes %d, want %d" %
          (len(agent_patches), patched))
    check(stored(fake, "deployments", "web")["spec"]["template"]["metadata"]["annotations"]
          [HASH_KEY] == "ee" * 32, "the agent overwrote the other replica's hash")


@clean_exit
def test_oscillation_guard_counts_a_flip_once_across_min_interval(env):
    """With --min-interval the agent waits and GETs the owner again; the
    replaced hash it saw before the wait is one flip, not two: the guard
    still allows three patches (as without --min-interval), then blocks."""
    fake = fake_for(env)
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, fake, vol, "--min-interval", "3s")
    path = "/apis/apps/v1/namespaces/default/deployments/web"
    other = {HASH_KEY: "ee" * 32, FILES_KEY: json.dumps({vol + "/app.conf": "0123456789abcdef"})}
    for i in range(1, 4):  # three patches, each overwritten by "another replica"
        h = update(env, vol, {"app.conf": "v%d\n" % i})
        ev = a.wait_for(lambda evs: [e for e in evs if e.get("event") == "rollout" and
                                     e.get("hash") == h], 20, "a rollout of v%d" % i)[-1]
        check(ev["result"] == "patched", "rollout %d: %r" % (i, ev))
        # the other replica patches 1.5 s later and records its time, as the
        # agent's patch does: the agent's next apply (which its engine starts
        # 3 s after its own) must wait for --min-interval and GET again
        time.sleep(1.5)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        st, _, body = fake.api("PATCH", path, {"metadata": {"annotations": {LAST_KEY: now}},
                                               "spec": {"template": {"metadata": {
                                                   "annotations": other}}}}, MERGE)
        check(st == 200, "flipping the annotation: %s %s" % (st, body))
    waits = [e for e in a.events if "--min-interval" in e.get("msg", "")]
    check(waits, "no --min-interval wait happened: the test proves nothing")
    h = update(env, vol, {"app.conf": "v4\n"})
    ev = wait_rollout(a, result="failed", hash=h, timeout=20)
    check(ev.get("blocked") is True, "not blocked: %r" % ev)


# ---- 12. Events for in-place actions ----

@clean_exit
def test_inplace_action_events(env):
    fake = fake_for(env)
    vol = volume(env, {"app.conf": "v0\n"})
    pod = fake.info["pods"][0]
    flag = env.path("fail")
    a = start(env, fake, vol, "--action", "exec", "--exec-command",
              'sh -c "test ! -e %s"' % flag, wait_reconcile=False)
    update(env, vol, {"app.conf": "v1\n"})
    wait_action(a, action="exec", result="success")
    ev = wait_kube_event(fake, "Reloaded", "Pod", pod)[0]
    check(ev["type"] == "Normal" and ev["involvedObject"]["namespace"] == "default",
          "Reloaded event %r" % ev)
    open(flag, "w").close()
    update(env, vol, {"app.conf": "v2\n"})
    a.wait_for(lambda evs: len([e for e in evs if e.get("event") == "action" and
                                e.get("result") == "failure"]) >= 3, 10, "3 exec failures")
    failed = wait_kube_event(fake, "ReloadFailed", "Pod", pod)
    check(len(failed) == 1 and failed[0]["type"] == "Warning" and "exec" in failed[0]["message"],
          "ReloadFailed events (same reason is rate-limited to one per 30 s): %r" % failed)
    os.unlink(flag)
    a.wait_for(lambda evs: len([e for e in evs if e.get("event") == "action" and
                                e.get("result") == "success"]) >= 2, 10, "success after retry")
    check(not requests(fake, "PATCH"), "exec patched something")
    a.stop()

    fake.ctl("POST", "/requests/clear")
    n = len(kube_events(fake))
    b = start(env, fake, vol, "--action", "exec", "--exec-command", "true", "--events=false",
              wait_reconcile=False)
    update(env, vol, {"app.conf": "v3\n"})
    wait_action(b, action="exec", result="success")
    b.quiet(QUIET)
    check(len(kube_events(fake)) == n, "--events=false posted an Event")
    check(not [r for r in requests(fake) if r["path"].endswith("/events")],
          "--events=false sent an Event request")


def metric_value(body, name):
    """The value of one sample line `name value` in Prometheus text, or None."""
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


@clean_exit
def test_api_and_suppressed_event_metrics(env):
    """Push metrics: every API answer is counted by status code, and an
    Event the rate limit drops shows in reload_agent_events_suppressed_total."""
    fake = fake_for(env)
    vol = volume(env, {"app.conf": "v0\n"})
    pod = fake.info["pods"][0]
    a = start(env, fake, vol, "--action", "exec", "--exec-command", "true", "--listen",
              "127.0.0.1:0", wait_reconcile=False)
    base = "http://127.0.0.1:%d" % a.of("ready")[0]["port"]
    st, m0 = http_get(base + "/metrics")
    check(st == 200 and b"# TYPE reload_agent_events_suppressed_total counter\n" in m0 and
          b"# TYPE reload_agent_api_requests_total counter\n" in m0, "API families missing")
    check(metric_value(m0, "reload_agent_events_suppressed_total") == 0, "suppressed at start")
    update(env, vol, {"app.conf": "v1\n"})
    wait_action(a, action="exec", result="success")
    wait_kube_event(fake, "Reloaded", "Pod", pod)
    # a second change within 30 s: the same reason on the same pod is dropped
    h2 = update(env, vol, {"app.conf": "v2\n"})
    wait_action(a, action="exec", result="success", hash=h2)
    a.quiet(QUIET)
    check(len(kube_events(fake, "Reloaded", "Pod", pod)) == 1, "the second Event was sent")
    _, m1 = http_get(base + "/metrics")
    check(metric_value(m1, "reload_agent_events_suppressed_total") == 1,
          "events_suppressed_total %r" % metric_value(m1, "reload_agent_events_suppressed_total"))
    posts = [r for r in requests(fake, "POST") if r["path"].endswith("/events")]
    gets = requests(fake, "GET")
    check(metric_value(m1, 'reload_agent_api_requests_total{code="201"}') == len(posts) == 1,
          "201 count %r, %d POSTs" % (metric_value(m1, 'reload_agent_api_requests_total{code="201"}'),
                                     len(posts)))
    check(metric_value(m1, 'reload_agent_api_requests_total{code="200"}') == len(gets),
          "200 count %r, %d GETs" % (metric_value(m1, 'reload_agent_api_requests_total{code="200"}'),
                                    len(gets)))


# ---- 13. restart action ----

@clean_exit
def test_restart_action_terminates_the_app(env):
    pid_file = env.path("app.pid")
    out = env.path("hup.out")
    p = env.spawn([env.tool("hupcount"), "--pid-file", pid_file, "--out", out],
                  stdin=subprocess.DEVNULL)
    wait_until(lambda: os.path.exists(pid_file) and os.path.getsize(pid_file), 10, "pid file")
    vol = volume(env, {"app.conf": "v0\n"})
    a = env.agent(["--watch", vol, "--debounce", "50ms", "--resync", "0", "--action", "restart",
                   "--pid-file", pid_file, "--restart-timeout", "5s", "--restart-delay", "0",
                   "--annotations", ""])
    a.wait_event("ready", timeout=15)
    check(p.poll() is None, "the app exited before any change")
    update(env, vol, {"app.conf": "v1\n"})
    wait_action(a, action="restart", result="success")
    check(p.poll() == 0, "hupcount did not exit 0 on TERM: %r" % p.poll())


@clean_exit
def test_restart_action_reports_process_that_ignores_term(env):
    pid_file = env.path("app.pid")
    p = env.spawn(["sh", "-c", 'trap "" TERM; echo $$ > %s; exec sleep 30' % pid_file],
                  stdin=subprocess.DEVNULL)
    try:
        wait_until(lambda: os.path.exists(pid_file) and os.path.getsize(pid_file), 10, "pid file")
        vol = volume(env, {"app.conf": "v0\n"})
        a = env.agent(["--watch", vol, "--debounce", "50ms", "--resync", "0", "--action",
                       "restart", "--pid-file", pid_file, "--restart-timeout", "1s", "--restart-delay", "0",
                       "--retry-initial", "5s", "--retry-max", "5s", "--annotations", ""])
        a.wait_event("ready", timeout=15)
        update(env, vol, {"app.conf": "v1\n"})
        ev = wait_action(a, action="restart", result="failure")
        check("did not exit" in ev.get("error", "") and str(p.pid) in ev["error"],
              "restart failure %r" % ev)
        check(p.poll() is None, "the TERM-ignoring process exited")
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait(5)


# ---- 14. fatal configuration ----

@clean_exit
def test_rollout_without_api_or_pod_is_fatal(env):
    vol = volume(env, {"app.conf": "v0\n"})
    clean = {k: v for k, v in os.environ.items()
             if k not in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "POD_NAME",
                          "POD_NAMESPACE")}
    base = [env.binary, "run", "--watch", vol, "--action", "rollout", "--annotations", ""]
    r = env.run(base + ["--pod-name", "web-0", "--namespace", "default"], timeout=20, env=clean)
    err = r.stderr.decode(errors="replace")
    check(r.returncode == 2, "no API: exit %d (%s)" % (r.returncode, err))
    check("KUBERNETES_SERVICE_HOST" in err and "--kube-api" in err, "no API: message %r" % err)
    tok = env.path("token")
    with open(tok, "w") as f:
        f.write("t0ken\n")
    ca = env.path("ca.crt")
    with open(ca, "w") as f:
        f.write("not used\n")
    r = env.run(base + ["--kube-api", "https://127.0.0.1:1", "--kube-token-file", tok,
                        "--kube-ca-file", ca, "--namespace", "default"], timeout=20, env=clean)
    err = r.stderr.decode(errors="replace")
    check(r.returncode == 2, "no pod name: exit %d (%s)" % (r.returncode, err))
    check("pod" in err.lower() and ("--pod-name" in err or "POD_NAME" in err),
          "no pod name: message %r" % err)
    check("t0ken" not in err, "the token was printed")


# ---- 13. The injector's warnings reach the pod (issue 15) ----

@clean_exit
def test_injection_warnings_logged_and_posted(env):
    """The warnings inject/the webhook recorded in inject-status are logged
    at start and posted as one Warning Event on the agent's own pod (a
    controller-created pod never shows admission warnings to its user)."""
    fake = fake_for(env)
    vol = volume(env, {"app.conf": "v0\n"})
    pod = fake.info["pods"][0]
    status = json.dumps({"version": "0.1.0", "container": "reload-agent", "volumes": [], "mirrors": ["cfg"],
                         "warnings": ["container app mounts volume cfg with subPath: it never updates",
                                      "second warning"]})
    ann = env.path("annotations")
    with open(ann, "w") as f:
        f.write("reload-agent.io/inject-status=%s\n" % json.dumps(status, ensure_ascii=True))
    a = start(env, fake, vol, "--action", "exec", "--exec-command", "true", annotations=ann,
              wait_reconcile=False)
    warned = [e for e in a.events if e.get("event") == "inject-warning"]
    check([e.get("warning") for e in warned] == ["container app mounts volume cfg with subPath: it never updates",
                                                 "second warning"], "inject-warning lines: %r" % warned)
    check(all(e.get("level") == "warn" for e in warned), "not at warn level: %r" % warned)
    ev = wait_kube_event(fake, "InjectionWarning", "Pod", pod)
    check(len(ev) == 1 and ev[0]["type"] == "Warning" and "subPath" in ev[0]["message"] and
          "second warning" in ev[0]["message"], "InjectionWarning events: %r" % ev)


@clean_exit
def test_refused_event_is_one_warning(env):
    """Events are fire and forget, but a Role without "events create" must
    not go unnoticed: the first 403 is a warning naming the rule, later ones
    are debug lines."""
    fake = fake_for(env)
    vol = volume(env, {"app.conf": "v0\n"})
    faults(fake, {"method": "POST", "path_regex": "/events$", "status": 403})
    status = json.dumps({"version": "0.1.0", "container": "reload-agent", "warnings": ["a warning"]})
    ann = env.path("annotations")
    with open(ann, "w") as f:
        f.write("reload-agent.io/inject-status=%s\n" % json.dumps(status, ensure_ascii=True))
    a = start(env, fake, vol, "--action", "exec", "--exec-command", "true", annotations=ann,
              wait_reconcile=False)
    a.wait_for(lambda evs: [e for e in evs if "cannot create Kubernetes Events" in e.get("msg", "")], 10,
               "the refused-Event warning (InjectionWarning at start)")
    update(env, vol, {"app.conf": "v1\n"})
    wait_action(a, action="exec", result="success")
    a.wait_for(lambda evs: [e for e in evs if "could not create a Kubernetes Event" in e.get("msg", "")],
               10, "the second refusal (Reloaded), at debug level")
    refused = [e for e in a.events if "cannot create Kubernetes Events" in e.get("msg", "")]
    check(len(refused) == 1 and refused[0]["level"] == "warn", "refusal lines: %r" % refused)
    check('verb "create" on resource "events"' in refused[0]["msg"], "no RBAC rule named: %r" % refused[0])
    later = [e for e in a.events if "could not create a Kubernetes Event" in e.get("msg", "")]
    check(all(e["level"] == "debug" for e in later), "later refusals: %r" % later)
