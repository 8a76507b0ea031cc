#!/usr/bin/env python3
"""Reference implementation of the content hash of docs/hash.md ("The
contract"), written from that text alone, as an independent oracle for the C
code: `python3 tests/refhash.py [--list] PATH...` prints what
`reload-agent hash` must print.

Rules: for each root R, walk the user-visible tree, skipping top-level names
that start with ".."; follow a symlink only if its resolved target stays
inside R's resolved path; recurse into directories, hash regular files, skip
the rest. Logical path = R (trailing "/" removed) + "/" + relative path; a
root that is a file is its own logical path. Sort all files bytewise, drop
exact duplicates, and write one manifest line per file as GNU sha256sum
prints it ("<content sha256 hex>  <path>\n"; a path holding a backslash or
a newline has them written as "\\" and "\n", and its line starts with
"\"). The hash (contract v2) is the SHA-256 of the manifest text. The
agent's documented limits are mirrored: a directory
already on the current walk path is not re-entered, and directories more
than 256 levels below a root are not entered.
"""
import hashlib
import os
import stat
import sys

MAX_DEPTH = 256
CHUNK = 1 << 20


def warn(msg, path):
    sys.stderr.write("refhash: %s: %r\n" % (msg, path))


def walk_root(root, out):
    """Appends (logical path, open path) pairs of root (bytes) to out."""
    logical = root.rstrip(b"/")
    st = os.stat(root)  # follows a symlinked root; a missing root raises
    if stat.S_ISREG(st.st_mode):
        out.append((logical, root))
        return
    if not stat.S_ISDIR(st.st_mode):
        warn("not a regular file or directory", root)
        return
    base = os.path.realpath(root)

    def inside(p):
        return base == b"/" or p == base or p.startswith(base + b"/")

    def walk(dirpath, lpath, depth, seen):
        if depth > MAX_DEPTH:
            warn("too deep", lpath)
            return
        dst = os.stat(dirpath)
        key = (dst.st_dev, dst.st_ino)
        if key in seen:
            warn("directory cycle", lpath)
            return
        seen = seen | {key}
        with os.scandir(dirpath) as it:
            entries = list(it)
        for e in entries:
            name = e.name
            if depth == 0 and name.startswith(b".."):
                continue
            child = os.path.join(dirpath, name)
            clog = lpath + b"/" + name
            if e.is_symlink():
                try:
                    tst = os.stat(child)
                except OSError as ex:
                    warn("unresolvable symlink (%s)" % ex.strerror, clog)
                    continue
                target = os.path.realpath(child)
                if not inside(target):
                    warn("symlink escapes its root", clog)
                    continue
                if stat.S_ISDIR(tst.st_mode):
                    walk(target, clog, depth + 1, seen)
                elif stat.S_ISREG(tst.st_mode):
                    out.append((clog, target))
                else:
                    warn("special file", clog)
            elif e.is_dir(follow_symlinks=False):
                walk(child, clog, depth + 1, seen)
            elif e.is_file(follow_symlinks=False):
                out.append((clog, child))
            else:
                warn("special file", clog)

    walk(root, logical, 0, frozenset())


def content_digest(fpath):
    """SHA-256 hex of a file's content; the file must not change size."""
    with open(fpath, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        h = hashlib.sha256()
        got = 0
        while True:
            b = f.read(CHUNK)
            if not b:
                break
            got += len(b)
            h.update(b)
        if got != size:
            raise OSError(0, "changed while being read", fpath)
    return h.hexdigest()


def escape_line(hexd, lpath):
    """sha256sum-style line for a logical path (bytes)."""
    if b"\\" in lpath or b"\n" in lpath:
        p = lpath.replace(b"\\", b"\\\\").replace(b"\n", b"\\n")
        return b"\\" + hexd.encode() + b"  " + p + b"\n"
    return hexd.encode() + b"  " + lpath + b"\n"


def compute(roots):
    """Returns (total hex, [(content hex, logical path bytes)])."""
    files = []
    for r in roots:
        walk_root(r, files)
    files.sort(key=lambda f: f[0])
    listing = []
    last = None
    for lpath, fpath in files:
        if lpath == last:
            continue
        last = lpath
        listing.append((content_digest(fpath), lpath))
    manifest = b"".join(escape_line(hexd, lpath) for hexd, lpath in listing)
    return hashlib.sha256(manifest).hexdigest(), listing


def main(argv):
    args = argv[1:]
    listing = False
    if args and args[0] == "--list":
        listing = True
        args = args[1:]
    if not args:
        sys.stderr.write("usage: refhash.py [--list] PATH...\n")
        return 2
    roots = [os.fsencode(a) for a in args]
    try:
        total, files = compute(roots)
    except OSError as ex:
        sys.stderr.write("refhash: %s: %s\n" % (ex.filename, ex.strerror))
        return 1
    out = sys.stdout.buffer
    if listing:
        for hexd, lpath in files:
            out.write(escape_line(hexd, lpath))
    out.write(total.encode() + b"\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
