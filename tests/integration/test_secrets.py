"""Credentials in the http action's URL and headers never leave the agent
(issue 9 F10).

The agent runs the http action against a real failing endpoint on loopback
(tests/tools/reload_endpoint.py answering 500, or refusing connections),
with a password in the URL's userinfo, a token in its query and a bearer
token in a header. Neither secret may appear in its log (JSON and text
formats), in /status, in the pod's ReloadFailed Event (posted to the fake
API server, tests/lib/fakeapi.py) or in --print-config, while the messages
still say what failed (the endpoint, with the secrets shown as
<redacted>). The endpoint's own request log proves the secrets were sent.
"""
import json
import os
import signal
import subprocess

from tests.lib.proc import check, http_get, wait_until

from tests.lib import agent as te  # the Endpoint helper and volumes
from tests.lib import kube as tk  # the fake API server helpers

PASSWORD = "pw-5ecret-u1"
TOKEN = "tok-5ecret-q2"
BEARER = "hdr-5ecret-h3"
SECRETS = (PASSWORD, TOKEN, BEARER)


def secret_url(ep):
    base = ep.url.replace("http://", "http://bob:%s@" % PASSWORD)
    return base + "?token=%s&mode=fast" % TOKEN


def leaks(text):
    return [s for s in SECRETS if s in text]


def test_secrets_redacted_in_json_log_status_and_events(env):
    ep = te.Endpoint(env, "500")
    fake = tk.fake_for(env)
    pod = fake.info["pods"][0]
    vol = te.volume(env, {"app.conf": "v0\n"})
    a = tk.start(env, fake, vol, "--action", "http", "--http-url", secret_url(ep),
                 "--http-header", "Authorization: Bearer %s" % BEARER,
                 "--listen", "127.0.0.1:0", "--retry-initial", "10s", "--retry-max", "10s",
                 wait_reconcile=False)
    tk.update(env, vol, {"app.conf": "v1\n"})
    ev = te.wait_action(a, action="http", result="failure")
    # the request really carried the secrets
    req = wait_until(lambda: ep.requests(), 10, "the request at the endpoint")[0]
    check(TOKEN in req["path"] and BEARER in req["headers"].get("authorization", ""),
          "the endpoint did not get the credentials: %r" % req)
    check("<redacted>" in ev["error"] and "unexpected status 500" in ev["error"],
          "the error should still say what failed: %r" % ev["error"])
    check("token=<redacted>" in ev["error"] and "mode=<redacted>" in ev["error"],
          "query names kept, values redacted: %r" % ev["error"])
    base = "http://127.0.0.1:%d" % a.of("ready")[0]["port"]
    st, body = http_get(base + "/status")
    check(st == 200, "/status %d" % st)
    last_error = json.loads(body).get("last_error", "")
    check("unexpected status 500" in last_error, "/status last_error %r" % last_error)
    check(not leaks(body.decode()), "/status leaks %r: %s" % (leaks(body.decode()), body))
    failed = tk.wait_kube_event(fake, "ReloadFailed", "Pod", pod)
    msg = failed[0]["message"]
    check("<redacted>" in msg and not leaks(msg), "ReloadFailed Event message %r" % msg)
    rc = a.stop()
    check(rc == 0, "exit status %r" % rc)
    with a.cond:
        text = "\n".join(a.lines)
    check(not leaks(text), "the JSON log leaks %r" % leaks(text))


def test_secrets_redacted_in_text_log_on_connect_failure(env):
    ep = te.Endpoint(env, "refuse")
    vol = te.volume(env, {"app.conf": "v0\n"})
    log = env.path("agent.log")
    with open(log, "wb") as f:
        p = env.spawn([env.binary, "run", "--log-format", "text", "--watch", vol, "--debounce",
                       "50ms", "--resync", "0", "--action", "http", "--http-url", secret_url(ep),
                       "--http-header", "Authorization: Bearer %s" % BEARER, "--retry-initial",
                       "10s", "--retry-max", "10s"], stdin=subprocess.DEVNULL, stderr=f,
                      stdout=subprocess.DEVNULL)

    def text():
        with open(log, "rb") as f:
            return f.read().decode("utf-8", "replace")
    wait_until(lambda: "watching" in text(), 15, "the agent to be ready")
    te.update(env, vol, {"app.conf": "v1\n"})
    wait_until(lambda: "http failed" in text(), 15, "the http action to fail")
    p.send_signal(signal.SIGTERM)  # our own process, by PID
    rc = p.wait(10)
    check(rc == 0, "exit status %r" % rc)
    t = text()
    line = [l for l in t.splitlines() if "http failed" in l][0]
    check("<redacted>" in line and "127.0.0.1" in line, "the failure line %r" % line)
    check(not leaks(t), "the text log leaks %r:\n%s" % (leaks(t), t))


def test_secrets_redacted_in_print_config(env):
    vol = env.path("vol")
    os.mkdir(vol)
    url = "http://bob:%s@127.0.0.1:1/-/reload?token=%s" % (PASSWORD, TOKEN)
    r = env.run([env.binary, "run", "--watch", vol, "--action", "http", "--http-url", url,
                 "--http-header", "Authorization: Bearer %s" % BEARER, "--http-header",
                 "X-Plain: visible-name-only", "--print-config"], timeout=20)
    out = r.stdout.decode()
    check(r.returncode == 0, "--print-config exit %r: %s" % (r.returncode, r.stderr))
    check(not leaks(out) and "visible-name-only" not in out, "--print-config leaks:\n%s" % out)
    urls = [l for l in out.splitlines() if l.startswith("http-url")]
    check(urls and "http://<redacted>@127.0.0.1:1/-/reload?token=<redacted>" in urls[0],
          "http-url line %r" % urls)
    hdrs = [l for l in out.splitlines() if l.startswith("http-header")]
    check(hdrs and "Authorization: <redacted>,X-Plain: <redacted>" in hdrs[0],
          "http-header line %r" % hdrs)
