"""Test plugin: faults that live only where regimes compose, in a big contraction, or where a weight
is a compile-time constant (tests/test_composed_regimes.py, tests/test_constants.py).

- `fault-large-nonfinite-sum`: sum of a tensor of more than 20,000 elements skips its non-finite
  entries (a blocked reduction that drops a nan or inf in a block): wrong only when a large input
  also holds a special value, which neither large-op nor special-values alone draws.
- `fault-masked-softmax-row`: softmax returns 0 for a row of two or more entries that are all -inf
  (a "safe softmax" fast path), where the math gives 0/0 = nan: one -inf in a row, or a row of
  one, is right.
- `fault-big-matmul`: matmul and linear are 1% off when M, K and N all exceed 128 (a blocked GEMM
  path taken only above a work size).
- `fault-folded-linear`: jax-jit-const whose linear is 1% off when its weight is a concrete array
  while jax traces (a constant-folding rewrite gone wrong); the same override under jax-jit, where
  the weight is a traced argument, is right (`fault-folded-linear-args`).
"""

import torch

from fuzzer.ops import get_op


def nonfinite_skipping_sum(xs, ps, attrs):
    x = xs[0]
    if x.numel() > 20_000:  # above the special-values regime's 20,000 elements a tensor
        x = torch.where(torch.isfinite(x), x, torch.zeros_like(x))
    return get_op("sum").torch([x], ps, attrs)


def safe_softmax(xs, ps, attrs):
    x, dim = xs[0], attrs["dim"]
    out = get_op("softmax").torch(xs, ps, attrs)
    masked = torch.isneginf(x).all(dim=dim, keepdim=True) & (x.shape[dim] >= 2)
    return torch.where(masked, torch.zeros_like(out), out)


def _all_large(*sizes) -> bool:
    return min(sizes) > 128


def big_matmul(xs, ps, attrs):
    out = get_op("matmul").torch(xs, ps, attrs)
    a, b = xs
    return out * 1.01 if _all_large(a.shape[-2], a.shape[-1], b.shape[-1]) else out


def big_linear(xs, ps, attrs):
    out = get_op("linear").torch(xs, ps, attrs)
    x, weight = xs[0], ps["weight"]
    rows = x.numel() // max(x.shape[-1], 1)
    return out * 1.01 if _all_large(rows, weight.shape[1], weight.shape[0]) else out


def folded_linear(xs, ps, attrs):
    import jax

    out = get_op("linear").jax(xs, ps, attrs)
    return out if isinstance(ps["weight"], jax.core.Tracer) else out * 1.01


def register(api):
    api.derive_backend("fault-large-nonfinite-sum", base="torch-eager:cpu:float32", overrides={"sum": nonfinite_skipping_sum})
    api.derive_backend("fault-masked-softmax-row", base="torch-eager:cpu:float32", overrides={"softmax": safe_softmax})
    api.derive_backend("fault-big-matmul", base="torch-eager:cpu:float32", overrides={"matmul": big_matmul, "linear": big_linear})
    api.derive_backend("fault-folded-linear", base="jax-jit-const:cpu:float32", overrides={"linear": folded_linear})
    api.derive_backend("fault-folded-linear-args", base="jax-jit:cpu:float32", overrides={"linear": folded_linear})
