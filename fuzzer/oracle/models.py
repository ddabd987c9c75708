"""The honest models: what honest dtype-d implementations of a case may give, each a named entry of
MODELS, run, counted and timed per case (HonestModels.model_costs), and what they decide per entry
(judged by the tolerance, defined non-finite, or undefined) and add to the tolerance (e_same).

Every model here is generic: it reads only each op's float64 reference and the op's declaration
(the rounding runs read its declared forward and intermediate errors and the rules.py facts), so
an op that declares nothing is judged by the same models, at the dtype's precision.

r_d is numpy in dtype d, with d's rounding and range (float16 overflows past 65,504, as an
honest float16 kernel may); for float16 a second such model computes each op in float32 and rounds
its result, as torch's opmath and cuBLAS do (a product of -1.5e6 that overflows inside a numpy
float16 baddbmm does not there), and an entry must be the same in both to be defined.
bfloat16 values are ml_dtypes' and every op computes in float32 from them and rounds its result
to bfloat16, as a bfloat16 kernel does (fuzzer/judging/reference.py says why not ml_dtypes' own reductions): an
input that rounds to -1 makes log1p -inf there too. A scan that kernels may carry in bfloat16
(Numerics.scans_in_dtype: cumsum) runs in bfloat16 in the model as well.

Non-finite values
-----------------
The oracle judges what the reference defines, entry by entry, against the honest models
of dtype d: r_d, the rounding runs, and a flush-to-zero run (subnormals flushed at every
op, as XLA does on CPU). The rounding runs also snap a result within its rounding bound of
zero, or below d's smallest normal, to +0 (run 0) or -0 (run 1), since an honest op may
return an exact zero of either sign (see "Signed zeros" in rules.py), and make inf an entry whose
magnitude op(|inputs|) passes d's largest value (an honest float32 sum may overflow in its
own order), and run 1 also one whose float64 value is within its rounding bound of that value
(a float16 product of 65,519.8 rounds to inf when an operand rounded up).
  * r64 finite and every model finite: the entry is judged by the tolerance (compare.py);
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
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

import numpy as np

from fuzzer.ir import Case, Graph, interpret
from fuzzer.ops import get_op
import fuzzer.oracle.fast as fast
import fuzzer.oracle.paths as paths
from fuzzer.judging.reference import evaluate_all
from fuzzer.oracle.dtypes import nonfinite_class
from fuzzer.oracle.flush import flush_in_range_run, flush_to_zero_run
from fuzzer.oracle.rounding import rounding_runs

@dataclass
class HonestModels:
    """What honest dtype-d implementations of a case may give, per dtype and output (see "Non-finite
    values" above): r_d, the rounding noise, the entries judged by the tolerance (finite in every honest
    model of the dtype) and the non-finite entries the math defines."""

    same_dtype: dict[str, list[np.ndarray]] = field(default_factory=dict)
    rounding_noise: dict[str, list[float]] = field(default_factory=dict)
    judged: dict[str, list[np.ndarray]] = field(default_factory=dict)
    # The entries non-finite in r64 that every honest model gives r64's class: defined unless
    # float64 overflowed there, which only the longdouble run tells (`overflow`, see "Cost" in paths.py).
    nonfinite_candidates: dict[str, list[np.ndarray]] = field(default_factory=dict)
    # Per output, the entries where float64 overflowed (float64_overflow); None: nowhere.
    overflow: Callable[[], list[np.ndarray]] | None = field(default=None, repr=False, compare=False)
    # Per model name (MODELS, and "longdouble-overflow"): (graph runs, seconds) for this case.
    model_costs: dict[str, tuple[int, float]] = field(default_factory=dict, repr=False, compare=False)
    # Per entry, the largest deviation of a NOISE model (r_d's included) from r64 on judged entries, 0 elsewhere
    # (compare.py, "Per entry"); absent for outputs without it (gradients): those are judged by the output's allowance.
    deviations: dict[str, list[np.ndarray]] = field(default_factory=dict, repr=False)

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
class CaseRuns:
    """What every model of a case reads: the case, its inputs and parameters, the float64 run's
    values (`env`) and outputs, and the dtypes modelled; the rounding runs of every dtype at once
    where the fast path shares them (fast.rounding_runs_shared)."""

    case: Case
    inputs: dict
    params: dict
    env: dict
    outputs: list[np.ndarray]
    dtypes: set[str]
    shared_rounding: dict | None = None
    shared_tried: bool = False


def _same_dtype(runs: CaseRuns, dtype: str) -> list[list[np.ndarray]]:
    if dtype == "float64":
        return [runs.outputs]
    with np.errstate(all="ignore"):
        env_d = evaluate_all(runs.case.graph, runs.inputs, runs.params, dtype)
    return [[np.asarray(env_d[o], dtype=np.float64) for o in runs.case.graph.outputs]]


def _rounding(runs: CaseRuns, dtype: str) -> list[list[np.ndarray]]:
    if paths.FAST and not runs.shared_tried:
        runs.shared_tried = True
        try:
            runs.shared_rounding = fast.rounding_runs_shared(runs.case, runs.inputs, runs.params, sorted(runs.dtypes), runs.env)
        except fast.Diverged:
            runs.shared_rounding = None
    if runs.shared_rounding is not None:
        return runs.shared_rounding[dtype]
    return rounding_runs(runs.case, runs.inputs, runs.params, dtype, runs.env)


def _flush_to_zero(runs: CaseRuns, dtype: str) -> list[list[np.ndarray]]:
    if paths.FAST:
        return [fast.flush_to_zero_shared(runs.case.graph, runs.inputs, runs.params, dtype, runs.env)]
    return [flush_to_zero_run(runs.case.graph, runs.inputs, runs.params, dtype, runs.env)]


def _float32_opmath(runs: CaseRuns, dtype: str) -> list[list[np.ndarray]]:
    with np.errstate(all="ignore"):
        env_wide = evaluate_all(runs.case.graph, runs.inputs, runs.params, dtype, in_float32=True)
    return [[np.asarray(env_wide[o], dtype=np.float64) for o in runs.case.graph.outputs]]


def _directed(runs: CaseRuns, dtype: str) -> list[list[np.ndarray]]:
    return rounding_runs(runs.case, runs.inputs, runs.params, dtype, runs.env, directed=True)


def _flush_in_range(runs: CaseRuns, dtype: str) -> list[list[np.ndarray]]:
    return [flush_in_range_run(runs.case.graph, runs.inputs, runs.params, dtype)]


NOISE, CLASSIFIER = "noise", "classifier"


@dataclass(frozen=True)
class HonestModel:
    """One honest model: `run` gives its runs of a case in a dtype (each a list of outputs).
    A NOISE model's deviation from r64 joins e_same (r_d's through allowed_error) and it decides
    which entries are judged or defined; a CLASSIFIER only decides that (its coherent drift would
    widen the tolerance of every long reduction)."""

    name: str
    reason: str
    role: str
    applies: Callable[[str], bool]  # to which dtypes
    run: Callable[[CaseRuns, str], list[list[np.ndarray]]]


def _every(dtype: str) -> bool:
    return True


def _narrow(dtype: str) -> bool:
    return dtype != "float64"


# In this order: the first is r_d, and the models' order is the order of their runs.
MODELS = (
    HonestModel("same-dtype", "numpy in dtype d (r_d), with d's rounding and range", NOISE, _every, _same_dtype),
    HonestModel("rounding", "the float64 run with every op's operands and result moved by a few roundoffs of d, "
                "seeded (rounding.py)", NOISE, _every, _rounding),
    HonestModel("flush-to-zero", "subnormals of d flushed at every op, as XLA on the CPU and fast-math kernels do "
                "(flush.py)", NOISE, _narrow, _flush_to_zero),
    HonestModel("float32-opmath", "each float16 op computed in float32 and rounded, as torch's opmath and cuBLAS do",
                NOISE, lambda dtype: dtype == "float16", _float32_opmath),
    HonestModel("directed", "every op's result moved by its whole rounding bound, up in one run and down in the other",
                CLASSIFIER, _every, _directed),
    HonestModel("flush-in-range", "flushed and overflowing in d's range at once, as a float32 kernel does (flush.py)",
                CLASSIFIER, _narrow, _flush_in_range),
)


def _timed(costs: dict, name: str, run: Callable[[], list], count: Callable[[list], int] = len) -> list:
    """run(), its runs (`count` of its result) and seconds added to costs[name]."""
    start = time.perf_counter()
    result = run()
    runs, seconds = costs.get(name, (0, 0.0))
    costs[name] = (runs + count(result), seconds + time.perf_counter() - start)
    return result


def honest_models(case: Case, inputs: dict, params: dict, env: dict, outputs: list[np.ndarray],
                  dtypes: set[str]) -> HonestModels:
    """The honest models of each dtype, from the float64 run's values `env` and `outputs`."""
    graph = case.graph
    costs: dict[str, tuple[int, float]] = {}
    honest = HonestModels(overflow=lambda: _timed(costs, "longdouble-overflow",
                                                  lambda: float64_overflow(graph, inputs, params, outputs), lambda _: 1),
                          model_costs=costs)
    runs_of = CaseRuns(case, inputs, params, env, outputs, dtypes)
    finite64 = [np.isfinite(r64) for r64 in outputs]
    all_finite64 = [bool(np.all(f)) for f in finite64]
    for dtype in dtypes:
        # What honest dtype-d implementations may give: an entry is judged by the tolerance where
        # all of them are finite, defined non-finite where all give r64's non-finite class, skipped otherwise.
        models, classifiers = [], []
        for model in MODELS:
            if model.applies(dtype):
                runs = _timed(costs, model.name, lambda: model.run(runs_of, dtype))
                (models if model.role == NOISE else classifiers).extend(runs)
        honest.same_dtype[dtype] = models[0]
        classifiers = models + classifiers
        honest.judged[dtype], honest.nonfinite_candidates[dtype], honest.rounding_noise[dtype] = [], [], []
        honest.deviations[dtype] = []
        for index, r64 in enumerate(outputs):
            runs = [np.broadcast_to(np.asarray(model[index], dtype=np.float64), r64.shape) for model in classifiers]
            if not paths.FAST:
                judged = np.isfinite(r64) & np.logical_and.reduce([np.isfinite(y) for y in runs])
                honest.judged[dtype].append(judged)
                honest.nonfinite_candidates[dtype].append(
                    ~np.isfinite(r64) & np.logical_and.reduce([nonfinite_class(y) == nonfinite_class(r64) for y in runs]))
                with np.errstate(invalid="ignore"):
                    honest.rounding_noise[dtype].append(
                        max((float(np.max(np.abs(y - r64)[judged], initial=0.0)) for y in runs[1:len(models)]), default=0.0))
                honest.deviations[dtype].append(_deviation(runs[:len(models)], r64, judged))
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
            honest.deviations[dtype].append(_deviation(runs[:len(models)], r64, judged))
    return honest


def _deviation(runs: list[np.ndarray], r64: np.ndarray, judged: np.ndarray) -> np.ndarray:
    """HonestModels.deviations of one output: per judged entry, the largest |run - r64| of `runs`; 0 elsewhere."""
    deviation = np.zeros(r64.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        for y in runs:
            deviation = np.fmax(deviation, np.where(judged, np.abs(y - r64), 0.0))
    return deviation


def float64_overflow(graph: Graph, inputs: dict, params: dict, outputs: list[np.ndarray]) -> list[np.ndarray]:
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
