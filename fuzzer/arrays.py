"""Arrays: .npy bytes in and out (never pickled), and seeded values for inputs and weights."""

from __future__ import annotations

import base64
import io

import numpy as np

from fuzzer.errors import UserError
from fuzzer.ir import Case, Graph, infer_shapes, param_shapes

# How an input array is filled. "normal" dominates; the others are the edge regimes
# real kernels get wrong (zeros, constants that stress variance, tiny and large magnitudes).
VALUE_PROFILES = ("normal", "normal", "normal", "normal", "uniform", "small-ints", "zeros", "constant", "tiny", "large")


def to_npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def from_npy_bytes(data: bytes, what: str = "array") -> np.ndarray:
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError):
        raise UserError(f"The {what} is not a plain numeric .npy array; refusing to load it (pickled objects are never loaded).") from None
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "fiu":
        raise UserError(f"The {what} has dtype {getattr(array, 'dtype', '?')}; only numeric arrays are accepted.")
    return array.astype(np.float64)


def to_base64(array: np.ndarray) -> str:
    return base64.b64encode(to_npy_bytes(array)).decode("ascii")


def from_base64(text: str, what: str = "array") -> np.ndarray:
    try:
        data = base64.b64decode(text, validate=True)
    except (ValueError, TypeError):
        raise UserError(f"The {what} is not valid base64.") from None
    return from_npy_bytes(data, what)


def _as_float32_values(array: np.ndarray) -> np.ndarray:
    """Round to float32 so that every backend starts from exactly the same numbers."""
    return np.asarray(array, dtype=np.float32).astype(np.float64)


def input_values(rng: np.random.Generator, shape: tuple[int, ...], profile: str) -> np.ndarray:
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


def materialize(graph: Graph, seed: int, profiles: dict[str, str] | None = None) -> Case:
    """A Case for the graph with every input and parameter drawn from `seed`."""
    shapes = infer_shapes(graph)
    rng = np.random.default_rng(seed)
    profiles = profiles or {}
    arrays = {}
    for spec in graph.inputs:
        arrays[spec.name] = input_values(rng, spec.shape, profiles.get(spec.name, "normal"))
    for name, shape in param_shapes(graph, shapes).items():
        arrays[name] = param_values(rng, name, shape)
    return Case(graph, arrays, seed)
