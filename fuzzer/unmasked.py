"""Nothing masked where nothing forces it: a backend that computes every node anyway (torch eager, jax
eager, a plugin's kernels derived from them: `Backend.computes_every_node`) has every node's value
judged, not only the graph's outputs. A relu wrong on negative inputs that a later clamp hides, or an
error swamped by a huge value in a later sum, is then still found.

A compiled backend keeps being judged on the outputs only: asking it for every node changes what it
fuses, so the probe would test another program than the one it compiles.

A wrong intermediate becomes a case of its own: the drawn graph cut to that node's ancestors, the
node its only output, checked like any case (gates, localization, signature). Judging a node as an
output is judging it as its own graph would be (its scale and sensitivity come from its ancestors
only), so that case shows the same finding, and the shrinker works on it unchanged.

Cost: the probe runs each such backend once more, on the case with every node an output (torch
eager ~30 ms; jax eager more where it traces again, an RNN's scan). On every case that was 9% of a
worker's time (60 graphs of the default backends, seed 1, in one process on a loaded 2-core machine;
the cheap tier's share of a campaign is smaller still, but each second of it also buys the compilers
their share), so one case in PROBED_ONE_IN is probed, chosen by its seed (a replay probes the same
ones): 2% measured alike.
"""

from __future__ import annotations

from dataclasses import replace

from fuzzer import oracle, verdicts
from fuzzer.backends import Backend
from fuzzer.ir import Case
from fuzzer.judging.check import CaseResult, check_case
from fuzzer.judging.localize import probe_case
from fuzzer.running.execute import OK, Runner
from fuzzer.shrinking.shrink import rebuild

PROBED_ONE_IN = 4


def unmasked_findings(case: Case, backends: list[Backend], result: CaseResult, reruns: int,
                      runner: Runner) -> list[tuple[Case, CaseResult]]:
    """(the case cut at the node, its result) for each backend that computes every node, agreed on
    `case`'s outputs (`result`), and gets an intermediate node wrong; [] where none does, or where the
    case is not one of the probed share (PROBED_ONE_IN)."""
    if case.seed % PROBED_ONE_IN:
        return []
    agreed = {verdict.backend for verdict in result.verdicts if verdict.verdict == verdicts.AGREE}
    probing = [backend for backend in backends if backend.computes_every_node and backend.name in agreed]
    outputs = set(case.graph.outputs)
    if not probing or all(node.name in outputs for node in case.graph.nodes):
        return []
    probe = probe_case(case)
    reference = oracle.compute_reference(probe, {backend.dtype for backend in probing})
    found = []
    for backend in probing:
        outcome = runner(backend, probe)
        if outcome.status != OK:  # it ran the case itself: a failure of the wider graph alone is not judged
            continue
        verdict = oracle.judge_outputs(backend.name, backend.dtype, outcome.outputs, reference, at_floor=True)
        if not verdicts.get(verdict.verdict).wrong_value:
            continue
        node = case.graph.nodes[verdict.output].name
        cut = rebuild(case, replace(case.graph, outputs=(node,)))
        checked = check_case(cut, [backend], reruns, runner) if cut is not None else None
        if checked is not None and checked.findings:
            checked.findings = [replace(finding, detail=_at_node(node, finding.detail)) for finding in checked.findings]
            found.append((cut, checked))
    return found


def _at_node(node: str, detail: str) -> str:
    return f"at node {node}, an intermediate the drawn graph's later ops hid: {detail}"
