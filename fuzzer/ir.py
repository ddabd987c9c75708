"""The graph IR: plain data, canonical JSON, a content hash, and validation.

A `Graph` names its inputs (with shapes), its nodes (op name, attributes, input
references) and its outputs. Parameters (weights) are not in the graph: their
shapes follow from each op's declaration and their values live in `Case.arrays`
under the name "<node>.<param>". A `Case` is a graph plus every array it needs
(float64, values representable in float32) and the seed they were drawn from.

Everything here is JSON-serializable data; nothing is ever evaluated or unpickled.
Cases come from files other people wrote, so loading checks that every name is an
identifier (names become file names in case folders and variables in reproducers),
that JSON nesting is shallow, and that no tensor the shape rules imply is larger than
the resource bounds below before a single array is allocated.
"""

from __future__ import annotations

import hashlib
import json
import keyword
import os
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from fuzzer import jsonform
from fuzzer.errors import ShapeError, UserError

SCHEMA_VERSION = 1

# Input, node and output names: they become `.npy` file names and Python variables.
NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
MAX_JSON_DEPTH = 64  # graphs nest 4 deep (attrs hold lists of ints); anything deeper is not ours

# Resource bounds, checked from the shape rules before anything is allocated: every input, node output,
# parameter and the big temporaries an op's reference makes (OpDef.intermediates). Well above what the
# generator draws (up to ~1e7 elements a tensor on CUDA); a float64 tensor at the bound is 400 MB.
# `fuzz --max-tensor-elements N --max-case-elements N` (or these variables) raise them.
TENSOR_ELEMENTS_VARIABLE = "FUZZ_MAX_TENSOR_ELEMENTS"
CASE_ELEMENTS_VARIABLE = "FUZZ_MAX_CASE_ELEMENTS"
DEFAULT_MAX_TENSOR_ELEMENTS = 50_000_000
DEFAULT_MAX_CASE_ELEMENTS = 200_000_000  # every value and parameter of a case together
MAX_VMAPPED = 2**17 + 1  # the ladder's top rung (fuzzer/drawing/ladder.py)


def _plain(value: Any) -> Any:
    """Attributes as JSON would give them back (tuples -> lists), so that round-trips are exact."""
    return json.loads(json.dumps(value, sort_keys=True))


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    layout: str = "contiguous"  # how torch backends store this input (fuzzer/drawing/layouts.py)


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
class Resize:
    """A program whose inputs change size between steps (fuzzer/programs/program.py): step k runs on the leading
    `rows[k]` rows (dim 0) of each of `inputs`, a view of that state, with torch's dim 0 marked `mark` ("dynamic":
    torch._dynamo.mark_dynamic, "unbacked": mark_unbacked) before each call, so that guards and recompiles are exercised."""

    inputs: tuple[str, ...]
    rows: tuple[int, ...]
    mark: str

    def to_dict(self) -> dict:
        return {"inputs": list(self.inputs), "rows": list(self.rows), "mark": self.mark}

    @classmethod
    def from_dict(cls, data: Any) -> "Resize":
        from fuzzer.programs.program import MARKS, MAX_STEPS

        if not (isinstance(data, dict) and set(data) == {"inputs", "rows", "mark"} and isinstance(data["inputs"], list)
                and all(isinstance(name, str) for name in data["inputs"]) and isinstance(data["rows"], list)
                and len(data["rows"]) <= MAX_STEPS and all(type(rows) is int for rows in data["rows"])
                and data["mark"] in MARKS):
            raise UserError(f"Malformed graph JSON: 'resized' must be {{\"inputs\": [names], \"rows\": [a whole number a "
                            f"step], \"mark\": one of {', '.join(MARKS)}}}, not {str(data)[:80]!r}.")
        return cls(tuple(data["inputs"]), tuple(data["rows"]), data["mark"])


@dataclass(frozen=True)
class Graph:
    inputs: tuple[TensorSpec, ...]
    nodes: tuple[Node, ...]
    outputs: tuple[str, ...]
    regime: str = ""  # the regime the generator drew this graph in (fuzzer/drawing/regimes.py); "" = small
    vmapped: int = 0  # the rung of the ladder jax-vmap batches this graph over (fuzzer/drawing/ladder.py); 0: its default
    steps: int = 0  # a program's calls (fuzzer/programs/program.py): its nodes may write in place and take views; 0: a graph
    resized: Resize | None = None  # a program's inputs that change size between its steps (Resize)

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

    def ancestors(self, names) -> set[str]:
        """The names of the values `names` depend on (nodes and graph inputs), themselves included.
        One backward pass: a node comes after the values it reads."""
        needed = set(names)
        for node in reversed(self.nodes):
            if node.name in needed:
                needed.update(node.inputs)
        return needed

    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA_VERSION,
            "inputs": [_input_dict(t) for t in self.inputs],
            "nodes": [
                {"name": n.name, "op": n.op, "inputs": list(n.inputs), "attrs": n.attrs}
                for n in self.nodes
            ],
            "outputs": list(self.outputs),
            # Written only when set, so graphs drawn before regimes keep their content hashes.
            **({"regime": self.regime} if self.regime else {}),
            **({"vmapped": self.vmapped} if self.vmapped else {}),
            **({"steps": self.steps} if self.steps else {}),
            **({"resized": self.resized.to_dict()} if self.resized else {}),
        }

    def at_rows(self, rows: int) -> "Graph":
        """The program as one step of a resized one runs it (Resize): its resized inputs cut to `rows` rows."""
        resized = set(self.resized.inputs)
        inputs = tuple(replace(spec, shape=(rows, *spec.shape[1:])) if spec.name in resized else spec for spec in self.inputs)
        return replace(self, inputs=inputs, resized=None)

    def to_json(self) -> str:
        """Canonical JSON: sorted keys, no whitespace; equal graphs give equal strings."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def structure_key(self) -> str:
        """Hash of the graph alone (ops, attrs, shapes, layouts; not the regime label): compiled code can be
        reused across cases with the same key, whatever regime their values were drawn from."""
        structure = {key: value for key, value in self.to_dict().items() if key != "regime"}
        return hashlib.sha256(json.dumps(structure, sort_keys=True).encode()).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: Any) -> "Graph":
        data = migrate(data)
        check_json_depth(data, "graph JSON")
        try:
            inputs = [TensorSpec(str(t["name"]), _shape(t["shape"]), _layout(t.get("layout", "contiguous"))) for t in data["inputs"]]
            nodes = [
                Node(str(n["name"]), str(n["op"]), tuple(str(i) for i in n["inputs"]), _attrs(n.get("attrs", {})))
                for n in data["nodes"]
            ]
            outputs = [str(o) for o in data["outputs"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise UserError(f"Malformed graph JSON: missing or wrong-typed field {exc}; see docs/graph-format.md.") from None
        for name in [t.name for t in inputs] + [n.name for n in nodes]:
            check_name(name)
        regime = data.get("regime", "")
        if not isinstance(regime, str) or (regime and not NAME_PATTERN.fullmatch(regime.replace("-", "_").replace("+", "_"))):
            raise UserError(f"Malformed graph JSON: 'regime' must be a short name like 'large-op' or 'large-op+layout', "
                            f"not {regime!r}.")
        vmapped = data.get("vmapped", 0)
        if type(vmapped) is not int or not 0 <= vmapped <= MAX_VMAPPED:
            raise UserError(f"Malformed graph JSON: 'vmapped' must be a whole number from 0 to {MAX_VMAPPED}, not {vmapped!r}.")
        from fuzzer.programs.program import MAX_STEPS

        steps = data.get("steps", 0)
        if type(steps) is not int or not 0 <= steps <= MAX_STEPS:
            raise UserError(f"Malformed graph JSON: 'steps' must be a whole number from 0 (a graph) to {MAX_STEPS}, "
                            f"not {str(steps)[:40]!r}.")
        resized = Resize.from_dict(data["resized"]) if "resized" in data else None
        return cls(tuple(inputs), tuple(nodes), tuple(outputs), regime, vmapped, steps, resized)

    @classmethod
    def from_json(cls, text: str) -> "Graph":
        return cls.from_dict(parse_json(text, "graph JSON"))


def check_name(name: str) -> None:
    """Names from a case are identifiers: never a path, never code, never one of Python's own
    (a reproducer assigning `__builtins__` or `__name__` breaks)."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name) or (name.startswith("__") and name.endswith("__")):
        raise UserError(f"Name {name!r} is not allowed; input and node names must be identifiers of at most 64 "
                        "characters (letters, digits, underscores, not starting with a digit, not __like_this__).")


def parse_json(text: str | bytes, what: str) -> Any:
    """json.loads for text from outside, nesting bounded; UserError naming `what` on any problem."""
    try:
        data = json.loads(text, object_pairs_hook=jsonform.unique_keys)
    except json.JSONDecodeError as exc:
        raise UserError(f"Malformed {what}: {exc.msg} at line {exc.lineno} column {exc.colno}.") from None
    except jsonform.DuplicateKey as exc:
        raise UserError(f"Ambiguous {what}: {exc}; write each key once.") from None
    except RecursionError:
        raise UserError(f"The {what} nests deeper than {MAX_JSON_DEPTH} levels; refusing to load it.") from None
    except ValueError:  # Python's json refuses an integer of more than 4300 digits
        raise UserError(f"The {what} holds a number too long to read; refusing to load it.") from None
    check_json_depth(data, what)
    return data


def check_json_depth(data: Any, what: str) -> None:
    """Refuse JSON nested deeper than MAX_JSON_DEPTH, or holding a lone surrogate ("\\ud800" is valid
    JSON but no text: sqlite and every output stream refuse to write it). Walked without recursion."""
    pending = [(data, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, str) and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise UserError(f"The {what} holds the string {value[:80]!r}, with a lone surrogate that is not text; "
                                "refusing to load it.") from None
        if isinstance(value, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                raise UserError(f"The {what} nests deeper than {MAX_JSON_DEPTH} levels; refusing to load it.")
            children = [*value, *value.values()] if isinstance(value, dict) else value
            pending.extend((child, depth + 1) for child in children)


def element_limits() -> tuple[int, int]:
    """(largest tensor, largest case) in elements: the defaults or the variables `fuzz` sets from its options."""
    limits = []
    for variable, default in ((TENSOR_ELEMENTS_VARIABLE, DEFAULT_MAX_TENSOR_ELEMENTS),
                              (CASE_ELEMENTS_VARIABLE, DEFAULT_MAX_CASE_ELEMENTS)):
        text = os.environ.get(variable, "")
        try:
            limits.append(int(float(text)) if text else default)
        except ValueError:
            raise UserError(f"${variable} is {text!r}; set it to a number of elements such as 5e7.") from None
    return limits[0], limits[1]


def _input_dict(spec: TensorSpec) -> dict:
    data = {"name": spec.name, "shape": list(spec.shape)}
    if spec.layout != "contiguous":
        data["layout"] = spec.layout
    return data


def _layout(value: Any) -> str:
    from fuzzer.drawing.layouts import LAYOUTS

    if value not in LAYOUTS:
        raise ValueError(f"layout {value!r} (one of {', '.join(LAYOUTS)})")
    return value


def _shape(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in value):
        raise ValueError(f"shape {value!r} (a list of positive integers)")
    return tuple(value)


def _attrs(value: Any) -> dict:
    """An op's attributes: their names are identifiers, since reproducers write them as keywords."""
    if not isinstance(value, dict):
        raise ValueError(f"attrs {value!r} (an object)")
    for key in value:
        if not isinstance(key, str) or not NAME_PATTERN.fullmatch(key) or keyword.iskeyword(key):
            raise ValueError(f"attribute name {key!r} (an identifier)")
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
    budget = _ElementBudget()
    for name in [spec.name for spec in graph.inputs] + [node.name for node in graph.nodes]:
        check_name(name)  # also keeps "<node>.<param>" unambiguous: no dots
    for spec in graph.inputs:
        if spec.name in shapes:
            raise UserError(f"Input name '{spec.name}' is used twice; give every input a unique name.")
        budget.charge(f"input '{spec.name}'", spec.shape)
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
        check_attribute_names(node, op)
        check_attribute_choices(node, op)
        operand_shapes = [shapes[r] for r in node.inputs]
        try:
            shapes[node.name] = tuple(op.infer(node.attrs, operand_shapes))
            params = op.params(node.attrs, operand_shapes)
        except (ShapeError, KeyError, TypeError, ValueError, IndexError) as exc:
            raise UserError(f"Node '{node.name}' ({node.op}): {exc}.") from None
        budget.charge(f"node '{node.name}' ({node.op})", shapes[node.name])
        for what, shape in op.intermediates(node.attrs, operand_shapes).items():
            budget.charge(f"{what} of node '{node.name}' ({node.op})", shape)
        for pname, pshape in params.items():
            budget.charge(f"parameter '{node.name}.{pname}'", pshape)
    if graph.vmapped:  # jax-vmap stacks that many copies of every input and node output (fuzzer/backends/jax_vmap.py)
        batched = sum(int(np.prod(shape)) for shape in shapes.values())
        budget.charge(f"inputs and node outputs of the {graph.vmapped:,} copies jax-vmap stacks", (batched, graph.vmapped - 1))
    for out in graph.outputs:
        if out not in shapes:
            raise UserError(f"Output '{out}' is not an input or node of the graph.")
    if not graph.outputs:
        raise UserError("The graph has no outputs; list at least one node name in 'outputs'.")
    from fuzzer.programs.program import check_statements

    check_statements(graph, shapes)
    for rows in sorted(set(graph.resized.rows)) if graph.resized else ():
        try:
            infer_shapes(graph.at_rows(rows))
        except UserError as error:
            raise UserError(f"{str(error).rstrip('.')} (at {rows} rows of {', '.join(graph.resized.inputs)}, as a resized step "
                            "runs it).") from None
    return shapes


def check_attribute_names(node: Node, op) -> None:
    """Refuse an attribute the op (an ops.OpDef) does not take, or one it needs and the node lacks: either
    would reach its implementations as a wrong keyword, an error of ours deep inside a worker."""
    if op.attrs is None:  # a plugin's op that does not declare them
        return
    taken = op.taken_attrs()
    unknown = sorted(set(node.attrs) - taken)
    if unknown:
        raise UserError(f"Node '{node.name}' ({node.op}) has the attribute '{unknown[0]}', which {node.op} does not take "
                        f"(it takes {', '.join(sorted(taken)) or 'none'}); remove it.")
    missing = sorted(op.required_attrs() - set(node.attrs))
    if missing:
        raise UserError(f"Node '{node.name}' ({node.op}) lacks the attribute '{missing[0]}', which {node.op} needs; add it.")


def check_attribute_choices(node: Node, op) -> None:
    """Refuse an attribute value outside the op's declared choices (OpDef.choices): the framework
    would refuse it in a worker, and the replay would report a crash of the framework."""
    for name, allowed in op.choices.items():
        value = node.attrs.get(name)
        # By type as well: 1 == True, and a JSON 1 is no boolean choice.
        if name in node.attrs and not any(type(value) is type(choice) and value == choice for choice in allowed):
            raise UserError(f"Node '{node.name}' ({node.op}) has {name} = {str(value)[:80]!r}, which {node.op} does not "
                            f"take; use one of {', '.join(map(repr, allowed))}.")


class _ElementBudget:
    """Counts the elements a case will allocate, refusing a tensor or a total above the limits."""

    def __init__(self):
        self.per_tensor, self.per_case = element_limits()
        self.total = 0

    def charge(self, what: str, shape) -> None:
        elements = 1
        for dim in shape:
            elements *= int(dim)
        self.total += elements
        if elements > self.per_tensor:
            raise UserError(f"The {what} would have {elements:,} elements ({_gib(elements)} in float64), above the "
                            f"limit of {self.per_tensor:,}; raise it with `fuzz --max-tensor-elements N` if you mean it.")
        if self.total > self.per_case:
            raise UserError(f"The case would hold {self.total:,} elements ({_gib(self.total)} in float64) by its "
                            f"{what}, above the limit of {self.per_case:,}; raise it with "
                            "`fuzz --max-case-elements N` if you mean it.")


def _gib(elements: int) -> str:
    return f"{elements * 8 / 2**30:.1f} GiB"


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
        for spec in self.graph.inputs:
            values = self.arrays[spec.name]
            if spec.layout == "expanded" and not np.array_equal(values, np.broadcast_to(values[:1], values.shape), equal_nan=True):
                raise UserError(f"Input '{spec.name}' is stored expanded (a stride-0 view of its first row) but its rows "
                                "differ; repeat the first row or drop the layout.")

    def content_hash(self) -> str:
        return hash_content(self.graph.to_json(), self.arrays)


def hash_content(graph_json: str, arrays: dict) -> str:
    """A case's content hash from its graph's canonical JSON and its arrays (the corpus checks a stored
    case against it, from the graph text as stored)."""
    digest = hashlib.sha256(graph_json.encode())
    for name in sorted(arrays):
        digest.update(name.encode())
        array = np.asarray(arrays[name])
        # Integers by their int64 bytes (float64 cannot tell int64 extremes apart); floats as ever.
        kind = array.dtype.kind  # complex values by their complex128 bytes (both components)
        digest.update(np.ascontiguousarray(array, dtype=np.int64 if kind in "iu" else np.complex128 if kind == "c" else np.float64).tobytes())
    return digest.hexdigest()[:16]


def interpret(graph: Graph, inputs: dict, params: dict, impl_for: Callable[[str], Callable], keep_all: bool = False):
    """Run the graph node by node with `impl_for(op_name)` as each op's implementation.

    `params` maps node name -> {param name: value}. Returns the outputs, or with
    keep_all every value by name (the reference uses that for error scales).
    """
    env = dict(inputs)
    for node in graph.nodes:
        env[node.name] = impl_for(node.op)([env[r] for r in node.inputs], params.get(node.name, {}), node.attrs)
    return env if keep_all else [env[name] for name in graph.outputs]


def split_arrays(case: Case) -> tuple[dict, dict]:
    """Case arrays -> (graph inputs by name, {node: {param: array}})."""
    input_names = {spec.name for spec in case.graph.inputs}
    inputs, params = {}, {}
    for name, array in case.arrays.items():
        if name in input_names:
            inputs[name] = array
        else:
            node, param = name.split(".", 1)
            params.setdefault(node, {})[param] = array
    return inputs, params
