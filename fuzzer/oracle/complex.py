"""Judging complex backends (fuzzer/complex_dtypes.py): each component of a complex result, real and
imaginary part, is judged as a float output of the component's dtype d (float32 for complex64), by the
float model's formula (compare.py, "Tolerance model"):

    err     = max |y_c - r64_c|                 over the judged entries, c the real or the imaginary part
    e_same  = max |h_c - r64_c|                 h: r_d, the references run in numpy's complex dtype, and
                                                the NOISY_RUNS noise runs (r64 with every computed component
                                                moved by up to ROUNDING_SLACK roundoffs of d of its rounding
                                                scale: the float model's rounding runs, on results only)
    allowed = K_SAME * e_same + sens * (RTOL[d] * scale + TINY[d])

r64 is each op's float64 `reference` run on complex128 (numpy's complex math), `scale` the largest
modulus along the way (inputs, parameters and intermediates the output depends on) and `sens` the
sum of their ops' sensitivities, as for floats. A real result (abs, angle, real, imag) is a complex
one whose imaginary part is 0.

Judged entries: those finite, in both components, in r_d, and that depend on no value that is not
finite in r64 or whose modulus is within OVERFLOW_MARGIN of d's largest value, inputs and
intermediates included (a `tainted` run tells: r64 again with those entries made nan at every
node, so that every entry computed from them is nan). The rest is skipped: the C99 conventions for
complex infinities and nans (which component is nan after an inf * 0, exp of -inf + inf j) differ
between numpy, torch and XLA, and no document makes one of them right; and near the end of d's range
an honest kernel overflows in its intermediates (cosh's e^y before it halves it: jax's complex64
cos(3e-6 + 89.02j) is inf, its value 2.3e38). A backend that is not finite where the entry is
judged gets `nan-inf`. Nor is an entry judged where the sign of a computed zero decides it: r64 runs
twice more with every computed component within ZERO_REACH roundoffs of d (relative to its node's
largest modulus) made +0 and then -0, and an entry the two runs disagree on is skipped. The sign of
such a zero is the kernel's order of operations (a CUDA complex matmul of zeros gives -0j where numpy
gives +0j), and angle, log and sqrt turn it into a jump of pi or 2 pi (GPU campaign 2026-12-02: 8
of 14 complex64 buckets on torch 2.11 CUDA).

Nor is an entry judged that an honest kernel's own rounding or intermediates leave undefined, which
the taint run marks too: where an accumulating op's terms' moduli add past the same margin (a complex64
matmul of 1e19 entries overflows in its partial products though its result is 1e36), and where a
periodic op (OpDef.complex_period: sin in the real part, exp in the imaginary part) reads a computed
component that ZERO_REACH roundoffs of d move a quarter period (sin of a float32 |z| of 2.9e31).

The noise runs are what lets a later op amplify an honest rounding (cos of an angle near pi/2 in
complex128, log of a tanh that rounds near 1; GPU complex campaign 2026-12-02, 4 of 6 buckets): an entry
a noise run makes non-finite is not judged either. What this leaves out, beside the float model: the
directed and flushing runs, and the per-entry allowances (an entry far below the output's scale is judged
by the output's allowance).

Where jax documents another convention than torch and numpy (OpDef.jax_complex_differs), a jax
backend is judged against jax eager's own run of the case, so jax-eager itself is not judged there.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from fuzzer.complex_dtypes import COMPONENT_DTYPE
from fuzzer.ir import Case, split_arrays
from fuzzer.ops import get_op
from fuzzer.oracle.dtypes import LARGEST, ROUNDING_SLACK, RTOL, TINY, UNIT_ROUNDOFF
from fuzzer.errors import IllTyped
from fuzzer.oracle.exact import TypedReference
from fuzzer.oracle.rounding import ACCUMULATING_FAMILIES, NOISY_RUNS
from fuzzer.records import BackendVerdict
from fuzzer.verdicts import AGREE, MISMATCH, NAN_INF, UNSUPPORTED, severity

K_SAME = 10.0  # compare.K_SAME: the same model
OVERFLOW_MARGIN = 1 / 16  # of d's largest value: past it, an honest kernel's intermediates may overflow
ZERO_REACH = 4.0  # roundoffs of d, relative to a node's largest modulus, within which a component may come out as +-0
PARTS = (("real part", np.real), ("imaginary part", np.imag))


def evaluate_complex(case: Case, dtype: str, taint_above: float | None = None, reach: float = 0.0,
                     zeros_within: tuple[float, float] | None = None, noise: tuple[int, float] | None = None) -> dict:
    """Every value of the case's graph by name: each op's reference on complex values of `dtype`
    ("complex128" for r64), each result kept in `dtype`'s precision (a real one in its component's).
    `taint_above`: every value's entries that are not finite or of a larger modulus made nan, and those
    an honest kernel's rounding (`reach`, relative) or intermediates leave undefined (_rounding_taint).
    `zeros_within` (sign, relative reach): every computed component within that fraction of its node's
    largest finite modulus made a zero of that sign (see above). `noise` (run, relative): every computed
    component moved by a draw within that fraction of its rounding scale (_rounding_noise)."""
    inputs, params = split_arrays(case)
    rng = None if noise is None else np.random.default_rng([case.seed % 2**32, noise[0]])
    complex_type, real_type = np.dtype(dtype), np.dtype(COMPONENT_DTYPE[dtype])

    def signed_zeros(value):
        sign, reach = zeros_within
        largest = float(np.max(np.abs(value), where=np.isfinite(value), initial=0.0))
        snap = lambda part: np.where(np.abs(part) <= reach * largest, np.copysign(0.0, sign), part)  # noqa: E731
        if value.dtype.kind != "c":
            return snap(value)
        snapped = np.empty_like(value)  # parts set one by one: x + 1j * -0.0 would lose the zero's sign
        snapped.real, snapped.imag = snap(value.real), snap(value.imag)
        return snapped

    def pinned(value):
        value = np.asarray(value)
        value = value.astype(complex_type if value.dtype.kind == "c" else real_type)
        if taint_above is not None:  # nan in both components: imag(nan + 0j) would be a finite 0
            value = np.where(np.isfinite(value) & (np.abs(value) <= taint_above), value,
                             complex(np.nan, np.nan) if value.dtype.kind == "c" else np.nan)
        return value

    env = {name: pinned(np.asarray(array).astype(complex_type)) for name, array in inputs.items()}
    with np.errstate(all="ignore"):
        for node in case.graph.nodes:
            op = get_op(node.op)
            operands = [env[name] for name in node.inputs]
            # A backend's parameters are of its complex dtype (a linear's weight): with a real operand, mixed.
            kinds = {operand.dtype.kind for operand in operands} | ({"c"} if params.get(node.name) else set())
            if not op.complex_dtypes and "c" in kinds:
                raise IllTyped(f"node '{node.name}' applies {node.op} to a complex value, which it does not take")
            if not op.float_dtypes and kinds != {"c"}:
                raise IllTyped(f"node '{node.name}' applies {node.op}, which takes complex values only, to a real value")
            if len(kinds) > 1 and op.complex_dtypes != "promotes":
                raise IllTyped(f"node '{node.name}' applies {node.op} to a real and a complex value, which torch refuses")
            if "c" in kinds:  # a real operand beside a complex one is promoted, as torch and jax do
                operands = [operand.astype(complex_type) for operand in operands]
            node_params = {k: np.asarray(v).astype(complex_type) for k, v in params.get(node.name, {}).items()}
            result = pinned(op.reference(operands, node_params, node.attrs))
            if noise is not None:
                result = pinned(_rounding_noise(op, operands, node_params, node.attrs, result, noise[1], rng))
            if taint_above is not None:
                computed = [name not in inputs for name in node.inputs]
                result = _rounding_taint(op, operands, computed, node_params, node.attrs, result, taint_above, reach)
            env[node.name] = result if zeros_within is None else pinned(signed_zeros(result))
    return env


def _rounding_taint(op, operands: list, computed: list[bool], params: dict, attrs: dict, result: np.ndarray,
                    limit: float, reach: float) -> np.ndarray:
    """`result` with nan where an honest kernel of the dtype may give anything (see above): an
    accumulating op (a matmul, a sum) whose terms' moduli add past `limit` (its partial sums may
    overflow though the result does not: 1e19 * 1e19 products in a complex64 matmul), and a periodic
    op (OpDef.complex_period) whose computed operand has a component that `reach` roundoffs move a
    quarter period (sin of a float32 |z| of 2.9e31, one roundoff of which is 1.7e24)."""
    undefined = np.zeros(np.shape(result), dtype=bool)
    if op.family in ACCUMULATING_FAMILIES:
        undefined |= _terms_moduli(op, operands, params, attrs) > limit
    if op.complex_period is not None:
        for operand, is_computed in zip(operands, computed):
            if is_computed:
                largest_part = np.maximum(np.abs(np.real(operand)), np.abs(np.imag(operand)))
                undefined |= np.broadcast_to(reach * largest_part >= op.complex_period / 4, undefined.shape)
    if not undefined.any():
        return result
    return np.where(undefined, complex(np.nan, np.nan) if result.dtype.kind == "c" else np.nan, result)


def _terms_moduli(op, operands: list, params: dict, attrs: dict) -> np.ndarray:
    """The op on its operands' moduli: for a sum or a matmul, the sum of its terms' moduli per entry."""
    return np.abs(op.reference([np.abs(x) for x in operands], {k: np.abs(v) for k, v in params.items()}, attrs))


def _rounding_noise(op, operands: list, params: dict, attrs: dict, result: np.ndarray, relative: float,
                    rng: np.random.Generator) -> np.ndarray:
    """`result` with each component moved by a uniform draw within `relative` of its rounding scale: the
    entry's modulus, or for an accumulating op the sum of its terms' moduli (the float model's rounding
    runs, rounding.py, on the result only). An honest kernel's rounding of one op then reaches whatever
    a later op amplifies it to: cos of an angle near pi/2, log of a tanh that rounds near 1, sin of a
    matmul whose terms cancel."""
    with np.errstate(all="ignore"):
        scale = np.abs(result)
        if op.family in ACCUMULATING_FAMILIES:
            scale = np.fmax(scale, _terms_moduli(op, operands, params, attrs))
        scale = np.where(np.isfinite(scale), scale, 0.0)
        moved = result + relative * scale * rng.uniform(-1.0, 1.0, np.shape(result))
        if np.asarray(result).dtype.kind == "c":
            moved = moved + 1j * relative * scale * rng.uniform(-1.0, 1.0, np.shape(result))
    return moved


def _roundoffs(count: float, dtype: str) -> float:
    """`count` roundoffs of complex `dtype`'s component dtype, relative."""
    return count * UNIT_ROUNDOFF[COMPONENT_DTYPE[dtype]]


@dataclass
class ComplexReference(TypedReference):
    """A case's complex references, computed when first asked: r64 (complex128) and r_d per dtype, and
    jax eager's own runs (TypedReference.jax_eager_outputs)."""

    def evaluate(self, dtype: str) -> dict:
        return evaluate_complex(self.case, dtype)

    def jax_differs(self) -> list[str]:
        """The case's ops whose complex convention jax documents otherwise than torch (OpDef.jax_complex_differs)."""
        return sorted({node.op for node in self.case.graph.nodes if get_op(node.op).jax_complex_differs})

    @cached_property
    def r64(self):
        return self.outputs("complex128")

    def judged(self, dtype: str, index: int) -> np.ndarray:
        """The entries of output `index` judged for `dtype` (see above)."""
        key = f"tainted:{dtype}"
        if key not in self.envs:
            limit = OVERFLOW_MARGIN * LARGEST[COMPONENT_DTYPE[dtype]]
            self.envs[key] = evaluate_complex(self.case, "complex128", taint_above=limit, reach=_roundoffs(ZERO_REACH, dtype))
        tainted = self.envs[key][self.case.graph.outputs[index]]
        name = self.case.graph.outputs[index]
        plus, minus = (self._signed_zero_run(sign, dtype)[name] for sign in (1.0, -1.0))
        with np.errstate(invalid="ignore"):
            zero_signs_agree = np.isclose(plus, minus, rtol=1e-6, atol=0.0, equal_nan=True)
        noisy_finite = [np.isfinite(np.asarray(run[name])) for run in self.noise_runs(dtype)]
        return (np.isfinite(tainted) & np.isfinite(np.asarray(self.outputs(dtype)[index])) & zero_signs_agree
                & np.logical_and.reduce(noisy_finite))

    def noise_runs(self, dtype: str) -> list[dict]:
        """r64 twice with every computed component moved within ROUNDING_SLACK roundoffs of `dtype` (see above)."""
        key = f"noise:{dtype}"
        if key not in self.envs:
            relative = _roundoffs(ROUNDING_SLACK, dtype)
            self.envs[key] = [evaluate_complex(self.case, "complex128", noise=(run, relative)) for run in range(NOISY_RUNS)]
        return self.envs[key]

    def _signed_zero_run(self, sign: float, dtype: str) -> dict:
        """r64 with every computed component within ZERO_REACH roundoffs of `dtype` made a zero of `sign`."""
        key = f"zeros{sign}:{dtype}"
        if key not in self.envs:
            self.envs[key] = evaluate_complex(self.case, "complex128", zeros_within=(sign, _roundoffs(ZERO_REACH, dtype)))
        return self.envs[key]

    def ill_typed(self) -> str | None:
        return self.r64 if isinstance(self.r64, str) else None

    def scale(self, index: int) -> tuple[float, float]:
        """(scale, sens) of output `index`: the largest finite modulus of every value it depends on
        (parameters included), and 1 + the sensitivities of its ops."""
        graph, env = self.case.graph, self.env("complex128")
        ancestors = graph.ancestors([graph.outputs[index]])
        _, params = split_arrays(self.case)
        values = [env[name] for name in ancestors] + [p for node, ps in params.items() if node in ancestors for p in ps.values()]
        with np.errstate(invalid="ignore", over="ignore"):
            magnitudes = [float(np.max(np.abs(v), where=np.isfinite(np.abs(v)), initial=0.0)) for v in map(np.asarray, values)]
        sens = 1.0 + sum(get_op(node.op).numerics.sensitivity for node in graph.nodes if node.name in ancestors)
        return max(magnitudes, default=0.0), sens

    def defines_anything(self) -> bool:
        """Is one entry of one output finite in both components? An ill-typed graph is judged (unsupported)."""
        return isinstance(self.r64, str) or any(np.any(np.isfinite(np.asarray(r, dtype=np.complex128))) for r in self.r64)


def compare_complex(y, index: int, reference: ComplexReference, dtype: str,
                    r64: np.ndarray | None = None, same: np.ndarray | None = None) -> tuple[str, float, float, str]:
    """(verdict, error, allowed, detail) of one output of a complex backend, its worse component
    first (see above); `r64` and `same` (r_d) where it is judged against another run (jax eager's)."""
    honest = [same] if same is not None else [reference.outputs(dtype)[index]] + [
        run[reference.case.graph.outputs[index]] for run in reference.noise_runs(dtype)]
    honest = [np.asarray(run, dtype=np.complex128) for run in honest]
    r64 = np.asarray(reference.r64[index] if r64 is None else r64, dtype=np.complex128)
    same = honest[0]
    y = np.asarray(y)
    if y.shape != r64.shape:
        return MISMATCH, float("inf"), 0.0, f"shape {list(y.shape)} != reference {list(r64.shape)}"
    y = y.astype(np.complex128)
    # np.isfinite of a complex value: both components finite. Against another run, its finite entries too.
    judged = reference.judged(dtype, index) & np.isfinite(r64) & np.isfinite(same)
    bad = judged & ~np.isfinite(y)
    if np.any(bad):
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        return NAN_INF, float("inf"), 0.0, (f"{int(bad.sum())} non-finite values where the reference is finite, "
                                            f"e.g. at {list(at)}: {y[at]} where the reference is {r64[at]:.9g}")
    component = COMPONENT_DTYPE[dtype]
    scale, sens = reference.scale(index)
    floor = sens * (RTOL[component] * scale + TINY[component])
    worst = (AGREE, 0.0, floor, "")
    for part, take in PARTS:
        with np.errstate(invalid="ignore", over="ignore"):
            distance = np.where(judged, np.abs(take(y) - take(r64)), 0.0)
            e_same = max(float(np.max(np.abs(take(run) - take(r64)), where=judged, initial=0.0)) for run in honest)
        allowed, err = K_SAME * e_same + floor, float(np.max(distance, initial=0.0))
        if err > allowed and err / allowed > worst[1] / worst[2]:
            at = tuple(int(i) for i in np.unravel_index(np.argmax(distance), y.shape))
            worst = (MISMATCH, err, allowed, f"worst at {list(at)}, {part}: {take(y[at]):.9g} where the reference is "
                                             f"{take(r64[at]):.9g}")
        elif worst[0] == AGREE and err / allowed > worst[1] / worst[2]:
            worst = (AGREE, err, allowed, "")
    return worst


def judge_complex(backend: str, dtype: str, outputs: list, reference: ComplexReference) -> BackendVerdict:
    """The verdict of a complex backend: that of its worst output (agree: every output is right)."""
    from fuzzer.backend_names import BackendName
    from fuzzer.backends import kind_family

    if reference.ill_typed():
        return BackendVerdict(backend, UNSUPPORTED, detail=reference.ill_typed())
    name, differs = BackendName.parse(backend), reference.jax_differs()
    against = None
    if differs and kind_family(name) == "jax":
        if name.kind == "jax-eager":
            return BackendVerdict(backend, UNSUPPORTED, detail=f"jax's complex convention differs from torch's in "
                                                               f"{', '.join(differs)}: jax eager is its own reference")
        against = reference.jax_eager_outputs(name.device or "cpu", dtype)
        if isinstance(against, str):
            return BackendVerdict(backend, UNSUPPORTED, detail=against)
    if len(outputs) != len(reference.r64):
        return BackendVerdict(backend, MISMATCH, detail=f"{len(outputs)} outputs, the reference has {len(reference.r64)}")
    worst = BackendVerdict(backend, AGREE)
    for index, y in enumerate(outputs):
        # Against jax eager's run, that run is r64 and r_d both (a jax backend of the same dtype).
        own = None if against is None else against[index]
        verdict, err, allowed, detail = compare_complex(y, index, reference, dtype, own, own)
        ratio = err / allowed if allowed > 0 else float(err > 0)
        worst_ratio = worst.max_error / worst.allowed if worst.allowed > 0 else float(worst.max_error > 0)
        if severity(verdict) < severity(worst.verdict) or (verdict == worst.verdict and ratio > worst_ratio):
            worst = BackendVerdict(backend, verdict, err, allowed, index, detail)
    return worst


__all__ = ["ComplexReference", "IllTyped", "compare_complex", "evaluate_complex", "judge_complex"]
