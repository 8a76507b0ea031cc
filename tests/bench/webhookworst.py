#!/usr/bin/env python3
"""make bench, webhook worst cases (issue 16.14, 16.15): the reviews and
loads that cost `reload-agent webhook` the most time and memory, each on a
fresh webhook process, with the time of a review, whether /healthz kept
answering, and VmHWM (the peak resident memory the kernel recorded), as
ratios to a baseline measured in the same run: a fresh webhook answering
the ordinary review of webhookbench.py 200 times.

Cases:
  - size: the 2.98 MB review of issue 16 (88 000 env vars, 264 000 JSON
    values: refused unparsed, more than ADMISSION_MAX_VALUES), and one just
    under the value limit (49 980 env vars, 1.6 MB: parsed and injected);
  - volumes: 2000 ConfigMap volumes (the most the transform injects) and
    5 000 / 10 000 / 20 000 (refused after planning), /healthz asked every
    20 ms meanwhile: the review must stay well under a second, and its time
    per volume flat (linear);
  - held bodies: 100 connections each sending most of a 1.6 MB review and
    holding it (the body budget admits what fits in 8 MiB, the rest get 503
    with Retry-After), then all finishing;
  - handshakes: 256 connections (the limit) in their TLS handshake at once;
  - worst: 250 handshakes, bodies held to what the budget leaves, and the
    largest review parsed meanwhile: the figure the shipped memory limit is
    set from
    (manifests/webhook/base/deployment.yaml, docs/webhook.md).
"""
import argparse
import http.client
import json
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

from tests.lib.proc import free_port, status_kb
from tests.lib.webhook import HOST, client_ctx, make_certs, review_body

MIB = 1 << 20


def review(pod, uid="worst"):
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": uid, "kind": {"group": "", "version": "v1",
                                                        "kind": "Pod"},
                                   "resource": {"group": "", "version": "v1",
                                                "resource": "pods"},
                                   "namespace": "bench", "operation": "CREATE", "object": pod}},
                      separators=(",", ":")).encode()


def pod(spec):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "w-", "annotations": {"reload-agent.io/inject": "true"}},
            "spec": spec}


def env_review(n):
    return review(pod({"containers": [{"name": "app", "image": "x",
                                       "volumeMounts": [{"name": "v", "mountPath": "/etc/v"}],
                                       "env": [{"name": "E%d" % i, "value": "%d" % i}
                                               for i in range(n)]}],
                       "volumes": [{"name": "v", "configMap": {"name": "c"}}]}))


def volume_review(n):
    return review(pod({"containers": [{"name": "app", "image": "x", "volumeMounts": [
        {"name": "v%d" % i, "mountPath": "/etc/v%d" % i} for i in range(n)]}],
        "volumes": [{"name": "v%d" % i, "configMap": {"name": "c%d" % i}} for i in range(n)]}))


class Webhook:
    """A fresh `reload-agent webhook` on a free port, its VmHWM sampled."""

    def __init__(self, binary, d):
        self.port = free_port()
        self.ctx = client_ctx(d + "/ca.crt")
        self.log = open(d + "/webhook-%d.log" % self.port, "wb")
        self.p = subprocess.Popen([binary, "webhook", "--listen", "%s:%d" % (HOST, self.port),
                                   "--tls-cert-file", d + "/tls.crt", "--tls-key-file",
                                   d + "/tls.key", "--log-format", "json",
                                   "--shutdown-delay", "0s"],  # no drain: stopped at once
                                  stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection((HOST, self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.p.poll() is not None:
                    sys.exit("webhook did not start")
                time.sleep(0.05)

    def hwm(self):
        return status_kb(self.p.pid, "VmHWM")

    def post(self, body, timeout=60):
        """One review over a new connection: (status, answer, seconds)."""
        c = http.client.HTTPSConnection(HOST, self.port, context=self.ctx, timeout=timeout)
        t0 = time.perf_counter()
        c.request("POST", "/mutate", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        dt = time.perf_counter() - t0
        c.close()
        return r.status, data, dt

    def stop(self):
        self.p.terminate()
        try:
            self.p.wait(15)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(5)
        self.log.close()


class Prober:
    """GET /healthz every 20 ms on its own keep-alive connection; the
    slowest answer while it runs."""

    def __init__(self, wh):
        self.wh, self.worst, self.n, self.failed = wh, 0.0, 0, 0
        self.stop_ev = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        c = http.client.HTTPSConnection(HOST, self.wh.port, context=self.wh.ctx, timeout=30)
        while not self.stop_ev.is_set():
            t0 = time.perf_counter()
            try:
                c.request("GET", "/healthz")
                ok = c.getresponse().read() == b"ok\n"
            except (OSError, http.client.HTTPException):
                ok = False
                c.close()
                c = http.client.HTTPSConnection(HOST, self.wh.port, context=self.wh.ctx,
                                                timeout=30)
            self.worst = max(self.worst, time.perf_counter() - t0)
            self.n += 1
            self.failed += not ok
            self.stop_ev.wait(0.02)
        c.close()

    def stop(self):
        self.stop_ev.set()
        self.t.join(35)
        return self.worst


def held_bodies(wh, body, n, keep=1000):
    """n connections send their heads, then all but the last keep bytes of
    body, and hold (within the server's 5 s read timeout); returns (sockets
    still held, refused with 503)."""
    head = ("POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n" % len(body)).encode()
    socks = []
    for _ in range(n):
        raw = socket.create_connection((HOST, wh.port), timeout=30)
        s = wh.ctx.wrap_socket(raw, server_hostname=HOST)
        s.sendall(head)
        socks.append(s)
    time.sleep(0.3)  # a 503 comes at once, from the head
    held, refused = [], 0
    for s in socks:
        s.settimeout(0.01)
        try:
            first = s.recv(4096)
        except (socket.timeout, ssl.SSLError, OSError):
            first = b""
        s.settimeout(30)
        if first.startswith(b"HTTP/1.1 503"):
            refused += 1
            s.close()
            continue
        try:
            s.sendall(body[:-keep])
        except OSError:  # refused while its body arrived: a chunk past the budget
            refused += 1
            s.close()
            continue
        held.append(s)
    return held, refused


def finish_held(held, body, keep=1000):
    """Sends the rest of each held body; returns the statuses."""
    statuses = []
    for s in held:
        try:
            s.sendall(body[-keep:])
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            statuses.append(int(data.split(b" ", 2)[1]) if data else 0)
        except (OSError, ValueError, IndexError):
            statuses.append(0)
        s.close()
    return statuses


def handshakes(wh, n):
    """n connections that stop in the middle of their TLS handshake (the
    ClientHello sent, nothing after): what the server holds for each."""
    socks = []
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    for _ in range(n):
        raw = socket.create_connection((HOST, wh.port), timeout=30)
        inc, outg = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = ctx.wrap_bio(inc, outg, server_hostname=HOST)
        try:
            obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        raw.sendall(outg.read())
        socks.append(raw)
    time.sleep(0.5)  # the server has answered each ClientHello
    return socks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="ra-whworst-")
    rows = []
    try:
        make_certs(d)
        small = review_body()
        issue = env_review(88000)
        atcap = env_review(49980)  # 149 940 values + the review's own: just under the limit

        wh = Webhook(a.binary, d)
        times = []
        for _ in range(200):
            st, data, dt = wh.post(small)
            assert st == 200 and b'"patch"' in data, data[:200]
            times.append(dt)
        base_t, base_hwm = sorted(times)[len(times) // 2], wh.hwm()
        wh.stop()
        rows.append(("baseline: the ordinary review x 200 (median)", base_t, base_hwm, ""))

        def one(name, body, want):
            w = Webhook(a.binary, d)
            pr = Prober(w)
            st, data, dt = w.post(body)
            worst = pr.stop()
            ok = st == 200 and want in data
            time.sleep(0.2)
            rows.append((name, dt, w.hwm(), "%s; VmRSS after it %d KiB; /healthz slowest %.0f ms%s"
                         % ("ok" if ok else "UNEXPECTED %d %r" % (st, data[:120]),
                            status_kb(w.p.pid, "VmRSS"), worst * 1e3,
                            ", %d probes failed" % pr.failed if pr.failed else "")))
            w.stop()
            return dt

        one("size: 2.98 MB, 88 000 env vars (refused unparsed)" if len(issue) < 3 * MIB else
            "size: %d bytes, 88 000 env vars" % len(issue), issue, b"too large to read")
        one("size: %.1f MB, 49 980 env vars (at the value limit, injected)" % (len(atcap) / 1e6),
            atcap, b'"patch"')
        one("volumes: 2 000 (the most injected)", volume_review(2000), b'"patch"')
        per = []
        for n in (5000, 10000, 20000):
            body = volume_review(n)
            dt = one("volumes: %d (%.1f MB, refused after planning)" % (n, len(body) / 1e6), body,
                     b"more than 2000")
            per.append((n, dt))
        rows.append(("volumes: time per 1000 volumes at 5k / 10k / 20k", None, None,
                     " / ".join("%.1f ms" % (dt / n * 1e6) for n, dt in per)))

        w = Webhook(a.binary, d)
        pr = Prober(w)
        held, refused = held_bodies(w, atcap, 100)
        hwm_held = w.hwm()
        statuses = finish_held(held, atcap)
        worst = pr.stop()
        rows.append(("held bodies: 100 x %.1f MB held, then finished" % (len(atcap) / 1e6), None,
                     w.hwm(), "%d held (VmHWM %d KiB while held), %d refused with 503, answers "
                     "%s; /healthz slowest %.0f ms" % (len(held), hwm_held, refused,
                                                       sorted(set(statuses)), worst * 1e3)))
        w.stop()

        w = Webhook(a.binary, d)
        socks = handshakes(w, 256)
        rows.append(("handshakes: 256 connections in their TLS handshake", None, w.hwm(), ""))
        for s in socks:
            s.close()
        w.stop()

        # the worst: connections in their handshake up to the limit, bodies
        # held to what the budget leaves, and the largest review parsed then
        w = Webhook(a.binary, d)
        socks = handshakes(w, 250)
        left = 8 * MIB - (len(atcap) + 1)  # what the body budget leaves beside the review
        nfill = -(-left // (3 * MIB - 4096))
        filler = b" " * (left // nfill - 16)
        held, refused = held_bodies(w, filler, nfill)
        st, data, dt = w.post(atcap)
        worst_hwm = w.hwm()
        rows.append(("worst: 250 handshakes + %d bodies held (%.1f MB) + the largest review" %
                     (len(held), len(held) * len(filler) / 1e6), dt, worst_hwm,
                     "%d refused (503); the review answered %d" % (refused, st)))
        for s in held + socks:
            s.close()
        w.stop()

        print("webhook worst cases (fresh webhook per case; VmHWM = peak resident memory; "
              "ratios to the baseline of this run)")
        for name, t, hwm, note in rows:
            cols = [name]
            if t is not None:
                cols.append("%.1f ms (%.0fx)" % (t * 1e3, t / base_t))
            if hwm is not None:
                cols.append("VmHWM %d KiB (%.1fx)" % (hwm, hwm / base_hwm))
            if note:
                cols.append(note)
            print("  " + ": ".join(cols[:1]) + ": " + ", ".join(cols[1:]))
        print("  shipped limit: 64Mi (65536 KiB); measured worst %d KiB: %.0f%% of it" %
              (worst_hwm, 100.0 * worst_hwm / 65536))
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
