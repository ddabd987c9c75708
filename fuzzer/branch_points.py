"""Branch points: the input values where an op's own math or kernels switch path.

softplus returns x itself once beta * x passes its threshold, hardswish is piecewise at +-3, round
has ties at x.5, exp overflows past log(max) of the dtype, 1/x has a pole at 0. Random magnitudes
land on such a value rarely and never on both sides of it, so each op declares its points next to
its declaration (OpDef.branch_points: names, and a function of its attributes and the dtype giving
each point's value) and the `branch-points` regime (fuzzer/drawing/regimes.py) writes, into the graph
inputs an op reads first, each point exactly, one ulp below and one ulp above it in float32, the
grid every case's values lie on (fuzzer/arrays.py). A node whose first operand holds a point
exactly covers the region key `OP:branch=NAME` (fuzzer/drawing/region_keys.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from fuzzer.drawing.layouts import conform_values

PREFIX = "branch="
GRID = np.float32  # the dtype every case's input values are representable in


@dataclass(frozen=True)
class BranchPoints:
    """`declared`: every point's name; `at(attrs, dtype)`: {name: value} for a node with these
    attributes (a point an attribute leaves out, clamp without a max, is not in it)."""

    declared: tuple[str, ...]
    at: Callable[[dict, type], dict[str, float]]


def fixed(**points: float) -> BranchPoints:
    """Points that no attribute moves (hardswish's -3 and 3)."""
    return BranchPoints(tuple(points), lambda attrs, dtype: dict(points))


def overflow_boundary(dtype, shift: float = 0.0) -> float:
    """The x above which exp(x + shift) overflows `dtype`: log(max) - shift (sinh and cosh: shift log 1/2)."""
    return float(np.log(np.finfo(dtype).max) - shift)


def declare(op, points: BranchPoints):
    """`op` (an OpDef) with its branch points: declared beside the op's row."""
    return replace(op, branch_points=points)


def region(name: str) -> str:
    return f"{PREFIX}{name}"


def on_grid(value: float) -> float:
    return float(GRID(value))


def neighbours(value: float) -> tuple[float, float, float]:
    """The point on the grid, one ulp below it and one ulp above it."""
    point = GRID(value)
    return float(np.nextafter(point, GRID(-np.inf))), float(point), float(np.nextafter(point, GRID(np.inf)))


def place(rng: np.random.Generator, values: np.ndarray, points: dict[str, float]) -> np.ndarray:
    """`values` with each point and its two neighbours written at random positions (as many of them
    as the tensor holds, in a random order of the points)."""
    flat = np.array(values, dtype=np.float64).reshape(-1)
    chosen = [value for name in rng.permutation(sorted(points)) for value in neighbours(points[name])]
    count = min(flat.size, len(chosen))
    flat[rng.choice(flat.size, count, replace=False)] = chosen[:count]
    return flat.reshape(np.shape(values))


def regions_met(points: BranchPoints, attrs: dict, values: np.ndarray) -> set[str]:
    """The branch keys (without the op's name) of a node whose first operand holds `values`: the
    points it holds exactly."""
    values = np.asarray(values)
    if values.dtype.kind != "f" or values.size == 0:
        return set()
    at = points.at(attrs, GRID)
    found = np.isin([on_grid(value) for value in at.values()], values)
    return {region(name) for name, present in zip(at, found) if present}


def place_in_case(case, seed: int, points_of: Callable[[str], "BranchPoints | None"]):
    """`case` (fuzzer/ir.py's Case) with the branch points of each node's op (`points_of(op name)`: the
    ops declare them with this module, so it takes them from its caller) placed in its first operand
    where that is a graph input (the first node to read an input places its points)."""
    rng = np.random.default_rng([seed, 2])
    inputs = {spec.name: spec for spec in case.graph.inputs}
    arrays, placed = dict(case.arrays), set()
    for node in case.graph.nodes:
        points, first = points_of(node.op), node.inputs[0]
        if points is None or first not in inputs or first in placed or arrays[first].dtype.kind != "f":
            continue
        placed.add(first)
        arrays[first] = conform_values(place(rng, arrays[first], points.at(node.attrs, GRID)), inputs[first].layout)
    return replace(case, arrays=arrays)
