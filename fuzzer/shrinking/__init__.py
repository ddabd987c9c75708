"""Shrinking a finding to a minimal case."""
