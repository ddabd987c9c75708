"""Random graphs that are valid by construction, as hypothesis strategies.

A graph starts from one of the seed patterns (the shapes of the five bug classes)
or from a bare input, then grows by free composition: pick a value, pick an op
that accepts its shape, draw attributes valid for that shape, add extra operands
(an existing value of the right shape, or a new graph input). Dimensions come
from a small set (ops/_common.DIMS) so compiled code is reused across graphs.

`generate_case(seed, ...)` turns a seed into a Case deterministically by feeding
seeded bytes to hypothesis (`fuzz_one_input`), so `--seed` reproduces a campaign.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fuzzer.arrays import VALUE_PROFILES, materialize
from fuzzer.errors import InternalError, ShapeError
from fuzzer.ir import Case, Graph, Node, TensorSpec
from fuzzer.ops import OpDef, get_op, registry
from fuzzer.ops._common import DIMS, numel
from fuzzer.ops.matmul import TILE_EDGE_SIZES

MAX_ELEMENTS = 20_000
PATTERNS = ("conv-layout-norm", "rnn-sequence", "matmul-chain", "norm-dropout", "conv-bn", "free", "free")


@dataclass
class _Builder:
    """The graph under construction."""

    draw: object
    ops: dict[str, OpDef]
    inputs: list[TensorSpec]
    nodes: list[Node]
    shapes: dict[str, tuple[int, ...]]

    def new_input(self, shape) -> str:
        name = f"x{len(self.inputs)}"
        self.inputs.append(TensorSpec(name, tuple(shape)))
        self.shapes[name] = tuple(shape)
        return name

    def try_add(self, op_name: str, first: str, attrs: dict | None = None) -> str | None:
        """Add `op_name` on value `first` (attrs drawn if not given); None if it cannot apply."""
        op = self.ops.get(op_name)
        if op is None or not op.accepts(self.shapes[first]):
            return None
        draw = self.draw
        attrs = op.draw_attrs(draw, [self.shapes[first]]) if attrs is None else attrs
        operands = [first]
        if op.draw_operands is not None:
            for shape in op.draw_operands(draw, self.shapes[first], attrs):
                existing = [name for name, s in self.shapes.items() if s == tuple(shape) and name != first]
                if existing and draw(st.booleans()):
                    operands.append(draw(st.sampled_from(existing)))
                else:
                    operands.append(self.new_input(shape))
        try:
            shape = tuple(op.infer(attrs, [self.shapes[o] for o in operands]))
        except ShapeError as exc:
            raise InternalError(f"generator drew an invalid {op_name}: {exc} (attrs {attrs})") from exc
        if numel(shape) > MAX_ELEMENTS:
            return None
        name = f"n{len(self.nodes)}"
        self.nodes.append(Node(name, op_name, tuple(operands), attrs))
        self.shapes[name] = shape
        return name


def _dims(draw, count, low=1):
    return tuple(draw(st.sampled_from([d for d in DIMS if d >= low])) for _ in range(count))


def _seed_pattern(builder: _Builder, pattern: str) -> str:
    """Start the graph with the structure of a seed bug class; returns the last value."""
    draw = builder.draw
    if pattern == "conv-layout-norm":
        x = builder.new_input((draw(st.sampled_from([1, 2])), draw(st.sampled_from([1, 2, 3, 4])), *_dims(draw, 2, low=2)))
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
        lead = _dims(draw, draw(st.integers(1, 2)))
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
            x = builder.new_input((draw(st.sampled_from([1, 2])), draw(st.sampled_from([1, 2, 3])), *_dims(draw, 2, low=2)))
            last = builder.try_add("conv2d", x) or x
        else:
            x = builder.new_input((draw(st.sampled_from([2, 3, 4])), draw(st.sampled_from(DIMS))))
            last = builder.try_add("linear", x) or x
        if draw(st.booleans()):
            last = builder.try_add(draw(st.sampled_from(["relu", "tanh"])), last) or last
        return builder.try_add("batch_norm", last, {"training": False, "eps": 1e-5}) or last
    if pattern == "norm-dropout":
        x = builder.new_input((draw(st.sampled_from([1, 2, 4])), *_dims(draw, draw(st.integers(1, 3)))))
        last = builder.try_add("batch_norm", x) or x
        return builder.try_add("dropout", last) or last
    rank = draw(st.integers(1, 4))
    return builder.new_input(_dims(draw, rank))


@st.composite
def graphs(draw, op_names: tuple[str, ...] | None = None, max_nodes: int = 8) -> Graph:
    ops = {name: get_op(name) for name in (op_names or sorted(registry()))}
    builder = _Builder(draw, ops, [], [], {})
    pattern = draw(st.sampled_from(PATTERNS))
    last = _seed_pattern(builder, pattern)
    target = draw(st.integers(max(1, len(builder.nodes)), max(1, max_nodes)))
    attempts = 0
    while len(builder.nodes) < target and attempts < 4 * max_nodes:
        attempts += 1
        values = list(builder.shapes)
        # Mostly extend the newest value (chains), sometimes branch from an older one.
        value = last if draw(st.integers(0, 3)) else draw(st.sampled_from(values))
        candidates = sorted(name for name, op in ops.items() if op.accepts(builder.shapes[value]))
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
    return Graph(tuple(builder.inputs), tuple(builder.nodes), tuple(outputs))


@st.composite
def cases(draw, op_names: tuple[str, ...] | None = None, max_nodes: int = 8) -> Case:
    graph = draw(graphs(op_names, max_nodes))
    profiles = {spec.name: draw(st.sampled_from(VALUE_PROFILES)) for spec in graph.inputs}
    seed = draw(st.integers(0, 2**31 - 1))
    return materialize(graph, seed, profiles)


class CaseGenerator:
    """Deterministic cases from integer seeds, through hypothesis's fuzz_one_input."""

    BUFFER_BYTES = 8192

    def __init__(self, op_names: list[str] | None = None, max_nodes: int = 8):
        self.op_names = tuple(op_names) if op_names else None
        self.max_nodes = max_nodes
        self._drawn: list[Case] = []

        @settings(database=None, deadline=None, suppress_health_check=list(HealthCheck))
        @given(cases(self.op_names, max_nodes))
        def capture(case):
            self._drawn.append(case)

        self._capture = capture

    def case(self, seed: int) -> Case:
        rng = random.Random(seed)
        for _ in range(20):
            self._drawn.clear()
            self._capture.hypothesis.fuzz_one_input(rng.randbytes(self.BUFFER_BYTES))
            if self._drawn:
                return self._drawn[-1]
        raise InternalError(f"hypothesis could not draw a case from seed {seed}")


def generate_case(seed: int, op_names: list[str] | None = None, max_nodes: int = 8) -> Case:
    return CaseGenerator(op_names, max_nodes).case(seed)
