"""`reload-agent webhook`: the drain before the graceful stop (--shutdown-delay).

During a rolling update the API server still sends requests to a webhook pod
for a moment after its SIGTERM (the endpoint's removal propagates
asynchronously), and reuses the idle keep-alive connections it has to it; a
POST sent on a connection the server has just closed fails ("write: broken
pipe"), Go does not retry a POST, and with failurePolicy Fail the pod is
refused. So for --shutdown-delay after SIGTERM the webhook answers /readyz
503, keeps accepting, serves every request with "Connection: close" (on
connections that were idle at SIGTERM too), and only then stops as before.
Real process, real TLS on 127.0.0.1, the certificates and reviews of
test_webhook.py.
"""
import http.client
import json
import signal
import subprocess
import time

from tests.integration.test_webhook import (HOST, Setup, Webhook, app_pod, conn, mutate, raw_tls,
                                            read_reply, request, review)
from tests.lib.proc import TestFailure, check


def start_default(env, s, *extra):
    """The webhook with the default --shutdown-delay (test_webhook.start
    sets 0s)."""
    return Webhook(env, ["--tls-cert-file", s.cert_file, "--tls-key-file", s.key_file] +
                   list(extra))


def exit_within(wh, secs, what):
    try:
        rc = wh.proc.wait(secs)
    except subprocess.TimeoutExpired:
        raise TestFailure("still running %.1f s after %s" % (secs, what))
    check(rc == 0, "exit status %r" % rc)


def test_webhook_drain_serves_idle_keepalive(env):
    """SIGTERM with an idle keep-alive connection open, the default delay
    (5 s): a review sent on that connection is answered 200 with
    "Connection: close" (the old code had closed it: broken pipe); a new
    connection is accepted, /readyz answers 503 and a review 200, each reply
    closing its connection; then the process exits 0 (at the delay's end:
    nothing is in flight)."""
    s = Setup(env)
    wh = start_default(env, s, "--shutdown-timeout", "5s")
    idle = conn(s, wh)
    idle.connect()
    mutate(s, wh, "before-sigterm", app_pod(), c=idle)  # the connection is now idle, kept
    t0 = time.monotonic()
    wh.proc.send_signal(signal.SIGTERM)
    wh.wait_event("shutdown", timeout=5)
    # (b) the API server reuses its idle connection
    try:
        st, hdrs, body = request(s, wh, "POST", "/mutate",
                                 json.dumps(review("on-idle", app_pod())), c=idle)
    except (http.client.HTTPException, OSError) as e:
        raise TestFailure("a review on the idle keep-alive connection after SIGTERM failed: "
                          "%s: %s" % (type(e).__name__, e))
    check(st == 200, "review on the idle connection: %d %r" % (st, body[:200]))
    check(hdrs.get("Connection") == "close", "no Connection: close on the drain's reply: %r" % hdrs)
    check(json.loads(body)["response"]["uid"] == "on-idle", "answer %r" % body[:200])
    idle.close()
    ev = wh.wait_event("draining", timeout=5)[0]
    check(ev.get("delay_ms") == 5000, "draining record %r" % ev)
    # (a) a readiness probe on a new connection: 503, and the connection ends
    sk = raw_tls(s, wh)
    sk.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
    reply = read_reply(sk)
    sk.close()
    check(reply.startswith(b"HTTP/1.1 503"), "readyz while draining: %r" % reply[:80])
    check(b"\r\nConnection: close\r\n" in reply, "readyz reply keeps the connection: %r" % reply)
    # (c) a review on a new connection is accepted and answered
    c = conn(s, wh)
    resp, ops = mutate(s, wh, "new-conn", app_pod(), c=c)
    check(ops, "no patch while draining: %r" % resp)
    c.close()
    check(wh.proc.poll() is None, "exited during the delay")
    # (d) after the delay it stops as before: exit 0 within delay + timeout
    exit_within(wh, 5 + 5 + 3 - (time.monotonic() - t0), "SIGTERM (5 s delay, 5 s timeout)")
    took = time.monotonic() - t0
    check(took >= 4.5, "exited %.2f s after SIGTERM, before the 5 s delay" % took)
    wh.t.join(5)
    check(wh.of("stopped"), "no stopped event")


def test_webhook_drain_zero_delay_closes_idle_at_once(env):
    """--shutdown-delay 0s is the stop without a drain: an idle keep-alive
    connection is closed at once, new connections are refused, exit 0."""
    s = Setup(env)
    wh = start_default(env, s, "--shutdown-delay", "0s")
    sk = raw_tls(s, wh, timeout=5)
    sk.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    first = b""
    for _ in range(50):  # the whole first reply (bounded)
        first += sk.recv(4096)
        if first.endswith(b"ok\n"):
            break
    check(b"Connection: keep-alive" in first, "first reply %r" % first)
    t0 = time.monotonic()
    wh.proc.send_signal(signal.SIGTERM)
    rest = read_reply(sk)  # EOF (or a TLS error): the server closed it
    took = time.monotonic() - t0
    sk.close()
    check(rest == b"" and took < 3, "idle connection: %r after %.2f s" % (rest[:80], took))
    exit_within(wh, 5, "SIGTERM with --shutdown-delay 0s")
    wh.t.join(5)
    check(not wh.of("draining"), "a draining record with a 0s delay")


def test_webhook_drain_second_signal_skips_delay(env):
    """A second signal during a long delay (30 s) ends it: the graceful
    stop runs at once and the process exits 0."""
    s = Setup(env)
    wh = start_default(env, s, "--shutdown-delay", "30s")
    t0 = time.monotonic()
    wh.proc.send_signal(signal.SIGTERM)
    check(wh.wait_event("draining", timeout=5)[0].get("delay_ms") == 30000, "draining record")
    st, hdrs, _ = request(s, wh, "GET", "/readyz", ctype=None)
    check(st == 503 and hdrs.get("Connection") == "close", "readyz while draining: %d %r" %
          (st, hdrs))
    wh.proc.send_signal(signal.SIGINT)
    exit_within(wh, 5, "a second signal during a 30 s delay")
    check(time.monotonic() - t0 < 10, "the second signal did not skip the delay")
    wh.t.join(5)
    check(wh.of("stopped"), "no stopped event")


def test_webhook_drain_bad_flag(env):
    s = Setup(env)
    for bad in ("5", "-1s", "soon", ""):
        r = env.run([env.binary, "webhook", "--tls-cert-file", s.cert_file, "--tls-key-file",
                     s.key_file, "--listen", HOST + ":0", "--shutdown-delay", bad], timeout=20)
        out = r.stdout.decode() + r.stderr.decode()
        check(r.returncode == 2 and "--shutdown-delay" in out,
              "--shutdown-delay %r: exit %d, %r (want 2 naming the flag)" % (bad, r.returncode,
                                                                             out))
    r = env.run([env.binary, "webhook", "--help"], timeout=20)
    check(r.returncode == 0 and "--shutdown-delay" in r.stdout.decode() + r.stderr.decode(),
          "--help lacks --shutdown-delay")
