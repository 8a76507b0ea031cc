"""`reload-agent webhook`: the mutating admission webhook over real HTTPS.

A test CA and serving certificates are made with the `openssl` CLI; the
client is Python's ssl module verifying against that CA. The returned JSON
Patch is applied with Debian's python3-jsonpatch (an RFC 6902
implementation independent of ours) and the resulting pod is checked.
Covered: injection and the pod it gives, reinvocation (nothing new: no
patch; a volume added by a later webhook: only mirror ops), malformed /
wrong-type / oversized requests, a slowloris client and a stalled TLS
handshake cut off while others are served, certificate rotation by an
AtomicWriter `..data` swap (build/tools/awsim) and by a plain rewrite with
no restart, the API server's version read from the fake API server
(tests/lib/fakeapi.py: served, changed, failing, unreachable; --kube-version
overrides it), an expired certificate served at start and then renewed, 200
concurrent reviews, SIGTERM with reviews in flight, and the command line
(usage errors, bad certificates).
"""
import base64
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import threading
import time

import jsonpatch

from tests.lib import agent, fakeapi
from tests.lib.proc import TestFailure, check, wait_until

HOST = "127.0.0.1"
MiB = 1 << 20


# ---- certificates (openssl CLI) ----

def openssl(env, *args):
    r = env.run(["openssl"] + list(args))
    check(r.returncode == 0, "openssl %s: %s" % (args[0], r.stderr.decode(errors="replace")))


def make_ca(env, name="ca"):
    key, crt = env.path(name + ".key"), env.path(name + ".crt")
    openssl(env, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", crt, "-days", "30", "-subj", "/CN=reload-agent test CA " + name,
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return key, crt


def make_cert(env, ca, serial, name=None):
    """A serving certificate for localhost/127.0.0.1 signed by ca, with the
    given serial (int); returns (cert PEM bytes, key PEM bytes)."""
    name = name or "srv-%x" % serial
    key, csr, crt, ext = (env.path(name + s) for s in (".key", ".csr", ".crt", ".ext"))
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1,DNS:reload-agent-webhook.ra.svc\n"
                "extendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n")
    openssl(env, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", csr, "-subj", "/CN=reload-agent-webhook")
    openssl(env, "x509", "-req", "-in", csr, "-CA", ca[1], "-CAkey", ca[0],
            "-set_serial", str(serial), "-days", "7", "-out", crt, "-extfile", ext)
    with open(crt, "rb") as f:
        c = f.read()
    with open(key, "rb") as f:
        k = f.read()
    return c, k


def make_expired_cert(env, ca):
    """A serving certificate valid only during 2020-01-01 (openssl ca sets
    the dates); returns (cert PEM bytes, key PEM bytes)."""
    d = env.path("expired-ca")
    os.makedirs(d)
    key, csr, crt = (os.path.join(d, n) for n in ("srv.key", "srv.csr", "srv.crt"))
    cnf, ext = os.path.join(d, "ca.cnf"), os.path.join(d, "ext")
    open(os.path.join(d, "index.txt"), "w").close()
    with open(os.path.join(d, "serial"), "w") as f:
        f.write("0E0E\n")
    with open(cnf, "w") as f:
        f.write("[ca]\ndefault_ca = c\n[c]\ndatabase = %s/index.txt\nnew_certs_dir = %s\n"
                "serial = %s/serial\ndefault_md = sha256\npolicy = p\n[p]\n"
                "commonName = supplied\n" % (d, d, d))
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    openssl(env, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", csr, "-subj", "/CN=reload-agent-webhook")
    openssl(env, "ca", "-batch", "-config", cnf, "-cert", ca[1], "-keyfile", ca[0], "-in", csr,
            "-out", crt, "-startdate", "20200101000000Z", "-enddate", "20200102000000Z",
            "-extfile", ext, "-notext")
    with open(crt, "rb") as f:
        c = f.read()
    with open(key, "rb") as f:
        k = f.read()
    return c, k


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


class Setup:
    """A CA, a serving certificate (serial 0x1001) in a plain directory, and
    a client context trusting the CA."""

    def __init__(self, env):
        self.env = env
        self.ca = make_ca(env)
        self.cert, self.key = make_cert(env, self.ca, 0x1001)
        self.dir = env.path("tls")
        os.makedirs(self.dir)
        self.cert_file = os.path.join(self.dir, "tls.crt")
        self.key_file = os.path.join(self.dir, "tls.key")
        write(self.cert_file, self.cert)
        write(self.key_file, self.key)

    def ctx(self):
        c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        c.load_verify_locations(self.ca[1])
        return c


# ---- the webhook process ----

class Webhook(agent.Agent):
    """A running `reload-agent webhook` (JSON logs parsed as agent.Agent does),
    stopped by PID through the Env like the agents."""

    def __init__(self, env, args):  # noqa: super().__init__ would start `run`
        self.env = env
        self.cmd = [env.binary, "webhook", "--log-format", "json", "--log-level", "debug",
                    "--listen", HOST + ":0"] + list(args)
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=env.tmp)
        self.lines, self.events, self.bad_lines = [], [], []
        self.cond = threading.Condition()
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()
        self.out_t = threading.Thread(target=self._drain_stdout, daemon=True)
        self.out_t.start()
        env.agents.append(self)
        self.port = self.wait_event("ready", timeout=15)[0]["port"]


def start(env, s, *extra):
    """The webhook without the drain before its stop (--shutdown-delay 0s,
    unless extra says otherwise): the tests stop it often, and
    test_webhook_drain.py covers the drain."""
    delay = [] if "--shutdown-delay" in extra else ["--shutdown-delay", "0s"]
    return Webhook(env, ["--tls-cert-file", s.cert_file, "--tls-key-file", s.key_file] + delay +
                   list(extra))


def conn(s, wh, timeout=10):
    return http.client.HTTPSConnection(HOST, wh.port, context=s.ctx(), timeout=timeout)


def request(s, wh, method, path, body=None, ctype="application/json", c=None):
    """One request (a new connection unless c is given); returns (status,
    headers dict, body bytes)."""
    own = c is None
    c = c or conn(s, wh)
    try:
        headers = {"Content-Type": ctype} if ctype else {}
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        if own:
            c.close()


def review(uid, pod, op="CREATE", dry_run=False):
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid,
                        "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
                        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
                        "name": "", "namespace": "team-a", "operation": op,
                        "userInfo": {"username": "system:serviceaccount:kube-system:"
                                                 "replicaset-controller"},
                        "object": pod, "oldObject": None, "dryRun": dry_run,
                        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}}}


def mutate(s, wh, uid, pod, c=None, path="/mutate", **kw):
    """POSTs a review (to path); checks the envelope (200, allowed, uid
    echoed, never a status object); returns (response dict, patch ops or None)."""
    st, hdrs, body = request(s, wh, "POST", path, json.dumps(review(uid, pod, **kw)), c=c)
    check(st == 200, "POST %s: %d %r" % (path, st, body[:300]))
    check(hdrs.get("Content-Type", "").startswith("application/json"), "type %r" % hdrs)
    doc = json.loads(body)
    check(doc["apiVersion"] == "admission.k8s.io/v1" and doc["kind"] == "AdmissionReview",
          "envelope %r" % doc)
    resp = doc["response"]
    check(resp["allowed"] is True, "allowed is not true: %r" % resp)
    check(resp["uid"] == uid, "uid %r, sent %r" % (resp["uid"], uid))
    ops = None
    if "patch" in resp:
        check(resp["patchType"] == "JSONPatch", "patchType %r" % resp.get("patchType"))
        ops = json.loads(base64.b64decode(resp["patch"], validate=True))
        check(isinstance(ops, list) and ops, "patch is not a non-empty array: %r" % ops)
    return resp, ops


def app_pod(annotations=None, image="nginx:1.27-sentinel-4711"):
    ann = {"reload-agent.io/inject": "true", "reload-agent.io/action": "signal",
           "reload-agent.io/signal": "HUP", "reload-agent.io/process": "nginx"}
    ann.update(annotations or {})
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "web-5d8f7c9b6-", "namespace": "", "annotations": ann,
                     "labels": {"app": "web"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                          "name": "web-5d8f7c9b6", "uid": "1234",
                                          "controller": True}],
                     "managedFields": [{"manager": "kube-controller-manager",
                                        "operation": "Update", "apiVersion": "v1",
                                        "fieldsType": "FieldsV1",
                                        "fieldsV1": {"f:metadata": {"f:generateName": {}}}}]},
        "spec": {
            "containers": [{
                "name": "web", "image": image,
                "securityContext": {"runAsUser": 101, "runAsGroup": 101},
                "volumeMounts": [
                    {"name": "conf", "mountPath": "/etc/nginx/conf.d", "readOnly": True},
                    {"name": "certs", "mountPath": "/etc/nginx/tls", "readOnly": True},
                    {"name": "kube-api-access-x7k2p",
                     "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                     "readOnly": True}]}],
            "volumes": [
                {"name": "conf", "configMap": {"name": "nginx-conf"}},
                {"name": "certs", "secret": {"secretName": "nginx-tls"}},
                {"name": "kube-api-access-x7k2p", "projected": {"sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}}]}}


def sidecar(pod):
    inits = pod["spec"].get("initContainers", [])
    check(inits, "no initContainers in %r" % pod["spec"])
    sc = inits[-1]
    check(sc["name"] == "reload-agent", "last init container is %r" % sc["name"])
    return sc


def no_object_in_logs(wh, *secrets):
    with wh.cond:
        lines = list(wh.lines)
    for sec in secrets:
        bad = [l for l in lines if sec in l]
        check(not bad, "the log shows %r: %r" % (sec, bad[:2]))


# ---- tests ----

def test_webhook_injects_and_reinvocation(env):
    s = Setup(env)
    wh = start(env, s, "--image", "registry.example/reload-agent:test")
    pod = app_pod()
    resp, ops = mutate(s, wh, "uid-create-1", pod)
    check(ops, "no patch for an opted-in pod: %r" % resp)
    check(resp.get("auditAnnotations") == {"injected": "true"}, "audit %r" % resp)
    injected = jsonpatch.apply_patch(pod, ops)
    sc = sidecar(injected)
    check(sc.get("restartPolicy") == "Always", "not a native sidecar: %r" % sc)
    check(sc["image"] == "registry.example/reload-agent:test", "image %r" % sc["image"])
    check(not any(c["name"] == "reload-agent" for c in injected["spec"]["containers"]),
          "a plain container was added")
    mounts = {m["mountPath"]: m for m in sc.get("volumeMounts", [])}
    for path, vol in (("/etc/nginx/conf.d", "conf"), ("/etc/nginx/tls", "certs")):
        check(path in mounts and mounts[path]["name"] == vol and mounts[path].get("readOnly"),
              "mirror of %s at %s missing: %r" % (vol, path, mounts))
        check("--watch=" + path in sc["args"], "no --watch for %s: %r" % (path, sc["args"]))
    check(not any(m["name"].startswith("kube-api-access") and "--watch=" + m["mountPath"] in
                  sc["args"] for m in sc["volumeMounts"]), "the token volume is watched")
    check(injected["spec"].get("shareProcessNamespace") is True, "signal needs shared PIDs")
    check("reload-agent.io/inject-status" in injected["metadata"]["annotations"], "no status")
    check(injected["metadata"]["managedFields"] == pod["metadata"]["managedFields"],
          "managedFields changed")
    ev = wh.wait_match("admission", uid="uid-create-1")
    check(ev["result"] == "injected" and ev["namespace"] == "team-a" and
          ev["generate_name"] == "web-5d8f7c9b6-" and ev["status"] == 200, "log %r" % ev)
    no_object_in_logs(wh, "nginx:1.27-sentinel-4711", "nginx-conf", "ownerReferences")

    # Reinvocation with nothing new: allowed, no patch.
    resp, ops2 = mutate(s, wh, "uid-create-2", injected)
    check(ops2 is None, "a patch for an already injected pod: %r" % ops2)
    check(wh.wait_match("admission", uid="uid-create-2")["result"] == "unchanged", "result")

    # A later webhook added a secret volume to the app: only mirror ops.
    later = json.loads(json.dumps(injected))
    later["spec"]["volumes"].append({"name": "vault-secrets", "secret": {"secretName": "v"}})
    later["spec"]["containers"][0]["volumeMounts"].append(
        {"name": "vault-secrets", "mountPath": "/vault/secrets", "readOnly": True})
    resp, ops3 = mutate(s, wh, "uid-create-3", later)
    check(ops3, "no patch for the volume a later webhook added")
    for op in ops3:
        p = op["path"]
        check(p.startswith("/spec/initContainers/%d/" % (len(later["spec"]["initContainers"]) - 1))
              or p in ("/metadata/annotations/reload-agent.io~1inject-status",
                       "/metadata/annotations/reload-agent.io~1sync-objects"),
              "a reinvocation op outside the sidecar and its annotations: %r" % op)
    objs = [op["value"] for op in ops3 if op["path"].endswith("sync-objects")]
    check(len(objs) == 1 and objs[0].endswith(",secret/v"),
          "the sync service's objects do not name the new Secret: %r" % objs)
    again = jsonpatch.apply_patch(later, ops3)
    sc = sidecar(again)
    check(any(m["mountPath"] == "/vault/secrets" for m in sc["volumeMounts"]), "no new mirror")
    check("--watch=/vault/secrets" in sc["args"], "no --watch for the new mirror")
    check(len(again["spec"]["initContainers"]) == len(later["spec"]["initContainers"]),
          "a second sidecar")
    resp, ops4 = mutate(s, wh, "uid-create-4", again)
    check(ops4 is None, "not converged after the reinvocation: %r" % ops4)

    # Not opted in, an UPDATE, a dry run: allowed, the right result.
    plain = app_pod({"reload-agent.io/inject": "false"})
    resp, ops = mutate(s, wh, "uid-false", plain)
    check(ops is None and not resp.get("warnings"), "inject false: %r" % resp)
    resp, ops = mutate(s, wh, "uid-update", pod, op="UPDATE")
    check(ops is None, "an UPDATE was mutated")
    check(wh.wait_match("admission", uid="uid-update")["result"] == "ignored", "update result")
    resp, ops = mutate(s, wh, "uid-dry", app_pod(), dry_run=True)
    check(ops, "a dry run must get the same patch")
    check(wh.wait_match("admission", uid="uid-dry").get("dry_run") is True, "dry_run not logged")

    # hostPID: refused by the transform, admitted with the reason as a warning.
    hp = app_pod()
    hp["spec"]["hostPID"] = True
    resp, ops = mutate(s, wh, "uid-hostpid", hp)
    check(ops is None, "a hostPID pod was patched")
    w = resp.get("warnings") or []
    check(any("hostPID" in x for x in w) and all(len(x) <= 120 for x in w), "warnings %r" % w)

    # The endpoints and the counts.
    st, _, b = request(s, wh, "GET", "/healthz", ctype=None)
    check(st == 200 and b == b"ok\n", "healthz %d %r" % (st, b))
    st, _, b = request(s, wh, "GET", "/readyz", ctype=None)
    check(st == 200, "readyz %d %r" % (st, b))
    st, _, b = request(s, wh, "GET", "/nope", ctype=None)
    check(st == 404, "unknown path %d" % st)
    st, hdrs, b = request(s, wh, "GET", "/mutate", ctype=None)
    check(st == 405 and hdrs.get("Allow") == "POST", "GET /mutate: %d %r" % (st, hdrs))
    st, _, m = request(s, wh, "GET", "/metrics", ctype=None)
    text = m.decode()
    check(st == 200, "metrics %d" % st)
    for line in ('reload_agent_webhook_admissions_total{result="injected"} 3',
                 'reload_agent_webhook_admissions_total{result="unchanged"} 2',
                 'reload_agent_webhook_admissions_total{result="ignored"} 1',
                 'reload_agent_webhook_admissions_total{result="skipped"} 2',
                 'reload_agent_webhook_admission_duration_seconds_count 8',
                 'reload_agent_webhook_admission_duration_seconds_bucket{le="0.0005"}',
                 'reload_agent_webhook_admission_duration_seconds_bucket{le="1"} ',
                 'reload_agent_webhook_cert_reloads_total{result="success"} 0',
                 'reload_agent_webhook_tls_handshake_failures_total'):
        check(line in text, "metrics lack %r:\n%s" % (line, text))
    exp = [l for l in text.splitlines()
           if l.startswith("reload_agent_webhook_cert_expiry_timestamp_seconds ")]
    check(exp and abs(int(exp[0].split()[1]) - (time.time() + 7 * 86400)) < 3600,
          "cert expiry gauge %r (want about now + 7 days)" % exp)
    check(wh.stop() == 0, "exit status after SIGTERM")


def raw_tls(s, wh, timeout=10):
    sock = socket.create_connection((HOST, wh.port), timeout=timeout)
    return s.ctx().wrap_socket(sock, server_hostname="localhost")


def read_reply(sock, limit=1 << 20):
    """Reads until the peer closes (or limit bytes); returns the bytes."""
    out = b""
    while len(out) < limit:
        try:
            b = sock.recv(65536)
        except (ConnectionResetError, ssl.SSLError):
            break
        if not b:
            break
        out += b
    return out


def test_webhook_namespace_wide(env):
    """/mutate-namespace (the entry of the namespaces labelled
    reload-agent.io/inject=enabled) injects a pod that says nothing, never
    one that says "false"; /mutate still wants "true"."""
    s = Setup(env)
    wh = start(env, s)
    quiet = app_pod()
    del quiet["metadata"]["annotations"]["reload-agent.io/inject"]
    resp, ops = mutate(s, wh, "uid-ns-1", quiet, path="/mutate-namespace")
    check(ops, "no patch for a pod of an opted-in namespace: %r" % resp)
    injected = jsonpatch.apply_patch(quiet, ops)
    check("--watch=/etc/nginx/conf.d" in sidecar(injected)["args"], "no --watch of the volume")
    check(wh.wait_match("admission", uid="uid-ns-1")["result"] == "injected", "result")
    resp, ops = mutate(s, wh, "uid-ns-2", injected, path="/mutate-namespace")
    check(ops is None, "the reinvocation patched again: %r" % ops)
    out = app_pod({"reload-agent.io/inject": "false"})
    resp, ops = mutate(s, wh, "uid-ns-3", out, path="/mutate-namespace")
    check(ops is None and not resp.get("warnings"), "inject false was injected: %r" % resp)
    check(wh.wait_match("admission", uid="uid-ns-3")["result"] == "skipped", "opt-out result")
    resp, ops = mutate(s, wh, "uid-ns-4", quiet)
    check(ops is None and not resp.get("warnings"), "/mutate injected a quiet pod: %r" % resp)
    st, hdrs, _ = request(s, wh, "GET", "/mutate-namespace", ctype=None)
    check(st == 405 and hdrs.get("Allow") == "POST", "GET /mutate-namespace: %d" % st)


def test_webhook_bad_requests(env):
    s = Setup(env)
    wh = start(env, s)
    good = json.dumps(review("uid-ok", app_pod()))
    st, _, b = request(s, wh, "POST", "/mutate", "{not json", ctype="application/json")
    check(st == 400 and b"malformed JSON" in b, "malformed: %d %r" % (st, b))
    bad = review("u", app_pod())
    bad["apiVersion"] = "admission.k8s.io/v1beta1"
    st, _, b = request(s, wh, "POST", "/mutate", json.dumps(bad))
    check(st == 400 and b"admission.k8s.io/v1beta1" in b, "v1beta1: %d %r" % (st, b))
    bad = review("u", app_pod())
    bad["kind"] = "Pod"
    st, _, b = request(s, wh, "POST", "/mutate", json.dumps(bad))
    check(st == 400 and b"AdmissionReview" in b, "kind: %d %r" % (st, b))
    bad = review("u", app_pod())
    del bad["request"]["uid"]
    st, _, b = request(s, wh, "POST", "/mutate", json.dumps(bad))
    check(st == 400 and b"uid" in b, "no uid: %d %r" % (st, b))
    for ct in ("text/plain", "application/yaml", None):
        st, _, b = request(s, wh, "POST", "/mutate", good, ctype=ct)
        check(st == 415, "content type %r: %d %r" % (ct, st, b))
    st, _, b = request(s, wh, "POST", "/mutate", good, ctype="application/json; charset=utf-8")
    check(st == 200, "charset parameter refused: %d" % st)

    # Just under 3 MiB (a big annotation): answered. Over: 413 at once,
    # decided from Content-Length before the body is read.
    pod = app_pod()
    pod["metadata"]["annotations"]["example.com/big"] = ""
    base = len(json.dumps(review("uid-big", pod)))
    pod["metadata"]["annotations"]["example.com/big"] = "x" * (3 * MiB - base)
    big = json.dumps(review("uid-big", pod)).encode()
    check(len(big) == 3 * MiB, "big body is %d bytes" % len(big))
    st, _, b = request(s, wh, "POST", "/mutate", big)
    check(st == 200 and json.loads(b)["response"]["uid"] == "uid-big", "3 MiB: %d" % st)
    sock = raw_tls(s, wh)
    sock.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % (3 * MiB + 1))
    reply = read_reply(sock)
    sock.close()
    check(reply.startswith(b"HTTP/1.1 413"), "3 MiB + 1: %r" % reply[:80])
    # A chunked body that grows past the limit is cut off too.
    sock = raw_tls(s, wh)
    sock.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n%s\r\n" % (MiB, b" " * MiB)
    try:
        for _ in range(4):
            sock.sendall(chunk)
    except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
        pass
    reply = read_reply(sock)
    sock.close()
    check(reply.startswith(b"HTTP/1.1 413"), "chunked over 3 MiB: %r" % reply[:80])
    st, _, b = request(s, wh, "POST", "/mutate", good)
    check(st == 200, "the server stopped answering after the bad requests: %d" % st)
    check(wh.stop() == 0, "exit status")


def test_webhook_slow_clients_cut_off(env):
    """A slowloris (TLS done, headers trickling), a stalled handshake (TCP
    only) and half a ClientHello: all cut off at the 5 s read timeout while
    reviews keep being answered."""
    s = Setup(env)
    wh = start(env, s)
    stalled = socket.create_connection((HOST, wh.port), timeout=20)
    half = socket.create_connection((HOST, wh.port), timeout=20)
    half.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a ClientHello's start
    loris = raw_tls(s, wh, timeout=20)
    loris.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\n")
    # Reviews are answered while the three hold their connections.
    for i in range(8):
        resp, ops = mutate(s, wh, "uid-%d" % i, app_pod())
        check(ops, "review %d not injected" % i)
        try:
            loris.sendall(b"X-Slow: 1\r\n")
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass
        time.sleep(0.2)
    for name, sk in (("stalled handshake", stalled), ("half ClientHello", half),
                     ("slowloris", loris)):
        sk.settimeout(15)
        t = time.monotonic()
        try:
            data = sk.recv(4096)
            while data and time.monotonic() - t < 15:
                data = sk.recv(4096)
        except (ConnectionResetError, ssl.SSLError, socket.timeout) as e:
            check(not isinstance(e, socket.timeout), "%s was never cut off" % name)
        sk.close()
    st, _, m = request(s, wh, "GET", "/metrics", ctype=None)
    fails = [l for l in m.decode().splitlines()
             if l.startswith("reload_agent_webhook_tls_handshake_failures_total ")]
    # The half ClientHello counts; a TCP connection that never sent a byte
    # (a probe) does not.
    check(fails and int(fails[0].split()[1]) >= 1, "handshake failures not counted: %r" % fails)
    check(wh.stop() == 0, "exit status")


def peer_serial(s, wh, c=None):
    own = c is None
    c = c or conn(s, wh)
    if own:
        c.connect()
    ser = int(c.sock.getpeercert()["serialNumber"], 16)
    if own:
        c.close()
    return ser


def metric(s, wh, name):
    st, _, m = request(s, wh, "GET", "/metrics", ctype=None)
    for l in m.decode().splitlines():
        if l.startswith(name + " "):
            return float(l.split()[1])
    raise TestFailure("no metric %s" % name)


def test_webhook_cert_rotation_atomic_writer(env):
    """The certificate lives in a Secret-style volume laid out by awsim;
    a `..data` swap brings a new serial to new connections, with no
    restart, while an open keep-alive connection keeps working."""
    s = Setup(env)
    vol = env.path("secret-vol")
    os.makedirs(vol)
    env.awsim(vol, {"tls.crt": s.cert, "tls.key": s.key})
    wh = Webhook(env, ["--tls-cert-file", os.path.join(vol, "tls.crt"),
                       "--tls-key-file", os.path.join(vol, "tls.key")])
    pid = wh.pid
    old = conn(s, wh)
    old.connect()
    check(peer_serial(s, wh, old) == 0x1001, "first serial")
    mutate(s, wh, "before", app_pod(), c=old)

    cert2, key2 = make_cert(env, s.ca, 0x2002)
    env.awsim(vol, {"tls.crt": cert2, "tls.key": key2})
    ev = wh.wait_match("cert-reload", timeout=10, result="success")
    check(ev["serial"].lower().lstrip("0") == "2002", "reloaded serial %r" % ev)
    check(peer_serial(s, wh) == 0x2002, "a new connection still sees the old certificate")
    # The old connection keeps its session and is still served.
    resp, ops = mutate(s, wh, "after-old-conn", app_pod(), c=old)
    check(ops, "old connection: no patch")
    check(peer_serial(s, wh, old) == 0x1001, "the old connection's certificate changed")
    old.close()
    resp, ops = mutate(s, wh, "after-new-conn", app_pod())
    check(ops, "new connection: no patch")
    check(wh.proc.poll() is None and wh.pid == pid, "the webhook restarted")
    check(metric(s, wh, "reload_agent_webhook_cert_reloads_total{result=\"success\"}") >= 1,
          "reload not counted")

    # A broken update (key of another certificate) keeps serial 0x2002.
    cert3, _ = make_cert(env, s.ca, 0x3003)
    env.awsim(vol, {"tls.crt": cert3, "tls.key": key2})
    wh.wait_match("cert-reload", timeout=10, result="failure")
    check(peer_serial(s, wh) == 0x2002, "a failed reload changed the certificate")
    check(metric(s, wh, "reload_agent_webhook_cert_reloads_total{result=\"failure\"}") >= 1,
          "failure not counted")
    check(wh.stop() == 0, "exit status")


def test_webhook_cert_rotation_plain_rewrite(env):
    s = Setup(env)
    wh = start(env, s)
    check(peer_serial(s, wh) == 0x1001, "first serial")
    cert2, key2 = make_cert(env, s.ca, 0x4004)
    # As an operator would: write the key, then the certificate, in place.
    write(s.key_file, key2)
    write(s.cert_file, cert2)
    wait_until(lambda: peer_serial(s, wh) == 0x4004, 10, "the rewritten certificate in use")
    resp, ops = mutate(s, wh, "rewritten", app_pod())
    check(ops, "no patch after the rewrite")
    check(wh.stop() == 0, "exit status")


def test_webhook_200_concurrent_reviews(env):
    s = Setup(env)
    wh = start(env, s)
    n = 200
    results = [None] * n
    body_of = [json.dumps(review("uid-c-%d" % i, app_pod())) for i in range(n)]
    go = threading.Event()

    def client(i):
        go.wait(10)
        try:
            st, _, b = request(s, wh, "POST", "/mutate", body_of[i])
            d = json.loads(b) if st == 200 else None
            results[i] = (st, d["response"]["uid"] if d else None,
                          d["response"]["allowed"] if d else None, "patch" in d["response"]
                          if d else None)
        except Exception as e:  # noqa: the failure is reported below
            results[i] = ("exception", repr(e))

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join(60)
    check(not any(t.is_alive() for t in threads), "clients still running after 60 s")
    bad = [(i, r) for i, r in enumerate(results) if r != (200, "uid-c-%d" % i, True, True)]
    check(not bad, "%d of %d reviews not answered 200 allowed with a patch: %r" %
          (len(bad), n, bad[:5]))
    check(metric(s, wh, 'reload_agent_webhook_admissions_total{result="injected"}') == n,
          "injected count")
    check(wh.stop() == 0, "exit status")


def test_webhook_sigterm_finishes_inflight(env):
    """SIGTERM while three reviews are in flight (their bodies half sent):
    each still gets its 200, a readiness probe arriving then gets 503, new
    connections are refused, an idle keep-alive connection is closed, and
    the process exits 0 (no drain: start sets --shutdown-delay 0s)."""
    s = Setup(env)
    wh = start(env, s, "--shutdown-timeout", "20s")
    idle = conn(s, wh)
    idle.connect()
    mutate(s, wh, "idle-first", app_pod(), c=idle)
    bodies, socks = [], []
    for i in range(3):
        b = json.dumps(review("inflight-%d" % i, app_pod())).encode()
        sk = raw_tls(s, wh, timeout=20)
        sk.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Content-Length: %d\r\n\r\n" % len(b) + b[:len(b) // 2])
        bodies.append(b)
        socks.append(sk)
    probe = raw_tls(s, wh, timeout=20)  # a readiness probe arriving at shutdown
    probe.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n")
    time.sleep(0.3)  # the halves have arrived
    wh.proc.send_signal(signal.SIGTERM)
    wh.wait_event("shutdown", timeout=5)

    def refused():
        try:
            c = socket.create_connection((HOST, wh.port), timeout=2)
        except (ConnectionRefusedError, OSError):
            return True
        c.close()
        return False

    wait_until(refused, 5, "the listener to close")
    check(wh.proc.poll() is None, "exited with reviews in flight")
    probe.sendall(b"\r\n")
    reply = read_reply(probe)
    probe.close()
    check(reply.startswith(b"HTTP/1.1 503"), "readyz during shutdown: %r" % reply[:80])
    for i, (sk, b) in enumerate(zip(socks, bodies)):
        sk.sendall(b[len(b) // 2:])
        reply = read_reply(sk)
        sk.close()
        head, _, body = reply.partition(b"\r\n\r\n")
        check(head.startswith(b"HTTP/1.1 200"), "in-flight review %d: %r" % (i, reply[:100]))
        check(b"Connection: close" in head, "the reply keeps the connection: %r" % head)
        d = json.loads(body)
        check(d["response"]["uid"] == "inflight-%d" % i and d["response"]["allowed"],
              "in-flight answer %r" % d["response"])
    try:
        rc = wh.proc.wait(10)
    except subprocess.TimeoutExpired:
        raise TestFailure("still running 10 s after the in-flight reviews finished")
    check(rc == 0, "exit status %r" % rc)
    try:
        idle.request("GET", "/healthz")
        r = idle.getresponse()
        raise TestFailure("the idle keep-alive connection was served after shutdown: %d" %
                          r.status)
    except (http.client.HTTPException, OSError, ssl.SSLError):
        pass
    idle.close()
    wh.t.join(5)
    check(wh.of("stopped"), "no stopped event")


def test_webhook_shutdown_timeout_cuts_stuck_clients(env):
    s = Setup(env)
    wh = start(env, s, "--shutdown-timeout", "1s")
    sk = raw_tls(s, wh, timeout=20)
    sk.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: 100\r\n\r\n{")
    time.sleep(0.3)
    wh.proc.send_signal(signal.SIGTERM)
    try:
        rc = wh.proc.wait(15)
    except subprocess.TimeoutExpired:
        raise TestFailure("still running 15 s after SIGTERM")
    check(rc == 0, "exit status %r" % rc)
    wh.t.join(5)
    # The request was still arriving when the 1 s deadline (not the 5 s read
    # timeout) cut it: the webhook waited for it, then gave up.
    cut = [e for e in wh.lines if "shutdown timeout reached" in e]
    check(cut, "the shutdown deadline did not cut the stuck request: %r" % wh.lines[-5:])
    sk.close()


def test_webhook_command_line(env):
    s = Setup(env)
    b = env.binary

    def run(*args):
        r = env.run([b, "webhook"] + list(args), timeout=20)
        return r.returncode, r.stdout.decode() + r.stderr.decode()

    rc, out = run("--help")
    check(rc == 0, "--help: %d" % rc)
    for flag in ("--listen", "--tls-cert-file", "--tls-key-file", "--image", "--log-format",
                 "--log-level", "--shutdown-timeout", "--shutdown-delay", "/mutate", "/metrics"):
        check(flag in out, "--help lacks %s" % flag)
    c, k = "--tls-cert-file=" + s.cert_file, "--tls-key-file=" + s.key_file
    for args, want in (((k,), "--tls-cert-file is required"),
                       ((c,), "--tls-key-file is required"),
                       ((c, k, "--listen", "localhost:80"), "--listen"),
                       ((c, k, "--log-format", "xml"), "xml"),
                       ((c, k, "--log-level", "loud"), "loud"),
                       ((c, k, "--shutdown-timeout", "5"), "--shutdown-timeout"),
                       ((c, k, "--shutdown-delay", "5"), "--shutdown-delay"),
                       ((c, k, "--bogus"), "unknown flag --bogus"),
                       ((c, k, "extra"), "unexpected argument"),
                       ((c, k, "--listen"), "--listen needs a value")):
        rc, out = run(*args)
        check(rc == 2 and want in out, "%r: exit %d, %r (want 2 and %r)" % (args, rc, out, want))
    # Certificates that cannot be served: exit 2, naming the file.
    missing = env.path("nope.crt")
    rc, out = run("--tls-cert-file", missing, k, "--listen", HOST + ":0")
    check(rc == 2 and missing in out, "missing cert: %d %r" % (rc, out))
    garbage = env.path("garbage.crt")
    write(garbage, b"not a certificate\n")
    rc, out = run("--tls-cert-file", garbage, k, "--listen", HOST + ":0")
    check(rc == 2 and garbage in out, "garbage cert: %d %r" % (rc, out))
    _, other_key = make_cert(env, s.ca, 0x5005)
    wrong = env.path("wrong.key")
    write(wrong, other_key)
    rc, out = run(c, "--tls-key-file", wrong, "--listen", HOST + ":0")
    check(rc == 2 and "key" in out.lower(), "mismatched key: %d %r" % (rc, out))
    # An address in use: exit 1.
    busy = socket.socket()
    busy.bind((HOST, 0))
    busy.listen(1)
    rc, out = run(c, k, "--listen", "%s:%d" % (HOST, busy.getsockname()[1]))
    busy.close()
    check(rc == 1 and "cannot listen" in out, "address in use: %d %r" % (rc, out))


def test_webhook_expired_cert_served_then_rotated(env):
    """An expired certificate at start is served with a warning (a verifying
    client refuses it, one that does not verify is answered), and rotating
    it fixes the webhook without a restart."""
    s = Setup(env)
    old_cert, old_key = make_expired_cert(env, s.ca)
    write(s.cert_file, old_cert)
    write(s.key_file, old_key)
    wh = start(env, s)
    ev = wh.wait_event("cert", timeout=5)[0]
    check(ev["level"] == "warn" and ev["serial"].lower().lstrip("0") == "e0e", "cert event %r" % ev)
    try:
        request(s, wh, "GET", "/healthz", ctype=None)
        raise TestFailure("a verifying client accepted the expired certificate")
    except ssl.SSLCertVerificationError as e:
        check("expired" in str(e), "refused for another reason: %s" % e)
    lax = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    lax.check_hostname = False
    lax.verify_mode = ssl.CERT_NONE
    c = http.client.HTTPSConnection(HOST, wh.port, context=lax, timeout=10)
    c.request("GET", "/readyz")
    r = c.getresponse()
    check(r.status == 200, "readyz with the expired certificate: %d" % r.status)
    r.read()
    c.close()
    # A fresh certificate in place of the expired one: no restart needed.
    write(s.key_file, s.key)
    write(s.cert_file, s.cert)
    def renewed():
        try:
            return peer_serial(s, wh) == 0x1001
        except ssl.SSLCertVerificationError:
            return False  # still the expired one

    wait_until(renewed, 10, "the renewed certificate in use")
    resp, ops = mutate(s, wh, "renewed", app_pod())
    check(ops, "no patch after the renewal")
    check(wh.stop() == 0, "exit status")


def read_one_reply(sock):
    """Reads one reply (its head and Content-Length bytes of body), without
    waiting for the connection to end; bounded by the socket's timeout."""
    out = b""
    for _ in range(10000):
        if b"\r\n\r\n" in out:
            head, body = out.split(b"\r\n\r\n", 1)
            n = [int(l.split(b":", 1)[1]) for l in head.split(b"\r\n")
                 if l.lower().startswith(b"content-length:")]
            if n and len(body) >= n[0]:
                return out
        try:
            b = sock.recv(65536)
        except (ConnectionResetError, ssl.SSLError, socket.timeout):
            break
        if not b:
            break
        out += b
    return out


def test_webhook_bounds_held_bodies_and_huge_reviews(env):
    """Issue 16.15: what all connections' bodies may hold together is
    bounded (8 MiB): two connections holding most of a 3 MiB body each, a
    third is answered 503 with Retry-After at once (the API server retries),
    /healthz answers throughout, and once they finish a new review is
    answered; a review of more JSON values than the webhook parses is
    allowed unchanged with a warning."""
    s = Setup(env)
    wh = start(env, s)
    pod = app_pod()
    pod["metadata"]["annotations"]["example.com/big"] = "x" * (3 * MiB - 4096)
    big = json.dumps(review("uid-held", pod)).encode()
    head = (b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(big))
    held = []
    for _ in range(2):
        sock = raw_tls(s, wh)
        sock.sendall(head + big[:-100])
        held.append(sock)
    st, _, b = request(s, wh, "GET", "/healthz", ctype=None)
    check(st == 200, "/healthz while bodies are held: %d" % st)
    sock = raw_tls(s, wh)
    sock.sendall(head)
    reply = read_one_reply(sock)
    sock.close()
    check(reply.startswith(b"HTTP/1.1 503") and b"\r\nRetry-After: 1\r\n" in reply,
          "a third body: %r" % reply[:200])
    for sock in held:
        sock.sendall(big[-100:])
        reply = read_one_reply(sock)
        sock.close()
        check(reply.startswith(b"HTTP/1.1 200"), "a held review: %r" % reply[:80])
    resp, ops = mutate(s, wh, "uid-after", app_pod())
    check(ops, "not injected after the held bodies")
    many = app_pod()
    many["spec"]["containers"][0]["args"] = ["a"] * 200000
    resp, ops = mutate(s, wh, "uid-many", many)
    check(ops is None and any("JSON values, more than" in w for w in resp.get("warnings", [])),
          "a review of 200 000 values: %r" % resp)
    check(wh.stop() == 0, "exit status")


# ---- the API server's version (GET /version, webhook/kubever.c) ----

def restart_pod_pod():
    return app_pod({"reload-agent.io/action": "restart-pod"})


def version_webhook(env, s, fake, *extra):
    return start(env, s, "--kube-api", fake.url, "--kube-token-file", fake.info["token_file"],
                 "--kube-ca-file", fake.info["ca"], *extra)


def set_version(fake, minor, git):
    st, out = fake.ctl("POST", "/version", {"major": "1", "minor": minor, "gitVersion": git})
    check(st == 200, "control POST /version: %s" % out)


def version_metric(s, wh):
    st, _, body = request(s, wh, "GET", "/metrics")
    check(st == 200, "/metrics: %d" % st)
    lines = [l for l in body.decode().splitlines()
             if l.startswith("reload_agent_webhook_kube_version_minor{")]
    check(len(lines) == 1, "the version gauge: %r" % lines)
    return lines[0]


def version_gets(fake):
    st, reqs = fake.ctl("GET", "/requests")
    check(st == 200, "control GET /requests")
    return [r for r in reqs if r["path"] == "/version"]


def test_webhook_reads_the_api_servers_version(env):
    """Served (a provider's "34+"): restart-pod refused naming 1.34 and
    where it came from; changed to 1.36 at the next refresh: injected;
    failing: the version read before stays, with a warning; back: read."""
    s = Setup(env)
    fake = fakeapi.launch(env.path("kube"), fixture="none", spawn=env.spawn)
    set_version(fake, "34+", "v1.34.4-eks-a1b2c3")
    wh = version_webhook(env, s, fake, "--kube-version-refresh", "1s")
    e = wh.wait_match("kube-version", timeout=20, minor=34)
    check(e["source"] == "server" and e["git_version"] == "v1.34.4-eks-a1b2c3", "event %r" % e)
    wait_until(lambda: request(s, wh, "GET", "/readyz")[0] == 200, 10, "/readyz 200")
    check(version_metric(s, wh).endswith('{source="server"} 34'), version_metric(s, wh))
    resp, ops = mutate(s, wh, "uid-v34", restart_pod_pod())
    check(ops is None, "restart-pod injected on 1.34: %r" % ops)
    warn = " ".join(resp.get("warnings", []))
    check("1.34" in warn and "restartPolicyRules" in warn and "/version" in warn,
          "warning %r" % warn)
    e = wh.wait_match("admission", uid="uid-v34")
    check(e["result"] == "skipped" and "from 1.36" in e["reason"], "log %r" % e)
    gets = version_gets(fake)
    check(gets and all(r["authorized"] and r["method"] == "GET" for r in gets), "requests %r" % gets)

    set_version(fake, "36", "v1.36.3")
    wh.wait_match("kube-version", timeout=15, minor=36, source="server")
    resp, ops = mutate(s, wh, "uid-v36", restart_pod_pod())
    check(ops and "RestartAllContainers" in json.dumps(ops), "restart-pod on 1.36: %r" % resp)

    st, out = fake.ctl("POST", "/faults", [{"path_regex": "^/version$", "status": 500}])
    check(st == 200, "faults: %s" % out)
    e = wh.wait_for(lambda evs: next((x for x in evs if x.get("event") == "kube-version" and
                                      x.get("level") == "warn"), None), 20, "a warning")
    check("stays" in e["msg"] and e["minor"] == 36, "warning %r" % e)
    check(version_metric(s, wh).endswith('{source="server"} 36'), version_metric(s, wh))
    check(request(s, wh, "GET", "/readyz")[0] == 200, "/readyz after a failure")
    resp, ops = mutate(s, wh, "uid-v36b", restart_pod_pod())
    check(ops, "restart-pod after a failed refresh: %r" % resp)

    fake.ctl("POST", "/faults/clear")
    set_version(fake, "35", "v1.35.4")
    wh.wait_match("kube-version", timeout=15, minor=35, source="server")


def test_webhook_version_unreachable_keeps_the_default(env):
    """No answer: /readyz 503 while waiting, then 1.36 assumed with a
    warning (ready); once the server answers, its version."""
    s = Setup(env)
    fake = fakeapi.launch(env.path("kube"), fixture="none", spawn=env.spawn)
    st, out = fake.ctl("POST", "/listener", {"up": False})
    check(st == 200, "listener down: %s" % out)
    set_version(fake, "34", "v1.34.4")
    wh = version_webhook(env, s, fake, "--kube-version-refresh", "2s")
    st, _, body = request(s, wh, "GET", "/readyz")
    check(st == 503 and b"version" in body, "/readyz before the version: %d %r" % (st, body))
    e = wh.wait_for(lambda evs: next((x for x in evs if x.get("event") == "kube-version" and
                                      x.get("level") == "warn"), None), 30, "a warning")
    check(e["minor"] == 36 and "assumed" in e["msg"], "warning %r" % e)
    check(request(s, wh, "GET", "/readyz")[0] == 200, "/readyz after the failure")
    check(version_metric(s, wh).endswith('{source="default"} 36'), version_metric(s, wh))
    resp, ops = mutate(s, wh, "uid-def", restart_pod_pod())
    check(ops, "restart-pod on the default 1.36: %r" % resp)
    st, out = fake.ctl("POST", "/listener", {"up": True})
    check(st == 200, "listener up: %s" % out)
    wh.wait_match("kube-version", timeout=30, minor=34, source="server")
    resp, ops = mutate(s, wh, "uid-34", restart_pod_pod())
    check(ops is None, "restart-pod once 1.34 is read: %r" % ops)


def test_webhook_kube_version_flag_overrides(env):
    """--kube-version: no GET /version at all; outside a cluster without
    --kube-api: one warning, 1.36, ready at once."""
    s = Setup(env)
    fake = fakeapi.launch(env.path("kube"), fixture="none", spawn=env.spawn)
    set_version(fake, "34", "v1.34.4")
    wh = version_webhook(env, s, fake, "--kube-version", "v1.35.2")
    e = wh.wait_match("kube-version", timeout=10, source="flag")
    check(e["minor"] == 35, "event %r" % e)
    check(version_metric(s, wh).endswith('{source="flag"} 35'), version_metric(s, wh))
    wh.quiet(1.5)
    check(not version_gets(fake), "GET /version with --kube-version: %r" % version_gets(fake))

    wh2 = start(env, s)
    e = wh2.wait_match("kube-version", timeout=10, minor=36)
    check(e["level"] == "warn" and "KUBERNETES_SERVICE_HOST" in e["error"], "event %r" % e)
    check(request(s, wh2, "GET", "/readyz")[0] == 200, "/readyz without a cluster")
    rc = env.run([env.binary, "webhook", "--tls-cert-file", s.cert_file, "--tls-key-file",
                  s.key_file, "--kube-version-refresh", "500ms"]).returncode
    check(rc == 2, "--kube-version-refresh 500ms: exit %d" % rc)
    rc = env.run([env.binary, "webhook", "--tls-cert-file", s.cert_file, "--tls-key-file",
                  s.key_file, "--kube-api", "http://127.0.0.1:1"]).returncode
    check(rc == 2, "--kube-api http://: exit %d" % rc)
