"""The agent harness of the integration suite and the local benches: a
test's temporary directory and the processes it starts (Env), a running
`reload-agent run` and its JSON log (Agent), kubelet-layout volumes written
by the AtomicWriter simulator (build/tools/awsim), and the real targets the
actions hit: a reload endpoint (tests/tools/reload_endpoint.py) and
build/tools/hupcount, which records every SIGHUP it receives.

All waits are bounded in time; processes are stopped by PID only.
"""
import errno
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from tests.lib.proc import TestFailure, check, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENDPOINT = os.path.join(ROOT, "tests", "tools", "reload_endpoint.py")
QUIET = 1.0  # seconds of silence after which "nothing more happens" is asserted


class Agent:
    """A running `reload-agent run` with --log-format json; its stderr lines
    are parsed into self.events (list of dicts) by a reader thread."""

    def __init__(self, env, args, extra_env=None):
        self.env = env
        cmd = [env.binary, "run", "--log-format", "json", "--log-level", "debug"] + list(args)
        e = dict(os.environ)
        if extra_env:
            e.update(extra_env)
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=e, cwd=env.tmp)
        self.lines = []
        self.events = []
        self.bad_lines = []
        self.cond = threading.Condition()
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()
        self.out_t = threading.Thread(target=self._drain_stdout, daemon=True)
        self.out_t.start()

    def _drain_stdout(self):
        for _ in self.proc.stdout:
            pass

    def _read(self):
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self.cond:
                self.lines.append(line)
                try:
                    self.events.append(json.loads(line))
                except ValueError:
                    self.bad_lines.append(line)
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    @property
    def pid(self):
        return self.proc.pid

    def of(self, event):
        with self.cond:
            return [e for e in self.events if e.get("event") == event]

    def wait_for(self, pred, timeout=10.0, what="condition"):
        """Waits until pred(events) is true; returns its value."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                v = pred(self.events)
                if v:
                    return v
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TestFailure("timed out after %.1fs waiting for %s" % (timeout, what))
                if self.proc.poll() is not None and not self.t.is_alive():
                    raise TestFailure("agent exited (%s) while waiting for %s" %
                                      (self.proc.returncode, what))
                self.cond.wait(min(left, 0.2))

    def wait_event(self, event, count=1, timeout=10.0):
        """Waits until at least `count` events named `event` were logged;
        returns the list of them."""
        return self.wait_for(lambda evs: (lambda l: l if len(l) >= count else None)(
            [e for e in evs if e.get("event") == event]), timeout, "%d x %s" % (count, event))

    def matching(self, event, **fields):
        """The events named `event` whose fields equal `fields`."""
        with self.cond:
            return [e for e in self.events if e.get("event") == event and
                    all(e.get(k) == v for k, v in fields.items())]

    def wait_match(self, event, timeout=10.0, **fields):
        """Waits for an event named `event` whose fields equal `fields`;
        returns the first one."""
        def pred(evs):
            for e in evs:
                if e.get("event") == event and all(e.get(k) == v for k, v in fields.items()):
                    return e
            return None
        return self.wait_for(pred, timeout, "a %s event with %r" % (event, fields))

    def quiet(self, seconds):
        """Sleeps, for asserting that nothing more happens."""
        time.sleep(seconds)

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.t.join(5)
        return self.proc.returncode


class Env:
    """One integration test: its temporary directory, the binary and tools
    under test, and every agent and process it started (stopped by PID in
    cleanup)."""

    def __init__(self, binary, tools, name):
        self.binary = binary
        self.tools = tools
        self.name = name
        self.tmp = tempfile.mkdtemp(prefix="ra-it-")
        self.agents = []
        self.procs = []

    def path(self, *p):
        return os.path.join(self.tmp, *p)

    def tool(self, name):
        return os.path.join(self.tools, name)

    def agent(self, args, extra_env=None):
        a = Agent(self, args, extra_env)
        self.agents.append(a)
        return a

    def run(self, args, timeout=60, **kw):
        """Runs a command to completion (bounded), returns CompletedProcess."""
        return subprocess.run(args, capture_output=True, timeout=timeout, cwd=self.tmp, **kw)

    def spawn(self, args, **kw):
        p = subprocess.Popen(args, cwd=self.tmp, **kw)
        self.procs.append(p)
        return p

    def awsim(self, voldir, files, *opts):
        """Runs one AtomicWriter update of voldir so it holds exactly `files`
        (dict logical key -> bytes). opts are extra awsim flags."""
        spec = self.path("payload-%d" % time.monotonic_ns())
        os.makedirs(spec)
        args = [self.tool("awsim"), "--dir", voldir, "--payload", spec] + list(opts)
        for k, v in files.items():
            fp = os.path.join(spec, k)
            os.makedirs(os.path.dirname(fp), exist_ok=True)
            with open(fp, "wb") as f:
                f.write(v if isinstance(v, bytes) else v.encode())
        r = self.run(args)
        shutil.rmtree(spec, ignore_errors=True)
        if r.returncode != 0:
            raise TestFailure("awsim failed: %s" % r.stderr.decode(errors="replace"))
        return r

    def hash_of(self, *paths):
        r = self.run([self.binary, "hash"] + list(paths))
        check(r.returncode == 0, "hash failed: %s" % r.stderr.decode(errors="replace"))
        return r.stdout.decode().split()[0]

    def crashed_agents(self):
        """Agents that died on their own by a signal other than the ones tests
        send (TERM, INT, KILL), or whose log holds a sanitizer report: a
        crash is a failure in every test, whatever the test checked."""
        bad = []
        for a in self.agents:
            rc = a.proc.poll()
            if rc is not None and rc < 0 and -rc not in (signal.SIGTERM, signal.SIGINT,
                                                        signal.SIGKILL):
                bad.append("agent %d died by signal %d" % (a.pid, -rc))
            with a.cond:
                lines = list(a.lines)
            if any("AddressSanitizer" in l or "runtime error:" in l for l in lines):
                bad.append("agent %d: sanitizer report in its log" % a.pid)
        return bad

    def dump_logs(self):
        for a in self.agents:
            print("---- agent %s log (last 60 lines):" % a.pid)
            for l in a.lines[-60:]:
                print("  " + l)

    def cleanup(self):
        for a in self.agents:
            try:
                a.stop(signal.SIGKILL if a.proc.poll() is None else signal.SIGTERM, 5)
            except Exception:
                pass
        for p in self.procs:
            if p.poll() is None:
                try:
                    p.kill()
                    p.wait(5)
                except Exception:
                    pass
        shutil.rmtree(self.tmp, ignore_errors=True)



# ---- volumes and the agent (build/tools/awsim) ----

def volume(env, files, name="vol"):
    """A new kubelet-layout volume env.path(name) holding files ({logical
    path: str or bytes}), written by awsim with a fixed seed."""
    vol = env.path(name)
    os.mkdir(vol)
    env.awsim(vol, files, "--seed", "1")
    return vol


def update(env, vol, files):
    """One AtomicWriter update; returns the hash of the new content."""
    env.awsim(vol, files)
    return env.hash_of(vol)


def start(env, vol, *args, debounce="50ms"):
    """`reload-agent run --watch vol` with a short debounce, no resync and
    the extra args; returns the Agent once it logged ready (15 s at most)."""
    a = env.agent(["--watch", vol, "--debounce", debounce, "--resync", "0"] + list(args))
    a.wait_event("ready", timeout=15)
    return a


def actions(a, **match):
    """The action events whose fields equal `match`."""
    return a.matching("action", **match)


def wait_action(a, timeout=10.0, **match):
    """Waits for an action event with the given fields; returns it."""
    return a.wait_match("action", timeout, **match)


def lines_of(path):
    """The non-empty lines of path ([] when it does not exist)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [l for l in f.read().splitlines() if l]


def pid_appender(out):
    """An exec command whose every run appends its own PID to out."""
    return 'sh -c "echo $$ >> %s"' % out


def go_quote(s):
    """s as a Go-quoted string, as the kubelet writes an annotation value."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def annotations_text(settings):
    """Downward-API annotations file content for {flag: value}."""
    return "".join("reload-agent.io/%s=%s\n" % (k, go_quote(v)) for k, v in settings.items())


# ---- helper processes ----

class Endpoint:
    """tests/tools/reload_endpoint.py: a reload endpoint whose answer mode
    the test switches; every request it got is read back from its log."""

    def __init__(self, env, mode="200"):
        self.log = env.path("endpoint-%d.jsonl" % time.monotonic_ns())
        self.p = env.spawn([sys.executable, ENDPOINT, "--log", self.log],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.port = int(self._line())
        self.url = "http://127.0.0.1:%d/-/reload" % self.port
        self.mode(mode)

    def _line(self, timeout=10.0):
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        if not r:
            raise TestFailure("reload_endpoint.py did not answer within %.0fs" % timeout)
        line = self.p.stdout.readline().decode().strip()
        if not line:
            raise TestFailure("reload_endpoint.py exited (%r)" % self.p.poll())
        return line

    def mode(self, m):
        self.p.stdin.write(("%s\n" % m).encode())
        self.p.stdin.flush()
        got = self._line()
        check(got == "ok " + m, "reload_endpoint.py: %r after mode %s" % (got, m))

    def requests(self):
        return [json.loads(l) for l in lines_of(self.log)]


def hupcount(env, pid_file, out):
    """Starts build/tools/hupcount; waits (bounded) for its PID file."""
    p = env.spawn([env.tool("hupcount"), "--pid-file", pid_file, "--out", out],
                  stdin=subprocess.DEVNULL)
    wait_until(lambda: os.path.exists(pid_file), 10, "hupcount's pid file")
    return p


def hups_received(p, out):
    """Stops hupcount (SIGTERM to its PID) and returns how many SIGHUPs it got."""
    p.send_signal(signal.SIGTERM)
    p.wait(10)
    check(p.returncode == 0, "hupcount exit status %r" % p.returncode)
    return len(lines_of(out))


def annotations_volume(env, settings):
    """A downward-API volume "podinfo" holding the annotations file for
    {flag: value}; returns (the volume, the file)."""
    d = volume(env, {"annotations": annotations_text(settings)}, name="podinfo")
    return d, os.path.join(d, "annotations")


# ---- what an agent does when it has nothing to do (strace) ----

TRACE_SECONDS = 10.0


def trace(env, pid, name):
    """strace -f -p pid for TRACE_SECONDS; returns the trace lines. strace is
    stopped with SIGINT by its PID (and killed if it does not exit)."""
    out = env.path(name + ".strace")
    p = env.spawn(["strace", "-f", "-p", str(pid), "-e", "trace=all", "-o", out],
                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # Wait (bounded) for "Process N attached" so the window starts attached.
    err = b""
    deadline = time.monotonic() + 10
    while b"attached" not in err:
        left = deadline - time.monotonic()
        if left <= 0 or p.poll() is not None:
            raise TestFailure("strace did not attach: %r" % err)
        r, _, _ = select.select([p.stderr], [], [], left)
        if r:
            chunk = os.read(p.stderr.fileno(), 4096)
            if not chunk:
                raise TestFailure("strace exited before attaching: %r" % err)
            err += chunk
    time.sleep(TRACE_SECONDS)
    p.send_signal(signal.SIGINT)
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(5)
        raise TestFailure("strace did not stop on SIGINT")
    with open(out) as f:
        return [l.rstrip("\n") for l in f if l.strip()]


def activity(lines):
    """Trace lines that show the agent doing something: everything except a
    syscall that was already blocking at attach and is still blocking at
    detach."""
    return [l for l in lines if "<detached ...>" not in l and not l.endswith("<unfinished ...>")]


# ---- the agent in namespaces of its own (a full or unwritable directory) ----

class _Wrapped:
    """What Agent reads from an Env, with the binary replaced by a wrapper
    script (it execs the agent, so the PID is the agent's)."""

    def __init__(self, env, name, script):
        self.tmp = env.tmp
        self.binary = env.path(name)
        with open(self.binary, "w") as f:
            f.write("#!/bin/sh\n" + script)
        os.chmod(self.binary, 0o755)


def wrapped_agent(env, name, script, args, extra_env=None):
    """An agent started through the wrapper script `script` (which ends by
    exec'ing the binary with "$@"), stopped by PID with the others."""
    a = Agent(_Wrapped(env, name, script), args, extra_env)
    env.agents.append(a)
    return a


def capless_agent(env, args, extra_env=None):
    """An agent in a user namespace of its own with no mapping (unshare -U):
    its files' owner is still itself, but it holds no capability, so the
    mode bits bind it as they bind an agent that does not run as root (a
    directory of mode 0555 cannot be written)."""
    return wrapped_agent(env, "capless.sh", 'exec unshare -U -- %s "$@"\n' % env.binary, args,
                         extra_env)


class SmallFs:
    """A tmpfs of `kib` KiB mounted at `path`, in a user and mount namespace
    of its own held by a process of ours (stopped by PID at cleanup: the
    mount goes with it, nothing is left on the host). Agents run in it
    through nsenter (agent()); the test reaches its files through
    /proc/HOLDER/root (inside())."""

    def __init__(self, env, path, kib):
        os.makedirs(path)
        self.env, self.path = env, path
        self.holder = env.spawn(
            ["unshare", "-Urm", "--propagation", "private", "sh", "-c",
             'mount -t tmpfs -o size=%dk,mode=0700 tmpfs "$1" && echo up && exec sleep 300' % kib,
             "sh", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self.holder.stdout.readline()  # "up", or EOF when the mount failed
        if line.strip() != b"up":
            self.holder.wait(10)
            raise TestFailure("cannot mount a tmpfs in a namespace of our own: %r %r" %
                              (line, self.holder.stderr.read()))

    def inside(self, *p):
        return "/proc/%d/root%s" % (self.holder.pid, os.path.join(self.path, *p))

    def agent(self, args, extra_env=None):
        script = 'exec nsenter -t %d -U -m --preserve-credentials -- %s "$@"\n' % (
            self.holder.pid, self.env.binary)
        return wrapped_agent(self.env, "smallfs.sh", script, args, extra_env)

    def fill(self):
        """Fills the filesystem: a file written until ENOSPC (bounded by
        the size)."""
        with open(self.inside("filler"), "wb", buffering=0) as f:
            try:
                for _ in range(4096):
                    f.write(b"\0" * 4096)
            except OSError as e:
                check(e.errno == errno.ENOSPC, "filling: %r" % e)
                return
        raise TestFailure("the tmpfs did not fill up")

    def free(self):
        os.unlink(self.inside("filler"))


# ---- restart-pod ----

RESTART_POD_CODE = 91
RESTART_POD_RULES = json.dumps([{"action": "RestartAllContainers",
                                 "exitCodes": {"operator": "In", "values": [RESTART_POD_CODE]}}])


def restart_pod_args(state):
    """The flags of a restart-pod agent recording into state (no annotations file)."""
    return ["--action", "restart-pod", "--restart-pod-exit-code", str(RESTART_POD_CODE),
            "--restart-policy-rules", RESTART_POD_RULES, "--state-dir", state, "--annotations", ""]
