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

Non-finite values
-----------------
The oracle judges what the reference defines, entry by entry, against the honest models
of dtype d: r_d, the rounding runs, and a flush-to-zero run (subnormals flushed at every
op, as XLA does on CPU). The rounding runs also snap a result within its rounding bound of
zero to +0 (run 0) or -0 (run 1), since an honest op may return an exact zero of either
sign, and make inf an entry whose magnitude op(|inputs|) passes d's largest value (an
honest float32 sum may overflow in its own order).
  * r64 finite and every model finite: the entry is judged by the tolerance above;
  * r64 non-finite, every model gives the same class (nan, +inf or -inf), and the value is
    no float64 overflow (it stays non-finite in longdouble): the math defines it (log(0) =
    -inf, 0 * inf = nan; relu(-inf) = 0 is finite and judged as such), and the backend
    must give exactly that class;
  * anything else (a float32-only overflow, a class that depends on rounding: a log of a
    difference that cancels to +-0): undefined in dtype d, skipped.
A case is `invalid` only when no entry of any output is defined.

Extra outputs (gradients)
-------------------------
A backend may return more arrays than the graph has outputs (check.reference_for): jax-vmap
adds its other batch copies, judged against the numpy reference of each copy; the gradient
backends (fuzzer/backends/gradients.py) add d<outputs, cotangents>/d(graph input), which numpy
has no reference for. Their reference (`framework_reference`) comes from the framework's own
eager autograd: r64 at the case's values; r_d = float64 at the values rounded to dtype d (what
an exact implementation computes from the numbers the backend is given); as honest models,
the eager run in dtype d itself (gradients.py says what that hides), NOISY_RUNS float64 runs
with the values and every op's output moved by ROUNDING_SLACK units of d's roundoff (rounding
of the intermediates, carried into the backward pass), and r64 with d's subnormals flushed (a
gradient that underflows in d). The formula and the verdicts are the ones above, with scale =
the largest gradient magnitude of the case and sens = 1 + the sensitivities of every node (the
backward pass crosses all of them). One rule differs: no non-finite gradient is defined (an
entry non-finite in r64 is skipped), since autograd's nan is often a chain-rule artifact (0 *
inf through a masked branch) that a compiler may rightly simplify away. What this cannot see:
a gradient rule wrong in float64 eager too, and rounding inside one backward op beyond what
moving its inputs and output models (which would show as a false mismatch; the property tests
measure it).

Verdicts (per backend): agree, mismatch, nan-inf (non-finite where the reference
is finite in that dtype, or a non-finite class the reference defines but the backend
does not give), all-zeros / constant (a mismatch whose output is constant while
the reference is not), crash (the backend raised), hang, nondeterministic (set by
the re-run gate in check.py), precision-policy (wrong with the backend's default
TF32 / reduced-precision settings but right once check.py re-runs it with strict
settings: recorded with both errors, never counted as a bug).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fuzzer.backends.numpy_ref import NumpyReference
from fuzzer.errors import normalize_error
from fuzzer.ir import Case, Graph, interpret, split_arrays
from fuzzer.ops import get_op
from fuzzer.verdicts import AGREE, ALL_ZEROS, CONSTANT, MISMATCH, NAN_INF, severity

K_SAME = 10.0
NOISY_RUNS = 2
ROUNDING_SLACK = 4.0  # a few units of roundoff per op: reductions accumulate ~sqrt(n) of them
UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
RTOL = {"float64": 1e-9, "float32": 3e-5, "float16": 1e-2, "bfloat16": 8e-2}
# numpy has no bfloat16 arithmetic: its same-dtype reference is float16's, whose error is smaller,
# which RTOL["bfloat16"] makes up for.
SAME_DTYPE_REFERENCE = {"float64": "float64", "float32": "float32", "float16": "float16", "bfloat16": "float16"}



def round_to_dtype(values: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values rounded to `dtype` (and back), so the backend and the reference start from
    the same numbers; bfloat16 through ml_dtypes (a jax dependency), float32 where it is missing."""
    if dtype == "bfloat16":
        try:
            import ml_dtypes

            target = ml_dtypes.bfloat16
        except ImportError:
            target = np.float32
    else:
        target = np.dtype(dtype).type
    with np.errstate(over="ignore"):
        return np.asarray(values).astype(target).astype(np.float64)


def nonfinite_class(values: np.ndarray) -> np.ndarray:
    """Per entry: 0 finite, 1 nan, 2 +inf, 3 -inf."""
    return np.select([np.isnan(values), values == np.inf, values == -np.inf], [1, 2, 3], 0)


@dataclass
class Reference:
    """The float64 reference of a case, plus what the tolerance model needs."""

    outputs: list[np.ndarray]
    scales: list[float]
    sensitivities: list[float]
    same_dtype: dict[str, list[np.ndarray]] = field(default_factory=dict)
    rounding_noise: dict[str, list[float]] = field(default_factory=dict)
    # Per dtype and output: the entries judged by the tolerance (finite in every honest model of
    # the dtype) and the non-finite entries the math defines (see "Non-finite values").
    judged: dict[str, list[np.ndarray]] = field(default_factory=dict)
    defined_nonfinite: dict[str, list[np.ndarray]] = field(default_factory=dict)

    def judged_finite(self, dtype: str, index: int) -> np.ndarray:
        return self.judged[dtype][index]

    @property
    def defines_anything(self) -> bool:
        """Is at least one entry of one output defined in some dtype? If not, the case is invalid."""
        return any(
            np.any(self.judged_finite(dtype, index) | self.defined_nonfinite[dtype][index])
            for dtype in self.same_dtype
            for index in range(len(self.outputs))
        )


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
    with np.errstate(all="ignore"):  # non-finite values are judged, not warned about
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
    overflowed = _float64_overflow(graph, inputs, params, outputs)
    for dtype in dtypes:
        same = SAME_DTYPE_REFERENCE[dtype]
        if same == "float64":
            reference.same_dtype[dtype] = outputs
        else:
            with np.errstate(all="ignore"):
                env_d = NumpyReference(dtype=same).execute_all(graph, inputs, params)
            reference.same_dtype[dtype] = [np.asarray(env_d[o], dtype=np.float64) for o in graph.outputs]
        # What honest dtype-d implementations may give: numpy in that dtype, the rounding model's
        # runs, and the flush-to-zero run. An entry is judged by the tolerance where all of them
        # are finite, defined non-finite where all give r64's non-finite class, skipped otherwise.
        models = [reference.same_dtype[dtype], *_rounding_runs(case, inputs, params, dtype)]
        if dtype != "float64":
            models.append(_flush_to_zero_run(graph, inputs, params, dtype))
        reference.judged[dtype], reference.defined_nonfinite[dtype], reference.rounding_noise[dtype] = [], [], []
        for index, r64 in enumerate(outputs):
            runs = [np.broadcast_to(np.asarray(model[index], dtype=np.float64), r64.shape) for model in models]
            judged = np.isfinite(r64) & np.logical_and.reduce([np.isfinite(y) for y in runs])
            reference.judged[dtype].append(judged)
            reference.defined_nonfinite[dtype].append(
                ~np.isfinite(r64) & ~overflowed[index]
                & np.logical_and.reduce([nonfinite_class(y) == nonfinite_class(r64) for y in runs]))
            with np.errstate(invalid="ignore"):
                reference.rounding_noise[dtype].append(
                    max((float(np.max(np.abs(y - r64)[judged], initial=0.0)) for y in runs[1:]), default=0.0))
    return reference


def _float64_overflow(graph: Graph, inputs: dict, params: dict, outputs: list[np.ndarray]) -> list[np.ndarray]:
    """Per output, the non-finite float64 entries that are finite in a wider exponent range
    (numpy's longdouble: x87 extended, up to ~1e4932, on x86-64).

    Those are overflows, not values the math defines: log(exp(1061)) is 1061, which XLA's
    algebraic simplifier returns, while float64 gives log(inf) = inf. Where longdouble is no
    wider than float64 (some platforms), nothing is marked and poles and overflows look alike.
    """
    if not any(np.any(~np.isfinite(out)) for out in outputs) or np.finfo(np.longdouble).max <= np.finfo(np.float64).max:
        return [np.zeros(np.shape(out), dtype=bool) for out in outputs]
    wide = np.dtype(np.longdouble)

    def widened(op_name):
        reference_fn = get_op(op_name).reference
        return lambda xs, ps, attrs: np.asarray(reference_fn(xs, ps, attrs), dtype=wide)

    with np.errstate(all="ignore"):
        try:
            wide_outputs = interpret(graph, {k: np.asarray(v, dtype=wide) for k, v in inputs.items()},
                                     {node: {k: np.asarray(v, dtype=wide) for k, v in ps.items()} for node, ps in params.items()},
                                     widened)
        except (TypeError, ValueError):  # a reference that cannot take longdouble: no overflow known
            return [np.zeros(np.shape(out), dtype=bool) for out in outputs]
    return [~np.isfinite(out) & np.isfinite(np.broadcast_to(np.asarray(w), np.shape(out))) for out, w in zip(outputs, wide_outputs)]


def _flushed(values: np.ndarray, dtype: str) -> np.ndarray:
    """`values` with the subnormals of `dtype` flushed to (signed) zero."""
    # bfloat16 has float32's exponent range, so float32's smallest normal.
    tiny = float(np.finfo(np.float16 if dtype == "float16" else np.float32).tiny)
    values = np.asarray(values, dtype=np.float64)
    return np.where(np.abs(values) < tiny, np.copysign(0.0, values), values)


def _flush_to_zero_run(graph: Graph, inputs: dict, params: dict, dtype: str) -> list[np.ndarray]:
    """The float64 reference with subnormals of `dtype` flushed to (signed) zero at every op's
    inputs and outputs.

    Flushing subnormals (FTZ/DAZ) is a documented platform policy, not a bug: XLA on CPU does
    it (jnp.add(1e-40, 0.0) is 0.0 in float32, x / x is nan, exp(-87.5) is 0), so do fast-math
    GPU kernels. Ops make subnormals from normal inputs too (silu(-99) is -1e-41), so the run
    is always made. The oracle counts it like rounding: its deviation joins e_same, and an
    entry that flushing makes non-finite, or finite, is undefined in that dtype.
    """
    flush = lambda values: _flushed(values, dtype)  # noqa: E731

    def flushing(op_name):
        reference_fn = get_op(op_name).reference
        return lambda xs, ps, attrs: flush(reference_fn([flush(x) for x in xs], {k: flush(v) for k, v in ps.items()}, attrs))

    with np.errstate(all="ignore"):
        flushed_inputs = {name: flush(value) for name, value in inputs.items()}
        return [np.asarray(out, dtype=np.float64) for out in interpret(graph, flushed_inputs, params, flushing)]


def _perturb(out: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """out + delta on finite entries; non-finite entries stay as the math made them, and an
    unbounded delta on a finite entry makes it nan: its value is then undefined in this dtype."""
    delta = np.broadcast_to(delta, np.shape(out))
    return np.where(np.isfinite(out), np.where(np.isfinite(delta), out + delta, np.nan), out)


def _rounding_runs(case: Case, inputs: dict, params: dict, dtype: str) -> list[list[np.ndarray]]:
    """NOISY_RUNS runs of the float64 reference with every op's inputs and result perturbed by a
    few units of `roundoff` (a model of rounding at each op; see the module docstring).

    A result within its rounding bound of zero may come out as an exact zero in an honest
    implementation (gelu(-6) is 0 in float32 through 1 + erf cancelling), and the sign of such
    a zero is the implementation's choice; run 0 snaps those entries to +0 and run 1 to -0, so
    whatever an op downstream makes of a zero (rsqrt(+-0) = +-inf) counts as undefined there.
    Where the op's magnitude (the op on absolute values) passes the dtype's largest value, an
    honest implementation may overflow in its own order of operations (a float32 sum of
    values near 3e38): those entries are made inf in the runs, so they are undefined too.
    Piecewise-constant ops (OpDef.exact) read graph inputs, the same numbers everywhere:
    their inputs are not perturbed (a tie in argmax would flip otherwise).
    """
    roundoff = UNIT_ROUNDOFF[dtype]
    largest = float(np.finfo(np.float16 if dtype == "float16" else np.float64 if dtype == "float64" else np.float32).max)
    runs = []
    for run in range(NOISY_RUNS):
        rng = np.random.default_rng([case.seed % 2**32, run])
        systematic = 1.0 if run % 2 == 0 else -1.0
        zero = 0.0 if run % 2 == 0 else -0.0

        def perturbed(op_name):
            op = get_op(op_name)
            reference_fn, forward_error = op.reference, op.forward_error

            def run_op(xs, ps, attrs):
                # Backward error: a stable op computes the exact result of slightly perturbed
                # inputs; this is what exposes rounding *inside* an op (layer_norm's mean of
                # equal values, amplified by 1 / sqrt(var + eps)).
                if not op.exact:
                    xs = [x * (1.0 + ROUNDING_SLACK * roundoff * rng.uniform(-1.0, 1.0, np.shape(x))) for x in xs]
                out = np.asarray(reference_fn(xs, ps, attrs), dtype=np.float64)
                # Rounding is relative to the magnitudes summed, not to a result that cancelled:
                # the op on absolute values gives that (sum |x_i| for sum, sum |x_i w_i| for matmul).
                magnitude = np.abs(np.asarray(reference_fn([np.abs(x) for x in xs], {k: np.abs(v) for k, v in ps.items()}, attrs)))
                bound = ROUNDING_SLACK * roundoff * np.maximum(np.abs(out), np.where(np.isfinite(magnitude), magnitude, 0.0))
                noisy = _perturb(out, bound * rng.uniform(-1.0, 1.0, out.shape))
                with np.errstate(invalid="ignore"):
                    noisy = np.where(np.isfinite(out) & (np.abs(out) <= bound), zero, noisy)
                    noisy = np.where(np.isfinite(magnitude) & (magnitude > largest), np.copysign(np.inf, out), noisy)
                if forward_error is not None:
                    # An op's own declared error (e.g. a rounded mean shared by a whole row) is
                    # systematic: the same sign everywhere, so downstream sums do not cancel it.
                    noisy = _perturb(noisy, systematic * ROUNDING_SLACK * roundoff * np.asarray(forward_error(xs, ps, attrs)))
                return noisy

            return run_op

        with np.errstate(all="ignore"):
            runs.append([np.asarray(y, dtype=np.float64) for y in interpret(case.graph, inputs, params, perturbed)])
    return runs


def framework_reference(exact: list[np.ndarray], rounded: list[np.ndarray], models: list[list[np.ndarray]],
                        dtype: str, sensitivity: float) -> Reference:
    """The Reference of outputs only a framework computes (see "Extra outputs"): `exact` (r64) and
    `rounded` (r_d) are float64 runs at the case's values and at them rounded to `dtype`; `models`
    are further honest runs (the framework's eager run in `dtype`, the perturbed float64 runs)."""
    scale = float(max((np.max(np.abs(y[np.isfinite(y)]), initial=0.0) for y in exact), default=0.0))
    reference = Reference(exact, [scale] * len(exact), [sensitivity] * len(exact), {dtype: rounded})
    reference.judged[dtype], reference.defined_nonfinite[dtype], reference.rounding_noise[dtype] = [], [], []
    for index, r64 in enumerate(exact):
        runs = [rounded[index], *(model[index] for model in models)]
        if dtype != "float64":  # an honest dtype-d backward underflows where the value is subnormal in d
            runs.append(_flushed(r64, dtype))
        judged = np.isfinite(r64) & np.logical_and.reduce([np.isfinite(y) for y in runs])
        reference.judged[dtype].append(judged)
        # No non-finite gradient is "defined": autograd's nan is often a chain-rule artifact (0 * inf
        # through a masked branch) that a compiler may rightly simplify away.
        reference.defined_nonfinite[dtype].append(np.zeros(np.shape(r64), dtype=bool))
        with np.errstate(invalid="ignore"):
            reference.rounding_noise[dtype].append(max((float(np.max(np.abs(y - r64)[judged], initial=0.0)) for y in runs[1:]), default=0.0))
    return reference


def extended(reference: Reference, extra: Reference) -> Reference:
    """`reference` followed by `extra`'s outputs, for the dtypes both define."""
    dtypes = reference.same_dtype.keys() & extra.same_dtype.keys()
    return Reference(
        reference.outputs + extra.outputs, reference.scales + extra.scales, reference.sensitivities + extra.sensitivities,
        *({d: table[d] + extra_table[d] for d in dtypes}
          for table, extra_table in ((reference.same_dtype, extra.same_dtype), (reference.rounding_noise, extra.rounding_noise),
                                     (reference.judged, extra.judged), (reference.defined_nonfinite, extra.defined_nonfinite))),
    )


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
    judged = reference.judged_finite(dtype, index) if judged is None else judged
    with np.errstate(invalid="ignore"):
        e_same = max(float(np.max(np.abs(same - r64)[judged], initial=0.0)), reference.rounding_noise[dtype][index])
    return K_SAME * e_same + RTOL[dtype] * reference.sensitivities[index] * reference.scales[index]


def compare_output(y: np.ndarray, index: int, reference: Reference, dtype: str) -> tuple[str, float, float, str]:
    """(verdict, error, allowed, detail) for one output against the reference."""
    r64 = reference.outputs[index]
    if tuple(y.shape) != tuple(r64.shape):
        return MISMATCH, float("inf"), 0.0, f"shape {list(y.shape)} != reference {list(r64.shape)}"
    finite = reference.judged_finite(dtype, index)
    bad = ~np.isfinite(y) & finite
    if np.any(bad):
        return NAN_INF, float("inf"), 0.0, f"{int(bad.sum())} non-finite values where the reference is finite"
    defined = reference.defined_nonfinite[dtype][index]
    wrong_class = defined & (nonfinite_class(y) != nonfinite_class(r64))
    if np.any(wrong_class):
        at = tuple(int(i) for i in np.argwhere(wrong_class)[0])
        return NAN_INF, float("inf"), 0.0, (f"{int(wrong_class.sum())} entries differ from a non-finite reference, "
                                            f"e.g. at {list(at)}: {y[at]} where the reference is {r64[at]}")
    with np.errstate(invalid="ignore"):  # inf - inf at entries outside `finite`
        err = float(np.max(np.abs(y - r64)[finite], initial=0.0))
    allowed = allowed_error(reference, index, dtype, finite)
    if err <= allowed:
        return AGREE, err, allowed, ""
    judged_y, judged_r64 = y[finite], r64[finite]
    if judged_y.size and np.ptp(judged_y) == 0 and np.ptp(judged_r64) > allowed:
        if np.all(judged_y == 0):
            return ALL_ZEROS, err, allowed, "every value is zero; the reference is not constant"
        return CONSTANT, err, allowed, f"every value is {judged_y.flat[0]:.6g}; the reference is not constant"
    with np.errstate(invalid="ignore"):
        distance = np.where(finite, np.abs(y - r64), -1.0)
    worst = tuple(int(i) for i in np.unravel_index(np.argmax(distance), y.shape))
    return MISMATCH, err, allowed, f"worst at {list(worst)}: {y[worst]:.9g} where the reference is {r64[worst]:.9g}"


def judge_outputs(backend: str, dtype: str, outputs: list[np.ndarray], reference: Reference) -> BackendVerdict:
    if len(outputs) != len(reference.outputs):
        return BackendVerdict(backend, MISMATCH, detail=f"{len(outputs)} outputs, the reference has {len(reference.outputs)}")
    worst = BackendVerdict(backend, AGREE)
    for index, y in enumerate(outputs):
        verdict, err, allowed, detail = compare_output(np.asarray(y, dtype=np.float64), index, reference, dtype)
        ratio = err / allowed if allowed > 0 else (0.0 if err == 0 else float("inf"))
        worst_ratio = worst.max_error / worst.allowed if worst.allowed > 0 else (0.0 if worst.max_error == 0 else float("inf"))
        if severity(verdict) < severity(worst.verdict) or (verdict == worst.verdict and ratio > worst_ratio):
            worst = BackendVerdict(backend, verdict, err, allowed, index, detail)
    return worst


def signature(verdict: str, backend: str, culprit: str, error_text: str = "") -> str:
    """What a finding is, independent of its size: the shrinker must keep it, and buckets group by it.

    `culprit` is the op of the first node whose value disagrees (see check.localize).
    """
    parts = [verdict, backend, culprit]
    if error_text:
        parts.append(normalize_error(error_text))
    return " | ".join(parts)
