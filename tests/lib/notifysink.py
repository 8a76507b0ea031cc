"""A notification receiver for the notification tests (docs/notifications.md):
a real HTTP or HTTPS server on 127.0.0.1, in the test's own process, that
records every request (path, headers, parsed JSON body, when it came) and
answers as the test says: "ok" (200), "fail" (a status, optionally only
for the first N requests), or "hold" (the answer waits until the test
releases it, 20 s at most: a stuck receiver). It is registered with the
Env like a process (poll, kill, wait), so the Env's cleanup stops it.
"""
import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.lib.proc import wait_until

HOLD_MAX = 20.0  # seconds a held answer waits at most


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_POST(self):
        sink = self.server.sink
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        status = sink._answer()
        with sink.lock:
            sink.got.append({"path": self.path, "headers": {k.lower(): v for k, v in
                                                            self.headers.items()},
                             "raw": raw, "json": body, "at": time.monotonic(),
                             "status": status})
        if status == "hold":
            sink.release.wait(HOLD_MAX)
            status = 200
        out = b"ok" if status == 200 else b"no"
        try:
            self.send_response(status)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the agent gave up on this request (its timeout, or it stopped)


class Sink:
    """The receiver; url is its base URL plus path."""

    def __init__(self, env, path="/hook", certs=None):
        self.lock = threading.Lock()
        self.got = []
        self.release = threading.Event()
        self.mode, self.status, self.fail_left = "ok", 200, None
        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.srv.daemon_threads = True
        self.srv.sink = self
        scheme = "http"
        if certs:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(certs + "/tls.crt", certs + "/tls.key")
            self.srv.socket = ctx.wrap_socket(self.srv.socket, server_side=True)
            scheme = "https"
        # accept() never blocks for long: serve_forever once sat in it after
        # its select said a connection was there (the agent had gone), and
        # kill()'s shutdown() waited for it forever (a CI run hung 35 min)
        self.srv.socket.settimeout(1.0)
        self.url = "%s://127.0.0.1:%d%s" % (scheme, self.srv.server_address[1], path)
        self.t = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.t.start()
        self.stopped = False
        env.procs.append(self)

    def _answer(self):
        with self.lock:
            if self.mode == "hold":
                return "hold"
            if self.mode == "fail":
                if self.fail_left is None:
                    return self.status
                if self.fail_left > 0:
                    self.fail_left -= 1
                    return self.status
            return 200

    def answer_ok(self):
        with self.lock:
            self.mode = "ok"
        self.release.set()

    def answer_fail(self, status=500, first=None):
        """Answers status (to the first `first` requests only, when given)."""
        with self.lock:
            self.mode, self.status, self.fail_left = "fail", status, first

    def hold(self):
        with self.lock:
            self.mode = "hold"
        self.release.clear()

    def requests(self):
        with self.lock:
            return list(self.got)

    def bodies(self):
        return [r["json"] for r in self.requests()]

    def wait_for(self, n, timeout=10.0):
        """Waits (bounded) until n requests came; returns them."""
        wait_until(lambda: len(self.requests()) >= n, timeout, "%d notification(s)" % n)
        return self.requests()

    # the Env's cleanup treats the sink as one of its processes
    def poll(self):
        return 0 if self.stopped else None

    def kill(self):
        self.release.set()
        stopper = threading.Thread(target=self.srv.shutdown, daemon=True)
        stopper.start()
        stopper.join(10)  # bounded: the accept timeout lets serve_forever see it within 1.5 s
        self.srv.server_close()
        self.stopped = True

    def wait(self, timeout=5):
        self.t.join(timeout)
