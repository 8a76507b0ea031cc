"""`reload-agent webhook certs` against the fake API server (tests/lib/fakeapi.py,
a test double of docs/kubernetes-api.md: real TLS on loopback, bearer token,
Secrets get/create with 409 AlreadyExists, MutatingWebhookConfigurations
get/patch with RFC 6902 test ops).

What the command did is read back from the fake (the recorded requests, the
stored Secret and configuration), and the stored certificate is checked with
tools that are not ours: `openssl verify`, `openssl x509 -text`, and a real
TLS handshake through Python's ssl module with the CA from the Secret.
"""
import base64
import os
import ssl
import socket
import threading
import time

from tests.lib import fakeapi
from tests.lib.proc import check, wait_until


NS = "reload-agent"
SVC = "reload-agent-webhook"
SECRET = "reload-agent-webhook-tls"
MWC = "reload-agent"
MWC_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/" + MWC
SECRET_PATH = "/api/v1/namespaces/%s/secrets/%s" % (NS, SECRET)
SECRETS_PATH = "/api/v1/namespaces/%s/secrets" % NS
NAMES = [SVC, "%s.%s" % (SVC, NS), "%s.%s.svc" % (SVC, NS), "%s.%s.svc.cluster.local" % (SVC, NS)]


def mwc_object(bundles):
    """A configuration with one webhook per entry of bundles (None = no caBundle)."""
    hooks = []
    for i, b in enumerate(bundles):
        cc = {"service": {"name": SVC, "namespace": NS, "path": "/mutate", "port": 443}}
        if b is not None:
            cc["caBundle"] = b
        hooks.append({"name": "inject%d.reload-agent.io" % i, "clientConfig": cc,
                      "sideEffects": "None", "admissionReviewVersions": ["v1"],
                      "failurePolicy": "Ignore"})
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": MWC}, "webhooks": hooks}


def start(env, bundles=(None,)):
    fake = fakeapi.launch(env.path("kube"), fixture="none", namespace=NS, spawn=env.spawn)
    if bundles is not None:
        put(fake, "mutatingwebhookconfigurations", mwc_object(list(bundles)))
    return fake


def put(fake, resource, obj):
    st, out = fake.ctl("POST", "/object", {"resource": resource, "object": obj})
    check(st == 200, "control POST /object: %s" % out)
    return out


def get(fake, resource, name):
    st, out = fake.ctl("GET", "/object?resource=%s&name=%s" % (resource, name))
    return out if st == 200 else None


def requests(fake):
    st, out = fake.ctl("GET", "/requests")
    check(st == 200, "control GET /requests")
    return out


def calls(fake):
    return [(r["method"], r["path"], r["status"]) for r in requests(fake)]


def faults(fake, *specs):
    st, out = fake.ctl("POST", "/faults", list(specs))
    check(st == 200, "faults: %s" % out)


def certs(env, fake, *extra, service=SVC, mwc=MWC, timeout=60):
    args = [env.binary, "webhook", "certs", "--kube-api", fake.url,
            "--kube-token-file", fake.info["token_file"], "--kube-ca-file", fake.info["ca"],
            "--namespace", NS, "--secret-name", SECRET, "--service-name", service]
    if mwc:
        args += ["--webhook-config", mwc]
    r = env.run(args + list(extra), timeout=timeout)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def secret_files(env, fake, tag="s"):
    """Writes the stored Secret's three keys to files; returns their paths."""
    sec = get(fake, "secrets", SECRET)
    check(sec is not None, "the Secret was not stored")
    out = {}
    for k in ("ca.crt", "tls.crt", "tls.key"):
        p = env.path("%s-%s" % (tag, k))
        with open(p, "wb") as f:
            f.write(base64.b64decode(sec["data"][k], validate=True))
        out[k] = p
    return sec, out


def openssl(env, *args):
    r = env.run(["openssl"] + list(args))
    check(r.returncode == 0, "openssl %s: %s" % (" ".join(args), r.stderr.decode(errors="replace")))
    return r.stdout.decode()


def tls_handshake(files, server_name):
    """A real TLS 1.2+ handshake: a server with tls.crt/tls.key on loopback,
    a client that trusts only ca.crt and checks server_name. Returns the
    client's error, or None."""
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(files["tls.crt"], files["tls.key"])
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    lsock.settimeout(10)

    def serve():
        try:
            c, _ = lsock.accept()
            c.settimeout(10)
            with sctx.wrap_socket(c, server_side=True) as s:
                s.sendall(b"ok")
        except (OSError, ssl.SSLError):
            pass
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    cctx = ssl.create_default_context(cafile=files["ca.crt"])
    cctx.minimum_version = ssl.TLSVersion.TLSv1_2
    err = None
    try:
        with socket.create_connection(lsock.getsockname(), timeout=10) as raw:
            with cctx.wrap_socket(raw, server_hostname=server_name) as s:
                check(s.recv(2) == b"ok", "no data over TLS")
    except (OSError, ssl.SSLError) as e:
        err = str(e)
    t.join(10)
    lsock.close()
    return err


def bundle_of(fake):
    return [h["clientConfig"].get("caBundle") for h in get(fake, "mutatingwebhookconfigurations",
                                                          MWC)["webhooks"]]


# ---- tests ----

def test_certs_creates_secret_and_patches_cabundle(env):
    fake = start(env, [None, base64.b64encode(b"an old CA").decode()])
    rc, _, err = certs(env, fake)
    check(rc == 0, "exit %d: %s" % (rc, err))
    c = calls(fake)
    check(c == [("GET", SECRET_PATH, 404), ("POST", SECRETS_PATH, 201), ("GET", MWC_PATH, 200),
                ("PATCH", MWC_PATH, 200)], "requests: %s" % c)
    post = requests(fake)[1]
    check(post["content_type"] == "application/json", post["content_type"])
    sec, files = secret_files(env, fake)
    check(sec["type"] == "kubernetes.io/tls", "type %s" % sec["type"])
    check(sorted(sec["data"]) == ["ca.crt", "tls.crt", "tls.key"], sorted(sec["data"]))
    check(sec["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "reload-agent-webhook-certs",
          sec["metadata"])
    # the PATCH: a JSON patch, test op on the resourceVersion first, then one
    # add per webhook that differed (both here)
    patch = requests(fake)[3]
    check(patch["content_type"] == "application/json-patch+json", patch["content_type"])
    ops = patch["body"]
    check(ops[0]["op"] == "test" and ops[0]["path"] == "/metadata/resourceVersion", ops)
    check([o["path"] for o in ops[1:]] == ["/webhooks/0/clientConfig/caBundle",
                                           "/webhooks/1/clientConfig/caBundle"], ops)
    check(bundle_of(fake) == [sec["data"]["ca.crt"]] * 2, "caBundle %s" % bundle_of(fake))
    # independent checks of the stored certificate
    out = openssl(env, "verify", "-CAfile", files["ca.crt"], "-purpose", "sslserver",
                  files["tls.crt"])
    check(out.strip().endswith(": OK"), out)
    text = openssl(env, "x509", "-in", files["tls.crt"], "-noout", "-text")
    for n in NAMES:
        check("DNS:%s" % n in text, "SAN %s missing:\n%s" % (n, text))
    for want in ("TLS Web Server Authentication", "CA:FALSE", "Digital Signature",
                 "prime256v1", "ecdsa-with-SHA256", "Subject: CN = %s.%s.svc" % (SVC, NS)):
        check(want in text, "%r missing in the serving certificate:\n%s" % (want, text))
    catext = openssl(env, "x509", "-in", files["ca.crt"], "-noout", "-text")
    for want in ("CA:TRUE, pathlen:0", "Certificate Sign, CRL Sign", "prime256v1"):
        check(want in catext, "%r missing in the CA:\n%s" % (want, catext))
    check(openssl(env, "pkey", "-in", files["tls.key"], "-pubout") ==
          openssl(env, "x509", "-in", files["tls.crt"], "-noout", "-pubkey"),
          "tls.key is not the key of tls.crt")
    # default validity: 10 years for both
    end = openssl(env, "x509", "-in", files["tls.crt"], "-noout", "-checkend",
                  str(9 * 365 * 86400))
    check("will not expire" in end, end)
    # a real handshake as the API server would make it
    check(tls_handshake(files, "%s.%s.svc" % (SVC, NS)) is None, "TLS handshake failed")
    e = tls_handshake(files, "other.%s.svc" % NS)
    check(e and "match" in e, "a wrong host name was accepted: %s" % e)


def test_certs_second_run_keeps_secret_and_writes_nothing(env):
    fake = start(env)
    rc, _, err = certs(env, fake)
    check(rc == 0, err)
    sec1 = get(fake, "secrets", SECRET)
    mwc1 = get(fake, "mutatingwebhookconfigurations", MWC)
    fake.ctl("POST", "/requests/clear")
    rc, _, err = certs(env, fake)
    check(rc == 0, err)
    c = calls(fake)
    check(c == [("GET", SECRET_PATH, 200), ("GET", MWC_PATH, 200)],
          "a second run must only read: %s" % c)
    check(get(fake, "secrets", SECRET) == sec1, "the Secret changed")
    mwc2 = get(fake, "mutatingwebhookconfigurations", MWC)
    check(mwc2["metadata"]["resourceVersion"] == mwc1["metadata"]["resourceVersion"], "MWC written")
    check("kept" in err and "nothing written" in err, err)


def test_certs_409_race_uses_the_stored_secret(env):
    fake = start(env)
    rc, _, err = certs(env, fake)
    check(rc == 0, err)
    winner = get(fake, "secrets", SECRET)
    put(fake, "mutatingwebhookconfigurations", mwc_object([None]))
    fake.ctl("POST", "/requests/clear")
    # the GET does not see the Secret another run is creating; the POST then
    # meets it: 409 AlreadyExists from the fake's own store
    faults(fake, {"method": "GET", "path_regex": "/secrets/", "status": 404, "count": 1})
    rc, _, err = certs(env, fake)
    check(rc == 0, "exit %d: %s" % (rc, err))
    c = calls(fake)
    check(c == [("GET", SECRET_PATH, 404), ("POST", SECRETS_PATH, 409), ("GET", SECRET_PATH, 200),
                ("GET", MWC_PATH, 200), ("PATCH", MWC_PATH, 200)], "requests: %s" % c)
    check(get(fake, "secrets", SECRET) == winner, "the stored Secret was replaced")
    check(bundle_of(fake) == [winner["data"]["ca.crt"]],
          "caBundle is not the winner's CA: %s" % bundle_of(fake))
    check("409 AlreadyExists" in err, err)


def test_certs_patches_only_the_differing_webhooks(env):
    fake = start(env, [None, None, None])
    rc, _, err = certs(env, fake)
    check(rc == 0, err)
    ca = get(fake, "secrets", SECRET)["data"]["ca.crt"]
    mwc = get(fake, "mutatingwebhookconfigurations", MWC)
    mwc["webhooks"][1]["clientConfig"]["caBundle"] = base64.b64encode(b"stale").decode()
    put(fake, "mutatingwebhookconfigurations", mwc)
    fake.ctl("POST", "/requests/clear")
    rc, _, err = certs(env, fake)
    check(rc == 0, err)
    ops = [r for r in requests(fake) if r["method"] == "PATCH"][0]["body"]
    check([o["op"] for o in ops] == ["test", "add"], ops)
    check(ops[1]["path"] == "/webhooks/1/clientConfig/caBundle" and ops[1]["value"] == ca, ops)
    after = get(fake, "mutatingwebhookconfigurations", MWC)
    check(bundle_of(fake) == [ca] * 3, bundle_of(fake))
    # nothing else of the configuration changed
    for i in range(3):
        mwc["webhooks"][i]["clientConfig"]["caBundle"] = ca
    for k in ("webhooks",):
        check(after[k] == mwc[k], "%s changed beyond caBundle" % k)


def test_certs_lost_update_is_retried(env):
    """The configuration changes between the GET and the PATCH (a GitOps tool
    re-applies it without caBundle): the test op fails (422), the command reads
    it again and patches the new version."""
    fake = start(env, [None, None])
    rc, _, err = certs(env, fake)
    check(rc == 0, err)
    put(fake, "mutatingwebhookconfigurations", mwc_object([None, None]))
    fake.ctl("POST", "/requests/clear")
    faults(fake, {"method": "PATCH", "delay_ms": 1500, "count": 1})
    res = {}
    t = threading.Thread(target=lambda: res.update(r=certs(env, fake)), daemon=True)
    t.start()
    wait_until(lambda: any(r["method"] == "PATCH" for r in requests(fake)), 20, "the first PATCH")
    # while that PATCH waits: a new version, with a third webhook
    put(fake, "mutatingwebhookconfigurations", mwc_object([None, None, None]))
    t.join(60)
    check("r" in res, "the command did not finish")
    rc, _, err = res["r"]
    check(rc == 0, "exit %d: %s" % (rc, err))
    c = calls(fake)
    check(c == [("GET", SECRET_PATH, 200), ("GET", MWC_PATH, 200), ("PATCH", MWC_PATH, 422),
                ("GET", MWC_PATH, 200), ("PATCH", MWC_PATH, 200)], "requests: %s" % c)
    ca = get(fake, "secrets", SECRET)["data"]["ca.crt"]
    check(bundle_of(fake) == [ca] * 3, "caBundle %s" % bundle_of(fake))
    # a plain 409 is handled the same way
    put(fake, "mutatingwebhookconfigurations", mwc_object([None]))
    faults(fake, {"method": "PATCH", "status": 409, "count": 1})
    rc, _, err = certs(env, fake)
    check(rc == 0 and bundle_of(fake) == [ca], err)


def test_certs_retries_429_and_5xx(env):
    fake = start(env)
    faults(fake, {"method": "GET", "path_regex": "/secrets/", "status": 429, "retry_after": 0,
                  "count": 2},
           {"method": "POST", "status": 500, "count": 2},
           {"method": "PATCH", "status": 502, "count": 1})
    rc, _, err = certs(env, fake)
    check(rc == 0, "exit %d: %s" % (rc, err))
    c = calls(fake)
    check(c == [("GET", SECRET_PATH, 429), ("GET", SECRET_PATH, 429), ("GET", SECRET_PATH, 404),
                ("POST", SECRETS_PATH, 500), ("POST", SECRETS_PATH, 500),
                ("POST", SECRETS_PATH, 201), ("GET", MWC_PATH, 200), ("PATCH", MWC_PATH, 502),
                ("PATCH", MWC_PATH, 200)], "requests: %s" % c)
    # a server that keeps failing: a bounded number of tries, then exit 1
    fake.ctl("POST", "/requests/clear")
    faults(fake, {"method": "GET", "status": 500})
    rc, _, err = certs(env, fake)
    check(rc == 1, "exit %d" % rc)
    n = len(calls(fake))
    check(2 <= n <= 8, "%d requests" % n)
    check("cannot get Secret %s/%s: HTTP 500" % (NS, SECRET) in err, err)


def test_certs_retries_a_request_that_hangs(env):
    """Issue 16.16: an API request that gets no answer (the fake holds it
    past the client's 10 s timeout) is tried again, as the docs promise for
    connection failures; the run then succeeds."""
    fake = start(env)
    faults(fake, {"method": "GET", "path_regex": "/secrets/", "delay_ms": 12000, "count": 1})
    rc, _, err = certs(env, fake, timeout=90)
    check(rc == 0, "exit %d: %s" % (rc, err))
    check("no answer" in err and "retrying" in err, "no retry logged: %s" % err)
    c = calls(fake)
    check([x[:2] for x in c[:2]] == [("GET", SECRET_PATH)] * 2, "requests: %s" % c)
    check(bundle_of(fake) == [get(fake, "secrets", SECRET)["data"]["ca.crt"]], "caBundle not written")


def test_certs_rbac_denial_is_a_clear_error(env):
    fake = start(env)
    faults(fake, {"method": "POST", "path_regex": "/secrets$", "status": 403, "count": 1})
    rc, _, err = certs(env, fake)
    check(rc == 1, "exit %d: %s" % (rc, err))
    want = ('cannot create Secret %s/%s: HTTP 403: secrets is forbidden: User '
            '"system:serviceaccount:%s:default" cannot create resource "secrets"' % (NS, SECRET, NS))
    check(want in err, "stderr lacks %r:\n%s" % (want, err))
    check("manifests/webhook/certgen/rbac.yaml" in err and "manifests/rbac.yaml" not in err, err)
    check(get(fake, "secrets", SECRET) is None, "a Secret was stored")
    check(bundle_of(fake) == [None], "the configuration was written")
    # the ClusterRole part: patching the configuration is denied
    faults(fake, {"method": "PATCH", "status": 403, "count": 1})
    rc, _, err = certs(env, fake)
    check(rc == 1, "exit %d" % rc)
    want = ('cannot patch MutatingWebhookConfiguration %s: HTTP 403: '
            'mutatingwebhookconfigurations.admissionregistration.k8s.io "%s" is forbidden' % (MWC, MWC))
    check(want in err and "at the cluster scope" in err, err)
    # a missing configuration
    rc, _, err = certs(env, fake, mwc="not-there")
    check(rc == 1, "exit %d" % rc)
    check('cannot get MutatingWebhookConfiguration not-there: HTTP 404: '
          'mutatingwebhookconfigurations.admissionregistration.k8s.io "not-there" not found' in err,
          err)


def test_certs_unusable_existing_secret_is_refused(env):
    fake = start(env)
    rc, _, err = certs(env, fake)
    check(rc == 0, err)
    put(fake, "mutatingwebhookconfigurations", mwc_object([None]))
    fake.ctl("POST", "/requests/clear")
    # the Secret was made for another Service
    rc, _, err = certs(env, fake, service="other")
    check(rc == 1, "exit %d" % rc)
    check("Secret %s/%s exists but cannot serve the webhook: tls.crt is not valid for other" %
          (NS, SECRET) in err and "delete it" in err, err)
    check(all(m == "GET" for m, _, _ in calls(fake)), "something was written: %s" % calls(fake))
    # a Secret that is not a TLS bundle
    sec = get(fake, "secrets", SECRET)
    del sec["data"]["ca.crt"]
    put(fake, "secrets", sec)
    rc, _, err = certs(env, fake)
    check(rc == 1 and "it has no data.ca.crt" in err, err)
    sec["data"]["ca.crt"] = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nAA\n").decode()
    put(fake, "secrets", sec)
    rc, _, err = certs(env, fake)
    check(rc == 1 and "ca.crt holds no readable PEM certificate" in err, err)
    check(bundle_of(fake) == [None], "caBundle written from a bad Secret")


def pem_certs(b64):
    """The certificates of a base64 caBundle, each as its PEM block."""
    text = base64.b64decode(b64).decode()
    end = "-----END CERTIFICATE-----"
    return [b.strip() + "\n" + end + "\n" for b in text.split(end) if b.strip()]


def renew(env, fake, *extra):
    """Deletes the Secret (the documented renewal) and runs the job again;
    returns the old and new CA (base64) and the job's stderr."""
    old = get(fake, "secrets", SECRET)["data"]["ca.crt"]
    st, out = fake.ctl("POST", "/object/delete", {"resource": "secrets", "name": SECRET})
    check(st == 200, "control POST /object/delete: %s" % out)
    rc, _, err = certs(env, fake, *extra)
    check(rc == 0, "exit %d: %s" % (rc, err))
    new = get(fake, "secrets", SECRET)["data"]["ca.crt"]
    check(new != old, "the renewal made no new CA")
    return old, new, err


def test_certs_renewal_keeps_the_previous_ca(env):
    """A renewal writes the new CA first and keeps the previous one behind
    it, so a webhook replica still serving the old certificate (its Secret
    volume not yet refreshed) verifies; a real handshake checks both
    serving certificates against the bundle. The next renewal drops the
    oldest: two CAs at most."""
    fake = start(env)
    rc, _, err = certs(env, fake)
    check(rc == 0, err)
    _, old_files = secret_files(env, fake, "old")
    old, new, err = renew(env, fake)
    check(pem_certs(bundle_of(fake)[0]) == pem_certs(new) + pem_certs(old),
          "caBundle after the renewal is not the new CA then the old one")
    check("the previous CA stays" in err, err)
    _, new_files = secret_files(env, fake, "new")
    bundle = env.path("bundle.pem")
    with open(bundle, "wb") as f:
        f.write(base64.b64decode(bundle_of(fake)[0]))
    for files in (old_files, new_files):
        check(tls_handshake(dict(files, **{"ca.crt": bundle}), "%s.%s.svc" % (SVC, NS)) is None,
              "a serving certificate does not verify against the renewed caBundle")
    fake.ctl("POST", "/requests/clear")
    rc, _, err = certs(env, fake)
    check(rc == 0 and calls(fake) == [("GET", SECRET_PATH, 200), ("GET", MWC_PATH, 200)],
          "the overlapped bundle is current, yet: %s %s" % (calls(fake), err))
    _, newer, _ = renew(env, fake)
    check(pem_certs(bundle_of(fake)[0]) == pem_certs(newer) + pem_certs(new),
          "the second renewal did not drop the oldest CA")


def test_certs_renewal_drop_leaves_the_new_ca_alone(env):
    """--previous-ca drop (after a key compromise): the new CA alone; run on
    a bundle kept earlier, it removes the previous CA."""
    fake = start(env)
    rc, _, err = certs(env, fake)
    check(rc == 0, err)
    _, new, _ = renew(env, fake, "--previous-ca", "drop")
    check(pem_certs(bundle_of(fake)[0]) == pem_certs(new), "drop kept another CA")
    _, newer, _ = renew(env, fake)
    check(len(pem_certs(bundle_of(fake)[0])) == 2, "keep did not keep the previous CA")
    rc, _, err = certs(env, fake, "--previous-ca", "drop")
    check(rc == 0 and pem_certs(bundle_of(fake)[0]) == pem_certs(newer),
          "drop on a kept bundle left %d CAs: %s" % (len(pem_certs(bundle_of(fake)[0])), err))


def test_certs_validity_and_secret_only(env):
    fake = start(env, None)
    rc, _, err = certs(env, fake, "--validity", "2h", mwc=None)
    check(rc == 0, err)
    check([m for m, _, _ in calls(fake)] == ["GET", "POST"], calls(fake))
    _, files = secret_files(env, fake)
    for f in ("ca.crt", "tls.crt"):
        end = openssl(env, "x509", "-in", files[f], "-noout", "-enddate").strip()
        na = time.mktime(time.strptime(end.split("=", 1)[1], "%b %d %H:%M:%S %Y GMT")) - \
            time.timezone
        check(abs(na - (time.time() + 7200)) < 600, "%s notAfter %s is not now + 2h" % (f, end))


def test_certs_usage_errors(env):
    b = env.binary
    r = env.run([b, "webhook", "certs", "--help"])
    out = r.stdout.decode()
    check(r.returncode == 0 and "--secret-name" in out and "--webhook-config" in out, out)
    for args, want in (([], "--secret-name is required"),
                       (["--secret-name", "s"], "--service-name is required"),
                       (["--secret-name", "s", "--service-name", "Web"], "not a valid Service"),
                       (["--secret-name", "s", "--service-name", "w", "--validity", "5"],
                        "--validity"),
                       (["--secret-name", "s", "--service-name", "w", "--validity", "1m"],
                        "between 1h and 876000h"),
                       (["--secret-name", "s", "--service-name", "w", "--bogus", "1"],
                        "unknown flag --bogus"),
                       (["--secret-name", "s", "--service-name", "w", "--previous-ca", "both"],
                        "--previous-ca \"both\": must be keep or drop"),
                       (["--secret-name"], "needs a value")):
        r = env.run([b, "webhook", "certs"] + args)
        err = r.stderr.decode()
        check(r.returncode == 2 and want in err, "%s: exit %d, %s" % (args, r.returncode, err))
    # outside a cluster without --kube-api: exit 1 and why
    e = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    r = env.run([b, "webhook", "certs", "--secret-name", "s", "--service-name", "w",
                 "--namespace", "ns"], env=e)
    check(r.returncode == 1 and "KUBERNETES_SERVICE_HOST" in r.stderr.decode(), r.stderr)
