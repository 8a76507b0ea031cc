"""restart-pod with the real binary: the process exits with the configured
code after --restart-delay, having written its record into --state-dir; the
agent that starts again on the same state reports the record and does not
act on the content it finds (not even with --on-start reload); without the
rule the action is refused at start (exit 2) and on a live switch (the last
good configuration stays); on a full state directory it never exits (the
record could not be written: the agent that starts again could not tell a
pod restart from a crash, and would restart the pod again, and again) and
retries until the record is written. The kubelet's part is shown on the real
cluster (tests/e2e/test_restart_pod.py)."""
import hashlib
import json
import os
import time

from tests.lib import agent as lib
from tests.lib.agent import annotations_text, annotations_volume, start, update, volume
from tests.lib.proc import check, wait_until

from tests.lib.agent import RESTART_POD_CODE as CODE, RESTART_POD_RULES as RULES
from tests.lib.agent import restart_pod_args


def test_restart_pod_exits_with_its_code_and_records_why(env):
    vol = volume(env, {"app.conf": "v0\n", "other": "x\n"})
    state = env.path("state")
    os.mkdir(state)
    a = start(env, vol, *restart_pod_args(state), "--restart-delay", "300ms")
    t0 = time.monotonic()
    want = update(env, vol, {"app.conf": "v1\n", "other": "x\n"})
    a.wait_event("restart-delay")
    wait_until(lambda: a.proc.poll() is not None, 15, "the agent to exit")
    check(time.monotonic() - t0 >= 0.3, "exited before --restart-delay")
    check(a.proc.returncode == CODE, "exit status %r, want %d" % (a.proc.returncode, CODE))
    ev = a.wait_event("restart-pod")[0]
    check(ev["exit_code"] == CODE and ev["hash"] == want and ev["recorded"] is True, "restart-pod event %r" % ev)
    with open(os.path.join(state, "restart-pod.json")) as f:
        rec = json.load(f)
    check(rec["hash"] == want and rec["exit_code"] == CODE, "record %r" % rec)
    check(rec["files"] == os.path.join(vol, "app.conf"), "record names %r, want only app.conf" % rec["files"])

    # The agent that starts again (the kubelet restarted every container):
    # it reports the record once and takes what it finds as applied, even
    # with --on-start reload.
    b = start(env, vol, *restart_pod_args(state), "--restart-delay", "300ms", "--on-start", "reload")
    ev = b.wait_event("pod-restarted")[0]
    check(ev["hash"] == want and ev["exit_code"] == CODE and ev["files"] == rec["files"], "pod-restarted %r" % ev)
    check(not os.path.exists(os.path.join(state, "restart-pod.json")), "the record was not taken")
    b.quiet(1.0)
    check(b.proc.poll() is None and not b.of("action"), "the agent acted again: %r" % b.of("action"))
    # the next change restarts the pod again
    update(env, vol, {"app.conf": "v2\n", "other": "x\n"})
    wait_until(lambda: b.proc.poll() is not None, 15, "the second agent to exit")
    check(b.proc.returncode == CODE, "exit status %r" % b.proc.returncode)


def test_restart_pod_refused_without_the_rule(env):
    vol = volume(env, {"app.conf": "v0\n"})
    r = env.run([env.binary, "run", "--watch", vol, "--action", "restart-pod", "--annotations", ""], timeout=10)
    err = r.stderr.decode(errors="replace")
    check(r.returncode == 2, "exit status %r, want 2 (%r)" % (r.returncode, err))
    check("restartPolicyRules" in err and "--restart-policy-rules" in err and "agent alone" in err,
          "the refusal does not say what is missing: %r" % err)
    # live: the switch is refused, the agent keeps its configuration and runs
    runs = env.path("runs")
    adir, afile = annotations_volume(env, {"action": "exec", "exec-command": 'sh -c "echo x >> %s"' % runs})
    a = start(env, vol, "--annotations", afile)
    env.awsim(adir, {"annotations": annotations_text({"action": "restart-pod"})})
    e = a.wait_event("config-error")[0]
    check("restart-pod" in e["error"] and "restartPolicyRules" in e["error"], "config-error %r" % e)
    update(env, vol, {"app.conf": "v1\n"})
    a.wait_match("action", action="exec", result="success")
    check(a.proc.poll() is None, "the agent exited")


def test_restart_pod_never_exits_without_its_record(env):
    """Issue 24 G11: with the state directory full, the record cannot be
    written: the action fails (said so, retried with backoff) and the agent
    does not exit; once there is room, one exit, and the agent that starts
    again takes it for the pod restart and acts on nothing."""
    vol = volume(env, {"app.conf": "v0\n"})
    fs = lib.SmallFs(env, env.path("state"), 32)
    args = ["--watch", vol, "--debounce", "50ms", "--resync", "0"] + restart_pod_args(fs.path) + [
        "--restart-delay", "0", "--retry-initial", "200ms", "--retry-max", "400ms"]
    a = fs.agent(args)
    a.wait_event("ready", timeout=15)
    fs.fill()
    want = update(env, vol, {"app.conf": "v1\n"})
    fails = a.wait_for(lambda evs: (lambda l: l if len(l) >= 3 else None)(
        [e for e in evs if e.get("event") == "action" and e.get("result") == "failure"]), 15,
        "three failed attempts")
    check(a.proc.poll() is None, "the agent exited (%r) without its record" % a.proc.returncode)
    err = fails[0].get("error", "")
    check(fails[0]["action"] == "restart-pod" and "No space left on device" in err and
          "restart-pod.json" in err and "not restarting the pod" in err, "failure %r" % fails[0])
    check(not a.of("restart-pod"), "restart-pod logged as if it exited: %r" % a.of("restart-pod"))
    fs.free()
    wait_until(lambda: a.proc.poll() is not None, 15, "the agent to exit once there is room")
    check(a.proc.returncode == CODE, "exit status %r, want %d" % (a.proc.returncode, CODE))
    with open(fs.inside("restart-pod.json")) as f:
        check(json.load(f)["hash"] == want, "the record is not for %s" % want)
    b = fs.agent(args)
    b.wait_event("pod-restarted", timeout=15)
    b.quiet(1.0)
    check(b.proc.poll() is None and not b.of("action"), "the agent acted again: %r" % b.of("action"))


def test_a_restart_not_confirmed_leaves_the_change_unapplied(env):
    """Issue 24 U3: the exit does not advance the applied state: only the
    agent that starts again and takes the record (the pod restart) does.
    So when the record is not taken (here: damaged), the change the exit
    was for is not lost: the new agent acts on it again, once."""
    vol = volume(env, {"app.conf": "v0\n"})
    state = env.path("state")
    os.mkdir(state)
    args = restart_pod_args(state) + ["--restart-delay", "0"]
    a = start(env, vol, *args)
    update(env, vol, {"app.conf": "v1\n"})
    wait_until(lambda: a.proc.poll() is not None, 15, "the agent to exit")
    check(a.proc.returncode == CODE, "exit status %r" % a.proc.returncode)
    with open(os.path.join(state, "applied.json")) as f:
        digests = [x["sha256"] for x in json.load(f)["files"]]
    v0 = hashlib.sha256(b"v0\n").hexdigest()
    check(digests == [v0], "the exit advanced the applied state: %r" % digests)
    with open(os.path.join(state, "restart-pod.json"), "w") as f:
        f.write("{damaged")
    b = env.agent(["--watch", vol, "--debounce", "50ms", "--resync", "0"] + args)
    wait_until(lambda: b.proc.poll() is not None, 15, "the agent to act again")
    b.t.join(5)
    check(b.proc.returncode == CODE and not b.of("pod-restarted"),
          "exit %r, pod-restarted %r" % (b.proc.returncode, b.of("pod-restarted")))
    check(any("not taken for a pod restart" in e.get("msg", "") for e in b.events),
          "no warning about the record: %r" % b.lines)
    c = start(env, vol, *args)  # the record is good this time: taken, nothing to do
    c.wait_event("pod-restarted", timeout=15)
    c.quiet(1.0)
    check(c.proc.poll() is None and not c.of("action"), "acted again: %r" % c.of("action"))
    with open(os.path.join(state, "applied.json")) as f:
        digests = [x["sha256"] for x in json.load(f)["files"]]
    check(digests == [hashlib.sha256(b"v1\n").hexdigest()], "not committed: %r" % digests)
