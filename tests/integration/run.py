#!/usr/bin/env python3
"""Integration test runner: runs the real binary on real directories.

Discovers tests/integration/test_*.py; every function named test_* taking one
argument (an lib.Env) is a test. Each test gets a fresh temporary directory
and the processes it starts through the Env are stopped (by PID) afterwards.
Prints one line per test and closes with "N passed, N failed".
Usage: run.py --binary build/reload-agent --tools build/tools [-k SUBSTRING]
"""
import argparse
import importlib.util
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import lib  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--tools", required=True)
    ap.add_argument("-k", default="")
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    tools = os.path.abspath(a.tools)
    tests = []
    for fn in sorted(os.listdir(HERE)):
        if not (fn.startswith("test_") and fn.endswith(".py")):
            continue
        spec = importlib.util.spec_from_file_location(fn[:-3], os.path.join(HERE, fn))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for name in sorted(dir(mod)):
            if name.startswith("test_") and callable(getattr(mod, name)):
                full = "%s::%s" % (fn[:-3], name)
                if a.k in full:
                    tests.append((full, getattr(mod, name)))
    passed = failed = 0
    for full, fn in tests:
        env = lib.Env(binary, tools, full)
        t0 = time.monotonic()
        try:
            fn(env)
            crashes = env.crashed_agents()
            if crashes:
                raise lib.TestFailure("; ".join(crashes))
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
