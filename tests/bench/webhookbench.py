#!/usr/bin/env python3
"""make bench, webhook part: latency of `reload-agent webhook` per review
over HTTPS on loopback, and its memory, against a baseline in the same run.

Every request is the same AdmissionReview (a controller-made pod with two
ConfigMap/Secret mounts, the token volume and managedFields, opted in: the
full transform runs and a patch comes back). Clients are Python processes
(one per concurrent client, http.client over ssl), each timing its own
requests with perf_counter; the same clients drive the baseline.

Baseline: a Python ThreadingHTTPServer wrapped in ssl (same certificate,
TLS as Python negotiates it) that reads the body and answers the webhook's
own response bytes for that review, precomputed: the transport cost of
HTTPS + HTTP/1.1 in Python without any review work. The ratio printed is
webhook / baseline (below 1: the webhook answers faster than a server that
only echoes).

Figures printed, for the webhook and the baseline:
  - p50 / p99 / max latency, one client at a time: over one keep-alive
    connection, and with a new connection (full TLS handshake) per review;
  - the same with 50 concurrent clients (keep-alive and new-connection);
  - the webhook's own handling time per review (duration_ms of its log
    lines: parse + transform + encode), p50 / p99;
  - the webhook's VmRSS before load, VmRSS and VmHWM sampled during load
    (max) and VmRSS after it.
Targets (issue 10): p99 <= 5 ms per review one at a time on loopback;
RSS <= 8 MiB under load.
"""
import argparse
import http.client
import http.server
import json
import multiprocessing
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

from tests.lib.proc import free_port, status_kb
from tests.lib.stats import pct
from tests.lib.webhook import HOST, client_ctx, make_certs, review_body

def client_run(args):
    """One client: n requests, keep-alive or not; returns (latencies in s,
    failed requests)."""
    port, cafile, body, n, keep = args
    ctx = client_ctx(cafile)
    lat = []
    errors = 0
    c = None
    hdrs = {"Content-Type": "application/json"}
    for _ in range(n):
        t0 = time.perf_counter()
        try:
            if c is None:
                c = http.client.HTTPSConnection(HOST, port, context=ctx, timeout=30)
            c.request("POST", "/mutate", body=body, headers=hdrs)
            r = c.getresponse()
            data = r.read()
            ok = r.status == 200 and b'"allowed":true' in data
        except (OSError, http.client.HTTPException):
            ok = False
        dt = time.perf_counter() - t0
        if ok:
            lat.append(dt)
        else:
            errors += 1
        keep_this = keep and ok
        if not keep_this and c:
            c.close()
            c = None
    if c:
        c.close()
    return lat, errors


def measure(pool, port, cafile, body, clients, n, keep):
    """Returns (latencies, failed requests) of all clients together."""
    if clients == 1:
        return client_run((port, cafile, body, n, keep))
    lat, errors = [], 0
    for part, e in pool.map(client_run, [(port, cafile, body, n, keep)] * clients):
        lat.extend(part)
        errors += e
    return lat, errors


class Baseline(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else delayed ACKs add 40 ms to each reply
    answer = b""

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.answer)))
        self.end_headers()
        self.wfile.write(self.answer)

    def log_message(self, *a):
        pass


class BaselineServer(http.server.ThreadingHTTPServer):
    request_queue_size = 1024  # as the webhook's backlog (the default 5 drops SYNs)
    daemon_threads = True


def start_baseline(d, answer):
    Baseline.answer = answer
    srv = BaselineServer((HOST, 0), Baseline)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(d + "/tls.crt", d + "/tls.key")
    # The handshake then runs in each connection's thread, not in accept().
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    return srv


def fmt(lat):
    return "p50 %.2f ms, p99 %.2f ms, max %.2f ms (n=%d)" % (
        pct(lat, 50) * 1e3, pct(lat, 99) * 1e3, max(lat) * 1e3, len(lat))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--seq", type=int, default=2000, help="requests one at a time")
    ap.add_argument("--per-client", type=int, default=100, help="requests per concurrent client")
    ap.add_argument("--clients", type=int, default=50)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="ra-whbench-")
    wh = None
    try:
        make_certs(d)
        cafile = d + "/ca.crt"
        body = review_body()
        port = free_port()
        log = open(d + "/webhook.log", "wb")
        wh = subprocess.Popen([a.binary, "webhook", "--listen", "%s:%d" % (HOST, port),
                               "--tls-cert-file", d + "/tls.crt", "--tls-key-file",
                               d + "/tls.key", "--log-format", "json",
                               "--shutdown-delay", "0s"],  # no drain: stopped at once
                              stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection((HOST, port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or wh.poll() is not None:
                    sys.exit("webhook did not start")
                time.sleep(0.05)
        ctx = client_ctx(cafile)
        c = http.client.HTTPSConnection(HOST, port, context=ctx, timeout=10)
        c.request("POST", "/mutate", body=body, headers={"Content-Type": "application/json"})
        answer = c.getresponse().read()
        c.close()
        if b'"patch"' not in answer:
            sys.exit("the bench review was not injected: %r" % answer[:300])
        rss0 = status_kb(wh.pid, "VmRSS")
        base = start_baseline(d, answer)
        bport = base.server_address[1]

        peak = {"rss": 0, "hwm": 0, "anon": 0, "file": 0}
        anon0, file0 = status_kb(wh.pid, "RssAnon"), status_kb(wh.pid, "RssFile")
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peak["rss"] = max(peak["rss"], status_kb(wh.pid, "VmRSS"))
                peak["hwm"] = max(peak["hwm"], status_kb(wh.pid, "VmHWM"))
                peak["anon"] = max(peak["anon"], status_kb(wh.pid, "RssAnon"))
                peak["file"] = max(peak["file"], status_kb(wh.pid, "RssFile"))
                time.sleep(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        runs = [("one at a time, keep-alive", 1, a.seq, True),
                ("one at a time, new connection each", 1, a.seq // 4, False),
                ("%d concurrent clients, keep-alive" % a.clients, a.clients, a.per_client, True),
                ("%d concurrent clients, new connection each" % a.clients, a.clients,
                 a.per_client // 2, False)]
        results = []
        with multiprocessing.Pool(a.clients) as pool:
            for name, clients, n, keep in runs:
                w, werr = measure(pool, port, cafile, body, clients, n, keep)
                if werr:
                    sys.exit("%s: %d webhook requests failed" % (name, werr))
                b, berr = measure(pool, bport, cafile, body, clients, n, keep)
                results.append((name, w, b, berr))
        stop.set()
        sampler.join(2)
        time.sleep(0.3)
        rss_after = status_kb(wh.pid, "VmRSS")
        anon_after = status_kb(wh.pid, "RssAnon")
        hwm = status_kb(wh.pid, "VmHWM")
        base.shutdown()

        print("webhook bench (HTTPS on loopback, %d-byte AdmissionReview, a %d-byte answer "
              "with a patch)" % (len(body), len(answer)))
        print("baseline: Python ThreadingHTTPServer + ssl answering the same bytes without "
              "any review work")
        for name, w, b, berr in results:
            print("  %s:" % name)
            print("    webhook : %s" % fmt(w))
            print("    baseline: %s%s" % (fmt(b), ", %d requests failed" % berr if berr else ""))
            print("    ratio webhook/baseline: p50 %.2f, p99 %.2f" %
                  (pct(w, 50) / pct(b, 50), pct(w, 99) / pct(b, 99)))
        wh.terminate()
        wh.wait(15)
        log.close()
        durs = []
        with open(d + "/webhook.log", "rb") as f:
            for line in f:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if e.get("event") == "admission" and "duration_ms" in e:
                    durs.append(e["duration_ms"])
        if durs:
            print("  webhook handling time per review (parse + transform + encode): p50 %.3f ms, "
                  "p99 %.3f ms (n=%d)" % (pct(durs, 50), pct(durs, 99), len(durs)))
        seq_p99 = pct(results[0][1], 99) * 1e3
        print("  webhook memory: VmRSS %d KiB before load, max %d KiB during (VmHWM %d KiB), "
              "%d KiB after" % (rss0, peak["rss"], max(peak["hwm"], hwm), rss_after))
        print("    of which RssAnon (heap, the connections' TLS state) %d KiB before, max %d KiB "
              "during, %d KiB after; RssFile (the binary's and libraries' pages) %d KiB before, "
              "max %d KiB during" % (anon0, peak["anon"], anon_after, file0, peak["file"]))
        print("  targets: p99 one at a time %.2f ms (<= 5 ms: %s); RSS under load %d KiB "
              "(<= 8192 KiB: %s)" % (seq_p99, "met" if seq_p99 <= 5 else "NOT met", peak["rss"],
                                     "met" if peak["rss"] <= 8192 else "NOT met"))
    finally:
        if wh and wh.poll() is None:
            wh.kill()
            wh.wait(5)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
