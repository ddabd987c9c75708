"""Test plugin: a layer_norm kernel that raises for some shapes, naming the shape in its error.

A frequent crash of one cause: every graph with a layer_norm over an odd-sized last dim hits it,
at every rank ("(2, 3)", "(2, 4, 3)"), so it is one bucket that a campaign finds again and again.
"""

import torch


class KernelBug(RuntimeError):
    pass


def layer_norm_odd_rows_raise(xs, ps, attrs):
    x = xs[0]
    if x.shape[-1] % 2:
        raise KernelBug(f"layer_norm kernel has no tile for input of shape {tuple(x.shape)}")
    return torch.nn.functional.layer_norm(x, attrs["normalized_shape"], ps.get("weight"), ps.get("bias"), attrs["eps"])


def register(api):
    api.derive_backend("plugin-raise-layernorm", base="torch-eager:cpu:float32",
                       overrides={"layer_norm": layer_norm_odd_rows_raise})
