"""Seed bug 4: a tiled matmul that only writes complete 8-wide output tiles.

Columns past the last full tile stay zero, so any N < 8 returns all zeros (the
Burn/cubecl "tiling2d" symptom: identical scores for every class) and other N
not a multiple of 8 lose their tail. Overrides both matmul and linear.
"""

from fuzzer.canaries import derive_on_every_device

TILE = 8


def _tiled(a, b):
    import torch

    out = torch.matmul(a, b)
    full = (b.shape[-1] // TILE) * TILE
    out[..., full:] = 0  # the bug: the partial last tile is never written
    return out


def tiled_matmul(xs, ps, attrs):
    return _tiled(xs[0], xs[1])


def tiled_linear(xs, ps, attrs):
    out = _tiled(xs[0], ps["weight"].T)
    return out + ps["bias"] if attrs["bias"] else out


def register(api):
    derive_on_every_device(api, "canary-tiled-matmul-zeros", {"matmul": tiled_matmul, "linear": tiled_linear})
