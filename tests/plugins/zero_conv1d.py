"""Test plugin: a float16 conv1d that answers at once with zeros (wrong, so the oracle's honest models,
which it computes only for a verdict the cheap bound does not settle, run after this backend)."""


def conv1d_zeros(xs, ps, attrs):
    import torch

    x, weight = xs[0], ps["weight"]
    stride, dilation, kernel = attrs["stride"][0], attrs["dilation"][0], weight.shape[-1]
    length = (x.shape[-1] + 2 * attrs["padding"][0] - dilation * (kernel - 1) - 1) // stride + 1
    return torch.zeros((x.shape[0], weight.shape[0], length), dtype=x.dtype)


def register(api):
    api.derive_backend("plugin-zero-conv1d", base="torch-eager:cpu:float16", overrides={"conv1d": conv1d_zeros})
