"""Checking one case: run every backend, judge against the reference, gate nondeterminism,
and localize each finding to the op where values first go wrong."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from fuzzer import oracle
from fuzzer.backends import Backend
from fuzzer.execute import HANG, OK, UNSUPPORTED, Outcome, run_backend
from fuzzer.ir import Case

Runner = Callable[[Backend, Case], Outcome]


@dataclass
class Finding:
    """One backend's disagreement on one case."""

    backend: str
    verdict: str
    culprit: str
    signature: str
    max_error: float = 0.0
    allowed: float = 0.0
    detail: str = ""
    error: str = ""

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class CaseResult:
    verdict: str
    verdicts: list[oracle.BackendVerdict] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    def finding_for(self, signature: str) -> Finding | None:
        return next((f for f in self.findings if f.signature == signature), None)


def _same_outputs(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b))


def check_case(case: Case, backends: list[Backend], reruns: int = 2, runner: Runner = run_backend) -> CaseResult:
    """The case's verdict and findings. `runner` runs a backend (in-process or in a worker)."""
    reference = oracle.compute_reference(case, {b.dtype for b in backends})
    if not reference.finite:
        return CaseResult(oracle.INVALID)
    result = CaseResult(oracle.AGREE)
    for backend in backends:
        outcome = runner(backend, case)
        result.seconds[backend.name] = outcome.seconds
        verdict = _verdict_of(backend, outcome, reference)
        if verdict.verdict in oracle.WRONG_VALUE_VERDICTS:
            verdict = _precision_policy(backend, case, verdict, reference, runner)
        if verdict.verdict in oracle.WRONG_VALUE_VERDICTS and _changes_on_rerun(backend, case, outcome, reruns, runner):
            verdict = replace(verdict, verdict=oracle.NONDETERMINISTIC, detail="two runs of the same case differ")
        result.verdicts.append(verdict)
        if verdict.verdict not in (oracle.AGREE, oracle.UNSUPPORTED):
            result.findings.append(_finding(backend, case, verdict, outcome, runner))
    result.verdict = oracle.worst_verdict([v.verdict for v in result.verdicts])
    return result


def _verdict_of(backend: Backend, outcome: Outcome, reference: oracle.Reference) -> oracle.BackendVerdict:
    if outcome.status == OK:
        return oracle.judge_outputs(backend.name, backend.dtype, outcome.outputs, reference)
    if outcome.status == UNSUPPORTED:
        return oracle.BackendVerdict(backend.name, oracle.UNSUPPORTED, detail=outcome.error)
    verdict = oracle.HANG if outcome.status == HANG else oracle.CRASH
    return oracle.BackendVerdict(backend.name, verdict, detail=oracle.error_headline(outcome.error)[:300])


def _precision_policy(backend: Backend, case: Case, verdict, reference, runner: Runner):
    """Re-run a wrong GPU result with TF32 and reduced-precision reductions off; if that
    fixes it, the difference is the backend's precision policy, not a bug."""
    if not backend.has_precision_policy():
        return verdict
    strict = runner(backend.strict_variant(), case)
    if strict.status != OK:
        return verdict
    strict_verdict = oracle.judge_outputs(backend.name, backend.dtype, strict.outputs, reference)
    if strict_verdict.verdict != oracle.AGREE:
        return verdict
    detail = (f"error {verdict.max_error:.3g} with default precision, {strict_verdict.max_error:.3g} with TF32 and "
              f"reduced-precision reductions off (allowed {verdict.allowed:.3g})")
    return replace(verdict, verdict=oracle.PRECISION_POLICY, detail=detail)


def _changes_on_rerun(backend: Backend, case: Case, first: Outcome, reruns: int, runner: Runner) -> bool:
    """The nondeterminism gate: a wrong answer that changes between runs is its own verdict."""
    for _ in range(reruns):
        again = runner(backend, case)
        if again.status != OK or not _same_outputs(first.outputs, again.outputs):
            return True
    return False


def _finding(backend: Backend, case: Case, verdict: oracle.BackendVerdict, outcome: Outcome, runner: Runner) -> Finding:
    if outcome.status != OK:
        culprit = "-"
        sig = oracle.signature(verdict.verdict, backend.name, culprit, outcome.error)
    else:
        culprit = localize(backend, case, runner, verdict.output or 0)
        sig = oracle.signature(verdict.verdict, backend.name, culprit)
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


def localize(backend: Backend, case: Case, runner: Runner = run_backend, failing_output: int = 0) -> str:
    """The op of the first node (in graph order) whose value this backend gets wrong.

    If every intermediate is right when exposed (a fusion bug that disappears once
    intermediates are materialized), the culprit is the failing output's op + '@fused'.
    """
    probe = probe_case(case)
    reference = oracle.compute_reference(probe, {backend.dtype})
    outcome = runner(backend, probe)
    if outcome.status == OK and reference.finite:
        for index, node in enumerate(probe.graph.nodes):
            verdict, *_ = oracle.compare_output(outcome.outputs[index], index, reference, backend.dtype)
            if verdict != oracle.AGREE:
                return node.op
    name = case.graph.outputs[failing_output]
    ops = {n.name: n.op for n in case.graph.nodes}
    return f"{ops.get(name, name)}@fused"


def still_fails_predicate(backend: Backend, signature: str, reruns: int = 2, runner: Runner = run_backend):
    """For the shrinker: does a candidate give the same verdict and signature on this backend?

    A nondeterministic finding must show up on eight checks in a row. Otherwise the
    shrinker walks down to inputs so small that the randomness rarely shows (dropout
    with p=0.1 on one element keeps the same mask in 2 re-runs two times in three) and
    the reproducer would be flaky; eight in a row stops it where detection is reliable.
    """
    confirmations = 8 if signature.startswith(oracle.NONDETERMINISTIC) else 1

    def still_fails(candidate: Case) -> bool:
        for _ in range(confirmations):
            try:
                result = check_case(candidate, [backend], reruns=reruns, runner=runner)
            except Exception:  # noqa: BLE001 - a candidate the reference cannot run is simply not kept
                return False
            if result.finding_for(signature) is None:
                return False
        return True

    return still_fails
