"""Shared fixtures. Everything here is real: real torch, jax, sqlite files; no mocks."""

import os

import pytest

from fuzzer.plugins import canary_names, load_plugins

# Single-threaded math keeps CI (2 cores, parallel workers) predictable.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def canaries():
    """Every shipped canary registered in this process; returns their backend names."""
    load_plugins(canary_names())
    return {name: f"canary-{name}" for name in canary_names()}


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` skip cleanly on machines without CUDA (CI has none)."""
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
