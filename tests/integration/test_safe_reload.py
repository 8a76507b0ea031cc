"""Safe in-place reload (issue 26, docs/safe-reload.md) with real processes:
the agent on kubelet-layout volumes (build/tools/awsim), a stand-in app
(tests/tools/confapp.py) that reads its configuration at start and on
SIGHUP and answers GETs with the status its configuration names, real
checkers (sh), `reload-agent validator` on a real unix socket, and the
fake API server for the Events.

What happened is read back from the app (its load log, its PID, what it
serves), from the files (the copies the app reads, the checkers' traces)
and from the agent's /status and /metrics, not only from the agent's log.
"""
import json
import os
import select
import signal
import subprocess
import sys
import time

from tests.lib.agent import lines_of, pid_appender, update, volume
from tests.lib.kube import fake_for, kube_args, kube_events, put_object, requests, stored
from tests.lib.kube import start as start_k8s
from tests.lib.kube import wait_kube_event
from tests.lib.proc import TestFailure, check, free_port, http_get, wait_until
from tests.lib.validator import Validator, alive

HERE = os.path.dirname(os.path.abspath(__file__))
CONFAPP = os.path.join(HERE, "..", "tools", "confapp.py")
QUIET = 1.0

# A checker: the first word of app.conf must be an HTTP status; it says why
# not on two lines (stdout and stderr), and appends a line per run to TRACE.
CHECKER = ("sh -c 'echo run >> {trace}; read w r < {conf}; case $w in [1-5][0-9][0-9]) exit 0;; "
           "esac; echo \"app.conf: $w is not a status\"; echo \"test failed\" >&2; exit 1'")


def checker(env, conf):
    trace = env.path("checker-runs")
    return CHECKER.format(trace=trace, conf=conf), trace


class App:
    """confapp.py on config; its loads are read back from its log."""

    def __init__(self, env, config):
        self.log = env.path("app-%d.jsonl" % time.monotonic_ns())
        self.pid_file = env.path("app.pid")
        if os.path.exists(self.pid_file):
            os.unlink(self.pid_file)
        self.p = env.spawn([sys.executable, CONFAPP, "--config", config, "--pid-file",
                            self.pid_file, "--log", self.log],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        r, _, _ = select.select([self.p.stdout], [], [], 10)
        line = self.p.stdout.readline().decode().strip() if r else ""
        check(line.isdigit(), "confapp did not start (%r, exit %r)" % (line, self.p.poll()))
        self.port = int(line)

    def loads(self):
        return [json.loads(l) for l in lines_of(self.log)]

    def wait_loads(self, n, timeout=10):
        return wait_until(lambda: (lambda l: l if len(l) >= n else None)(self.loads()), timeout,
                          "%d loads of the app's configuration" % n)

    def serves(self):
        return http_get("http://127.0.0.1:%d/" % self.port)

    def kill(self):
        self.p.kill()
        self.p.wait(5)


def start(env, vol, *args):
    listen = free_port()
    a = env.agent(["--watch", vol, "--debounce", "50ms", "--resync", "0", "--listen",
                   "127.0.0.1:%d" % listen, "--retry-initial", "100ms", "--retry-max", "500ms",
                   "--restart-delay", "0s"] + list(args))
    a.listen = listen
    a.wait_event("ready", timeout=15)
    return a


def status(a):
    st, body = http_get("http://127.0.0.1:%d/status" % a.listen)
    check(st == 200, "/status %s" % st)
    return json.loads(body)


def metric(a, line_start):
    _, body = http_get("http://127.0.0.1:%d/metrics" % a.listen)
    for line in body.decode().splitlines():
        if line.startswith(line_start + " "):
            return float(line.split()[-1])
    raise TestFailure("no metric %s" % line_start)


def ready_cli(env, state):
    return env.run([env.binary, "ready", "--state-dir", state])


def lkg_versions(d):
    return sorted(n for n in os.listdir(d) if n.startswith("..") and n not in ("..data",))


def read(path):
    with open(path) as f:
        return f.read()


# ---- validate ----

def test_rejected_content_is_never_acted_on(env):
    """A checker that fails: no action, the app keeps its PID and old
    content, the rejection is logged with the checker's first lines, counted,
    named in /status, never retried; a later good content is acted on."""
    vol = volume(env, {"app.conf": "200 v1\n"})
    app = App(env, os.path.join(vol, "app.conf"))
    validate, trace = checker(env, os.path.join(vol, "app.conf"))
    h1 = env.hash_of(vol)
    a = start(env, vol, "--action", "signal", "--pid-file", app.pid_file, "--validate", validate)
    h2 = update(env, vol, {"app.conf": "oops v2\n"})
    ev = a.wait_event("config-rejected")[0]
    check(ev["hash"] == h2, ev)
    check("oops is not a status" in ev["output"] and "test failed" in ev["output"], ev)
    check("exited with status 1" in ev["verdict"], ev)
    a.quiet(QUIET)
    check(not a.of("action"), "an action ran: %r" % a.of("action"))
    check(len(lines_of(trace)) == 1, "the checker ran %d times" % len(lines_of(trace)))
    check(alive(app.p.pid) and len(app.loads()) == 1, "the app was touched: %r" % app.loads())
    check(app.serves() == (200, b"200 v1\n"), app.serves())
    st = status(a)
    check(st["rejected_hash"] == h2 and st["applied_hash"] == h1, st)
    check("oops is not a status" in st["safe_reload"]["rejected_reason"], st)
    check(metric(a, 'reload_agent_validations_total{result="rejected"}') == 1, "metric")
    h3 = update(env, vol, {"app.conf": "200 v3\n"})
    a.wait_match("action", action="signal", result="success", hash=h3)
    app.wait_loads(2)
    check(app.serves() == (200, b"200 v3\n"), app.serves())
    check(status(a)["applied_hash"] == h3, "applied")
    check(metric(a, 'reload_agent_validations_total{result="accepted"}') == 1, "metric")


def test_checker_that_hangs_is_killed_and_rejects(env):
    vol = volume(env, {"app.conf": "200 v1\n"})
    pidf = env.path("checker.pid")
    out = env.path("actions")
    a = start(env, vol, "--action", "exec", "--exec-command", pid_appender(out), "--validate",
              "sh -c 'echo $$ > %s; exec sleep 30'" % pidf, "--validate-timeout", "300ms")
    h2 = update(env, vol, {"app.conf": "200 v2\n"})
    t0 = time.monotonic()
    ev = a.wait_event("config-rejected", timeout=10)[0]
    check(ev["hash"] == h2 and "timed out after 300 ms" in ev["verdict"], ev)
    check(time.monotonic() - t0 < 5, "rejection took %.1fs" % (time.monotonic() - t0))
    pid = int(read(pidf))
    wait_until(lambda: not alive(pid), 5, "the hanging checker to be killed")
    a.quiet(QUIET)
    check(lines_of(out) == [], "the action ran")


def test_validation_through_the_validator_socket(env):
    """--validator-socket: the checker runs in the validator process (its
    parent is the validator); a validator that is down is an error that is
    retried, never a rejection; once it is back the change is acted on."""
    vol = volume(env, {"app.conf": "200 v1\n"})
    sock = env.path("v.sock")
    v = Validator(env, sock)
    parent = env.path("checker-parent")
    out = env.path("actions")
    validate = ("sh -c 'echo $PPID > %s; read w r < %s/app.conf; test \"$w\" = 200'" %
                (parent, vol))
    a = start(env, vol, "--action", "exec", "--exec-command", pid_appender(out), "--validate",
              validate, "--validator-socket", sock)
    h2 = update(env, vol, {"app.conf": "500 v2\n"})
    a.wait_match("config-rejected", hash=h2)
    check(int(read(parent)) == v.p.pid, "the checker did not run in the validator")
    check(v.stop() == 0, "validator exit")
    h3 = update(env, vol, {"app.conf": "200 v3\n"})
    a.wait_event("validate-error", timeout=10)
    a.wait_event("retry", timeout=10)
    check(not a.matching("config-rejected", hash=h3), "a validator down rejected the content")
    check(lines_of(out) == [], "acted without validation")
    Validator(env, sock)
    a.wait_match("action", timeout=15, action="exec", result="success", hash=h3)
    check(len(lines_of(out)) == 1, "actions: %r" % lines_of(out))


# ---- keep-last-good ----

def lkg_agent(env, vol, lkg, state, *extra):
    validate, trace = checker(env, os.path.join(lkg, "candidate", "app.conf"))
    a = start(env, vol, "--keep-last-good", "%s=%s" % (vol, lkg), "--state-dir", state,
              "--validate", validate, *extra)
    return a, trace


def test_keep_last_good_copy_is_what_a_restarted_app_reads(env):
    vol = volume(env, {"app.conf": "200 v1\n", "conf.d/a.conf": "a1\n"})
    lkg, state = env.path("lkg"), env.path("state")
    os.mkdir(state)
    pidfile = env.path("app.pid")
    a, _ = lkg_agent(env, vol, lkg, state, "--action", "signal", "--pid-file", pidfile)
    check(ready_cli(env, state).returncode == 0, "not ready after the fill")
    live = os.path.join(lkg, "live")
    # the kubelet's own layout: ..data -> ..<timestamp>, top-level links into ..data
    data = os.readlink(os.path.join(live, "..data"))
    check(data.startswith("..") and "/" not in data, data)
    check(os.readlink(os.path.join(live, "app.conf")) == "..data/app.conf", "app.conf link")
    check(os.readlink(os.path.join(live, "conf.d")) == "..data/conf.d", "conf.d link")
    check(read(os.path.join(live, "conf.d", "a.conf")) == "a1\n", "a.conf")
    app = App(env, os.path.join(live, "app.conf"))
    h2 = update(env, vol, {"app.conf": "oops v2\n", "conf.d/a.conf": "a2\n"})
    a.wait_match("config-rejected", hash=h2)
    check(read(os.path.join(lkg, "candidate", "app.conf")) == "oops v2\n", "candidate")
    check(read(os.path.join(live, "app.conf")) == "200 v1\n", "live changed on a rejection")
    check(read(os.path.join(live, "conf.d", "a.conf")) == "a1\n", "live changed")
    # the app container restarts (a crash): it starts on the last good copy
    app.kill()
    app2 = App(env, os.path.join(live, "app.conf"))
    check(app2.loads()[0] == {"pid": app2.p.pid, "loaded": True, "line": "200 v1"},
          app2.loads())
    check(app2.serves() == (200, b"200 v1\n"), app2.serves())
    h3 = update(env, vol, {"app.conf": "200 v3\n"})
    a.wait_match("action", action="signal", result="success", hash=h3)
    app2.wait_loads(2)
    check(app2.serves() == (200, b"200 v3\n"), app2.serves())
    check(read(os.path.join(live, "app.conf")) == "200 v3\n", "live")
    check(not os.path.exists(os.path.join(live, "conf.d")), "a removed key's link stays")
    check(len(lkg_versions(live)) == 1, "old versions left: %r" % lkg_versions(live))


def test_keep_last_good_not_ready_until_a_valid_content(env):
    """At pod start an invalid content leaves the copy empty and the agent
    not ready (the app would not start); the first valid content fills it
    without any action and makes the agent ready."""
    vol = volume(env, {"app.conf": "oops v1\n"})
    lkg, state = env.path("lkg"), env.path("state")
    os.mkdir(state)
    out = env.path("actions")
    validate, _ = checker(env, os.path.join(lkg, "candidate", "app.conf"))
    listen = free_port()
    a = env.agent(["--watch", vol, "--debounce", "50ms", "--resync", "0", "--keep-last-good",
                   "%s=%s" % (vol, lkg), "--state-dir", state, "--validate", validate,
                   "--action", "exec", "--exec-command", pid_appender(out), "--listen",
                   "127.0.0.1:%d" % listen])
    a.listen = listen
    a.wait_event("copies-empty", timeout=15)
    a.wait_event("config-rejected", timeout=10)
    a.quiet(QUIET)
    check(not a.of("ready"), "ready with an invalid content")
    r = ready_cli(env, state)
    check(r.returncode == 1 and b"not ready yet" in r.stderr, r.stderr)
    check(http_get("http://127.0.0.1:%d/readyz" % listen)[0] == 503, "/readyz")
    check(not os.path.exists(os.path.join(lkg, "live", "..data")), "the copy was filled")
    h2 = update(env, vol, {"app.conf": "200 v2\n"})
    a.wait_event("copies-filled", timeout=10)
    a.wait_event("ready", timeout=10)
    check(ready_cli(env, state).returncode == 0, "not ready")
    check(read(os.path.join(lkg, "live", "app.conf")) == "200 v2\n", "live")
    check(status(a)["applied_hash"] == h2, "applied")
    a.quiet(QUIET)
    check(lines_of(out) == [], "an action ran at the fill: %r" % lines_of(out))
    # the agent stops: its ready marker says so
    a.stop()
    r = ready_cli(env, state)
    check(r.returncode == 1 and b"gone" in r.stderr, r.stderr)


def test_keep_last_good_copy_says_what_the_app_has(env):
    """An agent that starts again without a record of what it applied (the
    record was lost) takes what the copy shows as applied: a change made
    while no agent ran is validated, swapped in and acted on, not taken as
    done while the app still reads the old copy."""
    vol = volume(env, {"app.conf": "200 v1\n"})
    lkg, state = env.path("lkg"), env.path("state")
    os.mkdir(state)
    out = env.path("actions")
    a, _ = lkg_agent(env, vol, lkg, state)
    a.stop()
    h2 = update(env, vol, {"app.conf": "200 v2\n"})
    os.unlink(os.path.join(state, "applied.json"))
    b, _ = lkg_agent(env, vol, lkg, state, "--action", "exec", "--exec-command",
                     pid_appender(out))
    b.wait_match("action", action="exec", result="success", hash=h2)
    check(read(os.path.join(lkg, "live", "app.conf")) == "200 v2\n", "live")
    check(len(lines_of(out)) == 1, "actions: %r" % lines_of(out))


# ---- verify ----

def test_verify_failure_rolls_back_and_repeats_the_action(env):
    vol = volume(env, {"app.conf": "200 v1\n"})
    lkg, state = env.path("lkg"), env.path("state")
    os.mkdir(state)
    pidfile = env.path("app.pid")
    validate, _ = checker(env, os.path.join(lkg, "candidate", "app.conf"))
    lkg_args = ["--keep-last-good", "%s=%s" % (vol, lkg), "--state-dir", state, "--validate",
                validate]
    # the app starts once the copy is filled (its port is known then); the
    # agent that verifies it is the next one of the pod (the applied state
    # in --state-dir carries on)
    first = start(env, vol, *lkg_args)
    app = App(env, os.path.join(lkg, "live", "app.conf"))
    first.stop()
    h1 = env.hash_of(vol)
    a = start(env, vol, *lkg_args, "--action", "signal", "--pid-file", pidfile, "--verify",
              "http://127.0.0.1:%d/" % app.port, "--verify-timeout", "2s")
    h2 = update(env, vol, {"app.conf": "500 v2\n"})  # valid for the checker, fails at runtime
    ev = a.wait_event("config-rolled-back", timeout=15)[0]
    check(ev["hash"] == h2 and ev["restored"] == h1 and ev["action_ok"] is True, ev)
    loads = [l["line"] for l in app.wait_loads(3)]
    check(loads == ["200 v1", "500 v2", "200 v1"], loads)
    check(app.serves() == (200, b"200 v1\n"), app.serves())
    check(read(os.path.join(lkg, "live", "app.conf")) == "200 v1\n", "live not restored")
    st = status(a)
    check(st["safe_reload"]["rolled_back_hash"] == h2 and st["applied_hash"] == h1, st)
    check("status 500" in st["safe_reload"]["verify_error"], st)
    check(metric(a, "reload_agent_rollbacks_total") == 1, "rollbacks metric")
    check(metric(a, 'reload_agent_verifications_total{result="failure"}') == 1, "metric")
    a.quiet(QUIET)
    check(len(app.loads()) == 3, "retried: %r" % app.loads())
    h3 = update(env, vol, {"app.conf": "200 v3\n"})
    a.wait_match("verified", timeout=10, hash=h3)
    check(app.serves() == (200, b"200 v3\n"), app.serves())
    check(status(a)["applied_hash"] == h3, "applied")
    check(len(lkg_versions(os.path.join(lkg, "live"))) == 1, "versions left")


def test_verify_failure_without_copy_is_reported(env):
    vol = volume(env, {"app.conf": "200 v1\n"})
    app = App(env, os.path.join(vol, "app.conf"))
    a = start(env, vol, "--action", "signal", "--pid-file", app.pid_file, "--verify",
              "http://127.0.0.1:%d/health" % app.port, "--verify-timeout", "1500ms")
    h2 = update(env, vol, {"app.conf": "500 v2\n"})
    ev = a.wait_event("config-verify-failed", timeout=10)[0]
    check(ev["hash"] == h2 and "status 500" in ev["error"], ev)
    st = status(a)
    check(st["safe_reload"]["verify_failed_hash"] == h2, st)
    check(st["applied_hash"] == h2, "the app runs it: applied")
    check(app.serves()[0] == 500, "the app")


def test_verify_command_tried_until_it_passes(env):
    vol = volume(env, {"app.conf": "200 v1\n"})
    flag = env.path("up")
    out = env.path("actions")
    # the "app" comes up a second after the action
    act = "sh -c 'echo $$ >> %s; (sleep 1; touch %s) &'" % (out, flag)
    a = start(env, vol, "--action", "exec", "--exec-command", act, "--verify",
              "test -f %s" % flag, "--verify-timeout", "5s")
    h2 = update(env, vol, {"app.conf": "200 v2\n"})
    ev = a.wait_match("verified", timeout=10, hash=h2)
    check(ev["tries"] >= 2, ev)
    check(status(a)["applied_hash"] == h2, "applied")


# ---- the storm breaker ----

def test_storm_breaker_trips_and_resumes(env):
    vol = volume(env, {"k": "0"})
    out = env.path("actions")
    a = start(env, vol, "--action", "exec", "--exec-command", pid_appender(out),
              "--storm-limit", "2/2s")
    for i in (1, 2):
        h = update(env, vol, {"k": str(i)})
        a.wait_match("action", action="exec", result="success", hash=h)
    update(env, vol, {"k": "3"})
    halted = a.wait_event("storm-halted", timeout=5)[0]
    check(status(a)["safe_reload"]["storm"]["halted"] is True, "status")
    check(metric(a, "reload_agent_storm_halted") == 1, "gauge")
    time.sleep(0.5)
    h4 = update(env, vol, {"k": "4"})
    t4 = time.monotonic()
    a.quiet(1.0)
    check(len(lines_of(out)) == 2, "acted while halted: %r" % lines_of(out))
    resumed = a.wait_event("storm-resumed", timeout=10)[0]
    check(time.monotonic() - t4 >= 1.5, "resumed before the content was stable for the window")
    a.wait_match("action", timeout=10, action="exec", result="success", hash=h4)
    check(len(lines_of(out)) == 3, "actions: %r" % lines_of(out))
    check(metric(a, "reload_agent_storm_halts_total") == 1, "halts")
    check(halted["actions"] == 2 and resumed, halted)


def test_storm_count_survives_an_agent_restart(env):
    """--state-dir keeps the count: a restarted agent (a crash, restart-pod)
    does not get a fresh allowance."""
    vol = volume(env, {"k": "0"})
    state = env.path("state")
    os.mkdir(state)
    out = env.path("actions")
    args = ("--action", "exec", "--exec-command", pid_appender(out), "--storm-limit", "2/30s",
            "--state-dir", state)
    a = start(env, vol, *args)
    for i in (1, 2):
        h = update(env, vol, {"k": str(i)})
        a.wait_match("action", action="exec", result="success", hash=h)
    a.stop(signal.SIGKILL)
    b = start(env, vol, *args)
    update(env, vol, {"k": "3"})
    b.wait_event("storm-halted", timeout=5)
    b.quiet(QUIET)
    check(len(lines_of(out)) == 2, "actions: %r" % lines_of(out))


def test_rollout_storm_is_counted_on_the_workload(env):
    """rollout's default storm limit (5/10m) counts the workload's rollouts
    by every replica, in its metadata (recent-rollouts): each pod a rollout
    creates starts a fresh agent, so a count of its own would never trip.
    A rollout writes its time there; with 5 within the window the next is
    held back (Event ReloadStormHalted on the workload, no PATCH)."""
    fake = fake_for(env)
    vol = volume(env, {"app.conf": "v0\n"})
    a = start_k8s(env, fake, vol)
    update(env, vol, {"app.conf": "v1\n"})
    a.wait_match("rollout", timeout=15, result="patched")
    ann = stored(fake, "deployments", "web")["metadata"]["annotations"]
    times = ann["reload-agent.io/recent-rollouts"].split(",")
    check(len(times) == 1 and abs(int(times[0]) - time.time()) < 60, ann)
    # four more rollouts by other replicas within the window
    obj = stored(fake, "deployments", "web")
    now = int(time.time())
    obj["metadata"]["annotations"]["reload-agent.io/recent-rollouts"] = ",".join(
        str(now - 60 * i) for i in range(5))
    put_object(fake, "deployments", obj)
    patches = len(requests(fake, "PATCH"))
    update(env, vol, {"app.conf": "v2\n"})
    a.wait_match("rollout", timeout=15, result="storm")
    a.wait_event("storm-halted", timeout=5)
    ev = wait_kube_event(fake, "ReloadStormHalted", "Deployment", "web")[0]
    check("rolled 5 times within 600s" in ev["message"], ev["message"])
    a.quiet(QUIET)
    check(len(requests(fake, "PATCH")) == patches, "patched during a storm")


# ---- dry run ----

def test_dry_run_runs_no_step(env):
    vol = volume(env, {"app.conf": "200 v1\n"})
    lkg, state = env.path("lkg"), env.path("state")
    os.mkdir(state)
    ran = env.path("ran")
    a = start(env, vol, "--dry-run", "--keep-last-good", "%s=%s" % (vol, lkg), "--state-dir",
              state, "--validate", "sh -c 'echo validate >> %s'" % ran, "--verify",
              "sh -c 'echo verify >> %s'" % ran, "--action", "exec", "--exec-command",
              "sh -c 'echo exec >> %s'" % ran)
    h2 = update(env, vol, {"app.conf": "200 v2\n"})
    for ev in ("validate", "keep-last-good", "verify"):
        e = a.wait_match(ev, timeout=10, hash=h2)
        check(e.get("dry_run") is True and "would" in e["msg"], e)
    a.wait_match("action", action="exec", result="success", hash=h2, dry_run=True)
    a.quiet(QUIET)
    check(not os.path.exists(ran), "a step ran in a dry run: %r" % lines_of(ran))
    check(not os.path.exists(lkg), "a copy was written in a dry run")


# ---- Events ----

def test_events_name_the_rejection_and_the_rollback(env):
    fake = fake_for(env)
    pod = fake.info["pods"][0]
    vol = volume(env, {"app.conf": "200 v1\n"})
    app = App(env, os.path.join(vol, "app.conf"))
    validate, _ = checker(env, os.path.join(vol, "app.conf"))
    a = start(env, vol, "--action", "signal", "--pid-file", app.pid_file, "--validate", validate,
              "--verify", "http://127.0.0.1:%d/" % app.port, "--verify-timeout", "1500ms",
              *kube_args(fake))
    h2 = update(env, vol, {"app.conf": "oops v2\n"})
    ev = wait_kube_event(fake, "ConfigRejected", "Pod", pod)[0]
    check(ev["type"] == "Warning" and h2[:12] in ev["message"], ev)
    check("oops is not a status | test failed" in ev["message"], ev["message"])
    update(env, vol, {"app.conf": "500 v3\n"})
    ev = wait_kube_event(fake, "ConfigVerifyFailed", "Pod", pod, timeout=15)[0]
    check("status 500" in ev["message"], ev["message"])
    check(not kube_events(fake, "ConfigRolledBack"), "rolled back without a copy")


# ---- the CLI ----

def test_copy_self_and_ready(env):
    dest = env.path("bin", "reload-agent")
    os.mkdir(env.path("bin"))
    r = env.run([env.binary, "copy-self", dest])
    check(r.returncode == 0, r.stderr)
    check(os.stat(dest).st_mode & 0o777 == 0o755, oct(os.stat(dest).st_mode))
    with open(dest, "rb") as f, open(env.binary, "rb") as g:
        check(f.read() == g.read(), "not the same bytes")
    r = env.run([dest, "version"])
    check(r.returncode == 0 and r.stdout.startswith(b"reload-agent "), r.stdout)
    r = env.run([env.binary, "copy-self", env.path("nodir", "x")])
    check(r.returncode == 1 and b"cannot write" in r.stderr, r.stderr)
    r = env.run([env.binary, "copy-self"])
    check(r.returncode == 2 and b"no DEST" in r.stderr, r.stderr)
    # --prepare: the copies' directories, made as this user
    lkg = env.path("lkg")
    os.mkdir(lkg)
    r = env.run([env.binary, "copy-self", dest, "--prepare", lkg])
    check(r.returncode == 0, r.stderr)
    for sub in ("live", "candidate"):
        st = os.stat(os.path.join(lkg, sub))
        check(st.st_uid == os.getuid() and st.st_mode & 0o777 == 0o755, (sub, oct(st.st_mode)))
    r = env.run([env.binary, "copy-self", dest, "--prepare", "relative"])
    check(r.returncode == 2 and b"not an absolute path" in r.stderr, r.stderr)
    r = env.run([env.binary, "copy-self", dest, "--prepare", env.path("nodir")])
    check(r.returncode == 1 and b"cannot create" in r.stderr, r.stderr)
    r = env.run([env.binary, "ready", "--state-dir", env.path("bin")])
    check(r.returncode == 1 and b"not ready yet" in r.stderr, r.stderr)
    r = env.run([env.binary, "ready"])
    check(r.returncode == 2 and b"--state-dir is required" in r.stderr, r.stderr)
