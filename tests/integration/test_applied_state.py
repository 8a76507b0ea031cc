"""The applied state in --state-dir (run/statedir.c): an agent killed
and started again in the same pod acts on a change made while no agent
watched, once, and on nothing else; a record it cannot read is named in a
warning and replaced, never acted on; one another pod wrote is not used; a
save that fails (a full or an
unwritable directory) never leaves a stale record that a later agent acts
on again."""
import hashlib
import json
import os

from tests.lib import agent as lib
from tests.lib.agent import lines_of, pid_appender, start, update, volume, wait_action
from tests.lib.proc import check, wait_until


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
    check(rec["version"] == 2 and [x["path"] for x in rec["files"]] == [os.path.join(vol, "app.conf")],
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


def records(path, content):
    """1 if the applied state at path names a file whose bytes are content."""
    digest = hashlib.sha256(content.encode()).hexdigest()
    try:
        with open(path) as f:
            return any(x["sha256"] == digest for x in json.load(f)["files"])
    except (OSError, ValueError):
        return False


def running(fs_or_none, env, vol, args):
    """An agent on vol started through fs (a lib.SmallFs) or in a user
    namespace without capabilities (None), ready."""
    full = ["--watch", vol, "--debounce", "50ms", "--resync", "0"] + args
    a = fs_or_none.agent(full) if fs_or_none else lib.capless_agent(env, full)
    a.wait_event("ready", timeout=15)
    return a


def test_a_save_on_a_full_disk_leaves_no_stale_record(env):
    """Issue 24 G10 (ENOSPC): the save after the second change fails on a
    full tmpfs; the record of the first change is removed with it, so the
    agent that starts next does not run the action again for a change
    already applied (2 runs, not 3)."""
    vol = volume(env, {"app.conf": "v0\n"})
    runs = env.path("runs")
    fs = lib.SmallFs(env, env.path("state"), 32)
    a = running(fs, env, vol, exec_args(fs.path, runs))
    update(env, vol, {"app.conf": "v1\n"})
    wait_action(a, action="exec", result="success")
    lib.wait_until(lambda: records(fs.inside("applied.json"), "v1\n"), 10, "the record of v1")
    fs.fill()
    update(env, vol, {"app.conf": "v2\n"})
    wait_action(a, action="exec", result="success", attempt=1, hash=env.hash_of(vol))
    warn = a.wait_for(lambda evs: [e for e in evs if e.get("level") == "warn" and
                                   "applied.json" in e.get("msg", "")], 10, "the failed save")
    kill(a)
    check(len(lines_of(runs)) == 2, "runs: %r" % lines_of(runs))
    b = running(fs, env, vol, exec_args(fs.path, runs))
    b.quiet(1.0)
    check(not b.of("action") and len(lines_of(runs)) == 2,
          "acted again on a change already applied: runs %r" % lines_of(runs))
    check("No space left on device" in warn[0]["msg"] and "was removed" in warn[0]["msg"],
          "the warning does not say the old record was removed: %r" % warn[0]["msg"])


def test_an_unwritable_state_dir_is_not_trusted(env):
    """Issue 24 G10 (EACCES): the state directory turns read-only (mode
    0555; the agent holds no capability, as an agent that does not run as
    root) after the first change: the save of the second fails and the
    record of the first cannot be removed either. The next agent, which
    cannot write there, does not trust the record it finds (it may be
    stale, as here) and acts on nothing: 2 runs, not 3."""
    vol = volume(env, {"app.conf": "v0\n"})
    state, runs = env.path("state"), env.path("runs")
    os.mkdir(state, 0o755)
    a = running(None, env, vol, exec_args(state, runs))
    update(env, vol, {"app.conf": "v1\n"})
    wait_action(a, action="exec", result="success")
    lib.wait_until(lambda: records(os.path.join(state, "applied.json"), "v1\n"), 10, "the record of v1")
    os.chmod(state, 0o555)
    update(env, vol, {"app.conf": "v2\n"})
    wait_action(a, action="exec", result="success", hash=env.hash_of(vol))
    warn = a.wait_for(lambda evs: [e for e in evs if e.get("level") == "warn" and
                                   "applied.json" in e.get("msg", "")], 10, "the failed save")
    check("Permission denied" in warn[0]["msg"], "warning %r" % warn[0]["msg"])
    kill(a)
    check(records(os.path.join(state, "applied.json"), "v1\n"), "the stale record of v1 is gone")
    b = running(None, env, vol, exec_args(state, runs))
    b.quiet(1.0)
    check(not b.of("action") and len(lines_of(runs)) == 2,
          "acted again on a change already applied: runs %r" % lines_of(runs))
    warn = [e for e in b.events if e.get("level") == "warn" and "not used" in e.get("msg", "")]
    check(warn and state in warn[0]["msg"], "no warning says the record is not used: %r" % b.lines)


def not_used(a, runs, says):
    """a, once ready, acts on nothing (runs holds the one run of web-a) and
    warns that the record is another pod's, saying `says`."""
    a.wait_event("ready", timeout=15)
    a.quiet(1.0)
    check(not a.of("action") and len(lines_of(runs)) == 1,
          "acted on another pod's record: runs %r" % lines_of(runs))
    warn = [e for e in a.events if e.get("level") == "warn" and "another pod" in e.get("msg", "")]
    check(warn and says in warn[0]["msg"], "no warning saying %r: %r" % (says, a.lines))


def test_a_record_of_another_pod_is_not_used(env):
    """Issue 24 U2: a record names the pod that wrote it. In a state
    directory that outlives pods (a volume shared by mistake), the record of
    pod web-a is not used by pod web-b, nor by an agent of the same name in
    another sandbox (network namespace): each takes the content it finds as
    applied and says why. Without the names both acted on a change that
    pod had never seen (3 runs instead of 1)."""
    vol = volume(env, {"app.conf": "v0\n"})
    state, runs = env.path("state"), env.path("runs")
    os.mkdir(state)
    full = ["--watch", vol, "--debounce", "50ms", "--resync", "0"] + exec_args(state, runs)
    a = env.agent(full, {"POD_NAME": "web-a"})
    a.wait_event("ready", timeout=15)
    update(env, vol, {"app.conf": "v1\n"})
    wait_action(a, action="exec", result="success")
    kill(a)
    with open(os.path.join(state, "applied.json")) as f:
        check(json.load(f)["pod"]["name"] == "web-a", "the record does not name its pod")

    update(env, vol, {"app.conf": "v2\n"})
    b = env.agent(full, {"POD_NAME": "web-b"})
    not_used(b, runs, "pod web-a, this one is web-b")
    kill(b)

    update(env, vol, {"app.conf": "v3\n"})
    c = lib.wrapped_agent(env, "netns.sh", 'exec unshare -Urn -- %s "$@"\n' % env.binary, full,
                          {"POD_NAME": "web-b"})
    not_used(c, runs, "(sandbox ")
