"""Drawing programs (fuzzer/program.py): a few state inputs, then statements that take views of them,
write through those views, compute with pure ops and read aliases after the writes, called 2 to 4 steps.

Valid by construction where it is cheap (shapes fit, operands broadcast), and otherwise by asking the
program's own rules (fuzzer.ir.infer_shapes, which runs check_program) of each statement as it is
added: a statement they refuse is not added, so every drawn program passes them.
"""

from __future__ import annotations

from hypothesis import assume
from hypothesis import strategies as st

from fuzzer.errors import UserError
from fuzzer.ir import Graph, Node, TensorSpec, infer_shapes
from fuzzer.program import INDEX_WRITES, PURE_OPS
from fuzzer.program_ops import STATEMENTS, VIEWS, WRITES

PROGRAM_DIMS = (1, 2, 3, 4, 5, 7)
# The pure ops drawn by default: exp is left out (a state fed back through it overflows in a few steps).
DRAWN_PURE = tuple(name for name in PURE_OPS if name != "exp")
UNARY_PURE = ("neg", "abs", "sin", "cos", "tanh", "sigmoid", "relu", "clamp")
MAX_STATEMENTS = 8


def vocabulary(op_names) -> tuple[list[str], list[str]]:
    """(statements, pure ops) to draw from: those `op_names` names where it names a statement, else all."""
    named = [name for name in op_names or () if name in STATEMENTS]
    if not named:
        return sorted(STATEMENTS), list(DRAWN_PURE)
    return named, [name for name in op_names if name in PURE_OPS]


def require_programs(op_names, regime_names) -> None:
    """Refuse a campaign whose --ops name only a program's statements but whose regimes draw no program."""
    from fuzzer.regimes import BY_NAME

    if op_names and all(name in STATEMENTS for name in op_names) and \
            not any(BY_NAME[name].programs for name in regime_names or ()):
        raise UserError(f"The ops {', '.join(op_names)} are a program's statements, which only programs have; "
                        "add `--regimes programs` to draw programs.")


def require_program_runners(regime_names, backends) -> None:
    """Refuse a campaign that draws programs only where none of its backends runs one (a backend of another
    environment, KIND@ENV, does not yet): every graph would be skipped, and the campaign would end with nothing run."""
    from fuzzer.backends import table
    from fuzzer.regimes import BY_NAME

    if regime_names and all(BY_NAME[name].programs for name in regime_names) and not any(
            backend.runs_program_steps() for backend in backends):
        runners = sorted(kind for kind, cls in table().classes.items() if cls.runs_program_steps())
        raise UserError(f"None of the backends {', '.join(b.name for b in backends)} runs programs (in-place writes "
                        f"and views), which are all `--regimes programs` draws; name one of {', '.join(runners)} "
                        "of this environment.")


def _view_attrs(draw, op: str, shape: tuple[int, ...]) -> dict | None:
    rank = len(shape)
    dim = draw(st.integers(0, rank - 1))
    if op == "getitem":
        start = draw(st.integers(0, shape[dim] - 1))
        return {"dim": dim, "start": start, "stop": draw(st.integers(start + 1, shape[dim])), "step": draw(st.sampled_from((1, 1, 2)))}
    if op == "swapaxes":
        return {"axis0": dim, "axis1": draw(st.integers(0, rank - 1))} if rank >= 2 else None
    if op == "diagonal":
        return {"offset": draw(st.integers(-1, 1)), "dim1": 0, "dim2": rank - 1} if rank >= 2 else None
    if op == "broadcast_to":
        return {"size": [d if d > 1 else draw(st.sampled_from((1, 3, 4))) for d in shape]}
    if op == "unfold":
        return {"dimension": dim, "size": draw(st.integers(1, shape[dim])), "step": draw(st.integers(1, 2))}
    if op == "view":
        total = 1
        for d in shape:
            total *= d
        split = draw(st.sampled_from([d for d in (1, 2, 3, 4) if total % d == 0]))
        return {"size": [split, total // split] if draw(st.booleans()) else [total]}
    if op == "as_strided":
        total = 1
        for d in shape:
            total *= d
        rows = draw(st.integers(1, max(1, total // 2)))
        stride = draw(st.integers(1, 2))
        cols = draw(st.integers(1, max(1, (total - 1) // max(1, rows * stride) + 1)))
        return {"size": [rows, cols], "stride": [cols * stride, stride], "storage_offset": draw(st.integers(0, 1))}
    return None


def _index_attrs(draw, op: str, shape: tuple[int, ...]) -> dict:
    """index_add_'s and index_copy_'s dim and index (index_copy_'s without repeats, where torch's copy is undefined)."""
    dim = draw(st.integers(0, len(shape) - 1))
    positions = list(range(shape[dim]))
    if op == "index_copy_":
        index = draw(st.permutations(positions))[:draw(st.integers(1, shape[dim]))]
    else:
        index = draw(st.lists(st.sampled_from(positions), min_size=1, max_size=shape[dim] + 1))
    return {"dim": dim, "index": index, **({"alpha": draw(st.sampled_from((1.0, -0.5)))} if op == "index_add_" else {})}


def _write_attrs(draw, op: str) -> dict:
    if op == "add_":
        return {"alpha": draw(st.sampled_from((1.0, -0.5, 2.0)))}
    if op == "clamp_":
        return {"min": -0.5, "max": draw(st.sampled_from((0.5, 1.0)))}
    if op in ("fill_", "masked_fill_"):
        return {"value": draw(st.sampled_from((0.5, -1.0, 0.0)))}
    return {}


def _broadcast_shapes(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Shapes an operand of a write into `shape` may have: the same, its last dims, a row or a column."""
    return [shape, shape[1:] or shape, (1,) * (len(shape) - 1) + shape[-1:]]


@st.composite
def programs(draw, op_names=None, regime: str = "") -> Graph:
    statements, pure = vocabulary(op_names)
    views = [name for name in statements if name in VIEWS]
    writes = [name for name in statements if name in WRITES]
    rank = draw(st.sampled_from((1, 2, 2, 2, 3)))
    inputs = [TensorSpec("x0", tuple(draw(st.sampled_from(PROGRAM_DIMS[1:])) for _ in range(rank)))]
    nodes: list[Node] = []
    shapes = {"x0": inputs[0].shape}

    def add(node: Node, new_inputs=()) -> bool:
        graph = Graph(tuple(inputs) + tuple(new_inputs), tuple(nodes) + (node,), (node.name,), steps=2)
        try:
            found = infer_shapes(graph)
        except UserError:
            return False
        inputs.extend(new_inputs)
        nodes.append(node)
        shapes.update(found)
        return True

    target = draw(st.integers(2, MAX_STATEMENTS))
    for attempt in range(4 * MAX_STATEMENTS):
        if len(nodes) >= target:
            break
        name, values = f"n{len(nodes)}", list(shapes)
        kind = draw(st.sampled_from(["view", "view", "write", "write", "write", "pure"]))
        if kind == "view" and views:
            value, op = draw(st.sampled_from(values)), draw(st.sampled_from(views))
            attrs = _view_attrs(draw, op, shapes[value])
            if attrs is not None:
                add(Node(name, op, (value,), attrs))
        elif kind == "write" and writes:
            seen = [node.name for node in nodes if node.op in VIEWS]  # mostly through a view
            value = draw(st.sampled_from(seen if seen and draw(st.integers(0, 2)) else values))
            op = draw(st.sampled_from(writes))
            if STATEMENTS[op].arity[0] == 1:
                add(Node(name, op, (value,), _write_attrs(draw, op)))
                continue
            shape = shapes[value]
            if op in INDEX_WRITES:
                attrs = _index_attrs(draw, op, shape)
                sources = [tuple(len(attrs["index"]) if d == attrs["dim"] else n for d, n in enumerate(shape))]
            else:
                attrs, sources = _write_attrs(draw, op), _broadcast_shapes(shape)
            fitting = [v for v in values if shapes[v] in sources]
            if fitting and draw(st.booleans()):
                add(Node(name, op, (value, draw(st.sampled_from(fitting))), attrs))
            else:  # a new input: state of its own
                operand = TensorSpec(f"x{len(inputs)}", draw(st.sampled_from(sources)))
                add(Node(name, op, (value, operand.name), attrs), [operand])
        elif pure:
            op, value = draw(st.sampled_from(pure)), draw(st.sampled_from(values))
            if op in UNARY_PURE:
                add(Node(name, op, (value,), {"min": -1.0, "max": 1.0} if op == "clamp" else {}))
            else:
                same = [v for v in values if shapes[v] == shapes[value]]
                add(Node(name, op, (value, draw(st.sampled_from(same)))))
    assume(any(node.op in WRITES for node in nodes))
    # The last statement, and a value read after the writes (often an alias of what they wrote).
    outputs = [nodes[-1].name]
    other = draw(st.sampled_from([spec.name for spec in inputs] + [node.name for node in nodes]))
    if other not in outputs and other not in {spec.name for spec in inputs}:
        outputs.append(other)
    return Graph(tuple(inputs), tuple(nodes), tuple(outputs), regime, steps=draw(st.integers(2, 4)))
