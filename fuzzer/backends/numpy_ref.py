"""The float64 numpy reference as a backend (the evaluation itself is fuzzer/judging/reference.py)."""

from __future__ import annotations

import numpy as np

from fuzzer.backends import Backend
from fuzzer.ir import Graph
from fuzzer.judging.reference import evaluate_all, numpy_dtype
from fuzzer.programs.program import run_in_numpy


class NumpyReference(Backend):
    kind = "numpy-ref"
    path = "numpy/reference"
    family = "numpy"
    dtypes = ("float64", "float32", "float16", "bfloat16")
    default_dtype = "float64"
    description = "plain numpy written from the math; float64 is the oracle's arbiter"
    runs_programs = True

    def _execute(self, graph: Graph, inputs: dict, params: dict) -> list[np.ndarray]:
        if graph.steps:  # a program, run literally on numpy's views (fuzzer/programs/program.py)
            return run_in_numpy(graph, inputs, numpy_dtype(self.dtype), self.impl_for)
        env = self.execute_all(graph, inputs, params)
        return [np.asarray(env[name], dtype=np.float64) for name in graph.outputs]

    def execute_all(self, graph: Graph, inputs: dict, params: dict) -> dict:
        """Every value of the graph by name, computed in this backend's dtype (with its overrides)."""
        return evaluate_all(graph, inputs, params, self.dtype, self.impl_for)


BACKENDS = [NumpyReference]
