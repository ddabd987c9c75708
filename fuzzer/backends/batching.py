"""The batch a vmap kind runs (jax-vmap, torch-compile-vmap): the case's own inputs stacked with other
input sets drawn for the same graph, and the float64 references of the copies it judges.

BATCH copies of the graph inputs are stacked on a new leading axis (the parameters are shared): copy 0
is the case's own inputs, copies 1.. are other input sets drawn for the same graph by `materialize`
(so every copy respects the ops' input domains), fixed per graph. A vmap kind returns copy 0's outputs,
which the oracle judges against the case's reference, then every other judged copy's outputs as extra
outputs, judged per element against the float64 numpy reference of that copy (`copies_reference`). A
batching rule that mixes up elements (reads copy 0's operand for every copy, ignores one operand's
batch axis) can leave copy 0 right; the other copies show it. They are judged against the math, not
against the unbatched run of each copy, so that one calibrated tolerance judges everything.

A graph drawn on a rung of the size ladder (Graph.vmapped, fuzzer/drawing/ladder.py: up to 2^17 + 1 copies) is
batched over that many copies, drawn at once from the same fixed seed with normal values (materializing
each would take minutes), and only the copies at 2^j - 1, 2^j and 2^j + 1 for the few powers of two at
and below the rung, the first, the middle one and the last two are judged (`judged_copies`): where a
batching rule or a kernel chosen past a size goes wrong (jax#39103, from row 16,385).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

import numpy as np

from fuzzer import oracle
from fuzzer.arrays import materialize
from fuzzer.drawing import ladder
from fuzzer.ir import Case, Graph

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


def copies_source(graph: Graph) -> list[str]:
    """A reproducer's lines that set COPIES, one numpy array (batch - 1, *shape) per graph input, as the
    campaign drew them (the script's `args` holds the case's own inputs first)."""
    from fuzzer.reproducers.program_source import array_literal

    inputs = [spec.name for spec in graph.inputs]
    if graph.vmapped:
        return [f"rng = np.random.default_rng({graph_seed(graph)})  # the other input sets, as the campaign drew them",
                f"COPIES = [rng.standard_normal(({graph.vmapped - 1}, *x.shape)).astype(np.float32) for x in args[:{len(inputs)}]]"]
    others = other_copies(graph)
    literals = ", ".join("[" + ", ".join(array_literal(others[name][k], "float32") for name in inputs) + "]"
                         for k in range(DEFAULT_BATCH - 1))
    return [f"COPIES = [{literals}]  # the other input sets stacked with the case's own (the campaign's)",
            "COPIES = [np.stack(copy) for copy in zip(*COPIES)]  # per input"]


def copies_reference(case: Case, dtype: str) -> oracle.Reference:
    """The numpy reference of the copies judged besides copy 0, in the order a vmap kind returns their outputs."""
    others = other_copies(case.graph)
    references = [oracle.compute_reference(replace(case, arrays={**case.arrays, **{n: a[k - 1] for n, a in others.items()}}),
                                           {dtype})
                  for k in judged_copies(batch_size(case.graph))]
    combined = references[0]
    for reference in references[1:]:
        combined = oracle.extended(combined, reference)
    return combined
