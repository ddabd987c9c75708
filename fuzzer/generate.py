"""Random graphs that are valid by construction, as hypothesis strategies.

A graph starts from one of the seed patterns (the shapes of the five bug classes),
a compiler's rewrite pattern (fuzzer/drawing/motifs.py, where the regime draws motifs)
or a bare input, then grows by free composition: pick a value, pick an op
that accepts its shape, draw attributes valid for that shape, add extra operands
(an existing value of the right shape, or a new graph input). Dimensions come
from a small set (ops/_common.DIMS) so compiled code is reused across graphs.

`generate_case(seed, ...)` turns a seed into a Case deterministically by feeding
seeded bytes to hypothesis (`fuzz_one_input`), so `--seed` reproduces a campaign.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, replace
from typing import Callable

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fuzzer.arrays import materialize, regime_profiles
from fuzzer.drawing import branch_points, ladder, motifs, tails
from fuzzer.drawing.layouts import CONTIGUOUS, layouts_for
from fuzzer.drawing.regimes import REGIMES, Regime, get_regime
from fuzzer.drawing.region_keys import drawn_regions
from fuzzer.errors import InternalError, ShapeError
from fuzzer.ir import Case, Graph, Node, TensorSpec
from fuzzer.ops import OpDef, float_op_names, get_op
from fuzzer.ops._common import DIMS, numel
from fuzzer.ops.derived.ops import FAMILY as DERIVED_FAMILY
from fuzzer.ops.matmul import TILE_EDGE_SIZES

PATTERNS = ("conv-layout-norm", "rnn-sequence", "matmul-chain", "norm-dropout", "conv-bn", "attention", "free", "free")


@dataclass
class _Builder:
    """The graph under construction."""

    draw: object
    ops: dict[str, OpDef]
    regime: Regime
    inputs: list[TensorSpec]
    nodes: list[Node]
    shapes: dict[str, tuple[int, ...]]

    def keep_first(self, count: int) -> str:
        """Cut the graph to its first `count` nodes (a seed pattern longer than --max-nodes) and the
        inputs they read, renumbered; returns the last node's name."""
        self.nodes = self.nodes[:count]
        read = {ref for node in self.nodes for ref in node.inputs}
        names = {spec.name: f"x{index}" for index, spec in enumerate(s for s in self.inputs if s.name in read)}
        self.inputs = [replace(spec, name=names[spec.name]) for spec in self.inputs if spec.name in names]
        self.nodes = [replace(node, inputs=tuple(names.get(ref, ref) for ref in node.inputs)) for node in self.nodes]
        self.shapes = {**{names[old]: self.shapes[old] for old in names}, **{n.name: self.shapes[n.name] for n in self.nodes}}
        return self.nodes[-1].name

    def new_input(self, shape, layout: str | None = None) -> str:
        """A new graph input of `shape` (fitted to the regime); `layout` where the shape allows it,
        else one drawn as the regime says."""
        name = f"x{len(self.inputs)}"
        shape = self.fit(tuple(shape))
        if layout not in layouts_for(shape):
            layout = CONTIGUOUS
            if self.regime.layouts and layouts_for(shape) and self.draw(st.integers(0, 3)):
                layout = self.draw(st.sampled_from(layouts_for(shape)))
        self.inputs.append(TensorSpec(name, shape, layout))
        self.shapes[name] = shape
        return name

    def fit(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """`shape` with its largest dims cut down until it holds at most the regime's max_elements
        (a seed pattern may put a large dim next to others drawn separately)."""
        dims = list(shape)
        while numel(dims) > self.regime.max_elements:
            at = dims.index(max(dims))
            room = self.regime.max_elements // max(1, numel(dims) // dims[at])
            dims[at] = max([d for d in (*DIMS, *self.regime.large_dims) if d <= room], default=1)
        return tuple(dims)

    def is_input(self, value: str) -> bool:
        return any(spec.name == value for spec in self.inputs)

    def dims(self, count: int, low: int = 1) -> tuple[int, ...]:
        """`count` dims for a new input, drawn as the regime says."""
        draw, regime = self.draw, self.regime
        small = [d for d in DIMS if d >= low]
        dims = []
        for _ in range(count):
            size_one = regime.size_one_share and low <= 1 and draw(st.floats(0, 1)) < regime.size_one_share
            dims.append(1 if size_one else draw(st.sampled_from(small)))
        # A tail on the innermost dim, or another an op may reduce; not beside a large dim (its own sizes
        # leave tails), where it would double a tensor of up to 1e6 elements.
        if not regime.large_dims and draw(st.floats(0, 1)) < tails.TAIL_SHARE:
            dims[-1 if draw(st.booleans()) else draw(st.integers(0, count - 1))] = tails.draw_extent(draw)
        if regime.leading_dims and count >= 2:
            dims[0] = draw(st.sampled_from(regime.leading_dims))
        if regime.large_dims:
            at = draw(st.integers(0, count - 1))
            room = regime.max_elements // max(1, numel(dims) // dims[at])
            fitting = [d for d in regime.large_dims if d <= room]
            if fitting:
                dims[at] = draw(st.sampled_from(fitting))
        return tuple(dims)

    def try_add(self, op_name: str, first: str, attrs: dict | None = None, others: list[str] | None = None) -> str | None:
        """Add `op_name` on value `first` (attrs and further operands drawn unless given);
        None if it cannot apply."""
        op = self.ops.get(op_name)
        if op is None or not op.accepts(self.shapes[first]) or (op.numerics.exact and not self.is_input(first)):
            return None
        draw = self.draw
        attrs = op.draw_attrs(draw, [self.shapes[first]]) if attrs is None else attrs
        operands = [first, *(others or [])]
        if op.draw_operands is not None and others is None:
            shapes = [tuple(shape) for shape in op.draw_operands(draw, self.shapes[first], attrs)]
            if any(numel(shape) > self.regime.max_elements for shape in shapes):
                return None
            for shape in shapes:
                # Any value of the right shape, the first operand too (mul(y, y)); an exact op's
                # operands are graph inputs (see Numerics.exact).
                existing = [name for name, s in self.shapes.items()
                            if s == tuple(shape) and (self.is_input(name) or not op.numerics.exact)]
                if existing and draw(st.booleans()):
                    operands.append(draw(st.sampled_from(existing)))
                else:
                    operands.append(self.new_input(shape))
        try:
            shape = tuple(op.infer(attrs, [self.shapes[o] for o in operands]))
        except ShapeError as exc:
            if others is not None:
                return None  # a seed pattern's guess at operands that do not fit: no node
            raise InternalError(f"generator drew an invalid {op_name}: {exc} (attrs {attrs})") from exc
        if numel(shape) > self.regime.max_elements:
            return None
        name = f"n{len(self.nodes)}"
        self.nodes.append(Node(name, op_name, tuple(operands), attrs))
        self.shapes[name] = shape
        return name


def _seed_pattern(builder: _Builder, pattern: str) -> str:
    """Start the graph with the structure of a seed bug class; returns the last value."""
    draw = builder.draw
    if pattern == "conv-layout-norm":
        x = builder.new_input((draw(st.sampled_from([1, 2])), draw(st.sampled_from([1, 2, 3, 4])), *builder.dims(2, low=2)))
        last = builder.try_add("conv2d", x) or x
        layout = draw(st.sampled_from(["permute", "transpose", "reshape"]))
        if layout == "permute":
            last = builder.try_add("permute", last, {"perm": [0, 2, 3, 1]}) or last
        elif layout == "transpose":
            last = builder.try_add("transpose", last, {"dim0": 1, "dim1": 3}) or last
        else:
            n, c, h, w = builder.shapes[last]
            last = builder.try_add("reshape", last, {"shape": [n, c, h * w]}) or last
            last = builder.try_add("transpose", last, {"dim0": 1, "dim1": 2}) or last
        return builder.try_add("layer_norm", last) or last
    if pattern == "rnn-sequence":
        x = builder.new_input((draw(st.sampled_from([2, 3, 4, 5])), draw(st.sampled_from([1, 2, 3])), draw(st.sampled_from([1, 2, 3, 4, 5]))))
        rnn = draw(st.sampled_from([name for name in ("gru", "lstm") if name in builder.ops] or ["gru"]))
        return builder.try_add(rnn, x) or x
    if pattern == "matmul-chain":
        k = draw(st.sampled_from(TILE_EDGE_SIZES))
        lead = builder.dims(draw(st.integers(1, 2)))
        x = builder.new_input((*lead, k))
        last = x
        for _ in range(draw(st.integers(1, 2))):
            op = draw(st.sampled_from([name for name in ("linear", "matmul") if name in builder.ops] or ["linear"]))
            last = builder.try_add(op, last) or last
            last = builder.try_add("relu", last) or last
        return last
    if pattern == "conv-bn":
        # conv2d or linear -> [activation] -> batch_norm(eval): what BN-folding transformations rewrite.
        if draw(st.booleans()):
            x = builder.new_input((draw(st.sampled_from([1, 2])), draw(st.sampled_from([1, 2, 3])), *builder.dims(2, low=2)))
            last = builder.try_add("conv2d", x) or x
        else:
            x = builder.new_input((draw(st.sampled_from([2, 3, 4])), draw(st.sampled_from(DIMS))))
            last = builder.try_add("linear", x) or x
        if draw(st.booleans()):
            last = builder.try_add(draw(st.sampled_from(["relu", "tanh"])), last) or last
        return builder.try_add("batch_norm", last, {"training": False, "eps": 1e-5}) or last
    if pattern == "norm-dropout":
        x = builder.new_input((draw(st.sampled_from([1, 2, 4])), *builder.dims(draw(st.integers(1, 3)))))
        last = builder.try_add("batch_norm", x) or x
        return builder.try_add("dropout", last) or last
    if pattern == "attention":
        return _attention(builder)
    rank = draw(st.integers(1, 5))  # rank 5: conv3d and 3-d pooling inputs
    return builder.new_input(builder.dims(rank))


def _attention(builder: _Builder) -> str:
    """Hand-written attention as models write it: q, k, v projections of one sequence,
    softmax(q @ k^T * scale) @ v: the pattern compilers rewrite into fused attention kernels."""
    draw = builder.draw
    batch, length = builder.dims(2)
    width = draw(st.sampled_from([2, 4, 8, 16, 17]))
    x = builder.new_input((batch, length, width))
    head = draw(st.sampled_from([1, 2, 4, 8, 9]))
    q, k, v = (builder.try_add("linear", x, {"out_features": head, "bias": draw(st.booleans())}) or x for _ in range(3))
    k_t = builder.try_add("transpose", k, {"dim0": 1, "dim1": 2})
    scores = k_t and builder.try_add("matmul", q, {}, [k_t])
    if scores is None:
        return q
    scaled = builder.try_add("mul_scalar", scores, {"value": 1.0 / float(builder.shapes[q][-1]) ** 0.5}) or scores
    weights = builder.try_add("softmax", scaled, {"dim": -1}) or scaled
    return builder.try_add("matmul", weights, {}, [v]) or weights


# The contractions a big-contraction graph starts with (fuzzer/drawing/regimes.py: contraction_dims).
BIG_CONTRACTIONS = ("matmul", "linear", "bmm", "einsum", "conv1d", "conv2d")
# A conv2d's output positions (M of its GEMM): 11..13 squared, 121..169, keeps the float64
# reference (one einsum per kernel offset) under ~0.5 s at 512 channels in and out.
BIG_CONV2D_SIDES = (11, 12, 13)


def _big_contraction(builder: _Builder) -> str | None:
    """A first node that contracts with every dim large: M x K @ K x N with M, K and N drawn from
    the regime's contraction_dims (a conv: input channels, output channels and output positions);
    None when the campaign has none of these ops."""
    draw, sizes = builder.draw, builder.regime.contraction_dims
    available = [name for name in BIG_CONTRACTIONS if name in builder.ops]
    if not available:
        return None
    op = draw(st.sampled_from(available))
    m, k, n = (draw(st.sampled_from(sizes)) for _ in range(3))
    if op == "linear":
        return builder.try_add(op, builder.new_input((m, k)), {"out_features": n, "bias": draw(st.booleans())})
    if op == "matmul":
        return builder.try_add(op, builder.new_input((m, k)), {}, [builder.new_input((k, n))])
    if op in ("bmm", "einsum"):
        attrs = {"equation": "bij,bjk->bik"} if op == "einsum" else {}
        # A batch of one: the oracle evaluates the reference several times, at ~0.1 s a 512^3 product.
        return builder.try_add(op, builder.new_input((1, m, k)), attrs, [builder.new_input((1, k, n))])
    spatial = (m,) if op == "conv1d" else (draw(st.sampled_from(BIG_CONV2D_SIDES)), draw(st.sampled_from(BIG_CONV2D_SIDES)))
    shape = (1, k, *spatial)
    # The conv's own kernel and padding, but dense (groups 1), n output channels, stride 1 (M stays large).
    attrs = {**builder.ops[op].draw_attrs(draw, [shape]), "groups": 1, "out_channels": n, "stride": [1] * len(spatial)}
    return builder.try_add(op, builder.new_input(shape), attrs)


@dataclass(frozen=True)
class Focus:
    """A graph steered toward a region key (fuzzer/drawing/regions.py): it starts with `op`, in `regime` and
    with its first input in `layout` where those are given and allowed, the op's attributes redrawn
    up to FOCUS_TRIES times until they give `key`'s region; then it grows like any other graph.
    `profile`: the value profile (fuzzer/arrays.py) of the graph inputs it reads, where given. `also`:
    a second key of the same op its attributes must give too (a pair, fuzzer/drawing/region_pairs.py)."""

    op: str
    regime: str | None = None
    layout: str | None = None
    key: str | None = None
    profile: str | None = None
    also: str | None = None


FOCUS_TRIES = 12
MAX_RANK = 5


def focus_ranks(op: OpDef) -> list[int]:
    """The ranks a focused start draws `op`'s first input in: those it accepts."""
    return [r for r in range(1, MAX_RANK + 1) if op.accepts((2,) * r) or op.accepts((1,) * r)]


def _focused_start(builder: _Builder, focus: Focus) -> str:
    """The focus op on the regime's big contraction where it has one and the op accepts its result,
    else on a new input of a rank it accepts (and of the focus layout): up to FOCUS_TRIES shapes and
    attributes for each key it must give (a pair's two) are drawn until they give them, else the first are kept;
    assume() rejects the draw where no shape was found."""
    draw, op = builder.draw, builder.ops[focus.op]
    variant = motifs.find(focus.key or "")
    if variant is not None:  # a motif's key: the motif itself, whose head is the focus op
        last = motifs.start(builder, variant)
        assume(last is not None)
        return last
    region = (focus.key or "").partition(":")[2]
    wanted = {k.partition(":")[2] for k in (focus.key, focus.also) if k}
    start = builder.regime.contraction_dims and _big_contraction(builder)
    start = start if start and op.accepts(builder.shapes[start]) else None
    ranks = focus_ranks(op)
    chosen = None
    # FOCUS_TRIES for each key it must give: a pair's attribute and output size class met in 41% of steered graphs, 31% with 12.
    for _ in range(FOCUS_TRIES * max(1, len(wanted)) if start or ranks else 0):
        shape = builder.shapes[start] if start else builder.fit(builder.dims(draw(st.sampled_from(ranks))))
        if not op.accepts(shape) or not (start or focus.layout is None or focus.layout in layouts_for(shape)):
            continue
        attrs = op.draw_attrs(draw, [shape])
        tailed, attrs = (shape, attrs) if start else tails.steered(draw, op, attrs, shape, region)
        if tailed != shape and not (op.accepts(tailed) and numel(tailed) <= builder.regime.max_elements and _applies(draw, op, attrs, tailed)):
            continue  # a tail the op's attributes do not fit
        shape = tailed
        chosen = chosen or (shape, attrs)
        if wanted <= drawn_regions(op, attrs, shape) | tails.output_regions(op, attrs, [shape]):
            chosen = (shape, attrs)
            break
    assume(chosen is not None)
    shape, attrs = chosen
    start = start or builder.new_input(shape, focus.layout)
    return builder.try_add(focus.op, start, attrs) or start


def _ladder_start(builder: _Builder, focus: Focus | None = None) -> str | None:
    """A first node whose reduction or contraction axis (OpDef.ladder) holds a rung of the ladder
    (fuzzer/drawing/ladder.py), its operand's other dims cut to keep it within a quarter of the regime's
    bound (its other operands and weights need room too): `focus.op` on the rung of `focus.key`
    where given. Up to FOCUS_TRIES draws; None where none fits, or no op of the campaign has a ladder."""
    draw, bound = builder.draw, builder.regime.max_elements
    steer = ladder.parse((focus.key or "").partition(":")[2]) if focus else None
    laddered = [name for name, op in builder.ops.items() if op.ladder and (focus is None or name == focus.op)]
    if not laddered or (steer and steer[0] != builder.ops[laddered[0]].ladder.kind):
        return None
    for _ in range(FOCUS_TRIES):
        op = builder.ops[draw(st.sampled_from(laddered))]
        shape = builder.dims(draw(st.sampled_from(focus_ranks(op))))
        if not op.accepts(shape):
            continue
        attrs = op.draw_attrs(draw, [shape])
        axes = op.ladder.axes(attrs, [shape])
        if not axes:
            continue
        power, offset = steer[1:] if steer else (draw(st.sampled_from(ladder.POWERS)), draw(st.sampled_from(ladder.OFFSETS)))
        axis = draw(st.sampled_from(axes))
        shape = ladder.laddered(shape, axis, ladder.size(power, offset), bound // 4)
        attrs = op.repair_attrs(attrs, [shape]) if op.repair_attrs else attrs
        if not _applies(draw, op, attrs, shape):  # a conv's kernel, once its other dims were cut to 1
            attrs = op.draw_attrs(draw, [shape])
            if axis not in op.ladder.axes(attrs, [shape]) or not _applies(draw, op, attrs, shape):
                continue
        if any(numel(p) > bound for p in op.params(attrs, [shape]).values()):
            continue  # a linear's or conv's weight of rung x out_features
        inputs, shapes = list(builder.inputs), dict(builder.shapes)
        added = builder.try_add(op.name, builder.new_input(shape), attrs)
        if added:
            return added
        builder.inputs, builder.shapes = inputs, shapes  # an operand past the bound: no trace of the try
    return None


def _pointed_start(builder: _Builder) -> str | None:
    """A first node whose op declares branch points (fuzzer/drawing/branch_points.py), on a new input, where
    the branch-points regime places them; None where no op of the campaign declares any."""
    pointed = sorted(name for name, op in builder.ops.items() if op.branch_points is not None)
    return _focused_start(builder, Focus(builder.draw(st.sampled_from(pointed)))) if pointed else None


VMAPPED_SHARE = 3  # one ladder graph in this many puts its rung on jax-vmap's batch instead of an op's axis
VMAPPED_ELEMENTS = 16


def _vmapped_rung(draw, regime: Regime, focus: Focus | None) -> int:
    """The size of jax-vmap's batch (Graph.vmapped) in the ladder regime: the focus key's rung where it
    is a vmapped one, else a rung for one graph in VMAPPED_SHARE; 0 (jax-vmap's default) otherwise."""
    if not (regime.ladder and regime.vmapped):
        return 0
    if focus is not None:
        steer = ladder.parse((focus.key or "").partition(":")[2])
        return ladder.size(*steer[1:]) if steer and steer[0] == "vmapped" else 0
    if draw(st.integers(1, VMAPPED_SHARE)) != 1:
        return 0
    return ladder.size(draw(st.sampled_from(ladder.POWERS)), draw(st.sampled_from(ladder.OFFSETS)))


def _applies(draw, op: OpDef, attrs: dict, shape: tuple[int, ...]) -> bool:
    """Does `op` with `attrs` apply to a first operand of `shape` (and others drawn for it)?"""
    try:
        op.infer(attrs, [shape, *(op.draw_operands(draw, shape, attrs) if op.draw_operands else [])])
    except ShapeError:
        return False
    return True


def _draw_regime(draw, regimes: tuple[Regime, ...]) -> Regime:
    """A regime drawn with the stated weights (percent), among those allowed."""
    total = sum(regime.weight for regime in regimes)
    # Reduced from a wide range: hypothesis favours the ends of a small range, which would skew the shares.
    point = draw(st.integers(0, 2**32 - 1)) % total
    for regime in regimes:
        point -= regime.weight
        if point < 0:
            return regime
    raise InternalError("regime weights do not add up")


@functools.lru_cache(maxsize=4096)
def _accepting(op_names: tuple[str, ...], shape: tuple[int, ...]) -> tuple[str, ...]:
    """The ops (sorted) whose first operand may have `shape`: asked of every op at every step of every
    graph drawn (7% of drawing), and a function of the shape alone."""
    return tuple(sorted(name for name in op_names if get_op(name).accepts(shape)))


def _graph_pool(draw, ops: dict[str, OpDef], steer: Focus | None, derived_share: float) -> dict[str, OpDef]:
    """The ops this graph draws from: all of `ops` in `derived_share` of graphs, else those not derived
    from torch's op database (with the steered op, whatever it is). A share of 0 draws no choice, so a
    campaign without derived ops draws the graphs it drew before."""
    hand_written = {name: op for name, op in ops.items() if op.family != DERIVED_FAMILY}
    if not derived_share or len(hand_written) in (0, len(ops)) or draw(st.floats(0, 1)) < derived_share:
        return ops
    return {**hand_written, **({steer.op: ops[steer.op]} if steer else {})}


@st.composite
def graphs(draw, op_names: tuple[str, ...] | None = None, max_nodes: int = 8, regimes: tuple[Regime, ...] = REGIMES,
           focus: Callable[[], Focus | None] = lambda: None, derived_share: float = 0.0) -> Graph:
    """`focus()`: the Focus of the graph drawn now, or None for the plain mix (CaseGenerator.case). No
    `op_names`: the float ops (a comparison's bool fed to a float-only op is no graph a float campaign draws).
    `derived_share`: the share of graphs that may draw the derived ops of `op_names` (_graph_pool)."""
    ops = {name: get_op(name) for name in (op_names or float_op_names())}
    steer = focus()
    steer = steer if steer is not None and steer.op in ops else None
    ops = _graph_pool(draw, ops, steer, derived_share)
    allowed = {regime.name: regime for regime in regimes}
    regime = allowed[steer.regime] if steer and steer.regime in allowed else _draw_regime(draw, regimes)
    if regime.programs:
        from fuzzer.programs.generate import programs

        return draw(programs(op_names, regime.name))
    vmapped = _vmapped_rung(draw, regime, steer)
    # A vmapped rung's copies are stacked: each tensor gets its share of the regime's bound, and at
    # least VMAPPED_ELEMENTS (a 2^17 + 1 batch of 16-element tensors, 8 nodes: 3e7 elements stacked).
    sizes = replace(regime, max_elements=max(VMAPPED_ELEMENTS, regime.max_elements // vmapped), ladder=False) if vmapped else regime
    builder = _Builder(draw, ops, sizes, [], [], {})
    laddered = sorted(name for name, op in ops.items() if op.ladder)
    if steer:
        last = (sizes.ladder and _ladder_start(builder, steer)) or _focused_start(builder, steer)
    elif vmapped and laddered:  # a vmapped rung is a key of the laddered ops only: one starts the graph
        last = _focused_start(builder, Focus(draw(st.sampled_from(laddered))))
    else:
        pattern = draw(st.sampled_from(PATTERNS))
        big = regime.contraction_dims and _big_contraction(builder)
        last = ((big and (motifs.splice(builder, big) if regime.motifs else big)) or (sizes.ladder and _ladder_start(builder))
                or (regime.branch_points and _pointed_start(builder)) or (regime.motifs and motifs.start(builder))
                or _seed_pattern(builder, pattern))
        if len(builder.nodes) > max(1, max_nodes):  # --max-nodes is a hard maximum: a longer pattern keeps its start
            last = builder.keep_first(max(1, max_nodes))
    # A focused start may hold more than max_nodes nodes (its op on a big contraction, in a one-op graph for a compiler).
    target = draw(st.integers(min(max(1, len(builder.nodes)), max(1, max_nodes)), max(1, max_nodes)))
    attempts, op_names = 0, tuple(ops)
    while len(builder.nodes) < target and attempts < 4 * max_nodes:
        attempts += 1
        values = list(builder.shapes)
        # Mostly extend the newest value (chains), sometimes branch from an older one.
        value = last if draw(st.integers(0, 3)) else draw(st.sampled_from(values))
        candidates = _accepting(op_names, builder.shapes[value])
        if not candidates:
            continue
        added = builder.try_add(draw(st.sampled_from(candidates)), value)
        if added:
            last = added
    if not builder.nodes:
        # No op accepted the input: give an elementwise op a last chance.
        fallback = next((n for n in ("relu", "tanh", "sigmoid") if n in ops), None) or sorted(ops)[0]
        builder.try_add(fallback, last)
    # Still nothing (e.g. an input too large for every allowed op): reject this draw;
    # CaseGenerator draws again from the next bytes of the same seed.
    assume(builder.nodes)
    consumed = {ref for node in builder.nodes for ref in node.inputs}
    outputs = [node.name for node in builder.nodes if node.name not in consumed]
    return Graph(tuple(builder.inputs), tuple(builder.nodes), tuple(outputs), "" if regime.name == "small" else regime.name, vmapped)


@st.composite
def cases(draw, op_names: tuple[str, ...] | None = None, max_nodes: int = 8, regimes: tuple[Regime, ...] = REGIMES,
          focus: Callable[[], Focus | None] = lambda: None, derived_share: float = 0.0) -> Case:
    graph = draw(graphs(op_names, max_nodes, regimes, focus, derived_share))
    seed = draw(st.integers(0, 2**31 - 1))
    profiles, steer = regime_profiles(graph, seed), focus()
    if steer is not None and steer.profile and graph.nodes[0].op == steer.op:
        profiles.update(dict.fromkeys(set(graph.nodes[0].inputs) & set(profiles), steer.profile))
    case = materialize(graph, seed, profiles)
    return branch_points.place_in_case(case, seed, lambda name: get_op(name).branch_points) if get_regime(graph.regime).branch_points else case


class CaseGenerator:
    """Deterministic cases from integer seeds, through hypothesis's fuzz_one_input."""

    BUFFER_BYTES = 8192

    def __init__(self, op_names: list[str] | None = None, max_nodes: int = 8, regimes: tuple[Regime, ...] = REGIMES,
                 derived_share: float = 0.0):
        self.op_names = tuple(op_names) if op_names else None
        self.max_nodes = max_nodes
        self._drawn: list[Case] = []
        self._focus: Focus | None = None

        @settings(database=None, deadline=None, suppress_health_check=list(HealthCheck))
        @given(cases(self.op_names, max_nodes, regimes, lambda: self._focus, derived_share))
        def capture(case):
            self._drawn.append(case)

        self._capture = capture

    def case(self, seed: int, focus: Focus | None = None) -> Case:
        """The case of `seed`, steered by `focus` where given: (seed, focus) determine it. A focus
        no draw satisfies (a region this op set or size bound cannot reach) gives the plain case."""
        rng = random.Random(seed)
        for steer in dict.fromkeys((focus, None)):
            self._focus = steer
            for _ in range(20):
                self._drawn.clear()
                self._capture.hypothesis.fuzz_one_input(rng.randbytes(self.BUFFER_BYTES))
                if self._drawn:
                    return self._drawn[-1]
        raise InternalError(f"hypothesis could not draw a case from seed {seed}")


def focused_graphs(focus: Focus, regimes: tuple[Regime, ...], count: int, rng: random.Random) -> list[Graph]:
    """One-node graphs of `focus.op` drawn from `count` buffers of `rng`'s bytes (fewer where a draw
    is rejected): the census of fuzzer/drawing/regions.py."""
    drawn: list[Graph] = []

    @settings(database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(graphs((focus.op,), 1, regimes, lambda: focus))
    def capture(graph):
        drawn.append(graph)

    for _ in range(count):
        capture.hypothesis.fuzz_one_input(rng.randbytes(CaseGenerator.BUFFER_BYTES))
    return drawn


def generate_case(seed: int, op_names: list[str] | None = None, max_nodes: int = 8) -> Case:
    return CaseGenerator(op_names, max_nodes).case(seed)


# hypothesis releases whose seeded draws (fuzz_one_input) never give the top of a short integer
# range: st.integers(1, 2) is always 1, st.integers(-4, 3) never negative, so no stride or
# dilation 2 and no negative dim is drawn (tests/test_distribution.py fails on them).
WEAK_HYPOTHESIS = ("6.130", "6.170")  # from, up to but not including


def weak_hypothesis_warning(version: str | None = None) -> str | None:
    """One sentence for a campaign's start when the installed hypothesis (or `version`) is one of
    those; None otherwise. pyproject.toml requires a later one; this catches installs without it."""
    from packaging.version import Version

    if version is None:
        import hypothesis

        version = hypothesis.__version__
    low, high = WEAK_HYPOTHESIS
    if not Version(low) <= Version(version) < Version(high):
        return None
    return (f"hypothesis {version} never draws the top of a small integer range from seeded bytes (no stride 2, "
            f"no negative dim), so campaigns miss whole regions; install a newer one: pip install 'hypothesis>={high}'.")
