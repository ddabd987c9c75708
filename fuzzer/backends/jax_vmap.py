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

A graph drawn on a rung of the size ladder (Graph.vmapped, fuzzer/ladder.py: up to 2^17 + 1
copies) is batched over that many copies, drawn at once from the same fixed seed with normal
values (materializing each would take minutes), and only the copies at 2^j - 1, 2^j and 2^j + 1
for the few powers of two at and below the rung, the first, the middle one and the last two are
judged (`judged_copies`): where a batching rule or a kernel chosen past a size goes wrong (jax#39103,
from row 16,385).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

import numpy as np

from fuzzer import ladder, oracle
from fuzzer.arrays import materialize
from fuzzer.backends.jax_eager import import_jax
from fuzzer.backends.jax_jit import JITTED, JaxJit
from fuzzer.ir import Case, Graph, interpret
from fuzzer.program_source import array_literal, jax_program

DEFAULT_BATCH = 3


def graph_seed(graph: Graph) -> int:
    """A seed fixed by the graph's inputs and nodes (not its outputs: localization's probe of the same
    graph gets the same copies)."""
    shape_of_graph = repr((graph.inputs, [(n.name, n.op, n.inputs, sorted(n.attrs.items())) for n in graph.nodes]))
    return int(hashlib.sha256(shape_of_graph.encode()).hexdigest()[:8], 16)


def batch_copies(graph: Graph, count: int) -> list[dict]:
    """`count` other input sets for the graph, each materialized from graph_seed on."""
    seed, names = graph_seed(graph), {spec.name for spec in graph.inputs}
    return [{name: array for name, array in materialize(graph, seed + k).arrays.items() if name in names} for k in range(count)]


def batch_size(graph: Graph) -> int:
    return graph.vmapped or DEFAULT_BATCH


def other_copies(graph: Graph) -> dict[str, np.ndarray]:
    """Every graph input's copies 1.. stacked, {name: (batch - 1, *shape)}: materialized one by one for
    the default batch, drawn at once for a laddered one (as its reproducer redraws them)."""
    count = batch_size(graph) - 1
    if not graph.vmapped:
        copies = batch_copies(graph, count)
        return {spec.name: np.stack([copy[spec.name] for copy in copies]) for spec in graph.inputs}
    rng = np.random.default_rng(graph_seed(graph))
    return {spec.name: rng.standard_normal((count, *spec.shape)).astype(np.float32).astype(np.float64)
            for spec in graph.inputs}


JUDGED_POWERS = 3  # a laddered batch is judged at the three powers of two at and below its rung


def judged_copies(batch: int) -> list[int]:
    """The copies judged besides copy 0: every one of the default batch; of a laddered one (each judged
    copy costs a float64 reference run), the first, the middle one, the last two, and those at 2^j - 1,
    2^j and 2^j + 1 for the JUDGED_POWERS powers of two at and below the batch's."""
    if batch <= DEFAULT_BATCH:
        return list(range(1, batch))
    top = (batch - 2).bit_length()  # 2^top > batch - 2: the rung 2^k + 1 has top k + 1, 2^k and 2^k - 1 have k
    edges = {ladder.size(power, offset) for power in range(top - JUDGED_POWERS, top + 1) for offset in ladder.OFFSETS}
    return sorted({1, batch // 2, batch - 2, batch - 1, *(edge for edge in edges if 0 < edge < batch)})


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
        if graph.vmapped:
            copies = [f"rng = np.random.default_rng({graph_seed(graph)})  # the other input sets, as the campaign drew them",
                      f"COPIES = [rng.standard_normal(({graph.vmapped - 1}, *x.shape)).astype(np.float32) "
                      f"for x in args[:{len(inputs)}]]"]
        else:
            others = other_copies(graph)
            literals = ", ".join("[" + ", ".join(array_literal(others[name][k], "float32") for name in inputs) + "]"
                                 for k in range(DEFAULT_BATCH - 1))
            copies = [f"COPIES = [{literals}]  # the other input sets stacked with the case's own (the campaign's)",
                      "COPIES = [np.stack(copy) for copy in zip(*COPIES)]  # per input"]
        judged = [0, *judged_copies(batch_size(graph))]
        transform = [
            *copies,
            f"INPUTS = {len(inputs)}",
            "stacked = [jax.numpy.concatenate([x[None], jax.numpy.asarray(c, dtype=x.dtype)]) for x, c in zip(args[:INPUTS], COPIES)]",
            "in_axes = (0,) * INPUTS + (None,) * (len(args) - INPUTS)  # the weights are shared",
            "batched = jax.jit(jax.vmap(graph, in_axes=in_axes))(*stacked, *args[INPUTS:])",
        ]
        # The outputs of copy 0, then of each other copy judged: as the campaign judged them.
        return jax_program(case, self, transform, f"[o[k] for k in {judged} for o in batched]")

    def extra_reference(self, case: Case) -> oracle.Reference:
        """The numpy reference of the copies judged besides copy 0, in the order `run` returns their outputs."""
        others = other_copies(case.graph)
        references = [oracle.compute_reference(replace(case, arrays={**case.arrays, **{n: a[k - 1] for n, a in others.items()}}),
                                               {self.dtype})
                      for k in judged_copies(batch_size(case.graph))]
        combined = references[0]
        for reference in references[1:]:
            combined = oracle.extended(combined, reference)
        return combined


BACKENDS = [JaxVmap]
