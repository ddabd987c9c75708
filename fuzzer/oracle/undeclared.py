"""How the oracle's rounding runs treat an op that declares nothing about its numerics
(OpDef.declares_numerics False: a plugin op whose numerics are the default Numerics(), one derived from an op database).

The generic rounding model bounds an op's rounding by its result and by the op on absolute values
(compare.py, "Tolerance model"). That misses what an op does inside: frac(6e6) cancels x - trunc(x),
an error of |x| roundoffs in a result below 1; sinc(1) is sin(pi x) / (pi x), 4e-17 in float64 and
-3e-8 in float32. An op whose reviewer declared nothing may do anything of the kind, so for it the
runs measure instead of assume: its result with its operands moved by their rounding bound
(`operand_reach`, a measured condition number), and where that move changes the result's class
(`rounding_dependent`: acos of a computed 0.99999997 is nan one ulp up). The oracle's signed-zero and
integer rules apply to it as if it declared `zero_sign_matters` and `integer_matters`.
"""

from __future__ import annotations

import numpy as np

from fuzzer.oracle.dtypes import nonfinite_class


def _moved(op, xs: list, ps: dict, attrs: dict, slack: float, which: list[bool]) -> list[np.ndarray]:
    """`op` on its operands moved by `slack` (relative), operand i in the direction (-1)^i, then all
    the other way: two calls that move a ratio (fmod(x, y)) as well as a sum. Only the operands
    `which` move."""
    results = []
    for sign in (1.0, -1.0):
        operands = [x * (1.0 + sign * (-1.0) ** i * slack) if moves else x for i, (x, moves) in enumerate(zip(xs, which))]
        results.append(np.asarray(op.reference(operands, ps, attrs), dtype=np.float64))
    return results


def operand_reach(op, xs: list, ps: dict, attrs: dict, out: np.ndarray, magnitude: np.ndarray,
                  slack: float, largest: float) -> np.ndarray:
    """`magnitude` (the op on absolute values), raised for an op that declares nothing to the change
    of its result `out` when its operands move by `slack`, in units of `slack`: the rounding runs'
    bound, slack * max(|out|, magnitude), then covers that change (frac(6e6) may be anything in
    [0, 1) in float32). At most the dtype's `largest` value: the runs make an entry whose magnitude
    passes it an overflow, which a steep op (i1(-89.8) = -4.3e37 in float32) need not make. A change
    to a non-finite value adds nothing here (rounding_dependent sees it)."""
    if op.declares_numerics or not xs:
        return magnitude
    reach = np.zeros(np.shape(out))
    with np.errstate(all="ignore"):
        for moved in _moved(op, xs, ps, attrs, slack, [True] * len(xs)):
            change = np.abs(np.broadcast_to(moved, np.shape(out)) - out)
            reach = np.fmax(reach, np.where(np.isfinite(change), change, 0.0))
        return np.maximum(magnitude, np.minimum(reach / slack, largest))


def rounding_dependent(op, xs: list, computed: list[bool], ps: dict, attrs: dict, out: np.ndarray,
                       slack: float) -> np.ndarray | None:
    """Where an undeclared op's result `out` hangs on how its computed operands were rounded: its class
    (finite, nan, +inf, -inf) changes when they move by `slack` (relative), at a domain edge or pole a
    rounded operand may cross (acos, atanh, logit near 1); or its value changes when the sign of a
    computed nan flips, which no standard fixes (copysign(1, erfinv(-3)) is 1 in float64 torch, -1
    in bfloat16). None for a declared op, or where no operand is computed; a graph input is exact,
    as for the signed-zero and integer rules."""
    if op.declares_numerics or not any(computed):
        return None


    shape, classes = np.shape(out), nonfinite_class(out)
    with np.errstate(all="ignore"):
        masks = [nonfinite_class(np.broadcast_to(moved, shape)) != classes for moved in _moved(op, xs, ps, attrs, slack, computed)]
        nans = [is_computed & np.isnan(x) for x, is_computed in zip(xs, computed)]
        if any(np.any(nan) for nan in nans):
            flipped = np.broadcast_to(op.reference([np.where(nan, -x, x) for x, nan in zip(xs, nans)], ps, attrs), shape)
            masks.append((flipped != out) & ~(np.isnan(flipped) & np.isnan(out)))
    return np.logical_or.reduce(masks)
