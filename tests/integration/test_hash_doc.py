"""docs/hash.md is the content-hash contract, and its worked example ("An
example") must be what the program prints: the example's commands run here
in a fresh directory, with `reload-agent` the binary under test, and each
command's output must equal the lines the page shows under it, byte for
byte; tests/refhash.py, the independent reference, must print the same.
"""
import os
import re
import sys

from lib import check

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DOC = os.path.join(TOP, "docs", "hash.md")
REFHASH = os.path.join(TOP, "tests", "refhash.py")


def example(path):
    """[(command, expected output)] of the indented block under "### An example"."""
    text = open(path, encoding="utf-8").read()
    m = re.search(r"^### An example\n(.*?)(?=^#)", text, re.M | re.S)
    check(m is not None, "%s has no section \"### An example\"" % path)
    steps = []
    for line in m.group(1).split("\n"):
        if not line.startswith("    "):
            continue
        line = line[4:]
        if line.startswith("$ "):
            steps.append([line[2:], ""])
        else:
            check(steps, "output before the first command: %r" % line)
            steps[-1][1] += line + "\n"
    check(len(steps) >= 3, "the example holds %d commands, expected at least 3" % len(steps))
    return steps


def test_hash_doc_example_is_what_the_program_prints(env):
    bindir = env.path("bin")
    os.makedirs(bindir)
    os.symlink(env.binary, os.path.join(bindir, "reload-agent"))
    os.makedirs(env.path("config"))
    path = bindir + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin")
    listed = None
    for cmd, want in example(DOC):
        r = env.run(["sh", "-c", cmd], env=dict(os.environ, PATH=path, LC_ALL="C"))
        check(r.returncode == 0, "%r failed: %s" % (cmd, r.stderr.decode(errors="replace")))
        got = r.stdout.decode()
        check(got == want, "docs/hash.md shows for %r:\n%s\nthe program prints:\n%s" % (cmd, want, got))
        if cmd.startswith("reload-agent hash --list"):
            listed = (cmd.split()[3:], got)
    check(listed is not None, "the example never runs reload-agent hash --list")
    r = env.run([sys.executable, REFHASH, "--list"] + listed[0])
    check(r.returncode == 0 and r.stdout.decode() == listed[1],
          "tests/refhash.py disagrees with docs/hash.md: %s" % r.stdout.decode())
