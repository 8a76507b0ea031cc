"""Configuration errors at start and on live updates (issue 9 F6, F7, F8, F12):
every bad value is refused with exit status 2 at start, and on a live
annotations update with a config-error that keeps the last good
configuration; an error that quotes a hostile value never forges a log line."""
import json
import os
import re

from tests.lib.agent import volume
from tests.lib.proc import check, http_get, wait_until



def annotations_text(settings):
    """The downward-API annotations file for {flag: value}, each value
    Go-quoted (JSON string escapes are valid Go escapes), so a value may hold
    newlines and other control characters."""
    return "".join("reload-agent.io/%s=%s\n" % (k, json.dumps(v)) for k, v in settings.items())


# A text log line: time, level (padded to 5), then the rest.
TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (debug|info |warn |error) \S")
FORGED = "2026-12-03T00:00:00.000Z info  [action] forged action=exec result=success"
FORGED_JSON = '{"time":"2026-12-03T00:00:00.000Z","level":"info","event":"action","msg":"forged"}'


def lines_of_agent(a):
    with a.cond:
        return list(a.lines)


def test_annotation_value_cannot_forge_a_log_line(env):
    """A live annotation whose value holds a newline and then a whole log
    line (text and JSON): each record stays one line, in both formats."""
    vol = volume(env, {"app.conf": "v0\n"})
    for fmt in ("text", "json"):
        adir = volume(env, {"annotations": annotations_text({"action": "none"})}, name="podinfo-" + fmt)
        afile = os.path.join(adir, "annotations")
        a = env.agent(["--watch", vol, "--debounce", "50ms", "--resync", "0", "--annotations", afile,
                       "--log-format", fmt])
        wait_until(lambda: any("ready" in l for l in lines_of_agent(a)), 15, "the agent's ready line")
        evil = "5x\n" + FORGED + "\n" + FORGED_JSON + "\r\n"
        env.awsim(adir, {"annotations": annotations_text({"action": "none", "debounce": evil})})
        wait_until(lambda: any("config-error" in l and "debounce" in l for l in lines_of_agent(a)), 10,
                   "a config-error naming --debounce")
        a.stop()
        lines = lines_of_agent(a)
        for l in lines:
            check(not l.startswith(FORGED) and not l.startswith(FORGED_JSON),
                  "%s format: a forged line in the log: %r" % (fmt, l))
            if fmt == "text":
                check(TEXT_LINE.match(l), "text format: a line that is not a log record: %r" % l)
        if fmt == "json":
            check(not a.bad_lines, "json format: lines that are not JSON: %r" % a.bad_lines)
            err = a.of("config-error")[0]
            check("debounce" in err["error"] and "5x\\n" + FORGED in err["error"],
                  "the config-error does not quote the value Go-style: %r" % err)


def test_start_error_is_one_line(env):
    """The same value at start: exit 2, and stderr is the one error line."""
    vol = volume(env, {"app.conf": "v0\n"})
    afile = env.path("annotations")
    with open(afile, "w") as f:
        f.write(annotations_text({"debounce": "5x\n" + FORGED}))
    r = env.run([env.binary, "run", "--watch", vol, "--annotations", afile], timeout=10)
    err = r.stderr.decode(errors="replace")
    check(r.returncode == 2, "exit status %r, want 2 (stderr %r)" % (r.returncode, err))
    check(err.count("\n") == 1 and err.startswith("reload-agent: ") and "debounce" in err,
          "stderr is not one error line naming the option: %r" % err)


HUGE = "2562047h47m16.854775807s"  # the largest duration Go (and val_duration) accepts
DURATIONS = ["debounce", "resync", "http-timeout", "exec-timeout", "rollout-jitter",
             "restart-timeout", "retry-initial", "retry-max", "min-interval", "sched-slice"]


def test_out_of_range_duration_refused_at_start(env):
    """Issue 9 F6: the largest duration overflowed the ns->ms conversions
    (UBSan died); --sched-slice took 1h. Exit 2, naming option and range."""
    vol = volume(env, {"app.conf": "v0\n"})
    cases = [(opt, HUGE) for opt in DURATIONS] + [("sched-slice", "1h"), ("resync", "1ms")]
    for opt, val in cases:
        r = env.run([env.binary, "run", "--watch", vol, "--" + opt, val], timeout=5)
        err = r.stderr.decode(errors="replace")
        check(r.returncode == 2, "--%s %s: exit status %r, want 2 (stderr %r)" % (opt, val, r.returncode, err))
        check("--%s" % opt in err and "out of range" in err and " to " in err,
              "--%s %s: stderr does not name the option and its range: %r" % (opt, val, err))


def test_out_of_range_duration_refused_live(env):
    """The same values from the annotations file while running: config-error,
    and the last good configuration (debounce 50ms) stays in force."""
    vol = volume(env, {"app.conf": "v0\n"})
    adir = volume(env, {"annotations": annotations_text({"action": "none"})}, name="podinfo")
    a = env.agent(["--watch", vol, "--debounce", "50ms", "--resync", "0", "--action", "none",
                   "--annotations", os.path.join(adir, "annotations")])
    a.wait_event("ready", timeout=15)
    bad = [("debounce", HUGE), ("sched-slice", "1h"), ("retry-max", HUGE)]
    for i, (opt, val) in enumerate(bad):
        env.awsim(adir, {"annotations": annotations_text({"action": "none", opt: val})})
        err = a.wait_event("config-error", count=i + 1)[i].get("error", "")
        check("reload-agent.io/" + opt in err and "out of range" in err,
              "config-error %r does not name %s and its range" % (err, opt))
    check(not a.of("config"), "an out-of-range value was applied: %r" % a.of("config"))
    env.awsim(vol, {"app.conf": "v1\n"})
    h = env.hash_of(vol)
    a.wait_match("action", timeout=5, hash=h, action="none", result="success")


# Issue 9 F7: values that were accepted, then failed on every attempt.
BAD_VALUES = [
    ("exec-command", 'sh -c "echo unterminated', "unterminated double quote"),
    ("exec-command", "kill -HUP 1 \\", "trailing backslash"),
    ("hash-annotation", "example.com/config/hash", "annotation key"),
    ("hash-annotation", "-config-hash", "annotation key"),
]


def test_unusable_values_refused_at_start(env):
    vol = volume(env, {"app.conf": "v0\n"})
    for opt, val, why in BAD_VALUES:
        r = env.run([env.binary, "run", "--watch", vol, "--action", "exec", "--exec-command", "true",
                     "--" + opt, val], timeout=5)
        err = r.stderr.decode(errors="replace")
        check(r.returncode == 2, "--%s %r: exit status %r, want 2 (stderr %r)" % (opt, val, r.returncode, err))
        check("--" + opt in err and why in err, "--%s %r: stderr %r lacks the option or %r" % (opt, val, err, why))


def test_unusable_values_refused_live(env):
    """Live: config-error with the reason, and the last good configuration
    (exec of a command that works) keeps running on every change."""
    runs = env.path("runs")
    good = {"action": "exec", "exec-command": 'sh -c "echo $$ >> %s"' % runs}
    vol = volume(env, {"app.conf": "v0\n"})
    adir = volume(env, {"annotations": annotations_text(good)}, name="podinfo")
    a = env.agent(["--watch", vol, "--debounce", "50ms", "--resync", "0",
                   "--annotations", os.path.join(adir, "annotations")])
    a.wait_event("ready", timeout=15)
    for i, (opt, val, why) in enumerate(BAD_VALUES):
        bad = dict(good)
        bad[opt] = val
        env.awsim(adir, {"annotations": annotations_text(bad)})
        err = a.wait_event("config-error", count=i + 1)[i].get("error", "")
        check("reload-agent.io/" + opt in err and why in err,
              "config-error %r does not name %s and %r" % (err, opt, why))
        env.awsim(vol, {"app.conf": "v%d\n" % (i + 1)})
        h = env.hash_of(vol)
        a.wait_match("action", timeout=10, hash=h, action="exec", result="success")
    check(not a.of("config"), "a bad value was applied: %r" % a.of("config"))
    wait_until(lambda: len(open(runs).read().split()) == len(BAD_VALUES), 5, "one run per change")


def test_rollout_without_api_client_refused_live(env):
    """Issue 9 F8: an agent started without a Kubernetes API client (no
    rollout, no cluster) gets `action: rollout` or a rollout rule from its
    annotations: config-error, the last good configuration stays. At start
    the same configuration exits 2."""
    vol = volume(env, {"app.conf": "v0\n"})
    adir = volume(env, {"annotations": annotations_text({"action": "none"})}, name="podinfo")
    afile = os.path.join(adir, "annotations")
    a = env.agent(["--watch", vol, "--debounce", "50ms", "--resync", "0", "--events=false",
                   "--annotations", afile],
                  extra_env={"KUBERNETES_SERVICE_HOST": "", "KUBERNETES_SERVICE_PORT": ""})
    a.wait_event("ready", timeout=15)
    bad = [({"action": "rollout"}, "--action rollout"),
           ({"action": "none", "rule": "*.conf=rollout"}, '--rule "*.conf=rollout"')]
    for i, (settings, names) in enumerate(bad):
        env.awsim(adir, {"annotations": annotations_text(settings)})
        err = a.wait_event("config-error", count=i + 1)[i].get("error", "")
        check(names in err and "Kubernetes API" in err, "config-error %r does not name %r" % (err, names))
        env.awsim(vol, {"app.conf": "v%d\n" % (i + 1)})
        h = env.hash_of(vol)
        a.wait_match("action", timeout=10, hash=h, action="none", result="success")
    check(not a.of("config"), "rollout was applied without an API client: %r" % a.of("config"))
    check(not a.matching("action", action="rollout"), "a rollout was attempted")
    r = env.run([env.binary, "run", "--watch", vol, "--annotations", afile], timeout=5,
                env={"PATH": "/usr/bin:/bin"})
    check(r.returncode == 2, "at start: exit status %r, want 2 (stderr %r)" % (r.returncode, r.stderr))


def test_restart_only_change_is_logged_once(env):
    """Options read once at start (OPT_RESTART_ONLY): a live change is
    applied as configuration, logged once naming the option, and the server
    keeps its port; going back to the start value logs nothing."""
    vol = volume(env, {"app.conf": "v0\n"})
    adir = volume(env, {"annotations": annotations_text({"action": "none"})}, name="podinfo")
    a = env.agent(["--watch", vol, "--debounce", "50ms", "--resync", "0", "--listen", "127.0.0.1:0",
                   "--annotations", os.path.join(adir, "annotations")])
    port = a.wait_event("ready", timeout=15)[0]["port"]

    def warnings():
        return [e for e in a.events if e.get("level") == "warn" and "restarts" in e.get("msg", "")]

    env.awsim(adir, {"annotations": annotations_text({"action": "none", "listen": "127.0.0.1:1",
                                                      "pod-name": "web-0"})})
    a.wait_event("config", count=1)
    w = a.wait_for(lambda evs: warnings(), 5, "the restart-only warning")
    check(len(w) == 1 and w[0]["msg"].startswith("--pod-name, --listen changed"),
          "want one warning naming --pod-name and --listen: %r" % w)
    # Same values again plus a live option: applied, no second warning.
    env.awsim(adir, {"annotations": annotations_text({"action": "none", "listen": "127.0.0.1:1",
                                                      "pod-name": "web-0", "debounce": "60ms"})})
    a.wait_event("config", count=2)
    # Back to the start values: nothing to restart for.
    env.awsim(adir, {"annotations": annotations_text({"action": "none"})})
    a.wait_event("config", count=3)
    check(len(warnings()) == 1, "warned again: %r" % warnings())
    status, _ = http_get("http://127.0.0.1:%d/healthz" % port)
    check(status == 200, "/healthz on the start port answered %r" % status)
