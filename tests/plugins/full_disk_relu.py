"""Test plugin: a relu kernel that writes a cache file on a full disk (Linux's /dev/full refuses every
write with ENOSPC, as a full disk does), as torch.compile writes its kernels, before it computes."""

import torch


def relu_caching(xs, ps, attrs):
    with open("/dev/full", "w") as cache:
        cache.write("a compiled kernel")
    return torch.relu(xs[0])


def register(api):
    api.derive_backend("plugin-full-disk-relu", base="torch-eager:cpu:float32", overrides={"relu": relu_caching})
