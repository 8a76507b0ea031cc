"""Env-sourced configuration (issue 10): --env-watch and --env-action.

The agent watches a ConfigMap the app mounts (--watch A, action signal) and
one the app reads through env (--env-watch B), both laid out by
build/tools/awsim as the kubelet writes them. A real process
(build/tools/hupcount) is the app; the fake API server
(tests/lib/fakeapi.py) is the cluster. What happened is read from the app
(the signals it received, whether it exited), from the fake (recorded
PATCHes, the template-annotation history) and from the agent's log.
"""
import json
import os
import subprocess

from tests.lib.agent import QUIET, volume
from tests.lib.kube import (FILES_KEY, HASH_KEY, clean_exit, digest16, fake_for, history, kube_args,
                            ref_hash, requests, template_changes, update, wait_action, wait_rollout)
from tests.lib.proc import check, wait_until



def annotations_text(settings):
    """The downward-API annotations file (key="Go-quoted value" lines)."""
    return "".join("%s=%s\n" % (k, json.dumps(v)) for k, v in sorted(settings.items()))


def start_app(env):
    pid_file = env.path("app.pid")
    out = env.path("hup.out")
    p = env.spawn([env.tool("hupcount"), "--pid-file", pid_file, "--out", out],
                  stdin=subprocess.DEVNULL)
    wait_until(lambda: os.path.exists(pid_file) and os.path.getsize(pid_file), 10, "pid file")
    return p, pid_file, out


def hups(out):
    with open(out) as f:
        return [l for l in f.read().splitlines() if l.strip()]


@clean_exit
def test_env_watch_rolls_then_restarts_live(env):
    """A change under --watch signals the app; one under --env-watch rolls
    the workload (default env-action), even though --action is signal; with
    reload-agent.io/env-action: restart set live, the next one restarts the
    app in place (TERM, no PATCH)."""
    fake = fake_for(env)
    p, pid_file, out = start_app(env)
    a_vol = volume(env, {"app.conf": "a0\n"}, name="cm-a")
    b_vol = volume(env, {"LOG_LEVEL": "info", "FEATURE": "off"}, name="env-b")
    pod = env.path("podinfo")
    os.mkdir(pod)
    env.awsim(pod, {"annotations": annotations_text({"team": "a"})})
    args = ["--watch", a_vol, "--env-watch", b_vol, "--action", "signal", "--pid-file", pid_file,
            "--debounce", "50ms", "--resync", "0", "--rollout-jitter", "0s",
            "--retry-initial", "100ms", "--retry-max", "1s"]
    args += kube_args(fake, annotations=os.path.join(pod, "annotations"))
    a = env.agent(args)
    a.wait_event("ready", timeout=15)
    ev = a.wait_event("reconcile", timeout=15)[0]  # env-action rollout: reconcile at start
    check(ev["hash"] == ref_hash(b_vol), "reconcile hash %r, want the env root's %s" %
          (ev["hash"], ref_hash(b_vol)))

    # 1. under --watch: signal, no PATCH
    update(env, a_vol, {"app.conf": "a1\n"})
    wait_action(a, action="signal", result="success")
    a.quiet(QUIET)
    check(not requests(fake, "PATCH"), "a --watch change patched: %r" % requests(fake, "PATCH"))

    # 2. under --env-watch: rollout of the env content only, no signal
    update(env, b_vol, {"LOG_LEVEL": "debug", "FEATURE": "off"})
    h = ref_hash(b_vol)
    wait_rollout(a, result="patched", hash=h)
    wait_action(a, action="rollout", result="success")
    a.quiet(QUIET)
    patches = requests(fake, "PATCH")
    check(len(patches) == 1, "%d PATCHes: %r" % (len(patches), patches))
    ann = patches[0]["body"]["spec"]["template"]["metadata"]["annotations"]
    check(ann[HASH_KEY] == h, "patched hash %r, want %s" % (ann[HASH_KEY], h))
    check(json.loads(ann[FILES_KEY]) == {b_vol + "/FEATURE": digest16("off"),
                                         b_vol + "/LOG_LEVEL": digest16("debug")},
          "files annotation %r: only the env files are rollout-class" % ann[FILES_KEY])
    check(len(a.matching("action", action="signal")) == 1, "an env change signalled the app")
    changes = template_changes(history(fake, "deployments", "web"))
    check(len(changes) == 1 and changes[0][HASH_KEY] == h, "template changes %r" % changes)

    # 3. env-action restart, set live: the app is restarted in place, no PATCH
    env.awsim(pod, {"annotations": annotations_text({"team": "a",
                                                     "reload-agent.io/env-action": "restart",
                                                     "reload-agent.io/restart-delay": "0"})})
    a.wait_event("config", timeout=10)
    check(not a.of("config-error"), "config-error: %r" % a.of("config-error"))
    check(p.poll() is None, "the app exited before the restart")
    update(env, b_vol, {"LOG_LEVEL": "debug", "FEATURE": "on"})
    wait_action(a, action="restart", result="success")
    wait_until(lambda: p.poll() is not None, 10, "the app to exit on the restart's TERM")
    check(p.returncode == 0, "hupcount did not exit 0 on TERM: %r" % p.returncode)
    a.quiet(QUIET)
    check(len(requests(fake, "PATCH")) == 1, "the restart also patched: %r" %
          requests(fake, "PATCH"))
    check(len(hups(out)) == 1, "the app got %d SIGHUPs, want 1 (only the --watch change)" %
          len(hups(out)))


@clean_exit
def test_env_action_none_records_only(env):
    """--env-action none: a change under --env-watch is recorded (change
    event) and nothing runs, not even the --action of the other roots; no
    API client is needed."""
    p, pid_file, out = start_app(env)
    a_vol = volume(env, {"app.conf": "a0\n"}, name="cm-a")
    b_vol = volume(env, {"KEY": "v0"}, name="env-b")
    a = env.agent(["--watch", a_vol, "--env-watch", b_vol, "--env-action", "none", "--action",
                   "signal", "--pid-file", pid_file, "--debounce", "50ms", "--resync", "0",
                   "--annotations", ""])
    a.wait_event("ready", timeout=15)
    update(env, b_vol, {"KEY": "v1"})
    a.wait_event("change", timeout=10)
    wait_action(a, action="none", result="success")
    update(env, a_vol, {"app.conf": "a1\n"})
    wait_action(a, action="signal", result="success")
    a.quiet(QUIET)
    check(len(a.matching("action", action="signal")) == 1, "signals %r" %
          a.matching("action", action="signal"))
    p.send_signal(15)
    p.wait(10)
    check(len(hups(out)) == 1, "the app got %d SIGHUPs, want 1" % len(hups(out)))


def test_env_rollout_without_api_is_fatal(env):
    """--env-watch with the default env-action (rollout) needs the API client
    exactly like a rollout rule: without one, exit status 2 naming it."""
    b_vol = volume(env, {"KEY": "v0"}, name="env-b")
    clean = {k: v for k, v in os.environ.items()
             if k not in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")}
    r = env.run([env.binary, "run", "--env-watch", b_vol, "--annotations", "",
                 "--pod-name", "web-0", "--namespace", "default"], timeout=20, env=clean)
    err = r.stderr.decode(errors="replace")
    check(r.returncode == 2, "exit %d (%s)" % (r.returncode, err))
    check("rollout" in err and "KUBERNETES_SERVICE_HOST" in err, "message %r" % err)
    r = env.run([env.binary, "run", "--env-watch", b_vol, "--env-action", "signal",
                 "--annotations", ""], timeout=20, env=clean)
    err = r.stderr.decode(errors="replace")
    check(r.returncode == 2 and "--env-action" in err and '"signal"' in err,
          "exit %d, message %r" % (r.returncode, err))
