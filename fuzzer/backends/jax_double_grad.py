"""jax.jit(jax.grad(...)) of the gradient norm: jax-grad's outputs and input gradients, then the gradient
of their norm (fuzzer/backends/second_order.py), judged against jax's float64 eager double backward."""

from __future__ import annotations

from fuzzer.backends.jax_grad import JaxGrad
from fuzzer.backends.second_order import jax_double_backward
from fuzzer.ops import get_op


class JaxDoubleGrad(JaxGrad):
    # Its outputs and first-order gradients are jax-grad's: wrong the same way, its finding.
    derives_from_kind = "jax-grad"
    kind = "jax-double-grad"
    transformation = "double-vjp"
    in_sets = {"grad": {25: "cpu:float32"}}
    description = "jax.jit of jax.grad of the gradient norm over jax.vjp (vs float64 jax eager double backward)"

    differentiate = staticmethod(jax_double_backward)
    transform_name = "double_backward"
    transform_comment = "the outputs, the gradient of each graph input, then the gradients of their norm 1/2 sum ||g||^2"

    def supports(self, op_name: str) -> bool:
        return get_op(op_name).second_order and super().supports(op_name)


BACKENDS = [JaxDoubleGrad]
