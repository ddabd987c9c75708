"""Seed bug 2: dropout stays active at inference (the training flag is ignored).

Caught by the nondeterminism gate: the eval-mode result is wrong *and* changes between runs.
"""


def dropout_always_training(xs, ps, attrs):
    import torch

    return torch.nn.functional.dropout(xs[0], p=attrs["p"], training=True)


def register(api):
    api.derive_backend("canary-dropout-in-eval", base="torch-eager:cpu:float32", overrides={"dropout": dropout_always_training})
