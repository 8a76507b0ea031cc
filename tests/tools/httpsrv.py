#!/usr/bin/env python3
"""httpsrv.py - small HTTP/HTTPS server used as a helper process by the C
tests (tests/test_httpc.c). It listens on 127.0.0.1 (or --host), port 0 by
default, prints the chosen port on stdout and serves fixed routes, so the C
client can be tested against real sockets. It exits when its stdin closes, so
it cannot outlive a test that crashed.

Routes (any method):
  /ok                 200, body "hello from httpsrv\n"
  /status/N           status N, body "status N\n"
  /slow?ms=N          sleeps N ms, then 200 "slow\n"
  /retry-after        429 with Retry-After: 3 (?in=N: an HTTP-date N s ahead)
  /big?n=N            200 with a body of N bytes ('x'); &status=S for status S
  /echo               200, JSON {"method","path","headers","body"}
  /redirect           302 to /ok
  /barrier?id=S&n=N   answers 200 once N requests with the same id wait
                      together, 504 if they do not within 5 s
  /reset              closes the connection (RST) without answering
  /stream?n=N&ms=M    200, chunked: N lines "line I\n", M ms apart (a watch);
                      &first_ms=F: the head at once, the first line F ms later
"""
import argparse
import email.utils
import json
import os
import socket
import ssl
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BARRIERS = {}
BARRIERS_LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: the C test owns the output
        pass

    def reply(self, status, body=b"", headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_any(self):
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path = url.path
        if path == "/ok":
            self.reply(200, b"hello from httpsrv\n")
        elif path.startswith("/status/"):
            code = int(path[len("/status/"):])
            self.reply(code, b"status %d\n" % code)
        elif path == "/slow":
            time.sleep(int(query.get("ms", "1000")) / 1000.0)
            self.reply(200, b"slow\n")
        elif path == "/retry-after":
            if "in" in query:
                value = email.utils.formatdate(time.time() + int(query["in"]), usegmt=True)
            else:
                value = "3"
            self.reply(429, b"Too many requests, please try again later.", [("Retry-After", value)])
        elif path == "/big":
            self.reply(int(query.get("status", "200")), b"x" * int(query.get("n", "0")))
        elif path == "/echo":
            doc = {
                "method": self.command,
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body.decode("utf-8", "replace"),
            }
            self.reply(200, json.dumps(doc).encode(), [("Content-Type", "application/json")])
        elif path == "/redirect":
            self.reply(302, b"moved\n", [("Location", "/ok")])
        elif path == "/barrier":
            key = query.get("id", "")
            with BARRIERS_LOCK:
                barrier = BARRIERS.setdefault(key, threading.Barrier(int(query.get("n", "1"))))
            try:
                barrier.wait(timeout=5)
                self.reply(200, b"together\n")
            except threading.BrokenBarrierError:
                self.reply(504, b"not concurrent\n")
        elif path == "/stream":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                time.sleep(int(query.get("first_ms", "0")) / 1000.0)
                for i in range(int(query.get("n", "3"))):
                    line = b"line %d\n" % i
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                    self.wfile.flush()
                    time.sleep(int(query.get("ms", "20")) / 1000.0)
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass
            self.close_connection = True
        elif path == "/reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
        else:
            self.reply(404, b"no such route\n")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = handle_any


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    tls = None

    def get_request(self):
        sock, addr = super().get_request()
        if self.tls is not None:
            # The handshake runs in the request thread (see finish_request),
            # so one stuck client cannot block the accept loop.
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

    def handle_error(self, request, client_address):
        # A client that gave up (timeout, cancel) is normal in these tests.
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)

    def finish_request(self, request, client_address):
        if self.tls is not None:
            request.settimeout(10)
            try:
                request.do_handshake()
            except (ssl.SSLError, OSError):
                return  # the client rejected our certificate or went away
            request.settimeout(None)
        super().finish_request(request, client_address)


def exit_when_stdin_closes():
    while os.read(0, 4096):
        pass
    os._exit(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--tls", action="store_true", help="serve HTTPS with --cert/--key")
    ap.add_argument("--cert")
    ap.add_argument("--key")
    args = ap.parse_args()

    if args.host not in ("127.0.0.1", "::1"):
        ap.error("--host must be 127.0.0.1 or ::1, got %r" % args.host)
    if args.tls and not (args.cert and args.key):
        ap.error("--tls needs --cert and --key")
    if ":" in args.host:
        Server.address_family = socket.AF_INET6
    srv = Server((args.host, args.port), Handler)
    if args.tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
        srv.tls = ctx
    threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
