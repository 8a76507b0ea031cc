"""Safe in-place reload on the real cluster (issue 26, docs/safe-reload.md):
stock nginx (localhost/e2e-nginx:1), 4 replicas, injected by `reload-agent
inject` from the annotations validate "nginx -t", keep-last-good "true",
verify http://127.0.0.1:8080/, stage "1" (with fast sync, so a change
reaches the volume in about a second), and everything inject writes
applied as it comes out: the Deployment with the validator container, the
install init container, the copies and the startup probe; the fast-sync
Role; the stage's Role, RoleBinding and Lease.

In order, on the same pods:
  - a syntax error is rejected on every replica: each agent logs
    config-rejected, the nginx master PIDs stay, every replica still serves
    the old content, Events ConfigRejected;
  - the nginx container killed after the rejection restarts on the last good
    config (the copy), not on the broken file the volume holds;
  - a valid change reaches the replicas one at a time: in the agents' logs
    no replica acts before the one before it verified;
  - a change that passes nginx -t but answers 500 is rolled back on the
    first replica (ConfigRolledBack) and never reaches the others
    (stage-halted; polled all along, no other replica answers 500), Event
    ConfigHalted.

The storm test flips a Secret every 3 s under storm-limit 3/1m (the Role of
manifests/role.yaml bound, for Events): the agent acts 3 times, halts
(storm-halted, Event ReloadStormHalted) while the flipping goes on, and
resumes once the content has been stable a minute.

No timing is asserted; the times are logged.
"""
import json
import os
import subprocess
import threading
import time

from tests.lib import apps
from tests.lib.cluster import REPO, grant_role, http_text, rfc3339, wait_until
from tests.lib.proc import TestFailure, check, poll

REPLICAS = 4
VERIFY_URL = "http://127.0.0.1:%d/" % apps.PORT


def inject_apply(env, workload):
    """`reload-agent inject -` on the workload, in the test's namespace, and
    everything it writes applied as it comes out; returns the report."""
    env.c.kubectl("apply", "-f", os.path.join(REPO, "manifests/fast-sync/policy.yaml"))
    obj = json.loads(workload)
    obj["metadata"]["namespace"] = env.ns
    p = subprocess.run([env.c.binary, "inject", "-"], input=json.dumps(obj).encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    if p.returncode != 0:
        raise TestFailure("reload-agent inject: %s" % p.stderr.decode())
    report = p.stderr.decode()
    env.log("inject: %s" % report.strip().replace("\n", "; "))
    env.apply(p.stdout.decode())
    return report


def safe_workload(replicas=REPLICAS, **extra):
    ann = apps.agent_annotations(action="signal", process="nginx", fast_sync="true",
                                 validate="nginx -t", keep_last_good="true", verify=VERIFY_URL,
                                 verify_timeout="4s", stage="1", **extra)
    return apps.nginx_workload("Deployment", "web", ann, replicas=replicas)


def served(ip):
    st, body = http_text("http://%s:%d/" % (ip, apps.PORT), timeout=1.0)
    return body.strip() if st == 200 else st


def master_pid(env, pod):
    return env.exec(pod, "nginx", "cat", "/run/nginx.pid").strip()


def events_of(env, pod, name, h=None):
    return [e for e in env.agent_events(pod) if e.get("event") == name and (h is None or e.get("hash") == h)]


def reasons(env):
    return [e.get("reason") for e in env.events()]


def check_injected(pod):
    spec = pod["spec"]
    inits = [c["name"] for c in spec["initContainers"]]
    check(inits[-3:] == ["reload-agent-install", "reload-agent-validator", "reload-agent"],
          "init containers %r" % inits)
    side = spec["initContainers"][-1]
    check(side["startupProbe"]["exec"]["command"][1] == "ready", "no startup probe: %r" % side)
    args = side["args"]
    for want in ("--validator-socket=/reload-agent/validator/validator.sock",
                 "--keep-last-good=/etc/nginx/conf.d=/reload-agent/lkg/site",
                 "--stage-workload=deployment/web"):
        check(want in args, "%s not in %r" % (want, args))
    (m,) = [m for m in spec["containers"][0]["volumeMounts"] if m["mountPath"] == "/etc/nginx/conf.d"]
    check(m["name"] == "reload-agent-lkg-site" and m["subPath"] == "live", "nginx mounts %r" % m)


class Poller:
    """Polls every pod IP every 100 ms in a thread; keeps the set of
    answers of each."""

    def __init__(self, ips):
        self.ips = ips
        self.seen = {ip: set() for ip in ips}
        self.stop = threading.Event()
        self.th = threading.Thread(target=self.run, daemon=True)
        self.th.start()

    def run(self):
        poll(self.step, 600, 0.1)

    def step(self):
        for ip in self.ips:
            self.seen[ip].add(served(ip))
        return self.stop.is_set()

    def done(self):
        self.stop.set()
        self.th.join(10)
        return self.seen


def start(env):
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v1")}))
    report = inject_apply(env, safe_workload())
    for want in ("validate: `nginx -t` runs in container reload-agent-validator",
                 "keep-last-good: the app reads volume site", "stage: 1 replica(s) of deployment/web",
                 "role/reload-agent-stage-deployment-web written"):
        check(want in report, "the report says nothing like %r: %s" % (want, report))
    env.kubectl("rollout", "status", "deployment/web", "--timeout=300s", timeout=320)
    pods = sorted(env.ready_pods("app=web"), key=lambda p: p["metadata"]["name"])
    check(len(pods) == REPLICAS, "%d ready pods" % len(pods))
    for p in pods:
        check_injected(p)
        env.wait_agent_event(p["metadata"]["name"], "copies-ready", 60)
    names = [p["metadata"]["name"] for p in pods]
    ips = [p["status"]["podIP"] for p in pods]
    check([served(ip) for ip in ips] == ["v1"] * REPLICAS, "not all serve v1")
    return names, ips


def edit(env, body_conf):
    t0 = time.monotonic()
    env.apply(apps.configmap("site", {"site.conf": body_conf}))
    return t0


def rejected_everywhere(env, names, ips, pids):
    t0 = edit(env, 'server { listen %d; location / { return 200 "v2\\n" } }\n' % apps.PORT)
    evs = {n: env.wait_agent_event(n, "config-rejected", 180) for n in names}
    env.log("the syntax error was rejected on all %d replicas %.1f s after the edit"
            % (len(names), time.monotonic() - t0))
    hashes = {e["hash"] for e in evs.values()}
    check(len(hashes) == 1, "the replicas rejected different contents: %r" % hashes)
    bad = hashes.pop()
    for n in names:
        check("unexpected" in json.dumps(evs[n]) or "expecting" in json.dumps(evs[n]),
              "config-rejected of %s does not carry nginx's message: %r" % (n, evs[n]))
        check(not events_of(env, n, "action", bad), "%s acted on the rejected content" % n)
    check([master_pid(env, n) for n in names] == pids, "an nginx master PID changed")
    check([served(ip) for ip in ips] == ["v1"] * REPLICAS, "not every replica serves v1 any more")
    wait_until(lambda: "ConfigRejected" in reasons(env), 60, "Event ConfigRejected")
    return bad


def restart_on_last_good(env, name, ip):
    """The nginx container killed: it starts again on the copy (v1)."""
    before = {c["name"]: c.get("restartCount", 0) for c in env.get("pod", name)["status"]["containerStatuses"]}
    env.exec(name, "nginx", "sh", "-c", "kill $(cat /run/nginx.pid)", check=False)
    wait_until(lambda: {c["name"]: c.get("restartCount", 0) for c in
                        env.get("pod", name)["status"]["containerStatuses"]}["nginx"] > before["nginx"],
               120, "the nginx container of %s to restart" % name)
    wait_until(lambda: served(ip) == "v1", 120, "%s to serve v1 again" % name)
    conf = env.exec(name, "nginx", "cat", "/etc/nginx/conf.d/site.conf")
    check('"v1' in conf, "the restarted nginx reads %r, not the last good config" % conf)
    env.log("nginx of %s killed after the rejection restarted on the last good config" % name)


def one_at_a_time(env, names, ips):
    t0 = edit(env, apps.site_conf("v3"))
    wait_until(lambda: [served(ip) for ip in ips] == ["v3"] * REPLICAS, 240, "every replica to serve v3")
    env.log("the valid change reached all %d replicas in %.1f s" % (len(names), time.monotonic() - t0))
    turns = []
    h = None
    for n in names:
        # serving v3 comes before the verification ends (its probe takes ~0.5 s): wait for it
        ver = wait_until(lambda: events_of(env, n, "verified"), 60, "%s to verify the change" % n)
        h = h or ver[-1]["hash"]
        acts = [e for e in events_of(env, n, "action", h) if e.get("result") == "success"]
        check(acts and events_of(env, n, "verified", h), "%s: no action and verification of %s" % (n, h))
        turns.append((rfc3339(acts[0]["time"]), rfc3339(events_of(env, n, "verified", h)[0]["time"]), n))
    turns.sort()
    for (a0, v0, n0), (a1, v1, n1) in zip(turns, turns[1:]):
        check(a1 >= v0, "%s acted at %.3f before %s verified at %.3f" % (n1, a1, n0, v0))
    env.log("turns (action -> verified, s after the first): " + ", ".join(
        "%.1f->%.1f" % (a - turns[0][0], v - turns[0][0]) for a, v, _ in turns))
    return h


def rolled_back_on_first(env, names, ips):
    poll = Poller(ips)
    edit(env, 'server { listen %d; location / { return 500; } }\n' % apps.PORT)
    back = wait_until(lambda: [n for n in names if events_of(env, n, "config-rolled-back")], 180,
                      "a replica to roll back")
    check(len(back) == 1, "replicas rolled back: %r" % back)
    h = events_of(env, back[0], "config-rolled-back")[0]["hash"]
    others = [n for n in names if n != back[0]]
    for n in others:
        env.wait_agent_event(n, "stage-halted", 120, lambda e: e.get("hash") == h)
    wait_until(lambda: [served(ip) for ip in ips] == ["v3"] * REPLICAS, 60, "every replica to serve v3")
    seen = poll.done()
    for n, ip in zip(names, ips):
        if n != back[0]:
            check(seen[ip] == {"v3"}, "%s answered %r during the bad change" % (n, seen[ip]))
        check(not events_of(env, n, "action", h) or n == back[0], "%s acted on %s" % (n, h))
    wait_until(lambda: {"ConfigRolledBack", "ConfigHalted"} <= set(reasons(env)), 60,
               "Events ConfigRolledBack and ConfigHalted")
    env.log("the change failing verification was rolled back on %s and halted for the other %d"
            % (back[0], len(others)))


def test_safe_reload_nginx(env):
    names, ips = start(env)
    pids = [master_pid(env, n) for n in names]
    rejected_everywhere(env, names, ips, pids)
    restart_on_last_good(env, names[0], ips[0])
    one_at_a_time(env, names, ips)
    rolled_back_on_first(env, names, ips)


test_safe_reload_nginx.timeout = 1200


def test_storm_breaker_stops_a_flipping_secret(env):
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v1")}))
    secret = lambda v: json.dumps({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tok"},
                                   "stringData": {"token": v}})
    env.apply(secret("a"))
    grant_role(env)  # Events: what docs/kubernetes.md tells a user to bind
    ann = apps.agent_annotations(action="signal", process="nginx", fast_sync="true", storm_limit="3/1m")
    inject_apply(env, apps.nginx_workload(
        "Deployment", "web", ann, extra_volumes=[{"name": "tok", "secret": {"secretName": "tok"}}],
        extra_mounts=[{"name": "tok", "mountPath": "/etc/tok"}]))
    env.kubectl("rollout", "status", "deployment/web", "--timeout=180s", timeout=200)
    (pod,) = env.ready_pods("app=web")
    name = pod["metadata"]["name"]
    env.wait_agent_event(name, "fast-sync-start", 60)
    t0 = time.monotonic()
    flips = 0
    for flips in range(1, 16):  # 15 flips, 3 s apart
        env.apply(secret("b" if flips % 2 else "a"))
        time.sleep(3)
    halted = events_of(env, name, "storm-halted")
    acts = events_of(env, name, "action")
    env.log("%d flips 3 s apart: %d actions, storm-halted %s" % (flips, len(acts), bool(halted)))
    check(halted, "the breaker did not halt after %d flips" % flips)
    check(len(acts) <= 3, "%d actions under storm-limit 3/1m" % len(acts))
    wait_until(lambda: "ReloadStormHalted" in reasons(env), 60, "Event ReloadStormHalted")
    env.wait_agent_event(name, "storm-resumed", 150)
    env.log("resumed %.0f s after the flipping started" % (time.monotonic() - t0))


test_storm_breaker_stops_a_flipping_secret.timeout = 600
