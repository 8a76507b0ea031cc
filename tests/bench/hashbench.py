#!/usr/bin/env python3
"""make bench, hash part: the content hash's throughput against
`openssl dgst -sha256` on the same 1 GiB file in the same run, and the idle
memory of an agent.

Figures printed:
  - MB/s of `openssl dgst -sha256 FILE` and of `reload-agent hash FILE`
    (best of N runs each, alternating, the file on tmpfs so both read it
    from memory), and their ratio (target >= 0.95);
  - idle VmRSS of an agent watching a small volume, and of one whose
    volume holds the 1 GiB file (after its baseline hash): reading big
    files must leave no buffer behind.
The per-file digest the agent lists must equal openssl's, and its hash the
SHA-256 of its one manifest line (a wrong answer fast is no answer).
"""
import argparse
import hashlib
import json
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import time

from tests.lib.proc import status_kb

MIB = 1 << 20


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def timed(args):
    """Runs args (bounded), returns (seconds, stdout)."""
    t0 = time.perf_counter()
    r = subprocess.run(args, capture_output=True, timeout=300)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit("%s failed (%d): %s" % (args[0], r.returncode, r.stderr.decode(errors="replace")))
    return dt, r.stdout


def make_file(path, size):
    """size bytes of pseudo-random content (a 16 MiB random block repeated)."""
    block = os.urandom(16 * MIB)
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n


def idle_rss(binary, vol, timeout=120):
    """Starts `run` on vol, waits for its baseline, lets it settle, and
    returns its VmRSS in KiB; the agent is stopped by its PID."""
    p = subprocess.Popen([binary, "run", "--watch", vol, "--action", "none", "--resync", "0",
                          "--log-format", "json", "--log-level", "info"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        sel = selectors.DefaultSelector()
        sel.register(p.stderr, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        buf = b""
        while b'"baseline"' not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or p.poll() is not None:
                sys.exit("agent on %s: no baseline within %ds (exit %s): %s" %
                         (vol, timeout, p.poll(), buf.decode(errors="replace")))
            if sel.select(min(left, 1.0)):
                chunk = os.read(p.stderr.fileno(), 65536)
                if not chunk:
                    continue
                buf += chunk
        time.sleep(1.0)  # idle
        return status_kb(p.pid, "VmRSS")
    finally:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--runs", type=int, default=5, help="runs of each, alternating (best counts)")
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--dir", default="/dev/shm", help="a tmpfs directory for the file")
    ap.add_argument("--json", action="store_true", help="also print the figures as JSON")
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    openssl = shutil.which("openssl")
    if not openssl:
        sys.exit("hashbench needs the openssl command line tool")
    size = a.size_mib * MIB
    if not os.path.isdir(a.dir) or not os.access(a.dir, os.W_OK):
        sys.exit("hashbench: %s is not a writable directory" % a.dir)
    st = os.statvfs(a.dir)
    if st.f_bavail * st.f_frsize < size + 64 * MIB:
        sys.exit("hashbench: %s has %d MiB free, need %d MiB" %
                 (a.dir, st.f_bavail * st.f_frsize // MIB, size // MIB + 64))
    if mem_available() < size + 512 * MIB:  # a tmpfs file is memory
        sys.exit("hashbench: %d MiB of memory available, need %d MiB" %
                 (mem_available() // MIB, size // MIB + 512))
    tmp = tempfile.mkdtemp(prefix="ra-hashbench-", dir=a.dir)
    res = {}
    try:
        small = os.path.join(tmp, "small")
        os.makedirs(small)
        for i in range(3):
            with open(os.path.join(small, "key%d" % i), "w") as f:
                f.write("value %d\n" % i)
        rss_small = idle_rss(binary, small)

        big_dir = os.path.join(tmp, "big")
        os.makedirs(big_dir)
        big = os.path.join(big_dir, "big.bin")
        make_file(big, size)

        # correctness first: the agent's per-file digest is openssl's
        _, out = timed([openssl, "dgst", "-sha256", "-r", big])
        want = out.split()[0].decode()
        _, out = timed([binary, "hash", "--list", big])
        lines = out.decode().splitlines()
        line = "%s  %s" % (want, big)
        if lines != [line, hashlib.sha256((line + "\n").encode()).hexdigest()]:
            sys.exit("hashbench: agent output %r disagrees with openssl (%s)" % (lines, want))

        times = {"openssl": [], "agent": []}
        cmds = {"openssl": [openssl, "dgst", "-sha256", big], "agent": [binary, "hash", big]}
        for r in range(a.runs):
            order = ["openssl", "agent"] if r % 2 == 0 else ["agent", "openssl"]
            for name in order:
                times[name].append(timed(cmds[name])[0])
        mbps = {k: size / min(v) / 1e6 for k, v in times.items()}
        ratio = mbps["agent"] / mbps["openssl"]
        rss_big = idle_rss(binary, big_dir)
        res = {"size_mib": a.size_mib, "runs": a.runs,
               "openssl_mbps": round(mbps["openssl"]), "agent_mbps": round(mbps["agent"]),
               "ratio": round(ratio, 3),
               "openssl_s": [round(t, 3) for t in times["openssl"]],
               "agent_s": [round(t, 3) for t in times["agent"]],
               "idle_rss_kib": rss_small, "idle_rss_after_1gib_kib": rss_big}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print("hash throughput, %d MiB file on %s, best of %d alternating runs:" %
          (a.size_mib, a.dir, a.runs))
    print("  openssl dgst -sha256: %5d MB/s  (runs: %s s)" %
          (res["openssl_mbps"], " ".join("%.3f" % t for t in res["openssl_s"])))
    print("  reload-agent hash:    %5d MB/s  (runs: %s s)" %
          (res["agent_mbps"], " ".join("%.3f" % t for t in res["agent_s"])))
    print("  ratio: %.2fx  (target >= 0.95x: %s)" % (res["ratio"], "met" if res["ratio"] >= 0.95 else "NOT met"))
    print("idle VmRSS: %d KiB on a small volume, %d KiB after hashing the %d MiB file" %
          (res["idle_rss_kib"], res["idle_rss_after_1gib_kib"], a.size_mib))
    if a.json:
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
