"""Test plugin: faults planted only in the training-graph regions, each right in the forward and in
every region but its own.

- fault-double-grad-sin: torch.compile of a double backward through a sin whose derivative is a
  constant of the backward (a first-order Taylor step around the detached input): its gradient is
  right, the gradient of that gradient drops its second-order term.
"""

import torch


def sin_dropping_its_second_order_term(xs, ps, attrs):
    x = xs[0]
    at = x.detach()
    return torch.sin(at) + torch.cos(at) * (x - at)  # = sin(x), d/dx = cos(x) taken as a constant


def register(api):
    api.derive_backend("fault-double-grad-sin", base="torch-compile-double-grad:cpu:float32",
                       overrides={"sin": sin_dropping_its_second_order_term})
