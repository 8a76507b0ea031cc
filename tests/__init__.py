"""The test tree as one package: every Python suite, bench and tool runs as a
module from the repository's root (`python3 -m tests.integration.run`) and
imports the shared library as `tests.lib` (tests/lib/README.md)."""
