#!/usr/bin/env python3
"""confapp.py - a stand-in application for the safe-reload integration
tests (tests/integration/test_safe_reload.py): it reads its configuration
file at start and again on SIGHUP, as nginx does, and serves what it read.

The configuration's first word is the HTTP status every GET is answered
with ("200", "500"); the whole first line is the body. A file whose first
word is not a status is refused: at start the process exits 1, on SIGHUP the
old configuration stays (nginx keeps its old workers on a bad reload).

It listens on 127.0.0.1 (port 0), writes its PID to --pid-file, prints the
port on stdout, and appends one JSON line per load to --log:
{"pid", "loaded": true|false, "line"}. It exits when stdin closes, so it
cannot outlive a test that crashed.
"""
import argparse
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STATE = {"status": 0, "line": ""}
LOCK = threading.Lock()


def load(path, log):
    try:
        with open(path) as f:
            line = f.readline().strip()
    except OSError as e:
        line = "<%s>" % e.strerror
    word = line.split()[0] if line.split() else ""
    ok = word.isdigit() and 100 <= int(word) <= 599
    with LOCK:
        if ok:
            STATE["status"] = int(word)
            STATE["line"] = line
    with open(log, "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "loaded": ok, "line": line}) + "\n")
    return ok


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        with LOCK:
            status, body = STATE["status"], (STATE["line"] + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--pid-file", required=True)
    ap.add_argument("--log", required=True)
    a = ap.parse_args()
    if not load(a.config, a.log):
        sys.exit(1)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    signal.signal(signal.SIGHUP, lambda s, f: load(a.config, a.log))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    with open(a.pid_file + ".tmp", "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(a.pid_file + ".tmp", a.pid_file)
    print(srv.server_address[1], flush=True)
    for _ in sys.stdin:
        pass


if __name__ == "__main__":
    main()
