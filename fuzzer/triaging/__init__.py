"""Triage of findings: buckets, known bugs, where a bug lives, which release or pass broke it."""
