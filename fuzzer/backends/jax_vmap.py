"""jax.vmap of the graph over a new leading batch axis of the graph inputs, under jax.jit.

BATCH copies of the graph inputs are stacked (the parameters are shared, in_axes=None): copy 0
is the case's own inputs, copies 1.. are other input sets drawn for the same graph by
`materialize` (so every copy respects the ops' input domains), fixed per graph. The backend
returns copy 0's outputs, which the oracle judges against the case's reference, then every
other copy's outputs as extra outputs, judged per element against the float64 numpy reference
of that copy (`extra_reference`). A batching rule that mixes up elements (reads copy 0's
operand for every copy, ignores one operand's batch axis) can leave copy 0 right; the other
copies show it. They are judged against the math, not against jax.jit's own unbatched run of
each copy, so that one calibrated tolerance judges everything (the unbatched run would need a
second, uncalibrated one).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from fuzzer import oracle
from fuzzer.arrays import materialize
from fuzzer.backends.jax_eager import import_jax
from fuzzer.backends.jax_jit import JITTED, JaxJit
from fuzzer.ir import Case, Graph, interpret
from fuzzer.program_source import array_literal, jax_program


def batch_copies(graph: Graph, count: int) -> list[dict]:
    """`count` other input sets for the graph, drawn from a seed fixed by its inputs and nodes (not
    its outputs: localization's probe of the same graph gets the same copies)."""
    shape_of_graph = repr((graph.inputs, [(n.name, n.op, n.inputs, sorted(n.attrs.items())) for n in graph.nodes]))
    seed = int(hashlib.sha256(shape_of_graph.encode()).hexdigest()[:8], 16)
    names = {spec.name for spec in graph.inputs}
    return [{name: array for name, array in materialize(graph, seed + k).arrays.items() if name in names} for k in range(count)]


class JaxVmap(JaxJit):
    # Compiled by jax.jit: copy 0 computed exactly as jax-jit computes it, wrong the same way, is jax-jit's finding.
    derives_from_kind = "jax-jit"
    kind = "jax-vmap"
    description = "jax.jit(jax.vmap(graph)) over 3 stacked input sets (parameters shared); every copy judged"
    transformation = "vmap"
    batch_size = 3
    # Its other copies are drawn as float values (batch_copies): no integer dtypes.
    dtypes = ("float32", "float64", "bfloat16", "float16")

    def _graph_fn(self, graph: Graph):
        jax = import_jax()
        batched = JITTED.get((self.name, graph.structure_key()), lambda: jax.jit(
            jax.vmap(lambda inputs, params: interpret(graph, inputs, params, self.impl_for), in_axes=(0, None))))
        copies = batch_copies(graph, self.batch_size - 1)

        def run(inputs, params):
            stacked = {name: jax.numpy.stack([x, *(jax.numpy.asarray(copy[name], dtype=x.dtype) for copy in copies)])
                       for name, x in inputs.items()}
            outputs = batched(stacked, params)
            return [out[k] for k in range(self.batch_size) for out in outputs]

        return run

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        inputs = [spec.name for spec in case.graph.inputs]
        copies = ", ".join("[" + ", ".join(array_literal(copy[name], "float32") for name in inputs) + "]"
                           for copy in batch_copies(case.graph, self.batch_size - 1))
        transform = [
            f"COPIES = [{copies}]  # the other input sets stacked with the case's own (the campaign's)",
            f"INPUTS = {len(inputs)}",
            "stacked = [jax.numpy.stack([x, *(jax.numpy.asarray(copy[i], dtype=x.dtype) for copy in COPIES)])",
            "           for i, x in enumerate(args[:INPUTS])]",
            "in_axes = (0,) * INPUTS + (None,) * (len(args) - INPUTS)  # the weights are shared",
            "batched = jax.jit(jax.vmap(graph, in_axes=in_axes))(*stacked, *args[INPUTS:])",
        ]
        # The outputs of copy 0, then of each other copy: as the campaign judged them.
        return jax_program(case, self, transform, f"[o[k] for k in range({self.batch_size}) for o in batched]")

    def extra_reference(self, case: Case) -> oracle.Reference:
        """The numpy reference of copies 1.., in the order `run` returns their outputs."""
        references = [oracle.compute_reference(replace(case, arrays={**case.arrays, **copy}), {self.dtype})
                      for copy in batch_copies(case.graph, self.batch_size - 1)]
        combined = references[0]
        for reference in references[1:]:
            combined = oracle.extended(combined, reference)
        return combined


BACKENDS = [JaxVmap]
