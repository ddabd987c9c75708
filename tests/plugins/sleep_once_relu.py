"""Test plugin: a relu that hangs the first time it runs and returns at once after (a case that is
slow only on a loaded machine). The first time is remembered by the file MARKER, which the test
removes before and after it runs (an environment variable would not reach workers forked from a
template made before the test set it)."""

import os
import tempfile
import time
from pathlib import Path

MARKER = Path(tempfile.gettempdir()) / f"fuzz-test-sleep-once-relu-{os.getuid()}"


def relu_sleep_once(xs, ps, attrs):
    import torch

    if not MARKER.exists():
        MARKER.touch()
        time.sleep(3600)
    return torch.relu(xs[0])


def register(api):
    api.derive_backend("plugin-sleep-once-relu", base="torch-eager:cpu:float32", overrides={"relu": relu_sleep_once})
