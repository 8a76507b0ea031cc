"""The test library's floor: failures, the one bounded poll loop, and what
every suite asks of a process or a port (tests/lib/README.md).

Every wait here is bounded in time; nothing here stops a process.
"""
import socket
import time
import urllib.error
import urllib.request


class TestFailure(AssertionError):
    """A check that did not hold; the runners print it and count a failure."""
    __test__ = False


def check(cond, msg="check failed"):
    """Raises TestFailure(msg) unless cond is true."""
    if not cond:
        raise TestFailure(msg)


def poll(step, timeout, interval):
    """The one bounded poll loop of the tests: calls step() every interval
    seconds until it returns a true value, which is returned, or until
    timeout seconds have passed, and then returns None. step() is called at
    least once, and once more at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        v = step()
        if v:
            return v
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(interval, left))


def wait_until(pred, timeout, what="condition", interval=0.05):
    """Polls pred() (poll) until it returns a true value, which is returned;
    raises TestFailure after timeout seconds, naming what it waited for and
    the last value pred returned. A TestFailure pred raises counts as "not
    yet" (its message is the last value). The bound is required."""
    last = []

    def step():
        try:
            v = pred()
        except TestFailure as e:
            v = None
            last[:] = [str(e)]
        if not v and v is not None:
            last[:] = [v]
        return v

    v = poll(step, timeout, interval)
    if v:
        return v
    raise TestFailure("timed out after %.1f s waiting for %s%s" % (
        timeout, what, " (last: %r)" % last[0] if last else ""))


def free_port(host="127.0.0.1"):
    """A TCP port on host that was free a moment ago."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def http_get(url, timeout=5.0):
    """GET url; returns (status, body bytes) for any status, and raises
    TestFailure if no HTTP answer arrives within timeout."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (OSError, urllib.error.URLError) as e:
        raise TestFailure("GET %s: %s" % (url, e))


MEMORY_KEYS = ("VmRSS", "VmHWM", "RssAnon", "RssFile")


def status_kb(pid, key):
    """The KiB figure of one /proc/PID/status line (VmRSS, VmHWM, RssAnon...),
    or -1 when the line is not there."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def memory_kb(pid):
    """{VmRSS, VmHWM, RssAnon, RssFile: KiB} of pid, from /proc/PID/status."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in MEMORY_KEYS:
                out[k] = int(v.split()[0])
    return out
