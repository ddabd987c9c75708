"""jax.jit(jax.grad(...)) of the gradient norm: jax-grad's outputs and input gradients, then the gradient
of their norm (fuzzer/backends/second_order.py), judged against jax's float64 eager double backward."""

from __future__ import annotations

import numpy as np

from fuzzer.backends.gradients import jax_eager_gradients
from fuzzer.backends.jax_eager import import_jax
from fuzzer.backends.jax_grad import JaxGrad
from fuzzer.backends.jax_jit import JITTED
from fuzzer.backends.second_order import jax_double_backward
from fuzzer.ir import Case, Graph, interpret
from fuzzer.ops import get_op
from fuzzer.program_source import jax_program


class JaxDoubleGrad(JaxGrad):
    # Its outputs and first-order gradients are jax-grad's: wrong the same way, its finding.
    derives_from_kind = "jax-grad"
    kind = "jax-double-grad"
    transformation = "double-vjp"
    in_sets = {"grad": {25: "cpu:float32"}}
    description = "jax.jit of jax.grad of the gradient norm over jax.vjp (vs float64 jax eager double backward)"

    def supports(self, op_name: str) -> bool:
        return get_op(op_name).second_order and super().supports(op_name)

    def _graph_fn(self, graph: Graph):
        jax = import_jax()
        names = [spec.name for spec in graph.inputs]

        def double_backward(inputs, params):
            return jax_double_backward(lambda xs: interpret(graph, xs, params, self.impl_for), inputs, names)

        return JITTED.get((self.name, graph.structure_key()), lambda: jax.jit(double_backward))

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        # The campaign's own jax_double_backward, written out: the same vjp, cotangents and norm.
        names = [spec.name for spec in case.graph.inputs]
        transform = [
            f"NAMES = {names!r}",
            "",
            "",
            "def double_backward(*args):",
            "    inputs, weights = dict(zip(NAMES, args)), args[len(NAMES):]",
            "    # the outputs, the gradient of each graph input, then the gradients of their norm 1/2 sum ||g||^2",
            "    return jax_double_backward(lambda xs: graph(*[xs[n] for n in NAMES], *weights), inputs, NAMES)",
            "",
            "",
        ]
        return jax_program(case, self, transform, "jax.jit(double_backward)(*args)", helpers=(jax_double_backward,))

    def eager_gradients(self, case: Case, dtype: str, noise=None, device: str = "cpu") -> list[np.ndarray]:
        return jax_eager_gradients(case, dtype, noise, device, differentiate=jax_double_backward)


BACKENDS = [JaxDoubleGrad]
