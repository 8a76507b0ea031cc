"""tests/cluster/lib.sh's process bookkeeping: stop_proc sees a stopped
component as gone even when nothing reaps it.

The cluster's components are started in sessions of their own and outlive
the shell that started them, so their parent is PID 1. This VM's PID 1 does
not reap: an exited component stays a zombie, its /proc entry stays, and a
stop that looked for the entry waited out its whole SIGTERM grace (every
kube-apiserver restart of the e2e suite took 20 s more than it said, and
the in-cluster route to the API came back late after it). The tests make
the same condition on any machine: a helper process is the child subreaper
(prctl PR_SET_CHILD_SUBREAPER) of the shell that runs lib.sh and reaps
nothing until the shell is done.
"""
import os
import subprocess
import sys

from tests.lib.proc import check

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
LIB = os.path.join(TOP, "tests", "cluster", "lib.sh")

# The helper: becomes the subreaper, runs the bash script, reports the state
# of the component's pid before it reaps it, then reaps every orphan
# (bounded: 50 tries 0.1 s apart).
HELPER = r"""
import ctypes, os, subprocess, sys, time
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(36, 1, 0, 0, 0) != 0:
    sys.exit("prctl(PR_SET_CHILD_SUBREAPER): errno %d" % ctypes.get_errno())
r = subprocess.run(["bash", "-c", sys.argv[1]], capture_output=True, timeout=60)
sys.stdout.write(r.stdout.decode())
sys.stdout.write(r.stderr.decode())
print("rc %d" % r.returncode)
pid = [l.split()[1] for l in r.stdout.decode().splitlines() if l.startswith("pid ")]
if pid:
    try:
        st = open("/proc/%s/stat" % pid[0]).read().rsplit(") ", 1)[1].split()[0]
    except OSError:
        st = "gone"
    print("state %s" % st)
for _ in range(50):
    try:
        if os.waitpid(-1, os.WNOHANG) == (0, 0):
            time.sleep(0.1)
    except ChildProcessError:
        break
"""


def run_lib(env, script, grace):
    """Runs SCRIPT after sourcing lib.sh with a temp state directory, then
    `stop_proc sleeper GRACE`; returns the helper's output."""
    state = env.path("state")
    os.makedirs(state, exist_ok=True)
    body = """
set -u
. %s
%s
pid=$(pid_of sleeper)
[ -n "$pid" ] || { echo "no pid recorded"; exit 3; }
echo "pid $pid"
t0=$(date +%%s%%N)
stop_proc sleeper %d
echo "stop took $(( ($(date +%%s%%N) - t0) / 1000000 )) ms"
""" % (LIB, script, grace)
    r = subprocess.run([sys.executable, "-c", HELPER, body], capture_output=True, timeout=120,
                       env=dict(os.environ, RA_CLUSTER_STATE=state))
    out = r.stdout.decode() + r.stderr.decode()
    check(r.returncode == 0 and "rc 0" in out, "the helper failed: %s" % out)
    return out


def stop_ms(out):
    for line in out.splitlines():
        if line.startswith("stop took "):
            return int(line.split()[2])
    raise AssertionError("no stop time in: %s" % out)


def test_stop_proc_counts_an_unreaped_exit_as_stopped(env):
    # sleep exits on SIGTERM at once; nobody reaps it while stop_proc waits
    out = run_lib(env, "( start_proc sleeper /bin/sleep 300 )", 10)
    check("state Z" in out, "the premise: the stopped sleeper is an unreaped zombie: %s" % out)
    check("ignored SIGTERM" not in out, "stop_proc took an exited, unreaped process for one "
                                        "that ignored SIGTERM: %s" % out)
    check(stop_ms(out) < 5000, "stop_proc waited %d ms of its 10 s grace for a process that "
                               "had exited: %s" % (stop_ms(out), out))


def test_stop_proc_kills_what_ignores_sigterm(env):
    # the other side: a process that lives on after SIGTERM is still killed
    out = run_lib(env, "( start_proc sleeper /bin/bash -c 'trap \"\" TERM; "
                       "for i in $(seq 600); do sleep 0.5; done' )", 1)
    check("ignored SIGTERM for 1 s: SIGKILL" in out, "no SIGKILL after the grace: %s" % out)
    check("state Z" in out or "state gone" in out, "the process lives after SIGKILL: %s" % out)
