"""The region keys of one node: what its attributes, its first operand's shape and its operands'
values say about which kernel path it takes (see fuzzer/drawing/regions.py for what a key is, which keys a
campaign declares, and how it steers toward them). The generator redraws a steered start toward
these (fuzzer/drawing/generate.py), so this module must not import the generator."""

from __future__ import annotations

import numpy as np

from fuzzer.drawing import ladder, tails
from fuzzer.ops import OpDef
from fuzzer.ops._common import numel

SMALL_INT = 4  # whole-number attributes above this restate a size (kernel_size=7): no region
DIM_ATTRIBUTES = ("dim", "dims", "dim0", "dim1", "start_dim", "end_dim", "perm")
# Whole-number attributes that say how many or where, not which path: no attribute key.
SIZE_ATTRIBUTES = ("out_channels", "out_features", "hidden_size", "num_embeddings", "normalized_shape", "shape",
                   "sizes", "size", "index", "indices", "start", "stop", "length", "shifts", "repeats", "chunks")
LARGE_EXTENT = 4096  # blocked, tiled and multi-threaded kernels switch near here
LARGE_SIZE = f"elements>{LARGE_EXTENT}"
LARGE_REDUCTION = f"extent>{LARGE_EXTENT}"
REDUCING_FAMILIES = ("reduce", "softmax")
SIZED_FAMILIES = REDUCING_FAMILIES + ("matmul", "conv", "norm", "pool", "attention")
ELEMENTWISE_FAMILIES = ("unary", "elementwise", "scalar", "dropout")
DATA_MOVING_FAMILIES = ("shape", "indexing")  # they move values without computing on them
FLOAT32_TINY = float(np.finfo(np.float32).tiny)  # below it (and above 0): a float32 subnormal


def key(op: str, region: str) -> str:
    return f"{op}:{region}"


def op_of(region_key: str) -> str:
    return region_key.partition(":")[0]


def attribute_regions(attrs: dict) -> set[str]:
    """The attribute keys of an op's attributes (without the op's name)."""
    regions = set()
    for name, value in attrs.items():
        values = value if isinstance(value, (list, tuple)) else [value]
        if name in DIM_ATTRIBUTES:
            regions.update(f"{name}<0" if v < 0 else f"{name}>=0" for v in values if isinstance(v, int))
            continue
        for v in values:
            if v is None or isinstance(v, (bool, str)):
                regions.add(f"{name}={v}")
            elif isinstance(v, int) and 0 <= v <= SMALL_INT and name not in SIZE_ATTRIBUTES:
                regions.add(f"{name}={v}")
            elif isinstance(v, float) and v == 0.0:
                regions.add(f"{name}=0")
    return regions


def _reduced_extent(attrs: dict, shape: tuple[int, ...]) -> int:
    """How many elements each output value of a reduction (or softmax) reads along its dims."""
    given = attrs.get("dims", [attrs["dim"]] if isinstance(attrs.get("dim"), int) else [])
    dims = {d % len(shape) for d in given if -len(shape) <= d < len(shape)} if shape else set()
    return numel([shape[d] for d in dims]) if dims else 0


def drawn_regions(op: OpDef, attrs: dict, first: tuple[int, ...]) -> set[str]:
    """The keys of an op's attributes and its first operand's shape: its attribute keys and its
    size keys (the generator redraws attributes and shapes toward these)."""
    regions = attribute_regions(attrs)
    if op.family in SIZED_FAMILIES and numel(first) > LARGE_EXTENT:
        regions.add(LARGE_SIZE)
    if op.family in REDUCING_FAMILIES and _reduced_extent(attrs, first) > LARGE_EXTENT:
        regions.add(LARGE_REDUCTION)
    if op.ladder is not None:
        rungs = (ladder.rung_of(first[axis]) for axis in op.ladder.axes(attrs, [first]))
        regions.update(ladder.region(op.ladder.kind, *rung) for rung in rungs if rung)
    if op.family not in DATA_MOVING_FAMILIES:
        regions |= tails.regions(op, attrs, first)
    return regions


def special_regions(values: np.ndarray) -> set[str]:
    """Which special values `values` holds (finite values cost one pass, tiny ones a second)."""
    values = np.asarray(values)
    if values.dtype.kind != "f" or values.size == 0:
        return set()
    found = set()
    finite = np.isfinite(values)
    if not finite.all():
        found.update(name for name, present in (("nan", np.isnan(values).any()), ("inf", np.isposinf(values).any()),
                                                 ("-inf", np.isneginf(values).any())) if present)
    tiny = values[np.abs(values) < FLOAT32_TINY]  # nan compares False, silently
    if tiny.size:
        if np.any((tiny == 0) & np.signbit(tiny)):
            found.add("-0.0")
        if np.any(tiny != 0):
            found.add("subnormal")
    return {f"input-has:{name}" for name in found}
