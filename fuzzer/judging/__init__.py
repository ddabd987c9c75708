"""Judging a case's runs: the reference evaluation, each backend's verdict, the gates, the culprit."""
