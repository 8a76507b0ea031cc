"""Self-tests of the fake Kubernetes API server (tests/lib/fakeapi.py).

Each test starts the real fake as a process and talks to it over real TLS on
loopback, verifying the certificate against the CA it generated. Expected
values come from docs/kubernetes-api.md ("Requests", "Errors", "Events") and the
fixture descriptions in tests/lib/fakeapi.md, never from the fake's own output.
The binary and tools given to the runner are not used.
"""
import http.client
import os
import socket
import ssl
import threading
import time

from tests.lib import fakeapi
from tests.lib.proc import TestFailure, check, wait_until


NS = "default"
DEPLOY = "/apis/apps/v1/namespaces/default/deployments/web"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSONPATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"


def start(env, fixture="deployment", pods=1, name="state", **kw):
    return fakeapi.launch(env.path(name), fixture=fixture, pods=pods, spawn=env.spawn, **kw)


def ok(fake, method, path, body=None, ctype=None, want=200):
    st, _, obj = fake.api(method, path, body, ctype)
    check(st == want, "%s %s: want %d, got %d %s" % (method, path, want, st, obj))
    return obj


def tmpl_patch(ann):
    return {"spec": {"template": {"metadata": {"annotations": ann}}}}


def history(fake, resource="deployments", name="web"):
    st, h = fake.ctl("GET", "/history?resource=%s&name=%s" % (resource, name))
    check(st == 200, "history: %s %s" % (st, h))
    return h


def stored(fake, resource="deployments", name="web"):
    st, o = fake.ctl("GET", "/object?resource=%s&name=%s" % (resource, name))
    check(st == 200, "object: %s %s" % (st, o))
    return o


def faults(fake, *specs):
    st, r = fake.ctl("POST", "/faults", list(specs))
    check(st == 200, "faults: %s %s" % (st, r))


# ---- auth ----

def test_auth_rejects_wrong_token_and_follows_rotation(env):
    fake = start(env)
    pod = "/api/v1/namespaces/default/pods/" + fake.info["pods"][0]
    st, _, body = fake.api("GET", pod, token="wrong")
    check(st == 401, "wrong token: %s" % st)
    check(body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "Unauthorized", "reason": "Unauthorized", "code": 401}, str(body))
    old = fake.token()
    check(len(old) >= 16, "token too short")
    ok(fake, "GET", pod)
    # rotation through the control API
    check(fake.ctl("POST", "/token", {"token": "rotated-1"})[0] == 200, "POST /token")
    check(fake.api("GET", pod, token=old)[0] == 401, "old token still accepted")
    check(fake.api("GET", pod, token="rotated-1")[0] == 200, "new token refused")
    # rotation by rewriting the file (atomically, like kubelet)
    tmp = fake.info["token_file"] + ".new"
    with open(tmp, "w") as f:
        f.write("rotated-2\n")
    os.replace(tmp, fake.info["token_file"])
    check(fake.api("GET", pod, token="rotated-1")[0] == 401, "rotated-1 still accepted")
    check(fake.api("GET", pod, token="rotated-2")[0] == 200, "trimmed file token refused")
    st, reqs = fake.ctl("GET", "/requests")
    check([r["authorized"] for r in reqs] == [False, True, False, True, False, True],
          "recorded authorized flags: %s" % [r["authorized"] for r in reqs])
    check([r["status"] for r in reqs] == [401, 200, 401, 200, 401, 200], "recorded statuses")
    check("rotated" not in str(reqs) and old not in str(reqs), "token recorded")
    check(fake.stop() == 0, "SIGTERM exit code")


# ---- fixtures ----

CHAINS = {  # fixture -> (kinds from the pod up, workload name), from the task description
    "deployment": (["Pod", "ReplicaSet", "Deployment"], "web"),
    "paused-deployment": (["Pod", "ReplicaSet", "Deployment"], "web"),
    "statefulset": (["Pod", "StatefulSet"], "db"),
    "ondelete-statefulset": (["Pod", "StatefulSet"], "db"),
    "daemonset": (["Pod", "DaemonSet"], "agent"),
    "ondelete-daemonset": (["Pod", "DaemonSet"], "agent"),
    "rollout": (["Pod", "ReplicaSet", "Rollout"], "web"),
    "workloadref-rollout": (["Pod", "ReplicaSet", "Rollout"], "web"),
    "workloadref-other": (["Pod", "ReplicaSet", "Rollout"], "web"),
    "cronjob": (["Pod", "Job", "CronJob"], "nightly"),
    "job": (["Pod", "Job"], None),
    "orphan-rs": (["Pod", "ReplicaSet"], None),
    "bare-pod": (["Pod"], "app"),
}
PATHS = {"ReplicaSet": "/apis/apps/v1/namespaces/%s/replicasets/%s",
         "Deployment": "/apis/apps/v1/namespaces/%s/deployments/%s",
         "StatefulSet": "/apis/apps/v1/namespaces/%s/statefulsets/%s",
         "DaemonSet": "/apis/apps/v1/namespaces/%s/daemonsets/%s",
         "Job": "/apis/batch/v1/namespaces/%s/jobs/%s",
         "CronJob": "/apis/batch/v1/namespaces/%s/cronjobs/%s",
         "Rollout": "/apis/argoproj.io/v1alpha1/namespaces/%s/rollouts/%s"}


def follow(fake, pod):
    """Walks controller ownerReferences from a pod; returns the objects."""
    obj = ok(fake, "GET", "/api/v1/namespaces/%s/pods/%s" % (fake.info["namespace"], pod))
    chain = [obj]
    for _ in range(5):
        refs = [r for r in obj["metadata"].get("ownerReferences", []) if r.get("controller")]
        if not refs:
            return chain
        check(len(refs) == 1, "more than one controller ref")
        ref = refs[0]
        obj = ok(fake, "GET", PATHS[ref["kind"]] % (fake.info["namespace"], ref["name"]))
        check(obj["metadata"]["uid"] == ref["uid"], "ownerRef uid mismatch for %s" % ref["name"])
        check(obj["kind"] == ref["kind"], "ownerRef kind mismatch")
        chain.append(obj)
    raise TestFailure("owner chain too long")


def test_fixture_owner_chains(env):
    fakes, errors = {}, []

    def one(fx):
        try:
            fakes[fx] = start(env, fx, pods=2, name=fx, namespace="team-a")
        except Exception as e:  # reported below
            errors.append("%s: %s" % (fx, e))
    threads = [threading.Thread(target=one, args=(fx,)) for fx in CHAINS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    check(not errors and len(fakes) == len(CHAINS), "launch: %s" % errors)
    for fx, (kinds, top) in CHAINS.items():
        fake = fakes[fx]
        check(fake.info["namespace"] == "team-a", "namespace")
        want_pods = 1 if fx == "bare-pod" else 2
        check(len(fake.info["pods"]) == want_pods, "%s: pods %s" % (fx, fake.info["pods"]))
        for pod in fake.info["pods"]:
            chain = follow(fake, pod)
            check([o["kind"] for o in chain] == kinds,
                  "%s: chain %s, want %s" % (fx, [o["kind"] for o in chain], kinds))
            for o in chain:
                m = o["metadata"]
                check(m["namespace"] == "team-a" and m["generation"] == 1 and
                      m["resourceVersion"].isdigit() and len(m["uid"]) == 36,
                      "%s: metadata of %s: %s" % (fx, m["name"], m))
            if top:
                check(chain[-1]["metadata"]["name"] == top, "%s: top is %s" %
                      (fx, chain[-1]["metadata"]["name"]))
            check(chain[0]["metadata"]["annotations"] == {}, "pod annotations")
        top_obj = chain[-1]
        if fx == "paused-deployment":
            check(top_obj["spec"].get("paused") is True, "not paused")
        if fx == "deployment":
            check(not top_obj["spec"].get("paused"), "deployment paused")
            check(chain[1]["metadata"]["name"] == "web-5d8f7c9b4", "RS name")
            check(chain[1]["metadata"]["labels"]["pod-template-hash"] == "5d8f7c9b4", "hash label")
        if fx.startswith("ondelete"):
            check(top_obj["spec"]["updateStrategy"]["type"] == "OnDelete", fx)
        if fx.startswith("workloadref"):
            ref = top_obj["spec"]["workloadRef"]
            check("template" not in top_obj["spec"], "%s: the Rollout has a template" % fx)
            if fx == "workloadref-rollout":
                check((ref["apiVersion"], ref["kind"], ref["name"]) ==
                      ("apps/v1", "Deployment", "web-template"), "workloadRef %r" % ref)
                d = ok(fake, "GET", PATHS["Deployment"] % ("team-a", "web-template"))
                check(d["spec"]["replicas"] == 0, "the referenced Deployment is scaled up")
                check(chain[1]["spec"]["template"]["spec"] == d["spec"]["template"]["spec"],
                      "the ReplicaSet's template is not the Deployment's")
            else:
                check((ref["apiVersion"], ref["kind"]) == ("v1", "PodTemplate"),
                      "workloadRef %r" % ref)
        if fx in ("statefulset", "daemonset"):
            check(top_obj["spec"]["updateStrategy"]["type"] == "RollingUpdate", fx)
        if fx == "statefulset":
            check(sorted(fake.info["pods"]) == ["db-0", "db-1"], "sts pod names")
        if fx == "cronjob":
            check(chain[1]["metadata"]["name"] == "nightly-123", "job name")
        if fx == "orphan-rs":
            check("ownerReferences" not in chain[1]["metadata"], "orphan RS has owners")
        if fx == "bare-pod":
            check(fake.info["pods"] == ["app"] and
                  "ownerReferences" not in chain[0]["metadata"], "bare pod")
    for fake in fakes.values():
        check(fake.stop() == 0, "exit code")


# ---- PATCH ----

def test_merge_and_strategic_patches_bump_versions_and_history(env):
    fake = start(env)
    d0 = ok(fake, "GET", DEPLOY)
    check(history(fake) == [], "history not empty at start")
    d1 = ok(fake, "PATCH", DEPLOY + "?fieldManager=reload-agent", tmpl_patch({"a": "1"}), MERGE)
    check(int(d1["metadata"]["resourceVersion"]) > int(d0["metadata"]["resourceVersion"]), "rv")
    check(d1["metadata"]["generation"] == 2, "generation %s" % d1["metadata"]["generation"])
    check(d1["spec"]["template"]["metadata"]["annotations"] == {"a": "1"}, "annotation")
    check({"manager": "reload-agent", "operation": "Update", "apiVersion": "apps/v1"}
          in d1["metadata"]["managedFields"], "managedFields %s" % d1["metadata"].get("managedFields"))
    check(d1["spec"]["replicas"] == d0["spec"]["replicas"], "merge dropped a field")
    check(stored(fake) == d1, "stored object differs from the PATCH answer")
    d2 = ok(fake, "PATCH", DEPLOY, tmpl_patch({"b": "2"}), STRATEGIC + "; charset=utf-8")
    check(int(d2["metadata"]["resourceVersion"]) > int(d1["metadata"]["resourceVersion"]), "rv2")
    check(d2["metadata"]["generation"] == 3, "generation after strategic")
    check(history(fake) == [{"a": "1"}, {"a": "1", "b": "2"}], "history %s" % history(fake))
    # null deletes (RFC 7386)
    d3 = ok(fake, "PATCH", DEPLOY, tmpl_patch({"a": None}), MERGE)
    check(d3["spec"]["template"]["metadata"]["annotations"] == {"b": "2"}, "null did not delete")
    # a no-op patch writes nothing
    d4 = ok(fake, "PATCH", DEPLOY, tmpl_patch({"b": "2"}), MERGE)
    check(d4["metadata"]["resourceVersion"] == d3["metadata"]["resourceVersion"], "no-op bumped rv")
    check(len(history(fake)) == 3, "no-op recorded")
    # Deployment: metadata.annotations bump generation; status is ignored by the main resource
    d5 = ok(fake, "PATCH", DEPLOY, {"metadata": {"annotations": {"x": "y"}},
                                    "status": {"observedGeneration": 99}}, MERGE)
    check(d5["metadata"]["generation"] == d4["metadata"]["generation"] + 1, "annotation gen")
    check(d5["status"] == d0["status"], "status was patched")
    _, reqs = fake.ctl("GET", "/requests")
    p = [r for r in reqs if r["method"] == "PATCH"][0]
    check(p["query"] == {"fieldManager": "reload-agent"} and p["content_type"] == MERGE and
          p["body"] == tmpl_patch({"a": "1"}) and p["status"] == 200, "recorded PATCH %s" % p)


def test_generation_rules_statefulset_and_daemonset(env):
    sts = start(env, "statefulset", name="sts")
    ds = start(env, "daemonset", name="ds")
    path = "/apis/apps/v1/namespaces/default/statefulsets/db"
    s1 = ok(sts, "PATCH", path, {"metadata": {"annotations": {"x": "y"}}}, MERGE)
    check(s1["metadata"]["generation"] == 1, "sts generation bumped by metadata")
    s2 = ok(sts, "PATCH", path, tmpl_patch({"k": "v"}), STRATEGIC)
    check(s2["metadata"]["generation"] == 2, "sts generation not bumped by spec")
    check(int(s2["metadata"]["resourceVersion"]) > int(s1["metadata"]["resourceVersion"]), "rv")
    dpath = "/apis/apps/v1/namespaces/default/daemonsets/agent"
    d1 = ok(ds, "PATCH", dpath, tmpl_patch({"k": "v"}), MERGE)
    check(d1["metadata"]["generation"] == 2, "ds generation")
    check(d1["metadata"]["annotations"]["deprecated.daemonset.template.generation"] == "2",
          "ds template generation")
    check(history(ds, "daemonsets", "agent") == [{"k": "v"}], "ds history")


def test_rollout_rejects_strategic_accepts_merge(env):
    fake = start(env, "rollout")
    path = "/apis/argoproj.io/v1alpha1/namespaces/default/rollouts/web"
    st, _, body = fake.api("PATCH", path, tmpl_patch({"a": "1"}), STRATEGIC)
    check(st == 415 and body["reason"] == "UnsupportedMediaType", "%s %s" % (st, body))
    msg = body["message"]
    check(msg.startswith("the body of the request was in an unknown format - accepted media "
                         "types include: "), msg)
    check(STRATEGIC not in msg and MERGE in msg and JSONPATCH in msg, msg)
    check(history(fake, "rollouts") == [], "415 persisted")
    r = ok(fake, "PATCH", path, {"spec": {"restartAt": "2024-05-01T12:00:00Z"}}, MERGE)
    check(r["spec"]["restartAt"] == "2024-05-01T12:00:00Z" and r["metadata"]["generation"] == 2,
          "rollout merge")
    st, _, body = fake.api("PATCH", path.replace("/web", "/none"), {}, MERGE)
    check(st == 404 and body["message"] == 'rollouts.argoproj.io "none" not found', str(body))
    st, _, body = fake.api("PATCH", path, {}, "application/json")
    check(st == 415 and body["code"] == 415, "plain JSON accepted as a patch")


def test_stale_resource_version_conflicts(env):
    fake = start(env)
    d0 = ok(fake, "GET", DEPLOY)
    rv = d0["metadata"]["resourceVersion"]
    body = {"metadata": {"resourceVersion": str(int(rv) - 1)}, **tmpl_patch({"k": "v"})}
    st, _, s = fake.api("PATCH", DEPLOY, body, MERGE)
    check(st == 409, "stale rv: %s" % st)
    check(s == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": 'Operation cannot be fulfilled on deployments.apps "web": the object '
                'has been modified; please apply your changes to the latest version and try '
                'again', "reason": "Conflict",
                "details": {"name": "web", "group": "apps", "kind": "deployments"}, "code": 409},
          "409 body %s" % s)
    check(stored(fake) == d0 and history(fake) == [], "409 persisted")
    body["metadata"]["resourceVersion"] = rv
    d1 = ok(fake, "PATCH", DEPLOY, body, MERGE)
    check(d1["metadata"]["resourceVersion"] != rv, "rv not bumped")
    check(fake.api("PATCH", DEPLOY, body, MERGE)[0] == 409, "old rv accepted twice")


def test_json_patch(env):
    fake = start(env)
    ann = "/spec/template/metadata/annotations"
    ok(fake, "PATCH", DEPLOY, [{"op": "remove", "path": ann}], JSONPATCH)
    key = ann + "/reload.example.com~1restartedAt"
    st, _, s = fake.api("PATCH", DEPLOY, [{"op": "add", "path": key, "value": "t1"}], JSONPATCH)
    check(st == 422 and s["reason"] == "Invalid", "add under missing map: %s %s" % (st, s))
    check("annotations" not in stored(fake)["spec"]["template"]["metadata"], "failed add persisted")
    d = ok(fake, "PATCH", DEPLOY, [{"op": "add", "path": ann,
                                     "value": {"reload.example.com/restartedAt": "t1"}}], JSONPATCH)
    check(d["spec"]["template"]["metadata"]["annotations"] ==
          {"reload.example.com/restartedAt": "t1"}, "add map")
    d = ok(fake, "PATCH", DEPLOY, [{"op": "replace", "path": key, "value": "t2"},
                                    {"op": "add", "path": ann + "/a~0b", "value": "x"}], JSONPATCH)
    check(d["spec"]["template"]["metadata"]["annotations"] ==
          {"reload.example.com/restartedAt": "t2", "a~b": "x"}, "escapes: %s" % d)
    st, _, _ = fake.api("PATCH", DEPLOY, [{"op": "replace", "path": ann + "/nope", "value": 1}],
                        JSONPATCH)
    check(st == 422, "replace of a missing key: %s" % st)
    st, _, _ = fake.api("PATCH", DEPLOY, [{"op": "test", "path": key, "value": "t1"}], JSONPATCH)
    check(st == 422, "failed test op: %s" % st)
    d = ok(fake, "PATCH", DEPLOY, [{"op": "add", "path": "/spec/template/spec/containers/-",
                                     "value": {"name": "side", "image": "x"}}], JSONPATCH)
    check([c["name"] for c in d["spec"]["template"]["spec"]["containers"]] == ["app", "side"],
          "list append")
    check(fake.api("PATCH", DEPLOY, {"op": "add"}, JSONPATCH)[0] == 400, "non-list json patch")
    check(history(fake) == [{}, {"reload.example.com/restartedAt": "t1"},
                            {"reload.example.com/restartedAt": "t2", "a~b": "x"},
                            {"reload.example.com/restartedAt": "t2", "a~b": "x"}],
          "history %s" % history(fake))


def test_dry_run_does_not_persist(env):
    fake = start(env)
    d0 = ok(fake, "GET", DEPLOY)
    d = ok(fake, "PATCH", DEPLOY + "?dryRun=All&fieldManager=t", tmpl_patch({"k": "v"}), MERGE)
    check(d["spec"]["template"]["metadata"]["annotations"] == {"k": "v"}, "dry-run result")
    check(d["metadata"]["generation"] == 2, "dry-run generation")
    check(stored(fake) == d0 and history(fake) == [], "dry run persisted")
    check(fake.api("PATCH", DEPLOY + "?dryRun=Yes", tmpl_patch({}), MERGE)[0] == 400, "dryRun=Yes")


def test_apply_patch_needs_field_manager(env):
    fake = start(env)
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            **tmpl_patch({"k": "v"})}
    st, _, s = fake.api("PATCH", DEPLOY, body, APPLY)
    check(st == 422 and "fieldManager" in s["message"], "apply without manager: %s %s" % (st, s))
    st, _, s = fake.api("PATCH", DEPLOY + "?fieldManager=m", {"metadata": {"name": "web"}}, APPLY)
    check(st == 400 and "apiVersion" in s["message"], "apply without apiVersion: %s" % st)
    check(fake.api("PATCH", DEPLOY + "?fieldManager=m", b"a: b\n", APPLY)[0] == 400, "YAML body")
    d = ok(fake, "PATCH", DEPLOY + "?fieldManager=m", body, APPLY)
    check(d["spec"]["template"]["metadata"]["annotations"] == {"k": "v"}, "apply result")
    check({"manager": "m", "operation": "Apply", "apiVersion": "apps/v1"}
          in d["metadata"]["managedFields"], "apply manager")
    check(fake.api("PATCH", DEPLOY + "?force=true", tmpl_patch({"z": "1"}), MERGE)[0] == 422,
          "force on merge")


def test_job_template_is_immutable(env):
    fake = start(env, "cronjob")
    job = "/apis/batch/v1/namespaces/default/jobs/nightly-123"
    st, _, s = fake.api("PATCH", job, tmpl_patch({"k": "v"}), MERGE)
    check(st == 422 and s["reason"] == "Invalid", "job template patch: %s" % st)
    check(s["message"].startswith('Job.batch "nightly-123" is invalid: spec.template: ') and
          s["message"].endswith("field is immutable"), s["message"])
    check(s["details"]["causes"][0]["field"] == "spec.template", "cause field")
    ok(fake, "PATCH", job, {"spec": {"parallelism": 3}}, MERGE)
    cron = "/apis/batch/v1/namespaces/default/cronjobs/nightly"
    c = ok(fake, "PATCH", cron, {"spec": {"jobTemplate": tmpl_patch({"k": "v"})}}, MERGE)
    check(c["metadata"]["generation"] == 2, "cronjob generation")
    check(history(fake, "cronjobs", "nightly") == [{"k": "v"}], "cronjob history")


# ---- faults ----

def test_status_faults(env):
    fake = start(env, namespace="prod")
    dep = "/apis/apps/v1/namespaces/prod/deployments/web"
    faults(fake, {"method": "PATCH", "path_regex": "/deployments/web$", "status": 403, "count": 1})
    check(fake.api("GET", dep)[0] == 200, "GET matched a PATCH fault")
    st, _, s = fake.api("PATCH", dep, tmpl_patch({"k": "v"}), MERGE)
    check(st == 403 and s["reason"] == "Forbidden", "403: %s" % st)
    check(s["message"] == 'deployments.apps "web" is forbidden: User "system:serviceaccount:prod:'
          'default" cannot patch resource "deployments" in API group "apps" in the namespace '
          '"prod"', s["message"])
    check(fake.api("PATCH", dep, tmpl_patch({"k": "v"}), MERGE)[0] == 200, "count 1 not used up")
    pod = "/api/v1/namespaces/prod/pods/" + fake.info["pods"][0]
    faults(fake, {"path_regex": "/pods/", "status": 403, "count": 1})
    s = fake.api("GET", pod)[2]
    check(s["message"] == 'pods "%s" is forbidden: User "system:serviceaccount:prod:default" '
          'cannot get resource "pods" in API group "" in the namespace "prod"'
          % fake.info["pods"][0], s["message"])
    expect = {404: ("NotFound", 'deployments.apps "web" not found'),
              409: ("Conflict", 'Operation cannot be fulfilled on deployments.apps "web": the '
                    'object has been modified; please apply your changes to the latest version '
                    'and try again'),
              422: ("Invalid", None), 500: ("InternalError", None),
              503: ("ServiceUnavailable", None)}
    for code, (reason, msg) in expect.items():
        faults(fake, {"status": code, "count": 2, "retry_after": 3})
        for _ in range(2):
            st, h, s = fake.api("GET", dep)
            check(st == code and s["code"] == code and s["reason"] == reason and
                  s["kind"] == "Status" and s["status"] == "Failure", "%d: %s" % (code, s))
            check(msg is None or s["message"] == msg, "%d message %s" % (code, s["message"]))
            check(h.get("retry-after") == "3", "%d Retry-After %s" % (code, h))
        check(fake.api("GET", dep)[0] == 200, "%d fault outlived its count" % code)
    faults(fake, {"status": 422, "count": 1})
    s = fake.api("GET", dep)[2]
    check(s["message"].startswith('Deployment.apps "web" is invalid: ') and
          s["details"]["causes"], "422 form %s" % s)
    faults(fake, {"status": 500})
    check(fake.api("GET", dep)[0] == 500 and fake.api("GET", dep)[0] == 500, "unlimited fault")
    fake.ctl("POST", "/faults/clear")
    check(fake.api("GET", dep)[0] == 200, "faults not cleared")
    st, err = fake.ctl("POST", "/faults", [{"status": 429, "bogus": 1}])
    check(st == 400 and "bogus" in err["error"], "bad fault spec accepted")
    st, reqs = fake.ctl("GET", "/requests")
    check(any(r["fault"] and r["status"] == 403 for r in reqs), "fault not recorded")


def test_429_faults_plain_and_status(env):
    fake = start(env)
    faults(fake, {"method": "PATCH", "status": 429, "plain": True, "retry_after": 2, "count": 1},
           {"method": "PATCH", "status": 429, "retry_after": 4, "count": 1})
    c = http.client.HTTPSConnection("127.0.0.1", fake.port, timeout=10,
                                    context=fake.tls_context())
    h = {"Authorization": "Bearer " + fake.token(), "Content-Type": MERGE}
    c.request("PATCH", DEPLOY, b'{"spec":{}}', h)
    r = c.getresponse()
    body = r.read()
    check(r.status == 429 and body == b"Too many requests, please try again later.\n",
          "plain 429: %d %r" % (r.status, body))
    check(r.getheader("Retry-After") == "2" and r.getheader("Content-Type").startswith(
        "text/plain"), "plain 429 headers %s" % r.getheaders())
    c.close()
    st, h, s = fake.api("PATCH", DEPLOY, {"spec": {}}, MERGE)
    check(st == 429 and s["reason"] == "TooManyRequests" and
          s["details"]["retryAfterSeconds"] == 4 and h.get("retry-after") == "4", "status 429 %s" % s)
    check(fake.api("PATCH", DEPLOY, {"spec": {}}, MERGE)[0] == 200, "429 faults not used up")


def test_delay_and_drop_faults(env):
    fake = start(env)
    faults(fake, {"path_regex": "deployments", "delay_ms": 400, "count": 1})
    t0 = time.monotonic()
    st = fake.api("GET", DEPLOY)[0]
    check(st == 200 and time.monotonic() - t0 >= 0.4, "delay fault not applied")
    faults(fake, {"drop": True, "count": 1})
    try:
        fake.api("GET", DEPLOY)
        raise TestFailure("dropped request got an answer")
    except (http.client.RemoteDisconnected, ConnectionError, ssl.SSLError):
        pass
    check(fake.api("GET", DEPLOY)[0] == 200, "drop fault outlived its count")
    st, reqs = fake.ctl("GET", "/requests")
    check([r["status"] for r in reqs] == [200, "dropped", 200], "recorded %s" %
          [r["status"] for r in reqs])


def test_listener_down_refuses_then_comes_back(env):
    fake = start(env, ipv6=True)
    keep = http.client.HTTPSConnection("127.0.0.1", fake.port, timeout=10,
                                       context=fake.tls_context())
    keep.request("GET", DEPLOY, headers={"Authorization": "Bearer " + fake.token()})
    check(keep.getresponse().read() and True, "keep-alive request")
    st, r = fake.ctl("POST", "/listener", {"up": False})
    check(st == 200 and r["up"] is False, "listener down")
    for host, fam in (("127.0.0.1", socket.AF_INET), ("::1", socket.AF_INET6)):
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(5)
        try:
            s.connect((host, fake.port))
            raise TestFailure("connect to %s succeeded while down" % host)
        except ConnectionRefusedError:
            pass
        finally:
            s.close()
    try:
        keep.request("GET", DEPLOY, headers={"Authorization": "Bearer " + fake.token()})
        keep.getresponse().read()
        raise TestFailure("open connection still served while down")
    except (http.client.HTTPException, OSError):
        pass
    keep.close()
    st, r = fake.ctl("POST", "/listener", {"up": True})
    check(st == 200 and r["port"] == fake.port, "listener up: %s" % r)
    check(fake.api("GET", DEPLOY)[0] == 200, "v4 after up")
    check(fake.api("GET", DEPLOY, host="::1")[0] == 200, "v6 after up")


# ---- events ----

def event(ns="default", name="web.17c9f0a2b3c4d5e6", **over):
    ev = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": ns},
          "involvedObject": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                             "namespace": ns, "uid": "u"},
          "reason": "ConfigReloaded", "message": "m", "type": "Normal",
          "source": {"component": "reload-agent", "host": "n"},
          "firstTimestamp": "2024-05-01T12:00:00Z", "lastTimestamp": "2024-05-01T12:00:00Z",
          "count": 1}
    ev.update(over)
    return ev


def test_event_validation(env):
    fake = start(env)
    core = "/api/v1/namespaces/default/events"
    st, _, s = fake.api("POST", core, event(name=""))
    check(st == 400 and s["message"] == "Name parameter required.", "no name: %s %s" % (st, s))
    bad_ns = event()
    bad_ns["involvedObject"]["namespace"] = "other"
    st, _, s = fake.api("POST", core, bad_ns)
    check(st == 422 and "involvedObject.namespace" in s["message"] and
          "does not match event.namespace" in s["message"], "namespace mismatch: %s" % s)
    check(fake.api("POST", core, event(type="Info"))[0] == 422, "type Info accepted")
    check(fake.api("POST", core, event(eventTime="2024-05-01T12:00:00.000000Z"))[0] == 422,
          "eventTime without reporting fields accepted")
    check(fake.api("POST", "/api/v1/namespaces/other/events", event())[0] == 400,
          "URL namespace mismatch accepted")
    st, _, s = fake.api("POST", core, event())
    check(st == 201 and s["metadata"]["name"] == "web.17c9f0a2b3c4d5e6" and
          s["metadata"]["uid"], "create: %s %s" % (st, s))
    st, _, s = fake.api("POST", core, event())
    check(st == 409 and s["reason"] == "AlreadyExists", "duplicate: %s" % st)
    gen = event()
    gen["metadata"] = {"generateName": "web.", "namespace": "default"}
    st, _, s = fake.api("POST", core, gen)
    check(st == 201 and s["metadata"]["name"].startswith("web.") and
          len(s["metadata"]["name"]) > 4, "generateName: %s" % s)
    gen_name = s["metadata"]["name"]
    v1 = "/apis/events.k8s.io/v1/namespaces/default/events"
    strict = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
              "metadata": {"name": "web.1", "namespace": "default"},
              "eventTime": "2024-05-01T12:00:00.000000Z", "reportingInstance": "pod-1",
              "action": "Reload", "reason": "ConfigReloaded", "type": "Normal",
              "regarding": {"kind": "Deployment", "name": "web", "namespace": "default"}}
    st, _, s = fake.api("POST", v1, strict)
    check(st == 422 and "reportingController" in s["message"], "strict: %s" % s)
    strict["reportingController"] = "reload agent!"
    st, _, s = fake.api("POST", v1, strict)
    check(st == 422 and "reportingController" in s["message"], "bad qualified name: %s" % s)
    strict["reportingController"] = "example.com/reload-agent"
    check(fake.api("POST", v1, strict)[0] == 201, "valid events.k8s.io/v1 event refused")
    st, evs = fake.ctl("GET", "/events")
    check([e["metadata"]["name"] for e in evs] == ["web.17c9f0a2b3c4d5e6", gen_name, "web.1"],
          "stored events %s" % [e["metadata"]["name"] for e in evs])
    check(evs[0]["reason"] == "ConfigReloaded" and evs[2]["apiVersion"] == "events.k8s.io/v1",
          "stored event content")


# ---- TLS, routes, control ----

def test_ca_bundle_and_hostnames_verify(env):
    fake = start(env, ipv6=True)
    for host in ("127.0.0.1", "localhost", "::1"):
        check(fake.api("GET", DEPLOY, host=host, cafile=fake.info["ca_bundle"])[0] == 200,
              "bundle via %s" % host)
    with open(fake.info["ca_bundle"]) as f:
        check(f.read().count("BEGIN CERTIFICATE") == 2, "bundle holds two certificates")
    try:
        fake.api("GET", DEPLOY, cafile=os.path.join(fake.dir, "other-ca.crt"))
        raise TestFailure("the unrelated CA verified the server")
    except ssl.SSLCertVerificationError:
        pass


def test_unknown_routes_and_objects(env):
    fake = start(env)
    st, _, s = fake.api("GET", "/apis/apps/v1/namespaces/default/deployments/nope")
    check(st == 404 and s["message"] == 'deployments.apps "nope" not found' and
          s["details"] == {"name": "nope", "group": "apps", "kind": "deployments"}, str(s))
    check(fake.api("GET", "/apis/apps/v1/namespaces/other/deployments/web")[0] == 404, "ns")
    st, _, s = fake.api("GET", "/apis/apps/v1/namespaces/default/widgets/web")
    check(st == 404 and s["kind"] == "Status", "unknown resource %s" % st)
    check(fake.api("GET", "/healthz")[0] == 404, "unknown path")
    check(fake.api("PATCH", "/apis/apps/v1/namespaces/default/replicasets/web-5d8f7c9b4",
                   {}, MERGE)[0] == 405, "PATCH on replicasets")
    new = {"metadata": {"name": "api"}, "spec": {"template": {"metadata": {"annotations":
                                                                           {"a": "b"}}}}}
    st, o = fake.ctl("POST", "/object", {"resource": "deployments", "object": new})
    check(st == 200 and o["metadata"]["namespace"] == NS, "POST /object %s" % o)
    got = ok(fake, "GET", "/apis/apps/v1/namespaces/default/deployments/api")
    check(got["spec"] == new["spec"], "created object")
    check(history(fake, "deployments", "api") == [{"a": "b"}], "created history")
    check(fake.ctl("GET", "/object?resource=deployments&name=zzz")[0] == 404, "ctl 404")
    check(fake.ctl("GET", "/object?resource=widgets&name=zzz")[0] == 400, "ctl bad resource")


# ---- watches (fast sync), from tests/lib/fakeapi.md "Watches" ----

def put_site(fake, data):
    """The ConfigMap site stored with data; its new resourceVersion."""
    return fake.ctl("POST", "/object", {"resource": "configmaps", "object": {
        "metadata": {"name": "site"}, "data": data}})[1]["metadata"]["resourceVersion"]


def watch_site(fake, since, secs, accept=None):
    """A watch of the ConfigMap site from resourceVersion since, read to its
    end in a thread (the body cut where a drop cut it); returned once the
    fake lists it open, as (thread, got): got holds (status, body) once the
    stream ended."""
    got = []
    headers = {"Authorization": "Bearer " + fake.token()}
    if accept:
        headers["Accept"] = accept

    def reader():
        c = http.client.HTTPSConnection("127.0.0.1", fake.port, timeout=10,
                                        context=fake.tls_context())
        c.request("GET", "/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%%3Dsite"
                  "&watch=1&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%d"
                  % (since, secs), headers=headers)
        r = c.getresponse()
        try:
            body = r.read()  # until the stream ends
        except (http.client.IncompleteRead, OSError) as e:
            body = getattr(e, "partial", b"")
        got.append((r.status, body))
        c.close()
    t = threading.Thread(target=reader)
    t.start()
    wait_until(lambda: len(fake.ctl("GET", "/watches")[1]) == 1, 10, "the watch open")
    return t, got


def site_events(t, got):
    """(status, events) of watch_site's stream, once it ended (15 s at most)."""
    import json as _json
    t.join(15)
    check(not t.is_alive() and got, "the stream did not end")
    status, body = got[0]
    return status, [_json.loads(l) for l in body.splitlines() if l.strip()]


def test_fake_watch_stream_metadata_only(env):
    import json as _json
    fake = start(env)
    rv0 = put_site(fake, {"a": "secret-ish"})
    meta = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
    c = http.client.HTTPSConnection("127.0.0.1", fake.port, timeout=10, context=fake.tls_context())
    c.request("GET", "/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dsite",
              headers={"Authorization": "Bearer " + fake.token(), "Accept": meta})
    lst = _json.loads(c.getresponse().read())
    c.close()
    check(lst["kind"] == "PartialObjectMetadataList" and "data" not in lst["items"][0],
          "list: %r" % lst)
    t, got = watch_site(fake, rv0, 5,
                        accept="application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
    rv1 = put_site(fake, {"a": "2"})
    fake.ctl("POST", "/watch", {"action": "bookmark"})
    fake.ctl("POST", "/watch", {"action": "end"})
    status, evs = site_events(t, got)
    check(status == 200, "watch status: %r" % status)
    check([e["type"] for e in evs] == ["MODIFIED", "BOOKMARK"], "events: %r" % evs)
    check(evs[0]["object"]["kind"] == "PartialObjectMetadata" and
          evs[0]["object"]["metadata"]["resourceVersion"] == rv1 and "data" not in evs[0]["object"],
          "event: %r" % evs[0])


def test_fake_watch_actions_act_where_posted(env):
    """A control action acts where it was posted among the changes
    (fakeapi.md, POST /watch): held streams that wake to a change, a
    BOOKMARK, another change, an end and a third change send the first
    change, the bookmark at its resourceVersion, the second change, and end
    there; a drop posted before a change cuts the stream before it. A CI
    run once saw the drop's stream send the later change first, so the
    agent under test never needed the relist the test was about."""
    fake = start(env)

    def events(t, got):
        return [(e["type"], e["object"]["metadata"]["resourceVersion"])
                for e in site_events(t, got)[1]]

    t, got = watch_site(fake, put_site(fake, {"a": "0"}), 8)
    fake.ctl("POST", "/watch", {"hold": True})
    rv1 = put_site(fake, {"a": "1"})
    fake.ctl("POST", "/watch", {"action": "bookmark"})
    rv2 = put_site(fake, {"a": "2"})
    fake.ctl("POST", "/watch", {"action": "end"})
    rv3 = put_site(fake, {"a": "3"})
    fake.ctl("POST", "/watch", {"hold": False})
    evs = events(t, got)
    check(evs == [("MODIFIED", rv1), ("BOOKMARK", rv1), ("MODIFIED", rv2)], "events: %r" % evs)
    wait_until(lambda: not fake.ctl("GET", "/watches")[1], 10, "the stream gone")
    t, got = watch_site(fake, rv3, 8)
    fake.ctl("POST", "/watch", {"hold": True})
    fake.ctl("POST", "/watch", {"action": "drop"})
    put_site(fake, {"a": "4"})
    fake.ctl("POST", "/watch", {"hold": False})
    evs = events(t, got)
    check(evs == [], "a dropped stream sent a later change: %r" % evs)


def test_fake_watch_all_namespaces(env):
    """GET /api/v1/pods?watch=1 (the sync service's --all-namespaces): the
    pods of every namespace, each event naming its namespace; the open
    watch is listed with namespace None; a namespaced watch still sees its
    own namespace only; a POST across namespaces is 405."""
    import json as _json
    fake = start(env, fixture="none")
    pods = [("a", "p1"), ("b", "p2")]
    for ns, name in pods:
        fake.ctl("POST", "/object", {"resource": "pods", "object": {
            "metadata": {"name": name, "namespace": ns}, "spec": {"containers": []}}})
    got = []

    def reader(path):
        c = http.client.HTTPSConnection("127.0.0.1", fake.port, timeout=10,
                                        context=fake.tls_context())
        c.request("GET", path + "?watch=1&resourceVersion=0&timeoutSeconds=5",
                  headers={"Authorization": "Bearer " + fake.token(),
                           "Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"})
        r = c.getresponse()
        got.append((path, r.status, r.read()))
        c.close()
    threads = [threading.Thread(target=reader, args=(p,))
               for p in ("/api/v1/pods", "/api/v1/namespaces/a/pods")]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    while len(fake.ctl("GET", "/watches")[1]) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    open_ = fake.ctl("GET", "/watches")[1]
    check(sorted(str(w["namespace"]) for w in open_) == ["None", "a"], "open: %r" % open_)
    fake.ctl("POST", "/object", {"resource": "pods", "object": {
        "metadata": {"name": "p3", "namespace": "c"}, "spec": {"containers": []}}})
    fake.ctl("POST", "/watch", {"action": "end"})
    for t in threads:
        t.join(15)
    by = {p: (st, [_json.loads(x) for x in body.splitlines() if x.strip()]) for p, st, body in got}
    st, evs = by["/api/v1/pods"]
    check(st == 200 and [(e["type"], e["object"]["metadata"]["namespace"],
                          e["object"]["metadata"]["name"]) for e in evs] ==
          [("ADDED", "a", "p1"), ("ADDED", "b", "p2"), ("ADDED", "c", "p3")], "all: %r" % evs)
    st, evs = by["/api/v1/namespaces/a/pods"]
    check(st == 200 and [e["object"]["metadata"]["name"] for e in evs] == ["p1"], "a: %r" % evs)
    st, _, _ = fake.api("POST", "/api/v1/secrets", {"metadata": {"name": "x"}}, "application/json")
    check(st == 405, "POST across namespaces: %r" % st)


def test_fake_watch_gone_and_tables(env):
    import json as _json
    fake = start(env)
    fake.ctl("POST", "/object", {"resource": "secrets", "object": {
        "metadata": {"name": "creds"}, "data": {"k": "djE="}}})
    fake.ctl("POST", "/object", {"resource": "secrets", "object": {
        "metadata": {"name": "other"}, "data": {}}})
    fake.ctl("POST", "/watch", {"compact": True})
    base = "/api/v1/namespaces/default/secrets?fieldSelector=metadata.name%3Dcreds"
    table = "application/json;as=Table;g=meta.k8s.io;v=v1"

    def get(path, accept):
        c = http.client.HTTPSConnection("127.0.0.1", fake.port, timeout=10,
                                        context=fake.tls_context())
        c.request("GET", path, headers={"Authorization": "Bearer " + fake.token(), "Accept": accept})
        r = c.getresponse()
        body = r.read()
        c.close()
        return r.status, body
    st, body = get(base + "&includeObject=None", table)
    t = _json.loads(body)
    check(st == 200 and t["kind"] == "Table" and t["rows"][0]["cells"][0] == "creds" and
          t["rows"][0]["object"] is None, "table list: %s %r" % (st, t))
    st, _ = get(base, table)
    check(st == 400, "a Table with objects was answered: %s" % st)
    st, body = get(base + "&includeObject=None&watch=1&resourceVersion=1&timeoutSeconds=2", table)
    evs = [_json.loads(l) for l in body.splitlines() if l.strip()]
    check(st == 200 and evs[0]["type"] == "ERROR" and evs[0]["object"]["code"] == 410,
          "a too-old watch: %s %r" % (st, evs))
    fake.ctl("POST", "/watch", {"gone_as": "status"})
    st, _ = get(base + "&includeObject=None&watch=1&resourceVersion=1&timeoutSeconds=2", table)
    check(st == 410, "a too-old watch with gone_as status: %s" % st)
    st, body = get("/api/v1/namespaces/default/secrets?fieldSelector=spec.x%3Dy", table)
    check(st == 400, "an unsupported field selector: %s" % st)


def test_fake_watch_storms_and_resync(env):
    """A watch from resourceVersion 0 starts with the object as ADDED; each
    storm of POST /storm shapes every watch of its object (README
    "Control API")."""
    import json as _json
    fake = start(env)
    rv = fake.ctl("POST", "/object", {"resource": "configmaps", "object": {
        "metadata": {"name": "site"}, "data": {}}})[1]["metadata"]["resourceVersion"]
    meta = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

    def watch(since, secs=1):
        c = http.client.HTTPSConnection("127.0.0.1", fake.port, timeout=30,
                                        context=fake.tls_context())
        t0 = time.monotonic()
        c.request("GET", "/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%%3Dsite"
                  "&watch=1&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%d" % (
                      since, secs), headers={"Authorization": "Bearer " + fake.token(),
                                             "Accept": meta})
        r = c.getresponse()
        head_s = time.monotonic() - t0
        body = r.read()
        c.close()
        lines = [l for l in body.splitlines() if l.strip()]
        evs = [_json.loads(l) if l.startswith(b'{"') else l for l in lines]
        return r.status, evs, head_s

    def storm(mode, **kw):
        st, out = fake.ctl("POST", "/storm", dict(kw, resource="configmaps", name="site", mode=mode))
        check(st == 200, "POST /storm %s: %s %r" % (mode, st, out))

    st, evs, _ = watch("0")
    check(st == 200 and [e["type"] for e in evs] == ["ADDED"] and
          evs[0]["object"]["metadata"]["resourceVersion"] == rv, "a watch from 0: %r" % evs)
    storm("gone_event")
    st, evs, _ = watch(rv)
    check([(e["type"], e["object"]["code"]) for e in evs] == [("ERROR", 410)], "gone_event: %r" % evs)
    st, evs, _ = watch("0")
    check([e["type"] for e in evs] == ["ADDED", "ERROR"], "gone_event from 0: %r" % evs)
    storm("gone_status")
    check(watch(rv)[0] == 410, "gone_status")
    storm("end_after_bookmark")
    st, evs, _ = watch(rv, 30)
    check([e["type"] for e in evs] == ["BOOKMARK"], "end_after_bookmark: %r" % evs)
    storm("end_after_event")
    st, evs, _ = watch(rv, 30)
    check([e["type"] for e in evs] == ["MODIFIED"] and
          int(evs[0]["object"]["metadata"]["resourceVersion"]) > int(rv), "end_after_event: %r" % evs)
    storm("garbage")
    st, evs, _ = watch(rv)
    check(evs and evs[0] == b"{this is not json", "garbage: %r" % evs)
    storm("other_name", other="someone-else")
    st, evs, _ = watch(rv)
    check(evs and evs[0]["object"]["metadata"]["name"] == "someone-else", "other_name: %r" % evs)
    storm("rvs", rvs=["11", "5"], interval_ms=100)
    st, evs, _ = watch(rv)
    got = [e["object"]["metadata"]["resourceVersion"] for e in evs if e["type"] == "MODIFIED"]
    got = got[got.index("11"):] if "11" in got else got  # after the changes since rv
    check(len(got) >= 4 and got[:4] == ["11", "5", "11", "5"], "rvs: %r" % got)
    storm("trickle_head", interval_ms=20)
    st, evs, head_s = watch(rv)
    check(st == 200 and head_s >= 1.0, "trickle_head: the head in %.2f s" % head_s)
    storm("churn", interval_ms=20)
    wait_until(lambda: len(fake.ctl("GET", "/changes?resource=configmaps&name=site")[1]) >= 10, 10,
               "the churn's changes")
    storm(None)
    check(fake.ctl("GET", "/storms")[1] == [], "storms left: %r" % fake.ctl("GET", "/storms")[1])
    check(fake.ctl("POST", "/storm", {"resource": "configmaps", "name": "site",
                                      "mode": "hail"})[0] == 400, "an unknown storm mode accepted")
