"""jax.jit with the weights, and in half the cases a small first graph input, as compile-time
constants: the jitted function closes over them instead of taking them as arguments, so XLA sees
their values (stablehlo.constant) and folds what depends on constants alone. Constant folding
(XLA's HloEvaluator computes those values, not the compiled kernels) and the rewrites that fire
only on constants are never reached while every tensor is an argument, as under jax-jit.

Constants differ in every input set, so every run traces and compiles anew (as
torch-compile-frozen does): each further input set of a graph (compiled_inputs) is a compile of
its own, which the compile budget charges to this kind; no input set is judged with another's
constants. Which input is closed over follows from the case's seed, which shrinking keeps, and
the reproducer closes over the same arrays.
"""

from __future__ import annotations

import numpy as np

from fuzzer.backends.jax_eager import import_jax
from fuzzer.backends.jax_jit import JaxJit
from fuzzer.exact_dtypes import result_array
from fuzzer.ir import Case, interpret, split_arrays
from fuzzer.reproducers.program_source import jax_program


# XLA folds an op on constants in its HloEvaluator, slowly: a max over a 1e6-element constant took
# 4.3 s. An input past this size (the small regime's largest tensor) stays an argument.
CONSTANT_INPUT_ELEMENTS = 20_000


def constant_inputs(case: Case) -> list[str]:
    """The graph inputs closed over besides the weights: the first one when the case's seed is odd
    and it holds at most CONSTANT_INPUT_ELEMENTS."""
    first = case.graph.inputs[0] if case.graph.inputs else None
    if first is None or not case.seed % 2 or int(np.prod(first.shape)) > CONSTANT_INPUT_ELEMENTS:
        return []
    return [first.name]


class JaxJitConst(JaxJit):
    # Compiled by jax.jit: a forward wrong exactly as jax-jit's is jax-jit's finding.
    derives_from_kind = "jax-jit"
    kind = "jax-jit-const"
    in_sets = {"cpu": {55: "cpu:float32"}}
    description = "jax.jit closing over the weights and, in half the cases, a small first input (compile-time constants)"

    def run(self, case: Case) -> list[np.ndarray]:
        jax = import_jax()
        inputs, params = split_arrays(case)
        constant = constant_inputs(case)
        closed = {name: self.put(value) for name, value in inputs.items() if name in constant}
        weights = {node: {k: self.put(v) for k, v in ps.items()} for node, ps in params.items()}
        graph = case.graph
        jitted = jax.jit(lambda free: interpret(graph, {**free, **closed}, weights, self.impl_for))
        with self.running_context(graph):
            outputs = jitted({name: self.put(value) for name, value in inputs.items() if name not in constant})
        return [result_array(jax.device_get(out), self.dtype) for out in outputs]

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        # The script's `args` start with the graph inputs, in order (program_source.argument_names).
        constant = constant_inputs(case)
        free = [index for index, spec in enumerate(case.graph.inputs) if spec.name not in constant]
        transform = [
            f"FREE = {free}  # the arguments passed to the jitted function: the weights and the others are closed over",
            "def closed_over(*free):",
            "    every = list(args)",
            "    for index, value in zip(FREE, free):",
            "        every[index] = value",
            "    return graph(*every)",
            "program = jax.jit(closed_over)",
        ]
        return jax_program(case, self, transform, "program(*[args[index] for index in FREE])")


BACKENDS = [JaxJitConst]
