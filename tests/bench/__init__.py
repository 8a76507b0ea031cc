"""The local benches of make bench: no cluster, figures against a baseline."""
