"""nginx end to end: the agent's signal action reloading a real nginx.

nginx (/usr/sbin/nginx) runs as a daemon with `worker_processes 2`, a pid
file and a notice-level error log in the test's temp dir, listening on
127.0.0.1 with a free port; its server block `include`s site.conf from a
kubelet-layout volume written by build/tools/awsim. The agent watches the
volume with --action signal (SIGHUP). For each real update the new content
must be served, the master PID must stay the same, and nginx's own error log
must show exactly one "signal 1 (SIGHUP) received from <agent PID>" per
change; identical rewrites must cause none. nginx is stopped with SIGQUIT to
its master PID at the end, whatever the outcome.
"""
import os
import signal
import time

from tests.lib.proc import TestFailure, check, free_port, http_get, wait_until

NGINX = "/usr/sbin/nginx"
UPDATES = 5
QUIET = 1.0

CONF = """daemon on;
master_process on;
worker_processes 2;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log notice;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/ngx-body;
    proxy_temp_path {tmp}/ngx-proxy;
    fastcgi_temp_path {tmp}/ngx-fastcgi;
    uwsgi_temp_path {tmp}/ngx-uwsgi;
    scgi_temp_path {tmp}/ngx-scgi;
    default_type text/plain;
    server {{
        listen 127.0.0.1:{port};
        include {vol}/site.conf;
    }}
}}
"""


def site(generation):
    return 'location / {\n    return 200 "generation %d\\n";\n}\n' % generation


def body(generation):
    return b"generation %d\n" % generation


class Nginx:
    def __init__(self, env, vol):
        self.env = env
        self.port = free_port()
        self.pid_file = env.path("nginx.pid")
        self.error_log = env.path("nginx-error.log")
        self.url = "http://127.0.0.1:%d/" % self.port
        conf = env.path("nginx.conf")
        with open(conf, "w") as f:
            f.write(CONF.format(tmp=env.tmp, port=self.port, vol=vol))
        r = env.run([NGINX, "-p", env.tmp, "-c", conf, "-e", self.error_log], timeout=20)
        check(r.returncode == 0, "nginx did not start: %s" % r.stderr.decode(errors="replace"))
        wait_until(lambda: self._read_pid(), 10, "nginx's pid file")
        self.master = self._read_pid()

    def _read_pid(self):
        try:
            with open(self.pid_file) as f:
                return int(f.read().strip() or 0)
        except (OSError, ValueError):
            return 0

    def alive(self):
        try:
            with open("/proc/%d/stat" % self.master) as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    def check_master(self):
        check(self._read_pid() == self.master and self.alive(),
              "nginx master changed: pid file says %d, started as %d (alive: %s)" %
              (self._read_pid(), self.master, self.alive()))

    def hups(self, sender=None):
        """SIGHUPs the master logged (from `sender` only, if given)."""
        with open(self.error_log, errors="replace") as f:
            log = f.read().splitlines()
        hups = [l for l in log if "signal 1 (SIGHUP) received" in l]
        # A worker logs the same line ending in ", ignoring": it must never
        # be signalled (only the topmost match, the master).
        lines = [l for l in hups if ("] %d#" % self.master) in l and l.endswith(", reconfiguring")]
        check(lines == hups, "SIGHUPs not taken by the master %d: %r" % (self.master, hups))
        if sender is not None:
            lines = [l for l in lines if "received from %d," % sender in l]
        return len(lines)

    def serves(self, generation, timeout=10.0):
        def pred():
            st, b = http_get(self.url)
            return st == 200 and b == body(generation)
        wait_until(pred, timeout, "nginx to serve generation %d" % generation)

    def stop(self):
        """SIGQUIT (graceful stop) to the master PID; waits until it is gone."""
        if not self.alive():
            return
        os.kill(self.master, signal.SIGQUIT)
        deadline = time.monotonic() + 10
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.alive():
            os.kill(self.master, signal.SIGKILL)
            raise TestFailure("nginx master %d ignored SIGQUIT for 10s" % self.master)


def reload_five_times(env, target_args):
    vol = env.path("vol")
    os.mkdir(vol)
    env.awsim(vol, {"site.conf": site(0)}, "--seed", "1")
    ngx = Nginx(env, vol)
    try:
        ngx.serves(0)
        check(ngx.hups() == 0, "nginx logged a SIGHUP before any change")
        a = env.agent(["--watch", vol, "--debounce", "50ms", "--resync", "0",
                       "--action", "signal"] + target_args)
        a.wait_event("ready", timeout=15)
        for g in range(1, UPDATES + 1):
            env.awsim(vol, {"site.conf": site(g)})
            want = env.hash_of(vol)
            a.wait_for(lambda evs: [e for e in evs if e.get("event") == "action" and
                                    e.get("hash") == want and e.get("result") == "success"],
                       10, "a successful signal action for generation %d" % g)
            ngx.serves(g)
            ngx.check_master()
            wait_until(lambda: ngx.hups() >= g, 5, "nginx to log SIGHUP %d" % g)
            check(ngx.hups() == ngx.hups(sender=a.pid) == g,
                  "after %d changes nginx logged %d SIGHUPs (%d from the agent)" %
                  (g, ngx.hups(), ngx.hups(sender=a.pid)))
        # Identical rewrites (the kubelet's periodic sync) never reload.
        r = env.run([env.tool("awsim"), "--dir", vol, "--count", "3", "--noop"])
        check(r.returncode == 0, "awsim --noop: %r" % r.stderr)
        a.quiet(QUIET)
        check(ngx.hups() == UPDATES, "no-op rewrites: nginx logged %d SIGHUPs, want %d" % (ngx.hups(), UPDATES))
        check(len(a.of("change")) == UPDATES and len(a.of("action")) == UPDATES,
              "%d change / %d action events for %d updates" % (len(a.of("change")), len(a.of("action")), UPDATES))
        ngx.serves(UPDATES)
        ngx.check_master()
    finally:
        ngx.stop()


def test_nginx_reload_by_pid_file(env):
    reload_five_times(env, ["--pid-file", env.path("nginx.pid")])


def test_nginx_reload_by_process_name(env):
    # --process signals every topmost "nginx" on the machine (that is its
    # contract), so another nginx elsewhere would be signalled too; the
    # checks count what *our* master logged, which stays exact either way.
    reload_five_times(env, ["--process", "nginx"])
