"""Integration tests of `reload-agent hash`: the binary's output must equal
the independent Python implementation (tests/lib/refhash.py) byte for byte, on
kubelet-layout volumes and awkward trees; coreutils alone must reproduce
the hash from the --list manifest (contract v2); memory must stay bounded
on a 1 GiB file.
"""
import hashlib
import os
import sys

from tests.lib.proc import check

GNU_TIME = "/usr/bin/time"
REFHASH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib", "refhash.py")


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def kubelet_volume(vol, files, ts="..2024_05_01_12_00_00.1234567890"):
    """The AtomicWriter layout: files in a timestamped dir, ..data -> it,
    one top-level link per first path element."""
    for rel, data in files.items():
        write(os.path.join(vol, ts, rel), data)
    os.symlink(ts, os.path.join(vol, "..data"))
    for first in sorted({rel.split("/")[0] for rel in files}):
        os.symlink("..data/" + first, os.path.join(vol, first))


def run_both(env, args):
    """Runs the agent and refhash with the same args; returns both results."""
    a = env.run([env.binary, "hash"] + args)
    r = env.run([sys.executable, REFHASH] + args)
    check(r.returncode == 0, "refhash failed: %s" % r.stderr.decode(errors="replace"))
    check(a.returncode == 0, "hash failed (%d): %s" % (a.returncode, a.stderr.decode(errors="replace")))
    return a, r


def same_as_refhash(env, paths):
    """Checks `hash` and `hash --list` against refhash; returns the --list run."""
    a, r = run_both(env, paths)
    check(a.stdout == r.stdout, "hash %r: agent %r != refhash %r" % (paths, a.stdout, r.stdout))
    check(len(a.stdout) == 65 and a.stdout.endswith(b"\n"), "not one hex line: %r" % a.stdout)
    al, rl = run_both(env, ["--list"] + paths)
    check(al.stdout == rl.stdout, "hash --list %r:\nagent:\n%s\nrefhash:\n%s" %
          (paths, al.stdout.decode(errors="replace"), rl.stdout.decode(errors="replace")))
    check(al.stdout.endswith(a.stdout), "--list must end with the total line")
    return al


def test_hash_kubelet_volumes_match_refhash(env):
    cm = env.path("cm")
    os.makedirs(cm)
    kubelet_volume(cm, {
        "app.conf": "listen 80;\n",
        "conf/app.yaml": "a: 1\n",
        "conf/nested/deep.yaml": "b: 2\n",
        "jvm.options": "-Xmx1g\n",
    })
    sec = env.path("secret")
    os.makedirs(sec)
    kubelet_volume(sec, {"tls.crt": b"-----BEGIN CERTIFICATE-----\n", "tls.key": b"\x00\x01key"})
    al = same_as_refhash(env, [cm, sec])
    lines = al.stdout.decode().splitlines()
    check(len(lines) == 7, "want 6 files + total, got %r" % lines)
    check(lines[0] == "%s  %s/app.conf" % (hashlib.sha256(b"listen 80;\n").hexdigest(), cm),
          "first line: %r" % lines[0])
    check(not any("..data" in l or "..2024" in l for l in lines), "private names leaked: %r" % lines)
    # the same volumes given with trailing slashes hash identically
    check(env.hash_of(cm + "/", sec + "/") == env.hash_of(cm, sec), "trailing slash changed the hash")


def test_hash_awkward_trees_match_refhash(env):
    v = env.path("v")
    write(os.path.join(v, "empty"), b"")
    write(os.path.join(v, "binary.bin"), bytes(range(256)) * 3 + b"\x00\x00")
    write(os.path.join(v, "caf\u00e9.txt"), "unicode name")
    write(os.path.join(v, "\u65e5\u672c/\u8a2d\u5b9a.yaml"), "nested unicode")
    write(os.fsdecode(os.path.join(os.fsencode(v), b"latin1-\xe9")), "not utf-8")
    write(os.path.join(v, "new\nline"), "newline in name")
    write(os.path.join(v, "back\\slash"), "backslash in name")
    write(os.path.join(v, "sub", "deeper", "file"), "deep")
    write(env.path("outside", "secret"), "must not be hashed")
    os.symlink(env.path("outside", "secret"), os.path.join(v, "escape_abs"))
    os.symlink("../outside", os.path.join(v, "escape_dir"))
    os.symlink("sub", os.path.join(v, "sub_link"))
    os.symlink("..", os.path.join(v, "sub", "up"))
    os.symlink("missing", os.path.join(v, "dangling"))
    os.mkfifo(os.path.join(v, "fifo"))
    al = same_as_refhash(env, [v])
    out = al.stdout
    check(b"secret" not in out and b"escape" not in out, "escaping link followed: %r" % out)
    check(b"\\" + hashlib.sha256(b"newline in name").hexdigest().encode() + b"  " +
          v.encode() + b"/new\\nline\n" in out, "newline not escaped sha256sum-style: %r" % out)
    check(b"/back\\\\slash\n" in out, "backslash not escaped: %r" % out)
    err = al.stderr.decode(errors="replace")
    for name in ("escape_abs", "escape_dir", "dangling", "fifo", "sub/up"):
        check(name in err, "no warning for %s in stderr: %s" % (name, err))
    # a single-file root and overlapping roots
    same_as_refhash(env, [os.path.join(v, "sub", "deeper", "file"), v, v + "/sub"])


def test_hash_list_reproduced_by_sha256sum(env):
    """`hash --list DIR | head -n -1 | sha256sum` equals `hash DIR`, and the
    manifest lines are what sha256sum itself prints for those files (odd
    names: backslash, newline, non-UTF-8 bytes, spaces)."""
    v = env.path("odd")
    vb = os.fsencode(v)
    names = [b"back\\slash", b"new\nline", b"latin1-\xe9\xff", b"with  two spaces",
             b" leading space", b"trailing space ", b"both\\and\nboth", b"tab\there",
             b"sub dir/inner \\ file", b"plain"]
    for i, n in enumerate(names):
        write(os.fsdecode(vb + b"/" + n), b"content %d\n" % i)
    kubelet_volume(env.path("kv"), {"key with space": "k\n", "back\\slash.conf": "b\n"})
    for roots in ([v], [env.path("kv")], [v, env.path("kv")]):
        a = env.run([env.binary, "hash"] + roots)
        check(a.returncode == 0, "hash: %s" % a.stderr.decode(errors="replace"))
        pipe = "%s hash --list %s | head -n -1 | sha256sum" % (env.binary, " ".join("'%s'" % r for r in roots))
        r = env.run(["sh", "-c", pipe])
        check(r.returncode == 0, "pipeline failed: %r" % r.stderr)
        check(r.stdout == a.stdout.rstrip(b"\n") + b"  -\n",
              "%s: sha256sum gives %r, hash %r" % (pipe, r.stdout, a.stdout))
    # the manifest is sha256sum's own output over the same files, in bytewise order
    al = env.run([env.binary, "hash", "--list", v])
    paths = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(vb) for f in fs)
    s = env.run(["sha256sum", "--"] + paths)
    check(s.returncode == 0, "sha256sum: %r" % s.stderr)
    check(al.stdout.rsplit(b"\n", 2)[0] + b"\n" == s.stdout,
          "--list:\n%r\nsha256sum:\n%r" % (al.stdout, s.stdout))
    check(s.stdout.count(b"\n\\") + s.stdout.startswith(b"\\") == 4, "escaped lines: %r" % s.stdout)
    same_as_refhash(env, [v, env.path("kv")])


def test_hash_cli_errors(env):
    r = env.run([env.binary, "hash", env.path("missing")])
    check(r.returncode == 1, "missing path: exit %d" % r.returncode)
    err = r.stderr.decode(errors="replace")
    check("missing" in err and "No such file or directory" in err, "error text: %s" % err)
    check(r.stdout == b"", "no hash on error: %r" % r.stdout)
    r = env.run([env.binary, "hash"])
    check(r.returncode == 2 and b"usage" in r.stderr, "no PATH: %d %r" % (r.returncode, r.stderr))
    r = env.run([env.binary, "hash", "--bogus", env.tmp])
    check(r.returncode == 2 and b"--bogus" in r.stderr, "bad option: %d %r" % (r.returncode, r.stderr))
    r = env.run([env.binary, "hash", "--help"])
    check(r.returncode == 0 and r.stdout.startswith(b"usage: reload-agent hash"), "help: %r" % r.stdout)
    # unreadable file: as root, drop to nobody so permissions apply
    os.chmod(env.tmp, 0o755)
    write(env.path("v", "locked"), "x")
    os.chmod(env.path("v", "locked"), 0)
    kw = {"user": 65534, "group": 65534, "extra_groups": []} if os.geteuid() == 0 else {}
    r = env.run([env.binary, "hash", env.path("v")], **kw)
    err = r.stderr.decode(errors="replace")
    check(r.returncode == 1, "unreadable: exit %d (%s)" % (r.returncode, err))
    check(env.path("v", "locked") in err and "Permission denied" in err, "unreadable text: %s" % err)


def test_hash_cli_fd_limit_names_the_limit(env):
    """Issue 9 F13: at the fd limit the error carries EMFILE (not the errno of
    a later call) and says which limit was reached."""
    import resource
    write(env.path("v", "a", "b", "f"), "x")

    def low_limit():  # 0-2 and one spare: the walk runs out below the root
        resource.setrlimit(resource.RLIMIT_NOFILE, (4, 4))

    r = env.run([env.binary, "hash", env.path("v")], preexec_fn=low_limit)
    err = r.stderr.decode(errors="replace")
    check(r.returncode == 1 and r.stdout == b"", "fd limit: exit %d, out %r" % (r.returncode, r.stdout))
    check("too many open files in this process (RLIMIT_NOFILE)" in err, "fd limit text: %s" % err)
    check("opendir" in err and "No such file" not in err, "fd limit op: %s" % err)


def run_measured(env, args, timeout=300):
    """Runs args under GNU time; returns (exit code, stdout, stderr without
    time's line, peak RSS in KiB). The child's own ru_maxrss would include
    the Python parent's pages it was forked from, so time (a small process)
    does the fork."""
    check(os.path.exists(GNU_TIME), "%s is missing (Debian package 'time')" % GNU_TIME)
    r = env.run([GNU_TIME, "-f", "maxrss=%M"] + args, timeout=timeout)
    err = r.stderr.rstrip(b"\n").split(b"\n")
    check(err[-1].startswith(b"maxrss="), "no time output: %r" % r.stderr)
    return r.returncode, r.stdout, b"\n".join(err[:-1]), int(err[-1][7:])


def test_hash_1gib_sparse_file_bounded_memory(env):
    v = env.path("v")
    os.makedirs(v)
    with open(os.path.join(v, "big.img"), "wb") as f:
        f.truncate(1 << 30)
    write(os.path.join(v, "small"), "tail")
    rc, out, err, maxrss = run_measured(env, [env.binary, "hash", "--list", v])
    check(rc == 0, "hash failed (%d): %s" % (rc, err.decode(errors="replace")))
    check(maxrss < 16 * 1024, "peak RSS %d KiB, want < 16 MiB" % maxrss)
    r = env.run([sys.executable, REFHASH, "--list", v], timeout=300)
    check(r.returncode == 0 and out == r.stdout, "1 GiB: agent %r != refhash %r" % (out, r.stdout))
    zeros = hashlib.sha256()
    block = bytes(1 << 20)
    for _ in range(1 << 10):
        zeros.update(block)
    check(out.startswith(zeros.hexdigest().encode() + b"  " + v.encode() + b"/big.img\n"),
          "per-file digest of 1 GiB of zeros: %r" % out)
