"""A plugin that aborts its process while being imported (tests/test_exit_contract.py)."""
import os

os.abort()


def register(api):
    pass
