"""Reproducers and reports for upstream: standalone scripts, the minimal one, the issue text."""
