"""A plugin whose register(api) never returns (tests/test_exit_contract.py)."""
import time


def register(api):
    time.sleep(3600)
