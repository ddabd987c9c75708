"""Pairs of region keys of one node (2-way coverage, as combinatorial testing counts it).

A fault that needs two regions of one node at once (a non-contiguous input AND a reduced extent that
leaves a vector tail; an attribute value AND an output size of 1) is met only when one node holds
both keys, which the plain mix and single-key steering seldom draw. A pair is written
"OP:REGION & REGION" (`sum:keepdim=False & layout=transposed`), its regions in PAIRED_FAMILIES'
order. The pairs a campaign declares follow from the keys it declares (fuzzer/drawing/regions.py): for each
op, every key of one family of a PAIRED_FAMILIES row with every key of the other. The pairs a case
reaches are those its nodes hold (`node_pairs`); a campaign steers toward those not covered yet
(regions.steered_focus), each through one Focus that asks for both keys (`focus_of`).

The families paired are those where a kernel's choice meets how it walks memory or what it computes
on. An attribute that picks a path (a bool, string, None or float zero: `ceil_mode=True`,
`approximate=tanh`, `compare=lt`) with a layout (how the path reads its input), with an output size
class (how it tiles its output) and with a special value (the formula the value meets). A layout
with the vector tail of a reduction's innermost reduced axis: the reduction walks its input in
place, strides and all, where a non-reducing kernel (a GEMM, a convolution) packs a non-contiguous
input into a contiguous buffer first, whose tail is a contiguous one's. Not paired: whole-number
attributes (they size a window, stride or group, keyed alone: the output size class and the
access pattern follow from them, not a path of their own), the sign of a dim attribute
(normalized before the kernel runs), and the regime, size, ladder, branch and op-declared keys
(rare single draws already). Pairing those too declared 3,318 pairs for the default op set, and
1,918 with only the dim signs, a reduction's innermost tail and the whole numbers' size classes left out,
of which a one-worker 10-minute campaign on a loaded 2-core machine (1,117 graphs) covered 54%.
A few declared pairs cannot meet (einsum's `equation=i,j->ij` reads rank 1, `layout=channels_last`
needs rank 4): the key census (regions._census) does not record the ranks it drew a value at.
"""

from __future__ import annotations

from collections.abc import Iterable

from fuzzer.drawing import branch_points, motifs, tails
from fuzzer.drawing.generate import Focus
from fuzzer.drawing.region_keys import DIM_ATTRIBUTES, LARGE_REDUCTION, LARGE_SIZE, key, op_of
from fuzzer.drawing.regions import focus_of as key_focus
from fuzzer.ops import get_op

CHOICE, LAYOUT, SPECIAL, TAIL, SIZE_CLASS = "choice", "layout", "special", "tail", "size-class"
PAIRED_FAMILIES = ((CHOICE, LAYOUT), (CHOICE, SIZE_CLASS), (LAYOUT, TAIL), (CHOICE, SPECIAL))
SEPARATOR = " & "
PREFIXES = {LAYOUT: ("layout=",), SPECIAL: ("input-has:",), SIZE_CLASS: (tails.OUTPUT_ONE, tails.OUTPUT_TAIL)}
# Keys of the other families (fuzzer/drawing/regions.py) that no pair holds.
UNPAIRED = ("regime=", LARGE_SIZE, LARGE_REDUCTION, "ladder=", branch_points.PREFIX, tails.INNERMOST, motifs.PREFIX)
DIM_SIGNS = {f"{name}{sign}" for name in DIM_ATTRIBUTES for sign in ("<0", ">=0")}


def family(op_name: str, region: str) -> str | None:
    """The family of `region` (a key of `op_name` without the op's name) that pairs go by; None for
    a key no pair holds."""
    for name, prefixes in PREFIXES.items():
        if region.startswith(prefixes):
            return name
    if region.startswith(tails.REDUCED):
        return TAIL
    own = get_op(op_name).regions
    if (region.startswith(UNPAIRED) or region in DIM_SIGNS or region.partition("=")[2].isdigit()
            or (own is not None and region in own.declared)):
        return None
    return CHOICE


def pair(op_name: str, first: str, second: str) -> str:
    return key(op_name, first + SEPARATOR + second)


def is_pair(target: str) -> bool:
    return SEPARATOR in target


def _pairs_of(op_name: str, regions: Iterable[str]) -> set[str]:
    """The pairs (PAIRED_FAMILIES) among regions of one node of `op_name`."""
    by_family: dict[str | None, list[str]] = {}
    for region in regions:
        by_family.setdefault(family(op_name, region), []).append(region)
    return {pair(op_name, a, b) for first, second in PAIRED_FAMILIES
            for a in by_family.get(first, ()) for b in by_family.get(second, ())}


def node_pairs(per_node: Iterable[tuple[str, set[str]]]) -> set[str]:
    """The pairs a case holds, from its nodes' regions (regions.node_regions)."""
    return {p for op_name, regions in per_node for p in _pairs_of(op_name, regions)}


def declared_pairs(declared_keys: Iterable[str]) -> list[str]:
    """Every pair of a campaign that declares `declared_keys` (regions.declared_regions), sorted."""
    by_op: dict[str, list[str]] = {}
    for region_key in declared_keys:
        by_op.setdefault(op_of(region_key), []).append(region_key.partition(":")[2])
    return sorted(p for op_name, regions in by_op.items() for p in _pairs_of(op_name, regions))


def focus_of(target: str) -> Focus:
    """How the generator reaches a region key or a pair: a pair's op first, in the regime, layout and
    value profile its keys need, its shape and attributes redrawn until they give both regions."""
    if not is_pair(target):
        return key_focus(target)
    op_name, _, regions = target.partition(":")
    first, second = (key_focus(key(op_name, region)) for region in regions.split(SEPARATOR))
    # A layout and a special value are placed by the layout and the profile; the others are redrawn toward.
    drawn = [f.key for f in (first, second) if family(op_name, f.key.partition(":")[2]) not in (LAYOUT, SPECIAL)]
    return Focus(op_name, first.regime or second.regime, first.layout or second.layout, drawn[0] if drawn else None,
                 first.profile or second.profile, drawn[1] if len(drawn) > 1 else None)
