"""The applied state in --state-dir (run/appliedstate.c): an agent killed
and started again in the same pod acts on a change made while no agent
watched, once, and on nothing else; a record it cannot read is named in a
warning and replaced, never acted on."""
import json
import os

from tests.lib.agent import lines_of, pid_appender, start, update, volume, wait_action
from tests.lib.proc import check


def exec_args(state, runs):
    return ["--action", "exec", "--exec-command", pid_appender(runs), "--state-dir", state, "--annotations", ""]


def kill(a):
    """SIGKILL to the agent's own PID (a crash: nothing is flushed)."""
    a.proc.kill()
    a.proc.wait(10)


def test_change_while_the_agent_was_away_is_acted_on_once(env):
    vol = volume(env, {"app.conf": "v0\n"})
    state, runs = env.path("state"), env.path("runs")
    os.mkdir(state)
    a = start(env, vol, *exec_args(state, runs))
    update(env, vol, {"app.conf": "v1\n"})
    wait_action(a, action="exec", result="success")
    check(len(lines_of(runs)) == 1, "runs after the first change: %r" % lines_of(runs))
    with open(os.path.join(state, "applied.json")) as f:
        rec = json.load(f)
    check(rec["version"] == 1 and [x["path"] for x in rec["files"]] == [os.path.join(vol, "app.conf")],
          "record %r" % rec)
    kill(a)

    # the kubelet writes while no agent runs; the next agent acts on it
    want = update(env, vol, {"app.conf": "v2\n"})
    b = start(env, vol, *exec_args(state, runs))
    ev = b.wait_event("applied-state")[0]
    check(ev["hash"] == want, "applied-state %r, want hash %s" % (ev, want))
    wait_action(b, action="exec", result="success")
    b.quiet(1.0)
    check(len(lines_of(runs)) == 2, "runs after the restart: %r, want 2" % lines_of(runs))
    kill(b)

    # nothing changed while away: nothing to do
    c = start(env, vol, *exec_args(state, runs))
    c.quiet(1.0)
    check(not c.of("applied-state") and not c.of("action"), "acted on an unchanged state: %r" % c.of("action"))
    check(len(lines_of(runs)) == 2, "runs: %r" % lines_of(runs))


def test_without_state_dir_the_content_at_start_is_the_baseline(env):
    """The control: the same kill and edit without --state-dir is not acted
    on (--on-start skip takes the content found as applied)."""
    vol = volume(env, {"app.conf": "v0\n"})
    runs = env.path("runs")
    args = ["--action", "exec", "--exec-command", pid_appender(runs), "--annotations", ""]
    a = start(env, vol, *args)
    kill(a)
    update(env, vol, {"app.conf": "v1\n"})
    b = start(env, vol, *args)
    b.quiet(1.0)
    check(not b.of("action") and not lines_of(runs), "acted without a state: %r" % lines_of(runs))


def test_unreadable_record_is_named_and_replaced(env):
    vol = volume(env, {"app.conf": "v0\n"})
    state, runs = env.path("state"), env.path("runs")
    os.mkdir(state)
    path = os.path.join(state, "applied.json")
    for bad in ('{"version": 1, "files": [{"path": "x"}]}', "not json", '{"version": 2, "files": []}'):
        with open(path, "w") as f:
            f.write(bad)
        a = start(env, vol, *exec_args(state, runs))
        warn = a.wait_for(lambda evs: [e for e in evs if e.get("level") == "warn" and path in e.get("msg", "")],
                          10, "a warning naming %s for %r" % (path, bad))
        check("not the applied state" in warn[0]["msg"], "warning %r" % warn[0])
        a.quiet(0.5)
        check(not a.of("action"), "acted on an unreadable record %r" % bad)
        with open(path) as f:
            rec = json.load(f)
        check([x["path"] for x in rec["files"]] == [os.path.join(vol, "app.conf")], "not replaced: %r" % rec)
        kill(a)
    check(not lines_of(runs), "runs: %r" % lines_of(runs))
