"""Localization: the op a finding is charged to (its culprit, in the signature), found by running
the case with every node exposed and by running nodes alone on exact operands (NodeIsolation)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fuzzer import oracle, verdicts
from fuzzer.backends import Backend
from fuzzer.backends.numpy_ref import NumpyReference
from fuzzer.errors import normalize_error
from fuzzer.exact_dtypes import is_exact
from fuzzer.ir import Case, TensorSpec, split_arrays
from fuzzer.judging.accuracy import ACCURACY_FACTOR, ACCURACY_FLOOR
from fuzzer.judging.backend_verdict import verdict_of
from fuzzer.judging.contracts import localize_violation
from fuzzer.oracle.exact import ExactReference
from fuzzer.programs.localize import localize_program
from fuzzer.records import Finding
from fuzzer.running.execute import HANG, OK, UNSUPPORTED, Outcome, Runner, run_backend


def localized_finding(backend: Backend, case: Case, verdict: oracle.BackendVerdict, outcome: Outcome, runner: Runner,
                      peer: Backend | None = None) -> Finding:
    """The finding of `verdict`, localized (`peer`: the release an accuracy regression is measured against)."""
    if outcome.status != OK:
        if verdict.verdict != verdicts.CRASH:
            culprit = "-"
        elif case.graph.steps:  # a program (fuzzer/programs/localize.py)
            culprit = localize_program(backend, case, runner, outcome.error)
        else:
            culprit = localize_crash(backend, case, outcome.error, runner)
        sig = oracle.signature(verdict.verdict, backend.name, culprit, outcome.error)
    elif verdict.verdict == verdicts.ACCURACY_REGRESSION:
        culprit = localize_regression(backend, peer, case, runner, verdict.output or 0)
        sig = oracle.signature(verdicts.bucket_verdict(verdict.verdict), backend.name, culprit)
    elif verdict.verdict == verdicts.CONTRACT:  # no tolerance: the first node whose own cut breaks the contract
        culprit = localize_violation(backend, case, runner)
        sig = oracle.signature(verdict.verdict, backend.name, culprit)
    elif case.graph.steps:  # a program: charged to a statement by its prefixes (fuzzer/programs/localize.py)
        culprit = localize_program(backend, case, runner)
        sig = oracle.signature(verdicts.bucket_verdict(verdict.verdict), backend.name, culprit)
    else:
        # A wrong value that TF32 and reduced-precision defaults do not explain is localized without
        # them: an upstream matmul or conv off by TF32 alone would otherwise take the blame.
        strict = backend.has_precision_policy() and verdict.verdict != verdicts.PRECISION_POLICY
        culprit, at_culprit = localize(backend.strict_variant() if strict else backend, case, runner, verdict.output or 0)
        if (verdict.output or 0) >= len(case.graph.outputs):  # an extra output: a gradient, a vmapped copy
            culprit = f"{culprit}@{getattr(backend, 'transformation', 'extra')}"
        # Bucketed by what is wrong at the culprit: a layer_norm off by 0.3 that a later sqrt
        # turns into nan is one bug whether or not the sqrt follows (and the shrinker may cut it).
        if at_culprit and verdicts.get(at_culprit).wrong_value and verdicts.get(verdict.verdict).wrong_value:
            verdict = replace(verdict, verdict=at_culprit)
        sig = oracle.signature(verdicts.bucket_verdict(verdict.verdict), backend.name, culprit)
    return Finding(
        backend=backend.name,
        verdict=verdict.verdict,
        culprit=culprit,
        signature=sig,
        max_error=verdict.max_error,
        allowed=verdict.allowed,
        detail=verdict.detail,
        error=outcome.error,
    )


def probe_case(case: Case) -> Case:
    """The same case with every node an output, to see where values first go wrong."""
    graph = replace(case.graph, outputs=tuple(node.name for node in case.graph.nodes))
    return replace(case, graph=graph)


def localize(backend: Backend, case: Case, runner: Runner = run_backend, failing_output: int = 0) -> tuple[str, str | None]:
    """The op this backend gets wrong, for the finding's signature, and the verdict of that op's
    own value where one was judged (None where the blame is inferred).

    1. Probe: run the case with every node an output; the first node (in graph order) that
       the failing output depends on and whose value disagrees is the suspect.
    2. Isolate: run each node alone on the float64 reference's values of its operands, rounded
       to the backend's dtype (see NodeIsolation), the suspect's ancestors in graph order and
       then the suspect. The first node wrong alone is the culprit, even when a later op makes
       the error larger: a slightly wrong hardsigmoid seen through an amplifying sinh is the
       hardsigmoid's bug.
    3. Nobody wrong alone, but the suspect is wrong on the backend's own values of its operands,
       judged against the math on those values: the culprit. An honest float16 expm1 overflows
       to inf where the float64 value is 65,517; an rms_norm that makes 0 / inf nan is wrong,
       though isolation fed it 65,504.
    4. Nobody wrong alone: the suspect may be where an error made upstream *crosses* a
       tolerance (a saturating op's allowance scales with its large inputs, so a tanh 1% off on
       outputs near 1 is within it; a later mul by 1e3 is not). If the suspect alone, fed the
       backend's own values of its operands, is still wrong, the error came in with them: grow
       the suspect's subgraph backwards one ancestor at a time, other operands fed exact values,
       and blame the ancestor whose inclusion brings the error back. Otherwise the suspect's
       wrong value needs its context (an input layout an upstream permute made, which isolation
       feeds contiguous): the suspect.
    5. Nothing wrong when exposed and nothing wrong alone: a bug of the fusion of several ops:
       the failing output's op + '@fused'.
    """
    probe = probe_case(case)
    reference = oracle.compute_reference(probe, {backend.dtype})
    outcome = runner(backend, probe)
    nodes = case.graph.nodes
    # An extra output (a gradient, a vmapped copy; see reference_for) is charged to the last graph output.
    failing = case.graph.outputs[min(failing_output, len(case.graph.outputs) - 1)]
    blamable = ancestor_nodes(case.graph, failing) if failing_output < len(case.graph.outputs) else list(range(len(nodes)))
    suspect = suspect_verdict = None
    if outcome.status == OK and reference.defines_anything:
        for index in blamable:
            verdict = oracle.compare_output(outcome.outputs[index], index, reference, backend.dtype)[0]
            if verdict != verdicts.AGREE:
                suspect, suspect_verdict = index, verdict
                break
    candidates = blamable if suspect is None else ancestor_nodes(case.graph, nodes[suspect].name)
    # The probe reference holds every node's float64 value already: isolation reuses it.
    isolation = NodeIsolation(backend, case, runner, reference.outputs)
    for index in candidates:
        verdict = isolation.judge([index])[0]
        if verdict != verdicts.AGREE:
            return nodes[index].op, verdict
    if suspect is None:
        ops = {n.name: n.op for n in nodes}
        return f"{ops.get(failing, failing)}@fused", None
    if not isolation.faithful([suspect]):
        return nodes[suspect].op, suspect_verdict  # the first wrong node, whose float operand no cut can feed it
    own_operands = NodeIsolation(backend, case, runner, outcome.outputs[:len(nodes)])
    carried = own_operands.outcome(suspect)
    if own_operands.judge([suspect], carried)[0] != verdicts.AGREE:
        return nodes[suspect].op, suspect_verdict  # wrong on what it was given (an honest overflow's inf): its own bug
    if carried.status == OK and oracle.compare_output(carried.outputs[0], suspect, reference, backend.dtype)[0] != verdicts.AGREE:
        ancestors = candidates[:-1]
        for step in range(len(ancestors) - 1, -1, -1):
            if isolation.judge([*ancestors[step:], suspect])[0] != verdicts.AGREE:
                return nodes[ancestors[step]].op, None
    return nodes[suspect].op, suspect_verdict


def ancestor_nodes(graph, name: str) -> list[int]:
    """The positions of the nodes `name` depends on, itself included, in graph order."""
    needed = graph.ancestors([name])
    return [index for index, node in enumerate(graph.nodes) if node.name in needed]


def localize_regression(backend: Backend, peer: Backend | None, case: Case, runner: Runner = run_backend,
                        failing_output: int = 0) -> str:
    """The op of an accuracy regression (right by the tolerance, so no node is wrong): the first
    node that, alone, errs ACCURACY_FACTOR times as much as in the other release (`peer`) and
    at least ACCURACY_FLOOR of its allowance; the failing output's op where none does."""
    if peer is not None:
        mine = NodeIsolation(backend, case, runner)
        theirs = NodeIsolation(peer, case, runner, [mine.values[node.name] for node in case.graph.nodes])
        for index, node in enumerate(case.graph.nodes):
            ratio = mine.judge([index])[1]
            if ratio >= ACCURACY_FLOOR and ratio >= ACCURACY_FACTOR * theirs.judge([index])[1]:
                return node.op
    ops = {node.name: node.op for node in case.graph.nodes}
    output = case.graph.outputs[min(failing_output, len(case.graph.outputs) - 1)]
    return ops.get(output, output)


def localize_crash(backend: Backend, case: Case, error: str, runner: Runner = run_backend) -> str:
    """The op of the first node that raises the same error (normalized) when run alone (see
    NodeIsolation); else of the first that raises it run with its ancestors, which give it what
    isolation cannot (a strided input an upstream permute made: local_response_norm's view
    fails only on one); '-' if none does (the error needs several ops together)."""
    isolation = NodeIsolation(backend, case, runner)
    wanted = normalize_error(error)

    def raises(indices: list[int]) -> bool:
        outcome = isolation.runner(backend, isolation.case_for(indices))
        return outcome.status not in (OK, UNSUPPORTED, HANG) and normalize_error(outcome.error) == wanted

    nodes = case.graph.nodes
    for index, node in enumerate(nodes):
        if raises([index]):
            return node.op
    for index, node in enumerate(nodes):
        with_ancestors = ancestor_nodes(case.graph, node.name)
        if len(with_ancestors) > 1 and raises(with_ancestors):
            return node.op
    return "-"


class NodeIsolation:
    """Cases cut out of a case: some of its nodes (one, or a node with some of its ancestors), each
    operand they do not compute fed the float64 reference's value rounded to the backend's dtype
    (a graph input keeps its layout), parameters as in the case, the last node the output. What
    the nodes compute there is judged on exact inputs."""

    def __init__(self, backend: Backend, case: Case, runner: Runner, node_values: list[np.ndarray] | None = None):
        """`node_values`: every node's float64 reference value in graph order, where the caller
        has them already (localize's probe reference); computed here otherwise."""
        self.backend, self.case, self.runner = backend, case, runner
        inputs, self.params = split_arrays(case)
        exact = ExactReference(case).env(backend.dtype) if is_exact(backend.dtype) else None
        # Values an integer or bool backend's inputs cannot hold (an int tensor plus a float scalar is float).
        self.float_values = {name for name, value in exact.items() if np.asarray(value).dtype.kind == "f"} \
            if isinstance(exact, dict) else set()
        if isinstance(exact, dict) and node_values is None:  # its nodes get their exact values (oracle/exact.py)
            self.values = exact
        elif node_values is None:
            with np.errstate(all="ignore"):
                self.values = NumpyReference(dtype="float64").execute_all(case.graph, inputs, self.params)
        else:
            self.values = {**inputs, **{node.name: value for node, value in zip(case.graph.nodes, node_values)}}

    def case_for(self, indices: list[int]) -> Case:
        """The nodes at `indices` (in graph order) alone; the last one's value is the output."""
        graph = self.case.graph
        nodes = tuple(graph.nodes[index] for index in indices)
        computed = {node.name for node in nodes}
        specs = {spec.name: spec for spec in graph.inputs}
        operands = [name for name in dict.fromkeys(name for node in nodes for name in node.inputs) if name not in computed]
        arrays = {name: oracle.round_to_dtype(self.values[name], self.backend.dtype) for name in operands}
        arrays.update({f"{node.name}.{p}": v for node in nodes for p, v in self.params.get(node.name, {}).items()})
        inputs = tuple(specs.get(name) or TensorSpec(name, tuple(np.shape(self.values[name]))) for name in operands)
        return Case(replace(graph, inputs=inputs, nodes=nodes, outputs=(nodes[-1].name,)), arrays, self.case.seed)

    def faithful(self, indices: list[int]) -> bool:
        """Can the nodes at `indices` be fed every operand they do not compute? Not a float value on an
        integer or bool backend, whose inputs are cast to its dtype: nan would arrive as an integer."""
        computed = {self.case.graph.nodes[index].name for index in indices}
        return not any(name in self.float_values and name not in computed
                       for index in indices for name in self.case.graph.nodes[index].inputs)

    def outcome(self, index: int) -> Outcome:
        return self.runner(self.backend, self.case_for([index]))

    def judge(self, indices: list[int], outcome: Outcome | None = None) -> tuple[str, float]:
        """(verdict, error / allowed) of the nodes at `indices` alone (`outcome`: their run, where the
        caller has it); nodes that fail to run alone, or cannot be fed faithfully, are not blamed for a
        wrong value (their verdict there is agree, ratio 0)."""
        if not self.faithful(indices):
            return verdicts.AGREE, 0.0
        single = self.case_for(indices)
        outcome = outcome if outcome is not None else self.runner(self.backend, single)
        reference = oracle.compute_reference(single, {self.backend.dtype})
        if outcome.status != OK or not reference.defines_anything:
            return verdicts.AGREE, 0.0
        # Every output the backend returns, extra ones (gradients) included: a wrong backward is found alone too.
        judged = verdict_of(self.backend, single, outcome, reference)
        if judged.verdict == verdicts.UNSUPPORTED:
            return verdicts.AGREE, 0.0
        return judged.verdict, (judged.max_error / judged.allowed if judged.allowed > 0 else float(judged.max_error > 0))
