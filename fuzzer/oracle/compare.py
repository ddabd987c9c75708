"""Judging: a backend's outputs against the Reference, by the tolerance model; the verdicts, and
the signature of a finding.

Tolerance model
---------------
For a backend of dtype d and one output o of the graph, with r64 the float64
numpy reference and r_d the same reference evaluated in dtype d:

    err     = max |y - r64|                      (over finite reference entries)
    e_same  = max( max |r_d - r64|,              (what an honest dtype-d implementation gets wrong)
                   max |r_noisy - r64| )         (the same, by a rounding model: see below)
    scale   = max |v| over o and every value o depends on (inputs, weights, intermediates)
    sens    = sum of the op sensitivities (Numerics.sensitivity) of the nodes o depends on
    allowed = K_SAME * e_same + sens * (RTOL[d] * scale + TINY[d])

    agree  iff err <= allowed

r_d, r_noisy and the other honest models are in models.py.

Why each term: `e_same` is the PyTorch-minifier idea (judge error relative to
what a trusted implementation of the same dtype achieves), which absorbs
ill-conditioned cases (variance of near-constant data, cancellation) without a
loose global tolerance. One dtype-d run can be luckily exact (numpy's mean of 72
equal values is exact; XLA's is not, and layer_norm then amplifies that rounding
~300x through 1/sqrt(var + eps)), so `r_noisy` adds a rounding model: the float64
reference re-run with every op's inputs x moved to x * (1 + u * ROUNDING_SLACK *
unit_roundoff(d)) (backward error: rounding inside the op) and its output y moved by
u * ROUNDING_SLACK * unit_roundoff(d) * max(|y|, |op(|inputs|)|) (forward rounding),
u uniform in [-1, 1], seeded, NOISY_RUNS times. The op evaluated on absolute values is
the classic error-bound magnitude (sum |x_i| for a sum that cancels, sum |x_i w_i| for a
matmul). An op may also declare `forward_error` (OpDef): an error it makes that no input
perturbation explains (layer_norm's rounded mean of near-equal values, amplified by
1 / sqrt(var + eps)); it is added with one sign per run, and so is `intermediate_error`, where rounding
an op's own intermediates moves its result non-linearly (attention scores rounded to a tie). The spread of r_noisy is what
rounding at each op may legitimately do to this graph on these values. `scale` uses the largest magnitude along the way, not
the output's own, because rounding errors are made relative to intermediate
values (a sum that cancels to ~0 still carries eps * sum|x|). `sens` grows the
budget with the depth and kind of the graph. RTOL is a few hundred float32 ulps;
every seed bug class produces errors of order `scale`, far above it. TINY[d] is d's smallest
normal: a kernel that flushes subnormals (XLA on the CPU, Triton and fast-math CUDA kernels)
may read any subnormal inside an op as zero, in some uses and not others (Triton's tanhshrink
of a subnormal x is x - 0), so each op may be off by that much; it matters only where values
are that small.

Per entry
---------
`allowed` is one number for the whole output, and `scale` its largest magnitude anywhere along the
way, so an entry far below it could be off by far more than its own rounding (sqrt(4) beside an
input of 1e4 allowed 30%). Where the output agrees by `allowed`, each judged entry i must also be
within its own allowance:

    m_i     = the entry's own scale (entry_scale.py: |y_i|, the op on its operands' scales, and the
              reach of their rounding, propagated through the graph; a first-order error bound in u)
    worst   = max over judged entries j of max(dev_j - sens * TINY[d], 0) / m_j, with dev_j the
              largest |model_j - r64_j| of the NOISE models, r_d's included (the same runs as e_same)
    allowed_i = min(allowed, m_i * (K_SAME * worst + sens * RTOL[d]) + sens * TINY[d])

`worst` is the output's largest model deviation relative to the entry scales, not the entry's own
(a few random runs may all land near zero at one entry): one ill-conditioned entry loosens every
entry of its output, in proportion to their scales. The cap by `allowed` means it can only tighten.
The lazy path (compare_at_floor) agrees where each entry is within min(floor, sens * (RTOL[d] * m_i + TINY[d])),
which allowed_i never goes below. Outputs without entry scales (gradients, vmapped copies) keep `allowed`.

An output that is an index into its operand (argmax: Numerics.indexes) is judged exactly instead,
a different index only where the values it points at tie (indices.py).

Verdicts (per backend): agree, mismatch, nan-inf (non-finite where the reference
is finite in that dtype, or a non-finite class the reference defines but the backend
does not give), all-zeros / constant (a mismatch whose output is constant while
the reference is not), crash (the backend raised), hang, nondeterministic (set by
the re-run gate in check.py), precision-policy (wrong with the backend's default
TF32 / reduced-precision settings but right once check.py re-runs it with strict
settings: recorded with both errors, never counted as a bug).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fuzzer.errors import normalize_error
import fuzzer.oracle.paths as paths
from fuzzer.exact_dtypes import is_exact
import fuzzer.oracle.exact as exact
import fuzzer.oracle.complex as complex_oracle
from fuzzer.complex_dtypes import is_complex
from fuzzer.oracle.dtypes import RTOL, TINY, nonfinite_class
from fuzzer.oracle.indices import compare_indices
from fuzzer.oracle.reference import Reference
from fuzzer.records import BackendVerdict, Signature
from fuzzer.verdicts import AGREE, ALL_ZEROS, CONSTANT, MISMATCH, NAN_INF, severity

K_SAME = 10.0


def floor_allowance(reference: Reference, index: int, dtype: str) -> float:
    """The floor term of `allowed`, sens * (RTOL[d] * scale + TINY[d]). allowed_error adds K_SAME *
    e_same to it, and e_same >= 0 (each of its maxima starts at 0.0 and spans entries finite in r64
    and in the model: no nan), so `allowed` is never below the floor."""
    return reference.sensitivities[index] * (RTOL[dtype] * reference.scales[index] + TINY[dtype])


def allowed_error(reference: Reference, index: int, dtype: str, judged: np.ndarray | None = None) -> float:
    """The tolerance model's `allowed` for output `index` (see "Tolerance model" above)."""
    same, r64 = reference.same_dtype[dtype][index], reference.outputs[index]
    own = judged is None or judged is reference.judged_finite(dtype, index)
    if paths.FAST and own and (dtype, index) in reference.allowance:  # one per case: every backend of `dtype` asks
        return reference.allowance[dtype, index]
    judged = reference.judged_finite(dtype, index) if judged is None else judged
    with np.errstate(invalid="ignore", over="ignore"):
        if paths.FAST:  # the same maximum without copying the judged entries out (no nan among them)
            deviation = float(np.max(np.abs(same - r64), where=judged, initial=0.0))
        else:
            deviation = float(np.max(np.abs(same - r64)[judged], initial=0.0))
    e_same = max(deviation, reference.rounding_noise[dtype][index])
    allowed = K_SAME * e_same + floor_allowance(reference, index, dtype)
    if paths.FAST and own:
        reference.allowance[dtype, index] = allowed
    return allowed


def entry_allowance(reference: Reference, index: int, dtype: str) -> np.ndarray | None:
    """Per entry of output `index`, its allowance (see "Per entry" above): at most `allowed`, the
    output's. None where the output has no entry scales or deviations (gradients, vmapped copies)."""
    if (dtype, index) in reference.entry_allowances:
        return reference.entry_allowances[dtype, index]
    scales, deviation = reference.entry_scales[index], reference.deviation(dtype, index)
    allowance = None
    if scales is not None and deviation is not None:
        sens, tiny = reference.sensitivities[index], TINY[dtype]
        judged = reference.judged_finite(dtype, index)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            beyond_flush = np.maximum(deviation - sens * tiny, 0.0)
            relative = np.where(beyond_flush > 0, beyond_flush / scales, 0.0)  # inf where a scale is 0
            worst_relative = float(np.max(relative, where=judged, initial=0.0))
            own = scales * (K_SAME * worst_relative + sens * RTOL[dtype]) + sens * tiny
        allowance = np.fmin(allowed_error(reference, index, dtype), np.where(np.isnan(own), np.inf, own))
    reference.entry_allowances[dtype, index] = allowance
    return allowance


def entry_floor(reference: Reference, index: int, dtype: str, error: np.ndarray) -> bool:
    """Is every entry's `error` within its share of the floor, sens * (RTOL[d] * m_i + TINY[d])? Then
    it is within entry_allowance (which is at least that, or the output's floor where m_i passes the
    scale) without the honest models. |r64_i| (<= m_i) first: the entry scales only where it is not enough."""
    sens, floor = reference.sensitivities[index], floor_allowance(reference, index, dtype)
    r64 = reference.outputs[index]
    with np.errstate(invalid="ignore", over="ignore"):
        if np.all(error <= np.fmin(floor, sens * (RTOL[dtype] * np.abs(r64) + TINY[dtype]))):
            return True
        scales = reference.entry_scales[index]
        return scales is None or bool(np.all(error <= np.fmin(floor, sens * (RTOL[dtype] * scales + TINY[dtype]))))


def compare_output(y: np.ndarray, index: int, reference: Reference, dtype: str) -> tuple[str, float, float, str]:
    """(verdict, error, allowed, detail) for one output against the reference."""
    if is_exact(dtype):
        return exact.compare_exact(y, index, reference.exact.outputs(dtype)[index], reference.exact, dtype)
    if is_complex(dtype):
        return complex_oracle.compare_complex(y, index, reference.complex, dtype)
    r64 = reference.outputs[index]
    if tuple(y.shape) != tuple(r64.shape):
        return MISMATCH, float("inf"), 0.0, f"shape {list(y.shape)} != reference {list(r64.shape)}"
    finite = reference.judged_finite(dtype, index)
    bad = ~np.isfinite(y) & finite
    if np.any(bad):
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        return NAN_INF, float("inf"), 0.0, (f"{int(bad.sum())} non-finite values where the reference is finite, "
                                            f"e.g. at {list(at)}: {y[at]} where the reference is {r64[at]:.9g}")
    # Lazily, the candidates first: the longdouble run only where it can change the verdict
    # (defined = candidates minus float64's overflows).
    defined = reference.nonfinite_candidates[dtype][index] if paths.LAZY else reference.defined_nonfinite[dtype][index]
    wrong_class = defined if paths.FAST and not np.any(defined) else defined & (nonfinite_class(y) != reference.output_classes[index])
    if paths.LAZY and np.any(wrong_class):
        wrong_class &= reference.defined_nonfinite[dtype][index]
    if np.any(wrong_class):
        at = tuple(int(i) for i in np.argwhere(wrong_class)[0])
        return NAN_INF, float("inf"), 0.0, (f"{int(wrong_class.sum())} entries differ from a non-finite reference, "
                                            f"e.g. at {list(at)}: {y[at]} where the reference is {r64[at]}")
    if index in reference.indexers:
        return compare_indices(y, index, reference, dtype, finite, reference.same_dtype[dtype][index])
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf at entries outside `finite`
        if paths.FAST:  # the same maximum without copying the judged entries out (y is finite there: no nan)
            err = float(np.max(np.abs(y - r64), where=finite, initial=0.0))
        else:
            err = float(np.max(np.abs(y - r64)[finite], initial=0.0))
    allowed = allowed_error(reference, index, dtype, finite)
    worst, own = None, ""
    if err <= allowed:
        worst = _beyond_entry_allowance(y, index, reference, dtype, finite)
        if worst is None:
            return AGREE, err, allowed, ""
        own = f" (the entry's own allowance; the output's is {allowed:.3g})"
        err, allowed = float(abs(y[worst] - r64[worst])), float(entry_allowance(reference, index, dtype)[worst])
    judged_y, judged_r64 = y[finite], r64[finite]
    if judged_y.size and np.ptp(judged_y) == 0 and np.ptp(judged_r64) > allowed:
        if np.all(judged_y == 0):
            return ALL_ZEROS, err, allowed, "every value is zero; the reference is not constant"
        return CONSTANT, err, allowed, f"every value is {judged_y.flat[0]:.6g}; the reference is not constant"
    if worst is None:
        with np.errstate(invalid="ignore"):
            distance = np.where(finite, np.abs(y - r64), -1.0)
        worst = tuple(int(i) for i in np.unravel_index(np.argmax(distance), y.shape))
    return MISMATCH, err, allowed, f"worst at {list(worst)}: {y[worst]:.9g} where the reference is {r64[worst]:.9g}{own}"


def _beyond_entry_allowance(y: np.ndarray, index: int, reference: Reference, dtype: str, finite: np.ndarray) -> tuple | None:
    """The judged entry of `y` furthest past its own allowance (entry_allowance, in multiples of it); None where none is."""
    entry = entry_allowance(reference, index, dtype)
    if entry is None:
        return None
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        error = np.where(finite, np.abs(y - reference.outputs[index]), 0.0)
        excess = np.where(error > entry, error / entry, 0.0)  # inf where an entry allows nothing
    if not np.any(excess):
        return None
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(excess)), y.shape))


def compare_at_floor(y: np.ndarray, index: int, reference: Reference, dtype: str) -> tuple[str, float, float, str] | None:
    """compare_output's answer for one output without the honest models, where the floor settles
    it: `y` finite wherever r64 is, and within floor_allowance of it there; `y` of r64's non-finite
    class wherever r64 is not finite. Then the full comparison agrees too: it judges a subset of
    r64's finite entries, against an allowance no smaller, and every entry it says the math
    defines as non-finite has r64's class in `y`. None where the honest models are needed."""
    r64 = reference.outputs[index]
    if tuple(y.shape) != tuple(r64.shape):
        return None
    if index in reference.indexers:  # every entry right without r_d's indices, or the full comparison decides
        if not np.all(np.isfinite(y)):
            return None
        compared = compare_indices(y, index, reference, dtype, np.ones(r64.shape, dtype=bool), None)
        return compared if compared[0] == AGREE else None
    if reference.finite_everywhere:
        if not np.all(np.isfinite(y)):
            return None
        with np.errstate(over="ignore"):
            err = float(np.max(np.abs(y - r64), initial=0.0))
    else:
        classes = reference.output_classes[index]
        if not np.array_equal(nonfinite_class(y), classes):
            return None
        with np.errstate(over="ignore", invalid="ignore"):  # inf - inf where both are the same infinity
            err = float(np.max(np.abs(y - r64), where=classes == 0, initial=0.0))
    floor = floor_allowance(reference, index, dtype)
    if err > floor:
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        error = np.where(np.isfinite(r64), np.abs(y - r64), 0.0)
    return (AGREE, err, floor, "") if entry_floor(reference, index, dtype, error) else None


def judge_outputs(backend: str, dtype: str, outputs: list[np.ndarray], reference: Reference,
                  at_floor: bool = False) -> BackendVerdict:
    """The backend's verdict: that of its worst output. `at_floor`: agree at the floor where every
    output allows it (compare_at_floor), before asking for the honest models (see "Cost" in paths.py)."""
    if is_exact(dtype):
        return exact.judge_exact(backend, dtype, outputs, reference.exact)
    if is_complex(dtype):
        return complex_oracle.judge_complex(backend, dtype, outputs, reference.complex)
    if len(outputs) != len(reference.outputs):
        return BackendVerdict(backend, MISMATCH, detail=f"{len(outputs)} outputs, the reference has {len(reference.outputs)}")
    outputs = [np.asarray(y, dtype=np.float64) for y in outputs]
    if at_floor:
        compared = [compare_at_floor(y, index, reference, dtype) for index, y in enumerate(outputs)]
        if all(answer is not None for answer in compared):
            return replace(_worst(backend, compared), at_floor=True)
    return _worst(backend, [compare_output(y, index, reference, dtype) for index, y in enumerate(outputs)])


def _worst(backend: str, compared: list[tuple[str, float, float, str]]) -> BackendVerdict:
    """The verdict of the worst of the outputs' (verdict, error, allowed, detail): the most severe,
    then the largest error / allowed; the first of equals."""
    worst = BackendVerdict(backend, AGREE)
    for index, (verdict, err, allowed, detail) in enumerate(compared):
        ratio = err / allowed if allowed > 0 else (0.0 if err == 0 else float("inf"))
        worst_ratio = worst.max_error / worst.allowed if worst.allowed > 0 else (0.0 if worst.max_error == 0 else float("inf"))
        if severity(verdict) < severity(worst.verdict) or (verdict == worst.verdict and ratio > worst_ratio):
            worst = BackendVerdict(backend, verdict, err, allowed, index, detail)
    return worst


def signature(verdict: str, backend: str, culprit: str, error_text: str = "") -> Signature:
    """What a finding is, independent of its size: the shrinker must keep it, and buckets group by it.

    `culprit` is the op of the first node whose value disagrees (see localize.localize). Its form: records.Signature.
    """
    return Signature(verdict, backend, culprit, normalize_error(error_text) if error_text else None)