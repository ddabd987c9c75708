"""The graph IR: plain data, canonical JSON, a content hash, and validation.

A `Graph` names its inputs (with shapes), its nodes (op name, attributes, input
references) and its outputs. Parameters (weights) are not in the graph: their
shapes follow from each op's declaration and their values live in `Case.arrays`
under the name "<node>.<param>". A `Case` is a graph plus every array it needs
(float64, values representable in float32) and the seed they were drawn from.

Everything here is JSON-serializable data; nothing is ever evaluated or unpickled.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fuzzer.errors import ShapeError, UserError

SCHEMA_VERSION = 1


def _plain(value: Any) -> Any:
    """Attributes as JSON would give them back (tuples -> lists), so that round-trips are exact."""
    return json.loads(json.dumps(value, sort_keys=True))


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class Node:
    name: str
    op: str
    inputs: tuple[str, ...]
    attrs: dict = field(default_factory=dict, hash=False)

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "attrs", _plain(self.attrs))


@dataclass(frozen=True)
class Graph:
    inputs: tuple[TensorSpec, ...]
    nodes: tuple[Node, ...]
    outputs: tuple[str, ...]

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "outputs", tuple(self.outputs))

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def op_names(self) -> list[str]:
        return [node.op for node in self.nodes]

    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA_VERSION,
            "inputs": [{"name": t.name, "shape": list(t.shape)} for t in self.inputs],
            "nodes": [
                {"name": n.name, "op": n.op, "inputs": list(n.inputs), "attrs": n.attrs}
                for n in self.nodes
            ],
            "outputs": list(self.outputs),
        }

    def to_json(self) -> str:
        """Canonical JSON: sorted keys, no whitespace; equal graphs give equal strings."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def structure_key(self) -> str:
        """Hash of the graph alone (ops, attrs, shapes): compiled code can be reused across cases with the same key."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: Any) -> "Graph":
        data = migrate(data)
        try:
            inputs = [TensorSpec(str(t["name"]), _shape(t["shape"])) for t in data["inputs"]]
            nodes = [
                Node(str(n["name"]), str(n["op"]), tuple(str(i) for i in n["inputs"]), _attrs(n.get("attrs", {})))
                for n in data["nodes"]
            ]
            outputs = [str(o) for o in data["outputs"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise UserError(f"Malformed graph JSON: missing or wrong-typed field {exc}; see docs/graph-format.md.") from None
        return cls(tuple(inputs), tuple(nodes), tuple(outputs))

    @classmethod
    def from_json(cls, text: str) -> "Graph":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"Malformed graph JSON: {exc.msg} at line {exc.lineno} column {exc.colno}.") from None
        return cls.from_dict(data)


def _shape(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in value):
        raise ValueError(f"shape {value!r} (a list of positive integers)")
    return tuple(value)


def _attrs(value: Any) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"attrs {value!r} (an object)")
    return value


def migrate(data: Any) -> dict:
    """Bring a graph dict of any known schema version up to SCHEMA_VERSION.

    Version 1 is the first; future versions add a step here so old corpora keep loading.
    """
    if not isinstance(data, dict):
        raise UserError("Malformed graph JSON: expected an object with 'inputs', 'nodes' and 'outputs'.")
    version = data.get("schema", SCHEMA_VERSION)
    if not isinstance(version, int) or version > SCHEMA_VERSION or version < 1:
        raise UserError(
            f"Graph schema version {version!r} is not supported (this fuzzer reads 1..{SCHEMA_VERSION}); upgrade the fuzzer."
        )
    return data


def infer_shapes(graph: Graph) -> dict[str, tuple[int, ...]]:
    """Shapes of every value (inputs and nodes), checking every rule on the way.

    Raises UserError naming the node and the broken rule.
    """
    from fuzzer.ops import get_op

    shapes: dict[str, tuple[int, ...]] = {}
    for name in [spec.name for spec in graph.inputs] + [node.name for node in graph.nodes]:
        # Parameters are stored as "<node>.<param>": a dot in a name would make them ambiguous.
        if not name or "." in name:
            raise UserError(f"Name {name!r} is not allowed; input and node names must be non-empty and contain no '.'.")
    for spec in graph.inputs:
        if spec.name in shapes:
            raise UserError(f"Input name '{spec.name}' is used twice; give every input a unique name.")
        shapes[spec.name] = spec.shape
    for node in graph.nodes:
        if node.name in shapes:
            raise UserError(f"Node name '{node.name}' is used twice; give every node a unique name.")
        op = get_op(node.op)
        for ref in node.inputs:
            if ref not in shapes:
                raise UserError(
                    f"Node '{node.name}' ({node.op}) reads '{ref}', which is not an input or an earlier node."
                )
        if not op.arity_ok(len(node.inputs)):
            raise UserError(f"Node '{node.name}' ({node.op}) takes {op.arity_text()}, got {len(node.inputs)}.")
        try:
            shapes[node.name] = tuple(op.infer(node.attrs, [shapes[r] for r in node.inputs]))
        except (ShapeError, KeyError, TypeError, ValueError, IndexError) as exc:
            raise UserError(f"Node '{node.name}' ({node.op}): {exc}.") from None
    for out in graph.outputs:
        if out not in shapes:
            raise UserError(f"Output '{out}' is not an input or node of the graph.")
    if not graph.outputs:
        raise UserError("The graph has no outputs; list at least one node name in 'outputs'.")
    return shapes


def param_shapes(graph: Graph, shapes: dict[str, tuple[int, ...]] | None = None) -> dict[str, tuple[int, ...]]:
    """Every parameter the graph needs, as "<node>.<param>" -> shape."""
    from fuzzer.ops import get_op

    shapes = shapes or infer_shapes(graph)
    out = {}
    for node in graph.nodes:
        op = get_op(node.op)
        for pname, pshape in op.params(node.attrs, [shapes[r] for r in node.inputs]).items():
            out[f"{node.name}.{pname}"] = tuple(pshape)
    return out


@dataclass(frozen=True)
class Case:
    """A graph with concrete values for all its inputs and parameters."""

    graph: Graph
    arrays: dict = field(hash=False)  # name -> float64 ndarray
    seed: int = 0

    def validate(self) -> None:
        shapes = infer_shapes(self.graph)
        needed = {s.name: s.shape for s in self.graph.inputs}
        needed.update(param_shapes(self.graph, shapes))
        for name, shape in needed.items():
            if name not in self.arrays:
                raise UserError(f"Case is missing the array '{name}' (shape {list(shape)}).")
            if tuple(self.arrays[name].shape) != tuple(shape):
                raise UserError(
                    f"Array '{name}' has shape {list(self.arrays[name].shape)} but the graph needs {list(shape)}."
                )
        extra = set(self.arrays) - set(needed)
        if extra:
            raise UserError(f"Case carries arrays the graph does not use: {sorted(extra)}.")

    def content_hash(self) -> str:
        digest = hashlib.sha256(self.graph.to_json().encode())
        for name in sorted(self.arrays):
            digest.update(name.encode())
            digest.update(np.ascontiguousarray(self.arrays[name], dtype=np.float64).tobytes())
        return digest.hexdigest()[:16]
