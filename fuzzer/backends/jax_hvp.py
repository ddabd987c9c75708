"""jax.jit of a Hessian-vector product by forward over reverse (jax.jvp of jax.grad, jax.hessian's own
composition: jacfwd of jacrev): the outputs, then H t of each graph input (second_order.py), judged
against jax's float64 eager reverse over reverse (jax.grad of <jax.grad L, t>); where the two routes
take different conventions in float64 the entry is not judged (forward_mode.py)."""

from __future__ import annotations

import numpy as np

from fuzzer.backends.gradients import jax_eager_gradients
from fuzzer.backends.jax_grad import JaxGrad
from fuzzer.backends.second_order import jax_hessian_vector_products, jax_hvp_by_reverse
from fuzzer.ir import Case
from fuzzer.ops import get_op


class JaxHvp(JaxGrad):
    # Its outputs are jax-jit's forward: wrong the same way, jax-jit's finding.
    derives_from_kind = "jax-jit"
    kind = "jax-hvp"
    transformation = "hvp"
    in_sets = {"grad": {75: "cpu:float32"}}
    description = "jax.jit of jax.jvp over jax.grad (jax.hessian's composition): outputs, then H t (vs float64 jax eager reverse over reverse)"

    differentiate = staticmethod(jax_hessian_vector_products)
    transform_name = "hessian_vector_products"
    transform_comment = "the outputs, then H t of each graph input: forward over reverse, as jax.hessian composes them"

    def supports(self, op_name: str) -> bool:
        return get_op(op_name).second_order and super().supports(op_name)

    def eager_gradients(self, case: Case, dtype: str, noise=None, device: str = "cpu") -> list[np.ndarray]:
        return jax_eager_gradients(case, dtype, noise, device, differentiate=jax_hvp_by_reverse)

    def other_route(self, case: Case, dtype: str) -> list[np.ndarray]:
        return jax_eager_gradients(case, dtype, differentiate=jax_hessian_vector_products)


BACKENDS = [JaxHvp]
