"""Seed bug 1: layer_norm whose statistics are taken over *memory order*, not logical dims.

Right for contiguous inputs, wrong after a transpose/permute (a non-contiguous view),
like the fused Burn kernel that computed mean/var over the wrong memory order.
"""

import math

from fuzzer.canaries import derive_on_every_device


def layer_norm_in_memory_order(xs, ps, attrs):
    import torch

    x = xs[0]
    row = math.prod(attrs["normalized_shape"])
    # Walk the tensor's storage in memory order (dense views only, as after transpose/permute).
    dense_order = sorted(range(x.dim()), key=lambda d: -x.stride(d))
    if not x.permute(dense_order).is_contiguous():
        x = x.contiguous()
    memory = torch.as_strided(x, (x.numel() // row, row), (row, 1), x.storage_offset())
    mean = memory.mean(dim=1, keepdim=True)
    var = memory.var(dim=1, unbiased=False, keepdim=True)
    normalized = ((memory - mean) / torch.sqrt(var + attrs["eps"])).reshape(-1)
    out = torch.as_strided(normalized, x.shape, x.stride())
    if attrs["affine"]:
        out = out * ps["weight"] + ps["bias"]
    return out


def register(api):
    derive_on_every_device(api, "canary-layout-layernorm", {"layer_norm": layer_norm_in_memory_order})
