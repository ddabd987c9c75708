"""Small helpers shared by the op declarations."""

from __future__ import annotations

import math
import re

import numpy as np

from fuzzer.errors import ShapeError


class _Strategies:
    """hypothesis.strategies, imported on first use.

    Only drawing attributes needs hypothesis; running ops does not, and the ops are
    shipped to other Python environments that have just numpy and one framework
    (fuzzer/running/env_worker.py).
    """

    def __getattr__(self, name: str):
        from hypothesis import strategies

        return getattr(strategies, name)


st = _Strategies()

# Dimensions are drawn from a small set so that jax/torch.compile reuse compiled code
# across graphs (perf-notes: jax recompiles per new shape); the set still holds size 1,
# sizes just off powers of two and the awkward odd sizes where tiled kernels have tails.
DIMS = (1, 2, 3, 4, 5, 7, 8, 9, 16, 17)


def rank_between(low: int, high: int):
    return lambda shape: low <= len(shape) <= high


def check(condition: bool, message: str) -> None:
    if not condition:
        raise ShapeError(message)


def draw_dim(draw, rank: int) -> int:
    """A dim of a rank-`rank` tensor, negative (counted from the end) half the time: torch and
    jax normalize negative dims on code paths of their own."""
    return draw(st.integers(-rank, rank - 1))


def maybe_negative(draw, dim: int, rank: int) -> int:
    """The dim `dim` (>= 0) of a rank-`rank` tensor, spelled from the end half the time."""
    return dim - rank if draw(st.booleans()) else dim


def draw_dims(draw, rank: int) -> list[int]:
    """One or more distinct dims in any order, each negative or not."""
    dims = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    return [maybe_negative(draw, d, rank) for d in dims]


def norm_dim(dim_: int, rank: int) -> int:
    check(-rank <= dim_ < rank, f"dim {dim_} is out of range for rank {rank}")
    return dim_ % rank


def numel(shape) -> int:
    return int(math.prod(shape))


def release(module) -> tuple[int, ...]:
    """A framework module's release as numbers ("2.3.1+cpu" is (2, 3, 1)), to compare with the first
    release an op's argument form needs; a pre-release counts as its release."""
    return tuple(int(part) for part in re.match(r"\d+(?:\.\d+)*", module.__version__).group().split("."))


def like(reference_dtype_source, value):
    """Cast a numpy result back to the dtype of the op's input (references are dtype-generic)."""
    return np.asarray(value, dtype=np.asarray(reference_dtype_source).dtype)
