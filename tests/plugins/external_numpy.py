"""External-process backends from a plugin file: docs/examples/numpy_runner.py, a buggy run of it, and a crashing command."""

import sys
from pathlib import Path

RUNNER = str(Path(__file__).resolve().parents[2] / "docs" / "examples" / "numpy_runner.py")
OPS = ["relu", "tanh", "sigmoid", "add", "mul", "matmul", "linear", "transpose"]


def register(api):
    api.add_external_backend("numpy-runner", [sys.executable, RUNNER], ops=OPS)
    api.add_external_backend("numpy-runner-buggy", [sys.executable, RUNNER, "--bug"], ops=OPS)
    api.add_external_backend("always-fails", [sys.executable, "-c", "import sys; sys.exit('segfault-like failure')"], ops=OPS)
