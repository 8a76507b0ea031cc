"""Watch + hash integration tests: the real agent on real directories.

Every test starts `reload-agent run` with JSON logs, `--debounce 50ms` and
`--resync 0` (so only inotify events, never a periodic rehash, can find a
change), changes the watched content with the AtomicWriter simulator
(build/tools/awsim, docs/kubernetes-api.md) or plain file operations, and
checks the logged events against the agent's log contract:
"baseline", "ready", "change" (hash + added/removed/modified logical paths),
"overflow", "root-gone", "root-back", "waiting".

Expected hashes come from two independent sources: `reload-agent hash` on the
final tree, and canonical_hash() below, computed from the test's own model of
the content (dict logical path -> bytes) with the algorithm of docs/hash.md.
"""
import hashlib
import os
import re
import shutil
import signal
import subprocess
import time

from lib import TestFailure, check

EMPTY_HASH = hashlib.sha256(b"").hexdigest()
QUIET = 1.0  # seconds of silence after which "nothing more happens" is asserted


def canonical_hash(files):
    """docs/hash.md, "The contract" (v2) over {logical path: bytes}: the
    SHA-256 of the sha256sum-format manifest (no test path needs escaping)."""
    manifest = b""
    for path in sorted(files, key=lambda p: p.encode()):
        check("\\" not in path and "\n" not in path, "canonical_hash: unescaped path %r" % path)
        manifest += hashlib.sha256(files[path]).hexdigest().encode() + b"  " + path.encode() + b"\n"
    return hashlib.sha256(manifest).hexdigest()


def b(v):
    return v if isinstance(v, bytes) else v.encode()


def logical(root, files):
    """{key: content} -> {root/key: bytes}."""
    return {root + "/" + k: b(v) for k, v in files.items()}


def diff(old, new):
    """Expected (added, removed, modified) between two logical models."""
    added = sorted(p for p in new if p not in old)
    removed = sorted(p for p in old if p not in new)
    modified = sorted(p for p in new if p in old and old[p] != new[p])
    return added, removed, modified


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b(data))


def write_tree(root, files):
    for k, v in files.items():
        write(os.path.join(root, k), v)


def start(env, roots, *extra):
    """Starts the agent on roots; waits for "ready"."""
    args = []
    for r in roots:
        args += ["--watch", r]
    a = env.agent(args + ["--debounce", "50ms", "--resync", "0", "--action", "none"] + list(extra))
    a.wait_event("ready", timeout=15)
    return a


def wait_change(a, want_hash, since=0, timeout=10.0):
    """Waits for a change event whose hash is want_hash, among the change
    events after the first `since` ones; returns it."""
    def pred(evs):
        changes = [e for e in evs if e.get("event") == "change"]
        for e in changes[since:]:
            if e.get("hash") == want_hash:
                return e
        return None
    return a.wait_for(pred, timeout, "a change to hash %s" % want_hash)


def check_change(e, old, new):
    """The change event e reports exactly the model transition old -> new."""
    added, removed, modified = diff(old, new)
    got = (sorted(e.get("added", [])), sorted(e.get("removed", [])), sorted(e.get("modified", [])))
    check(got == (added, removed, modified),
          "change paths: got added/removed/modified %r, want %r" % (got, (added, removed, modified)))


def assert_no_new_changes(a, n_before, what):
    a.quiet(QUIET)
    n = len(a.of("change"))
    check(n == n_before, "%s produced %d change event(s): %r" % (what, n - n_before, a.of("change")[n_before:]))


def sigterm_exits_zero(a):
    rc = a.stop(signal.SIGTERM)
    check(rc == 0, "agent exit status after SIGTERM: %r, want 0" % rc)


# ---- AtomicWriter volumes ----

# The content after each of the 10 updates of test_one_change_per_update:
# modify, add, remove, nested add (new top-level dir), nested modify, nested
# add+remove inside a kept dir, removal of a whole top-level dir, two files at
# once, binary content, an emptied file.
STATES = [
    {"a.conf": "a0\n", "b.conf": "b0\n", "sub/x": "x0\n"},
    {"a.conf": "a1\n", "b.conf": "b0\n", "sub/x": "x0\n"},
    {"a.conf": "a1\n", "b.conf": "b0\n", "c.conf": "c0\n", "sub/x": "x0\n"},
    {"a.conf": "a1\n", "c.conf": "c0\n", "sub/x": "x0\n"},
    {"a.conf": "a1\n", "c.conf": "c0\n", "sub/x": "x0\n", "conf/deep/y": "y0\n"},
    {"a.conf": "a1\n", "c.conf": "c0\n", "sub/x": "x0\n", "conf/deep/y": "y1\n"},
    {"a.conf": "a1\n", "c.conf": "c0\n", "sub/x": "x0\n", "conf/z": "z0\n"},
    {"a.conf": "a1\n", "c.conf": "c0\n", "sub/x": "x0\n"},
    {"a.conf": "a2\n", "c.conf": "c0\n", "sub/x": "x1\n"},
    {"a.conf": "a2\n", "c.conf": "c0\n", "sub/x": "x1\n", "data.bin": bytes(range(256)) * 3},
    {"a.conf": "", "c.conf": "c0\n", "sub/x": "x1\n", "data.bin": bytes(range(256)) * 3},
]


def atomic_volume(env, files, name="vol"):
    vol = env.path(name)
    os.mkdir(vol)
    env.awsim(vol, files, "--seed", "1")
    return vol


def test_one_change_per_update(env):
    vol = atomic_volume(env, STATES[0])
    a = start(env, [vol])
    base = a.of("baseline")
    check(len(base) == 1, "want one baseline event, got %r" % base)
    check(base[0].get("hash") == canonical_hash(logical(vol, STATES[0])) == env.hash_of(vol),
          "baseline hash %r" % base[0].get("hash"))
    for i in range(1, len(STATES)):
        t0 = time.monotonic()
        env.awsim(vol, STATES[i], "--seed", str(100 + i))
        old, new = logical(vol, STATES[i - 1]), logical(vol, STATES[i])
        want = canonical_hash(new)
        check(want == env.hash_of(vol), "update %d: `hash` disagrees with the model" % i)
        e = wait_change(a, want, since=i - 1)
        changes = a.of("change")
        check(len(changes) == i, "update %d: %d change events so far, want %d: %r" %
              (i, len(changes), i, changes))
        check_change(e, old, new)
        time.sleep(max(0.0, 0.3 - (time.monotonic() - t0)))
    assert_no_new_changes(a, len(STATES) - 1, "the settled volume")
    sigterm_exits_zero(a)


def test_no_change_for_noise(env):
    files = {"a.conf": "a0\n", "b.conf": "b0\n", "sub/x": "x0\n"}
    vol = atomic_volume(env, files)
    a = start(env, [vol])
    # Identical rewrites: awsim skips the write (AtomicWriter step 4) but still walks
    # the old ts dir and re-checks the top-level links.
    env.awsim(vol, files)
    r = env.run([env.tool("awsim"), "--dir", vol, "--count", "5", "--noop"])
    check(r.returncode == 0, "awsim --noop: %s" % r.stderr.decode(errors="replace"))
    # touch and chmod through the user-visible links and on the volume itself.
    r = env.run(["touch", os.path.join(vol, "a.conf"), os.path.join(vol, "sub", "x"), vol])
    check(r.returncode == 0, "touch: %r" % r.stderr)
    os.chmod(os.path.join(vol, "b.conf"), 0o600)
    os.chmod(vol, 0o750)
    # An fsGroup-style ATTRIB burst over every entry (lchown + chmod), as the
    # kubelet's volume_linux.go walk does, without any content change.
    r = env.run(["chgrp", "-hR", "1234", vol])
    check(r.returncode == 0, "chgrp: %r" % r.stderr)
    r = env.run(["chmod", "-R", "g+r", vol])
    check(r.returncode == 0, "chmod: %r" % r.stderr)
    assert_no_new_changes(a, 0, "identical rewrites, touch, chmod and an ATTRIB burst")
    # A real update with the fsGroup walk (ATTRIB burst before the swap):
    # exactly one change.
    new = dict(files, **{"b.conf": "b1\n"})
    env.awsim(vol, new, "--fsgroup", "1234", "--mode", "0400")
    e = wait_change(a, canonical_hash(logical(vol, new)))
    check_change(e, logical(vol, files), logical(vol, new))
    check(e["hash"] == env.hash_of(vol), "hash after the fsGroup update")
    assert_no_new_changes(a, 1, "an fsGroup update")


def test_slow_and_legacy_writer(env):
    """A writer that pauses between the late steps (so the agent hashes the
    intermediate states: new key not linked yet, removed key dangling, old ts
    dir still there) and the pre-2021 order (links before the swap): the
    last change is always the final content."""
    s0 = {"a.conf": "a0\n", "b.conf": "b0\n"}
    s1 = {"a.conf": "a1\n", "c.conf": "c0\n", "d/e": "e0\n"}
    s2 = {"a.conf": "a2\n", "b.conf": "b2\n", "d/e": "e0\n"}
    vol = atomic_volume(env, s0)
    a = start(env, [vol])
    for i, (new, opts) in enumerate([(s1, ["--pause-ms", "200"]), (s2, ["--legacy"])]):
        n0 = len(a.of("change"))
        env.awsim(vol, new, "--seed", str(i), *opts)
        want = canonical_hash(logical(vol, new))
        check(want == env.hash_of(vol), "`hash` disagrees with the model")
        wait_change(a, want, since=n0)
        a.quiet(QUIET)
        changes = a.of("change")[n0:]
        check(1 <= len(changes) <= 4, "%d change events for one update %r" % (len(changes), opts))
        check(changes[-1]["hash"] == want, "last change %r is not the final content" % changes[-1])
        for x, y in zip(changes, changes[1:]):
            check(x["hash"] != y["hash"], "two consecutive changes with the same hash")


def test_thousand_back_to_back_updates(env):
    vol = atomic_volume(env, {"key-0": "initial\n"})
    a = start(env, [vol])
    base = a.of("baseline")[0]["hash"]
    r = env.run([env.tool("awsim"), "--dir", vol, "--count", "1000", "--files", "4",
                 "--size", "200", "--seed", "7"], timeout=300)
    check(r.returncode == 0, "awsim --count: %s" % r.stderr.decode(errors="replace"))
    final = env.hash_of(vol)
    wait_change(a, final, timeout=30)  # the final hash never occurred before
    a.quiet(QUIET)
    changes = a.of("change")
    check(1 <= len(changes) <= 1000, "%d change events for 1000 updates" % len(changes))
    check(changes[-1]["hash"] == final, "last change %s, final content %s" % (changes[-1]["hash"], final))
    prev = base
    for c in changes:
        check(c["hash"] != prev, "a change event repeats the previous hash %s" % prev)
        prev = c["hash"]
    got = set(changes[-1].get("added", []) + changes[-1].get("removed", []) + changes[-1].get("modified", []))
    check(got, "the last change names no paths")
    check(got <= {vol + "/key-%d" % k for k in range(4)}, "unexpected paths in %r" % got)


def test_single_file_root(env):
    files = {"annotations": 'reload-agent.io/action="none"\n', "labels": 'app="x"\n'}
    vol = atomic_volume(env, files)
    root = os.path.join(vol, "annotations")
    a = start(env, [root])
    check(a.of("baseline")[0]["hash"] == canonical_hash({root: b(files["annotations"])}) == env.hash_of(root),
          "baseline of a file root")
    # Twice: the watch must survive the first swap (its old file is deleted).
    for n, text in enumerate(['reload-agent.io/action="signal"\n', 'a="1"\nb="2"\n'], 1):
        new = dict(files, annotations=text)
        env.awsim(vol, new)
        e = wait_change(a, canonical_hash({root: b(text)}))
        check(e["hash"] == env.hash_of(root), "hash of the file root")
        check(e.get("modified") == [root] and not e.get("added") and not e.get("removed"),
              "change paths for a file root: %r" % e)
        check(len(a.of("change")) == n, "change count %d, want %d" % (len(a.of("change")), n))
        files = new
    # Another key of the same volume changes: not this root's content.
    env.awsim(vol, dict(files, labels='app="y"\n'))
    assert_no_new_changes(a, 2, "a change of a sibling key")


# ---- plain directory trees ----

def test_plain_tree(env):
    root = env.path("plain")
    model = {"a.txt": "a0\n", "d/b.txt": "b0\n"}
    write_tree(root, model)
    a = start(env, [root])

    def step(new, action):
        n0 = len(a.of("change"))
        action()
        want = canonical_hash(logical(root, new))
        e = wait_change(a, want, since=n0)
        check(e["hash"] == env.hash_of(root), "`hash` disagrees with the model")
        check(len(a.of("change")) == n0 + 1, "more than one change for one edit: %r" % a.of("change")[n0:])
        check_change(e, logical(root, step.model), logical(root, new))
        step.model = new
    step.model = model

    step({"a.txt": "a1\n", "d/b.txt": "b0\n"}, lambda: write(os.path.join(root, "a.txt"), "a1\n"))
    # A new subdirectory tree with a file written right after mkdir: the
    # agent must scan directories it did not watch yet.
    step({"a.txt": "a1\n", "d/b.txt": "b0\n", "n/m/f1": "f1\n"},
         lambda: write(os.path.join(root, "n", "m", "f1"), "f1\n"))
    # A later file in that new directory: its watch is armed.
    step({"a.txt": "a1\n", "d/b.txt": "b0\n", "n/m/f1": "f1\n", "n/m/f2": "f2\n"},
         lambda: write(os.path.join(root, "n", "m", "f2"), "f2\n"))
    step({"a.txt": "a1\n", "n/m/f1": "f1\n", "n/m/f2": "f2\n"},
         lambda: os.unlink(os.path.join(root, "d", "b.txt")))
    step({"a2.txt": "a1\n", "n/m/f1": "f1\n", "n/m/f2": "f2\n"},
         lambda: os.rename(os.path.join(root, "a.txt"), os.path.join(root, "a2.txt")))
    step({"a2.txt": "a1\n"}, lambda: shutil.rmtree(os.path.join(root, "n")))
    # Events without a content change.
    n0 = len(a.of("change"))
    r = env.run(["touch", os.path.join(root, "a2.txt"), os.path.join(root, "d")])
    check(r.returncode == 0, "touch: %r" % r.stderr)
    write(os.path.join(root, "a2.txt"), "a1\n")  # same bytes: MODIFY + CLOSE_WRITE
    os.chmod(os.path.join(root, "a2.txt"), 0o600)
    os.mkdir(os.path.join(root, "empty"))
    assert_no_new_changes(a, n0, "touch, an identical rewrite, chmod and an empty new dir")
    sigterm_exits_zero(a)


def stage(env, name, files):
    """A fully written tree outside the watched paths, to rename into place
    (so a root appears with all its content at once)."""
    d = env.path("stage-" + name)
    write_tree(d, files)
    return d


def test_root_deleted_and_recreated(env):
    root = env.path("plain")
    v1 = {"a.txt": "one\n", "d/b.txt": "bee\n"}
    v2 = {"a.txt": "two\n", "c.txt": "sea\n"}
    write_tree(root, v1)
    a = start(env, [root])
    shutil.rmtree(root)
    e = a.wait_event("root-gone")[0]
    check(e.get("root") == root, "root-gone names %r, want %r" % (e.get("root"), root))
    os.rename(stage(env, "v2", v2), root)
    e = a.wait_event("root-back")[0]
    check(e.get("root") == root, "root-back names %r" % e.get("root"))
    want = canonical_hash(logical(root, v2))
    c = wait_change(a, want)
    check(c["hash"] == env.hash_of(root), "`hash` disagrees with the model")
    check_change(c, logical(root, v1), logical(root, v2))
    a.quiet(QUIET)
    n = len(a.of("change"))
    check(n == 1, "deleting and recreating the root gave %d changes: %r" % (n, a.of("change")))

    # Gone again, back with the SAME content: no change at all.
    shutil.rmtree(root)
    a.wait_event("root-gone", count=2)
    os.rename(stage(env, "v2-again", v2), root)
    a.wait_event("root-back", count=2)
    assert_no_new_changes(a, 1, "recreating the root with the same content")
    # And the re-armed root still sees edits.
    write(os.path.join(root, "c.txt"), "sea2\n")
    c = wait_change(a, canonical_hash(logical(root, dict(v2, **{"c.txt": "sea2\n"}))))
    check_change(c, logical(root, v2), logical(root, dict(v2, **{"c.txt": "sea2\n"})))
    sigterm_exits_zero(a)


def test_root_missing_at_start(env):
    # Two missing levels: the agent waits on the nearest existing ancestor.
    root = env.path("later", "deeper", "vol")
    a = start(env, [root])
    w = a.wait_event("waiting")[0]
    check(w.get("root") == root, "waiting names %r, want %r" % (w.get("root"), root))
    base = a.of("baseline")
    check(len(base) == 1 and base[0].get("hash") == EMPTY_HASH,
          "baseline with a missing root should be the empty hash: %r" % base)
    os.makedirs(env.path("later", "deeper"))
    # The root appears as a complete kubelet volume (written by awsim
    # elsewhere, then renamed into place).
    files = {"a.conf": "a\n", "sub/b": "b\n"}
    staged = env.path("stage-vol")
    os.mkdir(staged)
    env.awsim(staged, files)
    os.rename(staged, root)
    want = canonical_hash(logical(root, files))
    e = wait_change(a, want)
    check(e["hash"] == env.hash_of(root), "`hash` disagrees with the model")
    check_change(e, {}, logical(root, files))
    assert_no_new_changes(a, 1, "the root appearing")
    # It is a real watch now: an AtomicWriter update on it is seen.
    new = {"a.conf": "a2\n"}
    env.awsim(root, new)
    e = wait_change(a, canonical_hash(logical(root, new)))
    check(e["hash"] == env.hash_of(root), "`hash` after the update")
    check_change(e, logical(root, files), logical(root, new))
    sigterm_exits_zero(a)


def test_queue_overflow(env):
    """A real IN_Q_OVERFLOW from the kernel: no seam, no fake. The agent is
    stopped with SIGSTOP so it cannot read its inotify fd; each create+close+
    unlink below queues CREATE, CLOSE_WRITE and DELETE (distinct names, so the
    kernel cannot merge them), more than fs.inotify.max_queued_events in
    total, so the kernel drops the rest, including the one real content
    change, and queues IN_Q_OVERFLOW. Only a rescan can find that change."""
    root = env.path("plain")
    model = {"f.txt": "v1\n", "d/g.txt": "g\n"}
    write_tree(root, model)
    a = start(env, [root])
    with open("/proc/sys/fs/inotify/max_queued_events") as f:
        maxq = int(f.read())
    check(0 < maxq <= 1000000, "max_queued_events=%d is too large for a bounded test" % maxq)
    os.kill(a.pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 120
        for i in range(maxq):  # >= 2 * maxq events queued
            p = os.path.join(root, "t%d" % i)
            os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
            os.unlink(p)
            if time.monotonic() > deadline:
                raise TestFailure("flooding the inotify queue took over 120 s")
        write(os.path.join(root, "f.txt"), "v2\n")
    finally:
        os.kill(a.pid, signal.SIGCONT)
    a.wait_event("overflow", timeout=30)
    new = dict(model, **{"f.txt": "v2\n"})
    want = canonical_hash(logical(root, new))
    e = wait_change(a, want, timeout=30)
    check(e["hash"] == env.hash_of(root), "`hash` disagrees with the model")
    check_change(e, logical(root, model), logical(root, new))
    assert_no_new_changes(a, 1, "the overflow rescan")
    # The watches were re-armed after the overflow.
    write(os.path.join(root, "d", "g.txt"), "g2\n")
    wait_change(a, canonical_hash(logical(root, dict(new, **{"d/g.txt": "g2\n"}))))
    sigterm_exits_zero(a)


def test_awsim_layout(env):
    """The simulator itself produces the AtomicWriter layout the other tests rely on."""
    vol = atomic_volume(env, {"a": "1", "conf/x/y": "2"})
    names = sorted(os.listdir(vol))
    ts = [n for n in names if n.startswith("..") and n not in ("..data",)]
    check(len(ts) == 1 and names == sorted(ts + ["..data", "a", "conf"]), "layout %r" % names)
    check(re.match(r"^\.\.[0-9]{4}(_[0-9]{2}){5}\.[0-9]{1,10}$", ts[0]), "ts dir name %r" % ts[0])
    check(os.readlink(os.path.join(vol, "..data")) == ts[0], "..data target")
    check(os.readlink(os.path.join(vol, "a")) == "..data/a", "key link")
    check(os.readlink(os.path.join(vol, "conf")) == "..data/conf", "dir link")
    check(oct(os.stat(os.path.join(vol, ts[0])).st_mode & 0o7777) == "0o755", "ts dir mode")
    env.awsim(vol, {"b": "3"})
    names = sorted(os.listdir(vol))
    check(len(names) == 3 and "b" in names and "..data" in names, "after update %r" % names)
    r = subprocess.run([env.tool("awsim"), "--dir", vol, "--payload", env.path("nope")],
                       capture_output=True, timeout=30)
    check(r.returncode == 1 and b"nope" in r.stderr, "awsim error exit: %r" % (r,))
