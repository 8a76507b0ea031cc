"""The render-time stamp (inject/stamp.c) equals what the real agent computes.

A pod template is written as `reload-agent inject` leaves it: the
reload-agent sidecar with its args, the ConfigMap and Secret volumes it
mounts (one watched with --watch, one with --env-watch), rules in the
template's annotations. The stamp comes from build/tools/stamptool (the
library function behind `inject`). The same ConfigMap and Secret are laid
out by build/tools/awsim (the kubelet's AtomicWriter) at the template's
mount paths, and then:

- `reload-agent hash` over the env root (all of it rollout-class) equals the
  stamp of a template that watches only that root, and the manifest that
  `reload-agent hash --list` prints for both roots, filtered to the
  rollout-class lines, hashes to the stamp;
- the real agent, run with the sidecar's args and the template's
  annotations (downward-API file) against the fake API server with the
  template pre-stamped and --on-start reconcile, finds the pod current: no
  PATCH; a change of a rollout-class key is PATCHed with exactly the stamp
  of the changed objects; a change of an in-place key is not PATCHed;
- nested mounts (a Secret volume mounted inside a ConfigMap volume, both
  laid out by awsim, the inner mount point a directory of the outer): the
  sidecar `inject` writes ignores the inner volume's private names, its
  stamp equals `reload-agent hash` over both roots with that --ignore, and
  the agent run with those args ignores an AtomicWriter rewrite of the
  inner volume with the same content.
"""
import base64
import fnmatch
import hashlib
import json
import os
import shutil
import time

import yaml

from tests.lib.agent import QUIET
from tests.lib.kube import (HASH_KEY, clean_exit, fake_for, kube_args, put_object, requests, stored,
                            wait_action, wait_rollout)
from tests.lib.proc import check, http_get


RULES = "*.conf=none"


def stamptool(env, template, sources, namespace="default"):
    """Runs the stamp on {template, namespace, sources}; returns its JSON."""
    r = env.run([env.tool("stamptool")], input=json.dumps(
        {"template": template, "namespace": namespace, "sources": sources}).encode())
    check(r.returncode in (0, 1), "stamptool exited %d: %s" % (r.returncode, r.stderr))
    return json.loads(r.stdout)


def configmap(conf, jvm, logo):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "app", "namespace": "default"},
            "data": {"app.conf": conf, "jvm.options": jvm},
            "binaryData": {"logo.bin": base64.b64encode(logo).decode()}}


def secret(level, token):
    """As a manifest writes it: data (base64) and stringData over it."""
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "env", "namespace": "default"},
            "type": "Opaque",
            "data": {"LOG_LEVEL": base64.b64encode(b"stale").decode(),
                     "TOKEN": base64.b64encode(token).decode()},
            "stringData": {"LOG_LEVEL": level}}


def files_of_configmap(cm):
    out = {k: v.encode() for k, v in cm["data"].items()}
    out.update({k: base64.b64decode(v) for k, v in cm["binaryData"].items()})
    return out


def files_of_secret(s):
    out = {k: base64.b64decode(v) for k, v in s["data"].items()}
    out.update({k: v.encode() for k, v in s["stringData"].items()})
    return out


def template(vol, envvol, watch=True):
    args = ["run"]
    if watch:
        args += ["--watch", vol]
    args += ["--env-watch", envvol, "--action", "rollout"]
    mounts = [{"name": "reload-agent-env-secret-env", "mountPath": envvol, "readOnly": True},
              {"name": "reload-agent-podinfo", "mountPath": "/etc/podinfo", "readOnly": True}]
    if watch:
        mounts.insert(0, {"name": "cfg", "mountPath": vol, "readOnly": True})
    return {"metadata": {"labels": {"app": "web"},
                         "annotations": {"reload-agent.io/inject": "true",
                                         "reload-agent.io/rule": RULES}},
            "spec": {"initContainers": [{"name": "reload-agent", "image": "reload-agent:test",
                                         "restartPolicy": "Always", "args": args,
                                         "volumeMounts": mounts}],
                     "containers": [{"name": "app", "image": "app",
                                     "envFrom": [{"secretRef": {"name": "env"}}],
                                     "volumeMounts": [{"name": "cfg", "mountPath": vol}]}],
                     "volumes": [{"name": "cfg", "configMap": {"name": "app"}},
                                 {"name": "reload-agent-podinfo", "downwardAPI": {"items": [
                                     {"path": "annotations",
                                      "fieldRef": {"fieldPath": "metadata.annotations"}}]}},
                                 {"name": "reload-agent-env-secret-env",
                                  "secret": {"secretName": "env"}}]}}


def annotations_text(ann):
    return "".join("%s=%s\n" % (k, json.dumps(v)) for k, v in sorted(ann.items()))


def stamped(env, tmpl, sources):
    out = stamptool(env, tmpl, sources)
    check(out["rc"] == 1, "no stamp: %r" % out)
    check(out["key"] == HASH_KEY, "stamp key %r" % out["key"])
    return out["hex"]


def test_stamp_equals_reload_agent_hash(env):
    """The stamp equals `reload-agent hash` of the same content laid out by
    the AtomicWriter simulator."""
    vol, envvol = env.path("etc-app"), env.path("env-secret")
    os.mkdir(vol)
    os.mkdir(envvol)
    cm = configmap("listen 80\n", "-Xmx1g\n", b"\x89PNG\x00\xff")
    sec = secret("debug", b"t0k\n")
    env.awsim(vol, files_of_configmap(cm), "--seed", "3")
    env.awsim(envvol, files_of_secret(sec), "--seed", "4")
    # the env root alone is all rollout-class: the stamp is its plain hash
    only_env = stamped(env, template(vol, envvol, watch=False), [cm, sec])
    check(only_env == env.hash_of(envvol), "stamp %s, reload-agent hash %s" %
          (only_env, env.hash_of(envvol)))
    # both roots: the rollout-class lines of the real manifest
    both = stamped(env, template(vol, envvol), [cm, sec])
    r = env.run([env.binary, "hash", "--list", vol, envvol])
    check(r.returncode == 0, "hash --list: %s" % r.stderr)
    lines = r.stdout.decode().splitlines(keepends=True)[:-1]
    check(len(lines) == 5, "manifest %r" % lines)
    rollout = [l for l in lines if not l.rstrip("\n").endswith(".conf")]
    check(len(rollout) == 4, "rollout-class lines %r" % rollout)
    want = hashlib.sha256("".join(rollout).encode()).hexdigest()
    check(both == want, "stamp %s, rollout-class manifest %s" % (both, want))
    check(both != env.hash_of(vol, envvol), "the in-place file was stamped")
    # the in-place key does not move the stamp; a rollout-class key does
    cm2 = configmap("listen 8080\n", "-Xmx1g\n", b"\x89PNG\x00\xff")
    check(stamped(env, template(vol, envvol), [cm2, sec]) == both, "app.conf moved the stamp")
    cm3 = configmap("listen 80\n", "-Xmx2g\n", b"\x89PNG\x00\xff")
    check(stamped(env, template(vol, envvol), [cm3, sec]) != both, "jvm.options did not")
    # something missing from the input: no stamp, and why
    out = stamptool(env, template(vol, envvol), [cm])
    check(out["rc"] == 0 and out["why"] == "secret/env is not in the input", "missing: %r" % out)


@clean_exit
def test_agent_finds_stamped_template_current(env):
    """GitOps: the template carries the stamp, the agent starts on the same
    content and finds it current (no PATCH); a rollout-class change is
    PATCHed with the stamp of the changed objects, an in-place one is not."""
    fake = fake_for(env)
    vol, envvol = env.path("etc-app"), env.path("env-secret")
    os.mkdir(vol)
    os.mkdir(envvol)
    cm = configmap("listen 80\n", "-Xmx1g\n", b"\x00\x01")
    sec = secret("info", b"t0k")
    env.awsim(vol, files_of_configmap(cm), "--seed", "5")
    env.awsim(envvol, files_of_secret(sec), "--seed", "6")
    tmpl = template(vol, envvol)
    h0 = stamped(env, tmpl, [cm, sec])
    # the applied template is stamped: the Deployment and the pod carry it
    dep = stored(fake, "deployments", "web")
    dep["spec"]["template"]["metadata"]["annotations"][HASH_KEY] = h0
    put_object(fake, "deployments", dep)
    fake.ctl("POST", "/requests/clear")
    pod = env.path("podinfo")
    os.mkdir(pod)
    ann = dict(tmpl["metadata"]["annotations"])
    ann[HASH_KEY] = h0
    env.awsim(pod, {"annotations": annotations_text(ann)})
    args = tmpl["spec"]["initContainers"][0]["args"][1:]
    a = env.agent(args + ["--on-start", "reconcile", "--debounce", "50ms", "--resync", "0",
                          "--rollout-jitter", "0s", "--listen", "127.0.0.1:0"] +
                  kube_args(fake, annotations=os.path.join(pod, "annotations")))
    a.wait_event("ready", timeout=15)
    ev = a.wait_event("reconcile", timeout=15)[0]
    check(ev["hash"] == h0 and ev["pod_hash"] == h0 and ev["rollout"] is False,
          "reconcile %r, stamp %s" % (ev, h0))
    a.quiet(QUIET)
    check(not requests(fake, "PATCH"), "PATCHed a current template: %r" % requests(fake, "PATCH"))
    check(not a.of("rollout") and not a.of("action"), "acted at start: %r" %
          (a.of("rollout") + a.of("action")))
    # /status shows the rollout hash beside the total: the stamp
    status = "http://127.0.0.1:%d/status" % a.of("ready")[0]["port"]
    s = json.loads(http_get(status)[1])
    check(s.get("rollout_hash") == h0 and s.get("hash") != h0, "/status %r, stamp %s" % (s, h0))

    # a rollout-class key changes: the PATCH carries the fresh stamp
    cm1 = configmap("listen 80\n", "-Xmx2g\n", b"\x00\x01")
    env.awsim(vol, files_of_configmap(cm1))
    h1 = stamped(env, tmpl, [cm1, sec])
    check(h1 != h0, "the stamp did not change")
    wait_rollout(a, result="patched", hash=h1)
    wait_action(a, action="rollout", result="success")
    a.quiet(QUIET)
    patches = requests(fake, "PATCH")
    check(len(patches) == 1, "%d PATCHes: %r" % (len(patches), patches))
    got = patches[0]["body"]["spec"]["template"]["metadata"]["annotations"][HASH_KEY]
    check(got == h1, "PATCHed %s, fresh stamp %s" % (got, h1))
    check(json.loads(http_get(status)[1]).get("rollout_hash") == h1, "/status rollout_hash")

    # an env (Secret) key changes: rolled too, with its fresh stamp
    sec2 = secret("debug", b"t0k")
    env.awsim(envvol, files_of_secret(sec2))
    h2 = stamped(env, tmpl, [cm1, sec2])
    wait_rollout(a, result="patched", hash=h2)
    a.quiet(QUIET)
    check(len(requests(fake, "PATCH")) == 2, "PATCHes %r" % requests(fake, "PATCH"))

    # an in-place key changes: recorded, no PATCH, and the stamp stays
    cm3 = configmap("listen 8080\n", "-Xmx2g\n", b"\x00\x01")
    env.awsim(vol, files_of_configmap(cm3))
    check(stamped(env, tmpl, [cm3, sec2]) == h2, "the in-place key moved the stamp")
    wait_action(a, action="none", result="success")
    a.quiet(QUIET)
    check(len(requests(fake, "PATCH")) == 2, "an in-place change PATCHed: %r" %
          requests(fake, "PATCH"))
    check(stored(fake, "deployments", "web")["spec"]["template"]["metadata"]["annotations"]
          [HASH_KEY] == h2, "stored template hash")


# ---- nested mounts: a volume mounted inside another one ----

def nested_input(outer, inner):
    """A Deployment whose app mounts ConfigMap app-config at outer and Secret
    app-tls at inner (inside outer), every file rollout-class, plus both
    objects: the input of `reload-agent inject`."""
    dep = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "namespace": "default"},
           "spec": {"selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"},
                                     "annotations": {"reload-agent.io/inject": "true",
                                                     "reload-agent.io/action": "rollout"}},
                        "spec": {"containers": [{"name": "app", "image": "app",
                                                 "volumeMounts": [
                                                     {"name": "config", "mountPath": outer},
                                                     {"name": "tls", "mountPath": inner}]}],
                                 "volumes": [{"name": "config",
                                              "configMap": {"name": "app-config"}},
                                             {"name": "tls",
                                              "secret": {"secretName": "app-tls"}}]}}}}
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "app-config", "namespace": "default"},
          "data": {"app.conf": "listen 443\n", "mime.types": "types {}\n"}}
    sec = {"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": "app-tls", "namespace": "default"}, "type": "Opaque",
           "data": {"tls.crt": base64.b64encode(b"CERT\n").decode(),
                    "tls.key": base64.b64encode(b"KEY\n").decode()}}
    return dep, cm, sec


def inject_nested(env, outer, inner):
    """Injects the nested Deployment; returns (sidecar args after "run",
    the stamp, the ConfigMap, the Secret)."""
    dep, cm, sec = nested_input(outer, inner)
    src = "---\n".join(yaml.safe_dump(o) for o in (dep, cm, sec))
    r = env.run([env.binary, "inject", "-"], input=src.encode())
    check(r.returncode == 0, "inject: %s" % r.stderr.decode(errors="replace"))
    out = list(yaml.safe_load_all(r.stdout))[0]["spec"]["template"]
    side = [c for c in out["spec"]["initContainers"] if c["name"] == "reload-agent"][0]
    stamp = out["metadata"]["annotations"].get(HASH_KEY)
    check(stamp, "no stamp: %s" % r.stderr.decode(errors="replace"))
    return side["args"][1:], stamp, cm, sec


def lay_out_nested(env, outer, inner, cm, sec):
    """The kubelet's layout: the outer volume (AtomicWriter), the inner
    mount point a directory in it, the inner volume (AtomicWriter)."""
    os.mkdir(outer)
    env.awsim(outer, {k: v.encode() for k, v in cm["data"].items()}, "--seed", "7")
    os.mkdir(inner)
    env.awsim(inner, {k: base64.b64decode(v) for k, v in sec["data"].items()}, "--seed", "8")


def hash_ignoring(env, roots, globs):
    """`reload-agent hash --list` over roots, minus the lines an --ignore
    glob matches (fnmatch without FNM_PATHNAME, as the agent's), hashed:
    `reload-agent hash` with the same --ignore."""
    r = env.run([env.binary, "hash", "--list"] + roots)
    check(r.returncode == 0, "hash --list: %s" % r.stderr)
    lines = r.stdout.decode().splitlines(keepends=True)[:-1]
    kept = [l for l in lines if not any(fnmatch.fnmatchcase(l.rstrip("\n").split("  ", 1)[1], g)
                                        for g in globs)]
    return hashlib.sha256("".join(kept).encode()).hexdigest(), lines, kept


def atomic_rewrite_same(vol):
    """An AtomicWriter update that writes the same content: a new
    timestamped directory, ..data swapped to it, the old one removed. Only
    the kubelet-private names change."""
    old = os.readlink(os.path.join(vol, "..data"))
    new = "..2099_01_01_00_00_00.%d" % (time.monotonic_ns() % 1000000000)
    shutil.copytree(os.path.join(vol, old), os.path.join(vol, new), symlinks=True)
    os.symlink(new, os.path.join(vol, "..data_tmp"))
    os.rename(os.path.join(vol, "..data_tmp"), os.path.join(vol, "..data"))
    shutil.rmtree(os.path.join(vol, old))


def test_nested_stamp_equals_hash(env):
    """Volume B mounted inside volume A: the injected sidecar watches both
    and ignores B's kubelet-private names; the stamp equals `reload-agent
    hash` over both roots with that --ignore, where the outer walk yields B's
    user-visible files at the same logical paths as B's own root."""
    outer = env.path("etc-app")
    inner = os.path.join(outer, "tls")
    args, stamp, cm, sec = inject_nested(env, outer, inner)
    globs = [a[len("--ignore="):] for a in args if a.startswith("--ignore=")]
    check(args[:2] == ["--watch=" + outer, "--watch=" + inner] and globs == [inner + "/..*"],
          "sidecar args %r" % args)
    lay_out_nested(env, outer, inner, cm, sec)
    want, lines, kept = hash_ignoring(env, [outer, inner], globs)
    check(any("/tls/..data/" in l for l in lines), "the outer walk did not enter the inner "
          "volume's ..data: %r" % lines)
    check([l.rstrip("\n").split("  ", 1)[1] for l in kept] ==
          sorted([outer + "/app.conf", outer + "/mime.types", inner + "/tls.crt",
                  inner + "/tls.key"]), "kept lines %r" % kept)
    check(stamp == want, "stamp %s, reload-agent hash with --ignore %s" % (stamp, want))
    check(stamp != env.hash_of(outer, inner), "the ignore changed nothing")


def test_nested_identical_rewrite_triggers_nothing(env):
    """The agent run with the injected args: an AtomicWriter update of the
    inner volume with the same content changes only kubelet-private names
    and triggers nothing; a real change of it acts once."""
    outer = env.path("etc-app")
    inner = os.path.join(outer, "tls")
    args, stamp, cm, sec = inject_nested(env, outer, inner)
    lay_out_nested(env, outer, inner, cm, sec)
    a = env.agent(args + ["--action", "exec", "--exec-command", "true", "--annotations", "",
                          "--debounce", "50ms", "--resync", "0", "--listen", "127.0.0.1:0"])
    a.wait_event("ready", timeout=15)
    status = "http://127.0.0.1:%d/status" % a.of("ready")[0]["port"]
    s = json.loads(http_get(status)[1])
    check(s.get("hash") == stamp, "agent hash %r, stamp %s" % (s.get("hash"), stamp))
    atomic_rewrite_same(inner)
    a.quiet(QUIET)
    s = json.loads(http_get(status)[1])
    check(not a.of("action") and s.get("changes") == 0 and s.get("hash") == stamp,
          "an identical rewrite acted: %r, /status %r" % (a.of("action"), s))
    env.awsim(inner, {"tls.crt": b"CERT2\n", "tls.key": b"KEY\n"})
    wait_action(a, action="exec", result="success")
    a.quiet(QUIET)
    check(len(a.of("action")) == 1, "actions %r" % a.of("action"))


def test_nested_unclean_paths_stamp_equals_hash(env):
    """Issue 16.4: the inner mount written with "/./", "//" or "x/.." (the
    runtime mounts it at the clean path): the sidecar watches the clean
    path and ignores its private names by the clean path's glob, so the
    stamp is there and equals `reload-agent hash` with that --ignore, the
    walk the agent makes."""
    outer = env.path("etc-app")
    inner = os.path.join(outer, "tls")
    lay = False
    for spelled in (outer + "/./tls", outer + "//tls/", outer + "/x/../tls"):
        args, stamp, cm, sec = inject_nested(env, outer, spelled)
        globs = [a[len("--ignore="):] for a in args if a.startswith("--ignore=")]
        check(args[:2] == ["--watch=" + outer, "--watch=" + inner] and globs == [inner + "/..*"],
              "%s: sidecar args %r" % (spelled, args))
        if not lay:
            lay_out_nested(env, outer, inner, cm, sec)
            lay = True
        want, _, kept = hash_ignoring(env, [outer, inner], globs)
        check(len(kept) == 4, "%s: kept lines %r" % (spelled, kept))
        check(stamp == want, "%s: stamp %s, reload-agent hash with --ignore %s" %
              (spelled, stamp, want))
