"""Reload engine integration tests: the real agent performing real actions.

The agent runs on kubelet-layout volumes (build/tools/awsim) with JSON logs,
`--resync 0` and a short `--debounce` (50ms) unless a test needs another.
The actions hit real targets: a reload endpoint over loopback
(tests/tools/reload_endpoint.py, switchable between 200, 500, refusing and
hanging), commands that append their PID to a file, and build/tools/hupcount,
which records every SIGHUP it receives. Expected hashes come from
`reload-agent hash` on the final tree; what the actions did is read back from
the targets themselves (request log, output files, received signals), never
only from the agent's own log.
"""
import datetime
import hashlib
import json
import os
import re
import signal
import subprocess
import time

from tests.lib.proc import TestFailure, check, http_get, wait_until
from tests.lib.agent import (Endpoint, QUIET, actions, annotations_text, annotations_volume, hupcount,
                             hups_received, lines_of, pid_appender, start, update, volume, wait_action)



# ---- helpers of this file ----

def event_time(e):
    """The "time" field (RFC3339 UTC with milliseconds) as epoch seconds."""
    t = datetime.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
    return t.replace(tzinfo=datetime.timezone.utc).timestamp()


# ---- http ----

def test_http_retries_until_success(env):
    ep = Endpoint(env, "500")
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, vol, "--action", "http", "--http-url", ep.url, "--http-method", "PUT",
              "--http-header", "X-Reload-Token: t0ken", "--http-header", "X-Second: two",
              "--http-timeout", "1s", "--retry-initial", "100ms", "--retry-max", "400ms")

    update(env, vol, {"app.conf": "v1\n"})
    a.wait_event("retry", count=2)
    fails = actions(a, result="failure")
    check(len(fails) >= 2 and all("500" in e.get("error", "") for e in fails),
          "500 answers: want failures naming the status, got %r" % fails)
    # A newer change supersedes the pending retry; the endpoint now refuses.
    ep.mode("refuse")
    want = update(env, vol, {"app.conf": "v2\n"})
    a.wait_for(lambda evs: len(actions(a, result="failure", hash=want)) >= 2, 10,
               "failures on the newest content while refusing")
    ep.mode("hang")
    n_fail = len(actions(a, result="failure"))
    a.wait_for(lambda evs: len(actions(a, result="failure")) > n_fail + 1, 10,
               "failures while the endpoint hangs")
    check(any(r["answer"] == "hang" for r in ep.requests()), "no request reached the hanging endpoint")
    ep.mode("200")
    ok = wait_action(a, result="success")
    check(ok["action"] == "http" and ok["hash"] == want == env.hash_of(vol),
          "success event %r, want hash %s" % (ok, want))
    check(ok["attempt"] >= 5, "success at attempt %r after at least 4 failures" % ok.get("attempt"))
    retries = a.of("retry")
    check(all(0 < r["delay_ms"] <= 400 for r in retries), "retry delays outside (0, 400ms]: %r" % retries)
    a.quiet(QUIET)
    check(len(actions(a, result="success")) == 1, "more than one success: %r" % a.of("action"))

    reqs = ep.requests()
    answered = [r for r in reqs if r["answer"] == "200"]
    check(len(answered) == 1, "want exactly one request answered 200, got %d" % len(answered))
    check(sum(r["answer"] == "500" for r in reqs) >= 2, "fewer than two 500 answers: %r" % reqs)
    for r in reqs:
        check(r["method"] == "PUT" and r["path"] == "/-/reload", "request line %s %s" % (r["method"], r["path"]))
        check(r["headers"].get("x-reload-token") == "t0ken" and r["headers"].get("x-second") == "two",
              "configured headers missing: %r" % r["headers"])


def test_http_failed_reload_retried_after_revert(env):
    ep = Endpoint(env, "500")
    vol = volume(env, {"app.conf": "v0\n"})
    base = env.hash_of(vol)
    a = start(env, vol, "--action", "http", "--http-url", ep.url,
              "--retry-initial", "100ms", "--retry-max", "200ms")
    changed = update(env, vol, {"app.conf": "v1\n"})
    wait_action(a, result="failure", hash=changed)
    check(update(env, vol, {"app.conf": "v0\n"}) == base, "revert did not restore the baseline hash")
    a.wait_for(lambda evs: actions(a, result="failure", hash=base), 10, "a failed retry on the reverted content")
    ep.mode("200")
    ok = wait_action(a, result="success")
    check(ok["hash"] == base, "success on %s, want the reverted content %s" % (ok["hash"], base))
    check(ep.requests()[-1]["method"] == "POST", "default method: %r" % ep.requests()[-1])


def test_sigterm_while_http_hangs(env):
    ep = Endpoint(env, "hang")
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, vol, "--action", "http", "--http-url", ep.url, "--http-timeout", "2s")
    update(env, vol, {"app.conf": "v1\n"})
    wait_until(lambda: ep.requests(), 10, "the request to reach the hanging endpoint")
    t0 = time.monotonic()
    a.proc.send_signal(signal.SIGTERM)
    try:
        rc = a.proc.wait(6)
    except subprocess.TimeoutExpired:
        raise TestFailure("agent still running 6s after SIGTERM with a hanging request")
    dt = time.monotonic() - t0
    check(rc == 0, "exit status %r after SIGTERM, want 0" % rc)
    check(dt <= 3.5, "exit took %.1fs after SIGTERM with --http-timeout 2s" % dt)
    a.t.join(5)
    check(a.of("shutdown"), "no shutdown event")


# ---- exec ----

def test_exec_one_run_per_change(env):
    out = env.path("runs")
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, vol, "--action", "exec", "--exec-command", pid_appender(out))
    hashes = []
    for i in range(1, 4):
        h = update(env, vol, {"app.conf": "v%d\n" % i})
        hashes.append(h)
        wait_action(a, result="success", hash=h)
        wait_until(lambda: len(lines_of(out)) >= i, 5, "run %d of the command" % i)
    # A rewrite with identical content is no change.
    r = env.run([env.tool("awsim"), "--dir", vol, "--count", "3", "--noop"])
    check(r.returncode == 0, "awsim --noop: %r" % r.stderr)
    a.quiet(QUIET)
    runs = lines_of(out)
    check(len(runs) == 3 and len(set(runs)) == 3, "want 3 runs with distinct PIDs, got %r" % runs)
    check([e["hash"] for e in a.of("action")] == hashes,
          "action hashes %r, want %r" % ([e["hash"] for e in a.of("action")], hashes))
    check(all(e["action"] == "exec" and e["attempt"] == 1 for e in a.of("action")),
          "unexpected action events %r" % a.of("action"))


def test_exec_failure_retries(env):
    out, ok_flag = env.path("runs"), env.path("ok")
    vol = volume(env, {"app.conf": "v0\n"})
    cmd = 'sh -c "echo $$ >> %s; test -e %s || exit 3"' % (out, ok_flag)
    a = start(env, vol, "--action", "exec", "--exec-command", cmd,
              "--retry-initial", "100ms", "--retry-max", "300ms")
    want = update(env, vol, {"app.conf": "v1\n"})
    a.wait_event("retry", count=3)
    fails = actions(a, result="failure")
    check(len(fails) >= 3, "want >= 3 failures, got %r" % fails)
    check(all("status 3" in e.get("error", "") and e["hash"] == want for e in fails),
          "failure events should name exit status 3: %r" % fails)
    check([e["attempt"] for e in fails] == list(range(1, len(fails) + 1)),
          "attempts not counting up: %r" % [e["attempt"] for e in fails])
    open(ok_flag, "w").close()
    ok = wait_action(a, result="success")
    check(ok["hash"] == want == env.hash_of(vol), "success on %r, want %s" % (ok, want))
    a.quiet(QUIET)
    n_attempts = len(a.of("action"))
    check(len(lines_of(out)) == n_attempts,
          "command ran %d times for %d logged attempts" % (len(lines_of(out)), n_attempts))
    check(len(a.of("retry")) == n_attempts - 1, "retry events %d for %d attempts" % (len(a.of("retry")), n_attempts))


# ---- signal ----

def test_change_before_process_exists(env):
    pid_file, out = env.path("app.pid"), env.path("hups")
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, vol, "--action", "signal", "--pid-file", pid_file,
              "--retry-initial", "100ms", "--retry-max", "300ms")
    want = update(env, vol, {"app.conf": "v1\n"})
    a.wait_event("retry", count=2)
    fails = actions(a, result="failure")
    check(fails and all(pid_file in e.get("error", "") for e in fails),
          "failures should name the pid file: %r" % fails)
    p = hupcount(env, pid_file, out)
    ok = wait_action(a, result="success")
    check(ok["hash"] == want, "success on %s, want %s" % (ok["hash"], want))
    a.quiet(QUIET)
    check(hups_received(p, out) == 1, "hupcount got %d SIGHUPs, want 1" % len(lines_of(out)))


def test_rules_mixing_actions(env):
    pid_file, hups, runs = env.path("app.pid"), env.path("hups"), env.path("runs")
    files = {"app.conf": "c0\n", "jvm.options": "-Xmx1g\n", "readme.txt": "r0\n"}
    vol = volume(env, files)
    p = hupcount(env, pid_file, hups)
    a = start(env, vol, "--action", "none", "--rule", "*.conf=signal", "--rule", "*/jvm.options=exec",
              "--pid-file", pid_file, "--exec-command", pid_appender(runs))

    def step(changes, want_actions):
        files.update(changes)
        h = update(env, vol, files)
        for act in want_actions:
            wait_action(a, result="success", hash=h, action=act)
        a.quiet(0.5)
        got = sorted(e["action"] for e in actions(a, hash=h))
        check(got == sorted(want_actions), "change %r: actions %r, want %r" % (changes, got, want_actions))

    step({"app.conf": "c1\n"}, ["signal"])
    check(lines_of(runs) == [], "exec ran for a .conf change")
    step({"jvm.options": "-Xmx2g\n"}, ["exec"])
    check(len(lines_of(runs)) == 1, "exec runs after the jvm.options change: %r" % lines_of(runs))
    step({"readme.txt": "r1\n"}, ["none"])
    step({"app.conf": "c2\n", "jvm.options": "-Xmx3g\n"}, ["exec", "signal"])
    check(len(lines_of(runs)) == 2, "exec runs at the end: %r" % lines_of(runs))
    check(hups_received(p, hups) == 2, "hupcount got %d SIGHUPs, want 2" % len(lines_of(hups)))


# ---- coalescing ----

def test_burst_is_debounced(env):
    """A burst of writes is one debounce window. The writer here is the
    AtomicWriter simulator, whose swaps are acted on at once by default
    (watch/awlayout.c, tests/integration/test_swap.py): --debounce-swaps
    makes them wait out --debounce like any other writer's."""
    runs = env.path("runs")
    vol = volume(env, {"key-0": "x\n"})
    a = start(env, vol, "--action", "exec", "--exec-command", pid_appender(runs), "--debounce-swaps=true",
              debounce="200ms")
    r = env.run([env.tool("awsim"), "--dir", vol, "--count", "100", "--files", "4"])
    check(r.returncode == 0, "awsim --count 100: %r" % r.stderr)
    want = env.hash_of(vol)
    wait_action(a, result="success", hash=want)
    a.quiet(QUIET)
    acts = a.of("action")
    check(1 <= len(acts) <= 5, "100 updates gave %d actions, want <= 5: %r" % (len(acts), acts))
    check(acts[-1]["hash"] == want, "last action on %s, final content is %s" % (acts[-1]["hash"], want))
    check(len(lines_of(runs)) == len(acts), "%d runs for %d actions" % (len(lines_of(runs)), len(acts)))


def test_min_interval_spaces_actions(env):
    runs = env.path("runs")
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, vol, "--action", "exec", "--exec-command", pid_appender(runs), "--min-interval", "1s")
    for i in range(1, 6):
        want = update(env, vol, {"app.conf": "v%d\n" % i})
        time.sleep(0.1)
    wait_action(a, result="success", hash=want, timeout=15)
    a.quiet(1.5)
    acts = a.of("action")
    check(len(acts) >= 2, "5 changes over ~0.5s gave %d action(s): %r" % (len(acts), acts))
    check(acts[-1]["hash"] == want, "last action on %s, final content is %s" % (acts[-1]["hash"], want))
    # Start of each action = log time - its duration; log times have ms
    # resolution, hence the 5 ms of slack.
    starts = [event_time(e) - e["duration_ms"] / 1000.0 for e in acts]
    gaps = [b - a_ for a_, b in zip(starts, starts[1:])]
    check(all(g >= 1.0 - 0.005 for g in gaps), "actions spaced %r s apart, want >= 1s" % gaps)
    check(len(lines_of(runs)) == len(acts), "%d runs for %d actions" % (len(lines_of(runs)), len(acts)))


# ---- live configuration from the annotations file ----

def test_annotations_switch_action(env):
    runs = env.path("runs")
    vol = volume(env, {"app.conf": "v0\n"})
    adir, afile = annotations_volume(env, {"action": "none"})
    a = start(env, vol, "--action", "none", "--annotations", afile)
    h1 = update(env, vol, {"app.conf": "v1\n"})
    wait_action(a, hash=h1, action="none", result="success")
    env.awsim(adir, {"annotations": annotations_text({"action": "exec", "exec-command": pid_appender(runs)})})
    cfg = a.wait_event("config")
    check(cfg[0].get("action") == "exec", "config event %r, want action exec" % cfg[0])
    h2 = update(env, vol, {"app.conf": "v2\n"})
    wait_action(a, hash=h2, action="exec", result="success")
    wait_until(lambda: lines_of(runs), 5, "the exec command's run")
    a.quiet(0.5)
    check(len(lines_of(runs)) == 1 and len(a.of("action")) == 2,
          "runs %r, actions %r" % (lines_of(runs), a.of("action")))


# Each bad annotations file, and what the error must name. Every file also
# sets action="none": were it partly applied, exec would stop running.
BAD_ANNOTATIONS = [
    ('reload-agent.io/action="none"\nreload-agent.io/debounce="5x"\n', ["debounce", "5x"]),
    ('reload-agent.io/action="none"\nreload-agent.io/nope="1"\n', ["nope"]),
    ('reload-agent.io/action="none"\nreload-agent.io/exec-command="sh -c \\"x\n', ["exec-command", "line 2"]),
]


def test_annotations_bad_values_keep_last_good(env):
    runs = env.path("runs")
    vol = volume(env, {"app.conf": "v0\n"})
    good = annotations_text({"action": "exec", "exec-command": pid_appender(runs)})
    adir, afile = annotations_volume(env, {"action": "exec", "exec-command": pid_appender(runs)})
    a = start(env, vol, "--action", "none", "--annotations", afile, "--listen", "127.0.0.1:0")
    port = a.of("ready")[0]["port"]
    for i, (text, names) in enumerate(BAD_ANNOTATIONS):
        env.awsim(adir, {"annotations": text})
        err = a.wait_event("config-error", count=i + 1)[i].get("error", "")
        for n in names:
            check(n in err, "config-error %r does not name %r" % (err, n))
        h = update(env, vol, {"app.conf": "v%d\n" % (i + 1)})
        wait_action(a, hash=h, action="exec", result="success")
    check(not a.of("config"), "a bad annotations file was applied: %r" % a.of("config"))
    wait_until(lambda: len(lines_of(runs)) == 3, 5, "3 exec runs under the last good config")
    _, body = http_get("http://127.0.0.1:%d/metrics" % port)
    check(re.search(rb"^reload_agent_config_errors_total 3(\.0)?$", body, re.M),
          "config_errors_total is not 3:\n%s" % body.decode())
    # A good file again is applied.
    env.awsim(adir, {"annotations": good + 'reload-agent.io/debounce="60ms"\n'})
    a.wait_event("config")


def test_annotations_bad_values_fatal_at_start(env):
    vol = volume(env, {"app.conf": "v0\n"})
    for i, (text, names) in enumerate(BAD_ANNOTATIONS):
        afile = env.path("annotations-%d" % i)
        with open(afile, "w") as f:
            f.write(text)
        r = env.run([env.binary, "run", "--watch", vol, "--annotations", afile], timeout=10)
        err = r.stderr.decode(errors="replace")
        check(r.returncode == 2, "bad file %d: exit status %r, want 2 (stderr %r)" % (i, r.returncode, err))
        for n in names:
            check(n in err, "bad file %d: stderr %r does not name %r" % (i, err, n))


# ---- modes ----

def test_dry_run_performs_nothing(env):
    runs, pid_file, hups = env.path("runs"), env.path("app.pid"), env.path("hups")
    vol = volume(env, {"app.conf": "v0\n", "jvm.options": "x\n"})
    p = hupcount(env, pid_file, hups)
    a = start(env, vol, "--action", "exec", "--exec-command", pid_appender(runs),
              "--rule", "*.conf=signal", "--pid-file", pid_file, "--dry-run")
    h = update(env, vol, {"app.conf": "v1\n", "jvm.options": "y\n"})
    for act in ("exec", "signal"):
        e = wait_action(a, hash=h, action=act)
        check(e.get("dry_run") is True and e["result"] == "success", "dry-run event %r" % e)
    a.quiet(QUIET)
    check(not os.path.exists(runs), "the command ran in dry-run mode")
    check(hups_received(p, hups) == 0, "a signal was sent in dry-run mode")


def test_on_start(env):
    vol = volume(env, {"app.conf": "v0\n"})
    base = env.hash_of(vol)
    runs = {m: env.path("runs-" + m) for m in ("reload", "skip", "default")}
    agents = {}
    for m, out in runs.items():
        extra = [] if m == "default" else ["--on-start", m]
        agents[m] = start(env, vol, "--action", "exec", "--exec-command", pid_appender(out), *extra)
    wait_action(agents["reload"], hash=base, action="exec", result="success")
    time.sleep(QUIET)
    check(len(lines_of(runs["reload"])) == 1 and len(agents["reload"].of("action")) == 1,
          "--on-start reload: runs %r" % lines_of(runs["reload"]))
    for m in ("skip", "default"):
        check(not agents[m].of("action") and not lines_of(runs[m]),
              "on-start %s acted: %r" % (m, agents[m].of("action")))


# ---- the HTTP server ----

def metric(body, name, labels=""):
    """Value of one sample in Prometheus text, e.g. metric(b, "x_total", 'a="b"')."""
    pat = "^" + re.escape(name) + (r"\{" + re.escape(labels) + r"\}" if labels else "") + r" (\S+)$"
    m = re.search(pat.encode(), body, re.M)
    return float(m.group(1)) if m else None


def test_endpoints(env):
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, vol, "--action", "exec", "--exec-command", "true", "--listen", "127.0.0.1:0")
    base = "http://127.0.0.1:%d" % a.of("ready")[0]["port"]
    check(http_get(base + "/healthz")[0] == 200, "/healthz not 200")
    check(http_get(base + "/readyz")[0] == 200, "/readyz not 200 after ready")
    check(http_get(base + "/no-such-path")[0] == 404, "unknown path not 404")
    st, m0 = http_get(base + "/metrics")
    check(st == 200, "/metrics status %d" % st)
    for name, typ in [("reload_agent_reloads_total", "counter"), ("reload_agent_changes_total", "counter"),
                      ("reload_agent_watch_events_total", "counter"),
                      ("reload_agent_config_errors_total", "counter"),
                      ("reload_agent_last_reload_successful", "gauge"),
                      ("reload_agent_last_reload_success_timestamp_seconds", "gauge"),
                      ("reload_agent_action_duration_seconds", "histogram")]:
        check(re.search(("^# HELP %s \\S" % name).encode(), m0, re.M), "no HELP line for %s" % name)
        check(("# TYPE %s %s\n" % (name, typ)).encode() in m0, "no TYPE %s line for %s" % (typ, name))

    t_change = time.time()
    want = update(env, vol, {"app.conf": "v1\n"})
    wait_action(a, hash=want, result="success")
    _, m1 = http_get(base + "/metrics")
    ok_label = 'action="exec",result="success"'
    check(metric(m1, "reload_agent_changes_total") == (metric(m0, "reload_agent_changes_total") or 0) + 1,
          "changes_total did not grow by one")
    check(metric(m1, "reload_agent_reloads_total", ok_label) == (metric(m0, "reload_agent_reloads_total", ok_label) or 0) + 1,
          "reloads_total{%s} did not grow by one:\n%s" % (ok_label, m1.decode()))
    check(metric(m1, "reload_agent_watch_events_total") > (metric(m0, "reload_agent_watch_events_total") or 0),
          "watch_events_total did not grow")
    check(metric(m1, "reload_agent_action_duration_seconds_count") ==
          (metric(m0, "reload_agent_action_duration_seconds_count") or 0) + 1, "duration histogram count")
    check(metric(m1, "reload_agent_last_reload_successful") == 1, "last_reload_successful is not 1")
    ts = metric(m1, "reload_agent_last_reload_success_timestamp_seconds")
    check(ts is not None and t_change - 2 <= ts <= time.time() + 2, "success timestamp %r" % ts)

    st, body = http_get(base + "/status")
    check(st == 200, "/status status %d" % st)
    s = json.loads(body)
    check([r.get("path") for r in s.get("roots", [])] == [vol], "roots %r" % s.get("roots"))
    check(s.get("hash") == want and s.get("applied_hash") == want, "hashes in /status: %r" % s)
    # no file is rollout-class here: the rollout hash is that of no files
    check(s.get("rollout_hash") == hashlib.sha256(b"").hexdigest(), "rollout_hash %r" % s.get("rollout_hash"))
    check(s.get("last_action", {}).get("action") == "exec" and s["last_action"].get("result") == "success",
          "last_action %r" % s.get("last_action"))
    check(s.get("pending_retry", {}).get("pending") is False, "pending_retry %r" % s.get("pending_retry"))
    check(s.get("last_error") == "", "last_error %r after a success" % s.get("last_error"))


def test_status_and_metrics_on_failure(env):
    vol = volume(env, {"app.conf": "v0\n"})
    base_hash = env.hash_of(vol)
    a = start(env, vol, "--action", "exec", "--exec-command", 'sh -c "exit 3"', "--listen", "127.0.0.1:0",
              "--retry-initial", "2s", "--retry-max", "2s")
    base = "http://127.0.0.1:%d" % a.of("ready")[0]["port"]
    want = update(env, vol, {"app.conf": "v1\n"})
    wait_action(a, hash=want, result="failure")
    a.wait_event("retry")
    s = json.loads(http_get(base + "/status")[1])
    check(s.get("hash") == want and s.get("applied_hash") == base_hash,
          "after a failure: hash %r applied_hash %r, want %s / %s" % (s.get("hash"), s.get("applied_hash"),
                                                                    want, base_hash))
    pr = s.get("pending_retry", {})
    check(pr.get("pending") is True and pr.get("attempt", 0) >= 1 and 0 < pr.get("due_in_ms", 0) <= 2000,
          "pending_retry %r" % pr)
    check(s.get("last_action", {}).get("result") == "failure", "last_action %r" % s.get("last_action"))
    check("status 3" in (s.get("last_error") or ""), "last_error %r" % s.get("last_error"))
    _, m = http_get(base + "/metrics")
    check(metric(m, "reload_agent_reloads_total", 'action="exec",result="failure"') == 1,
          "reloads_total failure sample:\n%s" % m.decode())
    check(metric(m, "reload_agent_last_reload_successful") == 0, "last_reload_successful is not 0")


def test_signal_follows_a_restarted_app(env):
    """With --pid-file the agent keeps the last target's pidfd; when the app
    restarts (a new process writes the same pid file) the next change must
    reach the new process, and a stale pid file naming a dead process must be
    a failure, never a silent success."""
    pid_file = env.path("app.pid")
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, vol, "--action", "signal", "--pid-file", pid_file,
              "--retry-initial", "100ms", "--retry-max", "300ms")
    first = hupcount(env, pid_file, env.path("hups-1"))
    update(env, vol, {"app.conf": "v1\n"})
    wait_action(a, result="success")
    check(hups_received(first, env.path("hups-1")) == 1, "the first app should get 1 SIGHUP")

    # The pid file still names the first, now dead, process: a failure.
    h2 = update(env, vol, {"app.conf": "v2\n"})
    fail = wait_action(a, result="failure", hash=h2)
    check(pid_file in fail.get("error", ""), "the failure should name the pid file: %r" % fail)

    # The app restarts: the retry reaches the new process.
    second = hupcount(env, pid_file, env.path("hups-2"))
    ok = wait_action(a, result="success", hash=h2)
    check(ok["hash"] == h2, "success on %s, want %s" % (ok["hash"], h2))
    h3 = update(env, vol, {"app.conf": "v3\n"})
    wait_action(a, result="success", hash=h3)
    a.quiet(QUIET)
    check(hups_received(second, env.path("hups-2")) == 2,
          "the restarted app should get 2 SIGHUPs (the retried change and the next)")


def test_signal_follows_a_pid_file_rewritten_in_place(env):
    """The agent skips re-reading a pid file whose stat is unchanged. A pid
    file rewritten in place (same inode, same size) to name another live
    process must still move the signal to that process, while the first
    one lives on."""
    pid_file = env.path("app.pid")
    first = hupcount(env, pid_file, env.path("hups-1"))
    time.sleep(2.2)  # old enough for the agent to trust its stat
    vol = volume(env, {"app.conf": "v0\n"})
    a = start(env, vol, "--action", "signal", "--pid-file", pid_file)
    wait_action(a, result="success", hash=update(env, vol, {"app.conf": "v1\n"}))
    wait_action(a, result="success", hash=update(env, vol, {"app.conf": "v2\n"}))
    second = hupcount(env, env.path("b.pid"), env.path("hups-2"))
    with open(env.path("b.pid")) as f:
        pid_b = f.read().strip()
    with open(pid_file) as f:
        old = f.read()
    text = pid_b.rjust(len(old) - 1) + "\n"  # same size where it can be (spaces are allowed)
    ino = os.stat(pid_file).st_ino
    with open(pid_file, "r+") as f:  # in place: same inode
        f.truncate(0)
        f.write(text)
    check(os.stat(pid_file).st_ino == ino, "the pid file was not rewritten in place")
    wait_action(a, result="success", hash=update(env, vol, {"app.conf": "v3\n"}))
    a.quiet(QUIET)
    check(hups_received(second, env.path("hups-2")) == 1, "the second app should get 1 SIGHUP")
    check(hups_received(first, env.path("hups-1")) == 2,
          "the first app should keep its 2 SIGHUPs and get no more")


def test_live_switch_away_from_a_failing_action(env):
    """A reload failing with exec; the annotations switch the action to
    signal (and drop the command): the pending change is delivered by
    signal, the failed exec is not retried any more, and the agent lives on
    (a retry of an action the configuration no longer has once crashed it)."""
    pid_file, hups = env.path("app.pid"), env.path("hups")
    runs = env.path("runs")
    p = hupcount(env, pid_file, hups)
    vol = volume(env, {"app.conf": "v0\n"})
    ann, ann_file = annotations_volume(env, {"action": "exec",
                                             "exec-command": "sh -c 'echo run >> %s; exit 3'" % runs})
    a = start(env, vol, "--annotations", ann_file, "--pid-file", pid_file,
              "--retry-initial", "100ms", "--retry-max", "200ms")
    want = update(env, vol, {"app.conf": "v1\n"})
    a.wait_event("retry", count=2)
    env.awsim(ann, {"annotations": annotations_text({"action": "signal"})})
    a.wait_event("config")
    ok = wait_action(a, action="signal", result="success")
    check(ok["hash"] == want, "signal on %s, want %s" % (ok["hash"], want))
    n = len(lines_of(runs))
    a.quiet(QUIET)
    check(len(lines_of(runs)) == n, "the exec action kept being retried after the switch")
    check(not [e for e in actions(a, action="exec") if e.get("time", "") > ok.get("time", "")],
          "exec ran again after the switch")
    check(a.stop() == 0, "the agent did not exit cleanly after the switch")
    check(hups_received(p, hups) == 1, "the app should get exactly 1 SIGHUP")
