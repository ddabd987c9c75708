"""jax.jit of jax.jvp: the outputs, then J t of each output along fixed tangents of the graph inputs
(fuzzer/backends/forward_mode.py), judged against jax's float64 eager jvp: what XLA makes of a
forward-mode program (jax.jacfwd and jax.hessian's outer pass run it)."""

from __future__ import annotations

from fuzzer.backends.forward_mode import jax_outputs_and_tangents
from fuzzer.backends.jax_grad import JaxGrad


class JaxJvp(JaxGrad):
    # Its outputs are jax-jit's forward: wrong the same way, jax-jit's finding.
    derives_from_kind = "jax-jit"
    kind = "jax-jvp"
    transformation = "jvp"
    in_sets = {"grad": {70: "cpu:float32"}}
    description = "jax.jit of jax.jvp along fixed tangents of the graph inputs (tangents vs float64 jax eager jvp)"

    differentiate = staticmethod(jax_outputs_and_tangents)
    transform_name = "forward_and_tangents"
    transform_comment = "the outputs, then J t of each output along fixed tangents of the graph inputs"


BACKENDS = [JaxJvp]
