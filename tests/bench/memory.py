#!/usr/bin/env python3
"""make bench: memory of the agent per action kind, and the image's size.

For each action kind (none, signal, http, exec, rollout) one agent runs with
--debounce 0 --resync 0 on a kubelet-style volume of its own (build/tools/
awsim). Printed per kind:
  - idle VmRSS (and its anonymous / file-backed parts) 1 s after start;
  - VmHWM and VmRSS after N successful actions (1000; 100 for rollout).
The updates are made one at a time: the next one is written only after the
agent logged the success of the action for the previous one, so N is the
number of actions the agent really performed, not a count of updates that
may have been coalesced.

The receivers: signal -> build/tools/hupcount; http -> an HTTP/1.1
keep-alive server in this process (POST, 200); exec -> /bin/true; rollout ->
tests/lib/fakeapi.py (HTTPS, its own CA, a Deployment and its pod), with
--rollout-jitter 0s.

The image: the files scripts/rootfs.sh puts into the image (the same script
the Dockerfile runs), file by file, and, when a `make image-test` image is
there, its size as podman reports it.
"""
import argparse
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from tests.lib import fakeapi
from tests.lib.proc import memory_kb

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

IMAGE = "localhost/reload-agent:test"
ACTION_TIMEOUT_S = 20  # per action: a stuck agent fails the bench, it does not hang it


class Reload(http.server.BaseHTTPRequestHandler):
    """The app's reload endpoint: 200 to every POST, connection kept."""
    protocol_version = "HTTP/1.1"
    count = 0

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        Reload.count += 1
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


class Bench:
    def __init__(self, binary, tools):
        self.bin = os.path.abspath(binary)
        self.tools = os.path.abspath(tools)
        shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        self.tmp = tempfile.mkdtemp(prefix="ra-membench-", dir=shm)
        self.procs = []
        self.fakes = []
        self.server = None

    def path(self, *p):
        return os.path.join(self.tmp, *p)

    def start(self, args, **kw):
        p = subprocess.Popen(args, **kw)
        self.procs.append(p)
        return p

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)
        for f in self.fakes:
            if f.proc.poll() is None:
                f.proc.stdin.close()
                try:
                    f.proc.wait(10)
                except subprocess.TimeoutExpired:
                    f.proc.kill()
                    f.proc.wait(5)
        if self.server:
            self.server.shutdown()
            self.server.server_close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def awsim(self, vol, *extra):
        r = subprocess.run([os.path.join(self.tools, "awsim"), "--dir", vol, "--files", "3"] +
                           list(extra), capture_output=True, timeout=30)
        if r.returncode != 0:
            sys.exit("awsim failed: %s" % r.stderr.decode())

    def http_url(self):
        if not self.server:
            self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Reload)
            self.server.daemon_threads = True
            threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return "http://127.0.0.1:%d/-/reload" % self.server.server_address[1]

    def hupcount(self, name):
        pf = self.path(name + ".pid")
        self.start([os.path.join(self.tools, "hupcount"), "--pid-file", pf, "--out",
                    self.path(name + ".sigs")])
        for _ in range(250):
            if os.path.exists(pf) and os.path.getsize(pf) > 0:
                return pf
            time.sleep(0.02)
        sys.exit("hupcount wrote no pid file")

    def fakeapi(self):
        fake = fakeapi.launch(self.path("fakeapi"), fixture="deployment", pods=1,
                              spawn=self.start)
        self.fakes.append(fake)
        return ["--kube-api", fake.url, "--kube-ca-file", fake.info["ca"],
                "--kube-token-file", fake.info["token_file"], "--pod-name", fake.info["pods"][0],
                "--namespace", fake.info["namespace"], "--annotations", "",
                "--rollout-jitter", "0s"]

    def action_args(self, kind):
        if kind == "none":
            return ["--action", "none"]
        if kind == "signal":
            return ["--action", "signal", "--pid-file", self.hupcount("signal")]
        if kind == "http":
            return ["--action", "http", "--http-url", self.http_url()]
        if kind == "exec":
            return ["--action", "exec", "--exec-command", "/bin/true"]
        if kind == "rollout":
            return ["--action", "rollout"] + self.fakeapi()
        raise ValueError(kind)

    def measure(self, kind, n, prefix=(), idle_s=1.0):
        """Runs one agent of this kind through n actions; prefix is a command
        the agent runs under (scripts/link-order.py: valgrind)."""
        vol = self.path("vol-" + kind)
        os.makedirs(vol)
        self.awsim(vol, "--count", "1")
        log_path = self.path("agent-%s.log" % kind)
        log = open(log_path, "wb")
        args = [self.bin, "run", "--watch", vol, "--debounce", "0", "--resync", "0",
                "--log-format", "json"] + self.action_args(kind)
        agent = self.start(list(prefix) + args, stdout=subprocess.DEVNULL, stderr=log)
        reader = LogReader(log_path)
        deadline = time.monotonic() + 30 * (1 + 5 * bool(prefix))
        while not reader.seen("ready"):
            if agent.poll() is not None or time.monotonic() > deadline:
                sys.exit("%s agent did not get ready; its log: %s" % (kind, reader.tail()))
            time.sleep(0.02)
        time.sleep(idle_s)
        idle = memory_kb(agent.pid)
        done = 0
        for i in range(n):
            before = reader.successes()
            self.awsim(vol, "--count", "1", "--seed", str(1000 + i))
            deadline = time.monotonic() + ACTION_TIMEOUT_S * (1 + 5 * bool(prefix))
            while reader.successes() <= before:
                if agent.poll() is not None:
                    sys.exit("%s agent exited (status %s); its log: %s" %
                             (kind, agent.returncode, reader.tail()))
                if time.monotonic() > deadline:
                    sys.exit("%s agent: no successful action %d s after update %d; its log: %s" %
                             (kind, ACTION_TIMEOUT_S, i + 1, reader.tail()))
                time.sleep(0.001)
            done = reader.successes()
        time.sleep(0.5)
        after = memory_kb(agent.pid)
        agent.send_signal(signal.SIGTERM)
        agent.wait(60)
        log.close()
        return {"kind": kind, "idle": idle, "after": after, "actions": done,
                "failures": reader.failures()}


class LogReader:
    """Counts the agent's JSON log events as the file grows."""

    def __init__(self, path):
        self.path = path
        self.pos = 0
        self.buf = b""
        self.events = {}
        self.ok = 0
        self.bad = 0
        self.last = []

    def poll(self):
        with open(self.path, "rb") as f:
            f.seek(self.pos)
            data = f.read()
        self.pos += len(data)
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        for line in lines:
            self.last = (self.last + [line])[-5:]
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            name = ev.get("event")
            self.events[name] = self.events.get(name, 0) + 1
            if name == "action":
                if ev.get("result") == "success":
                    self.ok += 1
                else:
                    self.bad += 1

    def seen(self, name):
        self.poll()
        return self.events.get(name, 0) > 0

    def successes(self):
        self.poll()
        return self.ok

    def failures(self):
        self.poll()
        return self.bad

    def tail(self):
        self.poll()
        return b"\n".join(self.last).decode(errors="replace")


def rootfs_files(binary):
    """The image's files, made by scripts/rootfs.sh as the Dockerfile does."""
    d = tempfile.mkdtemp(prefix="ra-rootfs-")
    try:
        r = subprocess.run(["sh", os.path.join(ROOT, "scripts", "rootfs.sh"), binary, d + "/r"],
                           capture_output=True, timeout=120)
        if r.returncode != 0:
            return None, r.stderr.decode()
        files = []
        for base, _, names in os.walk(d + "/r"):
            for name in names:
                p = os.path.join(base, name)
                files.append((os.path.relpath(p, d + "/r"), os.lstat(p).st_size))
        return sorted(files), None
    finally:
        shutil.rmtree(d, ignore_errors=True)


def podman_image(tag):
    if shutil.which("podman") is None:
        return None
    r = subprocess.run(["podman", "image", "inspect", "--format",
                        "{{.Size}} {{index .Labels \"org.opencontainers.image.revision\"}} {{.Created}}",
                        tag], capture_output=True, text=True, timeout=60)
    return r.stdout.strip() if r.returncode == 0 else None


def mib(kib):
    return "%.2f MiB" % (kib / 1024.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--tools", required=True)
    ap.add_argument("--actions", type=int, default=1000)
    ap.add_argument("--rollouts", type=int, default=100)
    ap.add_argument("--kinds", default="none,signal,http,exec,rollout")
    ap.add_argument("--image", default=IMAGE, help="the image make image-test built")
    a = ap.parse_args()
    b = Bench(a.binary, a.tools)
    rows = []
    try:
        for kind in a.kinds.split(","):
            rows.append(b.measure(kind, a.rollouts if kind == "rollout" else a.actions))
    finally:
        b.cleanup()

    print("\nreload-agent memory per action kind (debounce 0; one update at a time, each "
          "waiting for the action's success)")
    print("%-8s %8s %22s %9s %12s %12s" % ("action", "actions", "idle VmRSS (anon+file)",
                                           "failures", "VmHWM after", "VmRSS after"))
    for r in rows:
        i, f = r["idle"], r["after"]
        print("%-8s %8d %9s (%4d+%4d KiB) %9d %12s %12s" % (
            r["kind"], r["actions"], mib(i["VmRSS"]), i["RssAnon"], i["RssFile"], r["failures"],
            mib(f["VmHWM"]), mib(f["VmRSS"])))
    by = {r["kind"]: r for r in rows}
    targets = []
    if "http" in by:
        targets.append(("http agent VmHWM after %d reloads <= 4 MiB" % by["http"]["actions"],
                        by["http"]["after"]["VmHWM"] <= 4096))
    if "rollout" in by:
        targets.append(("rollout agent VmHWM after %d rollouts <= 5 MiB" %
                        by["rollout"]["actions"], by["rollout"]["after"]["VmHWM"] <= 5120))
    if "signal" in by:
        targets.append(("signal agent idle VmRSS <= 2 MiB", by["signal"]["idle"]["VmRSS"] <= 2048))

    files, err = rootfs_files(os.path.abspath(a.binary))
    print("\nimage files (scripts/rootfs.sh, as the Dockerfile runs it on this binary):")
    if files is None:
        print("  cannot assemble: %s" % err.strip())
    else:
        total = 0
        for name, size in files:
            print("  %-45s %10d bytes" % ("/" + name, size))
            total += size
        print("  %-45s %10d bytes (%.2f MB)" % ("total", total, total / 1e6))
        targets.append(("image files <= 8 MB", total <= 8e6))
    img = podman_image(a.image)
    if img:
        size, rev, created = (img.split(" ", 2) + ["", ""])[:3]
        print("podman image %s: %s bytes (%.2f MB), revision %s, built %s" %
              (a.image, size, int(size) / 1e6, rev or "?", created))
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
        if rev == head:
            targets.append(("podman image <= 8 MB", int(size) <= 8e6))
        else:
            print("  (built from revision %s, this tree is %s: make image-test rebuilds it)" %
                  (rev or "?", head or "?"))
    else:
        print("podman image %s: not built here (make image-test builds it)" % a.image)
    for name, ok in targets:
        print("  [%s] %s" % ("met" if ok else "MISSED", name))


if __name__ == "__main__":
    main()
