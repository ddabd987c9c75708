"""jax.jit of the graph's forward pass and its vector-Jacobian product (jax.vjp): the outputs,
then the gradient of sum_i <output_i, cotangent_i> w.r.t. every graph input, judged against
float64 jax eager autograd (see fuzzer/backends/gradients.py for the reference and its limits)."""

from __future__ import annotations

import numpy as np

from fuzzer.backends.gradients import GradientOutputs, jax_eager_gradients, jax_outputs_and_gradients
from fuzzer.backends.jax_eager import import_jax
from fuzzer.backends.jax_jit import JITTED, JaxJit
from fuzzer.ir import Case, Graph, interpret
from fuzzer.ops import registry
from fuzzer.reproducers.program_source import jax_program


class JaxGrad(GradientOutputs, JaxJit):
    # Compiled by jax.jit: a forward it computes exactly as jax-jit, wrong the same way, is jax-jit's finding.
    derives_from_kind = "jax-jit"
    kind = "jax-grad"
    in_sets = {"grad": {20: "cpu:float32"}}
    description = "jax.jit of the forward and jax.vjp w.r.t. the graph inputs (gradients vs float64 jax eager)"
    dtypes = ("float32", "float64")

    def __init__(self, device="cpu", dtype=None, overrides=None, name=None):
        super().__init__(device, dtype, overrides, name)
        # Ops whose jax implementation jax cannot differentiate (`OpDef.jax_differentiable`).
        self.unsupported_ops = {op_name for op_name, op in registry().items() if not op.jax_differentiable}

    # What is differentiated, and how the reproducer says it: jax-double-grad swaps in its own transform.
    differentiate = staticmethod(jax_outputs_and_gradients)
    transform_name = "forward_and_gradients"
    transform_comment = "the outputs, then the gradient of each graph input"

    def _graph_fn(self, graph: Graph):
        jax = import_jax()
        names = [spec.name for spec in graph.inputs]

        def transformed(inputs, params):
            return self.differentiate(lambda xs: interpret(graph, xs, params, self.impl_for), inputs, names)

        return JITTED.get((self.name, graph.structure_key()), lambda: jax.jit(transformed))

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        # The campaign's own transform, written out: the same vjp and cotangents.
        names = [spec.name for spec in case.graph.inputs]
        helper = self.differentiate.__name__
        transform = [
            f"NAMES = {names!r}",
            "",
            "",
            f"def {self.transform_name}(*args):",
            "    inputs, weights = dict(zip(NAMES, args)), args[len(NAMES):]",
            f"    # {self.transform_comment}",
            f"    return {helper}(lambda xs: graph(*[xs[n] for n in NAMES], *weights), inputs, NAMES)",
            "",
            "",
        ]
        return jax_program(case, self, transform, f"jax.jit({self.transform_name})(*args)",
                           helpers=(self.differentiate,))

    def eager_gradients(self, case: Case, dtype: str, noise=None, device: str = "cpu") -> list[np.ndarray]:
        return jax_eager_gradients(case, dtype, noise, device, differentiate=self.differentiate)


BACKENDS = [JaxGrad]
