"""Test plugin: a relu whose worker is killed with SIGKILL the first time it runs, as the OOM killer, a
scheduler or a user's `kill -9` would, and that returns at once after. The first time is remembered
by the file MARKER, which the test removes before and after it runs."""

import os
import signal
import tempfile
from pathlib import Path

MARKER = Path(tempfile.gettempdir()) / f"fuzz-test-sigkill-once-relu-{os.getuid()}"


def relu_sigkill_once(xs, ps, attrs):
    import torch

    if not MARKER.exists():
        MARKER.touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return torch.relu(xs[0])


def register(api):
    api.derive_backend("plugin-sigkill-once-relu", base="torch-eager:cpu:float32", overrides={"relu": relu_sigkill_once})
