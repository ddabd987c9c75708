"""The integer and bool dtypes: backends run them (`torch-compile:cpu:int32`), and the oracle judges
their results exactly (fuzzer/oracle/exact.py), never by a tolerance.

A case stores an integer input as int64 (its values exact, int64's extremes included: float64 holds
integers exactly only up to 2^53); a backend of a narrower dtype casts it as numpy's `astype` and
torch's `.to` both do, keeping the low bits (300 is 44 in int8), so every backend and the reference
start from the same numbers.
"""

from __future__ import annotations

import numpy as np

INTEGERS = ("int8", "int16", "int32", "int64", "uint8")
EXACT_DTYPES = (*INTEGERS, "bool")  # the first ones: int32, int64 and bool; then int8, int16, uint8


def is_exact(dtype: str) -> bool:
    return dtype in EXACT_DTYPES


def _edges() -> tuple[int, ...]:
    """0, +-1, every listed dtype's minimum and maximum, and +-2^k: where wraparound, saturation,
    sign extension and shifts go wrong."""
    limits = [value for name in INTEGERS for value in (int(np.iinfo(name).min), int(np.iinfo(name).max))]
    powers = [sign * 2**k for k in (1, 2, 7, 8, 15, 16, 31, 32, 62) for sign in (1, -1)]
    return tuple(sorted({0, 1, -1, *limits, *powers}))


EDGE_INTEGERS = _edges()


def integer_values(rng: np.random.Generator, shape: tuple[int, ...], profile: str) -> np.ndarray:
    """int64 values of one graph input: "integers" small values (-8 .. 8), "integer-edges" those with a
    few entries (1 to 3, or about 5% of a large tensor) set to EDGE_INTEGERS."""
    values = rng.integers(-8, 9, shape, dtype=np.int64)
    if profile == "integer-edges" and values.size:
        flat = values.reshape(-1)
        count = min(flat.size, max(int(rng.integers(1, 4)), flat.size // 20))
        flat[rng.choice(flat.size, count, replace=False)] = rng.choice(np.asarray(EDGE_INTEGERS, dtype=np.int64), count)
    elif profile != "integers":
        raise ValueError(f"unknown integer value profile {profile!r}")
    return values


def result_array(value, backend_dtype: str) -> np.ndarray:
    """A framework's output as numpy: float64 for a float backend (what the tolerance model judges); for
    an exact backend, integers as int64 (exactly), bools as bool, floats (a mixed graph's) as float64;
    complex as complex128."""
    array = np.asarray(value)
    if array.dtype.kind == "c":  # a complex backend's result (fuzzer/complex_dtypes.py): both components
        return array.astype(np.complex128)
    if not is_exact(backend_dtype) or array.dtype.kind == "f":
        return array.astype(np.float64)
    return array if array.dtype == np.bool_ else array.astype(np.int64)
