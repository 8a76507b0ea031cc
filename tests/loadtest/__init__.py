"""The load suite and the benches that need the real cluster (run.py)."""
