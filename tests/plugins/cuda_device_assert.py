"""Test plugin (GPU machines only): a real CUDA sticky error. `plugin-cuda-assert-tanh` is torch eager
on CUDA whose tanh also looks up row 2 of a 2-row embedding table on the device: the kernel's bounds
check fails (`CUDA error: device-side assert triggered`), which leaves the process's CUDA context
unusable, so every later CUDA call in it fails too, whichever backend makes it."""

import torch

from fuzzer.ops import get_op


def tanh_with_out_of_range_lookup(xs, ps, attrs):
    table = torch.zeros(2, 1, device=xs[0].device)
    torch.nn.functional.embedding(torch.tensor([2], device=table.device), table).sum().item()  # .item(): raise here
    return get_op("tanh").torch(xs, ps, attrs)


def register(api):
    api.derive_backend("plugin-cuda-assert-tanh", base="torch-eager:cuda:float32", overrides={"tanh": tanh_with_out_of_range_lookup})
