"""The HTTP client after the lean-runtime change (issue 11, docs/lean.md):
libcurl is built for the agent (HTTP and HTTPS only) and linked statically,
and it must still do what users rely on from Debian's libcurl.

- Proxies from the environment: the http action goes through http_proxy
  (the proxy sees the absolute-form request for a host only it can reach);
  no_proxy bypasses it; the Kubernetes client tunnels through https_proxy
  (CONNECT) to the fake API server over TLS, verified against its CA.
- HTTP/1.1 keep-alive to the API server: one agent's requests share
  connections (fewer CONNECT tunnels than API requests).

The proxy is a small one in this file, on 127.0.0.1: absolute-form requests
are answered by the proxy itself (200 "via proxy"); CONNECT is tunnelled to
127.0.0.1 only. It records what it received; the tests read that record
and the fake API server's request log, not only the agent's own log.
"""
import os
import socket
import threading

from tests.lib import fakeapi
from tests.lib.proc import check


IO_TIMEOUT_S = 20.0


def read_head(f):
    """Reads a request head: (request line, {lower-case name: value}) or
    (None, None) at EOF."""
    line = f.readline(8192)
    if not line:
        return None, None
    headers = {}
    while True:
        h = f.readline(8192)
        if h in (b"\r\n", b"\n", b""):
            break
        name, _, value = h.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return line.decode("latin-1").rstrip("\r\n"), headers


class Proxy:
    """A forward proxy on 127.0.0.1 that records (method, target) of every
    request; also serves as a plain origin server (origin-form requests are
    recorded and answered the same way)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.lock = threading.Lock()
        self.seen = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def requests(self):
        with self.lock:
            return list(self.seen)

    def close(self):
        self.closed = True
        self.sock.close()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            c.settimeout(IO_TIMEOUT_S)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        f = c.makefile("rb")
        try:
            while True:
                line, headers = read_head(f)
                if line is None:
                    return
                method, target = line.split(" ")[:2]
                with self.lock:
                    self.seen.append((method, target))
                if method == "CONNECT":
                    self._tunnel(c, f, target)
                    return
                n = int(headers.get("content-length") or 0)
                if n:
                    f.read(n)
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nvia proxy")
        except OSError:
            pass
        finally:
            f.close()
            c.close()

    def _tunnel(self, c, f, target):
        host, _, port = target.rpartition(":")
        if host not in ("127.0.0.1", "localhost"):  # loopback only, never further
            c.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            return
        up = socket.create_connection(("127.0.0.1", int(port)), timeout=IO_TIMEOUT_S)
        c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        buffered = f.peek() if hasattr(f, "peek") else b""
        if buffered:  # a client that sent its TLS hello at once
            up.sendall(f.read(len(buffered)))

        def pump(a, b):
            try:
                while True:
                    d = a.recv(65536)
                    if not d:
                        break
                    b.sendall(d)
            except OSError:
                pass
            finally:
                for s in (a, b):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        t = threading.Thread(target=pump, args=(up, c), daemon=True)
        t.start()
        pump(c, up)
        t.join(IO_TIMEOUT_S)
        up.close()


def proxy_env(**kw):
    """The agent's proxy variables: only the given ones (every other is
    emptied, whatever the test runner's environment holds)."""
    env = {k: "" for k in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY",
                           "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY")}
    env.update(kw)
    return env


def volume(env):
    vol = env.path("vol")
    os.mkdir(vol)
    env.awsim(vol, {"app.conf": "v1\n"}, "--seed", "1")
    return vol


def http_agent(env, url, extra_env):
    vol = volume(env)
    a = env.agent(["--watch", vol, "--action", "http", "--http-url", url, "--on-start", "reload",
                   "--resync", "0", "--retry-initial", "100ms", "--retry-max", "200ms"],
                  extra_env=extra_env)
    a.wait_event("ready", timeout=15)
    return a


def test_http_action_uses_http_proxy_from_environment(env):
    """http_proxy is honoured: the request for a host that does not resolve
    (.invalid) reaches the proxy in absolute form and succeeds through it."""
    p = Proxy()
    try:
        url = "http://app.reload-agent.invalid:8080/-/reload"
        a = http_agent(env, url, proxy_env(http_proxy=p.url))
        ev = a.wait_match("action", 15, action="http")
        check(ev.get("result") == "success", "action through the proxy: %r" % ev)
        check(("POST", url) in p.requests(), "proxy saw %r" % p.requests())
    finally:
        p.close()


def test_no_proxy_bypasses_the_proxy(env):
    """no_proxy=127.0.0.1: the request goes straight to the app, and the
    proxy named by http_proxy sees nothing."""
    p, app = Proxy(), Proxy()
    try:
        a = http_agent(env, app.url + "/-/reload",
                       proxy_env(http_proxy=p.url, no_proxy="127.0.0.1"))
        ev = a.wait_match("action", 15, action="http")
        check(ev.get("result") == "success", "direct action: %r" % ev)
        check(app.requests() == [("POST", "/-/reload")], "app saw %r" % app.requests())
        check(p.requests() == [], "the proxy saw %r despite no_proxy" % p.requests())
    finally:
        p.close()
        app.close()


def test_api_client_tunnels_through_https_proxy_with_keepalive(env):
    """https_proxy is honoured by the Kubernetes client: its TLS requests to
    the fake API server (verified against the fake's CA) go through CONNECT
    tunnels, and keep-alive makes one tunnel carry several requests."""
    p = Proxy()
    fake = fakeapi.launch(env.path("fakeapi"), fixture="deployment", pods=1, spawn=env.spawn)
    try:
        vol = volume(env)
        a = env.agent(["--watch", vol, "--action", "rollout", "--debounce", "50ms", "--resync", "0",
                       "--rollout-jitter", "0s", "--kube-api", fake.url,
                       "--kube-ca-file", fake.info["ca"], "--kube-token-file",
                       fake.info["token_file"], "--pod-name", fake.info["pods"][0],
                       "--namespace", "default", "--annotations", ""],
                      extra_env=proxy_env(https_proxy=p.url))
        a.wait_event("ready", timeout=15)
        for i in range(3):
            env.awsim(vol, {"app.conf": "v%d\n" % (i + 2)})
            a.wait_for(lambda evs, n=i + 1: len([e for e in evs if e.get("event") == "action" and
                                                 e.get("action") == "rollout" and
                                                 e.get("result") == "success"]) >= n,
                       15, "rollout %d" % (i + 1))
        status, reqs = fake.ctl("GET", "/requests")
        check(status == 200, "fake /requests: %r" % status)
        patches = [r for r in reqs if r["method"] == "PATCH" and r["status"] == 200]
        check(len(patches) == 3, "PATCHes the fake answered: %d" % len(patches))
        connects = [t for m, t in p.requests() if m == "CONNECT"]
        check(connects and all(t == "127.0.0.1:%d" % fake.port for t in connects),
              "CONNECTs through the proxy: %r" % connects)
        check(len(p.requests()) == len(connects), "non-CONNECT requests at the proxy: %r" %
              p.requests())
        # keep-alive: the API requests (pod, owner chain, 3 PATCHes, Events)
        # share tunnels instead of one each
        check(2 * len(connects) <= len(reqs),
              "%d CONNECT tunnels for %d API requests: connections are not kept alive" %
              (len(connects), len(reqs)))
    finally:
        p.close()
