"""Test plugin: a fault that lives only in one rarely drawn region key (fuzzer/drawing/regions.py), so a
test can show that steering finds what the plain mix does not on the same seed and budget.

- `fault-long-softmax`: softmax is off by 1e-3 once each row it normalizes holds more than 4096
  elements (a blocked-reduction path taken past a size threshold): the key `softmax:extent>4096`,
  which needs the large-op regime with a large dim on the softmax's own dim.
"""

import torch


def long_softmax(xs, ps, attrs):
    x, dim = xs[0], attrs["dim"]
    out = torch.softmax(x, dim=dim)
    return out + 1e-3 if x.shape[dim] > 4096 else out


def register(api):
    api.derive_backend("fault-long-softmax", base="torch-eager:cpu:float32", overrides={"softmax": long_softmax})
