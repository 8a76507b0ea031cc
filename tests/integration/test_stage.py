"""Staging (--stage) against the API double (tests/lib/fakeapi.py): several
replicas of one workload take turns through one Lease.

Each replica is build/tools/stagedrive: the agent's own stage gate
(run/stage.c, kube/lease.c, kube/kwatch.c over real TLS to the double),
driven as the engine drives it: acquire the content hash, on "go" hold the
"action" for a while, then release it verified (or failed, with --fail).
It prints one JSON line per verdict and release with its monotonic time, so
the tests can see who acted when: never more replicas at once than the
stage allows, each after the one before it released. The Lease itself is
read from the double at the end.
"""
import json
import os
import signal
import subprocess
import time

from tests.lib.stage import (ANNOTATION, H1, H2, Replica, intervals, launch, lease, max_overlap, requests,
                             stop_all, wait_all)
from tests.lib.agent import RESTART_POD_CODE, restart_pod_args
from tests.lib.proc import check, free_port, http_get, wait_until

def test_stage_one_at_a_time(env):
    """4 replicas, stage 1: one acts at a time, each after the one before
    it verified; the first creates the Lease; writes are compare-and-swaps."""
    fake = launch(env, 4)
    pods = fake.info["pods"]
    reps = [Replica(env, fake, p, "1", [H1], "--hold", "400") for p in pods]
    wait_all(reps, lambda r: r.events("release"), 60, "every replica's release")
    iv = intervals(reps)
    check(len(iv) == 4, "4 replicas acted: %s" % iv)
    for (g0, r0, p0), (g1, _, p1) in zip(iv, iv[1:]):
        check(g1 >= r0, "%s went at %d before %s released at %d" % (p1, g1, p0, r0))
    check(max_overlap(iv) == 1, "never two at once: %s" % iv)
    obj, st = lease(fake)
    wait_until(lambda: sorted(lease(fake)[1].get("verified", [])) == sorted(pods), 10,
               "every pod recorded as verified")
    obj, st = lease(fake)
    check(st["hash"] == H1 and st["width"] == 1 and st["active"] == [], "the stage: %s" % st)
    check(obj["metadata"]["labels"].get("app.kubernetes.io/name") == "reload-agent",
          "the agent created the Lease: %s" % obj["metadata"])
    posts = [r for r in requests(fake, "/leases") if r["method"] == "POST"]
    check(1 <= len(posts) <= 4, "the Lease was created by a replica: %s" % len(posts))
    patches = [r for r in requests(fake, "/leases/") if r["method"] == "PATCH"]
    check(all(r["body"]["metadata"].get("resourceVersion") for r in patches),
          "every write carries the resourceVersion it was decided on")
    conflicts = [r for r in patches if r["status"] == 409]
    check(len(conflicts) <= 12, "few write conflicts: %d" % len(conflicts))
    watches = [r for r in requests(fake, "/leases") if r["query"].get("watch") in ("1", "true")]
    check(watches and all(r["query"].get("fieldSelector") ==
                          "metadata.name=reload-agent-stage-deployment-web" for r in watches),
          "the replicas watch the one Lease by name")
    stop_all(reps)


def test_stage_failed_verify_halts_the_others(env):
    """The first replica's verification fails: the change halts for the
    workload (the others get halted, never go), an Event ConfigHalted on
    the Deployment names the pod and the hash; the next content is a new
    stage."""
    fake = launch(env, 4)
    pods = fake.info["pods"]
    first = Replica(env, fake, pods[0], "1", [H1], "--hold", "300", "--fail")
    wait_all([first], lambda r: r.events("release"), 30, "the first replica's release")
    others = [Replica(env, fake, p, "1", [H1, H2], "--hold", "200") for p in pods[1:]]
    wait_all(others, lambda r: len(r.events("verdict")) >= 2 and r.events("release"), 60,
             "the others' verdicts on both hashes")
    for r in others:
        v = [(e["hash"], e["verdict"]) for e in r.events("verdict")]
        check(v[0] == (H1, "halted"), "%s: %s" % (r.pod, v))
        check(v[1] == (H2, "go"), "%s: the next content goes: %s" % (r.pod, v))
        check(r.logged("halted it for the workload"), "%s says why" % r.pod)
    check(max_overlap(intervals(others, H2)) == 1, "H2 one at a time too")
    _, st = lease(fake)
    check([h["hash"] for h in st["halted"]] == [H1], "the halt record: %s" % st["halted"])
    check(st["halted"][0]["pod"] == pods[0], "it names the pod: %s" % st["halted"])
    st_, evs = fake.ctl("GET", "/events")
    halted = [e for e in evs if e.get("reason") == "ConfigHalted"]
    check(len(halted) == 1, "one ConfigHalted Event: %s" % halted)
    e = halted[0]
    check(e["involvedObject"]["kind"] == "Deployment" and e["involvedObject"]["name"] == "web",
          "on the workload: %s" % e["involvedObject"])
    check(pods[0] in e["message"] and H1[:12] in e["message"] and e["type"] == "Warning",
          "names the pod and the hash: %s" % e["message"])
    stop_all([first] + others)


def test_stage_all_fail_only_one_acts(env):
    """4 replicas started together, each would fail its verification: the
    first to go halts the change and no other replica ever acts."""
    fake = launch(env, 4)
    reps = [Replica(env, fake, p, "1", [H1], "--hold", "300", "--fail")
            for p in fake.info["pods"]]
    wait_all(reps, lambda r: r.events("verdict"), 60, "every replica's verdict")
    v = sorted(r.verdicts()[0] for r in reps)
    check(v == ["go", "halted", "halted", "halted"], "one went, three were halted: %s" % v)
    stop_all(reps)


def test_stage_expired_slot_taken_over(env):
    """A replica that dies holding its slot blocks the others only for
    --stage-ttl: the next one takes the slot over (measured on its own
    clock from when it saw the slot), and says so."""
    fake = launch(env, 3)
    pods = fake.info["pods"]
    dead = Replica(env, fake, pods[0], "1", [H1], "--hold", "-1", "--ttl", "1500")
    wait_all([dead], lambda r: r.events("verdict"), 30, "the first replica's go")
    check(dead.verdicts() == ["go"], "it went: %s" % dead.verdicts())
    dead.stop(signal.SIGKILL)
    t0 = time.monotonic()
    others = [Replica(env, fake, p, "1", [H1], "--hold", "200", "--ttl", "1500")
              for p in pods[1:]]
    wait_all(others, lambda r: r.events("release"), 60, "the others' releases")
    took = time.monotonic() - t0
    check(took >= 1.4, "the slot was taken over only after the ttl (%.2fs)" % took)
    check(any(r.logged("taking over the slot of pod %s" % pods[0]) for r in others),
          "the takeover is logged")
    check(max_overlap(intervals(others)) == 1, "then one at a time")
    _, st = lease(fake)
    check(pods[0] not in [a["pod"] for a in st["active"]], "the dead slot is gone: %s" % st)
    stop_all(others)


def test_stage_live_holder_keeps_its_slot(env):
    """A holder that works longer than --stage-ttl renews its slot: nobody
    takes it over while it is alive."""
    fake = launch(env, 2)
    pods = fake.info["pods"]
    slow = Replica(env, fake, pods[0], "1", [H1], "--hold", "3000", "--ttl", "1000")
    wait_all([slow], lambda r: r.events("verdict"), 30, "the slow replica's go")
    other = Replica(env, fake, pods[1], "1", [H1], "--hold", "100", "--ttl", "1000")
    wait_all([slow, other], lambda r: r.events("release"), 30, "both releases")
    iv = intervals([slow, other])
    check(max_overlap(iv) == 1, "the renewed slot was not taken over: %s" % iv)
    renewals = [r for r in requests(fake, "/leases/") if r["method"] == "PATCH" and
                r["status"] == 200 and r["user_agent"] and
                any(a.get("pod") == pods[0] and a.get("n", 0) > 0 for a in
                    json.loads(r["body"]["metadata"]["annotations"][ANNOTATION])["active"])]
    check(len(renewals) >= 3, "the holder renewed its slot every ttl/3: %d" % len(renewals))
    check(not other.logged("taking over"), "no takeover")
    stop_all([slow, other])


def run_percent(env, n, want):
    fake = launch(env, n)
    reps = [Replica(env, fake, p, "25%", [H1], "--hold", "1200", "--jitter", "100")
            for p in fake.info["pods"]]
    wait_all(reps, lambda r: r.events("release"), 90, "every replica's release")
    iv = intervals(reps)
    check(len(iv) == n, "all %d acted" % n)
    check(max_overlap(iv) == want, "25%% of %d is %d at a time: %d (%s)" %
          (n, want, max_overlap(iv), iv))
    _, st = lease(fake)
    check(st["width"] == want, "the stage's width: %s" % st["width"])
    gets = [r for r in requests(fake, "/deployments/web") if r["method"] == "GET"]
    check(gets, "the replicas were read from the Deployment")
    stop_all(reps)


def test_stage_percent_of_4_is_1(env):
    run_percent(env, 4, 1)


def test_stage_percent_of_10_is_3(env):
    """25% of 10 replicas rounds up to 3 (like maxSurge; maxUnavailable
    would round down to 2)."""
    run_percent(env, 10, 3)


def test_stage_api_unreachable_acts_alone(env):
    """The API server cannot be reached: after the grace the replica acts
    alone and says why."""
    fake = launch(env, 1)
    st, _ = fake.ctl("POST", "/listener", {"up": False})
    check(st == 200, "listener down")
    t0 = time.monotonic()
    r = Replica(env, fake, fake.info["pods"][0], "1", [H1], "--grace", "1500", "--hold", "50")
    wait_all([r], lambda r: r.events("verdict"), 30, "the verdict")
    took = time.monotonic() - t0
    check(r.verdicts() == ["alone"], "alone: %s" % r.verdicts())
    check(1.4 <= took <= 20, "after the grace: %.2fs" % took)
    check(r.logged("acting alone"), "it says so: %s" % r.tail())
    stop_all([r])


def test_stage_rbac_refused_acts_alone(env):
    """The Lease may not be written (no Role): the replica acts alone at
    once, and the log names the Role to grant."""
    fake = launch(env, 1)
    st, _ = fake.ctl("POST", "/faults", [{"method": "PATCH", "path_regex": "/leases/",
                                          "status": 403},
                                         {"method": "POST", "path_regex": "/leases",
                                          "status": 403}])
    check(st == 200, "faults")
    r = Replica(env, fake, fake.info["pods"][0], "1", [H1], "--hold", "50")
    wait_all([r], lambda r: r.events("verdict"), 30, "the verdict")
    check(r.verdicts() == ["alone"], "alone: %s" % r.verdicts())
    check(r.logged("inject -o rbac"), "the log names what writes the Role: %s" % r.tail())
    stop_all([r])


def test_stage_bare_pod_acts_alone(env):
    """A pod with no workload has no replicas to take turns with."""
    fake = launch(env, 1, fixture="bare-pod")
    r = Replica(env, fake, fake.info["pods"][0], "1", [H1], "--hold", "50")
    wait_all([r], lambda r: r.events("verdict"), 30, "the verdict")
    check(r.verdicts() == ["alone"], "alone: %s" % r.verdicts())
    check(r.logged("belongs to no Deployment"), "it says why: %s" % r.tail())
    stop_all([r])


def test_stage_workload_flag_skips_the_owner_chain(env):
    """--stage-workload names the workload: no pod or ReplicaSet is read
    (the least-privilege Role of inject -o rbac has no get on them)."""
    fake = launch(env, 2)
    reps = [Replica(env, fake, p, "1", [H1], "--hold", "100", "--workload", "deployment/web")
            for p in fake.info["pods"]]
    wait_all(reps, lambda r: r.events("release"), 30, "both releases")
    check(max_overlap(intervals(reps)) == 1, "one at a time")
    check(not requests(fake, "/pods/") and not requests(fake, "/replicasets/"),
          "no pod or ReplicaSet was read")
    stop_all(reps)


def test_stage_stopping_holder_gives_its_slot_back(env):
    """A replica stopped mid-stage (its pod deleted, scaled down) gives its
    slot back as it stops: the next one need not wait --stage-ttl."""
    fake = launch(env, 2)
    pods = fake.info["pods"]
    first = Replica(env, fake, pods[0], "1", [H1], "--hold", "-1", "--ttl", "30000")
    wait_all([first], lambda r: r.events("verdict"), 30, "the first replica's go")
    other = Replica(env, fake, pods[1], "1", [H1], "--hold", "100", "--ttl", "30000")
    time.sleep(0.5)
    check(not other.events("verdict"), "the other waits while the first holds its slot")
    t0 = time.monotonic()
    check(first.stop() == 0, "the first stops cleanly")
    wait_all([other], lambda r: r.events("release"), 10, "the other's release")
    took = time.monotonic() - t0
    check(took < 5, "the slot came back at once, not after the ttl (%.2fs)" % took)
    check(first.logged("turn are in the Lease as it stops"), "the first says so: %s" % first.tail())
    check(not first.logged("took over this pod"), "no false alarm: %s" % first.tail())
    stop_all([other])


def test_stage_waiter_that_stops_gets_its_answer(env):
    """A replica stopped while it waits for its turn: its acquire is
    answered (halted: the engine, closed first, ignores it and frees what
    it kept for the answer), and it exits cleanly."""
    fake = launch(env, 2)
    pods = fake.info["pods"]
    holder = Replica(env, fake, pods[0], "1", [H1], "--hold", "-1")
    wait_all([holder], lambda r: r.events("verdict"), 30, "the holder's go")
    waiter = Replica(env, fake, pods[1], "1", [H1], "--hold", "100")
    wait_until(lambda: waiter.logged("waiting for a slot"), 15, "the waiter waits")
    check(not waiter.events("verdict"), "no verdict while it waits")
    check(waiter.stop() == 0, "the waiter exits cleanly: %s" % waiter.tail())
    check(waiter.verdicts() == ["halted"], "its acquire was answered: %s" % waiter.verdicts())
    stop_all([holder])


# ---- the real agent: the engine's flow through the gate ----

class AgentReplica:
    """`reload-agent run` as one replica: its own working directory (pod-N)
    holding its volume at ./config, so every replica names the same logical
    paths and computes the same content hash, as pods of one template do.
    The exec action appends "<pod> start|end <ns>" lines to a file all
    replicas share; its JSON log goes to a file."""

    def __init__(self, env, fake, i, acts, *extra):
        self.pod = fake.info["pods"][i]
        self.dir = env.path("pod-%d" % i)
        os.makedirs(self.dir, exist_ok=True)
        self.vol = os.path.join(self.dir, "config")
        if not os.path.exists(self.vol):
            os.mkdir(self.vol)
            env.awsim(self.vol, {"app.conf": "v1\n"}, "--seed", str(i + 1))
        self.port = free_port()
        act = ("sh -c 'echo %s start $(date +%%s%%N) >> %s; sleep 0.3; "
               "echo %s end $(date +%%s%%N) >> %s'" % (self.pod, acts, self.pod, acts))
        cmd = [env.binary, "run", "--log-format", "json", "--log-level", "debug",
               "--watch", "config", "--debounce", "50ms", "--resync", "0",
               "--action", "exec", "--exec-command", act, "--listen", "127.0.0.1:%d" % self.port,
               "--kube-api", fake.url, "--kube-ca-file", fake.info["ca"],
               "--kube-token-file", fake.info["token_file"], "--pod-name", self.pod,
               "--namespace", fake.info["namespace"], "--annotations", ""] + list(extra)
        self.log = os.path.join(self.dir, "agent.log")
        with open(self.log, "wb") as err:
            self.proc = subprocess.Popen(cmd, cwd=self.dir, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err)
        env.procs.append(self.proc)

    def events(self, name=None):
        out = []
        with open(self.log, "rb") as f:
            for line in f.read().decode("utf-8", "replace").splitlines():
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if name is None or e.get("event") == name:
                    out.append(e)
        return out

    def status(self):
        st, body = http_get("http://127.0.0.1:%d/status" % self.port)
        check(st == 200, "/status: %s" % st)
        return json.loads(body)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        with open(self.log, "rb") as f:
            log = f.read().decode("utf-8", "replace")
        check("AddressSanitizer" not in log and "runtime error:" not in log,
              "%s: sanitizer report" % self.pod)
        return self.proc.returncode


def acts_of(path):
    """{pod: [(start ns, end ns)]} from the shared action log."""
    out = {}
    if not os.path.exists(path):
        return out
    starts = {}
    with open(path) as f:
        for line in f.read().splitlines():
            pod, what, t = line.split()
            if what == "start":
                starts[pod] = int(t)
            else:
                out.setdefault(pod, []).append((starts.pop(pod), int(t)))
    return out


def agent_fleet(env, n, *extra):
    fake = launch(env, n)
    acts = env.path("acts")
    agents = [AgentReplica(env, fake, i, acts, *extra) for i in range(n)]
    wait_until(lambda: all(a.events("ready") and a.events("stage-setup") for a in agents), 30,
               "every agent ready, its stage set up")
    return fake, acts, agents


def change_all(env, agents, text):
    for a in agents:
        env.awsim(a.vol, {"app.conf": text})


def test_stage_agents_one_at_a_time(env):
    """4 real agents, --stage 1: a change reaches them one at a time, each
    action after the previous replica's action and verification; /status
    shows the gate."""
    fake, acts, agents = agent_fleet(env, 4, "--stage", "1", "--verify", "true")
    change_all(env, agents, "v2\n")
    wait_until(lambda: sum(len(v) for v in acts_of(acts).values()) == 4, 60,
               "four actions")
    iv = sorted(x for v in acts_of(acts).values() for x in v)
    check(len(acts_of(acts)) == 4, "every replica acted once: %s" % acts_of(acts))
    for (s0, e0), (s1, _) in zip(iv, iv[1:]):
        check(s1 > e0, "an action started before the previous one ended: %s" % iv)
    hashes = {a.events("stage")[-1]["hash"] for a in agents}
    check(len(hashes) == 1, "the replicas staged one content hash: %s" % hashes)
    wait_until(lambda: len(lease(fake)[1].get("verified", [])) == 4, 15, "4 verified")
    st = agents[0].status()["stage"]
    check(st["mode"] == "1" and st["lease"] == "reload-agent-stage-deployment-web" and
          st["last"]["verdict"] == "go" and st["workload"] == "Deployment/web",
          "/status: %s" % st)
    for a in agents:
        check(a.stop() == 0, "%s exits cleanly" % a.pod)


def test_stage_agents_failed_verify_halts_the_others(env):
    """Every replica's verification fails: the first replica acts, fails,
    halts the change; no other replica ever acts on it; ConfigHalted."""
    fake, acts, agents = agent_fleet(env, 4, "--stage", "1", "--verify", "false",
                                     "--verify-timeout", "1s")
    change_all(env, agents, "v2\n")
    wait_until(lambda: sum(1 for a in agents if a.events("stage-halted")) == 3, 60,
               "three replicas halted")
    time.sleep(1)
    done = acts_of(acts)
    check(sum(len(v) for v in done.values()) == 1, "one replica acted: %s" % done)
    st, evs = fake.ctl("GET", "/events")
    halted = [e for e in evs if e.get("reason") == "ConfigHalted"]
    check(len(halted) == 1 and list(done)[0] in halted[0]["message"],
          "ConfigHalted names the pod that failed: %s" % halted)
    # the next content is a new stage: it goes (its verification fails too,
    # on the first replica, and halts again)
    change_all(env, agents, "v3\n")
    wait_until(lambda: sum(len(v) for v in acts_of(acts).values()) == 2, 60, "v3 acted on once")
    for a in agents:
        check(a.stop() == 0, "%s exits cleanly" % a.pod)


def test_stage_default_for_restart(env):
    """restart without --stage: one at a time by default where the API is
    there; the restart goes through the gate (its turn recorded in the
    Lease), and /status says it is the default."""
    fake = launch(env, 1)
    pod = fake.info["pods"][0]
    vol = env.path("vol")
    os.mkdir(vol)
    env.awsim(vol, {"app.conf": "v1\n"}, "--seed", "1")
    app = env.spawn(["sleep", "60"])
    pid_file = env.path("app.pid")
    with open(pid_file, "w") as f:
        f.write("%d\n" % app.pid)
    port = free_port()
    a = env.agent(["--watch", vol, "--debounce", "50ms", "--resync", "0", "--action", "restart",
                   "--pid-file", pid_file, "--restart-delay", "0", "--restart-timeout", "5s",
                   "--listen", "127.0.0.1:%d" % port, "--kube-api", fake.url,
                   "--kube-ca-file", fake.info["ca"], "--kube-token-file",
                   fake.info["token_file"], "--pod-name", pod, "--namespace", "default",
                   "--annotations", ""])
    a.wait_event("stage-setup", timeout=15)
    env.awsim(vol, {"app.conf": "v2\n"})
    a.wait_match("stage", timeout=15, verdict="go")
    wait_until(lambda: app.poll() is not None, 15, "the app restarted (killed)")
    wait_until(lambda: lease(fake)[1].get("verified") == [pod], 15, "the turn recorded")
    st, body = http_get("http://127.0.0.1:%d/status" % port)
    s = json.loads(body)["stage"]
    check(s["default"] is True and s["mode"] == "1" and s["last"]["verdict"] == "go",
          "/status: %s" % s)
    a.stop()


def test_stage_restarted_agent_resumes_its_turn(env):
    """The agent container restarts mid-turn (killed): the pod keeps its
    name, and the new agent asking for the same content resumes its turn
    at once, while another replica waits."""
    fake = launch(env, 2)
    pods = fake.info["pods"]
    first = Replica(env, fake, pods[0], "1", [H1], "--hold", "-1", "--ttl", "30000")
    wait_all([first], lambda r: r.events("verdict"), 30, "the first replica's go")
    first.stop(signal.SIGKILL)
    other = Replica(env, fake, pods[1], "1", [H1], "--hold", "100", "--ttl", "30000")
    wait_until(lambda: other.logged("waiting for a slot"), 15, "the other waits")
    t0 = time.monotonic()
    again = Replica(env, fake, pods[0], "1", [H1], "--hold", "300", "--ttl", "30000")
    wait_all([again], lambda r: r.events("release"), 15, "the restarted agent's turn")
    check(again.verdicts() == ["go"], "it went: %s" % again.verdicts())
    check(time.monotonic() - t0 < 10, "at once, not after the ttl")
    wait_all([other], lambda r: r.events("release"), 15, "then the other")
    check(max_overlap(intervals([again, other])) == 1, "one at a time")
    stop_all([again, other])


def test_stage_halt_written_by_a_replica_that_stops(env):
    """A replica that fails its verification and stops at once: its halt
    still reaches the Lease (the close writes what is queued), and the
    others are halted."""
    fake = launch(env, 2)
    pods = fake.info["pods"]
    first = Replica(env, fake, pods[0], "1", [H1], "--hold", "100", "--fail", "--exit-after", "0")
    wait_until(lambda: first.proc.poll() is not None, 20, "the first replica to stop")
    check(first.proc.returncode == 0, "it stopped cleanly: %s" % first.tail())
    _, st = lease(fake)
    check([h["hash"] for h in st.get("halted", [])] == [H1], "the halt is in the Lease: %s" % st)
    other = Replica(env, fake, pods[1], "1", [H1], "--hold", "100")
    wait_all([other], lambda r: r.events("verdict"), 20, "the other's verdict")
    check(other.verdicts() == ["halted"], "halted: %s" % other.verdicts())
    stop_all([other])


def test_stage_restart_pod_keeps_the_turn_over_the_restart(env):
    """restart-pod (staged by default): the agent exits with its turn kept,
    so the next replica waits until the agent of the restarted pod starts
    and ends the turn, not while the pod restarts."""
    fake = launch(env, 2)
    pods = fake.info["pods"]
    vol = env.path("vol")
    os.mkdir(vol)
    env.awsim(vol, {"app.conf": "v0\n"}, "--seed", "1")
    state = env.path("state")
    os.mkdir(state)
    kube = ["--kube-api", fake.url, "--kube-ca-file", fake.info["ca"], "--kube-token-file",
            fake.info["token_file"], "--pod-name", pods[0], "--namespace", "default"]
    args = (["--watch", vol, "--debounce", "50ms", "--resync", "0", "--restart-delay", "0"] +
            restart_pod_args(state) + kube)
    a = env.agent(args)
    a.wait_event("stage-setup", timeout=15)
    env.awsim(vol, {"app.conf": "v1\n"})
    h = env.hash_of(vol)
    wait_until(lambda: a.proc.poll() is not None, 20, "the agent to exit for the pod restart")
    check(a.proc.returncode == RESTART_POD_CODE, "exit %s" % a.proc.returncode)
    _, st = lease(fake)
    check(st["hash"] == h and [x["pod"] for x in st["active"]] == [pods[0]],
          "the turn is kept over the restart: %s" % st)
    other = Replica(env, fake, pods[1], "1", [h], "--hold", "100")
    wait_until(lambda: other.logged("waiting for a slot"), 15, "the next replica waits")
    time.sleep(1)
    check(not other.events("verdict"), "it waits while the pod restarts")
    b = env.agent(args)
    b.wait_event("pod-restarted", timeout=15)
    wait_all([other], lambda r: r.events("release"), 20, "the next replica's turn")
    check(other.verdicts() == ["go"], "it went: %s" % other.verdicts())
    _, st = lease(fake)
    check(pods[0] in st["verified"], "the restarted pod verified it: %s" % st)
    stop_all([other])
    b.stop()
