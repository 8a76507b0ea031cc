"""Idle cost: an agent with nothing to do makes no syscalls at all.

The agent is started on a kubelet-layout volume (build/tools/awsim), and once
it logged "ready" it is traced with `strace -f -p PID` for 10 s. With
--resync 0 there is no timer, so every thread must stay blocked in the
syscall it was in when strace attached (epoll_wait for the loop thread): the
trace may only show those in-progress calls ("<unfinished ...>",
"<detached ...>"), never a completed syscall, a signal or an exit. With
--resync 2s the loop thread must wake about 5 times in 10 s (3 to 7
epoll_wait returns), i.e. only for the resync timer.
"""
import os
import re
import time

from tests.lib.proc import check
from tests.lib.agent import TRACE_SECONDS, activity, trace

EPOLL_RETURN = re.compile(r"^\d+\s+(?:<\.\.\. )?epoll_p?wait\b.*\)\s+= ")


def idle_agent(env, resync):
    vol = env.path("vol")
    os.mkdir(vol)
    env.awsim(vol, {"app.conf": "x=1\n", "tls/tls.crt": "cert\n"}, "--seed", "1")
    a = env.agent(["--watch", vol, "--debounce", "50ms", "--resync", resync, "--action", "none"])
    a.wait_event("ready", timeout=15)
    time.sleep(0.5)  # let the startup work (baseline, first log lines) finish
    return a


def test_idle_makes_no_syscalls(env):
    a = idle_agent(env, "0")
    lines = trace(env, a.pid, "idle")
    check(lines, "strace recorded nothing at all (not even the blocked epoll_wait)")
    busy = activity(lines)
    check(not busy, "the idle agent made %d syscall(s) in %.0f s:\n  %s" %
          (len(busy), TRACE_SECONDS, "\n  ".join(busy[:40])))
    check(any("epoll_wait" in l or "epoll_pwait" in l for l in lines),
          "the loop thread was not blocked in epoll_wait: %r" % lines[:10])
    check(a.proc.poll() is None, "the agent exited under strace")


def test_resync_is_the_only_wakeup(env):
    a = idle_agent(env, "2s")
    lines = trace(env, a.pid, "resync")
    returns = [l for l in lines if EPOLL_RETURN.match(l)]
    check(3 <= len(returns) <= 7, "%d epoll_wait returns in %.0f s with --resync 2s, want 3..7:\n  %s" %
          (len(returns), TRACE_SECONDS, "\n  ".join(returns)))
    check(not a.of("change"), "a resync over unchanged content logged a change: %r" % a.of("change"))
