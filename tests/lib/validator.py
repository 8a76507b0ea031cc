"""The `reload-agent validator` harness: the server started as the
injector's validator container would run it, and one request per
connection over its real unix socket."""
import json
import os
import signal
import socket
import subprocess
import time

from tests.lib.proc import check, wait_until


class Validator:
    def __init__(self, env, path=None):
        self.path = path or env.path("v.sock")
        self.log = env.path("validator-%d.log" % time.monotonic_ns())
        self.logf = open(self.log, "wb")
        self.p = env.spawn([env.binary, "validator", "--socket", self.path, "--log-format",
                            "json"], stdin=subprocess.DEVNULL, stdout=self.logf,
                           stderr=self.logf)
        wait_until(lambda: b'"validator-ready"' in open(self.log, "rb").read() or
                   self.p.poll() is not None, 10, "the validator to listen")

    def ask(self, req=None, raw=None, timeout=20.0):
        """One request; returns the decoded reply."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(self.path)
        s.sendall(raw if raw is not None else (json.dumps(req) + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        check(data.endswith(b"\n"), "no reply line: %r" % data)
        return json.loads(data)

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        rc = self.p.wait(10)
        self.logf.close()
        return rc


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
