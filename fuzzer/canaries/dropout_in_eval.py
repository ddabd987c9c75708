"""Seed bug 2: dropout stays active at inference (the training flag is ignored).

Caught by the nondeterminism gate: the eval-mode result is wrong *and* changes between runs.
"""

from fuzzer.canaries import derive_on_every_device


def dropout_always_training(xs, ps, attrs):
    import torch

    return torch.nn.functional.dropout(xs[0], p=attrs["p"], training=True)


def register(api):
    derive_on_every_device(api, "canary-dropout-in-eval", {"dropout": dropout_always_training})
