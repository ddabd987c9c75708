"""Shrinking a finding to a minimal reproducer, on the IR (so imported cases can be re-shrunk).

The shrinker is an ordered list of small, named, deterministic passes, in the
style of Hypothesis's shrinker. Each pass proposes candidates that are simpler
by construction, trivial ones first; a candidate is accepted only if it is a
valid graph AND `still_fails(candidate)` (same verdict and same signature: the
shrinker may not slide into another, easier bug). Passes are not looped to a
fixed point; the whole list is repeated while a round made progress, within a
time budget. "Simpler" means, in this order: fewer nodes, fewer steps and in-place
writes (a program: fuzzer/programs/shrink.py), fewer elements in inputs and parameters, fewer input dims (no leading size-1 ones: `pass_drop_leading_ones`),
contiguous inputs, simpler attributes (stride 1, no padding,
no bias, ...), simpler values (zeros, ones, minus ones, small integers: `value_cost`).
Values are simplified entry by entry too, in halving blocks, so a bug that one value
shows ends as that value among zeros (`pass_simplify_entries`), which the input-dims
pass then packs into fewer elements.

Arrays follow the graph: when shapes shrink, existing arrays are sliced (keeping
the values that trigger the bug); arrays that are new or grew are drawn from the
case's seed.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from fuzzer.arrays import param_values
from fuzzer.backends.numpy_ref import NumpyReference
from fuzzer.drawing.layouts import CONTIGUOUS, conform_values, layouts_for
from fuzzer.errors import IllTyped, UserError
from fuzzer.ir import Case, Graph, Node, TensorSpec, infer_shapes, param_shapes, split_arrays
from fuzzer.ops import get_op, registry
from fuzzer.oracle.complex import evaluate_complex
from fuzzer.oracle.dtypes import round_to_dtype
from fuzzer.programs.shrink import (constant_number_graphs, out_of_place_graphs, pass_fewer_steps, plain_number_graphs,
                                    resizing, unresized_graphs)
from fuzzer.programs.statements import WRITES

Predicate = Callable[[Case], bool]

# Attribute simplifications, tried one at a time; data, not per-op code.
# The simplest value of each attribute; for a list-valued attribute (kernel_size of a conv1d,
# conv2d or conv3d) the value repeated to the list's length.
SIMPLER_ATTRS = {
    "num_layers": 1,
    "kernel_size": 1,
    "stride": 1,
    "dilation": 1,
    "padding": 0,
    "output_padding": 0,
    "groups": 1,
    "bias": False,
    "affine": False,
    "initial_state": False,
    "batch_first": False,
    "keepdim": False,
    "approximate": "none",
    "ceil_mode": False,
    "count_include_pad": True,
    "divisor_override": None,
    "align_corners": False,
    "causal": False,
    "mask": False,
}


def simpler_value(attr: str, current):
    simple = SIMPLER_ATTRS[attr]
    return [simple] * len(current) if isinstance(current, list) and not isinstance(simple, list) else simple
# Integer attributes that size things: tried at 1, 2, half, minus one.
SIZE_ATTRS = ("hidden_size", "out_features", "out_channels", "num_layers")


@dataclass
class PassStats:
    tried: int = 0
    accepted: int = 0


@dataclass
class ShrinkResult:
    case: Case
    original_nodes: int
    seconds: float
    calls: int
    stats: dict[str, PassStats] = field(default_factory=dict)

    def log(self) -> dict:
        return {
            "original_nodes": self.original_nodes,
            "final_nodes": len(self.case.graph.nodes),
            "final_elements": case_elements(self.case),
            "seconds": round(self.seconds, 2),
            "calls": self.calls,
            "passes": {name: [s.tried, s.accepted] for name, s in self.stats.items()},
        }


def case_elements(case: Case) -> int:
    return sum(int(a.size) for a in case.arrays.values())


def complexity(case: Case) -> tuple:
    """The documented order: nodes, then a program's steps, resize and writes, then elements, then input dims, then
    attribute size, then values."""
    attr_size = sum(len(str(node.attrs)) for node in case.graph.nodes)
    dims = sum(len(spec.shape) for spec in case.graph.inputs)
    writes = sum(node.op in WRITES for node in case.graph.nodes)
    return (len(case.graph.nodes), case.graph.steps, resizing(case.graph), writes, case_elements(case), dims, attr_size,
            sum(value_cost(a) for a in case.arrays.values()))


def entry_costs(array: np.ndarray) -> np.ndarray:
    """Each entry's simplicity: 0 for zero, 1 for minus zero and one, 2 for minus one, 3 for another
    integer up to 3 in magnitude, 4 for anything else (nan and inf included); a complex entry's, its parts' sum."""
    if np.iscomplexobj(array):
        return entry_costs(np.real(array)) + entry_costs(np.imag(array))
    array = np.asarray(array, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        small = np.isfinite(array) & (np.round(array) == array) & (np.abs(array) <= 3)
    zero = array == 0
    return np.select([zero & ~np.signbit(array), zero | (array == 1), array == -1, small], [0, 1, 2, 3], 4)


def value_cost(array: np.ndarray) -> int:
    return int(entry_costs(array).sum())


# -- rebuilding a case after a graph change ----------------------------------------------


def prune(graph: Graph) -> Graph:
    """Drop nodes and inputs that no output depends on; a program's writes stay (what they write is its result)."""
    needed = graph.ancestors(graph.outputs + tuple(node.name for node in graph.nodes if node.op in WRITES))
    nodes = tuple(n for n in graph.nodes if n.name in needed)
    inputs = tuple(t for t in graph.inputs if t.name in needed)
    resized = graph.resized
    if resized is not None:  # the inputs it resizes that are left, or none
        kept = tuple(name for name in resized.inputs if name in needed)
        resized = replace(resized, inputs=kept) if kept else None
    return replace(graph, inputs=inputs, nodes=nodes, resized=resized)


def _fit(array: np.ndarray | None, shape: tuple[int, ...], fresh: Callable[[], np.ndarray]) -> np.ndarray:
    if array is not None and array.shape == shape:
        return array
    if array is not None and array.ndim == len(shape) and all(a >= s for a, s in zip(array.shape, shape)):
        return np.ascontiguousarray(array[tuple(slice(0, s) for s in shape)])
    return fresh()


def rebuild(case: Case, graph: Graph) -> Case | None:
    """A case for `graph` reusing `case`'s arrays where they fit; None if the graph is invalid."""
    graph = prune(graph)
    try:
        shapes = infer_shapes(graph)
        needed = {t.name: t.shape for t in graph.inputs}
        needed.update(param_shapes(graph, shapes))
    except UserError:
        return None
    arrays = {}
    for name, shape in needed.items():
        rng = np.random.default_rng([case.seed, zlib.crc32(name.encode())])
        arrays[name] = _fit(case.arrays.get(name), tuple(shape), lambda: param_values(rng, name, tuple(shape)))
    for spec in graph.inputs:  # simpler values must still be ones the input's layout can hold
        arrays[spec.name] = conform_values(arrays[spec.name], spec.layout)
    return Case(graph, arrays, case.seed)


def _replace_node(graph: Graph, index: int, node: Node | None, rename: dict[str, str] | None = None) -> Graph:
    """Replace (or with None, delete) node `index`, renaming references per `rename`."""
    rename = rename or {}
    nodes = []
    for i, current in enumerate(graph.nodes):
        if i == index:
            if node is not None:
                nodes.append(node)
            continue
        nodes.append(replace(current, inputs=tuple(rename.get(r, r) for r in current.inputs)))
    outputs = tuple(dict.fromkeys(rename.get(o, o) for o in graph.outputs))
    return replace(graph, nodes=tuple(nodes), outputs=outputs)


# -- the passes: each yields candidate cases, simplest first -----------------------------


def pass_single_output(case: Case, culprit: str):
    """Keep one output, preferring the first node whose op is the culprit."""
    graph = case.graph
    culprit_op = culprit.split("@")[0]
    targets = [n.name for n in graph.nodes if n.op == culprit_op] + list(graph.outputs)
    for name in dict.fromkeys(targets):
        if (name,) != graph.outputs:
            yield rebuild(case, replace(graph, outputs=(name,)))


def pass_cut_inputs(case: Case, culprit: str):
    """Replace a node by a new graph input holding its reference value: removes everything upstream."""
    graph = case.graph
    if graph.steps:  # a program's values change from step to step: no one value stands for a node
        return
    if any(array.dtype.kind in "biu" for array in map(np.asarray, case.arrays.values())):
        return  # an integer node's value depends on the backend's width (int32 wraps where int64 does not)
    inputs, params = split_arrays(case)
    complex_case = any(np.iscomplexobj(array) for array in case.arrays.values())  # fuzzer/complex_dtypes.py
    try:
        env = evaluate_complex(case, "complex128") if complex_case else NumpyReference(dtype="float64").execute_all(graph, inputs, params)
    except IllTyped:
        return
    for index, node in enumerate(graph.nodes):
        if node.name in graph.outputs:
            continue
        name = f"x{len(graph.inputs)}_{node.name}"
        cut = _replace_node(graph, index, None, {node.name: name})
        cut = replace(cut, inputs=cut.inputs + (TensorSpec(name, tuple(env[node.name].shape)),))
        candidate = rebuild(case, cut)
        if candidate is not None:
            # Non-finite values are kept: a nan or inf an op made is often what the next op mishandles.
            candidate.arrays[name] = round_to_dtype(env[node.name], "complex64" if complex_case else "float32")
            yield candidate


def pass_bypass_nodes(case: Case, culprit: str):
    """Delete a node and feed its first input to its consumers (valid only where shapes allow)."""
    graph = case.graph
    for index in reversed(range(len(graph.nodes))):
        node = graph.nodes[index]
        yield rebuild(case, _replace_node(graph, index, None, {node.name: node.inputs[0]}))


def _smaller(value: int) -> list[int]:
    """1, 2, half, then closer and closer to `value` (v - v/4, v - v/8, ..., v - 1): a bug that
    needs at least n elements is reached in about log(value) accepted steps, not value - n."""
    steps = {value - value // 2**k for k in range(2, max(2, value.bit_length()) + 1)}
    return sorted({v for v in (1, 2, value // 2, value - 1, *steps) if 1 <= v < value})


def _repair_attrs(graph: Graph) -> Graph:
    """Re-derive attributes that restate input shapes, where the op declares how
    (`OpDef.repair_attrs`: layer_norm's normalized_shape, reshape's target)."""
    shapes = {t.name: t.shape for t in graph.inputs}
    ops = registry()
    nodes = []
    for node in graph.nodes:
        in_shapes = [shapes.get(r) for r in node.inputs]
        attrs = dict(node.attrs)
        repair = ops[node.op].repair_attrs if node.op in ops else None
        if None not in in_shapes and repair is not None:
            attrs = repair(attrs, in_shapes)
        node = replace(node, attrs=attrs)
        nodes.append(node)
        try:
            shapes[node.name] = tuple(get_op(node.op).infer(node.attrs, in_shapes)) if None not in in_shapes else None
        except Exception:  # noqa: BLE001 - an invalid candidate; infer_shapes will reject it
            shapes[node.name] = None
    return replace(graph, nodes=tuple(nodes))


def pass_shrink_input_dims(case: Case, culprit: str):
    """Every dim of every graph input to smaller sizes (`_smaller`: sequence length, batch,
    channels, ...), keeping the first entries along it, then the last ones (the value that
    triggers a bug may sit at the end)."""
    graph = case.graph
    for i, spec in enumerate(graph.inputs):
        for d, size in enumerate(spec.shape):
            for smaller in _smaller(size):
                shape = spec.shape[:d] + (smaller,) + spec.shape[d + 1 :]
                inputs = graph.inputs[:i] + (replace(spec, shape=shape),) + graph.inputs[i + 1 :]
                candidate = rebuild(case, _repair_attrs(replace(graph, inputs=inputs)))
                yield candidate
                if candidate is not None and spec.name in case.arrays:
                    for kept in _kept_slices(case.arrays[spec.name], d, smaller):
                        values = np.take(case.arrays[spec.name], kept, axis=d)
                        yield replace(candidate, arrays={**candidate.arrays, spec.name: conform_values(values, spec.layout)})


def pass_drop_leading_ones(case: Case, culprit: str):
    """Every graph input without its leading size-1 dims ((1, 1, 1, 1, 2) -> (2,)), then without
    one of them, its values kept: a reader of a rank-5 shape holding two numbers looks for a reason
    the rank matters. Where an op needs the rank (a conv's batch dim), the graph or the verdict says so."""
    graph = case.graph
    for i, spec in enumerate(graph.inputs):
        leading = next((d for d, size in enumerate(spec.shape) if size != 1), len(spec.shape) - 1)
        for drop in dict.fromkeys((leading, 1)) if leading else ():
            shape = spec.shape[drop:]
            layout = spec.layout if spec.layout in layouts_for(shape) else CONTIGUOUS
            inputs = graph.inputs[:i] + (replace(spec, shape=shape, layout=layout),) + graph.inputs[i + 1 :]
            candidate = rebuild(case, _repair_attrs(replace(graph, inputs=inputs)))
            if candidate is not None and spec.name in case.arrays:
                values = conform_values(case.arrays[spec.name].reshape(shape), layout)
                candidate = replace(candidate, arrays={**candidate.arrays, spec.name: values})
            yield candidate


def _kept_slices(array: np.ndarray, dim: int, count: int) -> list[list[int]]:
    """Besides the first `count` slices along `dim` (what `rebuild` keeps): the last ones, and the
    ones holding a non-zero value first (after `pass_simplify_entries` those are the trigger)."""
    size = array.shape[dim]
    tail = list(range(size - count, size))
    others = tuple(axis for axis in range(array.ndim) if axis != dim)
    with np.errstate(invalid="ignore"):
        holds_value = np.any(array != 0, axis=others) if others else array != 0
    packed = sorted(np.argsort(~holds_value, kind="stable")[:count].tolist())
    return [tail] + ([packed] if packed not in (tail, list(range(count))) else [])


def pass_shrink_size_attrs(case: Case, culprit: str):
    """hidden_size, out_features, out_channels, num_layers to 1, 2, half, minus one."""
    graph = case.graph
    for index, node in enumerate(graph.nodes):
        for attr in SIZE_ATTRS:
            if attr not in node.attrs:
                continue
            for smaller in _smaller(node.attrs[attr]):
                if attr == "out_channels" and smaller % node.attrs.get("groups", 1):
                    continue
                changed = replace(node, attrs={**node.attrs, attr: smaller})
                yield rebuild(case, _repair_attrs(_replace_node(graph, index, changed)))


def pass_contiguous_inputs(case: Case, culprit: str):
    """An input stored in another memory layout (the layout regime) made contiguous."""
    graph = case.graph
    for index, spec in enumerate(graph.inputs):
        if spec.layout != CONTIGUOUS:
            inputs = graph.inputs[:index] + (replace(spec, layout=CONTIGUOUS),) + graph.inputs[index + 1 :]
            yield rebuild(case, replace(graph, inputs=inputs))


def pass_simplify_attrs(case: Case, culprit: str):
    """stride 1, no padding, no bias, groups 1, ... one attribute at a time."""
    graph = case.graph
    for index, node in enumerate(graph.nodes):
        for attr in SIMPLER_ATTRS:
            if attr in node.attrs and node.attrs[attr] != simpler_value(attr, node.attrs[attr]):
                changed = replace(node, attrs={**node.attrs, attr: simpler_value(attr, node.attrs[attr])})
                yield rebuild(case, _repair_attrs(_replace_node(graph, index, changed)))


def value_rank(array: np.ndarray) -> int:
    """Simplicity of an array's values: zeros < ones < one non-zero < small integers < anything."""
    if not np.any(array):
        return 0
    if np.all(array == 1):
        return 1
    if np.count_nonzero(array) == 1 and np.all((array == 0) | (array == 1)):
        return 2
    if np.all(np.round(array) == array) and np.max(np.abs(array)) <= 3:
        return 3
    return 4


def pass_simplify_values(case: Case, culprit: str):
    """Each array to zeros, ones, a single one, or rounded small integers, if that is simpler."""
    for name in sorted(case.arrays):
        value = case.arrays[name]
        single = np.zeros_like(value)
        single.flat[0] = 1.0
        for simpler in (np.zeros_like(value), np.ones_like(value), single, np.clip(np.round(value), -3, 3)):
            if value_rank(simpler) < value_rank(value):
                yield replace(case, arrays={**case.arrays, name: simpler})


def pass_simplify_entries(case: Case, culprit: str):
    """Entries to 0, then 1, then -1 (each only where that is simpler: `entry_costs`), an array's
    half at a time, then quarters, ... then one entry at a time, graph inputs first: the values that
    trigger the bug stay, the others become plain."""
    names = [spec.name for spec in case.graph.inputs] + sorted(set(case.arrays) - {s.name for s in case.graph.inputs})
    layouts = {spec.name: spec.layout for spec in case.graph.inputs}
    for name in names:
        flat = np.asarray(case.arrays[name]).reshape(-1)  # an integer case's int64 stays exact
        for target in (0.0, 1.0, -1.0):
            simpler = entry_costs(flat) > entry_costs(np.array(target))
            block = flat.size
            while block >= 1:
                for start in range(0, flat.size, block):
                    if simpler[start : start + block].any():
                        values = flat.copy()
                        values[start : start + block][simpler[start : start + block]] = target
                        values = values.reshape(case.arrays[name].shape)
                        if name in layouts:
                            values = conform_values(values, layouts[name])
                        yield replace(case, arrays={**case.arrays, name: values})
                block = block // 2 if block > 1 else 0


def pass_out_of_place(case: Case, culprit: str):
    """A program's in-place writes, each replaced by its out-of-place form (program_shrink.out_of_place_graphs)."""
    for graph in out_of_place_graphs(case.graph):
        yield rebuild(case, graph)


def pass_plain_numbers(case: Case, culprit: str):
    """A program's writes, each taking the number it reads without its Python arithmetic (program_shrink)."""
    for graph in plain_number_graphs(case.graph):
        yield rebuild(case, graph)


def pass_whole_inputs(case: Case, culprit: str):
    """A resized program's inputs whole at every step, or its unbacked size a backed one (program_shrink)."""
    for graph in unresized_graphs(case.graph):
        yield rebuild(case, graph)


def pass_constant_numbers(case: Case, culprit: str):
    """A program's writes, each taking a constant for the number it reads at run time (program_shrink)."""
    for graph in constant_number_graphs(case.graph):
        yield rebuild(case, graph)


PASSES = [
    ("fewer_steps", pass_fewer_steps),
    ("whole_inputs", pass_whole_inputs),
    ("single_output", pass_single_output),
    ("cut_inputs", pass_cut_inputs),
    ("bypass_nodes", pass_bypass_nodes),
    ("out_of_place", pass_out_of_place),
    ("plain_numbers", pass_plain_numbers),
    ("constant_numbers", pass_constant_numbers),
    ("shrink_size_attrs", pass_shrink_size_attrs),
    ("shrink_input_dims", pass_shrink_input_dims),
    ("drop_leading_ones", pass_drop_leading_ones),
    ("contiguous_inputs", pass_contiguous_inputs),
    ("simplify_attrs", pass_simplify_attrs),
    ("simplify_values", pass_simplify_values),
    ("simplify_entries", pass_simplify_entries),
]


def shrink_case(
    case: Case,
    still_fails: Predicate,
    culprit: str = "",
    time_budget: float = 60.0,
    progress: Callable[[str, Case], None] | None = None,
    max_rounds: int = 4,
) -> ShrinkResult:
    """The smallest case found within `time_budget` seconds for which `still_fails` holds.

    `case` itself must fail; the result always does (it is `case` if nothing smaller fails).
    """
    start = time.monotonic()
    result = ShrinkResult(case, len(case.graph.nodes), 0.0, 0, {name: PassStats() for name, _ in PASSES})
    current = case
    for _ in range(max_rounds):
        before = complexity(current)
        for name, make_candidates in PASSES:
            stats = result.stats[name]
            improved = True
            # Restart a pass's candidate list after each success (its candidates were built
            # from the old case), but never loop it once it yields nothing new.
            while improved and time.monotonic() - start < time_budget:
                improved = False
                for candidate in make_candidates(current, culprit):
                    if time.monotonic() - start >= time_budget:
                        break
                    if candidate is None:
                        continue
                    if complexity(candidate) >= complexity(current):
                        continue
                    stats.tried += 1
                    result.calls += 1
                    if still_fails(candidate):
                        stats.accepted += 1
                        current = candidate
                        improved = True
                        if progress:
                            progress(name, current)
                        break
        if complexity(current) >= before or time.monotonic() - start >= time_budget:
            break
    result.case = current
    result.seconds = time.monotonic() - start
    return result
