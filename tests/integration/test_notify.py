"""Notifications (issue 29 item 2, docs/notifications.md) with real HTTP:
the agent on kubelet-layout volumes (build/tools/awsim) posts to a real
receiver on 127.0.0.1 (tests/lib/notifysink.py, HTTP or HTTPS with a test
CA made by openssl), which checks each format's JSON shape and answers as
the test says: ok, failing, or stuck. What happened is read back from the
receiver, from the agent's log and from its /metrics.
"""
import os
import re
import threading
import time

from tests.lib.agent import update, volume
from tests.lib.agent import start as start_agent
from tests.lib.notifysink import Sink
from tests.lib.proc import check, free_port, http_get, wait_until
from tests.lib.webhook import make_certs

SECRET = "/services/T0AAA/B0BBB/S3cr3tT0ken"


def start(env, vol, sink_url, *args):
    port = free_port()
    a = start_agent(env, vol, "--action", "exec", "--exec-command", "true", "--pod-name", "web-1",
                    "--namespace", "shop", "--listen", "127.0.0.1:%d" % port,
                    "--notify-url", sink_url, *args)
    a.metrics_url = "http://127.0.0.1:%d/metrics" % port
    return a


def metric(a, name, labels=""):
    _, body = http_get(a.metrics_url)
    m = re.search(r"^%s%s (\d+)$" % (re.escape(name), re.escape(labels)), body.decode(), re.M)
    return int(m.group(1)) if m else None


def no_secret(env, a):
    """The URL's secret path is in no log line."""
    for line in a.lines:
        check("S3cr3tT0ken" not in line and "B0BBB" not in line, "the URL leaked: %s" % line)


def test_notify_json(env):
    sink = Sink(env, SECRET)
    vol = volume(env, {"app.conf": "v0\n", "other": "x\n"})
    old = env.hash_of(vol)
    a = start(env, vol, sink.url)
    check(metric(a, "reload_agent_notifications_total", '{result="sent"}') == 0,
          "the notification families show at zero")
    new = update(env, vol, {"app.conf": "v1\n", "other": "x\n"})
    r = sink.wait_for(1)[0]
    check(r["path"] == SECRET, "posted to %s" % r["path"])
    check(r["headers"].get("content-type") == "application/json", "headers %r" % r["headers"])
    b = r["json"]
    want = {"source": "reload-agent", "event": "reload", "result": "success", "action": "exec",
            "pod": "web-1", "namespace": "shop", "files": [vol + "/app.conf"], "oldHash": old,
            "newHash": new, "attempt": 1}
    for k, v in want.items():
        check(b.get(k) == v, "%s: %r, want %r (body %r)" % (k, b.get(k), v, b))
    check(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", b.get("time", "")), "time %r" % b)
    wait_until(lambda: metric(a, "reload_agent_notifications_total", '{result="sent"}') == 1, 5,
               "sent counted")
    no_secret(env, a)


def test_notify_failure_and_formats(env):
    vol = volume(env, {"app.conf": "v0\n"})
    shapes = {}
    for fmt in ("slack", "teams", "gchat"):
        sink = Sink(env, SECRET)
        a = start(env, vol, sink.url, "--notify-format", fmt, "--exec-command", "false",
                  "--retry-initial", "10s")
        update(env, vol, {"app.conf": "%s\n" % fmt})
        shapes[fmt] = sink.wait_for(1)[0]["json"]
        a.stop()
        no_secret(env, a)
    s = shapes["slack"]
    check(isinstance(s.get("text"), str) and "exec reload failed" in s["text"], "slack text %r" % s)
    blocks = s.get("blocks")
    check(isinstance(blocks, list) and len(blocks) == 2 and
          all(bl.get("type") == "section" for bl in blocks), "slack blocks %r" % blocks)
    fields = blocks[1].get("fields", [])
    check(all(f.get("type") == "mrkdwn" for f in fields) and len(fields) <= 10, "fields %r" % fields)
    texts = [f["text"] for f in fields]
    check("*Pod*\nweb-1" in texts and "*Files*\n%s/app.conf" % vol in texts, "slack fields %r" % texts)
    check(any(t.startswith("*Error*\nexec:") for t in texts), "slack error field %r" % texts)
    t = shapes["teams"]
    check(t.get("type") == "message", "teams %r" % t)
    att = t["attachments"][0]
    check(att["contentType"] == "application/vnd.microsoft.card.adaptive", "teams %r" % att)
    card = att["content"]
    check(card["type"] == "AdaptiveCard" and card["body"][0]["type"] == "TextBlock" and
          "failed" in card["body"][0]["text"], "teams card %r" % card)
    facts = {f["title"]: f["value"] for f in card["body"][1]["facts"]}
    check(facts.get("Namespace") == "shop" and facts.get("Files") == vol + "/app.conf", "facts %r" % facts)
    g = shapes["gchat"]
    check(list(g) == ["text"] and g["text"].startswith("*exec reload failed on pod shop/web-1*"),
          "gchat %r" % g)
    check("\nError: exec:" in g["text"], "gchat error %r" % g)


def test_notify_stuck_receiver_never_delays_actions(env):
    """A receiver that does not answer: the actions go on at once; the
    notifications wait, in order, and the queue bound drops the excess."""
    sink = Sink(env, SECRET)
    sink.hold()
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, vol, sink.url, "--notify-queue", "2", "--notify-timeout", "20s")
    hashes = []
    for i in range(1, 5):
        hashes.append(update(env, vol, {"app.conf": "v%d\n" % i}))
        a.wait_match("action", result="success", hash=hashes[-1])
    # four actions done while the receiver still holds the first request
    check(len(sink.requests()) == 1, "want one request in flight, got %d" % len(sink.requests()))
    wait_until(lambda: metric(a, "reload_agent_notifications_total", '{result="dropped"}') == 2,
               5, "two notifications dropped (queue 2: one in flight, one waiting)")
    sink.answer_ok()
    got = sink.wait_for(2)
    check([r["json"]["newHash"] for r in got] == hashes[:2], "in order: %r" % got)
    a.quiet(1.0)
    check(len(sink.requests()) == 2, "dropped ones were sent: %r" % sink.requests())
    check(metric(a, "reload_agent_notifications_total", '{result="sent"}') == 2, "sent 2")
    no_secret(env, a)


def test_notify_retry_then_give_up(env):
    sink = Sink(env, SECRET)
    sink.answer_fail(503, first=2)
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, vol, sink.url)
    update(env, vol, {"app.conf": "v1\n"})
    got = sink.wait_for(3, timeout=15)
    check([r["status"] for r in got] == [503, 503, 200], "answers %r" % [r["status"] for r in got])
    check(got[0]["raw"] == got[2]["raw"], "a retry sends the same body")
    check(metric(a, "reload_agent_notification_retries_total") == 2, "two retries counted")
    check(metric(a, "reload_agent_notifications_total", '{result="sent"}') == 1, "sent")
    # a refusal (4xx other than 429) is not retried
    sink.answer_fail(404)
    update(env, vol, {"app.conf": "v2\n"})
    sink.wait_for(4)
    wait_until(lambda: metric(a, "reload_agent_notifications_total", '{result="failed"}') == 1, 5,
               "failed counted")
    a.quiet(1.5)
    check(len(sink.requests()) == 4, "a 404 was retried: %d requests" % len(sink.requests()))
    warn = [l for l in a.lines if "notification" in l and "failed after 1 attempt" in l]
    check(warn and "127.0.0.1" in warn[0] and "404" in warn[0], "failure logged: %r" % warn)
    no_secret(env, a)


def test_notify_https_test_ca(env):
    d = env.path("certs")
    os.mkdir(d)
    make_certs(d)
    sink = Sink(env, SECRET, certs=d)
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, vol, sink.url, "--notify-ca-file", d + "/ca.crt")
    update(env, vol, {"app.conf": "v1\n"})
    check(sink.wait_for(1)[0]["json"]["result"] == "success", "https notification")
    a.stop()
    # without the CA the receiver is not trusted: no request is answered,
    # the failure is logged without the URL's path
    n = len(sink.requests())
    a = start(env, vol, sink.url, "--notify-timeout", "1s")
    update(env, vol, {"app.conf": "v2\n"})
    a.wait_for(lambda evs: any("notification" in l and "failed after 4 attempts" in l
                               for l in a.lines), 20, "the notification given up")
    check(len(sink.requests()) == n, "an untrusted receiver got a request")
    no_secret(env, a)


def test_notify_url_file_rotates(env):
    s1, s2 = Sink(env, "/first/secret1"), Sink(env, "/second/secret2")
    f = env.path("url")
    with open(f, "w") as fh:
        fh.write(s1.url + "\n")
    vol = volume(env, {"app.conf": "v0\n"})
    port = free_port()
    a = start_agent(env, vol, "--action", "exec", "--exec-command", "true", "--notify-url-file", f,
                    "--listen", "127.0.0.1:%d" % port)
    update(env, vol, {"app.conf": "v1\n"})
    s1.wait_for(1)
    with open(f + ".new", "w") as fh:
        fh.write(s2.url)
    os.rename(f + ".new", f)
    update(env, vol, {"app.conf": "v2\n"})
    s2.wait_for(1)
    check(len(s1.requests()) == 1, "the old URL got the second notification")
    check(not any("secret1" in l or "secret2" in l for l in a.lines), "a URL leaked in the log")


def test_notify_bad_options(env):
    for args, want in (
            (["--notify-url", "ftp://h/S3cr3tT0ken"], "want an http:// or https:// URL"),
            (["--notify-url", "http://h/a", "--notify-url-file", "/x"], "exclusive"),
            (["--notify-format", "discord"], "json|slack|teams|gchat"),
            (["--notify-queue", "0"], "notify-queue"),
    ):
        r = env.run([env.binary, "run", "--watch", env.tmp] + args)
        err = r.stderr.decode()
        check(r.returncode == 2 and want in err, "%r: exit %d, %r" % (args, r.returncode, err))
        check("S3cr3tT0ken" not in err, "the URL's path in the error: %r" % err)
    r = env.run([env.binary, "run", "--watch", env.tmp, "--notify-url",
                 "https://hooks.example.com" + SECRET, "--print-config"])
    out = r.stdout.decode()
    check(r.returncode == 0 and "https://hooks.example.com/<redacted>" in out and
          "S3cr3tT0ken" not in out, "print-config: %r" % out)


def test_notify_drained_at_exit(env):
    """SIGTERM while a notification is in flight: the agent waits for the
    receiver (at most --notify-timeout) and then exits 0; a receiver that
    never answers costs at most that long, and the loss is logged."""
    sink = Sink(env, SECRET)
    sink.hold()
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, vol, sink.url, "--notify-timeout", "10s")
    update(env, vol, {"app.conf": "v1\n"})
    sink.wait_for(1)
    threading.Timer(0.5, sink.answer_ok).start()
    t0 = time.monotonic()
    check(a.stop(timeout=15) == 0, "exit status %r" % a.proc.returncode)
    check(time.monotonic() - t0 < 8, "the exit waited %.1f s" % (time.monotonic() - t0))
    check(not any("dropped at exit" in l for l in a.lines), "dropped although answered")
    # a receiver that never answers: the exit waits --notify-timeout, no more
    sink.hold()
    a = start(env, vol, sink.url, "--notify-timeout", "1s")
    update(env, vol, {"app.conf": "v2\n"})
    sink.wait_for(2)
    t0 = time.monotonic()
    check(a.stop(timeout=15) == 0, "exit status %r" % a.proc.returncode)
    took = time.monotonic() - t0
    check(took < 5, "the exit waited %.1f s with --notify-timeout 1s" % took)
    check(any("dropped at exit" in l for l in a.lines) or
          any("notification" in l and "failed" in l for l in a.lines),
          "the lost notification is not logged: %r" % a.lines[-5:])
    no_secret(env, a)
