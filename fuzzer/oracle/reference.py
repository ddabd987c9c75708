"""The Reference of a case: its float64 outputs, the scale and sensitivity of each output, and its
honest models (models.py), computed the first time something asks for them (see "Cost" in
paths.py); and the Reference of outputs only a framework computes (gradients).

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
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Callable

import numpy as np

from fuzzer.ir import Case, split_arrays
from fuzzer.ops import get_op
import fuzzer.oracle.paths as paths
from fuzzer.complex_dtypes import is_complex
from fuzzer.exact_dtypes import is_exact
from fuzzer.judging.reference import evaluate_all, numpy_dtype
from fuzzer.oracle.complex import ComplexReference
from fuzzer.oracle.dtypes import flushed, nonfinite_class
from fuzzer.oracle.entry_scale import entry_scales
from fuzzer.oracle.exact import ExactReference
from fuzzer.oracle.models import HonestModels, honest_models


@dataclass
class Reference:
    """The float64 reference of a case, plus what the tolerance model needs: its honest models,
    given, or computed by `compute_models` the first time something asks for them (see "Cost" in paths.py)."""

    outputs: list[np.ndarray]
    scales: list[float]
    sensitivities: list[float]
    models_computed: HonestModels | None = field(default=None, repr=False)
    compute_models: Callable[[], HonestModels] | None = field(default=None, repr=False, compare=False)
    # allowed_error per (dtype, output) with the reference's own judged mask: one per case, not per backend.
    allowance: dict[tuple[str, int], float] = field(default_factory=dict, repr=False, compare=False)
    entry_allowances: dict[tuple[str, int], np.ndarray | None] = field(default_factory=dict, repr=False, compare=False)
    # Every value of the float64 run by name, inputs included (the special values a node reads: fuzzer/drawing/regions.py).
    values: dict = field(default_factory=dict, repr=False, compare=False)
    float64_cost: dict[str, tuple[int, float]] = field(default_factory=dict, repr=False, compare=False)
    # Per output whose op declares Numerics.indexes: indices -> (the operand values there, valid); judged by indices.py.
    indexers: dict[int, Callable] = field(default_factory=dict, repr=False, compare=False)
    # Per output, each entry's scale (entry_scale.py), computed the first time compare.py asks; None: the output's scale only.
    compute_entry_scales: Callable[[], list[np.ndarray | None]] | None = field(default=None, repr=False, compare=False)
    # The exact references of the integer and bool backends (exact.py), None where none is judged.
    exact: ExactReference | None = field(default=None, repr=False, compare=False)
    # The references of the complex backends (complex.py), None where none is judged.
    complex: ComplexReference | None = field(default=None, repr=False, compare=False)

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

    @property
    def model_costs(self) -> dict[str, tuple[int, float]]:
        """{model name: (graph runs, seconds)} of this case: the float64 run, and the honest models
        computed so far (models.MODELS, "longdouble-overflow"); asking computes nothing."""
        computed = self.models_computed.model_costs if self.models_computed is not None else {}
        return {**self.float64_cost, **computed}

    @cached_property
    def entry_scales(self) -> list[np.ndarray | None]:
        scales = self.compute_entry_scales() if self.compute_entry_scales is not None else []
        self.compute_entry_scales = None
        return scales + [None] * (len(self.outputs) - len(scales))

    def deviation(self, dtype: str, index: int) -> np.ndarray | None:
        """HonestModels.deviations of output `index` in `dtype`; None where the models keep none (gradients)."""
        deviations = self.models.deviations.get(dtype, [])
        return deviations[index] if index < len(deviations) else None

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
        if self.exact is not None:  # an integer or bool result is defined everywhere
            return True
        if self.complex is not None and not self.same_dtype:  # only complex backends judge it
            return self.complex.defines_anything()
        indices = [(dtype, index) for dtype in self.same_dtype for index in range(len(self.outputs))]
        # Judged entries first: the defined non-finite ones may need the longdouble run.
        return (any(np.any(self.judged_finite(dtype, index)) for dtype, index in indices)
                or any(np.any(self.defined_nonfinite[dtype][index]) for dtype, index in indices))


def compute_reference(case: Case, dtypes: set[str]) -> Reference:
    if case.graph.steps:  # a program: its literal numpy runs (fuzzer/programs/program.py); no integer backend runs one
        return program_reference(case, {d for d in dtypes if not is_exact(d)})
    exact_dtypes = sorted(d for d in dtypes if is_exact(d))
    exact = ExactReference(case) if exact_dtypes else None
    complex_reference = ComplexReference(case) if any(is_complex(d) for d in dtypes) else None
    dtypes = {d for d in dtypes if not is_exact(d) and not is_complex(d)}
    if not dtypes and exact is not None:
        return _exact_only(case, exact, exact_dtypes[0])
    if not dtypes and complex_reference is not None:
        return _complex_only(case, complex_reference)
    graph = case.graph
    inputs, params = split_arrays(case)
    start = time.perf_counter()
    with np.errstate(all="ignore"):  # non-finite values are judged, not warned about
        env = evaluate_all(graph, inputs, params)
    float64_cost = {"float64": (1, time.perf_counter() - start)}
    outputs, scales, sensitivities = [], [], []
    peaks: dict = {}  # per value (a name, or a node's parameter): its largest finite magnitude
    for out in graph.outputs:
        ancestors = graph.ancestors([out])
        if paths.FAST:
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
    return Reference(outputs, scales, sensitivities, values=env, float64_cost=float64_cost, exact=exact, complex=complex_reference,
                     indexers=_indexers(graph, env, params),
                     compute_models=lambda: honest_models(case, inputs, params, env, outputs, dtypes),
                     compute_entry_scales=lambda: entry_scales(graph, env, inputs, params, case.seed))


def _indexers(graph, env: dict, params: dict) -> dict[int, Callable]:
    """Reference.indexers: the outputs of an op that declares Numerics.indexes, read at its float64 operands."""
    producers = {node.name: node for node in graph.nodes}
    indexers = {}
    for index, out in enumerate(graph.outputs):
        node = producers.get(out)
        indexes = node and get_op(node.op).numerics.indexes
        if indexes is not None:
            operands = [env[name] for name in node.inputs]
            indexers[index] = partial(indexes, operands, params.get(node.name, {}), node.attrs)
    return indexers


def _exact_only(case: Case, exact: ExactReference, dtype: str) -> Reference:
    """The Reference of a case only exact backends judge: no float64 run (a bitwise op has none) and no
    honest models; its values and outputs are `dtype`'s exact run, for the region keys and localization."""
    env = exact.env(dtype)
    env = {} if isinstance(env, str) else env
    outputs = [env[name] for name in case.graph.outputs] if env else [np.zeros(0)] * len(case.graph.outputs)
    return Reference(outputs, [0.0] * len(outputs), [1.0] * len(outputs), models_computed=HonestModels(), values=env, exact=exact)


def _complex_only(case: Case, reference: ComplexReference) -> Reference:
    """The Reference of a case only complex backends judge: its values and outputs are the complex128
    run (for the region keys and localization); complex.py judges them."""
    env = reference.env("complex128")
    env = {} if isinstance(env, str) else env
    outputs = [env[name] for name in case.graph.outputs] if env else [np.zeros(0)] * len(case.graph.outputs)
    return Reference(outputs, [0.0] * len(outputs), [1.0] * len(outputs), models_computed=HonestModels(), values=env,
                     complex=reference)


def framework_reference(exact: list[np.ndarray], rounded: list[np.ndarray], models: list[list[np.ndarray]],
                        dtype: str, sensitivity: float, scale_floor: float = 0.0) -> Reference:
    """The Reference of outputs only a framework computes (see "Extra outputs" above): `exact` (r64) and
    `rounded` (r_d) are float64 runs at the case's values and at them rounded to `dtype`; `models`
    are further honest runs (the framework's eager run in `dtype`, the perturbed float64 runs).
    `scale_floor`: the magnitude of the values they are computed from, below which their scale does not
    go (a derivative that cancels to 0 is computed from terms of that size, each rounded)."""
    scale = float(max((np.max(np.abs(y[np.isfinite(y)]), initial=scale_floor) for y in exact), default=scale_floor))
    honest = HonestModels({dtype: rounded}, {dtype: []}, {dtype: []}, {dtype: []})
    for index, r64 in enumerate(exact):
        runs = [rounded[index], *(model[index] for model in models)]
        if dtype != "float64":  # an honest dtype-d backward underflows where the value is subnormal in d
            runs.append(flushed(r64, dtype))
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
            overflow=lambda: reference.models.overflowed + extra.models.overflowed, deviations=reference.models.deviations)

    return Reference(reference.outputs + extra.outputs, reference.scales + extra.scales,
                     reference.sensitivities + extra.sensitivities, compute_models=joined, indexers=reference.indexers,
                     compute_entry_scales=lambda: reference.entry_scales)


def program_reference(case, dtypes: set[str]):
    """The oracle's Reference of a program case: its float64 literal run, and per dtype d the honest
    models run the same way: float64 at the inputs rounded to d (r_d), numpy in d itself, and numpy in d
    with every computed value below d's smallest normal made zero (_flushing: a kernel that flushes, or
    whose order of operations underflows, as float32 1 / (1 + exp(93.96)) is 0 on CUDA where numpy's
    sigmoid is 1.7e-41: a later `x > 0` mask flips; GPU campaign 2026-12-02). As for
    gradients (fuzzer/oracle/reference.py, "Extra outputs"), no non-finite entry is defined: a write
    that a compiler reorders around a nan is no finding of this slice. Per result, as of the step that
    gives it (the inputs' final values: the last): scale, the largest magnitude of any value (inputs,
    intermediates, results) up to that step; sensitivity, 1 + every statement's once per step up to it
    (views and the writes that only move values add none: fuzzer/programs/statements.py, MOVES_VALUES).
    A step's outputs never depend on later steps, so a later step's growth (a state fed back doubles
    each step) allows them nothing: with one scale and one sensitivity for every result, a first step's
    outputs near 7 were allowed 6.3 where the third step's values reached 16000."""
    from fuzzer.programs.program import VIEWS, run_in_numpy, written_inputs

    graph, inputs = case.graph, {spec.name: case.arrays[spec.name] for spec in case.graph.inputs}
    start = time.perf_counter()
    peaks: list[float] = []
    exact = run_in_numpy(graph, inputs, np.float64, peaks=peaks)
    cost = {"float64": (1, time.perf_counter() - start)}
    per_step = sum(get_op(node.op).numerics.sensitivity for node in graph.nodes if node.op not in VIEWS)
    steps = [step for step in range(graph.steps) for _ in graph.outputs] + [graph.steps - 1] * len(written_inputs(graph))
    scales = [peaks[step] for step in steps]
    sensitivities = [1.0 + (step + 1) * per_step for step in steps]
    models = HonestModels({}, {}, {}, {})
    for dtype in sorted(dtypes):
        numpy_type = numpy_dtype(dtype)
        rounded = run_in_numpy(graph, {k: np.asarray(v, dtype=numpy_type) for k, v in inputs.items()}, np.float64)
        runs = [rounded, run_in_numpy(graph, inputs, numpy_type), run_in_numpy(graph, inputs, numpy_type, _flushing(dtype))]
        models.same_dtype[dtype], models.rounding_noise[dtype] = rounded, []
        models.judged[dtype], models.nonfinite_candidates[dtype] = [], []
        for index, r64 in enumerate(exact):
            judged = np.isfinite(r64) & np.logical_and.reduce([np.isfinite(run[index]) for run in runs])
            models.judged[dtype].append(judged)
            models.nonfinite_candidates[dtype].append(np.zeros(np.shape(r64), dtype=bool))
            with np.errstate(invalid="ignore", over="ignore"):
                noise = max(float(np.max(np.abs(run[index] - r64), where=judged, initial=0.0)) for run in runs)
            models.rounding_noise[dtype].append(noise)
    return Reference(exact, scales, sensitivities, models_computed=models, float64_cost=cost)


def _denormals_as_zero(x, dtype: str):
    """A float operand with `dtype`'s subnormals read as (signed) zero, in its own dtype."""
    x = np.asarray(x)
    return flushed(x, dtype).astype(x.dtype) if np.issubdtype(x.dtype, np.floating) else x


def _flushing(dtype: str) -> Callable:
    """Statement implementations (program_reference's impl_for) that read and make no value below
    `dtype`'s smallest normal, as XLA on the CPU runs (denormals are zero, and flushed to zero): the
    operands they read flushed (a write's destination excepted, which is memory to write into), and
    the results, written through (a write's result is its destination's memory); a view left as it is.
    jax's masked_fill_ reads a mask of 8.7e-42 as 0 (not positive), where numpy fills (2.15 campaign)."""
    from fuzzer.programs.statements import VIEWS, WRITES

    def impl_for(name: str) -> Callable:
        reference = get_op(name).reference
        if name in VIEWS:
            return reference

        def flushed_result(xs, ps, attrs):
            first_read = 1 if name in WRITES else 0
            xs = [*xs[:first_read], *(_denormals_as_zero(x, dtype) for x in xs[first_read:])]
            result = reference(xs, ps, attrs)
            if name in WRITES:
                np.copyto(result, flushed(result, dtype))
                return result
            return flushed(np.asarray(result), dtype)

        return flushed_result

    return impl_for
