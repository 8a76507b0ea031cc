"""One argv style for every subcommand (issue 17, item 5): run, hash,
inject, webhook, webhook certs, validator, ready, copy-self and sync reject an unknown flag, a flag without its
value and a bad log level with exit status 2 and the same words, and -h and
--help print a usage generated from the subcommand's table, exit 0.
"""
from tests.lib.proc import check

SUBCOMMANDS = (["run"], ["hash"], ["inject"], ["webhook"], ["webhook", "certs"], ["validator"],
               ["ready"], ["copy-self"], ["sync"])
LOGGED = (["run"], ["webhook"], ["webhook", "certs"], ["validator"], ["sync"])  # the ones with --log-level


def run(env, args):
    r = env.run([env.binary] + args, timeout=30)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def test_cli_unknown_flag_and_help_the_same_everywhere(env):
    for sub in SUBCOMMANDS:
        name = " ".join(sub)
        rc, out, err = run(env, sub + ["--bogus=1"])
        check(rc == 2 and "unknown flag --bogus" in err and out == "",
              "%s --bogus=1: exit %d, %r" % (name, rc, err))
        check(err.startswith("reload-agent"), "%s: %r" % (name, err))
        for h in ("-h", "--help"):
            rc, out, err = run(env, sub + [h])
            check(rc == 0 and out.startswith("usage: reload-agent") and err == "",
                  "%s %s: exit %d, %r" % (name, h, rc, out[:80]))
            check("--help" in out, "%s %s does not list --help" % (name, h))


def test_cli_missing_value_the_same_everywhere(env):
    for sub, flag in ((["run"], "--watch"), (["inject"], "--output"), (["webhook"], "--listen"),
                      (["webhook", "certs"], "--secret-name"), (["sync"], "--namespaces")):
        rc, _, err = run(env, sub + [flag])
        check(rc == 2 and ("flag %s needs a value" % flag) in err,
              "%s %s: exit %d, %r" % (" ".join(sub), flag, rc, err))


def test_cli_log_level_one_parser(env):
    """--log-level is judged once, by the names of base/log.c, with one
    wording."""
    for sub in LOGGED:
        rc, _, err = run(env, sub + ["--log-level", "loud"])
        check(rc == 2 and "invalid value for --log-level" in err and
              '"loud": must be one of debug|info|warn|error' in err,
              "%s --log-level loud: exit %d, %r" % (" ".join(sub), rc, err))
        rc, _, err = run(env, sub + ["--log-format", "xml"])
        check(rc == 2 and "invalid value for --log-format" in err and
              '"xml": must be one of text|json' in err,
              "%s --log-format xml: exit %d, %r" % (" ".join(sub), rc, err))
