"""Size ladders: 2^k - 1, 2^k and 2^k + 1 elements on one reduction, contraction or vmapped axis.

Kernels switch paths at powers of two: a vector tail, a tile, a block of a multi-threaded reduction,
an index that needs one more bit (jax#39103: jit(vmap(matrix @ row)) then a sum, wrong from 16,385
rows in float64). One rung of the ladder is one of those sizes on one axis that reduces (an op's
OpDef.ladder says which) or on the vmapped axis of jax-vmap, the other axes small so a tensor stays
within the ladder regime's bound (fuzzer/drawing/regimes.py). A rung is a region key (`sum:ladder=reduction:2^16+1`,
fuzzer/drawing/region_keys.py), so a campaign steers toward the rungs it has not tried.
"""

from __future__ import annotations

import re

from fuzzer.ops._common import numel

POWERS = range(5, 18)  # 31 .. 131073 elements; the small regime draws 15, 16 and 17 itself
OFFSETS = (-1, 0, 1)
KINDS = ("reduction", "contraction", "vmapped")
_RUNG = re.compile(r"ladder=(\w+):2\^(\d+)([+-]1)?")


def size(power: int, offset: int) -> int:
    return 2**power + offset


def rung_of(extent: int) -> tuple[int, int] | None:
    """(k, offset) where `extent` is 2^k + offset for a k of POWERS, else None."""
    for offset in OFFSETS:
        power = (extent - offset).bit_length() - 1
        if power in POWERS and size(power, offset) == extent:
            return power, offset
    return None


def region(kind: str, power: int, offset: int) -> str:
    """The region (without the op's name) of one rung: "ladder=reduction:2^16+1"."""
    return f"ladder={kind}:2^{power}{'' if offset == 0 else f'{offset:+d}'}"


def regions(kind: str) -> tuple[str, ...]:
    """Every rung's region for axes of `kind`."""
    return tuple(region(kind, power, offset) for power in POWERS for offset in OFFSETS)


def parse(region_text: str) -> tuple[str, int, int] | None:
    """(kind, k, offset) of a rung's region, None for another region."""
    match = _RUNG.fullmatch(region_text)
    return (match[1], int(match[2]), int(match[3] or 0)) if match else None


def laddered(shape: tuple[int, ...], axis: int, extent: int, bound: int) -> tuple[int, ...]:
    """`shape` with `extent` on `axis`, its other dims set to 1, largest first, until it holds at
    most `bound` elements."""
    dims = list(shape)
    dims[axis] = extent
    for other in sorted((i for i in range(len(dims)) if i != axis), key=lambda i: -dims[i]):
        if numel(dims) <= bound:
            break
        dims[other] = 1
    return tuple(dims)
