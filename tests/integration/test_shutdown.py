"""Shutdown in every phase of every action (issue 9 F1).

SIGTERM reaches the agent while an action is in flight; the agent must exit
with status 0, without an assertion or a sanitizer report, within a bound.
The rollout phases are driven through the fake API server
(tests/lib/fakeapi.py): the jitter wait, the Retry-After wait of a 429, the
per-owner --min-interval wait and a PATCH whose reply hangs. The in-place
actions run against real targets: an exec command that sleeps, a reload
endpoint that never answers (tests/tools/reload_endpoint.py) and a process
that ignores the restart signal. The actions that finish or time out on
their own (exec, http, restart) are given short timeouts, so "within the
bound" means: their timeout plus a margin; the rollout is aborted at once.
"""
import datetime
import os
import signal
import subprocess
import sys
import time

from tests.lib.proc import TestFailure, check, wait_until

from tests.lib import agent as te  # the Endpoint helper and volumes
from tests.lib import kube as tk  # the fake API server helpers


def stop_expect_clean(a, bound):
    """Sends SIGTERM (to the agent's PID only); the agent must exit 0 within
    `bound` seconds, having logged the shutdown and no assertion."""
    t0 = time.monotonic()
    a.proc.send_signal(signal.SIGTERM)
    try:
        rc = a.proc.wait(bound)
    except subprocess.TimeoutExpired:
        raise TestFailure("agent still running %.1fs after SIGTERM" % bound)
    dt = time.monotonic() - t0
    a.t.join(5)
    asserts = [l for l in a.lines if "Assertion" in l or "assert" in l.lower()]
    check(not asserts, "assertion at shutdown: %r" % asserts[:3])
    check(rc == 0, "exit status %r after SIGTERM (took %.1fs), want 0" % (rc, dt))
    check(a.of("shutdown"), "no shutdown event")
    check(not a.bad_lines, "non-JSON lines: %r" % a.bad_lines[:5])
    return dt


def rollout_agent(env, *extra, jitter="0s"):
    fake = tk.fake_for(env)
    vol = te.volume(env, {"app.conf": "v0\n"})
    a = tk.start(env, fake, vol, *extra, jitter=jitter)
    return fake, vol, a


def owner_gets(fake):
    return tk.requests(fake, "GET", "/deployments/web")


# ---- rollout ----

def test_sigterm_during_rollout_jitter(env):
    fake, vol, a = rollout_agent(env, jitter="1h")
    gets = len(owner_gets(fake))
    tk.update(env, vol, {"app.conf": "v1\n"})
    a.wait_event("change", timeout=10)
    time.sleep(0.3)  # the apply is now in its jitter wait (up to an hour)
    check(len(owner_gets(fake)) == gets and not tk.requests(fake, "PATCH"),
          "the apply left its jitter wait (a 1h jitter drew under 0.3s); rerun")
    stop_expect_clean(a, 5)


def test_sigterm_during_rollout_retry_after(env):
    fake, vol, a = rollout_agent(env)
    tk.faults(fake, {"method": "GET", "path_regex": "/deployments/web$", "status": 429,
                     "retry_after": 60, "count": 1})
    tk.update(env, vol, {"app.conf": "v1\n"})
    wait_until(lambda: [r for r in owner_gets(fake) if r["status"] == 429], 10,
               "the 429 with Retry-After: 60")
    time.sleep(0.2)  # the client now waits for Retry-After
    check(not tk.requests(fake, "PATCH"), "a PATCH despite the 429")
    stop_expect_clean(a, 5)


def test_sigterm_during_rollout_min_interval_wait(env):
    fake, vol, a = rollout_agent(env, "--min-interval", "1h")
    obj = tk.stored(fake, "deployments", "web")
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    obj["metadata"].setdefault("annotations", {})[tk.LAST_KEY] = now
    tk.put_object(fake, "deployments", obj)
    tk.update(env, vol, {"app.conf": "v1\n"})
    a.wait_for(lambda evs: [e for e in evs if "(--min-interval)" in e.get("msg", "")], 10,
               "the per-owner --min-interval wait")
    check(not tk.requests(fake, "PATCH"), "a PATCH despite --min-interval")
    stop_expect_clean(a, 5)


def test_sigterm_during_hung_patch(env):
    fake, vol, a = rollout_agent(env)
    tk.faults(fake, {"method": "PATCH", "delay_ms": 30000, "count": 1})
    tk.update(env, vol, {"app.conf": "v1\n"})
    wait_until(lambda: tk.requests(fake, "PATCH"), 10, "the PATCH to reach the fake")
    time.sleep(0.2)
    stop_expect_clean(a, 5)


# ---- the in-place actions ----

def test_sigterm_during_slow_exec(env):
    vol = te.volume(env, {"app.conf": "v0\n"})
    started = env.path("started")
    a = te.start(env, vol, "--action", "exec", "--exec-timeout", "2s",
                 "--exec-command", "sh -c 'echo $$ > %s; sleep 30'" % started)
    te.update(env, vol, {"app.conf": "v1\n"})
    wait_until(lambda: os.path.exists(started) and te.lines_of(started), 10,
               "the exec command to start")
    dt = stop_expect_clean(a, 8)
    check(dt < 6, "shutdown took %.1fs with --exec-timeout 2s" % dt)


def test_sigterm_during_slow_http(env):
    ep = te.Endpoint(env, "hang")
    vol = te.volume(env, {"app.conf": "v0\n"})
    a = te.start(env, vol, "--action", "http", "--http-url", ep.url, "--http-timeout", "2s")
    te.update(env, vol, {"app.conf": "v1\n"})
    wait_until(lambda: ep.requests(), 10, "the request to reach the hanging endpoint")
    dt = stop_expect_clean(a, 8)
    check(dt < 6, "shutdown took %.1fs with --http-timeout 2s" % dt)


STUBBORN = ("import os, signal, sys, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "open(sys.argv[1] + '.tmp', 'w').write('%d\\n' % os.getpid())\n"
            "os.rename(sys.argv[1] + '.tmp', sys.argv[1])\n"
            "time.sleep(60)\n")


def test_sigterm_during_slow_restart(env):
    pid_file = env.path("app.pid")
    app = env.spawn([sys.executable, "-c", STUBBORN, pid_file], stdin=subprocess.DEVNULL)
    wait_until(lambda: os.path.exists(pid_file), 10, "the app's pid file")
    vol = te.volume(env, {"app.conf": "v0\n"})
    a = te.start(env, vol, "--action", "restart", "--pid-file", pid_file,
                 "--restart-timeout", "2s", "--restart-delay", "0")
    te.update(env, vol, {"app.conf": "v1\n"})
    a.wait_for(lambda evs: [e for e in evs if "waiting for it to exit" in e.get("msg", "")], 10,
               "the restart signal")
    dt = stop_expect_clean(a, 8)
    check(dt < 6, "shutdown took %.1fs with --restart-timeout 2s" % dt)
    check(app.poll() is None, "the app ignoring SIGTERM should still run")
    app.kill()  # our own process, by PID
    app.wait(5)
