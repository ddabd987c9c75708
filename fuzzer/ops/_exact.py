"""Integer and bool semantics of the ops, as torch documents them: the result dtype of mixed operands
(torch.result_type) and of a Python scalar (a "weak" scalar takes the tensor's dtype, wrapping), and
`integer_semantics`, which gives an op its exact dtypes (OpDef.exact_dtypes).

numpy's own promotion differs (int32 with a float32 array is float64 in numpy, float32 in torch; a
negative Python int against uint8 raises in numpy, wraps in torch), so the exact references
compute in the dtype these rules give, never in numpy's.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fuzzer.exact_dtypes import EXACT_DTYPES, INTEGERS

FLOAT_RESULT = np.dtype(np.float32)  # torch's default dtype: an integer tensor with a float scalar


def result_dtype(*operands) -> np.dtype:
    """torch.result_type of tensors: the widest float among the float operands, else numpy's (and
    torch's) integer promotion (int8 with uint8 is int16, anything with bool keeps the other)."""
    dtypes = [np.asarray(operand).dtype for operand in operands]
    floats = [dtype for dtype in dtypes if dtype.kind == "f"]
    return np.result_type(*floats) if floats else np.result_type(*dtypes)


def scalar_result_dtype(tensor_dtype: np.dtype, value) -> np.dtype:
    """torch's dtype for a tensor of `tensor_dtype` with the Python scalar `value`: the tensor's,
    unless the scalar is of a higher category (float over integer and bool, integer over bool)."""
    if tensor_dtype.kind == "f":
        return tensor_dtype
    if isinstance(value, float):
        return FLOAT_RESULT
    if tensor_dtype.kind == "b" and not isinstance(value, bool):
        return np.dtype(np.int64)
    return tensor_dtype


def as_weak_scalar(value, dtype: np.dtype):
    """The Python scalar `value` as a 0-d array of `dtype`, as torch converts it: an integer keeps its low
    bits (-1 is 255 in uint8)."""
    if dtype.kind in "iu" and not isinstance(value, bool):
        return np.asarray(value, dtype=np.int64).astype(dtype)
    return np.asarray(value, dtype=dtype)


def promoted(function):
    """An exact reference (OpDef.exact_reference) computing `function(*inputs)` in torch's result dtype."""
    def run(xs, ps, attrs):
        dtype = result_dtype(*xs)
        return np.asarray(function(*(np.asarray(x).astype(dtype) for x in xs), **attrs)).astype(dtype)

    return run


def integer_semantics(op, dtypes=INTEGERS, reference=None, floats: bool = True):
    """`op` declared on the exact `dtypes` (integers by default; EXACT_DTYPES adds bool), with its exact
    reference (None: its float reference, run on integers, already has torch's semantics), and `floats`
    False for an integer-only op (bitwise, shifts). Its jax function computes in torch's dtypes too
    (jnp.sum of uint8 is given dtype=int64), so every integer backend has one reference."""
    return replace(op, exact_dtypes=tuple(dtypes), exact_reference=reference, float_dtypes=floats)


__all__ = ["EXACT_DTYPES", "INTEGERS", "integer_semantics", "promoted", "result_dtype", "scalar_result_dtype",
           "as_weak_scalar"]
