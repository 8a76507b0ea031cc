"""Edge integration tests: special files where the agent expects a small
regular file, and a pid file that outlived its writer (issue 9, F2 and F4).

F2: a FIFO given as --annotations, --kube-token-file or --pid-file, or an
annotations file replaced by a FIFO while the agent runs, must never block
the loop: each is refused with an error that names the path and "FIFO",
/healthz keeps answering, and SIGTERM still ends the agent with status 0.
A FIFO nobody writes to blocks a plain open(2) forever, so before the fix
these tests end in their timeouts.

F4: a pid file whose PID belongs to a process that started after the file
was last written is stale (its writer died, the PID was reused): the target
is refused with "stale pid file", retried, and never signalled. The test
cannot force PID reuse, so it produces exactly what the agent observes: a
pid file with an mtime in the past naming a process started after it.

F9: a reload endpoint that answers 200 with a body larger than the http
action reads (64 KiB) has reloaded: one success, no retries. A 500 with a
big body is still a failure.
"""
import os
import select
import signal
import subprocess
import sys
import time

from tests.lib.agent import hupcount, lines_of, start, update, volume
from tests.lib.proc import TestFailure, check, http_get, wait_until



def healthz_ok(a):
    port = a.of("ready")[0]["port"]
    status, _ = http_get("http://127.0.0.1:%d/healthz" % port, timeout=3.0)
    return status == 200


def logged(a, *words):
    """The log lines (raw) that contain every one of words."""
    with a.cond:
        return [l for l in a.lines if all(w in l for w in words)]


def stops_cleanly(a):
    rc = a.stop(signal.SIGTERM, timeout=10.0)
    check(rc == 0, "exit status after SIGTERM %r, want 0" % rc)


def run_bounded(env, args, timeout=10):
    """Runs the agent to completion; a hang is a failure, not a stuck test."""
    try:
        return env.run([env.binary, "run"] + args, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TestFailure("the agent did not exit within %ds (blocked?): %r" % (timeout, args))


# ---- F2: FIFOs ----

def test_fifo_annotations_at_start_is_a_clear_fatal_error(env):
    vol = volume(env, {"app.conf": "v0\n"})
    fifo = env.path("annotations")
    os.mkfifo(fifo)
    r = run_bounded(env, ["--watch", vol, "--annotations", fifo, "--listen", "127.0.0.1:0"])
    err = r.stderr.decode(errors="replace")
    check(r.returncode == 2, "exit status %r, want 2 (stderr %r)" % (r.returncode, err))
    check(fifo in err and "FIFO" in err, "error does not name the path and FIFO: %r" % err)


def test_fifo_replacing_annotations_while_running(env):
    vol = volume(env, {"app.conf": "v0\n"})
    adir = env.path("podinfo")
    os.mkdir(adir)
    afile = os.path.join(adir, "annotations")
    with open(afile, "w") as f:
        f.write('reload-agent.io/action="none"\n')
    a = start(env, vol, "--action", "none", "--annotations", afile, "--listen", "127.0.0.1:0")
    check(healthz_ok(a), "/healthz not 200 before the FIFO")
    tmp = os.path.join(adir, ".fifo")
    os.mkfifo(tmp)
    os.rename(tmp, afile)
    ev = a.wait_event("config-error", timeout=10)[0]
    err = ev.get("error", "")
    check(afile in err and "FIFO" in err, "config-error does not name the path and FIFO: %r" % ev)
    check(healthz_ok(a), "/healthz not 200 with the FIFO in place")
    # The last good configuration stays in force: a change is still acted on.
    h = update(env, vol, {"app.conf": "v1\n"})
    a.wait_match("action", timeout=10, hash=h, action="none", result="success")
    stops_cleanly(a)


def test_fifo_pid_file(env):
    vol = volume(env, {"app.conf": "v0\n"})
    fifo = env.path("app.pid")
    os.mkfifo(fifo)
    a = start(env, vol, "--action", "signal", "--pid-file", fifo, "--listen", "127.0.0.1:0",
              "--retry-initial", "100ms", "--retry-max", "300ms")
    update(env, vol, {"app.conf": "v1\n"})
    a.wait_event("retry", count=2, timeout=10)
    fails = a.matching("action", result="failure")
    check(fails and all(fifo in e.get("error", "") for e in fails),
          "failures should name the pid file: %r" % fails)
    check(logged(a, fifo, "is a FIFO, not a regular file"), "no log line names %s as a FIFO" % fifo)
    check(healthz_ok(a), "/healthz not 200 while the pid file is a FIFO")
    stops_cleanly(a)


def kube_args(env, token):
    ca = env.path("ca.crt")
    with open(ca, "w") as f:
        f.write("not used\n")
    return ["--kube-api", "https://127.0.0.1:1", "--kube-token-file", token,
            "--kube-ca-file", ca, "--pod-name", "web-0", "--namespace", "default"]


def test_fifo_kube_token_file(env):
    vol = volume(env, {"app.conf": "v0\n"})
    fifo = env.path("token")
    os.mkfifo(fifo)
    # rollout needs the API: a clear fatal error at start
    r = run_bounded(env, ["--watch", vol, "--action", "rollout", "--annotations", ""] +
                    kube_args(env, fifo))
    err = r.stderr.decode(errors="replace")
    check(r.returncode == 2, "rollout: exit status %r, want 2 (stderr %r)" % (r.returncode, err))
    check(fifo in err and "FIFO" in err, "rollout: error does not name the path and FIFO: %r" % err)
    # Events only: the agent runs without them and says why.
    a = start(env, vol, "--action", "none", "--annotations", "", "--listen", "127.0.0.1:0",
              *kube_args(env, fifo))
    check(logged(a, fifo, "FIFO"), "no log line names %s as a FIFO" % fifo)
    check(healthz_ok(a), "/healthz not 200")
    stops_cleanly(a)


# ---- F4: stale pid files ----

def make_stale(pid_file):
    """Dates the pid file 30 s back: its PID's process (started just now)
    started after the file was last written."""
    past = time.time() - 30
    os.utime(pid_file, (past, past))


def test_stale_pid_file_is_never_signalled(env):
    pid_file, out = env.path("app.pid"), env.path("hups")
    vol = volume(env, {"app.conf": "v0\n"})
    p = hupcount(env, pid_file, out)
    wait_until(lambda: os.path.getsize(pid_file) > 0, 5, "the pid written")
    make_stale(pid_file)
    a = start(env, vol, "--action", "signal", "--pid-file", pid_file,
              "--retry-initial", "100ms", "--retry-max", "300ms")
    want = update(env, vol, {"app.conf": "v1\n"})
    a.wait_event("retry", count=3, timeout=10)
    fails = a.matching("action", result="failure")
    check(fails and all("stale pid file" in e.get("error", "") and pid_file in e.get("error", "")
                        for e in fails), "failures should say stale pid file: %r" % fails)
    check(logged(a, "stale pid file", pid_file, "PID %d" % p.pid), "no warning names the PID")
    check(not a.matching("action", result="success"), "a stale target counted as success")
    # The application comes back (rewrites its pid file): the retry gets it.
    with open(pid_file, "w") as f:
        f.write("%d\n" % p.pid)
    ok = a.wait_match("action", timeout=10, result="success")
    check(ok["hash"] == want, "success on %r, want %s" % (ok, want))
    a.quiet(0.5)
    p.send_signal(signal.SIGTERM)
    p.wait(10)
    check(len(lines_of(out)) == 1, "hupcount got %d SIGHUPs, want exactly 1 (after the rewrite)"
          % len(lines_of(out)))


def test_stale_pid_file_blocks_restart(env):
    pid_file, out = env.path("app.pid"), env.path("hups")
    vol = volume(env, {"app.conf": "v0\n"})
    p = hupcount(env, pid_file, out)
    wait_until(lambda: os.path.getsize(pid_file) > 0, 5, "the pid written")
    make_stale(pid_file)
    a = start(env, vol, "--action", "restart", "--pid-file", pid_file, "--restart-delay", "0",
              "--retry-initial", "100ms", "--retry-max", "300ms")
    update(env, vol, {"app.conf": "v1\n"})
    a.wait_event("retry", count=3, timeout=10)
    fails = a.matching("action", result="failure")
    check(fails and all("stale pid file" in e.get("error", "") for e in fails),
          "failures should say stale pid file: %r" % fails)
    check(p.poll() is None, "the unrelated process was terminated (exit %r)" % p.poll())
    p.send_signal(signal.SIGTERM)
    p.wait(10)


# ---- F9: a reload endpoint that answers 2xx with a big body ----

HTTPSRV = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "httpsrv.py")


def httpsrv(env):
    """tests/tools/httpsrv.py on a free loopback port; returns its port."""
    p = env.spawn([sys.executable, HTTPSRV], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    r, _, _ = select.select([p.stdout], [], [], 10)
    check(r, "httpsrv.py printed no port within 10 s")
    return int(p.stdout.readline().decode().strip())


def test_http_big_2xx_body_is_one_success(env):
    port = httpsrv(env)
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, vol, "--action", "http", "--http-method", "POST",
              "--http-url", "http://127.0.0.1:%d/big?n=1048576" % port,
              "--retry-initial", "100ms", "--retry-max", "300ms")
    want = update(env, vol, {"app.conf": "v1\n"})
    ok = a.wait_match("action", timeout=10, result="success")
    check(ok["hash"] == want, "success on %r, want %s" % (ok, want))
    a.quiet(1.0)
    check(len(a.of("action")) == 1 and not a.of("retry"),
          "a 200 with a 1 MiB body: actions %r, retries %r" % (a.of("action"), a.of("retry")))


def test_http_big_5xx_body_still_fails(env):
    port = httpsrv(env)
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, vol, "--action", "http", "--http-method", "POST",
              "--http-url", "http://127.0.0.1:%d/big?n=1048576&status=500" % port,
              "--retry-initial", "100ms", "--retry-max", "300ms")
    update(env, vol, {"app.conf": "v1\n"})
    a.wait_event("retry", count=2, timeout=10)
    fails = a.matching("action", result="failure")
    check(fails and all("500" in e.get("error", "") for e in fails),
          "failures should name status 500: %r" % fails)
    check(not a.matching("action", result="success"), "a 500 counted as success")
