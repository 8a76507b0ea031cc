"""Secrets Store CSI volumes (issue 29 item 3, docs/csi-secrets.md): the
real agent on a volume written exactly as the secrets-store CSI driver
writes a rotation (build/tools/awsim --csi: the driver's WritePayloads on
its AtomicWriter vendored from kubernetes v1.20.6, user-visible links made
before the ..data switch). No driver runs here: the writer is reproduced
syscall for syscall, and these tests say so.

What must hold: every rotation is exactly one change and one action, the
action always sees one rotation's files (never half of one), a rotation
that brings the same content writes nothing and changes nothing, and files
a provider wrote itself (before the driver wrote through its writer) are
replaced with the last change the final content."""
import os

from tests.lib.agent import lines_of, start
from tests.lib.proc import check

QUIET = 1.0  # seconds of silence after which "nothing more happens" is asserted


def secrets(n, extra=None):
    """A SecretProviderClass's objects at rotation n: each file names n."""
    files = {"db-user": "user-%d\n" % n, "db-password": "pass-%d\n" % n,
             "tls/tls.crt": "cert-%d\n" % n}
    files.update(extra or {})
    return files


def snapshot_command(env, vol, out):
    """An exec action that reads every visible file of the volume (as the
    app would at its reload) and appends one line: path=content ..."""
    script = env.path("snapshot.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\ncd %s || exit 1\nline=\n"
                "for p in $(find -L . -path './..*' -prune -o -type f -print | LC_ALL=C sort); do\n"
                "  line=\"$line $p=$(cat $p)\"\ndone\necho \"$line\" >> %s\n" % (vol, out))
    os.chmod(script, 0o755)
    return script


def rotate(env, vol, files, *opts):
    env.awsim(vol, files, "--csi", *opts)
    return env.hash_of(vol)


def test_rotation_is_one_complete_swap(env):
    """Rotations that change, add and remove keys (a new top-level
    directory too), written with pauses after each late step so the agent
    hashes every intermediate state: one change and one action each, and
    the action reads exactly the rotation's files."""
    out = env.path("snapshots")
    vol = env.path("vol")
    os.mkdir(vol)
    rotate(env, vol, secrets(0))
    a = start(env, vol, "--action", "exec", "--exec-command", snapshot_command(env, vol, out))
    states = [secrets(1), secrets(2, {"api-key": "key-2\n"}), {"db-user": "user-3\n"},
              secrets(4, {"ca/ca.crt": "ca-4\n"})]
    want_hashes = []
    for i, files in enumerate(states):
        h = rotate(env, vol, files, "--pause-ms", "150", "--seed", str(i))
        want_hashes.append(h)
        a.wait_match("action", 10.0, result="success", hash=h)
    a.quiet(QUIET)
    changes = [e["hash"] for e in a.of("change")]
    check(changes == want_hashes, "changes %r, want one per rotation %r" % (changes, want_hashes))
    acts = [e["hash"] for e in a.of("action")]
    check(acts == want_hashes, "actions %r, want one per rotation %r" % (acts, want_hashes))
    snaps = lines_of(out)
    check(len(snaps) == len(states), "%d snapshots, want %d" % (len(snaps), len(states)))
    for snap, files in zip(snaps, states):
        want = " ".join("./%s=%s" % (k, v.strip()) for k, v in sorted(files.items()))
        check(snap.strip() == want, "the action read %r, the rotation wrote %r" % (snap, want))


def test_same_content_writes_nothing(env):
    """The driver's rotation poll finds the same secrets: its writer
    returns before writing (step 4), nothing changes on disk, no event."""
    vol = env.path("vol")
    os.mkdir(vol)
    h0 = rotate(env, vol, secrets(0))
    before = sorted(os.listdir(vol))
    a = start(env, vol, "--action", "none")
    for i in range(3):
        check(rotate(env, vol, secrets(0), "--seed", str(i)) == h0, "same content, other hash")
    check(sorted(os.listdir(vol)) == before, "a same-content rotation changed the volume's entries")
    a.quiet(QUIET)
    check(a.of("change") == [], "changes for same-content rotations: %r" % a.of("change"))


def test_provider_written_files_replaced(env):
    """Files a provider wrote itself into the mount (plain files, before
    the driver wrote through its writer) are removed by the first write
    (cleanupProviderFiles): the last change is the final content."""
    vol = env.path("vol")
    os.mkdir(vol)
    for k, v in {"db-user": "old-user\n", "db-password": "old-pass\n"}.items():
        with open(os.path.join(vol, k), "w") as f:
            f.write(v)
    a = start(env, vol, "--action", "none")
    h = rotate(env, vol, secrets(1))
    a.wait_match("change", 10.0, hash=h)
    a.quiet(QUIET)
    check(a.of("change")[-1]["hash"] == h, "the last change is not the final content")
    check(os.path.islink(os.path.join(vol, "db-user")), "db-user is not the writer's link")
