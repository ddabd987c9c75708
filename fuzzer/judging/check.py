"""Checking one case: run every backend, judge its outputs against the reference, pass each verdict
through the gates (GATES, below: what a verdict becomes after the oracle judged it), and localize
each finding (fuzzer/judging/localize.py)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from fuzzer import oracle, verdicts
from fuzzer.backend_names import BackendName
from fuzzer.backends import Backend, get_backend
from fuzzer.errors import DevicePoisoned, DiskFull, OutsideDomain, UserError, normalize_error
from fuzzer.ir import Case
from fuzzer.judging import contracts
from fuzzer.judging.accuracy import ACCURACY_FLOOR, regresses_from, share
from fuzzer.judging.backend_verdict import verdict_of
from fuzzer.judging.localize import localized_finding
from fuzzer.records import CaseResult, Finding  # noqa: F401 - Finding: imported from here by many modules
from fuzzer.running.execute import OK, Outcome, Runner, run_backend


@dataclass
class Judging:
    """One case being checked: what the gates read, and the verdicts they rewrite."""

    case: Case
    reference: oracle.Reference
    runner: Runner
    reruns: int
    at_floor: bool  # a verdict may agree at the floor, without the honest models (oracle.paths.LAZY)
    judged: list[Backend]  # grows: the inherited gate adds a base that was not asked
    outcomes: list[Outcome] = field(default_factory=list)
    verdicts: list[oracle.BackendVerdict] = field(default_factory=list)
    # Each accuracy regression's backend -> the verdict it was measured against, as it was then.
    measured_against: dict[str, oracle.BackendVerdict] = field(default_factory=dict)
    invalid: bool = False  # the reference defines no entry: the case is skipped


@dataclass(frozen=True)
class Gate:
    """A rewrite of verdicts after the oracle judged them; its reason is its function's docstring.
    `each`: it rewrites one backend's verdict as that backend runs, `rewrite(judging, backend,
    verdict, outcome) -> verdict`; otherwise the case's verdicts together once every backend ran,
    `rewrite(judging)`, in place."""

    name: str
    rewrite: Callable
    each: bool = False

    @property
    def reason(self) -> str:
        return self.rewrite.__doc__.split("\n")[0]


def _precision_policy(judging: Judging, backend: Backend, verdict, outcome: Outcome):
    """A wrong value that is right with TF32 and reduced-precision reductions off is the backend's precision policy.

    The strict re-run (Backend.strict_variant) decides. Where the backend caps what its policy
    explains (precision_policy_limit: cuDNN's RNN kernels), an error past the cap must be within it
    on the default run's own kernels, and a nan-inf is measured entry by entry."""
    if not verdicts.get(verdict.verdict).wrong_value:
        return verdict
    case, reference, runner = judging.case, judging.reference, judging.runner
    limit = backend.precision_policy_limit(case.graph)
    if verdict.verdict == verdicts.NAN_INF and np.isfinite(limit):
        return _nonfinite_precision_policy(backend, case, verdict, outcome, reference, runner, limit)
    if verdict.max_error > limit * verdict.allowed and not _within_limit_on_same_kernels(backend, case, reference, runner, limit):
        return verdict
    strict_verdict = _strict_verdict(backend, case, reference, runner)
    if strict_verdict is None or strict_verdict.verdict != verdicts.AGREE:
        return verdict
    detail = (f"error {verdict.max_error:.3g} with default precision, {strict_verdict.max_error:.3g} with TF32 and "
              f"reduced-precision reductions off, and cuDNN's RNN kernels where the graph has an RNN (allowed {verdict.allowed:.3g})")
    return replace(verdict, verdict=verdicts.PRECISION_POLICY, detail=detail)


def _rerun(judging: Judging, backend: Backend, verdict, outcome: Outcome):
    """A wrong value that changes when the case runs again is `nondeterministic`, a verdict of its own."""
    if not verdicts.get(verdict.verdict).wrong_value:
        return verdict
    for _ in range(judging.reruns):
        again = judging.runner(backend, judging.case)
        if again.status != OK or not _same_outputs(outcome.outputs, again.outputs):
            return replace(verdict, verdict=verdicts.NONDETERMINISTIC, detail="two runs of the same case differ")
    return verdict


def _inherited(judging: Judging, backend: Backend, verdict, outcome: Outcome):
    """A derived backend's bug that its base computes the same way is the base's: `inherited`, the base judged too.

    A derived backend (a plugin's kernel overriding some ops of torch-eager, a transformation)
    that computes exactly what its base computes on this case, wrong the same way: that is the
    base's finding (a real torch bug the plugin did not touch), recorded as `inherited`, not
    charged to the plugin. A nan-inf finding is the same when both have it at the same entries and
    agree elsewhere up to rounding (_same_non_finite: a layout's sums round in another order), so
    it is `inherited` on every case, not only where the rounding happens to match. Any other
    difference from the base keeps the finding the plugin's. Where the base was not asked (a
    compiler's own graph, jax-eager off its budget), it is judged too, so the bug is recorded
    where it lives rather than hidden as `inherited`, which is no bug to triage."""
    if not (verdicts.is_bug(verdict.verdict) and backend.derived_from):
        return verdict
    case, reference, runner = judging.case, judging.reference, judging.runner
    try:
        base = get_backend(backend.derived_from)
    except UserError:  # the base does not exist here (a plugin's base from another session)
        return verdict
    base_outcome = runner(base, case)
    if outcome.status == OK and base_outcome.status == OK:
        # A backend with extra outputs (gradients) shares the base's bug only in the outputs both compute.
        shared = len(base_outcome.outputs)
        ours = outcome.outputs[:shared]
        # A nan-inf failure is its non-finite entries: the same ones are the base's failure, however the rest rounds.
        same = (verdict.output is None or verdict.output < shared) and (
            _same_outputs(base_outcome.outputs, ours) or verdict.verdict == verdicts.NAN_INF
            and _same_non_finite(base_outcome.outputs, ours, backend.dtype)
            and verdict_of(base, case, base_outcome, reference).verdict == verdicts.NAN_INF)
    else:
        same = (base_outcome.status == outcome.status
                and normalize_error(base_outcome.error) == normalize_error(outcome.error))
    if not same:
        return verdict
    if backend.derived_from not in {judged.name for judged in judging.judged}:
        judging.judged.append(get_backend(backend.derived_from))
    base_verdict = verdict_of(base, case, base_outcome, reference)
    return replace(verdict, verdict=verdicts.INHERITED,
                   detail=f"{base.name}, which it derives from, gives the same output: {base_verdict.detail or verdict.detail}"[:300])


def _contract(judging: Judging, backend: Backend, verdict, outcome: Outcome):
    """An agreeing verdict of a kind that promises bits (strict numerics, batch invariance) is judged against the promise too.

    With no tolerance, and only where its release documents the promise (fuzzer/judging/contracts.py);
    elsewhere the verdict's detail says why it was not judged."""
    if verdict.verdict != verdicts.AGREE or not getattr(backend, "contract", ""):
        return verdict
    return contracts.judged(backend, judging.case, verdict, outcome, judging.runner)


def _in_full_where_compared(judging: Judging) -> None:
    """A verdict that agreed at the floor is judged again in full where accuracy-regression compares it.

    Compared (errors as shares of the full allowance): where another release of its backend kind
    agrees too, and where it is a compiler or its eager peer whose errors at the floor could make
    an accuracy regression."""
    judged, backend_verdicts = judging.judged, judging.verdicts
    agreeing = Counter(BackendName.parse(verdict.backend).here for verdict in backend_verdicts if verdict.verdict == verdicts.AGREE)
    by_name = {verdict.backend: verdict for verdict in backend_verdicts}
    compared = set()
    for backend, verdict in zip(judged, backend_verdicts):
        peer = by_name.get(eager_peer(backend))
        # A share of the floor is at least the share of the full allowance: none that could regress is missed.
        if (peer is not None and verdict.verdict == peer.verdict == verdicts.AGREE
                and share(verdict) >= ACCURACY_FLOOR and (verdict.at_floor or peer.at_floor)):
            compared |= {verdict.backend, peer.backend}
    judging.verdicts = [verdict_of(backend, judging.case, outcome, judging.reference)
                        if verdict.at_floor and (agreeing[BackendName.parse(verdict.backend).here] > 1 or verdict.backend in compared)
                        else verdict for backend, verdict, outcome in zip(judged, backend_verdicts, judging.outcomes)]


def _invalid(judging: Judging) -> None:
    """A case whose reference defines no entry is `invalid`, unless every verdict agreed at the floor.

    Agreeing at the floor needs no honest models; any other verdict needs them, and they decide."""
    judging.invalid = (judging.at_floor and not all(verdict.at_floor for verdict in judging.verdicts)
                       and not judging.reference.defines_anything)


def _accuracy_regression(judging: Judging) -> None:
    """An agreeing verdict ten times another release's error, or its eager peer's, is an `accuracy-regression`."""
    compared = {verdict.backend: verdict for verdict in judging.verdicts}
    judging.verdicts, compared_with = _accuracy_regressions(judging.judged, judging.verdicts)
    judging.measured_against = {name: compared[peer] for name, peer in compared_with.items()}


def _regression_policy(judging: Judging) -> None:
    """An accuracy regression that is gone with the precision defaults off is the backend's precision policy.

    (TF32 in a compiled attention's matmuls, where eager's kernel keeps full float32.)"""
    judging.verdicts = [_regression_policy_of(judging, backend, verdict) for backend, verdict in zip(judging.judged, judging.verdicts)]


def _regression_policy_of(judging: Judging, backend: Backend, verdict):
    if verdict.verdict != verdicts.ACCURACY_REGRESSION:
        return verdict
    peer_verdict = judging.measured_against[verdict.backend]
    strict_verdict = _strict_verdict(backend, judging.case, judging.reference, judging.runner)
    if strict_verdict is None or regresses_from(strict_verdict, peer_verdict):
        return verdict
    detail = (f"error {verdict.max_error:.3g} with default precision, {strict_verdict.max_error:.3g} with TF32 and "
              f"reduced-precision reductions off, where {peer_verdict.backend} errs by {peer_verdict.max_error:.3g} "
              f"(allowed {verdict.allowed:.3g})")
    return replace(verdict, verdict=verdicts.PRECISION_POLICY, detail=detail)


# What happens to a verdict after the oracle judged it, in this order; the order is the behaviour.
# The gates that rewrite each backend's verdict as it runs come first (check_case runs them in its
# loop over the backends, the rest after it).
GATES = (
    # First: a wrong value the backend's TF32 / reduced-precision defaults explain is no bug, even
    # where those kernels also vary between runs (it never reaches the re-run).
    Gate("precision-policy", _precision_policy, each=True),
    # Before `inherited`: what is compared with the base's single run is a settled wrong value.
    Gate("rerun", _rerun, each=True),
    # Last of the per-backend gates: the base it adds to the judged backends runs through all of them.
    Gate("inherited", _inherited, each=True),
    # After `inherited`, which compares whole outputs, never the runs a contract compares: a plugin
    # derived from a contract kind is charged with the violations of its own runs.
    Gate("contract", _contract, each=True),
    # Once every backend ran (it compares each with its peers), before `invalid`: a verdict judged
    # again in full has computed the honest models, which then decide whether the case is invalid.
    Gate("in-full-where-compared", _in_full_where_compared),
    # Before the cross-backend comparisons: an invalid case has nothing to compare.
    Gate("invalid", _invalid),
    # On the verdicts judged in full where compared (errors as shares of the full allowance).
    Gate("accuracy-regression", _accuracy_regression),
    # After `accuracy-regression`, whose verdicts it re-asks with the precision defaults off.
    Gate("regression-policy", _regression_policy),
)


def check_case(case: Case, backends: list[Backend], reruns: int = 2, runner: Runner = run_backend,
               on_reference: Callable[[oracle.Reference], None] | None = None) -> CaseResult:
    """The case's verdict and findings. `runner` runs a backend (in-process or in a worker);
    `on_reference` is shown the case's reference first (the pipeline reads region keys from it)."""
    try:
        reference = oracle.compute_reference(case, {b.dtype for b in backends})
    except OutsideDomain:  # the values are outside an op's domain: nothing to judge
        return CaseResult(verdicts.INVALID)
    if on_reference is not None:
        on_reference(reference)
    # A verdict may agree at the floor, without the honest models (fuzzer/oracle/paths.py, "Cost"); without the
    # lazy path every verdict needs them, and so does knowing whether the case is invalid: asked
    # now, before any backend runs.
    at_floor = oracle.paths.LAZY
    if not at_floor and not reference.defines_anything:
        return CaseResult(verdicts.INVALID)
    result = CaseResult(verdicts.AGREE)
    judging = Judging(case, reference, runner, reruns, at_floor, judged=list(backends))
    for backend in judging.judged:  # grows: see Judging
        outcome = runner(backend, case)
        result.seconds[backend.name] = outcome.seconds
        verdict = verdict_of(backend, case, outcome, reference, at_floor)
        for gate in GATES:
            if gate.each:
                verdict = gate.rewrite(judging, backend, verdict, outcome)
        judging.verdicts.append(verdict)
        judging.outcomes.append(outcome)
    for gate in GATES:
        if not gate.each:
            gate.rewrite(judging)
            if judging.invalid:
                return CaseResult(verdicts.INVALID)
    result.judged, result.verdicts = [backend.name for backend in judging.judged], judging.verdicts
    by_name = {backend.name: backend for backend in judging.judged}
    for backend, verdict, outcome in zip(judging.judged, judging.verdicts, judging.outcomes):
        if verdicts.get(verdict.verdict).recorded:
            peer = judging.measured_against.get(backend.name)
            result.findings.append(localized_finding(backend, case, verdict, outcome, runner, peer and by_name[peer.backend]))
    result.verdict = verdicts.worst([v.verdict for v in result.verdicts])
    return result


def _same_outputs(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b))


def _same_non_finite(a: list[np.ndarray], b: list[np.ndarray], dtype: str) -> bool:
    """The same NaN and infinities at the same places, and the finite entries equal up to rounding
    (relative sqrt(unit roundoff) of the backends' `dtype`): a nan-inf failure of the same kernels run
    over another memory layout or module tree, whose sums round in another order."""
    rtol = float(np.sqrt(oracle.UNIT_ROUNDOFF.get(dtype, 0.0)))  # a complex backend's outputs are not `close` (below)

    def close(x: np.ndarray, y: np.ndarray) -> bool:
        if x.shape != y.shape or not np.issubdtype(x.dtype, np.floating) or not np.issubdtype(y.dtype, np.floating):
            return False
        finite = np.isfinite(x)
        if not np.array_equal(finite, np.isfinite(y)) or not np.array_equal(x[~finite], y[~finite], equal_nan=True):
            return False
        return bool(np.allclose(x[finite], y[finite], rtol=rtol, atol=0.0))

    return len(a) == len(b) and all(close(np.asarray(x), np.asarray(y)) for x, y in zip(a, b))


# Compiling kinds (and their variants, `torch-compile-frozen`, `jax-jit-donate`) and the eager
# kind of their own framework.
EAGER_OF = {"torch-compile": "torch-eager", "torch-aoti": "torch-eager", "jax-jit": "jax-eager"}


def eager_peer(backend: Backend) -> str | None:
    """The name of the eager backend of `backend`'s framework, device, dtype and release where
    `backend` compiles (its kind, or the kind a plugin derived it from, is in EAGER_OF or a variant
    of one); None otherwise."""
    parsed = BackendName.parse(backend.kind)  # KIND@ENV: the kind in another environment
    kind = parsed.kind
    eager = next((eager for compiler, eager in EAGER_OF.items() if kind == compiler or kind.startswith(compiler + "-")), None)
    if eager is None:
        return None
    return str(BackendName(eager, backend.device, backend.dtype, parsed.env or None))


def _accuracy_regressions(judged: list[Backend], backend_verdicts: list[oracle.BackendVerdict]
                          ) -> tuple[list[oracle.BackendVerdict], dict[str, str]]:
    """Backends that agree while erring ACCURACY_FACTOR times or more another's share of the allowance
    (the same allowance for both: one reference, one dtype) get `accuracy-regression`: against
    the same kind in another release (`KIND:DEVICE:DTYPE` and `...@ENV`, see envs.py), and a
    compiler against eager of its own framework, device, dtype and release (eager_peer). Also
    returns, for each, the backend it was compared with."""
    agreeing: dict[str, list[oracle.BackendVerdict]] = {}
    for verdict in backend_verdicts:
        if verdict.verdict == verdicts.AGREE:
            agreeing.setdefault(BackendName.parse(verdict.backend).here, []).append(verdict)
    by_name = {verdict.backend: verdict for verdict in backend_verdicts}
    regressed, compared_with = [], {}
    for backend, verdict in zip(judged, backend_verdicts):
        peers = [peer for peer in agreeing.get(BackendName.parse(verdict.backend).here, []) if peer is not verdict]
        best = min(peers, key=share, default=None)
        eager = by_name.get(eager_peer(backend))
        if verdict.max_error < oracle.TINY.get(backend.dtype, 0.0):
            # Below the dtype's smallest normal the error is a flushed subnormal's (inductor's CUDA tanh
            # flushes, eager's does not: x - tanh(x) of 1e-38 is x), never a regression to act on.
            regressed.append(verdict)
            continue
        if best is not None and regresses_from(verdict, best):
            worse_than = best
        elif eager is not None and regresses_from(verdict, eager):
            worse_than = eager
        else:
            regressed.append(verdict)
            continue
        regressed.append(replace(verdict, verdict=verdicts.ACCURACY_REGRESSION, detail=(
            f"error {verdict.max_error:.3g} (allowed {verdict.allowed:.3g}) where {worse_than.backend} "
            f"errs by {worse_than.max_error:.3g} (allowed {worse_than.allowed:.3g}) on this case")))
        compared_with[verdict.backend] = worse_than.backend
    return regressed, compared_with


def _strict_run(backend: Backend, case: Case, reference, runner: Runner) -> tuple[oracle.BackendVerdict, Outcome] | None:
    """The backend's verdict and outcome with TF32 and reduced-precision reductions off; None where
    it has no such defaults or does not run that way."""
    if not backend.has_precision_policy():
        return None
    strict = runner(backend.strict_variant(), case)
    return (verdict_of(backend, case, strict, reference), strict) if strict.status == OK else None


def _strict_verdict(backend: Backend, case: Case, reference, runner: Runner):
    run = _strict_run(backend, case, reference, runner)
    return run[0] if run is not None else None


def _within_limit_on_same_kernels(backend: Backend, case: Case, reference, runner: Runner, limit: float) -> bool:
    """Whether the default run's own kernels err by at most `limit` allowances with TF32 and
    reduced-precision reductions off: then what the default run erred past the limit is TF32's (the
    strict run decides the rest). cuDNN's GRU with TF32 took 0.79 - 0.73 - 0.04 = 0.022 from 10-bit
    inputs, 3.6% off and 115 allowances past 1 / x (GPU campaign case 449); a kernel that drops its
    hidden state errs as much without TF32, and stays a finding."""
    variant = backend.same_kernels_strict_variant(case.graph)
    if variant is None:
        return False
    outcome = runner(variant, case)
    if outcome.status != OK:
        return False
    verdict = verdict_of(variant, case, outcome, reference)
    return verdict.verdict == verdicts.AGREE or verdict.max_error <= limit * verdict.allowed  # a nan-inf's error is inf


def _nonfinite_precision_policy(backend: Backend, case: Case, verdict, outcome: Outcome, reference, runner: Runner,
                                limit: float):
    """A nan-inf where the policy's error is capped (cuDNN's RNN kernels: a GRU that drops its state
    must stay a finding), which a class change leaves unmeasured. cuDNN's GRU put an output of -4.4e-5
    at +4.4e-5, and sqrt made that 0.0066 against nan (GPU campaign case 117). It is the policy's where
    the strict run agrees, every input is finite (cuDNN's conv drops a -inf input: a finding), the
    default run computed a number wherever the strict one has none (never the reverse), and their
    finite entries are within the cap of each other."""
    if not all(np.all(np.isfinite(array)) for array in case.arrays.values()):
        return verdict
    strict = _strict_run(backend, case, reference, runner)
    if strict is None or strict[0].verdict != verdicts.AGREE:
        return verdict
    for index, (default, exact) in enumerate(zip(outcome.outputs, strict[1].outputs)):
        default, exact = np.asarray(default, dtype=np.float64), np.asarray(exact, dtype=np.float64)
        if default.shape != exact.shape or np.any(~np.isfinite(default) & (oracle.nonfinite_class(default) != oracle.nonfinite_class(exact))):
            return verdict
        both = np.isfinite(default) & np.isfinite(exact)
        if np.any(np.abs(default - exact)[both] > limit * oracle.allowed_error(reference, index, backend.dtype)):
            return verdict
    detail = (f"{verdict.detail}, with default precision; with TF32 off and torch's own RNN kernels it agrees, "
              f"and the default run's finite values are within {limit:g}x the allowance of that run's")
    return replace(verdict, verdict=verdicts.PRECISION_POLICY, detail=detail)


# A shrunk mismatch keeps its error at least this many times its allowance (or the original's ratio,
# where that was less): else the shrinker walks to the tolerance's edge, where a reproducer's 3-digit
# allowance or another machine's rounding flips it (a softmax shrunk from 5.2x to 1.0006x).
SHRUNK_MISMATCH_MARGIN = 1.5


def still_fails_predicate(backend: Backend, signature: str, reruns: int = 2, runner: Runner = run_backend,
                          original: Finding | None = None):
    """For the shrinker: does a candidate give the same verdict and signature on this backend?

    A nondeterministic finding must show up on eight checks in a row. Otherwise the
    shrinker walks down to inputs so small that the randomness rarely shows (dropout
    with p=0.1 on one element keeps the same mask in 2 re-runs two times in three) and
    the reproducer would be flaky; eight in a row stops it where detection is reliable.
    A mismatch keeps a margin over its allowance (SHRUNK_MISMATCH_MARGIN, `original`: the finding shrunk).
    """
    confirmations = 8 if signature.startswith(verdicts.NONDETERMINISTIC) else 1
    margin = 1.0
    if original is not None and original.verdict == verdicts.MISMATCH and original.allowed > 0:
        margin = max(1.0, min(SHRUNK_MISMATCH_MARGIN, original.max_error / original.allowed))

    def still_fails(candidate: Case) -> bool:
        for _ in range(confirmations):
            try:
                result = check_case(candidate, [backend], reruns=reruns, runner=runner)
            except (DevicePoisoned, DiskFull):  # no verdict of this process counts any more: the shrink ends with it
                raise
            except Exception:  # noqa: BLE001 - a candidate the reference cannot run is simply not kept
                return False
            found = result.finding_for(signature)
            if found is None or (margin > 1.0 and found.max_error < margin * found.allowed):
                return False
        return True

    return still_fails
