"""The entry rules: where an honest dtype-d implementation may give another class of value than
the float64 reference, so that an entry of a rounding run is undefined (nan, with its mask set) or
its value is moved to what such an implementation may give. Each rule is a named entry with its
reason: UNDEFINED_RULES (an entry undefined in dtype d) and VALUE_RULES (an entry moved onto a
value of d: a zero, an infinity). rounding.finished applies VALUE_RULES in their order, then every
one of UNDEFINED_RULES; an entry undefined by any one of them is undefined.

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
the default Numerics(), as the ops of an op database will be) is judged by the generic models with no
rule of its own, and where it may do what a reviewer would have declared, they assume it does
(fuzzer/oracle/undeclared.py): its rounding bound also covers the change of its result when its
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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from fuzzer.oracle.dtypes import LARGEST, ROUNDING_SLACK, TINY, UNIT_ROUNDOFF, nonfinite_class
from fuzzer.oracle.undeclared import rounding_dependent


@dataclass(frozen=True)
class OpSite:
    """One op of one rounding run, as the rules read it: `xs` its operands in the run, `computed`
    which of them are computed (not graph inputs, which are exact), `undefined_in` the operands'
    undefined masks (None each where none), `out` its result on `xs`, `exact` and `exact_xs` the
    float64 run's values of the node and of its operands (None: not given)."""

    op: object
    xs: list
    computed: list
    undefined_in: list
    ps: dict
    attrs: dict
    out: np.ndarray
    exact: np.ndarray
    dtype: str
    exact_xs: list | None


@dataclass(frozen=True)
class UndefinedRule:
    name: str
    reason: str
    undefined: Callable[[OpSite], np.ndarray | None]  # the entries it makes undefined; None: none


@dataclass(frozen=True)
class ValueRule:
    name: str
    reason: str
    applies: Callable[[int, bool], bool]  # (run, directed): in which runs
    moved: Callable[[OpSite, np.ndarray, np.ndarray | None], np.ndarray]  # (site, noisy, error): the entries it moves
    value: Callable[[OpSite], object]  # what they become


def _moved_a_quarter_period(op, xs: list, exact_xs: list | None) -> np.ndarray | None:
    """Where a periodic op's (Numerics.period) operand in a rounding run is a quarter period or more
    from its float64 value: cos of a float32 dot product of 2e6 that rounding moves by 25 may be
    any value in [-1, 1], of either sign, and a handful of runs would sample only a few of them."""
    if op.numerics.period is None or exact_xs is None:
        return None
    with np.errstate(invalid="ignore"):
        return np.abs(xs[0] - exact_xs[0]) >= op.numerics.period / 4


def _near_zero(noisy: np.ndarray, out: np.ndarray, exact: np.ndarray, error: np.ndarray | None) -> np.ndarray:
    """The entries of a rounding run's result that are computed zeros beyond the run's own snap (see "Signed
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


def depends_on_undefined(op, xs: list, undefined_in: list, ps: dict, attrs: dict, shape: tuple) -> np.ndarray | None:
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



def _convention_undefined(site: OpSite) -> np.ndarray | None:
    """The entries an op's numerics leave to convention: those it names (Numerics.undefined), and those
    that depend on an operand entry it marks (Numerics.undefined_operands)."""
    numerics, masks = site.op.numerics, []
    if numerics.undefined is not None:
        masks.append(np.asarray(numerics.undefined(site.xs, site.ps, site.attrs), dtype=bool))
    if numerics.undefined_operands is not None:
        marked = numerics.undefined_operands(site.xs, site.ps, site.attrs)
        depends = depends_on_undefined(site.op, site.xs, marked, site.ps, site.attrs, np.shape(site.out))
        masks.append(np.zeros(np.shape(site.out), bool) if depends is None else depends)
    return np.logical_or.reduce(masks) if masks else None


VALUE_RULES = (
    ValueRule("near-zero", "a result within its rounding (or declared forward error) of zero, or as near zero as the run "
              "moved it, may be an exact zero in dtype d: run 0 makes it one, run 1 keeps the error's size",
              lambda run, directed: run % 2 == 0 and not directed,
              lambda site, noisy, error: _near_zero(noisy, site.out, site.exact, error), lambda site: 0.0),
    ValueRule("near-overflow", "a result within rounding of d's largest value may round past it",
              lambda run, directed: not (run % 2 == 0 and not directed),
              lambda site, noisy, error: _near_overflow(noisy, site.exact, site.dtype),
              lambda site: np.copysign(np.inf, site.exact)),
)

UNDEFINED_RULES = (
    UndefinedRule("zero-sign", "the result depends on the sign of a computed zero (Numerics.zero_sign_matters)",
                  lambda s: _zero_sign_dependent(s.op, s.xs, s.computed, s.ps, s.attrs, s.dtype, s.exact_xs)),
    UndefinedRule("integer", "the result's class changes when a computed operand rounds onto or off an integer "
                  "(Numerics.integer_matters)",
                  lambda s: _integer_dependent(s.op, s.xs, s.computed, s.ps, s.attrs, s.out, s.dtype, s.exact_xs)),
    UndefinedRule("undefined-operand", "the result depends on an operand entry undefined upstream",
                  lambda s: depends_on_undefined(s.op, s.xs, s.undefined_in, s.ps, s.attrs, np.shape(s.out))),
    UndefinedRule("quarter-period", "a periodic op's operand moved a quarter period or more (Numerics.period)",
                  lambda s: _moved_a_quarter_period(s.op, s.xs, s.exact_xs)),
    UndefinedRule("rounding-dependent", "an op that declares no numerics (OpDef.declares_numerics False) changes its "
                  "result's class when a computed operand moves by its rounding (fuzzer/oracle/undeclared.py)",
                  lambda s: rounding_dependent(s.op, s.xs, s.computed, s.ps, s.attrs, s.out,
                                               INTEGER_SLACK * ROUNDING_SLACK * UNIT_ROUNDOFF[s.dtype])),
    UndefinedRule("convention", "the math leaves the entry to convention (Numerics.undefined, undefined_operands)",
                  _convention_undefined),
)
