"""Versions of everything that can change a result, recorded with every campaign and finding."""

from __future__ import annotations

import platform
import sys
from importlib import metadata

import numpy as np

import fuzzer


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def versions(backends=()) -> dict:
    """This process's versions; backends running in other Python environments add theirs
    under "environments", so a cross-version finding records both sides."""
    info = {
        "fuzzer": fuzzer.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "numpy": np.__version__,
        "torch": _package_version("torch"),
        "jax": _package_version("jax"),
        "jaxlib": _package_version("jaxlib"),
        "cuda": None,
        "device": platform.processor() or platform.machine(),
    }
    try:
        import torch

        info["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            info["device"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    others = dict(filter(None, (backend.other_environment() for backend in backends)))
    if others:
        info["environments"] = others
    return info
