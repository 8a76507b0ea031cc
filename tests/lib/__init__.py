"""The Python test library shared by every suite and bench (README.md)."""
