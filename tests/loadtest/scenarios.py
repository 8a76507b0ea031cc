"""The load suite's scenarios, after stakater Reloader's test/loadtest (S1-S13),
adapted to an agent that runs in each pod, and scaled to this 2-core machine
(each scenario says what it scaled). Every scenario returns one result dict:
expected and seen actions (from the apps' own evidence: the content nginx
serves, its master PID, pod generations; the agents' logs only as a
cross-check), API requests per change by verb (the audit log), apply -> the app
uses the content (p50/p95/p99), the agents' memory and CPU, and errors.

The kubelet rewrites a mounted ConfigMap at its periodic pod sync (about a
minute); scenarios wait for it with bounded waits and change many objects at
once rather than one after another.
"""
import json
import os
import subprocess
import time

from tests.lib import apps, stats
from tests.lib.cluster import AGENT_CONTAINER, REPO, Env, http_text, rfc3339, wait_until
from tests.loadtest import measure

T_SYNC = 240  # the longest a kubelet sync may take, with margin (seconds)

# The build under test: "" and the image the webhook injects by default, or
# for an A/B run ("old") another agent image, named per pod with the
# injector's reload-agent.io/sidecar-image annotation (run.py --old).
VARIANT = {"name": "", "image": None}


def agent_ann(**kw):
    """The agent's annotations for the build under test."""
    a = apps.agent_annotations(**kw)
    if VARIANT["image"]:
        a["reload-agent.io/sidecar-image"] = VARIANT["image"]
    return a


class Ns(Env):
    """A namespace of the load suite: load-<name>."""

    def __init__(self, cluster, name):
        super().__init__(cluster, name)
        self.ns = "load-" + name + ("-" + VARIANT["name"] if VARIANT["name"] else "")

    def grant_role(self, sa="default"):
        self.kubectl("apply", "-f", os.path.join(REPO, "manifests/role.yaml"))
        self.kubectl("create", "rolebinding", "reload-agent", "--role=reload-agent",
                     "--serviceaccount=%s:%s" % (self.ns, sa))


def targets(pods, path="/"):
    return [(p["metadata"]["name"], "http://%s:%d%s" % (p["status"]["podIP"], apps.PORT, path)) for p in pods]


def agent_counts(env, pods):
    """Per pod: successful actions and content changes in the agent's log."""
    acts = chg = errs = 0
    for p in pods:
        for e in env.agent_events(p["metadata"]["name"]):
            if e.get("event") == "action" and e.get("result") == "success":
                acts += 1
            elif e.get("event") == "change":
                chg += 1
            elif e.get("level") == "error":
                errs += 1
    return acts, chg, errs


def master_pids(env, pods):
    out = {}
    for p in pods:
        rc, o, _ = env.kubectl("exec", p["metadata"]["name"], "-c", "nginx", "--", "cat", "/run/nginx.pid",
                               check=False, timeout=30)
        out[p["metadata"]["name"]] = o.strip() if rc == 0 else None
    return out


def wait_pods(env, selector, n, timeout=300):
    return wait_until(lambda: (lambda r: r if len(r) == n else None)(env.ready_pods(selector)), timeout,
                          "%d ready pods %s in %s" % (n, selector, env.ns), interval=1.0)


def settle(env, pods, seconds=0):
    for p in pods:
        env.wait_agent_event(p["metadata"]["name"], "ready", 120)
    time.sleep(seconds)


def result(name, scaled, **kw):
    r = {"scenario": name + (" [%s]" % VARIANT["name"] if VARIANT["name"] else ""), "scaled": scaled,
         "build": VARIANT["name"] or "current"}
    r.update(kw)
    r.setdefault("errors", 0)
    r["pass"] = (r.get("lost", 0) == 0 and r.get("duplicated", 0) == 0 and r["errors"] == 0
                 and not r.get("failures"))
    return r


# ---- in-place reloads of stock nginx (signal) ----

def signal_fleet(env, n, cm="site", name="web", ann_extra=None, replicas=1):
    ann = agent_ann(action="signal", process="nginx", **(ann_extra or {}))
    env.apply(apps.configmap(cm, {"site.conf": apps.site_conf("v0")}))
    for i in range(n):
        env.apply(apps.nginx_workload("Deployment", "%s-%d" % (name, i), dict(ann), replicas=replicas, cm=cm))
    return wait_pods(env, None, n * replicas)


def edit_and_measure(env, cm, body, pods, t_start, conf=None):
    """Writes site.conf of ConfigMap cm as (conf or apps.site_conf)(body);
    waits until every pod serves body at /. Returns (t0, got, missing)."""
    t0 = time.time()
    env.apply(apps.configmap(cm, {"site.conf": (conf or apps.site_conf)(body)}))
    got, missing = measure.wait_served(targets(pods), body, t0, T_SYNC)
    return t0, got, missing


def s1_burst(c, procs):
    """S1 burst updates: 10 edits 1 s apart to one ConfigMap of one nginx.
    The kubelet writes what it has at its next sync, so several edits
    coalesce: expected is one reload per content the kubelet wrote (the
    agent's change events), ending with the last edit served."""
    env = Ns(c, "s1-burst")
    env.setup()
    pods = signal_fleet(env, 1)
    settle(env, pods, 5)
    pid0 = master_pids(env, pods)
    t_start = time.time()
    for i in range(1, 11):
        env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v%d" % i)}))
        t_last = time.time()
        time.sleep(1)
    got, missing = measure.wait_served(targets(pods), "v10", t_last, T_SYNC)
    time.sleep(3)
    acts, chg, errs = agent_counts(env, pods)
    pids = procs.container_pids(env.pods(None), AGENT_CONTAINER)
    r = result("S1 burst", "10 edits, 1 s apart, one Deployment of 1", expected_actions=chg, actions=acts,
               lost=len(missing), duplicated=max(0, acts - chg), errors=errs,
               latency_s=stats.summary(list(got.values())),
               api=measure.api_requests(c, t_start, time.time(), [env.ns]), changes=1,
               resources=measure.resources(pids),
               same_master=master_pids(env, pods) == pid0)
    env.cleanup()
    return r


def s2_fanout(c, procs, n=20):
    """S2 fan-out: one ConfigMap mounted by n Deployments (Reloader's S2 uses
    50; 20 here on 2 cores): one edit, n reloads, one per pod."""
    env = Ns(c, "s2-fanout")
    env.setup()
    pods = signal_fleet(env, n)
    settle(env, pods, 5)
    pid0 = master_pids(env, pods)
    t0, got, missing = edit_and_measure(env, "site", "v1", pods, None)
    time.sleep(3)
    acts, chg, errs = agent_counts(env, pods)
    pids = procs.container_pids(env.pods(None), AGENT_CONTAINER)
    r = result("S2 fan-out", "1 ConfigMap, %d Deployments (Reloader: 50)" % n, expected_actions=n, actions=acts,
               lost=len(missing), duplicated=max(0, acts - n), errors=errs,
               latency_s=stats.summary(list(got.values())),
               api=measure.api_requests(c, t0, time.time(), [env.ns]), changes=1,
               resources=measure.resources(pids), same_master=master_pids(env, pods) == pid0)
    env.cleanup()
    return r


def s3_cardinality(c, procs, nss=4, per=3):
    """S3 high cardinality: nss namespaces x per Deployments, each with a
    ConfigMap and a Secret of its own (Reloader: hundreds; scaled to 12
    workloads and 24 objects). All 24 are edited at once."""
    envs = [Ns(c, "s3-card-%d" % i) for i in range(nss)]
    allpods = []
    ann = agent_ann(action="signal", process="nginx")
    sec_mount = {"name": "sec", "mountPath": "/etc/nginx/secret"}
    for env in envs:
        env.setup()
        for j in range(per):
            env.apply(apps.configmap("cm-%d" % j, {"site.conf": _site_with_secret("v0")}))
            env.apply(_secret("sec-%d" % j, "s0"))
            env.apply(apps.nginx_workload("Deployment", "web-%d" % j, dict(ann), cm="cm-%d" % j,
                                          extra_volumes=[{"name": "sec", "secret": {"secretName": "sec-%d" % j}}],
                                          extra_mounts=[sec_mount]))
    for env in envs:
        allpods += [(env, p) for p in wait_pods(env, None, per)]
    for env, p in allpods:
        env.wait_agent_event(p["metadata"]["name"], "ready", 120)
    time.sleep(5)
    t0 = time.time()
    for env in envs:
        for j in range(per):
            env.apply(apps.configmap("cm-%d" % j, {"site.conf": _site_with_secret("v1")}))
            env.apply(_secret("sec-%d" % j, "s1"))
    tg = [(p["metadata"]["name"], "http://%s:%d/" % (p["status"]["podIP"], apps.PORT)) for _, p in allpods]
    ts = [(p["metadata"]["name"], "http://%s:%d/secret" % (p["status"]["podIP"], apps.PORT)) for _, p in allpods]
    got, missing = measure.wait_served(tg, "v1", t0, T_SYNC)
    gots, missing_s = measure.wait_served(ts, "s1", t0, T_SYNC)
    time.sleep(3)
    acts = chg = errs = 0
    for env, p in allpods:
        a, ch, e = agent_counts(env, [p])
        acts, chg, errs = acts + a, chg + ch, errs + e
    pids = {}
    for env in envs:
        pids.update(procs.container_pids(env.pods(None), AGENT_CONTAINER))
    r = result("S3 cardinality", "%d namespaces x %d Deployments, %d ConfigMaps + %d Secrets" % (
        nss, per, nss * per, nss * per), expected_actions=chg, actions=acts,
        lost=len(missing) + len(missing_s), duplicated=max(0, acts - chg), errors=errs,
        latency_s=stats.summary(list(got.values())),
        api=measure.api_requests(c, t0, time.time(), [e.ns for e in envs]), changes=2 * nss * per,
        resources=measure.resources(pids))
    for env in envs:
        env.cleanup()
    return r


def _site_with_secret(body):
    return ('server { listen %d; location = /secret { default_type text/plain; '
            'alias /etc/nginx/secret/value; } location / { return 200 "%s\\n"; } }\n' % (apps.PORT, body))


def _secret(name, value):
    import base64
    return json.dumps({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                       "data": {"value": base64.b64encode((value + "\n").encode()).decode()}})


def s4_noop(c, procs, n=5):
    """S4 no-op updates: labels and annotations of the ConfigMap change 5
    times and its data is applied unchanged 5 times; over a kubelet sync
    period nothing may be acted on."""
    env = Ns(c, "s4-noop")
    env.setup()
    pods = signal_fleet(env, n)
    settle(env, pods, 5)
    t0 = time.time()
    for i in range(5):
        env.kubectl("label", "configmap", "site", "round=%d" % i, "--overwrite")
        env.kubectl("annotate", "configmap", "site", "note=round-%d" % i, "--overwrite")
        env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v0")}))
        time.sleep(2)
    time.sleep(100)  # at least one kubelet sync of every pod
    acts, chg, errs = agent_counts(env, pods)
    got, missing = measure.wait_served(targets(pods), "v0", time.time(), 10)
    pids = procs.container_pids(env.pods(None), AGENT_CONTAINER)
    r = result("S4 no-op", "%d Deployments, 5 label/annotation changes + 5 identical applies" % n,
               expected_actions=0, actions=acts, lost=len(missing), duplicated=acts, errors=errs,
               latency_s=None, api=measure.api_requests(c, t0, time.time(), [env.ns]), changes=0,
               resources=measure.resources(pids))
    env.cleanup()
    return r


def s5_churn(c, procs, rounds=6):
    """S5 workload churn: while the ConfigMap changes every 30 s, a new
    Deployment is created and the oldest deleted every 15 s (3 alive). The
    survivors serve the last content; no agent errors."""
    env = Ns(c, "s5-churn")
    env.setup()
    ann = agent_ann(action="signal", process="nginx")
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v0")}))
    alive = []
    t0 = time.time()
    last = "v0"
    for i in range(rounds * 2):
        env.apply(apps.nginx_workload("Deployment", "churn-%d" % i, dict(ann)))
        alive.append("churn-%d" % i)
        if len(alive) > 3:
            env.kubectl("delete", "deployment", alive.pop(0), "--wait=false")
        if i % 2 == 1:
            last = "v%d" % (i // 2 + 1)
            env.apply(apps.configmap("site", {"site.conf": apps.site_conf(last)}))
            t_last = time.time()
        time.sleep(15)
    pods = wait_pods(env, None, 3)
    got, missing = measure.wait_served(targets(pods), last, t_last, T_SYNC)
    acts, chg, errs = agent_counts(env, pods)
    pids = procs.container_pids(env.pods(None), AGENT_CONTAINER)
    r = result("S5 churn", "%d Deployments created/deleted over %d s, %d edits" % (rounds * 2, rounds * 30, rounds),
               expected_actions=chg, actions=acts, lost=len(missing), duplicated=max(0, acts - chg), errors=errs,
               latency_s=stats.summary(list(got.values())), api=measure.api_requests(c, t0, time.time(), [env.ns]),
               changes=rounds, resources=measure.resources(pids))
    env.cleanup()
    return r


def s6_restarts(c, procs):
    """S6 restarts under load: (a) the agent container of one pod is killed
    (SIGKILL through containerd) right before an edit; (b) the kubelet is
    stopped for 20 s across an edit. Each pod must end up serving the last
    content."""
    env = Ns(c, "s6-restart")
    env.setup()
    pods = signal_fleet(env, 2)
    settle(env, pods, 5)
    failures = []
    # (a) kill the agent of pod 0, then edit
    pid = procs.container_pids([pods[0]], AGENT_CONTAINER).get(pods[0]["metadata"]["name"])
    if not pid:
        failures.append("no agent process found for %s" % pods[0]["metadata"]["name"])
    else:
        os.kill(pid, 9)
    t0 = time.time()
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v1")}))
    got_a, missing_a = measure.wait_served(targets(pods), "v1", t0, T_SYNC)
    # (b) the kubelet away for 20 s across the next edit
    restart = os.path.join(REPO, "tests/cluster/restart.sh")
    import threading
    out = {}
    th = threading.Thread(target=lambda: out.update(p=subprocess.run(
        ["bash", restart, "kubelet", "20"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)))
    th.start()
    time.sleep(3)
    t1 = time.time()
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v2")}))
    th.join(130)
    if out.get("p") is None or out["p"].returncode != 0:
        failures.append("restart.sh kubelet: %s" % (out["p"].stderr.decode().strip() if out.get("p") else "hung"))
    wait_until(lambda: _node_ready(c), 120, "the node Ready again")
    pods = env.ready_pods(None)
    got_b, missing_b = measure.wait_served(targets(pods), "v2", t1, T_SYNC)
    acts, chg, errs = agent_counts(env, pods)
    pids = procs.container_pids(env.pods(None), AGENT_CONTAINER)
    r = result("S6 restarts", "agent container killed before an edit; kubelet stopped 20 s across an edit",
               expected_actions=chg, actions=acts, lost=len(missing_a) + len(missing_b),
               duplicated=max(0, acts - chg), errors=errs,
               latency_s=stats.summary(list(got_a.values()) + list(got_b.values())),
               api=measure.api_requests(c, t0, time.time(), [env.ns]), changes=2,
               resources=measure.resources(pids), failures=failures,
               missing={"after agent kill": missing_a, "after kubelet restart": missing_b})
    env.cleanup()
    return r


def _node_ready(c):
    n = c.get("node", "ra-node")
    return any(x["type"] == "Ready" and x["status"] == "True" for x in n["status"]["conditions"])


# ---- rollouts ----

def rollout_fleet(env, n, replicas, ann_extra=None, cm="site"):
    env.grant_role()
    ann = agent_ann(action="rollout", **(ann_extra or {}))
    env.apply(apps.configmap(cm, {"site.conf": apps.site_conf("v0")}))
    for i in range(n):
        env.apply(apps.nginx_workload("Deployment", "web-%d" % i, dict(ann), replicas=replicas, cm=cm))
    pods = wait_pods(env, None, n * replicas)
    gens = {"web-%d" % i: env.get("deployment", "web-%d" % i)["metadata"]["generation"] for i in range(n)}
    return pods, gens


def rolled(env, name, gen, replicas):
    st = env.get("deployment", name).get("status", {})
    return (st.get("observedGeneration") == gen and st.get("updatedReplicas") == replicas
            and st.get("readyReplicas") == replicas and st.get("replicas") == replicas)


def patches(c, ns, since, until):
    evs = c.audit(since, lambda ev: ev.get("verb") == "patch" and ev.get("objectRef", {}).get("namespace") == ns
                  and ev.get("objectRef", {}).get("resource") == "deployments"
                  and ev.get("user", {}).get("username", "").startswith("system:serviceaccount:")
                  and rfc3339(ev.get("stageTimestamp", "")) <= until)
    by = {}
    for ev in evs:
        by[ev["objectRef"]["name"]] = by.get(ev["objectRef"]["name"], 0) + 1
    return by


def rollout_measure(c, procs, env, pods, gens, replicas, body, t0, what):
    """Waits until every Deployment rolled once to serve body; returns the
    per-Deployment times, PATCHes, and generations seen."""
    names = sorted(gens)
    done = {}
    deadline = time.monotonic() + T_SYNC + 180
    while len(done) < len(names) and time.monotonic() < deadline:
        for n in names:
            if n not in done and rolled(env, n, gens[n] + 1, replicas):
                new = [p for p in env.ready_pods("app=" + n)]
                if len(new) == replicas and all(
                        http_text("http://%s:%d/" % (p["status"]["podIP"], apps.PORT))[1].strip() == body
                        for p in new):
                    done[n] = time.time() - t0
        time.sleep(1)
    time.sleep(15)  # the new pods' agents start: they must patch nothing
    over = [n for n in names if env.get("deployment", n)["metadata"]["generation"] != gens[n] + 1]
    return done, [n for n in names if n not in done], over


def s7_api_pressure(c, procs, n=3, creates=300):
    """S7 API pressure: while one edit rolls n Deployments, 300 unrelated
    ConfigMaps are created and deleted as fast as 4 clients can. Each
    Deployment rolls once."""
    env = Ns(c, "s7-pressure")
    env.setup()
    pods, gens = rollout_fleet(env, n, 1, {"rollout_jitter": "2s"})
    settle(env, pods, 5)
    import concurrent.futures
    t0 = time.time()
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v1")}))

    def churn(k):
        for i in range(k, creates, 4):
            env.kubectl("create", "configmap", "noise-%d" % i, "--from-literal=x=%d" % i, check=False)
            env.kubectl("delete", "configmap", "noise-%d" % i, "--wait=false", check=False)
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        list(ex.map(churn, range(4)))
    t_noise = time.time() - t0
    done, missing, over = rollout_measure(c, procs, env, pods, gens, 1, "v1", t0, "S7")
    pa = patches(c, env.ns, t0, time.time())
    pids = procs.container_pids(env.pods(None), AGENT_CONTAINER)
    r = result("S7 API pressure", "%d rollout Deployments, %d ConfigMap create+delete in %.0f s" % (n, creates, t_noise),
               expected_actions=n, actions=len(done), lost=len(missing), duplicated=len(over),
               latency_s=stats.summary(list(done.values())), api=measure.api_requests(c, t0, time.time(), [env.ns]),
               changes=1, patches=pa, resources=measure.resources(pids))
    env.cleanup()
    return r


def s_fleet(c, procs, n=3, replicas=3):
    """The fleet case for rollout-class content: n Deployments x replicas
    replicas share one ConfigMap; one edit gives exactly one template change
    per Deployment, however many agents see it."""
    env = Ns(c, "fleet")
    env.setup()
    pods, gens = rollout_fleet(env, n, replicas, {"rollout_jitter": "5s"})
    settle(env, pods, 5)
    t0 = time.time()
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v1")}))
    done, missing, over = rollout_measure(c, procs, env, pods, gens, replicas, "v1", t0, "fleet")
    pa = patches(c, env.ns, t0, time.time())
    pids = procs.container_pids(env.pods(None), AGENT_CONTAINER)
    r = result("fleet", "%d Deployments x %d replicas, one rollout-class ConfigMap" % (n, replicas),
               expected_actions=n, actions=len(done), lost=len(missing), duplicated=len(over),
               latency_s=stats.summary(list(done.values())), api=measure.api_requests(c, t0, time.time(), [env.ns]),
               changes=1, patches=pa, resources=measure.resources(pids))
    env.cleanup()
    return r


def s12_min_interval(c, procs):
    """S12 rapid updates with --min-interval 60s: three edits 30 s apart to a
    rollout Deployment give at most two template changes in the interval
    (the first at once, the last when the interval ends), the last carrying
    the final content's hash."""
    env = Ns(c, "s12-interval")
    env.setup()
    pods, gens = rollout_fleet(env, 1, 1, {"rollout_jitter": "1s", "min_interval": "60s"})
    settle(env, pods, 5)
    t0 = time.time()
    for i in (1, 2, 3):
        env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v%d" % i)}))
        t_last = time.time()
        if i < 3:
            time.sleep(30)
    final = None
    deadline = time.monotonic() + T_SYNC + 180
    while time.monotonic() < deadline:
        ps = env.ready_pods("app=web-0")
        if len(ps) == 1 and http_text("http://%s:%d/" % (ps[0]["status"]["podIP"], apps.PORT))[1].strip() == "v3" \
                and rolled(env, "web-0", env.get("deployment", "web-0")["metadata"]["generation"], 1):
            final = time.time() - t_last
            break
        time.sleep(1)
    time.sleep(10)
    changes = env.get("deployment", "web-0")["metadata"]["generation"] - gens["web-0"]
    pa = patches(c, env.ns, t0, time.time())
    r = result("S12 min-interval", "3 edits 30 s apart, --min-interval 60s, one rollout Deployment",
               expected_actions="1-2", actions=changes, lost=0 if final is not None else 1,
               duplicated=max(0, changes - 2), latency_s=stats.summary([final] if final is not None else []),
               api=measure.api_requests(c, t0, time.time(), [env.ns]), changes=3, patches=pa,
               resources=measure.resources(procs.container_pids(env.pods(None), AGENT_CONTAINER)))
    env.cleanup()
    return r


# ---- objects and references ----

def s8_large(c, procs):
    """S8 large objects: a ConfigMap of 100 KB and one of 900 KB (the API
    stores at most 1 MiB) beside the server block; one edit of each. The
    agent hashes every byte; nginx serves the big file statically, so the
    check sees the new bytes and the reload."""
    env = Ns(c, "s8-large")
    env.setup()
    ann = agent_ann(action="signal", process="nginx")
    sizes = {"big-100k": 100 * 1024, "big-900k": 900 * 1024}

    def cm(name, gen):
        pad = ("%s-%d-" % (name, gen)) * (sizes[name] // (len(name) + 3) + 1)
        site = ('server { listen %d; location = /size { return 200 "%d-%d\\n"; } '
                'location / { return 200 "v%d\\n"; } }\n' % (apps.PORT, sizes[name], gen, gen))
        return apps.configmap(name, {"site.conf": site, "pad.txt": pad[:sizes[name]]})
    # Server-side apply: a client-side apply would store the whole object in
    # its last-applied annotation, which may hold at most 256 KiB.
    for name in sizes:
        env.apply(cm(name, 0), server_side=True)
        env.apply(apps.nginx_workload("Deployment", name, dict(ann), cm=name))
    pods = wait_pods(env, None, 2)
    settle(env, pods, 5)
    t0 = time.time()
    for name in sizes:
        env.apply(cm(name, 1), server_side=True)
    got, missing = measure.wait_served(targets(pods), "v1", t0, T_SYNC)
    time.sleep(3)
    acts, chg, errs = agent_counts(env, pods)
    pids = procs.container_pids(env.pods(None), AGENT_CONTAINER)
    r = result("S8 large objects", "ConfigMaps of 100 KB and 900 KB, one edit each", expected_actions=chg,
               actions=acts, lost=len(missing), duplicated=max(0, acts - chg), errors=errs,
               latency_s=stats.summary(list(got.values())), api=measure.api_requests(c, t0, time.time(), [env.ns]),
               changes=2, resources=measure.resources(pids))
    env.cleanup()
    return r


def s9_kinds(c, procs):
    """S9 every workload type: a Deployment, a StatefulSet, a DaemonSet and a
    bare Pod, injected by the webhook, reload one edit in place."""
    env = Ns(c, "s9-kinds")
    env.setup()
    ann = agent_ann(action="signal", process="nginx")
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v0")}))
    for kind in ("Deployment", "StatefulSet", "DaemonSet", "Pod"):
        env.apply(apps.nginx_workload(kind, kind.lower(), dict(ann)))
    pods = wait_pods(env, None, 4)
    settle(env, pods, 5)
    pid0 = master_pids(env, pods)
    t0, got, missing = edit_and_measure(env, "site", "v1", pods, None)
    time.sleep(3)
    acts, chg, errs = agent_counts(env, pods)
    r = result("S9 workload kinds", "Deployment, StatefulSet, DaemonSet, Pod", expected_actions=4, actions=acts,
               lost=len(missing), duplicated=max(0, acts - 4), errors=errs,
               latency_s=stats.summary(list(got.values())), api=measure.api_requests(c, t0, time.time(), [env.ns]),
               changes=1, same_master=master_pids(env, pods) == pid0,
               resources=measure.resources(procs.container_pids(env.pods(None), AGENT_CONTAINER)))
    env.cleanup()
    return r


def s10_mixed(c, procs):
    """S10 Secrets and mixed content: one Deployment mounts a ConfigMap whose
    *.conf files nginx reloads (signal) and a Secret whose change needs a
    restart of the pods (rule: rollout). A ConfigMap edit reloads in place
    and never rolls; a Secret edit rolls once."""
    env = Ns(c, "s10-mixed")
    env.setup()
    env.grant_role()
    ann = agent_ann(action="signal", process="nginx", rule="/etc/nginx/secret/*=rollout",
                                 rollout_jitter="1s")
    env.apply(apps.configmap("site", {"site.conf": _site_with_secret("v0")}))
    env.apply(_secret("sec", "s0"))
    env.apply(apps.nginx_workload("Deployment", "web", ann,
                                  extra_volumes=[{"name": "sec", "secret": {"secretName": "sec"}}],
                                  extra_mounts=[{"name": "sec", "mountPath": "/etc/nginx/secret"}]))
    pods = wait_pods(env, None, 1)
    settle(env, pods, 5)
    gen0 = env.get("deployment", "web")["metadata"]["generation"]
    t0, got, missing = edit_and_measure(env, "site", "v1", pods, None, conf=_site_with_secret)
    time.sleep(5)
    in_place = env.get("deployment", "web")["metadata"]["generation"] == gen0
    acts, chg, errs = agent_counts(env, pods)
    t1 = time.time()
    env.apply(_secret("sec", "s1"))
    deadline = time.monotonic() + T_SYNC + 120
    rolled_at, seen = None, "the Deployment never rolled"
    while time.monotonic() < deadline:
        if rolled(env, "web", gen0 + 1, 1):
            ps = env.ready_pods("app=web")
            seen = "%d ready pods" % len(ps)
            if len(ps) == 1:
                st, body = http_text("http://%s:%d/secret" % (ps[0]["status"]["podIP"], apps.PORT))
                seen = "the rolled pod's /secret answered %s %r" % (st, body[:80])
                if st == 200 and body.strip() == "s1":
                    rolled_at = time.time() - t1
                    break
        time.sleep(1)
    time.sleep(15)
    gens = env.get("deployment", "web")["metadata"]["generation"] - gen0
    r = result("S10 Secrets, mixed", "ConfigMap (signal) + Secret (rollout rule) in one Deployment",
               expected_actions="1 reload, 1 rollout", actions="%d reload, %d rollout" % (acts, gens),
               lost=len(missing) + (0 if rolled_at is not None else 1),
               duplicated=(0 if in_place else 1) + max(0, gens - 1) + max(0, acts - chg), errors=errs,
               latency_s=stats.summary(list(got.values()) + ([rolled_at] if rolled_at else [])),
               api=measure.api_requests(c, t0, time.time(), [env.ns]), changes=2,
               resources=measure.resources(procs.container_pids(env.pods(None), AGENT_CONTAINER)))
    if rolled_at is None:
        r["note"] = "Secret edit: " + seen
    env.cleanup()
    return r


def s13_references(c, procs):
    """S13 complex references: a pod whose init container mounts a ConfigMap,
    whose app reads a key through env valueFrom, and mounts a projected
    volume of a ConfigMap and a Secret. A projected edit reloads in place;
    a valueFrom edit rolls (env is fixed at start); the init container's
    ConfigMap is not the app's (nothing is expected of it)."""
    env = Ns(c, "s13-refs")
    env.setup()
    env.grant_role()
    env.apply(apps.configmap("site", {"site.conf": apps.site_conf("v0")}))
    env.apply(apps.configmap("envcm", {"GREETING": "hello"}))
    env.apply(apps.configmap("initcm", {"setup": "one\n"}))
    env.apply(_secret("psec", "p0"))
    ann = agent_ann(action="signal", process="nginx", rollout_jitter="1s")
    proj = {"name": "proj", "projected": {"sources": [{"configMap": {"name": "site"}},
                                                      {"secret": {"name": "psec"}}]}}
    init = {"name": "init", "image": apps.NGINX_IMAGE, "imagePullPolicy": "Never",
            "command": ["sh", "-c", "cat /etc/init/setup"],
            "volumeMounts": [{"name": "initv", "mountPath": "/etc/init"}]}
    env.apply(apps.nginx_workload(
        "Deployment", "web", ann, cm="site", extra_volumes=[proj, {"name": "initv", "configMap": {"name": "initcm"}}],
        extra_mounts=[{"name": "proj", "mountPath": "/etc/proj"}],
        pod_spec={"initContainers": [init]},
        container={"env": [{"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "envcm", "key": "GREETING"}}}]}))
    pods = wait_pods(env, None, 1)
    settle(env, pods, 5)
    gen0 = env.get("deployment", "web")["metadata"]["generation"]
    t0, got, missing = edit_and_measure(env, "site", "v1", pods, None)  # both the volume and the projection
    time.sleep(5)
    in_place = env.get("deployment", "web")["metadata"]["generation"] == gen0
    t1 = time.time()
    env.apply(apps.configmap("envcm", {"GREETING": "bonjour"}))
    rolled_at = None
    deadline = time.monotonic() + T_SYNC + 120
    while time.monotonic() < deadline:
        if rolled(env, "web", gen0 + 1, 1):
            ps = env.ready_pods("app=web")
            if len(ps) == 1 and env.exec(ps[0]["metadata"]["name"], "nginx", "printenv", "GREETING",
                                         check=False)[1].strip() == "bonjour":
                rolled_at = time.time() - t1
                break
        time.sleep(1)
    time.sleep(15)
    gens = env.get("deployment", "web")["metadata"]["generation"] - gen0
    r = result("S13 references", "init container ConfigMap, env valueFrom, projected ConfigMap+Secret",
               expected_actions="1 reload, 1 rollout", actions="%s reload, %d rollout" % (
                   "1" if in_place and not missing else "0", gens),
               lost=len(missing) + (0 if rolled_at is not None else 1),
               duplicated=(0 if in_place else 1) + max(0, gens - 1),
               latency_s=stats.summary(list(got.values()) + ([rolled_at] if rolled_at else [])),
               api=measure.api_requests(c, t0, time.time(), [env.ns]), changes=2,
               resources=measure.resources(procs.container_pids(env.pods(None), AGENT_CONTAINER)))
    env.cleanup()
    return r


# ---- the peers, on the same app ----

PROM_PORT = 9090


def prom_config(edit):
    return "global:\n  scrape_interval: 15s\n  external_labels:\n    edit: %s\nscrape_configs: []\n" % edit


def prom_deployment(name, sidecar=None, annotations=None):
    app = {"name": "prometheus", "image": "localhost/e2e-prometheus:1", "imagePullPolicy": "Never",
           "ports": [{"containerPort": PROM_PORT}],
           "volumeMounts": [{"name": "config", "mountPath": "/etc/prometheus"}],
           "readinessProbe": {"httpGet": {"path": "/-/ready", "port": PROM_PORT}, "periodSeconds": 2}}
    spec = {"containers": [app] + ([sidecar] if sidecar else []),
            "volumes": [{"name": "config", "configMap": {"name": "prom-" + name}}],
            "terminationGracePeriodSeconds": 5}
    return json.dumps({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                       "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                                "template": {"metadata": {"labels": {"app": name},
                                                          "annotations": annotations or {}},
                                             "spec": spec}}})


PEERS = {
    # tool: (sidecar container or None, pod annotations, container name to measure)
    "reload-agent": (None, None, AGENT_CONTAINER),  # annotations: agent_ann(), at run time
    "configmap-reload": ({"name": "configmap-reload", "image": "localhost/peer-configmap-reload:v0.12.0",
                          "imagePullPolicy": "Never",
                          "args": ["--volume-dir=/etc/prometheus",
                                   "--webhook-url=http://127.0.0.1:%d/-/reload" % PROM_PORT,
                                   "--web.listen-address=:9533"],
                          "volumeMounts": [{"name": "config", "mountPath": "/etc/prometheus", "readOnly": True}]},
                         {}, "configmap-reload"),
    "prometheus-config-reloader": ({"name": "config-reloader",
                                    "image": "localhost/peer-prometheus-config-reloader:v0.88.0",
                                    "imagePullPolicy": "Never",
                                    "args": ["--config-file=/etc/prometheus/prometheus.yml",
                                             "--reload-url=http://127.0.0.1:%d/-/reload" % PROM_PORT,
                                             "--listen-address=:8081"],
                                    "volumeMounts": [{"name": "config", "mountPath": "/etc/prometheus",
                                                      "readOnly": True}]},
                                   {}, "config-reloader"),
}


def loaded(ip, edit):
    st, body = http_text("http://%s:%d/api/v1/status/config" % (ip, PROM_PORT), timeout=2.0)
    if st != 200:
        return False
    try:
        return ("edit: %s" % edit) in json.loads(body)["data"]["yaml"]
    except (ValueError, KeyError, TypeError):
        return False


def prom_reloads(env, pod):
    rc, out, _ = env.kubectl("logs", pod, "-c", "prometheus", check=False)
    return sum(1 for l in out.splitlines() if "Completed loading of configuration file" in l)


def s_peers(c, procs, edits=3):
    """The peers side by side on one app that reloads over HTTP (Prometheus,
    POST /-/reload): reload-agent (http action, injected by the webhook),
    configmap-reload and prometheus-config-reloader (sidecars as their docs
    show). The same edits to each one's ConfigMap at the same moment; apply
    -> Prometheus reports the new configuration (/api/v1/status/config), and
    its own log counts the reloads. Returns one result per tool."""
    env = Ns(c, "peers")
    env.setup()
    for tool, (side, a, _) in PEERS.items():
        if tool == "reload-agent":
            a = agent_ann(action="http", http_url="http://127.0.0.1:%d/-/reload" % PROM_PORT)
        env.apply(apps.configmap("prom-" + tool, {"prometheus.yml": prom_config("v0")}))
        env.apply(prom_deployment(tool, side, a))
    pods = {tool: wait_pods(env, "app=" + tool, 1)[0] for tool in PEERS}
    time.sleep(20)
    base = {tool: prom_reloads(env, p["metadata"]["name"]) for tool, p in pods.items()}
    swaps = {tool: measure.Swaps(c, env.get("pod", p["metadata"]["name"]), "config") for tool, p in pods.items()}
    lat = {tool: [] for tool in PEERS}
    own = {tool: [] for tool in PEERS}  # used - the kubelet's swap: the tool's own part
    lost = {tool: 0 for tool in PEERS}
    t_start = time.time()
    for i in range(1, edits + 1):
        t0 = time.time()
        for tool in PEERS:
            env.apply(apps.configmap("prom-" + tool, {"prometheus.yml": prom_config("v%d" % i)}))
        pending = set(PEERS)
        deadline = time.monotonic() + T_SYNC + 200  # prometheus-config-reloader also polls every 3 min
        while pending and time.monotonic() < deadline:
            for tool in list(pending):
                if loaded(pods[tool]["status"]["podIP"], "v%d" % i):
                    now = time.time()
                    lat[tool].append(now - t0)
                    swapped = swaps[tool].first_after(t0)
                    if swapped is not None:
                        own[tool].append(now - swapped)
                    pending.discard(tool)
            time.sleep(0.2)
        for tool in pending:
            lost[tool] += 1
        time.sleep(5)
    for w in swaps.values():
        w.stop()
    out = []
    for tool, (_, _, cname) in PEERS.items():
        p = env.get("pod", pods[tool]["metadata"]["name"])
        pids = procs.container_pids([p], cname)
        n = prom_reloads(env, p["metadata"]["name"]) - base[tool]
        out.append(result("peers: " + tool, "Prometheus, %d edits" % edits, expected_actions=edits, actions=n,
                          lost=lost[tool], duplicated=max(0, n - edits),
                          latency_s=stats.summary(lat[tool]), own_latency_s=stats.summary(own[tool]),
                          api=measure.api_requests(c, t_start, time.time(), [env.ns]) if tool == "reload-agent" else {},
                          changes=edits, resources=measure.resources(pids)))
    env.cleanup()
    return out
