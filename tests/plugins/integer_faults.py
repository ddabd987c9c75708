"""Test plugin: faults that live only on integer tensors and Python scalars, each a derived backend of
torch-eager:cpu:int32 (fuzzer/exact_dtypes.py), which exact judging must find.

- `fault-saturating-mul`: an int32 mul that saturates at int32's bounds instead of wrapping (torch
  documents wraparound; a vectorized kernel with saturating instructions would do this).
- `fault-int-plus-float-scalar`: add_scalar that adds a finite float scalar to an integer tensor in
  integer arithmetic (the scalar truncated) and only then converts to float32: int32 + 1.5 gives
  x + 1.0 where torch's type promotion gives x + 1.5.
- `fault-mul-by-zero-drops-nan`: mul_scalar by a zero (0, 0.0 or False) gives zeros, nan and inf
  included, as inductor's x * 0 fold did before pytorch#187580: on an int32 backend it lives only
  where a float scalar made the tensor float first.
"""

import math

import torch

from fuzzer.ops import get_op
from fuzzer.ops.scalar import scalar_value


def saturating_mul(xs, ps, attrs):
    a, b = xs
    if a.dtype != torch.int32 or b.dtype != torch.int32:
        return get_op("mul").torch(xs, ps, attrs)
    info = torch.iinfo(torch.int32)
    return torch.clamp(a.to(torch.int64) * b.to(torch.int64), info.min, info.max).to(torch.int32)


def integer_float_add(xs, ps, attrs):
    x, value = xs[0], scalar_value(attrs["value"])
    if x.is_floating_point() or not isinstance(value, float) or not math.isfinite(value):
        return get_op("add_scalar").torch(xs, ps, attrs)
    return (x + math.trunc(value)).to(torch.float32)


def zero_fold_mul(xs, ps, attrs):
    x, value = xs[0], scalar_value(attrs["value"])
    if x.is_floating_point() and value == 0:
        return torch.zeros_like(x)
    return get_op("mul_scalar").torch(xs, ps, attrs)


def register(api):
    base = "torch-eager:cpu:int32"
    api.derive_backend("fault-saturating-mul", base=base, overrides={"mul": saturating_mul})
    api.derive_backend("fault-int-plus-float-scalar", base=base, overrides={"add_scalar": integer_float_add})
    api.derive_backend("fault-mul-by-zero-drops-nan", base=base, overrides={"mul_scalar": zero_fold_mul})
