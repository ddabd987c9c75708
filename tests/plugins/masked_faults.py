"""Test plugin: a fault that a later op of the graph can hide, which only judging every node of an eager
backend finds there (fuzzer/judging/unmasked.py).

- `fault-masked-relu`: torch eager's relu, leaky on finite negative inputs (x / 4 instead of 0), as a
  kernel whose negative branch lost its zeroing would be. A later clamp with a bound >= 0, a relu, or a
  huge value in the same sum hides it.
"""

import torch


def leaky_relu(xs, ps, attrs):
    (x,) = xs
    return torch.where((x < 0) & torch.isfinite(x), x / 4, torch.relu(x))


def register(api):
    api.derive_backend("fault-masked-relu", base="torch-eager:cpu:float32", overrides={"relu": leaky_relu})
