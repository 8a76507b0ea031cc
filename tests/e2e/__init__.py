"""The end-to-end suite on the real cluster (run.py)."""
