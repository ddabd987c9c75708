"""The statement a program's finding is charged to (its culprit, in the signature).

Node isolation (fuzzer/judging/localize.py) feeds one node exact operands, which says nothing of a write
through a view or of state carried across steps; a program is localized by its prefixes instead.
Prefix k is the program's first k statements, run for the same steps, with every input and every
value an output (each read as the step returns it, as a program's outputs are). The first prefix
the backend gets wrong (a wrong value, or the case's own error) names the culprit, from the values
wrong in the first step that has any (a later step inherits the state an earlier one left wrong):
- its last statement, where that statement's value is among the wrong ones (a write that writes
  the wrong values);
- where the wrong values all live in the memory the last statement wrote through a view, that
  view (the write went to other memory than the view's base);
- else the statement that made the first wrong value (a view that went stale, read after a
  later write).
A finding no prefix shows (it needs every statement) is charged to the last one.
"""

from __future__ import annotations

from dataclasses import replace

from fuzzer import oracle, verdicts
from fuzzer.backends import Backend
from fuzzer.errors import normalize_error
from fuzzer.ir import Case, infer_shapes
from fuzzer.judging.backend_verdict import verdict_of
from fuzzer.programs.program import aliases
from fuzzer.programs.statements import VIEWS, WRITES
from fuzzer.running.execute import OK, Runner


def prefix_case(case: Case, length: int) -> Case:
    nodes = case.graph.nodes[:length]
    outputs = tuple(spec.name for spec in case.graph.inputs) + tuple(node.name for node in nodes)
    return replace(case, graph=replace(case.graph, nodes=nodes, outputs=outputs))


def localize_program(backend: Backend, case: Case, runner: Runner, error: str = "") -> str:
    """The culprit of `backend`'s finding on the program `case` (`error`: the error it raised, if it did)."""
    nodes = case.graph.nodes
    for length in range(1, len(nodes) + 1):
        prefix = prefix_case(case, length)
        outcome = runner(backend, prefix)
        if outcome.status != OK:
            if error and normalize_error(outcome.error) == normalize_error(error):
                return nodes[length - 1].op
            continue
        reference = oracle.compute_reference(prefix, {backend.dtype})
        wrong = _wrong_values(backend, prefix, outcome, reference)
        if not wrong:
            continue
        last = nodes[length - 1]
        if last.name in wrong:
            return last.op
        target = next((node for node in nodes if node.name == last.inputs[0]), None)
        if last.op in WRITES and target is not None and target.op in VIEWS:
            table = aliases(prefix.graph, infer_shapes(prefix.graph))
            if all(table[name].root == table[last.name].root for name in wrong):
                return target.op
        return next((node.op for node in nodes if node.name in wrong), last.op)
    return nodes[-1].op


def _wrong_values(backend: Backend, prefix: Case, outcome, reference) -> set[str]:
    """The names of the prefix's values (inputs and nodes) the backend gets wrong in the first step it
    gets any wrong."""
    names = prefix.graph.outputs
    judged = verdict_of(backend, prefix, outcome, reference)
    if judged.verdict == verdicts.AGREE:
        return set()
    for step in range(prefix.graph.steps):
        indices = range(step * len(names), (step + 1) * len(names))
        wrong = {names[index % len(names)] for index in indices
                 if oracle.compare_output(outcome.outputs[index], index, reference, backend.dtype)[0] != verdicts.AGREE}
        if wrong:
            return wrong
    return set()
