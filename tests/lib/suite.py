"""What the runners share: finding the tests of a suite. A test is a
function named test_* of a module test_*.py of the suite's package, and is
named "module::function"; -k selects by substring of that name."""
import importlib
import os


def discover(package, sub=""):
    """[(name, function)] of the tests of package (e.g. "tests.e2e") whose
    name holds sub, sorted by module, then function."""
    here = os.path.dirname(importlib.import_module(package).__file__)
    tests = []
    for fn in sorted(os.listdir(here)):
        if not (fn.startswith("test_") and fn.endswith(".py")):
            continue
        mod = importlib.import_module("%s.%s" % (package, fn[:-3]))
        for name in sorted(dir(mod)):
            f = getattr(mod, name)
            if name.startswith("test_") and callable(f):
                full = "%s::%s" % (fn[:-3], name)
                if sub in full:
                    tests.append((full, f))
    return tests
