"""Arrays: .npy bytes in and out (never pickled), and seeded values for inputs and weights."""

from __future__ import annotations

import base64
import io
import tokenize

import numpy as np

from fuzzer.complex_dtypes import PROFILE_PREFIX
from fuzzer.drawing.layouts import conform_values
from fuzzer.drawing.regimes import get_regime
from fuzzer.errors import UserError
from fuzzer.exact_dtypes import integer_values
from fuzzer.ir import Case, Graph, element_limits, infer_shapes, param_shapes

# Values real kernels must handle exactly: zeros of both signs, +-1, the float32 and float16
# overflow edges of exp (88.72, 11.09) and of their squares, halves (rounding ties).
EDGE_VALUES = (0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, 88.72, -88.72, 103.0, -103.0, 11.09, -11.09, 1.0e19, 65504.0)
SPECIAL_VALUES = (np.inf, -np.inf, np.nan, -0.0)
# What a whole row is filled with: a row of -inf is a softmax's 0/0 and a max's empty-like case.
ROW_FILLS = (-np.inf, -np.inf, np.inf, np.nan, 0.0, 1.0)


def to_npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def from_npy_bytes(data: bytes, what: str = "array", shape: tuple[int, ...] | None = None) -> np.ndarray:
    """A plain numeric .npy array as float64. Its header is checked first (numeric dtype, element
    count within the resource bound, `shape` when the graph says what it must be, the data's length),
    so a header claiming 1e12 elements is refused before anything is allocated."""
    stream = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(stream)
        read_header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}[version]
        declared, _, dtype = read_header(stream)
    except (ValueError, KeyError, EOFError, SyntaxError, TypeError, tokenize.TokenError):  # numpy tokenizes the header
        raise UserError(f"The {what} is not a plain numeric .npy array; refusing to load it (pickled objects are never loaded).") from None
    if dtype.hasobject or dtype.kind not in "fiuc" or dtype == np.uint64:
        raise UserError(f"The {what} has dtype {dtype}; only numeric arrays are accepted, refusing to load it (pickled objects are never loaded).")
    elements = int(np.prod(declared, dtype=object)) if declared else 1
    per_tensor, _ = element_limits()
    if elements > per_tensor:
        raise UserError(f"The {what} declares shape {list(declared)} ({elements:,} elements), above the limit of "
                        f"{per_tensor:,}; refusing to load it.")
    if shape is not None and tuple(declared) != tuple(shape):
        raise UserError(f"The {what} has shape {list(declared)} but the graph needs {list(shape)}.")
    if len(data) - stream.tell() != elements * dtype.itemsize:
        raise UserError(f"The {what} holds {len(data) - stream.tell()} bytes of data, not the {elements * dtype.itemsize} "
                        f"its header declares; refusing to load it.")
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError):
        raise UserError(f"The {what} is not a plain numeric .npy array; refusing to load it (pickled objects are never loaded).") from None
    # Integers stay int64, exactly (an integer case's values: fuzzer/exact_dtypes.py); complex values
    # complex128 (fuzzer/complex_dtypes.py); the rest float64.
    return array.astype({"i": np.int64, "u": np.int64, "c": np.complex128}.get(dtype.kind, np.float64))


def to_base64(array: np.ndarray) -> str:
    return base64.b64encode(to_npy_bytes(array)).decode("ascii")


def from_base64(text: str, what: str = "array", shape: tuple[int, ...] | None = None) -> np.ndarray:
    try:
        data = base64.b64decode(text, validate=True)
    except (ValueError, TypeError):
        raise UserError(f"The {what} is not valid base64.") from None
    return from_npy_bytes(data, what, shape)


def _as_float32_values(array: np.ndarray) -> np.ndarray:
    """Round to float32 so that every backend starts from exactly the same numbers."""
    return np.asarray(array, dtype=np.float32).astype(np.float64)


def _signed(rng: np.random.Generator, magnitudes: np.ndarray) -> np.ndarray:
    return magnitudes * rng.choice([-1.0, 1.0], magnitudes.shape)


def _sprinkle(rng: np.random.Generator, values: np.ndarray, choices) -> np.ndarray:
    """A few entries (1 to 3, or about 5% of a large tensor) replaced by values from `choices`."""
    flat = values.reshape(-1).copy()
    count = min(flat.size, max(int(rng.integers(1, 4)), flat.size // 20))
    flat[rng.choice(flat.size, count, replace=False)] = rng.choice(np.asarray(choices, dtype=np.float64), count)
    return flat.reshape(values.shape)


def _fill_rows(rng: np.random.Generator, values: np.ndarray, choices) -> np.ndarray:
    """Every row through one element, one row along each axis, set to one value from `choices`:
    whichever dim an op reduces over (softmax, max, logsumexp), one of its rows is all that value."""
    if values.size == 0:
        return values
    fill = rng.choice(np.asarray(choices, dtype=np.float64))
    filled = values.copy()
    centre = [int(rng.integers(0, size)) for size in values.shape]
    for axis in range(values.ndim):
        filled[(*centre[:axis], slice(None), *centre[axis + 1:])] = fill
    return filled if values.ndim else np.full(values.shape, fill)


def input_values(rng: np.random.Generator, shape: tuple[int, ...], profile: str) -> np.ndarray:
    """Values of one graph input; `profile` names how (fuzzer/drawing/regimes.py lists who uses which)."""
    if profile == "normal":
        values = rng.standard_normal(shape)
    elif profile == "uniform":
        values = rng.uniform(-2.0, 2.0, shape)
    elif profile == "small-ints":
        values = rng.integers(-3, 4, shape).astype(np.float64)
    elif profile == "zeros":
        values = np.zeros(shape)
    elif profile == "constant":
        values = np.full(shape, rng.uniform(-2.0, 2.0))
    elif profile == "tiny":
        values = rng.standard_normal(shape) * 1e-3
    elif profile == "large":
        values = rng.standard_normal(shape) * 1e2
    elif profile == "log-uniform":
        values = _signed(rng, 10.0 ** rng.uniform(-8.0, 4.0, shape))
    elif profile == "minuscule":
        values = _signed(rng, 10.0 ** rng.uniform(-8.0, -5.0, shape))
    elif profile == "huge":
        values = _signed(rng, 10.0 ** rng.uniform(3.0, 4.0, shape))
    elif profile == "subnormal":
        # Below float32's smallest normal (1.2e-38): flush-to-zero territory (see fuzzer/oracle/flush.py).
        values = _signed(rng, 10.0 ** rng.uniform(-44.0, -38.0, shape))
    elif profile == "edge":
        values = _sprinkle(rng, rng.standard_normal(shape), EDGE_VALUES)
    elif profile == "special":
        values = _sprinkle(rng, rng.standard_normal(shape), SPECIAL_VALUES)
    elif profile == "special-rows":
        values = _fill_rows(rng, rng.standard_normal(shape), ROW_FILLS)
    elif profile in ("integers", "integer-edges"):
        return integer_values(rng, shape, profile)  # int64, exact: no float32 rounding
    elif profile.startswith(PROFILE_PREFIX):  # complex128: each component a float32 value of the profile
        component = profile.removeprefix(PROFILE_PREFIX)
        values = input_values(rng, shape, component).astype(np.complex128)
        values.imag = input_values(rng, shape, component)  # set, not added: 1j * inf would be nan + inf j
        return values
    else:
        raise ValueError(f"unknown value profile {profile!r}")
    return _as_float32_values(values)


def param_values(rng: np.random.Generator, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """Well-conditioned weights: the kind a trained network has.

    Scaled by 1/sqrt(fan_in) so activations stay O(1) through chains; running
    variances positive and away from zero.
    """
    kind = name.rsplit(".", 1)[-1]
    if "running_var" in kind:
        values = rng.uniform(0.5, 2.0, shape)
    elif "running_mean" in kind or kind.startswith("bias") or kind in ("h0", "c0"):
        values = rng.standard_normal(shape) * 0.5
    elif kind == "gamma" or kind == "weight" and len(shape) == 1:
        values = rng.uniform(0.5, 1.5, shape)
    else:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        values = rng.standard_normal(shape) / np.sqrt(max(fan_in, 1))
    return _as_float32_values(values)


def regime_profiles(graph: Graph, seed: int, regime: str | None = None) -> dict[str, str]:
    """A value profile for each input, drawn from `seed` among those of `regime` (default: the graph's)."""
    rng = np.random.default_rng([seed, 1])
    choices = get_regime(graph.regime if regime is None else regime).value_profiles
    return {spec.name: str(rng.choice(choices)) for spec in graph.inputs}


def materialize(graph: Graph, seed: int, profiles: dict[str, str] | None = None) -> Case:
    """A Case for the graph with every input and parameter drawn from `seed`.

    `profiles` names each input's value profile ("normal" where it names none; campaigns
    pass `regime_profiles`). An input stored `expanded` (a stride-0 view along dim 0 in
    torch) gets values that repeat along dim 0, as such a view's values do.
    """
    shapes = infer_shapes(graph)
    rng = np.random.default_rng(seed)
    profiles = profiles or {}
    arrays = {}
    for spec in graph.inputs:
        profile = profiles.get(spec.name, "normal")
        arrays[spec.name] = conform_values(input_values(rng, spec.shape, profile), spec.layout)
    for name, shape in param_shapes(graph, shapes).items():
        arrays[name] = param_values(rng, name, shape)
    return Case(graph, arrays, seed)
