"""`make fnlen` (scripts/fnlen.sh): no function of the source folders is 80
lines or longer. It passes on the tree and measures as ctags does (the
line of the name to the closing brace); on temp trees it fails on a
function of 80 lines, naming file, line and function, and passes one of 79,
one-line functions and braces that open a table, not a body.
"""
import os
import re
import subprocess

from tests.lib.proc import check

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCRIPT = os.path.join(TOP, "scripts", "fnlen.sh")


def fnlen(cwd, dirs):
    r = subprocess.run(["sh", SCRIPT] + dirs, cwd=cwd, capture_output=True, timeout=60)
    return r.returncode, r.stdout.decode() + r.stderr.decode()


def function(name, lines, sig="static int %s(int a,\n               int b)"):
    """A function of exactly lines lines, name line to closing brace."""
    head = (sig % name).split("\n")
    body = ["    a++;"] * (lines - len(head) - 3)
    return "\n".join(head + ["{"] + body + ["    return a + b;", "}"]) + "\n"


def test_fnlen_passes_on_the_tree(env):
    makefile = open(os.path.join(TOP, "Makefile")).read()
    dirs = re.search(r"^SRC_DIRS := (.*)$", makefile, re.M).group(1).split()
    rc, out = fnlen(TOP, dirs)
    check(rc == 0 and re.search(r"fnlen: \d+ functions, none over 79 lines", out), "make fnlen: %s" % out)


def test_fnlen_fails_on_80_lines(env):
    d = env.path("fn")
    os.makedirs(os.path.join(d, "a"))
    os.makedirs(os.path.join(d, "b"))
    with open(os.path.join(d, "a", "x.c"), "w") as f:
        f.write("/* a table opens at column 0 too, not alone */\nstatic const int T[] = {\n    1,\n};\n\n")
        f.write("int one(void) { return 1; }\n\n")
        f.write(function("ok79", 79) + "\n" + function("long80", 80))
    with open(os.path.join(d, "b", "y.c"), "w") as f:
        f.write(function("fine", 10, "void\n%s(int a, int b)"))
    rc, out = fnlen(d, ["a", "b"])
    check(rc == 1, "exit %d: %s" % (rc, out))
    want = "a/x.c:%d: long80 is 80 lines" % (6 + 1 + 79 + 1 + 1)
    check(want in out, "no %r in: %s" % (want, out))
    check("ok79" not in out and "fine" not in out and "one" not in out, "only long80 is reported: %s" % out)
    with open(os.path.join(d, "a", "x.c"), "w") as f:
        f.write(function("ok79", 79))
    rc, out = fnlen(d, ["a", "b"])
    check(rc == 0 and "the longest: a/x.c:1 ok79 (79)" in out, "exit %d: %s" % (rc, out))
