#!/usr/bin/env python3
"""scripts/link-order.py: regenerates scripts/link-order.txt, the order in
which the static link (make, with lld) lays out the functions the agent
really runs, so that they sit together in the binary (docs/lean.md,
"Memory").

Why: the kernel maps a binary's pages around each page fault (fault-around,
64 KiB), so code run at start and per action that is scattered across the
5 MB binary (OpenSSL, glibc) makes most of it resident. Put together, it
takes a fraction of the pages. The file is a profile, not a correctness
input: a stale one (a function renamed or added since) only costs memory,
and lld ignores names it does not find.

How: runs one agent per action kind under valgrind's callgrind (the memory
bench's scenarios, tests/bench/memory.py, with a few actions each) and
lists every function that ran, grouped by the first scenario that ran it,
in this order: signal (start-up, watch, hash, signal; shared by every
agent), none, exec, http, rollout (TLS, the API client), and last
webhook (`reload-agent webhook` with a test certificate: the TLS server,
X.509 loading, AdmissionReview parse, transform and patch, over keep-alive
and new connections, then SIGTERM; tests/bench/webhookbench.py's review).
The webhook comes after the agent scenarios so that its functions never
push an agent's out of the agent's pages; within each agent group, the
functions the webhook runs too are put together (split_for_webhook). Needs valgrind;
run it after changes to what runs at start or per action, and commit the
result:
    make && python3 scripts/link-order.py --binary build/reload-agent --tools build/tools
"""
import argparse
import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
import memory  # noqa: E402
import webhookbench  # noqa: E402

SCENARIOS = ["signal", "none", "exec", "http", "rollout"]
ACTIONS = 4
WEBHOOK_REVIEWS = 4  # per connection kind (keep-alive, new connection)
HEADER = """\
# scripts/link-order.txt: functions the agent runs, in the order the static
# link lays them out (lld --symbol-ordering-file; see scripts/link-order.py,
# which generated this file, and docs/lean.md). One symbol per line; groups
# by the first scenario that ran them.
"""


def functions(callgrind_out):
    """The names of the functions that ran, from a callgrind output file."""
    names, ids = [], {}
    pat = re.compile(r"^(c?fn)=\((\d+)\)(?: (.*))?$")
    with open(callgrind_out) as f:
        for line in f:
            m = pat.match(line.rstrip("\n"))
            if not m:
                continue
            kind, ident, name = m.groups()
            if name:
                ids[ident] = name
            if kind == "fn":
                n = re.sub(r"'\d+$", "", ids[ident])  # callgrind's recursion suffix
                if not n.startswith("(") and not n.startswith("0x"):
                    names.append(n)
    return names


def split_for_webhook(order, wh):
    """Within the agent's groups, moves the functions the webhook also ran
    (the set wh) next to each other: to the end of every group up to http,
    to the start of rollout (the last one). Each agent's functions stay one
    range; the webhook's shared ones become one range too, just before its
    own (TLS server, X.509, transform) after rollout's."""
    out = []
    for i, (kind, names) in enumerate(order):
        shared = [n for n in names if n in wh]
        rest = [n for n in names if n not in wh]
        if i == len(order) - 1:
            out.append(("%s (also run by webhook)" % kind, shared))
            out.append((kind, rest))
        else:
            out.append((kind, rest))
            out.append(("%s (also run by webhook)" % kind, shared))
    return out


def webhook(d, binary, out):
    """Runs `reload-agent webhook` under callgrind (output to out): reviews
    over one keep-alive connection, reviews each on a new connection, a
    request that is not a review, then SIGTERM; raises on any failure."""
    webhookbench.make_certs(d)
    port = webhookbench.free_port()
    host = webhookbench.HOST
    log = open(os.path.join(d, "webhook.log"), "wb")
    wh = subprocess.Popen(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
                           binary, "webhook", "--listen", "%s:%d" % (host, port),
                           "--tls-cert-file", d + "/tls.crt", "--tls-key-file", d + "/tls.key",
                           "--log-format", "json"], stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection((host, port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or wh.poll() is not None:
                    raise RuntimeError("link-order: the webhook did not start")
                time.sleep(0.1)
        body = webhookbench.review_body()
        for keep in (True, False):
            lat, errors = webhookbench.client_run((port, d + "/ca.crt", body, WEBHOOK_REVIEWS,
                                                   keep))
            if errors:
                raise RuntimeError("link-order: %d webhook reviews failed" % errors)
        c = http.client.HTTPSConnection(host, port, timeout=60,
                                        context=webhookbench.client_ctx(d + "/ca.crt"))
        c.request("POST", "/mutate", body=b"{", headers={"Content-Type": "application/json"})
        c.getresponse().read()
        c.close()
        wh.send_signal(signal.SIGTERM)
        wh.wait(120)
    finally:
        if wh.poll() is None:
            wh.kill()
            wh.wait(10)
        log.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--tools", required=True)
    ap.add_argument("--out", default=os.path.join(HERE, "link-order.txt"))
    a = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("link-order: needs valgrind (apt-get install valgrind)")
    b = memory.Bench(a.binary, a.tools)
    order, seen = [], set()
    try:
        for kind in SCENARIOS:
            out = b.path("callgrind.%s" % kind)
            prefix = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out]
            b.measure(kind, ACTIONS, prefix=prefix, idle_s=2.0)
            new = []
            for n in functions(out):
                if n not in seen:
                    seen.add(n)
                    new.append(n)
            order.append((kind, new))
            print("link-order: %-8s %5d functions (%d new)" % (kind, len(seen), len(new)))
        out = b.path("callgrind.webhook")
        webhook(b.path(), a.binary, out)
        wh = set(functions(out))
        new = []
        for n in functions(out):
            if n not in seen:
                seen.add(n)
                new.append(n)
        order = split_for_webhook(order, wh)
        order.append(("webhook", new))
        print("link-order: %-8s %5d functions (%d new)" % ("webhook", len(seen), len(new)))
    finally:
        b.cleanup()
    with open(a.out, "w") as f:
        f.write(HEADER)
        for kind, names in order:
            f.write("# %s\n" % kind)
            for n in names:
                f.write(n + "\n")
    print("link-order: wrote %s (%d symbols)" % (a.out, len(seen)))


if __name__ == "__main__":
    main()
