"""jax.vmap of the graph over a new leading batch axis of the graph inputs, under jax.jit: the batch and
its judging are fuzzer/backends/batching.py's."""

from __future__ import annotations

from fuzzer import oracle
from fuzzer.backends.batching import batch_size, copies_reference, copies_source, judged_copies, other_copies
from fuzzer.backends.jax_eager import import_jax
from fuzzer.backends.jax_jit import JITTED, JaxJit
from fuzzer.ir import Case, Graph, interpret
from fuzzer.reproducers.program_source import jax_program


class JaxVmap(JaxJit):
    # Compiled by jax.jit: copy 0 computed exactly as jax-jit computes it, wrong the same way, is jax-jit's finding.
    derives_from_kind = "jax-jit"
    kind = "jax-vmap"
    description = ("jax.jit(jax.vmap(graph)) over 3 stacked input sets (parameters shared), or over a ladder rung's "
                   "2^k - 1 .. 2^k + 1; every copy judged, of a rung those at powers of two")
    transformation = "vmap"
    # Its other copies are drawn as float values (batch_copies): no integer dtypes.
    dtypes = ("float32", "float64", "bfloat16", "float16")

    def _graph_fn(self, graph: Graph):
        jax = import_jax()
        batched = JITTED.get((self.name, graph.structure_key()), lambda: jax.jit(
            jax.vmap(lambda inputs, params: interpret(graph, inputs, params, self.impl_for), in_axes=(0, None))))
        others, judged = other_copies(graph), [0, *judged_copies(batch_size(graph))]

        def run(inputs, params):
            stacked = {name: jax.numpy.concatenate([x[None], jax.numpy.asarray(others[name], dtype=x.dtype)])
                       for name, x in inputs.items()}
            outputs = batched(stacked, params)
            return [out[k] for k in judged for out in outputs]

        return run

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        graph, inputs = case.graph, [spec.name for spec in case.graph.inputs]
        judged = [0, *judged_copies(batch_size(graph))]
        transform = [
            *copies_source(graph),
            f"INPUTS = {len(inputs)}",
            "stacked = [jax.numpy.concatenate([x[None], jax.numpy.asarray(c, dtype=x.dtype)]) for x, c in zip(args[:INPUTS], COPIES)]",
            "in_axes = (0,) * INPUTS + (None,) * (len(args) - INPUTS)  # the weights are shared",
            "batched = jax.jit(jax.vmap(graph, in_axes=in_axes))(*stacked, *args[INPUTS:])",
        ]
        # The outputs of copy 0, then of each other copy judged: as the campaign judged them.
        return jax_program(case, self, transform, f"[o[k] for k in {judged} for o in batched]")

    def extra_reference(self, case: Case) -> oracle.Reference:
        return copies_reference(case, self.dtype)


BACKENDS = [JaxVmap]
