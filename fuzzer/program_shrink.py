"""The shrinker's passes that only programs have (fuzzer/programs/program.py), in fuzzer/shrinking/shrink.py's PASSES:
fewer steps first, then each in-place write replaced by its out-of-place form, which tells whether
the finding needs the write at all (a bug of the op, not of the aliasing, keeps its verdict).
Both are "simpler" in the shrinker's order (steps, then writes, after the node count)."""

from __future__ import annotations

from dataclasses import replace

from fuzzer.ir import Case, Graph
from fuzzer.programs.statements import ITEM, OUT_OF_PLACE


def pass_fewer_steps(case: Case, culprit: str):
    """One step, then each count up to the current one."""
    for steps in range(1, case.graph.steps):
        yield replace(case, graph=replace(case.graph, steps=steps))


def out_of_place_graphs(graph: Graph):
    """The graph with each write that has an out-of-place form (add_ -> add where alpha is 1, mul_, clamp_,
    relu_) replaced by it: its consumers read the new value, while other aliases of its target keep the old
    one (fuzzer/shrinking/shrink.py's pass_out_of_place turns each into a case)."""
    for index, node in enumerate(graph.nodes):
        if node.op not in OUT_OF_PLACE or node.attrs.get("alpha", 1.0) != 1.0 or ITEM in node.attrs:
            continue
        attrs = {key: value for key, value in node.attrs.items() if key != "alpha"}
        nodes = graph.nodes[:index] + (replace(node, op=OUT_OF_PLACE[node.op], attrs=attrs),) + graph.nodes[index + 1:]
        yield replace(graph, nodes=nodes)
