"""restart-pod with the real binary: the process exits with the configured
code after --restart-delay, having written its record into --state-dir; the
agent that starts again on the same state reports the record and does not
act on the content it finds (not even with --on-start reload); without the
rule the action is refused at start (exit 2) and on a live switch (the last
good configuration stays). The kubelet's part is shown on the real cluster
(tests/e2e/test_restart_pod.py)."""
import json
import os
import time

from tests.lib.agent import annotations_text, annotations_volume, start, update, volume
from tests.lib.proc import check, wait_until

CODE = 91
RULES = json.dumps([{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [CODE]}}])


def restart_pod_args(state):
    return ["--action", "restart-pod", "--restart-pod-exit-code", str(CODE), "--restart-policy-rules", RULES,
            "--state-dir", state, "--annotations", ""]


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
