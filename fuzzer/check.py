"""Checking one case: run every backend, judge against the reference, gate nondeterminism,
and localize each finding to the op where values first go wrong."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Callable

import numpy as np

from fuzzer import oracle, verdicts
from fuzzer.backends import Backend, get_backend
from fuzzer.backends.numpy_ref import NumpyReference
from fuzzer.execute import HANG, OK, UNSUPPORTED, Outcome, run_backend
from fuzzer.errors import DevicePoisoned, DiskFull, UserError, error_headline, normalize_error
from fuzzer.ir import Case, TensorSpec, split_arrays
from fuzzer.records import CaseResult, Finding

Runner = Callable[[Backend, Case], Outcome]


def _same_outputs(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b))


def _same_non_finite(a: list[np.ndarray], b: list[np.ndarray], dtype: str) -> bool:
    """The same NaN and infinities at the same places, and the finite entries equal up to rounding
    (relative sqrt(unit roundoff) of the backends' `dtype`): a nan-inf failure of the same kernels run
    over another memory layout or module tree, whose sums round in another order."""
    rtol = float(np.sqrt(oracle.UNIT_ROUNDOFF[dtype]))

    def close(x: np.ndarray, y: np.ndarray) -> bool:
        if x.shape != y.shape or not np.issubdtype(x.dtype, np.floating) or not np.issubdtype(y.dtype, np.floating):
            return False
        finite = np.isfinite(x)
        if not np.array_equal(finite, np.isfinite(y)) or not np.array_equal(x[~finite], y[~finite], equal_nan=True):
            return False
        return bool(np.allclose(x[finite], y[finite], rtol=rtol, atol=0.0))

    return len(a) == len(b) and all(close(np.asarray(x), np.asarray(y)) for x, y in zip(a, b))


def check_case(case: Case, backends: list[Backend], reruns: int = 2, runner: Runner = run_backend,
               on_reference: Callable[[oracle.Reference], None] | None = None) -> CaseResult:
    """The case's verdict and findings. `runner` runs a backend (in-process or in a worker);
    `on_reference` is shown the case's reference first (the pipeline reads region keys from it)."""
    reference = oracle.compute_reference(case, {b.dtype for b in backends})
    if on_reference is not None:
        on_reference(reference)
    # A verdict may agree at the floor, without the honest models (oracle.py, "Cost"); without the
    # lazy path every verdict needs them, and so does knowing whether the case is invalid: asked
    # now, before any backend runs.
    at_floor = oracle.paths.LAZY
    if not at_floor and not reference.defines_anything:
        return CaseResult(verdicts.INVALID)
    result = CaseResult(verdicts.AGREE, judged=[b.name for b in backends])
    judged, outcomes = list(backends), []
    for backend in judged:  # grows: see below
        outcome = runner(backend, case)
        result.seconds[backend.name] = outcome.seconds
        verdict = _verdict_of(backend, case, outcome, reference, at_floor)
        if verdicts.get(verdict.verdict).wrong_value:
            verdict = _precision_policy(backend, case, verdict, outcome, reference, runner)
        if verdicts.get(verdict.verdict).wrong_value and _changes_on_rerun(backend, case, outcome, reruns, runner):
            verdict = replace(verdict, verdict=verdicts.NONDETERMINISTIC, detail="two runs of the same case differ")
        if verdicts.is_bug(verdict.verdict) and backend.derived_from:
            verdict = _inherited(backend, case, verdict, outcome, reference, runner)
            if verdict.verdict == verdicts.INHERITED and backend.derived_from not in result.judged:
                # The base computes the same wrong answer but was not asked (a compiler's own graph,
                # jax-eager off its budget): judge it too, so the bug is recorded where it lives
                # rather than hidden as `inherited`, which is no bug to triage.
                judged.append(get_backend(backend.derived_from))
                result.judged.append(backend.derived_from)
        result.verdicts.append(verdict)
        outcomes.append(outcome)
    result.verdicts = _in_full_where_compared(judged, result.verdicts, outcomes, case, reference)
    # Unless every verdict agreed at the floor, the honest models decide whether the case is invalid.
    if at_floor and not all(verdict.at_floor for verdict in result.verdicts) and not reference.defines_anything:
        return CaseResult(verdicts.INVALID)
    compared = {verdict.backend: verdict for verdict in result.verdicts}
    result.verdicts, compared_with = _accuracy_regressions(judged, result.verdicts)
    result.verdicts = [_regression_policy(backend, case, verdict, compared[compared_with[verdict.backend]], reference, runner)
                       if verdict.verdict == verdicts.ACCURACY_REGRESSION else verdict
                       for backend, verdict in zip(judged, result.verdicts)]
    by_name = {backend.name: backend for backend in judged}
    for backend, verdict, outcome in zip(judged, result.verdicts, outcomes):
        if verdicts.get(verdict.verdict).recorded:
            peer = by_name.get(compared_with.get(backend.name))
            result.findings.append(_finding(backend, case, verdict, outcome, runner, peer))
    result.verdict = verdicts.worst([v.verdict for v in result.verdicts])
    return result


def reference_for(backend: Backend, case: Case, reference: oracle.Reference) -> oracle.Reference:
    """What `backend`'s outputs are judged against: the numpy reference of the graph's outputs,
    followed by the backend's own reference for the extra outputs it returns after them
    (gradients, vmapped copies: a method `extra_reference(case)`; see oracle.py, "Extra outputs")."""
    extra_reference = getattr(backend, "extra_reference", None)
    return reference if extra_reference is None else oracle.extended(reference, extra_reference(case))


def _verdict_of(backend: Backend, case: Case, outcome: Outcome, reference: oracle.Reference,
                at_floor: bool = False) -> oracle.BackendVerdict:
    """`at_floor`: the verdict may agree at the floor, without the honest models (oracle.judge_outputs)."""
    if outcome.status == OK:
        try:
            judged_against = reference_for(backend, case, reference)
        except Exception as exc:  # noqa: BLE001 - a framework's float64 run that raises judges nothing
            return oracle.BackendVerdict(backend.name, verdicts.UNSUPPORTED,
                                         detail=f"the reference of its extra outputs raised: {error_headline(str(exc))[:200]}")
        return oracle.judge_outputs(backend.name, backend.dtype, outcome.outputs, judged_against, at_floor)
    if outcome.status == UNSUPPORTED:
        return oracle.BackendVerdict(backend.name, verdicts.UNSUPPORTED, detail=outcome.error)
    verdict = verdicts.HANG if outcome.status == HANG else verdicts.CRASH
    return oracle.BackendVerdict(backend.name, verdict, detail=error_headline(outcome.error)[:300])


def _in_full_where_compared(judged: list[Backend], backend_verdicts: list[oracle.BackendVerdict], outcomes: list[Outcome],
                            case: Case, reference: oracle.Reference) -> list[oracle.BackendVerdict]:
    """The verdicts, each one that agreed at the floor judged again in full where _accuracy_regressions
    compares it (errors as shares of the full allowance): where another release of its backend kind
    agrees too, and where it is a compiler or its eager peer whose errors at the floor could make an
    accuracy regression."""
    agreeing = Counter(verdict.backend.partition("@")[0] for verdict in backend_verdicts if verdict.verdict == verdicts.AGREE)
    by_name = {verdict.backend: verdict for verdict in backend_verdicts}
    compared = set()
    for backend, verdict in zip(judged, backend_verdicts):
        peer = by_name.get(eager_peer(backend))
        # A share of the floor is at least the share of the full allowance: none that could regress is missed.
        if (peer is not None and verdict.verdict == peer.verdict == verdicts.AGREE
                and _share(verdict) >= ACCURACY_FLOOR and (verdict.at_floor or peer.at_floor)):
            compared |= {verdict.backend, peer.backend}
    return [_verdict_of(backend, case, outcome, reference)
            if verdict.at_floor and (agreeing[verdict.backend.partition("@")[0]] > 1 or verdict.backend in compared)
            else verdict for backend, verdict, outcome in zip(judged, backend_verdicts, outcomes)]


# An error this many times another release's error on the same case, or eager's of a compiler's
# own release, is an accuracy regression, once it is at least ACCURACY_FLOOR of its allowance
# (below that, kernels differing by an ulp or two would be "10x" apart). Measured on 427 generated
# cases (7 compiler / eager pairs, CPU and CUDA): no compiled share of the allowance reached 0.1 on
# the CPU (the largest 0.074), and above 0.01 none was twice eager's; on the GPU, the two above 0.1
# and 10x eager were TF32 defaults (check_case's strict re-run makes them precision-policy).
ACCURACY_FACTOR = 10.0
ACCURACY_FLOOR = 0.1
# Compiling kinds (and their variants, `torch-compile-frozen`, `jax-jit-donate`) and the eager
# kind of their own framework.
EAGER_OF = {"torch-compile": "torch-eager", "torch-aoti": "torch-eager", "jax-jit": "jax-eager"}


def eager_peer(backend: Backend) -> str | None:
    """The name of the eager backend of `backend`'s framework, device, dtype and release where
    `backend` compiles (its kind, or the kind a plugin derived it from, is in EAGER_OF or a variant
    of one); None otherwise."""
    kind, _, release = backend.kind.partition("@")
    eager = next((eager for compiler, eager in EAGER_OF.items() if kind == compiler or kind.startswith(compiler + "-")), None)
    if eager is None:
        return None
    return f"{eager}:{backend.device}:{backend.dtype}" + (f"@{release}" if release else "")


def _share(verdict: oracle.BackendVerdict) -> float:
    """The verdict's error as a share of its allowance."""
    return verdict.max_error / verdict.allowed if verdict.allowed > 0 else 0.0


def _regresses_from(verdict: oracle.BackendVerdict, best: oracle.BackendVerdict) -> bool:
    """Do both agree, with `verdict` erring at least ACCURACY_FLOOR of its allowance and
    ACCURACY_FACTOR times `best`'s share of its own?"""
    return (verdict.verdict == verdicts.AGREE and best.verdict == verdicts.AGREE and _share(verdict) >= ACCURACY_FLOOR
            and _share(verdict) >= ACCURACY_FACTOR * _share(best))


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
            agreeing.setdefault(verdict.backend.partition("@")[0], []).append(verdict)
    by_name = {verdict.backend: verdict for verdict in backend_verdicts}
    regressed, compared_with = [], {}
    for backend, verdict in zip(judged, backend_verdicts):
        peers = [peer for peer in agreeing.get(verdict.backend.partition("@")[0], []) if peer is not verdict]
        best = min(peers, key=_share, default=None)
        eager = by_name.get(eager_peer(backend))
        if verdict.max_error < oracle.TINY.get(backend.dtype, 0.0):
            # Below the dtype's smallest normal the error is a flushed subnormal's (inductor's CUDA tanh
            # flushes, eager's does not: x - tanh(x) of 1e-38 is x), never a regression to act on.
            regressed.append(verdict)
            continue
        if best is not None and _regresses_from(verdict, best):
            worse_than = best
        elif eager is not None and _regresses_from(verdict, eager):
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
    return (_verdict_of(backend, case, strict, reference), strict) if strict.status == OK else None


def _strict_verdict(backend: Backend, case: Case, reference, runner: Runner):
    run = _strict_run(backend, case, reference, runner)
    return run[0] if run is not None else None


def _precision_policy(backend: Backend, case: Case, verdict, outcome: Outcome, reference, runner: Runner):
    """Re-run a wrong GPU result with TF32 and reduced-precision reductions off; if that
    fixes it, the difference is the backend's precision policy, not a bug."""
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
    verdict = _verdict_of(variant, case, outcome, reference)
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


def _regression_policy(backend: Backend, case: Case, verdict, peer_verdict, reference, runner: Runner):
    """An accuracy regression against `peer_verdict` that is gone once the backend's reduced-precision
    defaults are off (TF32 in a compiled attention's matmuls, where eager's kernel keeps full float32)
    is its precision policy, not a bug."""
    strict_verdict = _strict_verdict(backend, case, reference, runner)
    if strict_verdict is None or _regresses_from(strict_verdict, peer_verdict):
        return verdict
    detail = (f"error {verdict.max_error:.3g} with default precision, {strict_verdict.max_error:.3g} with TF32 and "
              f"reduced-precision reductions off, where {peer_verdict.backend} errs by {peer_verdict.max_error:.3g} "
              f"(allowed {verdict.allowed:.3g})")
    return replace(verdict, verdict=verdicts.PRECISION_POLICY, detail=detail)


def _inherited(backend: Backend, case: Case, verdict, outcome: Outcome, reference, runner: Runner):
    """A derived backend (a plugin's kernel overriding some ops of torch-eager, a transformation)
    that computes exactly what its base computes on this case, wrong the same way: that is the
    base's finding (a real torch bug the plugin did not touch), recorded as `inherited`, not
    charged to the plugin. A nan-inf finding is the same when both have it at the same entries and
    agree elsewhere up to rounding (_same_non_finite: a layout's sums round in another order), so
    it is `inherited` on every case, not only where the rounding happens to match. Any other
    difference from the base keeps the finding the plugin's."""
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
            and _verdict_of(base, case, base_outcome, reference).verdict == verdicts.NAN_INF)
    else:
        same = (base_outcome.status == outcome.status
                and normalize_error(base_outcome.error) == normalize_error(outcome.error))
    if not same:
        return verdict
    base_verdict = _verdict_of(base, case, base_outcome, reference)
    return replace(verdict, verdict=verdicts.INHERITED,
                   detail=f"{base.name}, which it derives from, gives the same output: {base_verdict.detail or verdict.detail}"[:300])


def _changes_on_rerun(backend: Backend, case: Case, first: Outcome, reruns: int, runner: Runner) -> bool:
    """The nondeterminism gate: a wrong answer that changes between runs is its own verdict."""
    for _ in range(reruns):
        again = runner(backend, case)
        if again.status != OK or not _same_outputs(first.outputs, again.outputs):
            return True
    return False


def _finding(backend: Backend, case: Case, verdict: oracle.BackendVerdict, outcome: Outcome, runner: Runner,
             peer: Backend | None = None) -> Finding:
    """The finding of `verdict`, localized (`peer`: the release an accuracy regression is measured against)."""
    if outcome.status != OK:
        culprit = localize_crash(backend, case, outcome.error, runner) if verdict.verdict == verdicts.CRASH else "-"
        sig = oracle.signature(verdict.verdict, backend.name, culprit, outcome.error)
    elif verdict.verdict == verdicts.ACCURACY_REGRESSION:
        culprit = localize_regression(backend, peer, case, runner, verdict.output or 0)
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
    blamable = _ancestor_nodes(case.graph, failing) if failing_output < len(case.graph.outputs) else list(range(len(nodes)))
    suspect = suspect_verdict = None
    if outcome.status == OK and reference.defines_anything:
        for index in blamable:
            verdict = oracle.compare_output(outcome.outputs[index], index, reference, backend.dtype)[0]
            if verdict != verdicts.AGREE:
                suspect, suspect_verdict = index, verdict
                break
    candidates = blamable if suspect is None else _ancestor_nodes(case.graph, nodes[suspect].name)
    # The probe reference holds every node's float64 value already: isolation reuses it.
    isolation = NodeIsolation(backend, case, runner, reference.outputs)
    for index in candidates:
        verdict = isolation.judge([index])[0]
        if verdict != verdicts.AGREE:
            return nodes[index].op, verdict
    if suspect is None:
        ops = {n.name: n.op for n in nodes}
        return f"{ops.get(failing, failing)}@fused", None
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


def _ancestor_nodes(graph, name: str) -> list[int]:
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
        with_ancestors = _ancestor_nodes(case.graph, node.name)
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
        if node_values is None:
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

    def outcome(self, index: int) -> Outcome:
        return self.runner(self.backend, self.case_for([index]))

    def judge(self, indices: list[int], outcome: Outcome | None = None) -> tuple[str, float]:
        """(verdict, error / allowed) of the nodes at `indices` alone (`outcome`: their run, where the
        caller has it); nodes that fail to run alone are not blamed for a wrong value (their verdict
        there is agree, ratio 0)."""
        single = self.case_for(indices)
        outcome = outcome if outcome is not None else self.runner(self.backend, single)
        reference = oracle.compute_reference(single, {self.backend.dtype})
        if outcome.status != OK or not reference.defines_anything:
            return verdicts.AGREE, 0.0
        # Every output the backend returns, extra ones (gradients) included: a wrong backward is found alone too.
        judged = _verdict_of(self.backend, single, outcome, reference)
        if judged.verdict == verdicts.UNSUPPORTED:
            return verdicts.AGREE, 0.0
        return judged.verdict, (judged.max_error / judged.allowed if judged.allowed > 0 else float(judged.max_error > 0))


def still_fails_predicate(backend: Backend, signature: str, reruns: int = 2, runner: Runner = run_backend):
    """For the shrinker: does a candidate give the same verdict and signature on this backend?

    A nondeterministic finding must show up on eight checks in a row. Otherwise the
    shrinker walks down to inputs so small that the randomness rarely shows (dropout
    with p=0.1 on one element keeps the same mask in 2 re-runs two times in three) and
    the reproducer would be flaky; eight in a row stops it where detection is reliable.
    """
    confirmations = 8 if signature.startswith(verdicts.NONDETERMINISTIC) else 1

    def still_fails(candidate: Case) -> bool:
        for _ in range(confirmations):
            try:
                result = check_case(candidate, [backend], reruns=reruns, runner=runner)
            except (DevicePoisoned, DiskFull):  # no verdict of this process counts any more: the shrink ends with it
                raise
            except Exception:  # noqa: BLE001 - a candidate the reference cannot run is simply not kept
                return False
            if result.finding_for(signature) is None:
                return False
        return True

    return still_fails
