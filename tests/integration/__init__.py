"""The integration suite: the real binary, no cluster (run.py)."""
