"""Helpers for the integration tests: temp dirs, the agent process and its
JSON log, and the AtomicWriter simulator (build/tools/awsim).

All waits are bounded in time; processes are stopped by PID only.
"""
import errno
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time


class TestFailure(AssertionError):
    pass


def check(cond, msg="check failed"):
    if not cond:
        raise TestFailure(msg)


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


# ---- generic helpers for tests that talk to real servers (engine, nginx) ----

def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5.0):
    """GET url; returns (status, body bytes) for any status, raises
    TestFailure if no HTTP answer arrives within timeout."""
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (OSError, urllib.error.URLError) as e:
        raise TestFailure("GET %s: %s" % (url, e))


def wait_until(pred, timeout=10.0, what="condition", interval=0.05):
    """Polls pred() until it returns a true value (returned) or raises
    TestFailure after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise TestFailure("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(interval)


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
