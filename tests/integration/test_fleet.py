"""Fleet test: many replicas of one Deployment, one ConfigMap change, one
rollout.

Every replica of a Deployment runs the agent and sees the same ConfigMap
change at about the same time (each kubelet updates its own copy of the
volume). The rollout action must roll the workload once: a random
--rollout-jitter spreads the replicas, the first one PATCHes the pod
template, the others GET the owner, see the hash already there and stop
(already-current). This file runs that for real: N agent processes against
the fake API server (tests/lib/fakeapi.py, deployment fixture with N pods),
each with its own AtomicWriter volume (build/tools/awsim) mounted, as in a
real pod, at the same path (./config relative to the agent's own working
directory, so every replica computes the same logical paths and hash).

inotify instances are limited per user (fs.inotify.max_user_instances,
default 128) and an in-cluster agent uses two (content; annotations and
token). Replicas normally sit on different nodes; here, when run as root,
the agents are spread over several UIDs (AGENTS_PER_UID each) so the fleet
does not hit one user's limit.

The machinery is tests/lib/fleet.py, shared with the benchmark
(tests/bench/fleet.py).
"""
from tests.lib.fleet import DEPLOYMENT, HASH_ANNOTATION, Fleet, run_one_change
from tests.lib.proc import check

N_AGENTS = 50
MAX_REQUESTS_PER_AGENT = 6  # startup: pod, RS, Deployment; change: GET (+ PATCH, Event)


def test_fleet_one_change_rolls_once(env):
    fleet = Fleet(env.binary, env.tools, N_AGENTS, jitter="2s", events=True, spawn=env.spawn)
    try:
        m = run_one_change(fleet, timeout=60)
        h, patches, reqs = m["history"], m["patches"], m["reqs"]
        # The template changed exactly once, to the content's hash.
        check(len(h) == 1, "template changed %d times: %s" % (len(h), h))
        check(h[0].get(HASH_ANNOTATION) == m["want"],
              "template hash %s, content hash %s" % (h[0].get(HASH_ANNOTATION), m["want"]))
        # Racing PATCHes (two replicas inside one API round trip) are allowed
        # but must agree; how many race depends on the machine's speed, so
        # the count is reported, not bounded (the jitter spread is checked
        # below).
        check(len(patches) >= 1, "no PATCH was sent")
        check(set(patches) == {m["want"]}, "PATCHes carried other hashes: %s" % patches)
        results = [r for r, _, _ in m["results"]]
        check(results.count("patched") == len(patches),
              "%d agents logged patched, %d PATCHes sent" % (results.count("patched"),
                                                             len(patches)))
        check(results.count("already-current") == N_AGENTS - len(patches), str(results))
        # Bounded API traffic, all of it answered successfully.
        bad = [(r["method"], r["path"], r["status"]) for r in reqs if r["status"] not in (200, 201)]
        check(not bad, "failed API requests: %s" % bad[:5])
        check(len(reqs) <= MAX_REQUESTS_PER_AGENT * N_AGENTS,
              "%d API requests for %d agents" % (len(reqs), N_AGENTS))
        # Events: the patching replica(s) announce the rollout on the Deployment.
        st, evs = fleet.fake.ctl("GET", "/events")
        trig = [e for e in evs if e.get("reason") == "RolloutTriggered"]
        check(st == 200 and 1 <= len(trig) <= len(patches), "RolloutTriggered events: %s" % trig)
        check(all(e["involvedObject"]["kind"] == "Deployment" and
                  e["involvedObject"]["name"] == DEPLOYMENT for e in trig), str(trig))
        # The jitter is random per replica: the delays from each agent's
        # change to its rollout spread over the 2 s window (50 uniform draws
        # all inside 1 s: probability about 1e-13; identical draws in every
        # process, e.g. an unseeded PRNG, give a spread of a few ms).
        delays = [t - c for _, t, c in m["results"]]
        check(max(delays) - min(delays) >= 1.0,
              "rollout delays after the change span only %.3fs of the 2s jitter: %s" %
              (max(delays) - min(delays), sorted("%.3f" % d for d in delays)[:10]))
        last = max(t for _, t, _ in m["results"])
        print("  fleet: %d agents, %d template change, %d PATCH, %d requests (%.2f/agent), "
              "converged %.2fs after the change, max RSS %d KiB (anonymous %d KiB)" %
              (N_AGENTS, len(h), len(patches), len(reqs), len(reqs) / N_AGENTS,
               last - m["t0"], max([r for r, _ in m["rss"]] or [0]),
               max([a for _, a in m["rss"]] or [0])))
    finally:
        codes = fleet.stop()
    check(all(c == 0 for c in codes), "agents exited with %s" % sorted(set(codes)))
