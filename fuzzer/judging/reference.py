"""The numpy reference evaluation of a graph: every op's float64 `reference`, run in a numpy dtype
(where the op declares a low-precision kernel model, Numerics.low_precision_model, that instead).

The oracle's arbiter (float64) and its same-dtype model (float32, float16, bfloat16) both come from
here; backends/numpy_ref.py is a thin backend over it.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from fuzzer.ir import Graph, interpret
from fuzzer.jsonform import number
from fuzzer.ops import get_op


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype named `name`; bfloat16 is ml_dtypes' (a jax dependency)."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def evaluate_all(graph: Graph, inputs: dict, params: dict, dtype: str = "float64",
                 impl_for: Callable[[str], Callable] | None = None, in_float32: bool = False) -> dict:
    """Every value of the graph by name, computed in `dtype` by each op's reference (or by
    `impl_for(op_name)`, a backend's overrides); `in_float32`: each op computes in float32 from
    its `dtype` operands and rounds its result to `dtype` (always so for bfloat16: _in_dtype)."""
    numpy_type = numpy_dtype(dtype)
    cast = lambda a: np.asarray(a, dtype=numpy_type)  # noqa: E731
    impl_for = impl_for or (lambda op_name: get_op(op_name).impl("numpy"))
    with np.errstate(all="ignore"):
        return interpret(
            graph,
            {k: cast(v) for k, v in inputs.items()},
            {node: {k: cast(v) for k, v in ps.items()} for node, ps in params.items()},
            lambda op_name: _in_dtype(impl_for(op_name), numpy_type, get_op(op_name), in_float32),
            keep_all=True,
        )


def _in_dtype(fn, dtype, op, in_float32: bool = False):
    """References are dtype-generic, but numpy promotes here and there; pin the result dtype.

    bfloat16 ops compute in float32 from their bfloat16 operands and round the result, as a
    bfloat16 kernel does (torch's float opmath, XLA's bfloat16 normalization). ml_dtypes' own
    bfloat16 arithmetic does that per ufunc, but its reductions accumulate in bfloat16 (a sum
    of 1000 ones is 256), an error no reduction kernel makes; einsum has no bfloat16 loop.
    A scan some kernels do carry in bfloat16 (`op`'s scans_in_dtype) runs in bfloat16 itself.
    `op`'s weak scalars (Numerics.weak_scalars) are bfloat16 constants first, as in torch and jax (numpy
    rounds them to float16 itself; `in_float32`, the float16 model of opmath kernels, keeps them)."""
    if not op.numerics.scans_in_dtype and (in_float32 or dtype.name == "bfloat16"):
        if dtype.name == "bfloat16" and op.numerics.weak_scalars:
            unrounded = fn
            fn = lambda xs, ps, attrs: unrounded(xs, ps, _rounded_scalars(attrs, op.numerics.weak_scalars, dtype))  # noqa: E731
        return lambda xs, ps, attrs: np.asarray(fn([_float32(x) for x in xs], {k: _float32(v) for k, v in ps.items()}, attrs),
                                                dtype=dtype)
    return lambda xs, ps, attrs: np.asarray(fn(xs, ps, attrs), dtype=dtype)


def _rounded_scalars(attrs: dict, names: tuple[str, ...], dtype) -> dict:
    """`attrs` with the scalars `names` (those present, not None) rounded to `dtype`, as floats."""
    return {key: float(np.asarray(number(value), dtype=dtype)) if key in names and value is not None else value
            for key, value in attrs.items()}


def _float32(values):
    return np.asarray(values, dtype=np.float32)
