"""Test plugin: a relu kernel that gives nan for every positive entry, so its findings carry an
infinite error (`nan-inf`: max_error inf), which every JSON the fuzzer writes must hold in a form
strict parsers accept."""

import torch


def relu_nan(xs, ps, attrs):
    x = xs[0]
    return torch.where(x > 0, torch.full_like(x, float("nan")), torch.zeros_like(x))


def register(api):
    api.derive_backend("plugin-nan-relu", base="torch-eager:cpu:float32", overrides={"relu": relu_nan})
