"""`make levels` (scripts/levels.sh): the folder include check against the
level table of docs/architecture.md. It passes on the tree, and on temp
trees (the real table, a few files) it fails on each kind of wrong arrow:
upward, sideways, to a lower folder the row does not name, to a folder the
table does not know; and on a source folder without a row.
"""
import os
import re
import shutil
import subprocess

from tests.lib.proc import check

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCRIPT = os.path.join(TOP, "scripts", "levels.sh")
DOC = os.path.join(TOP, "docs", "architecture.md")
FOLDERS = ["cmd", "run", "webhook", "sync", "inject", "config", "actions", "kube", "net", "watch", "hash",
           "yamldoc", "base"]


def levels(cwd, dirs):
    r = subprocess.run(["sh", SCRIPT, "docs/architecture.md"] + dirs, cwd=cwd,
                       capture_output=True, timeout=60)
    return r.returncode, r.stdout.decode() + r.stderr.decode()


def tree(env, name, files, doc=None):
    """A temp tree with the real table (or doc) and one clean file per
    folder, plus files {path: text}."""
    d = env.path(name)
    os.makedirs(os.path.join(d, "docs"))
    if doc is None:
        shutil.copy(DOC, os.path.join(d, "docs", "architecture.md"))
    else:
        with open(os.path.join(d, "docs", "architecture.md"), "w") as f:
            f.write(doc)
    for f in FOLDERS:
        os.makedirs(os.path.join(d, f))
        with open(os.path.join(d, f, "own.c"), "w") as fh:
            fh.write('#include "%s/own.h"\n#include <stdio.h>\n' % f)
    for p, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(d, p)), exist_ok=True)
        with open(os.path.join(d, p), "w") as fh:
            fh.write(text)
    return d


def test_levels_pass_on_the_tree(env):
    makefile = open(os.path.join(TOP, "Makefile")).read()
    dirs = re.search(r"^SRC_DIRS := (.*)$", makefile, re.M).group(1).split()
    check(sorted(dirs) == sorted(FOLDERS), "SRC_DIRS %s, the test knows %s" % (dirs, FOLDERS))
    rc, out = levels(TOP, dirs)
    check(rc == 0, "make levels fails on the tree: %s" % out)


def test_image_copies_every_source_folder(env):
    """The image builds from SRC_DIRS: each folder is let into the build
    context (.dockerignore) and copied (Dockerfile), or the image does not
    build (sync/ was missed once)."""
    makefile = open(os.path.join(TOP, "Makefile")).read()
    dirs = re.search(r"^SRC_DIRS := (.*)$", makefile, re.M).group(1).split()
    ignore = open(os.path.join(TOP, ".dockerignore")).read().split("\n")
    docker = open(os.path.join(TOP, "Dockerfile")).read()
    for d in dirs:
        check("!%s/" % d in ignore, ".dockerignore keeps %s/ out of the image's build" % d)
        check(re.search(r"^COPY %s/ %s/$" % (d, d), docker, re.M), "the Dockerfile copies no %s/" % d)


def test_levels_fail_on_wrong_arrows(env):
    ok = tree(env, "ok", {"cmd/x.c": '#include "webhook/a.h"\n#include "base/log.h"\n',
                          "inject/x.c": '#include "config/config.h"\n#include "hash/hash.h"\n',
                          "config/x.h": '  #  include "actions/action.h"\n'})
    rc, out = levels(ok, FOLDERS)
    check(rc == 0, "a tree with allowed arrows fails: %s" % out)
    for what, files, want in (
            ("upward", {"base/bad.c": '#include "run/run.h"\n'},
             "base/bad.c:1: base/ includes run/ (level 8 above 0): upward"),
            ("upward in a header", {"kube/bad.h": '\n#include "actions/action.h"\n'},
             "kube/bad.h:2: kube/ includes actions/ (level 4 above 3): upward"),
            ("sideways", {"watch/bad.c": '#include "hash/hash.h"\n'},
             "watch/bad.c:1: watch/ includes hash/ (both level 1): sideways"),
            ("lower but not named", {"config/bad.c": '#include "net/httpc.h"\n'},
             "config/bad.c:1: config/ includes net/: the table lets config/ import only"),
            ("the webhook reaching the YAML code", {"webhook/bad.c": '#include "yamldoc/tree.h"\n'},
             "webhook/bad.c:1: webhook/ includes yamldoc/: the table lets webhook/ import only"),
            ("from a folder that imports nothing", {"hash/bad.c": '#include "base/log.h"\n'},
             "hash/bad.c:1: hash/ includes base/: the table lets hash/ import nothing"),
            ("a folder the table does not know", {"net/bad.c": '#include "newroom/x.h"\n'},
             "net/bad.c:1: net/ includes newroom/: newroom/ is not in the level table")):
        d = tree(env, re.sub(r"\W", "_", what), files)
        rc, out = levels(d, FOLDERS)
        check(rc == 1 and want in out, "%s: exit %d, %s (want %r)" % (what, rc, out, want))


def test_levels_fail_when_table_and_folders_drift(env):
    d = tree(env, "newdir", {"newroom/x.c": '#include "base/log.h"\n'})
    rc, out = levels(d, FOLDERS + ["newroom"])
    check(rc == 1 and "source folder newroom/ has no row" in out, "new folder: %d %s" % (rc, out))
    rc, out = levels(d, [f for f in FOLDERS if f != "net"])
    check(rc == 1 and "net/ has a row but is no source folder" in out, "stale row: %d %s" % (rc, out))
    doc = open(DOC).read().replace("| 3 | `kube/` |", "| 9 | `kube/` |")
    d = tree(env, "upward_row", {}, doc=doc)
    rc, out = levels(d, FOLDERS)
    check(rc == 1 and "actions/ (level 4) may import kube/ (level 9): not below it" in out,
          "a row that allows an upward arrow: %d %s" % (rc, out))
