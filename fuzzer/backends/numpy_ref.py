"""The float64 numpy reference: the judge of what is right (ops' `reference` functions)."""

from __future__ import annotations

import numpy as np

from fuzzer.backends import Backend
from fuzzer.ir import Graph, interpret


class NumpyReference(Backend):
    kind = "numpy-ref"
    family = "numpy"
    dtypes = ("float64", "float32", "float16", "bfloat16")
    default_dtype = "float64"
    description = "plain numpy written from the math; float64 is the oracle's arbiter"

    def _execute(self, graph: Graph, inputs: dict, params: dict) -> list[np.ndarray]:
        env = self.execute_all(graph, inputs, params)
        return [np.asarray(env[name], dtype=np.float64) for name in graph.outputs]

    def execute_all(self, graph: Graph, inputs: dict, params: dict) -> dict:
        """Every value of the graph by name, computed in this backend's dtype."""
        dtype = numpy_dtype(self.dtype)
        cast = lambda a: np.asarray(a, dtype=dtype)  # noqa: E731
        with np.errstate(all="ignore"):
            return interpret(
                graph,
                {k: cast(v) for k, v in inputs.items()},
                {node: {k: cast(v) for k, v in ps.items()} for node, ps in params.items()},
                lambda op: _in_dtype(self.impl_for(op), dtype),
                keep_all=True,
            )


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype named `name`; bfloat16 is ml_dtypes' (a jax dependency)."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _in_dtype(fn, dtype):
    """References are dtype-generic, but numpy promotes here and there; pin the result dtype.

    bfloat16 ops compute in float32 from their bfloat16 operands and round the result, as a
    bfloat16 kernel does (torch's float opmath, XLA's bfloat16 normalization). ml_dtypes' own
    bfloat16 arithmetic does that per ufunc, but its reductions accumulate in bfloat16 (a sum
    of 1000 ones is 256, an error no kernel makes) and einsum has no bfloat16 loop."""
    if dtype.name == "bfloat16":
        return lambda xs, ps, attrs: np.asarray(fn([_float32(x) for x in xs], {k: _float32(v) for k, v in ps.items()}, attrs),
                                                dtype=dtype)
    return lambda xs, ps, attrs: np.asarray(fn(xs, ps, attrs), dtype=dtype)


def _float32(values):
    return np.asarray(values, dtype=np.float32)


BACKENDS = [NumpyReference]
