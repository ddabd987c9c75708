"""The shrinker's passes that only programs have (fuzzer/programs/program.py), in fuzzer/shrinking/shrink.py's PASSES:
fewer steps first, then inputs of one size at every step (ir.Resize), then each in-place write replaced by its out-of-place form, which tells whether
the finding needs the write at all (a bug of the op, not of the aliasing, keeps its verdict), then each write's
Python arithmetic on its number dropped (it takes the number as read), then each number read at run time
(`.item()`, an element of `.tolist()`) replaced by a constant, which tells whether the finding needs the read at all.
All are "simpler" in the shrinker's order (steps, then writes, after the node count; then attribute size)."""

from __future__ import annotations

from dataclasses import replace

from fuzzer.ir import Case, Graph
from fuzzer.programs.statements import ARITHMETIC, ELEMENT, ITEM, NUMBER_OPERANDS, OUT_OF_PLACE


def pass_fewer_steps(case: Case, culprit: str):
    """One step, then each count up to the current one (a resized program's first row counts)."""
    resize = case.graph.resized
    for steps in range(1, case.graph.steps):
        resized = resize and replace(resize, rows=resize.rows[:steps])
        yield replace(case, graph=replace(case.graph, steps=steps, resized=resized))


def resizing(graph: Graph) -> int:
    """How much a program's resize asks (ir.Resize), in the shrinker's order: none, a backed size, an unbacked one."""
    return 0 if graph.resized is None else 1 + (graph.resized.mark == "unbacked")


def unresized_graphs(graph: Graph):
    """The program with its inputs whole at every step, then (an unbacked mark) with its dim 0 marked dynamic."""
    if graph.resized is not None:
        yield replace(graph, resized=None)
        if graph.resized.mark == "unbacked":
            yield replace(graph, resized=replace(graph.resized, mark="dynamic"))


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


def plain_number_graphs(graph: Graph):
    """The graph with each write's Python arithmetic on the number it reads (program_ops.ARITHMETIC) dropped in turn."""
    for index, node in enumerate(graph.nodes):
        if ARITHMETIC in node.attrs:
            attrs = {key: value for key, value in node.attrs.items() if key != ARITHMETIC}
            yield replace(graph, nodes=graph.nodes[:index] + (replace(node, attrs=attrs),) + graph.nodes[index + 1:])


def constant_number_graphs(graph: Graph):
    """The graph with each write that reads its number at run time given the constant 1.0 instead, in turn (a branch_
    then takes its `then` arm); the value it read is no longer its operand, and the shrinker drops what only fed it.
    A number that takes an operand's place (mul_'s) has no constant form."""
    for index, node in enumerate(graph.nodes):
        if ITEM in node.attrs and node.op not in NUMBER_OPERANDS:
            attrs = {key: value for key, value in node.attrs.items() if key not in (ITEM, ARITHMETIC, ELEMENT)}
            constant = replace(node, inputs=node.inputs[:-1], attrs={**attrs, node.attrs[ITEM]: 1.0})
            yield replace(graph, nodes=graph.nodes[:index] + (constant,) + graph.nodes[index + 1:])
