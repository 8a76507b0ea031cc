#!/usr/bin/env python3
"""reload_endpoint.py - a stand-in application reload endpoint for the
integration tests of the http action (tests/integration/test_engine.py).

It listens on 127.0.0.1 (port 0 by default, or --port), prints the port on
stdout, then reads one command per line on stdin and answers "ok MODE" on
stdout once the mode is in force:

  200 | 500 ...   answer every request with that status
  hang            accept the request and never answer (until the mode changes)
  refuse          stop listening (connections are refused); any other mode
                  listens again on the same port

Every request received is appended to --log FILE as one JSON line
{"method", "path", "headers" (lower-case names), "body", "answer"}, where
answer is the status sent, "hang", or "refuse" for a request accepted just
before the listener closed (its connection is closed unanswered). The
process exits when stdin closes, so it cannot outlive a test that crashed.
"""
import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STATE = {"mode": "200"}
LOCK = threading.Lock()
CHANGED = threading.Condition(LOCK)
HANG_LIMIT_S = 60.0  # a hanging request is given up after this long at most


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: the test reads --log
        pass

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with LOCK:
            mode = STATE["mode"]
        record = {
            "method": self.command,
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": body.decode("utf-8", "replace"),
            "answer": mode,
        }
        with LOCK:
            with open(self.server.log_path, "a") as f:
                f.write(json.dumps(record) + "\n")
        if mode == "refuse":  # accepted just before the listener closed
            self.close_connection = True
            return
        if mode == "hang":
            with CHANGED:
                CHANGED.wait_for(lambda: STATE["mode"] != "hang", HANG_LIMIT_S)
            self.close_connection = True
            return
        status = int(mode)
        payload = b"reload answered %d\n" % status
        self.send_response(status)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_HEAD = do_PATCH = do_DELETE = handle_any


def serve(port, log_path):
    srv = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    srv.daemon_threads = True
    srv.log_path = log_path
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log", required=True)
    a = ap.parse_args()
    srv = serve(a.port, a.log)
    port = srv.server_address[1]
    print(port, flush=True)
    for line in sys.stdin:
        mode = line.strip()
        if mode != "hang" and mode != "refuse" and not mode.isdigit():
            print("error unknown mode %r" % mode, flush=True)
            continue
        # The listener is closed before the mode becomes "refuse" and
        # reopened after it is not.
        if mode == "refuse" and srv is not None:
            srv.shutdown()
            srv.server_close()
            srv = None
        with CHANGED:
            STATE["mode"] = mode
            CHANGED.notify_all()
        if mode != "refuse" and srv is None:
            srv = serve(port, a.log)
        print("ok", mode, flush=True)


if __name__ == "__main__":
    main()
