"""The oracle: is a backend's output right? Verdicts, the tolerance model, and signatures.

Tolerance model
---------------
For a backend of dtype d and one output o of the graph, with r64 the float64
numpy reference and r_d the same reference evaluated in dtype d:

    err     = max |y - r64|                      (over finite reference entries)
    e_same  = max( max |r_d - r64|,              (what an honest dtype-d implementation gets wrong)
                   max |r_noisy - r64| )         (the same, by a rounding model: see below)
    scale   = max |v| over o and every value o depends on (inputs, weights, intermediates)
    sens    = sum of the op sensitivities (OpDef.sensitivity) of the nodes o depends on
    allowed = K_SAME * e_same + RTOL[d] * sens * scale

    agree  iff err <= allowed

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
1 / sqrt(var + eps)); it is added with one sign per run. The spread of r_noisy is what
rounding at each op may legitimately do to this graph on these values. `scale` uses the largest magnitude along the way, not
the output's own, because rounding errors are made relative to intermediate
values (a sum that cancels to ~0 still carries eps * sum|x|). `sens` grows the
budget with the depth and kind of the graph. RTOL is a few hundred float32 ulps;
every seed bug class produces errors of order `scale`, far above it.

Verdicts (per backend): agree, mismatch, nan-inf (non-finite where r64 *and*
r_d are finite), all-zeros / constant (a mismatch whose output is constant while
the reference is not), crash (the backend raised), hang, nondeterministic (set by
the re-run gate in check.py), precision-policy (wrong with the backend's default
TF32 / reduced-precision settings but right once check.py re-runs it with strict
settings: recorded with both errors, never counted as a bug). A reference that is
itself non-finite makes the case `invalid`: it is skipped, never reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from fuzzer.backends import interpret, split_arrays
from fuzzer.backends.numpy_ref import NumpyReference
from fuzzer.ir import Case, Graph
from fuzzer.ops import get_op

K_SAME = 10.0
NOISY_RUNS = 2
ROUNDING_SLACK = 4.0  # a few units of roundoff per op: reductions accumulate ~sqrt(n) of them
UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
RTOL = {"float64": 1e-9, "float32": 3e-5, "float16": 1e-2, "bfloat16": 8e-2}
# numpy has no bfloat16 arithmetic: its same-dtype reference is float16's, whose error is smaller,
# which RTOL["bfloat16"] makes up for.
SAME_DTYPE_REFERENCE = {"float64": "float64", "float32": "float32", "float16": "float16", "bfloat16": "float16"}

AGREE = "agree"
MISMATCH = "mismatch"
NAN_INF = "nan-inf"
ALL_ZEROS = "all-zeros"
CONSTANT = "constant"
CRASH = "crash"
HANG = "hang"
NONDETERMINISTIC = "nondeterministic"
PRECISION_POLICY = "precision-policy"  # wrong only under a reduced-precision default (TF32): not a bug
INVALID = "invalid"
UNSUPPORTED = "unsupported"  # the backend cannot run an op of the case there (fuzzer.errors.OpUnsupported)
# Worst first: a case's verdict is its worst backend verdict.
SEVERITY = [CRASH, HANG, NONDETERMINISTIC, NAN_INF, ALL_ZEROS, CONSTANT, MISMATCH, PRECISION_POLICY, AGREE, UNSUPPORTED]
WRONG_VALUE_VERDICTS = {MISMATCH, NAN_INF, ALL_ZEROS, CONSTANT}


@dataclass
class Reference:
    """The float64 reference of a case, plus what the tolerance model needs."""

    outputs: list[np.ndarray]
    scales: list[float]
    sensitivities: list[float]
    same_dtype: dict[str, list[np.ndarray]] = field(default_factory=dict)
    rounding_noise: dict[str, list[float]] = field(default_factory=dict)

    @property
    def finite(self) -> bool:
        return all(np.all(np.isfinite(out)) for out in self.outputs)


def _ancestors(graph: Graph, name: str) -> set[str]:
    seen, stack = set(), [name]
    producers = {node.name: node for node in graph.nodes}
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if current in producers:
            stack.extend(producers[current].inputs)
    return seen


def compute_reference(case: Case, dtypes: set[str]) -> Reference:
    graph = case.graph
    inputs, params = split_arrays(case)
    env = NumpyReference(dtype="float64").execute_all(graph, inputs, params)
    outputs, scales, sensitivities = [], [], []
    for out in graph.outputs:
        ancestors = _ancestors(graph, out)
        values = [env[a] for a in ancestors] + [
            p for node, ps in params.items() if node in ancestors for p in ps.values()
        ]
        magnitudes = [np.max(np.abs(v[np.isfinite(v)])) for v in values if np.any(np.isfinite(v))]
        scales.append(float(max(magnitudes, default=0.0)))
        sensitivities.append(1.0 + sum(get_op(n.op).sensitivity for n in graph.nodes if n.name in ancestors))
        outputs.append(np.asarray(env[out], dtype=np.float64))
    reference = Reference(outputs, scales, sensitivities)
    for dtype in dtypes:
        same = SAME_DTYPE_REFERENCE[dtype]
        if same == "float64":
            reference.same_dtype[dtype] = outputs
        else:
            env_d = NumpyReference(dtype=same).execute_all(graph, inputs, params)
            reference.same_dtype[dtype] = [np.asarray(env_d[o], dtype=np.float64) for o in graph.outputs]
        reference.rounding_noise[dtype] = _rounding_noise(case, inputs, params, outputs, UNIT_ROUNDOFF[dtype])
    return reference


def _rounding_noise(case: Case, inputs: dict, params: dict, outputs: list[np.ndarray], roundoff: float) -> list[float]:
    """Per output, the largest deviation from the float64 reference when every op's result is
    perturbed by a relative error of at most `roundoff` (a model of rounding at each op)."""
    noise = [0.0] * len(outputs)
    for run in range(NOISY_RUNS):
        rng = np.random.default_rng([case.seed % 2**32, run])

        systematic = 1.0 if run % 2 == 0 else -1.0

        def perturbed(op_name):
            reference_fn = get_op(op_name).reference
            forward_error = get_op(op_name).forward_error

            def run_op(xs, ps, attrs):
                # Backward error: a stable op computes the exact result of slightly perturbed
                # inputs; this is what exposes rounding *inside* an op (layer_norm's mean of
                # equal values, amplified by 1 / sqrt(var + eps)).
                xs = [x * (1.0 + ROUNDING_SLACK * roundoff * rng.uniform(-1.0, 1.0, np.shape(x))) for x in xs]
                out = np.asarray(reference_fn(xs, ps, attrs), dtype=np.float64)
                # Rounding is relative to the magnitudes summed, not to a result that cancelled:
                # the op on absolute values gives that (sum |x_i| for sum, sum |x_i w_i| for matmul).
                magnitude = np.abs(np.asarray(reference_fn([np.abs(x) for x in xs], {k: np.abs(v) for k, v in ps.items()}, attrs)))
                bound = np.maximum(np.abs(out), np.where(np.isfinite(magnitude), magnitude, 0.0))
                out = out + ROUNDING_SLACK * roundoff * bound * rng.uniform(-1.0, 1.0, out.shape)
                if forward_error is not None:
                    # An op's own declared error (e.g. a rounded mean shared by a whole row) is
                    # systematic: the same sign everywhere, so downstream sums do not cancel it.
                    out = out + systematic * ROUNDING_SLACK * roundoff * np.asarray(forward_error(xs, ps, attrs))
                return out

            return run_op

        with np.errstate(all="ignore"):
            noisy = interpret(case.graph, inputs, params, perturbed)
        for index, (y, r64) in enumerate(zip(noisy, outputs)):
            finite = np.isfinite(y) & np.isfinite(r64)
            noise[index] = max(noise[index], float(np.max(np.abs(y - r64)[finite], initial=0.0)))
    return noise


@dataclass
class BackendVerdict:
    backend: str
    verdict: str
    max_error: float = 0.0
    allowed: float = 0.0
    output: int | None = None  # index of the worst output
    detail: str = ""

    def to_dict(self) -> dict:
        return {
            "backend": self.backend,
            "verdict": self.verdict,
            "max_error": self.max_error,
            "allowed": self.allowed,
            "output": self.output,
            "detail": self.detail,
        }


def allowed_error(reference: Reference, index: int, dtype: str, judged: np.ndarray | None = None) -> float:
    """The tolerance model's `allowed` for output `index` (see the module docstring)."""
    same, r64 = reference.same_dtype[dtype][index], reference.outputs[index]
    judged = np.isfinite(same) if judged is None else judged
    e_same = max(float(np.max(np.abs(same - r64)[judged], initial=0.0)), reference.rounding_noise[dtype][index])
    return K_SAME * e_same + RTOL[dtype] * reference.sensitivities[index] * reference.scales[index]


def compare_output(y: np.ndarray, index: int, reference: Reference, dtype: str) -> tuple[str, float, float, str]:
    """(verdict, error, allowed, detail) for one output against the reference."""
    r64 = reference.outputs[index]
    if tuple(y.shape) != tuple(r64.shape):
        return MISMATCH, float("inf"), 0.0, f"shape {list(y.shape)} != reference {list(r64.shape)}"
    same = reference.same_dtype[dtype][index]
    same_finite = np.isfinite(same)
    bad = ~np.isfinite(y) & same_finite
    if np.any(bad):
        return NAN_INF, float("inf"), 0.0, f"{int(bad.sum())} non-finite values where the reference is finite"
    judged = same_finite & np.isfinite(y)
    err = float(np.max(np.abs(y - r64)[judged], initial=0.0))
    allowed = allowed_error(reference, index, dtype, judged)
    if err <= allowed:
        return AGREE, err, allowed, ""
    finite_y = y[np.isfinite(y)]
    reference_spread = float(np.ptp(r64)) if r64.size else 0.0
    if finite_y.size and np.ptp(finite_y) == 0 and reference_spread > allowed:
        if np.all(finite_y == 0):
            return ALL_ZEROS, err, allowed, "every value is zero; the reference is not constant"
        return CONSTANT, err, allowed, f"every value is {finite_y.flat[0]:.6g}; the reference is not constant"
    return MISMATCH, err, allowed, ""


def judge_outputs(backend: str, dtype: str, outputs: list[np.ndarray], reference: Reference) -> BackendVerdict:
    if len(outputs) != len(reference.outputs):
        return BackendVerdict(backend, MISMATCH, detail=f"{len(outputs)} outputs, the reference has {len(reference.outputs)}")
    worst = BackendVerdict(backend, AGREE)
    for index, y in enumerate(outputs):
        verdict, err, allowed, detail = compare_output(np.asarray(y, dtype=np.float64), index, reference, dtype)
        ratio = err / allowed if allowed > 0 else (0.0 if err == 0 else float("inf"))
        worst_ratio = worst.max_error / worst.allowed if worst.allowed > 0 else (0.0 if worst.max_error == 0 else float("inf"))
        if worse(verdict, worst.verdict) or (verdict == worst.verdict and ratio > worst_ratio):
            worst = BackendVerdict(backend, verdict, err, allowed, index, detail)
    return worst


def worse(a: str, b: str) -> bool:
    """Is verdict a more severe than verdict b?"""
    return SEVERITY.index(a) < SEVERITY.index(b)


def worst_verdict(verdicts: list[str]) -> str:
    return min(verdicts, key=SEVERITY.index, default=AGREE)


def error_headline(text: str) -> str:
    """The first line of an error ("Type: message"): later lines are context, such as the
    "Set TORCH_LOGS=..." advice that ends every dynamo error."""
    return text.strip().splitlines()[0] if text and text.strip() else ""


def normalize_error(text: str) -> str:
    """An error's headline without numbers, addresses or paths, for dedup."""
    first = error_headline(text)
    first = re.sub(r"0x[0-9a-fA-F]+", "<addr>", first)
    first = re.sub(r"(/[\w.\-]+)+", "<path>", first)
    first = re.sub(r"\d+", "N", first)
    return first[:160]


def signature(verdict: str, backend: str, culprit: str, error_text: str = "") -> str:
    """What a finding is, independent of its size: the shrinker must keep it, and buckets group by it.

    `culprit` is the op of the first node whose value disagrees (see check.localize).
    """
    parts = [verdict, backend, culprit]
    if error_text:
        parts.append(normalize_error(error_text))
    return " | ".join(parts)
