"""The oracle: is a backend's output right? Verdicts, the tolerance model, and signatures.

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

r_d is numpy in dtype d, with d's rounding and range (float16 overflows past 65,504, as an
honest float16 kernel may); for float16 a second such model computes each op in float32 and rounds
its result, as torch's opmath and cuBLAS do (a product of -1.5e6 that overflows inside a numpy
float16 baddbmm does not there), and an entry must be the same in both to be defined.
bfloat16 values are ml_dtypes' and every op computes in float32 from them and rounds its result
to bfloat16, as a bfloat16 kernel does (reference.py says why not ml_dtypes' own reductions): an
input that rounds to -1 makes log1p -inf there too. A scan that kernels may carry in bfloat16
(Numerics.scans_in_dtype: cumsum) runs in bfloat16 in the model as well.

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

Non-finite values
-----------------
The oracle judges what the reference defines, entry by entry, against the honest models
of dtype d: r_d, the rounding runs, and a flush-to-zero run (subnormals flushed at every
op, as XLA does on CPU). The rounding runs also snap a result within its rounding bound of
zero, or below d's smallest normal, to +0 (run 0) or -0 (run 1), since an honest op may
return an exact zero of either sign (see "Signed zeros"), and make inf an entry whose
magnitude op(|inputs|) passes d's largest value (an honest float32 sum may overflow in its
own order), and run 1 also one whose float64 value is within its rounding bound of that value
(a float16 product of 65,519.8 rounds to inf when an operand rounded up).
  * r64 finite and every model finite: the entry is judged by the tolerance above;
  * r64 non-finite, every model gives the same class (nan, +inf or -inf), and the value is
    no float64 overflow (it stays non-finite in longdouble): the math defines it (log(0) =
    -inf, 0 * inf = nan; relu(-inf) = 0 is finite and judged as such), and the backend
    must give exactly that class;
  * anything else (a float32-only overflow, a class that depends on rounding: a log of a
    difference that cancels to +-0): undefined in dtype d, skipped.
Two more rounding runs, `directed`, decide only which entries are judged or defined (they add
nothing to e_same): every op's result moves by its whole rounding bound, up in one and down in
the other, with no random draws, so a class that a
chain of monotone ops draws from one rounding (exp of a sum that cancels to -2e14 among terms of
4e17, sinh near the overflow, cumsum -> sigmoid -> a negative power) does not hang on the luck of
the random draws.
A case is `invalid` only when no entry of any output is defined.

Signed zeros
------------
The sign of a zero a graph computes is a rounding artifact: x - x, a sum that cancels, a
value that underflows (logsigmoid(104) is -7e-46 in float64 and +0 in float32 torch) may come
out as +0, -0 or a tiny value of either sign in an honest implementation. A result that
depends on that sign (atan2 at the branch cut, +-pi; 1 / +-0 = +-inf; a negative odd power of
+-0; sqrt or log of a value just below zero, nan) is undefined in dtype d, not a mismatch. In
each rounding run, every computed zero is such a zero (the run snaps results within rounding
of zero to it), and so is a float64 zero the run carries an error on (instance_norm of equal
values: 0 in float64, +-1e-16 in a kernel whose conv rounds them an ulp apart), and an op that
declares `zero_sign_matters` (OpDef) gives nan wherever its
result changes, beyond a zero's sign, when those zeros flip sign, or changes class when they
are d's smallest normal below zero; the nan makes that entry, and what is computed from it,
undefined. A zero the case gives (a graph input, a parameter) is exact: the IEEE answer is
required (pow_scalar(-0.0, -1) of an input -0.0 is -inf).

The same holds at the integers, where an op declares `integer_matters` (pow: a negative base to a
non-integer power is nan; log1p: its pole at -1): tanh(-9.2358) is -0.99999998 in float64 and -1 in float32, so pow(t, t)
is nan in float64 and -1 in float32. The perturbed runs rarely land exactly on an integer, so each
run also evaluates such an op with its computed operands within INTEGER_SLACK rounding bounds of a
nonzero integer moved onto it, and those exactly on one moved to d's next value off it where that
is no integer and within those bounds (a float64 sum near 4e15, spaced 0.5, lands on an integer in
one summation order and half off it in another); where the result's class changes, the entry is
undefined in d. An
operand within rounding of an integer but further off in float64 (2e-8 from -1) leaves the float64
nan required; a graph input is exact.

A computed zero is any result within its rounding bound of zero, the op's declared `forward_error`
included (x - tanh(x) of a small x is 0 in float32, 1e-11 in float64), or below d's smallest
normal; in run 0 also one whose float64 value is within that error of zero, or no further from
zero than the run's rounding moved it (the std of values float32 rounds to equal is 0, 2e-10 in
float64; instance_norm of a constant row is -1e-17 in torch's float64), since its sign is then the
upstream rounding's, in float64 as in float32. A zero that flushed subnormals make inside an op is
one too: the same-dtype model of such an op flushes them (prod's partial products, attention's
softmax weights: 0 * -inf is nan where a subnormal weight gives -inf). An entry undefined in any
one run is undefined. An entry the math leaves to convention (Numerics.undefined: pow(-inf, 0.5) is
+inf by IEEE pow, nan by numpy's and torch's sqrt; a bilinear blend reading a non-finite
neighbour, nan or not by how the kernel writes it; a product whose value depends on the order of
its multiplications, past float64's range) is undefined the same way. Undefinedness is a mask
beside the run's values, not the nan alone: it is carried to every result that changes when the
undefined entries do (a select reads nan as false and would drop it; a log of a zero-signed zero
is nan, like the log of a negative the math defines), and an undefined entry is never required,
whatever its class.

Ops that declare nothing
------------------------
An op whose numerics nobody reviewed (OpDef.declares_numerics False: a plugin's op whose numerics are
the default Numerics(), as the ops of an op database will be) is judged by these generic models with no
rule of its own, and where it may do what a reviewer would have declared, they assume it does
(fuzzer/undeclared_numerics.py): its rounding bound also covers the change of its result when its
operands move by their rounding (frac(6e6) may be anything in [0, 1) in float32; sinc(1), 4e-17, may
have either sign), and an entry is undefined where that move of a computed operand, the sign of a
computed nan (copysign) or of a computed zero, or a computed operand within rounding of an integer
changes its class. That is conservative: a graph input is exact, but a computed value near a pole
or a domain edge is never judged for its class, and the measured bound counts a rounding the op's
own kernel may not make (trunc of a computed 2.9999999 is allowed 2 or 3). Measured on 200 drawn
graphs of 27 such ops (tests/plugins/undeclared_ops.py; reports/clean-campaigns/undeclared-ops.md),
the mean share of a case's output entries in float32: 62.1% judged by the tolerance, 30.2% defined
non-finite, 7.7% undefined, where the same models without these rules leave 3.4% undefined (62.9%
judged, 33.7% defined non-finite); bfloat16 10.1% against 4.4%. Nearly all of the loss is the
signed-zero and integer rules (7.6% and 9.5% with them alone): a nan or inf reached through a computed
zero or a computed value near a pole. The honest models of such a case cost 2.6 to 3.6 times as much. What it cannot see: a
convention the float64 reference fixes and a framework does not share (jax's digamma(0) is nan,
torch's and scipy's -inf) is a finding, as it should be for a reviewer to triage.

Extra outputs (gradients)
-------------------------
A backend may return more arrays than the graph has outputs (backend_verdict.reference_for): jax-vmap
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

Cost
----
The honest models run every op about ten times a case, which made them most of the cheap tier's
time. `FAST` (on) computes them with the same bits as the plain functions (`_rounding_runs`,
`_flush_to_zero_run`), which stay as their specification: the rounding runs of all dtypes go
node by node together and share their random draws (the same generator seeds, so the same
numbers); an op whose operands have no sign bit set gets its magnitude from its own output
instead of a second call; the flush-to-zero run takes the float64 run's value wherever flushing
changes nothing; masks and maxima avoid copies. Each shortcut is taken only where it provably
gives the plain path's arrays, values and memory layout alike (see "equivalent" above
`_standard`), so no verdict, error or allowance can change; tests/test_oracle_fast.py compares
the two paths bit for bit on generated cases of every regime.

Most cases need no honest model at all (`LAZY`, on): `allowed` is K_SAME * e_same plus the floor
sens * (RTOL[d] * scale + TINY[d]), and e_same >= 0, so a backend finite wherever r64 is finite,
within the floor of r64 there, and of r64's non-finite class (nan, +inf, -inf) everywhere else,
agrees whatever the models say: the full comparison judges a subset of r64's finite entries
against an allowance no smaller, skips the non-finite entries the models leave undefined, and
asks the others to have r64's class. check.check_case judges each backend that way first
(judge_outputs' `at_floor`); such a verdict records the floor as its `allowed`, with `at_floor`
set. The Reference computes its honest models (r_d, the rounding and flush-to-zero runs) the
first time anything asks for them: a non-finite entry of another class than r64's, an error above
the floor, localization, reproducers, and a floor verdict that accuracy-regression compares across
releases (check_case judges it again in full). The longdouble overflow run waits longer: it only
removes entries from the defined non-finite ones, so it runs when a backend gives another class at
one of them (HonestModels.nonfinite_candidates), or when the mask itself is asked for (reproducers,
and `defines_anything` for a case with no judged entry); in the torch-jit-trace tier it ran on 4%
of cases and took 6% of a graph's time. One verdict
differs from computing every model: a case whose every entry some honest model leaves undefined
(a computed zero into atan2 or a negative power, float16 overflow, a nan whose class an honest
model does not share) is `invalid` with the models, and `agree` at the floor when every backend
agrees at the floor (knowing it would take the very models the floor spares; check_case asks once
some verdict is not at the floor, and is exact then). Each such case is a pass either way;
tests/test_oracle_lazy.py compares the two paths on generated cases and counts them.

Verdicts (per backend): agree, mismatch, nan-inf (non-finite where the reference
is finite in that dtype, or a non-finite class the reference defines but the backend
does not give), all-zeros / constant (a mismatch whose output is constant while
the reference is not), crash (the backend raised), hang, nondeterministic (set by
the re-run gate in check.py), precision-policy (wrong with the backend's default
TF32 / reduced-precision settings but right once check.py re-runs it with strict
settings: recorded with both errors, never counted as a bug).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Callable

import numpy as np

from fuzzer.errors import normalize_error
from fuzzer.ir import Case, Graph, interpret, split_arrays
from fuzzer.ops import get_op
from fuzzer.reference import evaluate_all, numpy_dtype
from fuzzer.undeclared_numerics import operand_reach, rounding_dependent
from fuzzer.records import BackendVerdict, Signature
from fuzzer.verdicts import AGREE, ALL_ZEROS, CONSTANT, MISMATCH, NAN_INF, severity

K_SAME = 10.0
NOISY_RUNS = 2
ROUNDING_SLACK = 4.0  # a few units of roundoff per op: reductions accumulate ~sqrt(n) of them
UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
RTOL = {"float64": 1e-9, "float32": 3e-5, "float16": 1e-2, "bfloat16": 8e-2}
# Each dtype's largest finite value: past it an honest implementation overflows (bfloat16's is just
# below float32's).
LARGEST = {"float64": float(np.finfo(np.float64).max), "float32": float(np.finfo(np.float32).max),
           "float16": float(np.finfo(np.float16).max), "bfloat16": (2.0 - 2.0**-7) * 2.0**127}
# Each dtype's smallest normal value: below it a result is subnormal or zero, and may be flushed
# (bfloat16 has float32's exponent range).
TINY = {"float64": float(np.finfo(np.float64).tiny), "float32": float(np.finfo(np.float32).tiny),
        "float16": float(np.finfo(np.float16).tiny), "bfloat16": float(np.finfo(np.float32).tiny)}
# The fast path (see "Cost"); off, the plain functions compute every model. Tests switch it.
FAST = True
# The lazy path (see "Cost"); off, check.check_case agrees no verdict at the floor and every case
# computes its honest models. Tests switch it.
LAZY = True


def round_to_dtype(values: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values rounded to `dtype` (and back), so the backend and the reference start from
    the same numbers; bfloat16 through ml_dtypes (a jax dependency)."""
    with np.errstate(over="ignore"):
        return np.asarray(values).astype(numpy_dtype(dtype)).astype(np.float64)


def nonfinite_class(values: np.ndarray) -> np.ndarray:
    """Per entry: 0 finite, 1 nan, 2 +inf, 3 -inf."""
    return np.select([np.isnan(values), values == np.inf, values == -np.inf], [1, 2, 3], 0)


@dataclass
class HonestModels:
    """What honest dtype-d implementations of a case may give, per dtype and output (see "Non-finite
    values"): r_d, the rounding noise, the entries judged by the tolerance (finite in every honest
    model of the dtype) and the non-finite entries the math defines."""

    same_dtype: dict[str, list[np.ndarray]] = field(default_factory=dict)
    rounding_noise: dict[str, list[float]] = field(default_factory=dict)
    judged: dict[str, list[np.ndarray]] = field(default_factory=dict)
    # The entries non-finite in r64 that every honest model gives r64's class: defined unless
    # float64 overflowed there, which only the longdouble run tells (`overflow`, see "Cost").
    nonfinite_candidates: dict[str, list[np.ndarray]] = field(default_factory=dict)
    # Per output, the entries where float64 overflowed (_float64_overflow); None: nowhere.
    overflow: Callable[[], list[np.ndarray]] | None = field(default=None, repr=False, compare=False)

    @cached_property
    def overflowed(self) -> list[np.ndarray]:
        if self.overflow is not None:
            return self.overflow()
        return [np.zeros(np.shape(mask), dtype=bool) for mask in next(iter(self.nonfinite_candidates.values()), [])]

    @cached_property
    def defined_nonfinite(self) -> dict[str, list[np.ndarray]]:
        """The non-finite entries the math defines, per dtype and output."""
        if self.overflow is None:
            return self.nonfinite_candidates
        return {dtype: [mask & ~overflowed for mask, overflowed in zip(masks, self.overflowed, strict=True)]
                for dtype, masks in self.nonfinite_candidates.items()}


@dataclass
class Reference:
    """The float64 reference of a case, plus what the tolerance model needs: its honest models,
    given, or computed by `compute_models` the first time something asks for them (see "Cost")."""

    outputs: list[np.ndarray]
    scales: list[float]
    sensitivities: list[float]
    models_computed: HonestModels | None = field(default=None, repr=False)
    compute_models: Callable[[], HonestModels] | None = field(default=None, repr=False, compare=False)
    # allowed_error per (dtype, output) with the reference's own judged mask: one per case, not per backend.
    allowance: dict[tuple[str, int], float] = field(default_factory=dict, repr=False, compare=False)
    # Every value of the float64 run by name, inputs included (the special values a node reads: fuzzer/regions.py).
    values: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def models(self) -> HonestModels:
        if self.models_computed is None:
            self.models_computed = self.compute_models()
            self.compute_models = None  # lets go of what it held (the float64 run's values)
        return self.models_computed

    @property
    def same_dtype(self) -> dict[str, list[np.ndarray]]:
        return self.models.same_dtype

    @property
    def rounding_noise(self) -> dict[str, list[float]]:
        return self.models.rounding_noise

    @property
    def judged(self) -> dict[str, list[np.ndarray]]:
        return self.models.judged

    @property
    def defined_nonfinite(self) -> dict[str, list[np.ndarray]]:
        return self.models.defined_nonfinite

    @property
    def nonfinite_candidates(self) -> dict[str, list[np.ndarray]]:
        return self.models.nonfinite_candidates

    def judged_finite(self, dtype: str, index: int) -> np.ndarray:
        return self.judged[dtype][index]

    @cached_property
    def finite_everywhere(self) -> bool:
        """Is every entry of every output finite? (compare_at_floor's quick path)"""
        return all(bool(np.all(np.isfinite(r64))) for r64 in self.outputs)

    @cached_property
    def output_classes(self) -> list[np.ndarray]:
        """nonfinite_class of each output: every backend's comparison asks for it."""
        return [nonfinite_class(r64) for r64 in self.outputs]

    @property
    def defines_anything(self) -> bool:
        """Is at least one entry of one output defined in some dtype? If not, the case is invalid."""
        indices = [(dtype, index) for dtype in self.same_dtype for index in range(len(self.outputs))]
        # Judged entries first: the defined non-finite ones may need the longdouble run.
        return (any(np.any(self.judged_finite(dtype, index)) for dtype, index in indices)
                or any(np.any(self.defined_nonfinite[dtype][index]) for dtype, index in indices))


def compute_reference(case: Case, dtypes: set[str]) -> Reference:
    graph = case.graph
    inputs, params = split_arrays(case)
    with np.errstate(all="ignore"):  # non-finite values are judged, not warned about
        env = evaluate_all(graph, inputs, params)
    outputs, scales, sensitivities = [], [], []
    peaks: dict = {}  # per value (a name, or a node's parameter): its largest finite magnitude
    for out in graph.outputs:
        ancestors = graph.ancestors([out])
        if FAST:
            # The same maximum as below: max is exact, and a value with no finite entry (left out
            # there) or the 0.0 floor adds 0.0, which no magnitude (>= 0) is below.
            keys = [(a, env[a]) for a in ancestors] + [
                ((node, k), p) for node, ps in params.items() if node in ancestors for k, p in ps.items()]
            for key, value in keys:
                if key not in peaks:
                    with np.errstate(invalid="ignore"):
                        peaks[key] = float(np.max(np.abs(value), where=np.isfinite(value), initial=0.0))
            scales.append(max((peaks[key] for key, _ in keys), default=0.0))
        else:
            values = [env[a] for a in ancestors] + [
                p for node, ps in params.items() if node in ancestors for p in ps.values()
            ]
            magnitudes = [np.max(np.abs(v[np.isfinite(v)])) for v in values if np.any(np.isfinite(v))]
            scales.append(float(max(magnitudes, default=0.0)))
        sensitivities.append(1.0 + sum(get_op(n.op).numerics.sensitivity for n in graph.nodes if n.name in ancestors))
        outputs.append(np.asarray(env[out], dtype=np.float64))
    return Reference(outputs, scales, sensitivities, values=env,
                     compute_models=lambda: _honest_models(case, inputs, params, env, outputs, dtypes))


def _honest_models(case: Case, inputs: dict, params: dict, env: dict, outputs: list[np.ndarray],
                   dtypes: set[str]) -> HonestModels:
    """The honest models of each dtype, from the float64 run's values `env` and `outputs`."""
    graph = case.graph
    honest = HonestModels(overflow=lambda: _float64_overflow(graph, inputs, params, outputs))
    rounding = None
    if FAST:
        try:
            rounding = _rounding_runs_shared(case, inputs, params, sorted(dtypes), env)
        except _Diverged:
            rounding = None
    finite64 = [np.isfinite(r64) for r64 in outputs]
    all_finite64 = [bool(np.all(f)) for f in finite64]
    for dtype in dtypes:
        if dtype == "float64":
            honest.same_dtype[dtype] = outputs
        else:
            with np.errstate(all="ignore"):
                env_d = evaluate_all(graph, inputs, params, dtype)
            honest.same_dtype[dtype] = [np.asarray(env_d[o], dtype=np.float64) for o in graph.outputs]
        # What honest dtype-d implementations may give: numpy in that dtype, the rounding model's
        # runs, and the flush-to-zero run. An entry is judged by the tolerance where all of them
        # are finite, defined non-finite where all give r64's non-finite class, skipped otherwise.
        runs_d = rounding[dtype] if rounding is not None else _rounding_runs(case, inputs, params, dtype, env)
        models = [honest.same_dtype[dtype], *runs_d]
        if dtype != "float64":
            models.append(_flush_to_zero_shared(graph, inputs, params, dtype, env) if FAST
                          else _flush_to_zero_run(graph, inputs, params, dtype, env))
        if dtype == "float16":  # a float16 kernel may compute in float32 inside (torch's opmath, cuBLAS)
            with np.errstate(all="ignore"):
                env_wide = evaluate_all(graph, inputs, params, dtype, in_float32=True)
            models.append([np.asarray(env_wide[o], dtype=np.float64) for o in graph.outputs])
        # The directed runs say which entries are judged or defined, and add nothing to the noise:
        # their coherent drift would widen the tolerance of every long reduction.
        classifiers = models + _rounding_runs(case, inputs, params, dtype, env, directed=True)
        if dtype != "float64":
            classifiers.append(_flush_in_range_run(graph, inputs, params, dtype))
        honest.judged[dtype], honest.nonfinite_candidates[dtype], honest.rounding_noise[dtype] = [], [], []
        for index, r64 in enumerate(outputs):
            runs = [np.broadcast_to(np.asarray(model[index], dtype=np.float64), r64.shape) for model in classifiers]
            if not FAST:
                judged = np.isfinite(r64) & np.logical_and.reduce([np.isfinite(y) for y in runs])
                honest.judged[dtype].append(judged)
                honest.nonfinite_candidates[dtype].append(
                    ~np.isfinite(r64) & np.logical_and.reduce([nonfinite_class(y) == nonfinite_class(r64) for y in runs]))
                with np.errstate(invalid="ignore"):
                    honest.rounding_noise[dtype].append(
                        max((float(np.max(np.abs(y - r64)[judged], initial=0.0)) for y in runs[1:len(models)]), default=0.0))
                continue
            judged = finite64[index].copy()
            for y in runs:
                judged &= np.isfinite(y)
            honest.judged[dtype].append(judged)
            if all_finite64[index]:  # ~isfinite(r64) is all False: nothing non-finite to define
                honest.nonfinite_candidates[dtype].append(np.zeros(r64.shape, dtype=bool))
            else:
                classes = nonfinite_class(r64)
                honest.nonfinite_candidates[dtype].append(
                    ~finite64[index] & np.logical_and.reduce([nonfinite_class(y) == classes for y in runs]))
            # The same maxima as above, without copying the judged entries out (no nan among them).
            with np.errstate(invalid="ignore", over="ignore"):
                honest.rounding_noise[dtype].append(
                    max((float(np.max(np.abs(y - r64), where=judged, initial=0.0)) for y in runs[1:len(models)]), default=0.0))
    return honest


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
        reference_fn = get_op(op_name).impl("numpy")
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
    values = np.asarray(values, dtype=np.float64)
    return np.where(np.abs(values) < TINY[dtype], np.copysign(0.0, values), values)


def _flush_to_zero_run(graph: Graph, inputs: dict, params: dict, dtype: str, env: dict | None = None) -> list[np.ndarray]:
    """The float64 reference with subnormals of `dtype` flushed to (signed) zero at every op's
    inputs and outputs. `env`: the float64 run's values, computed here where not given.

    The run starts from the case's values rounded to `dtype`, as the backend gets them (an exponent
    of 19.055 is 19 in bfloat16, so pow of a negative base is a tiny negative, flushed to -0, and
    its log -inf, where the float64 reference is nan).

    Flushing subnormals (FTZ/DAZ) is a documented platform policy, not a bug: XLA on CPU does
    it (jnp.add(1e-40, 0.0) is 0.0 in float32, x / x is nan, exp(-87.5) is 0), so do fast-math
    GPU kernels. Ops make subnormals from normal inputs too (silu(-99) is -1e-41), so the run
    is always made. The oracle counts it like rounding: its deviation joins e_same, and an
    entry that flushing makes non-finite, or finite, is undefined in that dtype. A kernel may
    flush in some reads and not others, so an op whose class flushing changes (-inf times a
    flushed 1e-39 is nan) makes undefined what depends on it, even where a later op would hide
    the change (pow(nan, -0.0) is 1, pow(nan, -8e-39) is nan): _flush_undefined.
    """
    flush = lambda values: _flushed(values, dtype)  # noqa: E731
    with np.errstate(all="ignore"):
        if env is None:
            env = evaluate_all(graph, inputs, params)
        raw = {name: round_to_dtype(value, dtype) for name, value in inputs.items()}
        values = {name: flush(value) for name, value in raw.items()}
        undefined = {}
        for node in graph.nodes:
            values[node.name], undefined[node.name], raw[node.name] = _flushed_node(node, values, raw, undefined, params, env, dtype)
        return _model_outputs(values, undefined, graph.outputs, env)


def _flush_in_range_run(graph: Graph, inputs: dict, params: dict, dtype: str) -> list[np.ndarray]:
    """The flush-to-zero run in `dtype`'s range as well: every value rounded to `dtype`, flushed, and
    past its largest value +-inf. A classifier only (which entries are judged or defined), like the
    directed runs: a float32 kernel both overflows and flushes, and neither the flush run (float64's
    range) nor numpy in float32 (no flush) sees the two together: XLA's CPU cosh(103) is inf (honest),
    and its dot reads x1 = -2.1e-42 as 0, so inf * 0 is nan where both models say -inf or a number."""
    def honest(values):
        values = _flushed(round_to_dtype(values, dtype), dtype)
        return np.where(np.abs(values) > LARGEST[dtype], np.copysign(np.inf, values), values)

    def in_range(op_name):
        reference_fn = get_op(op_name).reference
        return lambda xs, ps, attrs: honest(reference_fn(xs, {k: honest(v) for k, v in ps.items()}, attrs))

    with np.errstate(all="ignore"):
        return interpret(graph, {name: honest(value) for name, value in inputs.items()}, params, in_range)


def _flushed_node(node, values: dict, raw: dict, undefined: dict, params: dict, env: dict, dtype: str):
    """One node of the flush-to-zero run: its result from the run's `values` (operands and
    parameters rounded to `dtype` and flushed, the result flushed), its undefined entries, and
    its result before the flush (what a kernel that does not flush reads: `raw`)."""
    flush = lambda values: _flushed(values, dtype)  # noqa: E731
    op, ps = get_op(node.op), params.get(node.name, {})
    xs = [values[name] for name in node.inputs]
    rounded = {k: round_to_dtype(v, dtype) for k, v in ps.items()}
    unflushed = op.reference(xs, {k: flush(v) for k, v in rounded.items()}, node.attrs)
    result = flush(unflushed)
    # A kernel may read its operands flushed or not, whatever the ops before it did: XLA's CPU dot
    # flushes a subnormal operand where its pow reads a subnormal exponent as it is.
    read_raw = op.reference([raw[name] for name in node.inputs], rounded, node.attrs)
    result = _farther_where_jumped(result, read_raw, env[node.name], dtype)
    return result, _flush_undefined(op, xs, [env[name] for name in node.inputs], [undefined.get(name) for name in node.inputs],
                                    ps, node.attrs, result, env[node.name], read_raw), unflushed


# A change of a result that no subnormal operand makes in a continuous op: half its size, and more
# than sqrt(TINY) (a subnormal times 1e19; 1e-19 in float32).
_JUMP = 0.5


def _farther_where_jumped(result: np.ndarray, read_raw: np.ndarray, exact: np.ndarray, dtype: str) -> np.ndarray:
    """The flush-to-zero run's `result` of an op, or where reading the operands unflushed (`read_raw`)
    moves it by more than any continuous op would (_JUMP), whichever of the two is farther from the
    float64 value `exact`: an op that jumps where an operand is zero (pow(0, 0) is 1, pow(0, 3e-41)
    is 0), read by a kernel that flushes one operand and not another, may give either."""
    with np.errstate(all="ignore"):
        change = np.abs(result - read_raw)
        jumped = ((change > _JUMP * np.maximum(np.abs(result), np.abs(read_raw))) & (change > np.sqrt(TINY[dtype]))
                  & np.isfinite(result) & np.isfinite(read_raw))
        if not jumped.any():
            return result
        return np.where(jumped & (np.abs(read_raw - exact) > np.abs(result - exact)), read_raw, result)


def _flush_undefined(op, xs: list, exact_xs: list, undefined_in: list, ps: dict, attrs: dict, result: np.ndarray,
                     exact: np.ndarray, read_raw: np.ndarray) -> np.ndarray | None:
    """The entries of a flush-to-zero run's `result` of `op` (on the operands `xs`) that are
    undefined (None: none): of another non-finite class than the float64 run's (`exact`, on
    `exact_xs`) or than the op gives reading its operands unflushed (`read_raw`), or dependent on
    an operand entry undefined upstream, with the other operands flushed or not
    (pow(undefined, -8e-39) depends on it, pow(undefined, -0.0) does not)."""
    shape = np.shape(result)
    masks = [np.broadcast_to(nonfinite_class(result) != nonfinite_class(exact), shape),
             np.broadcast_to(nonfinite_class(result) != nonfinite_class(read_raw), shape),
             _depends_on_undefined(op, xs, undefined_in, ps, attrs, shape),
             _depends_on_undefined(op, exact_xs, undefined_in, ps, attrs, shape)]
    masks = [mask for mask in masks if mask is not None and mask.any()]
    return np.logical_or.reduce(masks) if masks else None


def _perturb(out: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """out + delta on finite entries; non-finite entries stay as the math made them, and an
    unbounded delta on a finite entry makes it nan: its value is then undefined in this dtype."""
    delta = np.broadcast_to(delta, np.shape(out))
    return np.where(np.isfinite(out), np.where(np.isfinite(delta), out + delta, np.nan), out)


def _rounding_runs(case: Case, inputs: dict, params: dict, dtype: str, env: dict | None = None,
                   directed: bool = False) -> list[list[np.ndarray]]:
    """NOISY_RUNS runs of the float64 reference with every op's inputs and result perturbed by a
    few units of `roundoff` (a model of rounding at each op; see the module docstring). `env`: the
    float64 run's values (reference.evaluate_all), computed here where not given. `directed`: no
    draws; every op reads its operands as they come and its result is moved by its whole rounding
    bound (and forward error), up in run 0 and down in run 1, so a class that a monotone chain of
    ops decides from one rounding (exp of a sum that cancels to -2e14 beside terms of 4e17; rsqrt
    of group_norm's bias plus its rounding noise over a constant row) is reached in one of them,
    not by the luck of the draws (see "Non-finite values"). A directed run moves a sum of n terms
    further, by the n - 1 roundoffs of summing them one after the other (_accumulation_reach).

    A result within its rounding bound of zero may come out as an exact zero in an honest
    implementation (gelu(-6) is 0 in float32 through 1 + erf cancelling), and so may one below
    the dtype's smallest normal (it underflows); the sign of such a zero is the implementation's
    choice. Run 0 snaps those entries to +0 and run 1 to -0 (run 0 also those _near_zero finds,
    whose sign the rounding upstream decides), and an op that declares
    `zero_sign_matters` gives nan (undefined) wherever its result depends on the sign of a
    computed zero among its operands (see "Signed zeros").
    Where the op's magnitude (the op on absolute values) passes the dtype's largest value, an
    honest implementation may overflow in its own order of operations (a float32 sum of
    values near 3e38): those entries are made inf in the runs, so they are undefined too.
    Piecewise-constant ops (Numerics.exact) read graph inputs, the same numbers everywhere:
    their inputs are not perturbed (a tie in argmax would flip otherwise).
    """
    roundoff = UNIT_ROUNDOFF[dtype]
    largest, tiny = LARGEST[dtype], TINY[dtype]
    if env is None:
        with np.errstate(all="ignore"):
            env = evaluate_all(case.graph, inputs, params)
    runs = []
    for run in range(NOISY_RUNS):
        rng = np.random.default_rng([case.seed % 2**32, run])
        zero = 0.0 if run % 2 == 0 else -0.0
        sign = (1.0 if run % 2 == 0 else -1.0) if directed else None

        def run_op(op, xs, computed, undefined_in, ps, attrs, exact, exact_xs):
            # Backward error: a stable op computes the exact result of slightly perturbed
            # inputs; this is what exposes rounding *inside* an op (layer_norm's mean of
            # equal values, amplified by 1 / sqrt(var + eps)).
            if not op.numerics.exact and not directed:
                xs = [x * (1.0 + ROUNDING_SLACK * roundoff * rng.uniform(-1.0, 1.0, np.shape(x))) for x in xs]
            out = np.asarray(op.reference(xs, ps, attrs), dtype=np.float64)
            # Rounding is relative to the magnitudes summed, not to a result that cancelled:
            # the op on absolute values gives that (sum |x_i| for sum, sum |x_i w_i| for matmul).
            magnitude = np.abs(np.asarray(op.reference([np.abs(x) for x in xs], {k: np.abs(v) for k, v in ps.items()}, attrs)))
            magnitude = operand_reach(op, xs, ps, attrs, out, magnitude, ROUNDING_SLACK * roundoff, largest)
            scale = np.maximum(np.abs(out), np.where(np.isfinite(magnitude), magnitude, 0.0))
            bound = ROUNDING_SLACK * roundoff * scale
            if directed:  # a sum of many terms, added in any order (_accumulation_reach)
                bound = bound + min(roundoff, UNIT_ROUNDOFF["float32"]) * _accumulation_reach(op, xs, ps, attrs) * scale
            noisy = _perturb(out, bound * (rng.uniform(-1.0, 1.0, out.shape) if sign is None else sign))
            with np.errstate(invalid="ignore"):
                # A directed run keeps a computed zero on its side of 0 (exp of it is then 0 or inf).
                snap = (np.abs(out) < tiny) if directed else (np.abs(out) <= bound) | (np.abs(out) < tiny)
                noisy = np.where(np.isfinite(out) & snap, zero, noisy)
                noisy = np.where(np.isfinite(magnitude) & (magnitude > largest), np.copysign(np.inf, out), noisy)
            # An op's own declared error (e.g. a rounded mean shared by a whole row) is systematic:
            # the same sign everywhere, so downstream sums do not cancel it (_finished).
            return _finished(noisy, op, xs, computed, undefined_in, ps, attrs, out, exact, dtype, run, directed, exact_xs)

        values, undefined = dict(inputs), {}
        with np.errstate(all="ignore"):
            for node in case.graph.nodes:
                values[node.name], undefined[node.name] = run_op(
                    get_op(node.op), [values[name] for name in node.inputs], [name not in inputs for name in node.inputs],
                    [undefined.get(name) for name in node.inputs], params.get(node.name, {}), node.attrs, env[node.name],
                    [env[name] for name in node.inputs])
        runs.append(_model_outputs(values, undefined, case.graph.outputs, env))
    return runs


# Ops whose result accumulates many terms, each adding its rounding: a kernel may sum in any order,
# one term after the other too (torch's CPU vector_norm(ord=1) of float32 adds 4,161 nonzero terms
# so: 344 roundoffs off, where torch.sum is within 1; GPU campaign case 362).
ACCUMULATING_FAMILIES = ("reduce", "matmul", "conv")


def _accumulation_reach(op, xs: list, ps: dict, attrs: dict) -> np.ndarray | float:
    """How many more roundoffs (of float32, where the dtype is narrower: half-precision kernels
    accumulate in float32) of its magnitude a directed run moves `op`'s result: n - 1 for an entry
    that adds n nonzero terms, the worst case of adding them one after the other (Higham, Accuracy
    and Stability of Numerical Algorithms, 4.2); n is the op on the operands' nonzero patterns (the
    count for a sum, the nonzero products of a matmul or conv row; 1 for a max, which adds nothing).
    The random runs keep a few roundoffs: they set the tolerance, which this would widen for every
    long reduction; the directed ones only decide which entries are defined (cos of a float32 norm
    near 4000 may have either sign)."""
    if op.family not in ACCUMULATING_FAMILIES:
        return 0.0
    try:
        terms = np.abs(np.asarray(op.reference([(np.asarray(x) != 0).astype(np.float64) for x in xs],
                                                {k: (np.asarray(v) != 0).astype(np.float64) for k, v in ps.items()}, attrs), dtype=np.float64))
    except (ValueError, ArithmeticError):
        return 0.0
    return np.maximum(np.where(np.isfinite(terms), terms, 1.0), 1.0) - 1.0


def _finished(noisy: np.ndarray, op, xs: list, computed: list[bool], undefined_in: list, ps: dict, attrs: dict,
              out: np.ndarray, exact: np.ndarray, dtype: str, run: int,
              directed: bool = False, exact_xs: list | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """A rounding run's result of `op` and the mask of its undefined entries (None: none), from
    `noisy` (its perturbed result, _noisy), `out` (its result on the operands `xs`), `exact` (the
    float64 run's value of the node) and the masks of the operands' undefined entries
    (`undefined_in`, None each where none).

    The op's declared forward error (Numerics.forward_error) is added with the run's sign. Run 0 makes
    every computed zero an exact zero (_near_zero; not in a `directed` run, which keeps it on the
    side of 0 its direction puts it), as one within its rounding bound is (_noisy):
    x - tanh(x) of a small x is 0 in float32; run 1 keeps it off by the error, so the allowance
    spans both. An entry is undefined
    in `dtype` (nan in the run, and in the mask) where it depends on the sign of a computed zero
    (_zero_sign_dependent), on an operand entry undefined upstream (_depends_on_undefined), on an
    operand the run moved a quarter of the op's period from its float64 value (`exact_xs`:
    _moved_a_quarter_period), or where the op leaves it to convention (Numerics.undefined). The mask, not the nan, says so: a
    nan the math defines (sqrt(-1)) is required of a backend, an undefined entry never is."""
    error = None
    if op.numerics.forward_error is not None:
        error = np.asarray(op.numerics.forward_error(xs, ps, attrs))
        if exact_xs is not None:
            # Also at the float64 operands: the run's perturbation gives a constant row a variance
            # (1.5e-4 for two entries of 207417), which shrank the normalization error of its
            # x * scale + shift from 2.6e3 to 7 (GPU campaign case 560: torch's -2625.75 for 0).
            with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
                error = np.fmax(error, np.asarray(op.numerics.forward_error(exact_xs, ps, attrs)))
        error = ROUNDING_SLACK * UNIT_ROUNDOFF[dtype] * error
    if op.numerics.intermediate_error is not None:
        rounded = np.asarray(op.numerics.intermediate_error(xs, ps, attrs, UNIT_ROUNDOFF[dtype]))
        error = rounded if error is None else error + rounded
    if error is not None:
        noisy = _perturb(noisy, (1.0 if run % 2 == 0 else -1.0) * error)  # systematic: one sign a run
    # A computed zero is an exact zero in one run; the other keeps the error's size, which a zero
    # in both would hide (instance_norm of a constant row: 0, yet 0.05 off in a correct float32).
    if run % 2 == 0 and not directed:
        near_zero = _near_zero(noisy, out, exact, error)
        if near_zero.any():
            noisy = np.where(near_zero, 0.0, noisy)
    else:  # and a result within rounding of d's largest value overflows in the other
        near_overflow = _near_overflow(noisy, exact, dtype)
        if near_overflow.any():
            noisy = np.where(near_overflow, np.copysign(np.inf, exact), noisy)
    masks = [_zero_sign_dependent(op, xs, computed, ps, attrs, dtype, exact_xs), _integer_dependent(op, xs, computed, ps, attrs, out, dtype, exact_xs),
             _depends_on_undefined(op, xs, undefined_in, ps, attrs, np.shape(out)),
             _moved_a_quarter_period(op, xs, exact_xs),
             rounding_dependent(op, xs, computed, ps, attrs, out, INTEGER_SLACK * ROUNDING_SLACK * UNIT_ROUNDOFF[dtype])]
    if op.numerics.undefined is not None:
        masks.append(np.asarray(op.numerics.undefined(xs, ps, attrs), dtype=bool))
    masks = [np.broadcast_to(mask, np.shape(out)) for mask in masks if mask is not None and mask.any()]
    if not masks:
        return noisy, None
    undefined = np.logical_or.reduce(masks)
    return np.where(undefined, np.nan, noisy), undefined


def _moved_a_quarter_period(op, xs: list, exact_xs: list | None) -> np.ndarray | None:
    """Where a periodic op's (Numerics.period) operand in a rounding run is a quarter period or more
    from its float64 value: cos of a float32 dot product of 2e6 that rounding moves by 25 may be
    any value in [-1, 1], of either sign, and a handful of runs would sample only a few of them."""
    if op.numerics.period is None or exact_xs is None:
        return None
    with np.errstate(invalid="ignore"):
        return np.abs(xs[0] - exact_xs[0]) >= op.numerics.period / 4


def _near_zero(noisy: np.ndarray, out: np.ndarray, exact: np.ndarray, error: np.ndarray | None) -> np.ndarray:
    """The entries of a rounding run's result that are computed zeros beyond _noisy's (see "Signed
    zeros"): the result on the run's operands (`out`) or the float64 value (`exact`) within the
    op's declared forward `error` of zero (std of values a float32 run rounds to equal is 0, while
    the perturbed operands leave it 2 errors off), or a float64 value no further from zero than the
    run moved it (`noisy`), where the rounding of the operands decides the sign; never a float64
    zero itself, whose run value keeps the error carried to it."""
    exact = np.broadcast_to(exact, np.shape(noisy))
    with np.errstate(invalid="ignore", over="ignore"):
        drift = np.abs(noisy - exact)  # nan where either is nan; inf where the run overflowed
        if error is not None:
            drift = np.maximum(drift, error)
        near = (np.abs(exact) <= drift) & (drift < np.inf)
        if error is not None:
            near |= np.isfinite(out) & (np.abs(out) <= error)
    # Not a float64 zero: r64 already stands for the exact zero, and snapping it here would erase
    # the error upstream rounding carried to it (a normalization over one element is its bias
    # exactly, yet torch's fused x * scale + shift is off by u |x| / sqrt(eps) either way; a max
    # downstream hides the other run's negative error: 40-minute campaign case 71).
    return near & (exact != 0)


def _near_overflow(noisy: np.ndarray, exact: np.ndarray, dtype: str) -> np.ndarray:
    """The entries of a rounding run's result whose float64 value (`exact`) is within its rounding
    bound, or the run's drift from it, of `dtype`'s largest value: an honest kernel may round them
    past it (a float16 product of 65,519.8 is inf when its operand rounded up by 3e-4)."""
    exact = np.broadcast_to(exact, np.shape(noisy))
    with np.errstate(invalid="ignore", over="ignore"):
        reach = np.maximum(np.abs(noisy - exact), ROUNDING_SLACK * UNIT_ROUNDOFF[dtype] * np.abs(exact))
        return np.isfinite(exact) & np.isfinite(reach) & (np.abs(exact) + reach > LARGEST[dtype])


def _zero_sign_dependent(op, xs: list, computed: list[bool], ps: dict, attrs: dict, dtype: str,
                         exact_xs: list | None = None) -> np.ndarray | None:
    """Where the result of `op` on the operands `xs` depends on the sign of a zero among the computed
    operands (`computed`: not graph inputs); None where no operand has such a zero. Such a zero
    stands for a result within rounding of zero, of either sign: a zero of the run, or a float64
    zero (`exact_xs`) the run carries an error on (instance_norm of two equal values is 0 in float64
    and +-1e-16 in torch's: 1 / that is 1e16 of either sign, no value a run's allowance bounds). The
    entry is undefined in `dtype` where the result at +0 and at -0 differ by more than a zero's sign
    (atan2's +-pi, 1 / +-0), or at d's smallest normal below zero is of another class (sqrt and log
    are nan there). See "Signed zeros"."""
    if not op.numerics.zero_sign_matters and op.declares_numerics:  # an op that declares nothing may care
        return None
    exact_xs = xs if exact_xs is None else exact_xs
    zeros = [np.logical_and(is_computed, (x == 0) | (np.broadcast_to(exact, np.shape(x)) == 0))
             for x, exact, is_computed in zip(xs, exact_xs, computed)]
    if not any(np.any(zero) for zero in zeros):
        return None

    def at(value: float) -> np.ndarray:
        return np.asarray(op.reference([np.where(zero, value, x) for x, zero in zip(xs, zeros)], ps, attrs), dtype=np.float64)

    plus, minus = at(0.0), at(-0.0)
    classes = nonfinite_class(plus)
    changed = (classes != nonfinite_class(minus)) | (np.isfinite(plus) & (plus != minus))
    return changed | (classes != nonfinite_class(at(-TINY[dtype])))


# How far (in units of ROUNDING_SLACK * roundoff, relative) a computed operand of a rounding run may
# be from an integer its dtype-d value may round onto: the producer's rounding bound, plus the
# run's own perturbation of that result and of this op's operand.
INTEGER_SLACK = 3.0


def _integer_dependent(op, xs: list, computed: list[bool], ps: dict, attrs: dict, out: np.ndarray,
                       dtype: str, exact_xs: list | None = None) -> np.ndarray | None:
    """Where the class of `out` (`op` on the operands `xs`) changes when the computed operands
    within rounding of a nonzero integer are that integer, or those on one are the next value of
    `dtype` off it; None where no operand is either. The perturbed runs rarely land on an integer,
    while a dtype-d kernel may: tanh(-9.2358) is -0.99999998 in float64 and -1 in float32, so
    pow(t, t) is nan in float64 and -1 in float32. The other way round, a run that lands on one
    (a float64 conv output of -3851989742310140, whose spacing there is 0.5) stands for kernels that
    sum in another order and come out half off it, where pow(t, t) is nan (GPU campaign case 439).
    Like a computed zero's sign (see "Signed zeros"), such a result is undefined in `dtype`; a graph
    input is exact.
    Rounding is measured on the operand itself and, where the float64 values are given
    (`exact_xs`), as the run's drift from the float64 value, which carries the producer's bound: a
    float32 conv1d output that cancels from terms of 1,739 to 369.0000146 comes out as 369.0, and
    pow(-0.012, 369.0) is finite where the float64 value is nan (1-hour campaign case 70)."""
    if not op.numerics.integer_matters and op.declares_numerics:  # an op that declares nothing may care
        return None
    slack = INTEGER_SLACK * ROUNDING_SLACK * UNIT_ROUNDOFF[dtype]
    snapped, moved = [], False
    for i, (x, is_computed) in enumerate(zip(xs, computed)):
        if is_computed:
            step = _step_off_integer(x, slack, dtype)  # before snapping: what lands on one moves off it
            nearest = np.round(x)
            near = (nearest != 0) & (x != nearest) & (np.abs(x - nearest) <= slack * np.abs(x))
            if exact_xs is not None:
                exact = np.broadcast_to(exact_xs[i], np.shape(x))
                reachable = np.round(exact)
                drift = np.abs(x - exact)
                near_exact = ~near & (reachable != 0) & (np.abs(reachable - exact) <= drift + slack * np.abs(exact))
                nearest = np.where(near_exact, reachable, nearest)
                near = near | near_exact
            if near.any():
                x, moved = np.where(near, nearest, x), True
            if step is not None:
                x, moved = np.where(step > 0, xs[i] + step, x), True
        snapped.append(x)
    if not moved:
        return None
    return nonfinite_class(out) != nonfinite_class(np.asarray(op.reference(snapped, ps, attrs), dtype=np.float64))


def _step_off_integer(x: np.ndarray, slack: float, dtype: str) -> np.ndarray | None:
    """Per entry of `x`: the step up to `dtype`'s next value where the entry is a nonzero integer
    and that value is none but within `slack` (relative) of it, i.e. where `dtype`'s spacing there
    is below 1 and within rounding; 0 elsewhere. None where no entry has one."""
    on = (x == np.round(x)) & (x != 0) & np.isfinite(x)
    if not on.any():
        return None
    magnitude = np.where(on, np.abs(x), 1.0)
    spacing = np.exp2(np.floor(np.log2(magnitude))) * 2.0 * UNIT_ROUNDOFF[dtype]
    step = np.where(on & (spacing < 1.0) & (spacing <= slack * magnitude), spacing, 0.0)
    return step if step.any() else None


# What an undefined operand entry is replaced by to see which results depend on it: the extremes,
# a plain number (0 * inf is nan while 0 * 0 is 0; where(a <= b, a, b) takes a at -inf only) and
# nan, which an undefined entry may be (pow(-inf, 0.5)) and which alone gets through a clamp whose
# min is above its max (every number becomes max).
UNDEFINED_PROBES = (np.inf, -np.inf, 0.0, np.nan)


def _depends_on_undefined(op, xs: list, undefined_in: list, ps: dict, attrs: dict, shape: tuple) -> np.ndarray | None:
    """Where `op`'s result depends on an operand entry marked in `undefined_in`: the entries that
    change when those operand entries take each of UNDEFINED_PROBES. A nan alone would not do: a
    select (where, a comparison) reads nan as false and drops it. None where no operand entry is
    marked."""
    if not any(mask is not None for mask in undefined_in):
        return None
    results = []
    for probe in UNDEFINED_PROBES:
        probed = [x if mask is None else np.where(mask, probe, x) for x, mask in zip(xs, undefined_in)]
        try:
            results.append(np.broadcast_to(np.asarray(op.reference(probed, ps, attrs), dtype=np.float64), shape))
        except (ValueError, ArithmeticError):  # a reference that refuses inf (LinAlgError is a ValueError): all of it depends
            return np.ones(shape, dtype=bool)
    return np.logical_or.reduce([~_same(results[0], other) for other in results[1:]])


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per entry: the same value, nan equal to nan."""
    return (a == b) | (np.isnan(a) & np.isnan(b))


def _model_outputs(values: dict, undefined: dict, names: list[str], env: dict) -> list[np.ndarray]:
    """A rounding run's outputs as float64 arrays, each undefined entry nan, or inf where the float64
    run's (`env`) is nan: non-finite, and of another class than r64's, so the entry is neither
    judged nor defined non-finite, even where only one run finds it undefined."""
    outputs = []
    for name in names:
        value = np.asarray(values[name], dtype=np.float64)
        if undefined.get(name) is not None:
            value = np.where(undefined[name], np.where(np.isnan(env[name]), np.inf, np.nan), value)
        outputs.append(value)
    return outputs


# The fast path (FAST; see "Cost" in the module docstring). Every function below returns, bit for
# bit, what the plain function it stands for returns. Two arrays are *equivalent* when a reference
# function cannot tell them apart: the same dtype, values and memory layout (a reduction's
# summation order and a BLAS kernel's choice follow strides and alignment, so equal values alone
# are not enough). A shortcut replaces an array by an equivalent one, and nothing else.


# Below this many entries, the plain expressions cost no more than checking for the in-place ones.
IN_PLACE_SIZE = 4096


class _Diverged(Exception):
    """The dtypes' rounding runs would draw different shapes: the shared draws do not apply."""


def _standard(values) -> bool:
    """Is `values` a float64 ndarray laid out as numpy lays out a fresh C-ordered array (np.empty's
    strides, and 16-byte aligned as numpy's allocations are here)? numpy's elementwise functions
    (ufuncs, np.where) give their result exactly this layout when every array operand has it, so
    such an array, a copy of it and a result with its values are equivalent. (Where a fresh array
    lands beyond that alignment is malloc's choice, which the plain path does not control either.)"""
    if (type(values) is not np.ndarray or values.dtype != np.float64 or not values.flags.c_contiguous
            or values.size == 0 or values.ctypes.data % 16):
        return False
    if 1 not in values.shape:  # C-contiguous: the strides are np.empty's but for size-1 dims, which may be any
        return True
    step, strides = values.itemsize, []
    for dim in reversed(values.shape):
        strides.append(step)
        step *= dim
    return values.strides == tuple(reversed(strides))


def _separate(arrays: list) -> bool:
    """No two of `arrays` share memory (a copy of each would not either: numpy may treat aliased
    operands differently, e.g. a product with its own transpose)."""
    return not any(np.may_share_memory(a, b) for i, a in enumerate(arrays) for b in arrays[i + 1:])


def _sign_free(values: np.ndarray) -> bool:
    """No entry of the _standard array `values` has its sign bit set (as int64, none is negative)."""
    return bool(values.view(np.int64).min() >= 0)


def _abs_is_identity(xs: list, ps: dict) -> bool:
    """Are the operands `np.abs` gives the op (`[|x| for x in xs]`, `{k: |v|}`) equivalent to `xs`
    and `ps` themselves? np.abs only clears the sign bit, so where no entry has it set (no
    negative, no -0.0, no negative nan) the values are the same bits; `_standard` makes the
    layouts the same, `_separate` the aliasing."""
    operands = [*xs, *ps.values()]
    return all(_standard(a) and _sign_free(a) for a in operands) and _separate(operands)


def _noisy(out: np.ndarray, magnitude, draw: np.ndarray, dtype: str, zero: float) -> np.ndarray:
    """_rounding_runs' perturbed result of one op (before any forward_error), from its result
    `out`, its magnitude and the output draw; the plain expressions unless `out` and `magnitude`
    are _standard, where the same values are computed in place, in fewer passes (the result is
    then _standard too, as the plain expressions' would be: every operand of theirs is)."""
    roundoff = UNIT_ROUNDOFF[dtype]
    largest = LARGEST[dtype]
    if not (out.size >= IN_PLACE_SIZE and out.ndim and _standard(out) and _standard(magnitude) and _standard(draw)
            and out.shape == magnitude.shape == draw.shape):
        bound = ROUNDING_SLACK * roundoff * np.maximum(np.abs(out), np.where(np.isfinite(magnitude), magnitude, 0.0))
        noisy = _perturb(out, bound * draw)
        with np.errstate(invalid="ignore"):
            noisy = np.where(np.isfinite(out) & ((np.abs(out) <= bound) | (np.abs(out) < TINY[dtype])), zero, noisy)
            return np.where(np.isfinite(magnitude) & (magnitude > largest), np.copysign(np.inf, out), noisy)
    with np.errstate(invalid="ignore", over="ignore"):
        abs_out = np.abs(out)
        all_finite = bool(abs_out.max() < np.inf)  # a nan makes the maximum nan
        peak = magnitude.max()
        if peak < np.inf:  # every magnitude finite: np.where(np.isfinite(magnitude), magnitude, 0.0) is magnitude
            bound = np.maximum(abs_out, magnitude)
        else:
            bound = np.where(np.isfinite(magnitude), magnitude, 0.0)
            np.maximum(abs_out, bound, out=bound)
        bound *= ROUNDING_SLACK * roundoff
        snap = abs_out <= bound
        snap |= abs_out < TINY[dtype]
        finite = None if all_finite else np.isfinite(out)
        if finite is not None:
            snap &= finite
        # _perturb(out, bound * draw): where `out` is finite the bound is finite (|out| and the finite
        # magnitudes are, and the factor is below 1), so the delta is, and the entry is out + delta;
        # elsewhere it is `out`. The bound is not needed after this: the result takes its place.
        noisy = np.multiply(bound, draw, out=bound)
        noisy += out
        if finite is not None:
            np.copyto(noisy, out, where=~finite)
        if snap.any():
            np.copyto(noisy, zero, where=snap)
        # A finite magnitude never passes float64's largest value, nor any where the peak is below it.
        if largest < np.finfo(np.float64).max and not peak <= largest:
            over = magnitude > largest  # nan is not; inf is, and is left out below
            over &= np.isfinite(magnitude)
            if over.any():
                np.copyto(noisy, np.copysign(np.inf, out), where=over)
    return noisy


def _perturbed_operand(x, draw: np.ndarray, slack: float) -> np.ndarray:
    """x * (1.0 + slack * draw), as _rounding_runs computes it; in one buffer where x is _standard
    (the product's fresh array would be _standard too)."""
    factor = slack * draw
    factor += 1.0
    if np.size(x) >= IN_PLACE_SIZE and _standard(x) and _standard(factor) and x.shape == factor.shape:
        return np.multiply(x, factor, out=factor)
    return x * factor


def _rounding_runs_shared(case: Case, inputs: dict, params: dict, dtypes: list[str],
                          env: dict | None = None) -> dict[str, list[list[np.ndarray]]]:
    """_rounding_runs(case, inputs, params, dtype, env) for every dtype at once.

    Run r of every dtype seeds its generator alike and asks it for the same shapes in the same
    order (per node: one draw per perturbed operand, then one for the result), so it gets the
    same numbers: going node by node, each draw is made once and used by every dtype. Where the
    shapes would differ, _Diverged (the caller runs the plain function)."""
    graph = case.graph
    if env is None:
        with np.errstate(all="ignore"):
            env = evaluate_all(graph, inputs, params)
    runs: dict[str, list] = {dtype: [] for dtype in dtypes}
    for run in range(NOISY_RUNS):
        rng = np.random.default_rng([case.seed % 2**32, run])
        zero = 0.0 if run % 2 == 0 else -0.0
        envs = {dtype: dict(inputs) for dtype in dtypes}
        undefined: dict[str, dict] = {dtype: {} for dtype in dtypes}
        for node in graph.nodes:
            op = get_op(node.op)
            ps = params.get(node.name, {})
            computed = [name not in inputs for name in node.inputs]
            operands = {dtype: [envs[dtype][name] for name in node.inputs] for dtype in dtypes}
            with np.errstate(all="ignore"):
                if not op.numerics.exact:
                    shapes = [np.shape(x) for x in operands[dtypes[0]]]
                    if any([np.shape(x) for x in operands[dtype]] != shapes for dtype in dtypes):
                        raise _Diverged
                    draws = [rng.uniform(-1.0, 1.0, shape) for shape in shapes]
                    for dtype in dtypes:
                        operands[dtype] = [_perturbed_operand(x, u, ROUNDING_SLACK * UNIT_ROUNDOFF[dtype])
                                           for x, u in zip(operands[dtype], draws)]
                results = {}
                for dtype in dtypes:
                    xs = operands[dtype]
                    raw = op.reference(xs, ps, node.attrs)
                    out = np.asarray(raw, dtype=np.float64)
                    if _abs_is_identity(xs, ps):
                        # The plain call's operands are equivalent to these: the same result, again.
                        magnitude = np.abs(np.asarray(raw))
                    else:
                        magnitude = np.abs(np.asarray(op.reference([np.abs(x) for x in xs], {k: np.abs(v) for k, v in ps.items()},
                                                                   node.attrs)))
                    magnitude = operand_reach(op, xs, ps, node.attrs, out, magnitude, ROUNDING_SLACK * UNIT_ROUNDOFF[dtype],
                                              LARGEST[dtype])
                    results[dtype] = out, magnitude
                shape = results[dtypes[0]][0].shape
                if any(out.shape != shape for out, _ in results.values()):
                    raise _Diverged
                draw = rng.uniform(-1.0, 1.0, shape)
                for dtype in dtypes:
                    out, magnitude = results[dtype]
                    envs[dtype][node.name], undefined[dtype][node.name] = _finished(
                        _noisy(out, magnitude, draw, dtype, zero), op, operands[dtype], computed,
                        [undefined[dtype].get(name) for name in node.inputs], ps, node.attrs, out, env[node.name], dtype, run,
                        exact_xs=[env[name] for name in node.inputs])
        for dtype in dtypes:
            runs[dtype].append(_model_outputs(envs[dtype], undefined[dtype], graph.outputs, env))
    return runs


def _flush_to_zero_shared(graph: Graph, inputs: dict, params: dict, dtype: str, env: dict) -> list[np.ndarray]:
    """_flush_to_zero_run(graph, inputs, params, dtype), taking the float64 run's values (`env`,
    from reference.evaluate_all) where flushing changes nothing.

    By induction over the nodes: where every operand the plain run gives a node (a flushed copy)
    is equivalent to the one the float64 run gave it, the plain run's result is the float64
    run's, flushed; that flush changes nothing and is equivalent to the float64 value itself
    where the value has no entry in (0, tiny) in magnitude and is _standard. (`env` comes from
    reference.evaluate_all without overrides, whose implementation of an op is the op's reference.)"""
    tiny = TINY[dtype]
    flush = lambda values: _flushed(values, dtype)  # noqa: E731

    def exact_in(rounded, values) -> bool:  # does rounding to dtype leave the values as they are?
        return np.array_equal(rounded, values, equal_nan=True)

    def untouched(values) -> bool:
        if not _standard(values):
            return False
        small = np.abs(values) < tiny
        return not (small.any() and np.any(values[small] != 0))  # +-0 flushes to itself

    # The run's values, the same before flushing (_flushed_node), and whether a value is the float64 run's own array.
    values, raw, shared, undefined = {}, {}, {}, {}
    with np.errstate(all="ignore"):
        for name, value in inputs.items():
            rounded = round_to_dtype(value, dtype)
            shared[name] = untouched(env[name]) and exact_in(rounded, env[name])
            values[name] = env[name] if shared[name] else flush(rounded)
            raw[name] = env[name] if shared[name] else rounded
        for node in graph.nodes:
            ps = params.get(node.name, {})
            # The float64 run's operands: env's values, and each parameter as np.asarray(float64) gave it.
            cast = {k: np.asarray(v, dtype=np.float64) for k, v in ps.items()}
            operands = [env[name] for name in node.inputs] + list(cast.values())
            if (all(shared[name] for name in node.inputs)
                    and all(untouched(v) and exact_in(round_to_dtype(v, dtype), v) for v in cast.values())
                    and _separate(operands)):
                # No operand flushed or undefined: the result is env's, flushed, of env's classes.
                result = raw[node.name] = env[node.name]
                shared[node.name] = untouched(result)
                values[node.name] = result if shared[node.name] else flush(result)
            else:
                shared[node.name] = False
                values[node.name], undefined[node.name], raw[node.name] = _flushed_node(node, values, raw, undefined, params, env, dtype)
        return _model_outputs(values, undefined, graph.outputs, env)


def framework_reference(exact: list[np.ndarray], rounded: list[np.ndarray], models: list[list[np.ndarray]],
                        dtype: str, sensitivity: float) -> Reference:
    """The Reference of outputs only a framework computes (see "Extra outputs"): `exact` (r64) and
    `rounded` (r_d) are float64 runs at the case's values and at them rounded to `dtype`; `models`
    are further honest runs (the framework's eager run in `dtype`, the perturbed float64 runs)."""
    scale = float(max((np.max(np.abs(y[np.isfinite(y)]), initial=0.0) for y in exact), default=0.0))
    honest = HonestModels({dtype: rounded}, {dtype: []}, {dtype: []}, {dtype: []})
    for index, r64 in enumerate(exact):
        runs = [rounded[index], *(model[index] for model in models)]
        if dtype != "float64":  # an honest dtype-d backward underflows where the value is subnormal in d
            runs.append(_flushed(r64, dtype))
        judged = np.isfinite(r64) & np.logical_and.reduce([np.isfinite(y) for y in runs])
        honest.judged[dtype].append(judged)
        # No non-finite gradient is "defined": autograd's nan is often a chain-rule artifact (0 * inf
        # through a masked branch) that a compiler may rightly simplify away.
        honest.nonfinite_candidates[dtype].append(np.zeros(np.shape(r64), dtype=bool))
        with np.errstate(invalid="ignore"):
            honest.rounding_noise[dtype].append(max((float(np.max(np.abs(y - r64)[judged], initial=0.0)) for y in runs[1:]), default=0.0))
    return Reference(exact, [scale] * len(exact), [sensitivity] * len(exact), models_computed=honest)


def extended(reference: Reference, extra: Reference) -> Reference:
    """`reference` followed by `extra`'s outputs, for the dtypes both define (their honest models
    are joined when something asks for them)."""

    def joined() -> HonestModels:
        dtypes = reference.same_dtype.keys() & extra.same_dtype.keys()
        return HonestModels(*({d: table[d] + extra_table[d] for d in dtypes} for table, extra_table in (
            (reference.same_dtype, extra.same_dtype), (reference.rounding_noise, extra.rounding_noise),
            (reference.judged, extra.judged), (reference.nonfinite_candidates, extra.nonfinite_candidates))),
            overflow=lambda: reference.models.overflowed + extra.models.overflowed)

    return Reference(reference.outputs + extra.outputs, reference.scales + extra.scales,
                     reference.sensitivities + extra.sensitivities, compute_models=joined)


def floor_allowance(reference: Reference, index: int, dtype: str) -> float:
    """The floor term of `allowed`, sens * (RTOL[d] * scale + TINY[d]). allowed_error adds K_SAME *
    e_same to it, and e_same >= 0 (each of its maxima starts at 0.0 and spans entries finite in r64
    and in the model: no nan), so `allowed` is never below the floor."""
    return reference.sensitivities[index] * (RTOL[dtype] * reference.scales[index] + TINY[dtype])


def allowed_error(reference: Reference, index: int, dtype: str, judged: np.ndarray | None = None) -> float:
    """The tolerance model's `allowed` for output `index` (see the module docstring)."""
    same, r64 = reference.same_dtype[dtype][index], reference.outputs[index]
    own = judged is None or judged is reference.judged_finite(dtype, index)
    if FAST and own and (dtype, index) in reference.allowance:  # one per case: every backend of `dtype` asks
        return reference.allowance[dtype, index]
    judged = reference.judged_finite(dtype, index) if judged is None else judged
    with np.errstate(invalid="ignore", over="ignore"):
        if FAST:  # the same maximum without copying the judged entries out (no nan among them)
            deviation = float(np.max(np.abs(same - r64), where=judged, initial=0.0))
        else:
            deviation = float(np.max(np.abs(same - r64)[judged], initial=0.0))
    e_same = max(deviation, reference.rounding_noise[dtype][index])
    allowed = K_SAME * e_same + floor_allowance(reference, index, dtype)
    if FAST and own:
        reference.allowance[dtype, index] = allowed
    return allowed


def compare_output(y: np.ndarray, index: int, reference: Reference, dtype: str) -> tuple[str, float, float, str]:
    """(verdict, error, allowed, detail) for one output against the reference."""
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
    defined = reference.nonfinite_candidates[dtype][index] if LAZY else reference.defined_nonfinite[dtype][index]
    wrong_class = defined if FAST and not np.any(defined) else defined & (nonfinite_class(y) != reference.output_classes[index])
    if LAZY and np.any(wrong_class):
        wrong_class &= reference.defined_nonfinite[dtype][index]
    if np.any(wrong_class):
        at = tuple(int(i) for i in np.argwhere(wrong_class)[0])
        return NAN_INF, float("inf"), 0.0, (f"{int(wrong_class.sum())} entries differ from a non-finite reference, "
                                            f"e.g. at {list(at)}: {y[at]} where the reference is {r64[at]}")
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf at entries outside `finite`
        if FAST:  # the same maximum without copying the judged entries out (y is finite there: no nan)
            err = float(np.max(np.abs(y - r64), where=finite, initial=0.0))
        else:
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


def compare_at_floor(y: np.ndarray, index: int, reference: Reference, dtype: str) -> tuple[str, float, float, str] | None:
    """compare_output's answer for one output without the honest models, where the floor settles
    it: `y` finite wherever r64 is, and within floor_allowance of it there; `y` of r64's non-finite
    class wherever r64 is not finite. Then the full comparison agrees too: it judges a subset of
    r64's finite entries, against an allowance no smaller, and every entry it says the math
    defines as non-finite has r64's class in `y`. None where the honest models are needed."""
    r64 = reference.outputs[index]
    if tuple(y.shape) != tuple(r64.shape):
        return None
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
    return (AGREE, err, floor, "") if err <= floor else None


def judge_outputs(backend: str, dtype: str, outputs: list[np.ndarray], reference: Reference,
                  at_floor: bool = False) -> BackendVerdict:
    """The backend's verdict: that of its worst output. `at_floor`: agree at the floor where every
    output allows it (compare_at_floor), before asking for the honest models (see "Cost")."""
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
