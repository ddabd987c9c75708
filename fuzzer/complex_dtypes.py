"""The complex dtypes: backends run them (`torch-compile:cpu:complex64`), and the oracle judges each
component of a complex result, real and imaginary part, by the float model of the component's dtype
(fuzzer/oracle/complex.py).

A case stores a complex input as complex128, each component a float32 value of one of the value
profiles (fuzzer/arrays.py, profile "complex:<profile>"), so every backend and the reference start from
the same numbers; np.save writes complex arrays without pickling.
"""

from __future__ import annotations

COMPLEX_DTYPES = ("complex64", "complex128")
# The float dtype of each component: what its rounding and range are.
COMPONENT_DTYPE = {"complex64": "float32", "complex128": "float64"}
PROFILE_PREFIX = "complex:"


def is_complex(dtype: str) -> bool:
    return dtype in COMPLEX_DTYPES
