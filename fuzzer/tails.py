"""Vector tails: extents of 16k + r elements (k >= 1, r 1..15) on the axes kernels vectorize.

A kernel that runs 4, 8, 16 or 32 lanes at a time handles the last r elements of an axis on a path
of its own (a masked or scalar remainder loop), and a fault there needs the extent to leave that
remainder on the axis the kernel walks: the innermost dim of an op's first operand, or the
innermost axis a reduction reduces. The generator draws such an extent on the innermost dim (or
another an op may reduce) of a TAIL_SHARE of the inputs it makes, in every regime without a large
dim and so under every layout (fuzzer/drawing/generate.py), and a steered graph puts one on the axis its
key names. k is 1: a larger k reaches no other remainder, and its larger tensors cost throughput. The keys (fuzzer/drawing/region_keys.py):
`OP:tail=CLASS` for the innermost dim, `OP:reduced-tail=CLASS` for the innermost reduced axis of an
op whose ladder reduces (OpDef.ladder), and for the resampling, pooling and attention ops (whose
kernels tile their output) `OP:output=1` and `OP:output-tail=CLASS` for a spatial or sequence dim
of the output. CLASS groups r by the widths that leave it: 1 (one element left at any width), 2-3,
4-7 and 8-15 (left past a 4- or an 8-lane step).
"""

from __future__ import annotations

from fuzzer.errors import ShapeError
from fuzzer.ops._common import st

LANES = 16
CLASSES = {"1": (1, 1), "2-3": (2, 3), "4-7": (4, 7), "8-15": (8, 15)}
MAX_RANK = 5  # as fuzzer/drawing/generate.py's
MAX_BLOCKS = 1  # k of 16k + r: 17 .. 31 elements, twice DIMS' largest at most
# A steered graph's k: 1 or 2, so an op that halves its input (pixel_unshuffle) has output tails too.
STEERED_BLOCKS = 2
TAIL_SHARE = 0.15  # of the inputs the generator makes: a dim is 16k + r
INNERMOST, REDUCED, OUTPUT_TAIL = "tail=", "reduced-tail=", "output-tail="
OUTPUT_ONE = "output=1"
OUTPUT_FAMILIES = ("resize", "pool", "attention")  # kernels that tile their output


def tail_class(extent: int) -> str | None:
    """The class of `extent`'s remainder r where it is 16k + r (k >= 1, r > 0), else None."""
    remainder = extent % LANES
    if extent < LANES or remainder == 0:
        return None
    return next(name for name, (low, high) in CLASSES.items() if low <= remainder <= high)


def draw_extent(draw, tail: str | None = None, blocks: int = MAX_BLOCKS) -> int:
    """16k + r for k in 1..blocks and r in `tail`'s class (any r > 0 without one)."""
    low, high = CLASSES[tail] if tail else (1, LANES - 1)
    return LANES * draw(st.integers(1, blocks)) + draw(st.integers(low, high))


def _reduced_axis(op, attrs: dict, shape: tuple[int, ...]) -> int | None:
    """The innermost axis an op whose ladder reduces (OpDef.ladder) reduces, else None."""
    if op.ladder is None or op.ladder.kind != "reduction" or not shape:
        return None
    axes = op.ladder.axes(attrs, [shape])
    return max(axes) if axes else None


def regions(op, attrs: dict, first: tuple[int, ...]) -> set[str]:
    """The tail keys (without the op's name) of its first operand's innermost and reduced axes."""
    found = set()
    if first and tail_class(first[-1]):
        found.add(INNERMOST + tail_class(first[-1]))
    axis = _reduced_axis(op, attrs, first)
    if axis is not None and tail_class(first[axis]):
        found.add(REDUCED + tail_class(first[axis]))
    return found


def output_regions(op, attrs: dict, operands: list[tuple[int, ...]]) -> set[str]:
    """The output keys of a resampling, pooling or attention node: one of the output's last two dims
    (its spatial dims; an attention's query length and value width) of 1, or 16k + r. An
    attention's key and value operands, where only the query is given (a steered start), are taken
    to be shaped like it, and only its query length is judged (its value width is not drawn yet)."""
    if op.family not in OUTPUT_FAMILIES or not operands:
        return set()
    missing = op.arity[0] - len(operands)
    try:
        out = op.infer(attrs, [*operands, *[operands[0]] * missing])
    except ShapeError:
        return set()
    sizes = out[-2:-1] if missing > 0 else out[-2:]
    found = {OUTPUT_ONE} if 1 in sizes else set()
    return found | {OUTPUT_TAIL + tail_class(size) for size in sizes if tail_class(size)}


def declared(op) -> set[str]:
    """Every tail key `op` can have (see regions and output_regions): an innermost class where the op
    takes a first operand whose innermost dim is the class's largest extent (an RNN's input width is at most 17)."""
    reducing = op.ladder is not None and op.ladder.kind == "reduction"
    fits = {name for name, (_, high) in CLASSES.items()
            if any(op.accepts((2,) * (rank - 1) + (LANES + high,)) for rank in range(1, MAX_RANK + 1))}
    keys = {INNERMOST + name for name in fits} | ({REDUCED + name for name in CLASSES} if reducing else set())
    if op.family in OUTPUT_FAMILIES:
        keys |= {OUTPUT_ONE} | {OUTPUT_TAIL + name for name in CLASSES}
    return keys


def steered(draw, op, attrs: dict, shape: tuple[int, ...], region: str) -> tuple[tuple[int, ...], dict]:
    """`shape` with 16k + r of `region`'s class on the axis an innermost or reduced tail key names,
    or for an output tail on its last two dims (the op's strides and windows decide the output's
    class: the generator's redraws find one of the key's); the attributes redrawn for the new
    shape, or for a reduced tail (the attributes chose the axis) repaired where they restate it.
    Unchanged for any other region."""
    axes, tail = (), None
    if region.startswith(INNERMOST) and shape:
        axes, tail = (len(shape) - 1,), region.removeprefix(INNERMOST)
    elif region.startswith(REDUCED) and _reduced_axis(op, attrs, shape) is not None:
        axes, tail = (_reduced_axis(op, attrs, shape),), region.removeprefix(REDUCED)
    elif region.startswith(OUTPUT_TAIL):
        axes, tail = tuple(range(max(0, len(shape) - 2), len(shape))), region.removeprefix(OUTPUT_TAIL)
    if not axes:
        return shape, attrs
    dims = list(shape)
    for axis in axes:
        dims[axis] = draw_extent(draw, tail, STEERED_BLOCKS)
    shape = tuple(dims)
    if not region.startswith(REDUCED):
        return shape, op.draw_attrs(draw, [shape])
    return shape, op.repair_attrs(attrs, [shape]) if op.repair_attrs else attrs
