"""Judging an output that is an index into its operand (argmax, argmin: Numerics.indexes), not a value.

The tolerance model of compare.py would judge an index by the scale of the operand's values (an
input of 1e19 allows 9e14), so a wrong index would pass. An index is judged exactly instead: entry
i of a backend's output y is right where

  * y_i is the reference's index r64_i, or r_d's (the same-dtype model: float16 rounds two float32
    inputs onto one value, and the first of the tied ones is then the honest answer); or
  * the operand's values at y_i and at r64_i tie within the float tolerance of one value of that
    size, sens * (RTOL[d] * max(|x[y_i]|, |x[r64_i]|) + TINY[d]) (a non-finite value ties with one of its
    class): an implementation that rounds the operand may pick either of the tied entries.

Anything else, and an entry that is not an index of the operand at all (3.5, -1, past the dim), is a
mismatch. The operand's values are the float64 run's: an op that declares Numerics.indexes is exact
(piecewise constant), which the generator applies to graph inputs only, the same numbers in every backend.
The verdict's error and allowance are those of the worst entry, in the operand's value units.
"""

from __future__ import annotations

import numpy as np

from fuzzer.oracle.dtypes import RTOL, TINY, nonfinite_class
from fuzzer.oracle.reference import Reference
from fuzzer.verdicts import AGREE, ALL_ZEROS, CONSTANT, MISMATCH


def compare_indices(y: np.ndarray, index: int, reference: Reference, dtype: str,
                    judged: np.ndarray, same_dtype: np.ndarray | None) -> tuple[str, float, float, str]:
    """(verdict, error, allowed, detail) of index output `index` (see above) over its `judged` entries;
    `same_dtype`: r_d's indices, also right (None: not computed, the lazy path)."""
    r64 = reference.outputs[index]
    values_at = reference.indexers[index]
    reference_values, _ = values_at(r64)
    values, valid = values_at(y)
    if np.any(judged & ~valid):
        at = tuple(int(i) for i in np.argwhere(judged & ~valid)[0])
        return MISMATCH, float("inf"), 0.0, f"{y[at]} at {list(at)} is no index of the operand; the reference's is {r64[at]:.0f}"
    magnitude = np.fmax(np.abs(values), np.abs(reference_values))
    tolerance = reference.sensitivities[index] * (RTOL[dtype] * np.where(np.isfinite(magnitude), magnitude, 0.0) + TINY[dtype])
    with np.errstate(invalid="ignore"):  # inf - inf where both are the same infinity
        distance = np.where(nonfinite_class(values) == nonfinite_class(reference_values),
                            np.where(np.isfinite(values), np.abs(values - reference_values), 0.0), np.inf)
    right = (y == r64) | (distance <= tolerance)
    if same_dtype is not None:
        right |= y == same_dtype
    wrong = judged & ~right
    ratio = np.where(judged & (distance > 0), distance / tolerance, 0.0)
    worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(np.where(wrong, np.inf, ratio))), np.shape(y)))
    err, allowed = float(distance[worst]), float(tolerance[worst])
    if not np.any(wrong):
        return AGREE, (err if np.any(judged) else 0.0), allowed, ""
    if np.ptp(y[judged]) == 0 and np.ptp(r64[judged]) > 0:
        if np.all(y[judged] == 0):
            return ALL_ZEROS, err, allowed, "every index is zero; the reference's are not all the same"
        return CONSTANT, err, allowed, f"every index is {y[judged].flat[0]:.0f}; the reference's are not all the same"
    return MISMATCH, err, allowed, (f"{int(wrong.sum())} wrong indices, e.g. {y[worst]:.0f} at {list(worst)} where the reference's "
                                    f"is {r64[worst]:.0f}: the operand is {values[worst]:.9g} there, {reference_values[worst]:.9g} at "
                                    f"the reference's index (a tie allows {tolerance[worst]:.3g})")
