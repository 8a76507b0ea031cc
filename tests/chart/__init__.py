"""The Helm chart check of make chart (check.py)."""
