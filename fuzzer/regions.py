"""Region keys: the regions of an op's input space its kernels switch on, named as short strings.

A key is "OP:REGION", e.g. `conv2d:stride=2`, `softmax:dim<0`, `sum:extent>4096`,
`softmax:input-has:-inf`, `layer_norm:layout=channels_last`, `tanh:regime=magnitudes`. Each
checked case exercises the keys of its nodes (`graph_regions`); a campaign counts the keys its
cases covered against the keys its op set declares (`declared_regions`), and steers a share of
its graphs toward the keys not covered yet (fuzzer/drawing/generate.py's Focus, chosen by the campaign).

A key is declared only where it names a kernel path of its own and steering reaches it in a graph
or two: a key that restates another, or one a campaign seldom reaches, only dilutes coverage. The
families, and the ops that get each without declaring anything:
  attribute  `ATTR=VALUE` for a boolean, a string, None, a float zero and a whole number up to
             SMALL_INT, except for attributes that say how many or where (SIZE_ATTRIBUTES:
             out_channels=3 runs out_channels=4's kernel); `ATTR<0` / `ATTR>=0` for an attribute
             naming dims (a negative dim is normalized on a path of its own). Every op.
  size       `elements>4096` of the first operand, for the families whose kernels tile, block or
             thread past a size (SIZED_FAMILIES); `extent>4096`, the elements each output value
             reads, for the reductions and softmax (REDUCING_FAMILIES). Below it: no key.
  regime     `regime=NAME` where the regime changes the op's path and no other key names it
             (REGIME_RULES): batch-threshold for contractions, convs, norms and attention (the
             batch size picks the algorithm); size-1 for ops of several operands (broadcast,
             concatenated), reductions and norms (a size-1 dim reduces to a copy); magnitudes for the ops
             that approximate a function (the unary, elementwise and softmax families, not the
             exact ones), whose approximations branch on |x|; big-contraction for the
             contractions it starts with. None for small (every op), large-op (the size keys),
             special-values (the special keys) or layout (the layout keys).
  layout     `layout=NAME`: an input it reads in a non-contiguous layout, each layout
             fuzzer/drawing/layouts.py gives a shape of a rank the op takes. Not for the elementwise
             families (ELEMENTWISE_FAMILIES): they reach memory through one strided loop shared
             by all of them (TensorIterator, XLA's elementwise fusion), so a layout is that
             loop's region, not each op's.
  special    `input-has:VALUE` in an operand, for the ops that compute on values (not
             DATA_MOVING_FAMILIES): nan, inf and -inf; a float32 subnormal unless the op is
             exact (piecewise constant); -0.0 where the sign of a zero matters
             (Numerics.zero_sign_matters).
  ladder     `ladder=KIND:2^k+1` (and -1, none): a rung of the size ladder (fuzzer/drawing/ladder.py) on the
             op's reduction or contraction axis (KIND reduction or contraction, as OpDef.ladder
             declares) or on jax-vmap's batch (KIND vmapped, Graph.vmapped), k 5 .. 17: 78 keys for
             each op with a ladder, where the ladder regime is drawn.
  tail       `tail=CLASS` (the innermost dim of the first operand) and, for an op whose ladder
             reduces, `reduced-tail=CLASS` (its innermost reduced axis): an extent of 16k + r, CLASS
             grouping r as 1, 2-3, 4-7, 8-15 (fuzzer/drawing/tails.py); every regime draws them. Not for
             DATA_MOVING_FAMILIES, nor a class the op's accepted shapes cannot hold (an RNN's width).
  output     `output=1` and `output-tail=CLASS` for one of the last two output dims of the
             resampling, pooling and attention ops (tails.OUTPUT_FAMILIES), whose kernels tile them.
  branch     `branch=NAME`: a point where the op's own math or kernels switch path, declared beside
             the op (OpDef.branch_points: softplus's threshold / beta, round's ties, exp's overflow
             boundary), held exactly by its first operand; where the branch-points regime is drawn.
  motif      `motif=NAME/VARIANT` (fuzzer/drawing/motifs.py): a compiler's rewrite pattern whose chain of ops follows
             the node (matmul -> add of a column bias), held by its head; where a regime draws motifs, for the
             variants the campaign's ops build. Steering builds the whole chain, and takes these keys first.
An op whose kernels switch on something these miss declares it (OpDef.regions, e.g. matmul's
batch broadcasting).

The declared set follows from the ops' declarations and the campaign's regimes: a family only
where a regime draws it (a layout regime, a special-values profile, dims past 4096, the named
regime); tests/test_regions.py checks that steering reaches each key so declared. Attribute values
are the exception: ops name their attributes (OpDef.attrs: both signs of a dim attribute are
declared from it) but draw their values from hypothesis strategies, not from data, so those are
found by a census: CENSUS_DRAWS one-op graphs of the small regime per op at a fixed seed, drawn
by the generator itself and cached per op in the process (0.55 s of CPU for the default op set, while
the campaign's workers start); an op derived from an op database takes its values from its samples
(OpDef.choices), without drawing (drawing probes shapes on the CPU: 43 s for the 326 derived ops). A value the census did not draw is not
declared: steering reaches what the census drew, and a key it cannot reach would hold coverage
below 100% for good.
"""

from __future__ import annotations

import functools
import random
from collections import Counter
from collections.abc import Iterable

from fuzzer.drawing import branch_points, ladder, motifs, tails
from fuzzer.drawing.generate import BIG_CONTRACTIONS, Focus, focus_ranks, focused_graphs
from fuzzer.drawing.layouts import CONTIGUOUS, layouts_for
from fuzzer.drawing.regimes import DEFAULT
from fuzzer.ir import Graph, infer_shapes
from fuzzer.ops import get_op
from fuzzer.ops.derived.ops import FAMILY as DERIVED_FAMILY
from fuzzer.drawing.region_keys import (DATA_MOVING_FAMILIES, DIM_ATTRIBUTES, ELEMENTWISE_FAMILIES, LARGE_EXTENT, LARGE_REDUCTION, LARGE_SIZE,
                                 REDUCING_FAMILIES, SIZE_ATTRIBUTES, SIZED_FAMILIES, attribute_regions, drawn_regions, key,
                                 special_regions)

# regime -> does an op get its `regime=` key (the module docstring says why each).
REGIME_RULES = {
    "batch-threshold": lambda op: op.family in ("matmul", "conv", "norm", "attention"),
    "size-1": lambda op: op.arity[1] > 1 or op.family in REDUCING_FAMILIES + ("norm",),
    "magnitudes": lambda op: op.family in ("unary", "elementwise", "softmax") and not op.numerics.exact,
    "big-contraction": lambda op: op.name in BIG_CONTRACTIONS,
}
CENSUS_DRAWS = 8  # small-regime one-op graphs per op whose attribute keys are declared
CENSUS_SEED = 0


@functools.lru_cache(maxsize=None)
def op_regions(op_name: str) -> frozenset[str]:
    """Every key but the attribute keys that `op_name` can have in some campaign, without the op's
    name: its size, regime, layout and special keys (the rules of the module docstring) and its own."""
    op = get_op(op_name)
    regions = {f"regime={name}" for name, applies in REGIME_RULES.items() if applies(op)}
    if op.family in SIZED_FAMILIES:
        regions.add(LARGE_SIZE)
    if op.family in REDUCING_FAMILIES:
        regions.add(LARGE_REDUCTION)
    if op.ladder is not None:
        regions.update(ladder.regions(op.ladder.kind) + ladder.regions("vmapped"))
    if op.family not in ELEMENTWISE_FAMILIES:
        regions.update(f"layout={layout}" for rank in focus_ranks(op) for layout in layouts_for((2,) * rank))
    if op.family not in DATA_MOVING_FAMILIES:
        values = ["nan", "inf", "-inf"] + ["subnormal"] * (not op.numerics.exact) + ["-0.0"] * op.numerics.zero_sign_matters
        regions.update(f"input-has:{value}" for value in values)
    if op.branch_points is not None:
        regions.update(branch_points.region(name) for name in op.branch_points.declared)
    if op.family not in DATA_MOVING_FAMILIES:
        regions |= tails.declared(op)
    return frozenset(regions | set(op.regions.declared if op.regions is not None else ()))


def _kept(op_name: str, region: str) -> bool:
    """Is `region`, exercised by a node of `op_name`, one of the op's keys? (Attribute keys always are.)"""
    attribute = not region.startswith(("regime=", "layout=", "input-has:", "elements", "extent", "ladder=", branch_points.PREFIX,
                                       tails.INNERMOST, tails.REDUCED, tails.OUTPUT_TAIL, tails.OUTPUT_ONE))
    return attribute or region in op_regions(op_name)


def graph_regions(graph: Graph, values: dict | None = None) -> set[str]:
    """The keys a case of `graph` exercises. `values`: every value of the case by name (the float64
    reference's), for the special-value keys; without them those are left out."""
    return keys_of(node_regions(graph, values))


def keys_of(per_node: list[tuple[str, set[str]]]) -> set[str]:
    """The region keys of node_regions' answer."""
    return {key(op, region) for op, regions in per_node for region in regions}


def node_regions(graph: Graph, values: dict | None = None) -> list[tuple[str, set[str]]]:
    """Per node of `graph`: its op and the regions (keys without the op's name) it exercises (see
    graph_regions); fuzzer/drawing/region_pairs.py pairs the regions of one node."""
    shapes = infer_shapes(graph)
    layouts = {spec.name: spec.layout for spec in graph.inputs if spec.layout != CONTIGUOUS}
    regimes = (graph.regime or "small").split("+")  # a composition exercises both regimes
    specials: dict[str, set[str]] = {}  # per value name: computed once however many nodes read it
    chains = motifs.matched(graph, shapes)  # per head node: the motifs that follow it
    found = []
    for node in graph.nodes:
        op = get_op(node.op)
        operand_shapes = [tuple(shapes[name]) for name in node.inputs]
        mine = drawn_regions(op, node.attrs, operand_shapes[0]) | tails.output_regions(op, node.attrs, operand_shapes)
        if op.regions is not None:
            mine.update(op.regions.of(node.attrs, operand_shapes))
        mine.update(f"regime={regime}" for regime in regimes)
        if graph.vmapped and ladder.rung_of(graph.vmapped):
            mine.add(ladder.region("vmapped", *ladder.rung_of(graph.vmapped)))
        mine.update(f"layout={layouts[name]}" for name in node.inputs if name in layouts)
        if values is not None and op.family not in DATA_MOVING_FAMILIES:
            for name in node.inputs:
                if name not in specials:
                    specials[name] = special_regions(values[name]) if name in values else set()
                mine |= specials[name]
        if values is not None and op.branch_points is not None and node.inputs[0] in values:
            mine |= branch_points.regions_met(op.branch_points, node.attrs, values[node.inputs[0]])
        found.append((node.op, {region for region in mine if _kept(node.op, region)} | chains.get(node.name, set())))
    return found


def declared_regions(op_names: Iterable[str], regimes: tuple) -> list[str]:
    """Every key a campaign of these ops and regimes (fuzzer/drawing/regimes.py's Regime) declares (see
    the module docstring), sorted."""
    drawn = _drawn_families(tuple(regimes))
    declared = set()
    for name in op_names:
        declared |= _census(name)
        declared.update(key(name, region) for region in op_regions(name) if _drawn(region, drawn))
    if drawn["motifs"]:
        declared.update(motifs.declared(op_names))
    return sorted(declared)


def _drawn_families(regimes: tuple) -> dict:
    """What the campaign's regimes draw: {"regimes": the single regimes named (a composition "a+b"
    draws both), "layouts", "special" and "large": whether any regime draws them}."""
    return {"regimes": {part for regime in regimes for part in regime.name.split("+")},
            "layouts": any(regime.layouts for regime in regimes),
            "special": any("special" in regime.value_profiles for regime in regimes),
            "large": any(d > LARGE_EXTENT for regime in regimes for d in regime.large_dims),
            "ladder": any(regime.ladder for regime in regimes),
            "vmapped": any(regime.ladder and regime.vmapped for regime in regimes),
            "branch": any(regime.branch_points for regime in regimes),
            "motifs": any(regime.motifs for regime in regimes)}


def _drawn(region: str, drawn: dict) -> bool:
    """Does a campaign that draws `drawn` (_drawn_families) reach the non-attribute key `region`?"""
    if region.startswith("regime="):
        return region.removeprefix("regime=") in drawn["regimes"]
    if region.startswith("layout="):
        return drawn["layouts"]
    if region.startswith("input-has:"):
        return drawn["special"]
    if region in (LARGE_SIZE, LARGE_REDUCTION):
        return drawn["large"]
    if region.startswith("ladder=vmapped:"):
        return drawn["vmapped"]
    if region.startswith("ladder="):
        return drawn["ladder"]
    if region.startswith(branch_points.PREFIX):
        return drawn["branch"]
    return True  # the op's own keys (OpDef.regions)


@functools.lru_cache(maxsize=None)
def _census(op_name: str) -> frozenset[str]:
    """The attribute keys of `op_name`: both signs of each dim attribute it declares (OpDef.attrs;
    tests/test_distribution.py checks that both are drawn), and those of CENSUS_DRAWS one-op graphs
    of the small regime."""
    op = get_op(op_name)
    declared = op.attrs
    names = {name.removesuffix("?") for name in declared or ()}
    regions = {f"{name}{sign}" for name in names & set(DIM_ATTRIBUTES) for sign in ("<0", ">=0")}
    if declared is not None and not names - set(DIM_ATTRIBUTES) - set(SIZE_ATTRIBUTES):
        return frozenset(key(op_name, region) for region in regions)  # no value to find (relu, softmax)
    if op.family == DERIVED_FAMILY:  # its values are data (the op database's samples): read, not drawn
        regions.update(region for name, values in op.choices.items() for value in values
                       for region in attribute_regions({name: value}))
        return frozenset(key(op_name, region) for region in regions)
    rng = random.Random(f"{CENSUS_SEED}:{op_name}")
    graphs = focused_graphs(Focus(op_name, DEFAULT.name), (DEFAULT,), CENSUS_DRAWS, rng)
    regions.update(region for graph in graphs for node in graph.nodes if node.op == op_name
                   for region in attribute_regions(node.attrs))
    return frozenset(key(op_name, region) for region in regions)


# The value profile (fuzzer/arrays.py) a steered graph's first input takes to hold a special value.
SPECIAL_PROFILES = {"subnormal": "subnormal", "nan": "special", "inf": "special", "-inf": "special", "-0.0": "special"}


def focus_of(region_key: str):
    """How the generator reaches `region_key`: its op placed first, in the regime, layout or value
    profile the key needs, its attributes redrawn until they give the key (fuzzer/drawing/generate.py's Focus)."""
    op, _, region = region_key.partition(":")
    regime = layout = profile = None
    if region.startswith("regime="):
        regime = region.removeprefix("regime=")
    elif region.startswith("layout="):
        regime, layout = "layout", region.removeprefix("layout=")
    elif region.startswith("input-has:"):
        regime, profile = "special-values", SPECIAL_PROFILES[region.removeprefix("input-has:")]
    elif region in (LARGE_SIZE, LARGE_REDUCTION):
        regime = "large-op"
    elif region.startswith("ladder="):
        regime = "ladder"
    elif region.startswith(branch_points.PREFIX):
        return Focus(op, "branch-points")  # the regime places the points: no shape or attribute to redraw toward
    elif region.startswith(motifs.PREFIX):
        regime = "motifs"  # the generator builds the motif itself (generate._focused_start)
    return Focus(op, regime, layout, region_key, profile)


def coverage(covered: Iterable[str], declared: Iterable[str], within: str = "") -> dict:
    """{"declared", "covered", "never_reached"} of a campaign: keys declared, how many of them were
    covered, and those never reached (sorted). `within`: only the keys whose region starts with it
    (motifs.PREFIX: which motifs a campaign covered)."""
    declared = sorted(k for k in set(declared) if k.partition(":")[2].startswith(within))
    missing = sorted(set(declared) - set(covered))
    return {"declared": len(declared), "covered": len(declared) - len(missing), "never_reached": missing}


STEER_EVERY = 4
# index % STEER_EVERY -> what its graph is steered toward; the other indices draw the plain mix. Two
# slots for pairs: a one-worker 10-minute campaign checks ~1,100 graphs on a loaded 2-core machine,
# and one in four left 44% of the default set's pairs unreached. A steered graph is steered in its
# first node only and grows like any other, so the plain mix keeps most of every graph.
KEY, PAIR = "key", "pair"
STEERED_SLOTS = {1: PAIR, 2: PAIR, 3: KEY}
# Steered graphs a key or pair gets at most: one steering does not reach in this many (8 reach every
# declared key: tests/test_regions.py) is left to the plain mix, which gets its slots back once only such are left.
STEER_TRIES = 8


def steered_focus(index: int, tries: Counter, uncovered: list[str], uncovered_pairs: list[str] = ()) -> str | None:
    """The region key or pair (fuzzer/drawing/region_pairs.py) case `index` is steered toward: for the
    indices of STEERED_SLOTS, the uncovered key or pair steered to least often so far (`tries`,
    counted here; the first in list order among equals; every slot takes the other list once its
    own is covered or tried STEER_TRIES times), so each gets a try before any gets a second; None
    otherwise, and once every key and pair is covered or tried that often; a motif's key (fuzzer/drawing/motifs.py)
    before the others among equals. (Taken in turn by their
    position in a list that shrinks as they are covered, some were passed over for many turns.)"""
    kind = STEERED_SLOTS.get(index % STEER_EVERY)
    if kind is None:
        return None
    keys, pairs = ([t for t in targets if tries[t] < STEER_TRIES] for targets in (uncovered, uncovered_pairs))
    targets = {KEY: keys, PAIR: pairs}[kind] if keys and pairs else keys or pairs
    if not targets:
        return None
    # Motif keys first among equals: a whole chain of ops, which only they and the motifs regime's 4% draw.
    target = min(targets, key=lambda t: (tries[t], motifs.PREFIX not in t))
    tries[target] += 1
    return target
