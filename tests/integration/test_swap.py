"""The swap path (issue 27 item 2, docs/fast-sync.md#the-agents-own-part-the-swap):
the agent acts on the kubelet's `..data` swap, AtomicWriter's commit point,
without waiting out --debounce; other writers are still debounced, and
--debounce-swaps restores the old behaviour.

Every test runs the real agent with a long --debounce (2 s) against
build/tools/hupcount (a CLOCK_MONOTONIC stamp per SIGHUP), and compares the
signal with the moment of the swap: awsim's --stamps (taken right before the
rename(2) of step 9), or time.monotonic() (the same clock) around a plain
write. The bounds are far from the figures (the agent answers a swap in a few
ms, docs/performance.md): a swap is acted on within half the debounce, a plain
write not before 90 % of it.
"""
import os
import signal
import time

from tests.lib.agent import hupcount, lines_of, start, volume
from tests.lib.proc import check, wait_until

DEBOUNCE_S = 2.0
FAST_BOUND_S = DEBOUNCE_S / 2  # a swap's action comes before this
SLOW_FLOOR_S = DEBOUNCE_S * 0.9  # a debounced action never comes before this


def app(env):
    """hupcount as the app; returns (its process, pid file, output file)."""
    pid_file, out = env.path("app.pid"), env.path("hups")
    p = hupcount(env, pid_file, out)
    wait_until(lambda: os.path.getsize(pid_file) > 0, 5, "hupcount's pid written")
    return p, pid_file, out


def hups(p, out):
    """Stops hupcount (by its PID) and returns its SIGHUP stamps, in s."""
    p.send_signal(signal.SIGTERM)
    p.wait(10)
    check(p.returncode == 0, "hupcount exit status %r" % p.returncode)
    return [int(x) / 1e9 for x in lines_of(out)]


def swap(env, vol, files, *opts):
    """One AtomicWriter update of vol; returns the stamp of its rename (s)."""
    st = env.path("stamps-%d" % len(os.listdir(env.tmp)))
    env.awsim(vol, files, "--stamps", st, *opts)
    return int(lines_of(st)[-1]) / 1e9


def agent(env, vol, pid_file, *extra):
    return start(env, vol, "--action", "signal", "--pid-file", pid_file, *extra,
                 debounce="%dms" % (DEBOUNCE_S * 1000))


def test_swap_is_acted_on_at_once(env):
    """Three swaps, each signalled once, each within the bound."""
    vol = volume(env, {"app.conf": "v0\n", "b.conf": "b0\n"})
    p, pid_file, out = app(env)
    a = agent(env, vol, pid_file)
    stamps = []
    for i in range(1, 4):
        stamps.append(swap(env, vol, {"app.conf": "v%d\n" % i, "b.conf": "b0\n"}))
        a.wait_event("action", count=i, timeout=10)
    a.quiet(DEBOUNCE_S + 0.5)  # the swap's later link events find nothing new
    got = hups(p, out)
    check(len(got) == 3, "%d SIGHUPs for 3 swaps, want 3" % len(got))
    for t, h in zip(stamps, got):
        check(0 <= h - t < FAST_BOUND_S, "swap -> signal %.3f s, want < %.1f s (debounce %.1f s)"
              % (h - t, FAST_BOUND_S, DEBOUNCE_S))


def test_swap_waits_for_a_new_keys_link(env):
    """A swap that adds a key, with the writer paused 300 ms after the
    rename (step 9) and before the new key's top-level link (step 10): the
    agent acts once, after the link, with the new key in the change, and
    still well before the debounce."""
    vol = volume(env, {"app.conf": "v0\n"})
    p, pid_file, out = app(env)
    a = agent(env, vol, pid_file)
    t = swap(env, vol, {"app.conf": "v1\n", "new.conf": "n1\n"}, "--pause-ms", "300")
    a.wait_event("action", timeout=10)
    a.quiet(DEBOUNCE_S + 0.5)
    changes = a.of("change")
    check(len(changes) == 1, "%d change events, want 1: %r" % (len(changes), changes))
    check(changes[0]["added"] == [vol + "/new.conf"], "added %r, want the new key"
          % changes[0].get("added"))
    got = hups(p, out)
    check(len(got) == 1, "%d SIGHUPs, want 1" % len(got))
    check(0.3 <= got[0] - t < FAST_BOUND_S + 0.3,
          "swap -> signal %.3f s, want after the 0.3 s pause and well before the debounce"
          % (got[0] - t))


def test_half_written_directory_never_triggers(env):
    """The writer's steps 5-8 (a new timestamped directory filled with the
    new bytes, then the ..data_tmp link) and a 1.5 s pause before the
    rename: no action until the rename, then one, with the new content."""
    vol = volume(env, {"app.conf": "v0\n"})
    p, pid_file, out = app(env)
    a = agent(env, vol, pid_file)
    ts = os.path.join(vol, "..2099_01_01_00_00_00.000000001")
    os.mkdir(ts, 0o755)
    with open(os.path.join(ts, "app.conf"), "wb") as f:
        f.write(b"v1")  # half of the new content
    a.quiet(0.5)
    with open(os.path.join(ts, "app.conf"), "ab") as f:
        f.write(b"\n")
    os.symlink(os.path.basename(ts), os.path.join(vol, "..data_tmp"))
    a.quiet(1.5)
    check(not a.of("change") and not a.of("action"), "acted before the commit: %r" % a.of("change"))
    os.rename(os.path.join(vol, "..data_tmp"), os.path.join(vol, "..data"))
    a.wait_event("action", timeout=10)
    a.quiet(DEBOUNCE_S + 0.5)
    check(len(a.of("action")) == 1, "%d actions, want 1" % len(a.of("action")))
    check(a.of("change")[0]["hash"] == env.hash_of(vol), "the change is not the final content")
    check(len(hups(p, out)) == 1, "want exactly one SIGHUP")


def test_other_writers_are_debounced(env):
    """A plain directory written in place: the action waits out the
    debounce."""
    vol = env.path("plain")
    os.mkdir(vol)
    with open(os.path.join(vol, "app.conf"), "w") as f:
        f.write("v0\n")
    p, pid_file, out = app(env)
    a = agent(env, vol, pid_file)
    t = time.monotonic()
    with open(os.path.join(vol, "app.conf"), "w") as f:
        f.write("v1\n")
    a.wait_event("action", timeout=10)
    got = hups(p, out)
    check(len(got) == 1 and got[0] - t >= SLOW_FLOOR_S,
          "write -> signal %r s, want one after >= %.1f s" % ([h - t for h in got], SLOW_FLOOR_S))


def test_debounce_swaps_restores_the_debounce(env):
    """--debounce-swaps=true: a swap waits out the debounce like any event."""
    vol = volume(env, {"app.conf": "v0\n"})
    p, pid_file, out = app(env)
    a = agent(env, vol, pid_file, "--debounce-swaps=true")
    t = swap(env, vol, {"app.conf": "v1\n"})
    a.wait_event("action", timeout=10)
    got = hups(p, out)
    check(len(got) == 1 and got[0] - t >= SLOW_FLOOR_S,
          "swap -> signal %r s, want one after >= %.1f s" % ([h - t for h in got], SLOW_FLOOR_S))
