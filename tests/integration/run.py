#!/usr/bin/env python3
"""Integration test runner: runs the real binary on real directories.

Discovers tests/integration/test_*.py; every function named test_* taking one
argument (a tests.lib.agent.Env) is a test. Each test gets a fresh temporary directory
and the processes it starts through the Env are stopped (by PID) afterwards.
Prints one line per test and closes with "N passed, N failed".
Usage (from the repository's root):
  python3 -m tests.integration.run --binary build/reload-agent --tools build/tools [-k SUBSTRING]
"""
import argparse
import os
import sys
import time
import traceback

if not __package__:
    sys.exit("run.py is a module: python3 -m tests.integration.run (from the repository's root)")

from tests.lib.agent import Env  # noqa: E402
from tests.lib.proc import TestFailure  # noqa: E402
from tests.lib.suite import discover  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--tools", required=True)
    ap.add_argument("-k", default="")
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    tools = os.path.abspath(a.tools)
    tests = discover(__package__, a.k)
    passed = failed = 0
    for full, fn in tests:
        env = Env(binary, tools, full)
        t0 = time.monotonic()
        try:
            fn(env)
            crashes = env.crashed_agents()
            if crashes:
                raise TestFailure("; ".join(crashes))
            ok = True
        except Exception:
            ok = False
            traceback.print_exc()
            env.dump_logs()
        finally:
            env.cleanup()
        dt = time.monotonic() - t0
        print("%s %s (%.1fs)" % ("PASS" if ok else "FAIL", full, dt), flush=True)
        if ok:
            passed += 1
        else:
            failed += 1
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(0 if failed == 0 and passed > 0 else 1)


if __name__ == "__main__":
    main()
