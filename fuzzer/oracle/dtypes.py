"""The dtype table: what the oracle knows of each float dtype, in one row each, and the helpers
that read values the way a dtype holds them.

UNIT_ROUNDOFF, RTOL, LARGEST and TINY are the table's columns by dtype name (the names the rest
of the oracle and the other modules read).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fuzzer.judging.reference import numpy_dtype


@dataclass(frozen=True)
class DtypeFacts:
    name: str
    unit_roundoff: float
    rtol: float  # the floor's relative part: a few hundred float32 ulps (see "Tolerance model")
    largest: float  # the largest finite value: past it an honest implementation overflows
    tiny: float  # the smallest normal value: below it a result is subnormal or zero, and may be flushed


DTYPES = {facts.name: facts for facts in (
    DtypeFacts("float64", 2.0**-53, 1e-9, float(np.finfo(np.float64).max), float(np.finfo(np.float64).tiny)),
    DtypeFacts("float32", 2.0**-24, 3e-5, float(np.finfo(np.float32).max), float(np.finfo(np.float32).tiny)),
    DtypeFacts("float16", 2.0**-11, 1e-2, float(np.finfo(np.float16).max), float(np.finfo(np.float16).tiny)),
    # bfloat16's largest value is just below float32's, and it has float32's exponent range.
    DtypeFacts("bfloat16", 2.0**-8, 8e-2, (2.0 - 2.0**-7) * 2.0**127, float(np.finfo(np.float32).tiny)),
)}
UNIT_ROUNDOFF = {name: facts.unit_roundoff for name, facts in DTYPES.items()}
RTOL = {name: facts.rtol for name, facts in DTYPES.items()}
LARGEST = {name: facts.largest for name, facts in DTYPES.items()}
TINY = {name: facts.tiny for name, facts in DTYPES.items()}

# A few units of roundoff per op: reductions accumulate ~sqrt(n) of them (the rounding model's size).
ROUNDING_SLACK = 4.0


def round_to_dtype(values: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values rounded to `dtype` (and back), so the backend and the reference start from
    the same numbers; bfloat16 through ml_dtypes (a jax dependency)."""
    with np.errstate(over="ignore"):
        rounded = np.asarray(values).astype(numpy_dtype(dtype))
    return rounded.astype(np.complex128 if rounded.dtype.kind == "c" else np.float64)


def nonfinite_class(values: np.ndarray) -> np.ndarray:
    """Per entry: 0 finite, 1 nan, 2 +inf, 3 -inf."""
    return np.select([np.isnan(values), values == np.inf, values == -np.inf], [1, 2, 3], 0)


def flushed(values: np.ndarray, dtype: str) -> np.ndarray:
    """`values` with the subnormals of `dtype` flushed to (signed) zero."""
    values = np.asarray(values, dtype=np.float64)
    return np.where(np.abs(values) < TINY[dtype], np.copysign(0.0, values), values)
