"""Drawing programs (fuzzer/programs/program.py): a few state inputs, then statements that take views of them,
write through those views, compute with pure ops and read aliases after the writes, called 2 to 4 steps.

Valid by construction where it is cheap (shapes fit, operands broadcast), and otherwise by asking the
program's own rules (fuzzer.ir.infer_shapes, which runs check_program) of each statement as it is
added: a statement they refuse is not added, so every drawn program passes them. A division reads its divisor
through a clamp away from 0, and exp_ writes a target a clamp_ bounded first (DIVIDING, BOUNDED_TARGET): the
honest rounding of a value near a pole or of a huge phase is no finding.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from fuzzer.errors import UserError
from fuzzer.ir import Graph, Node, Resize, TensorSpec, infer_shapes
from fuzzer.programs.program import MARKS, MIN_RESIZED_ROWS, PURE_OPS
from fuzzer.programs.statements import (ARITHMETIC, BRANCH_ARMS, ELEMENT, FORMS, ITEM, LIST_READ, MAX_LISTED, NUMBER_OPERANDS,
                                       SCALAR_ATTRS, SIZED_BY_VALUES, STATEMENTS, VIEWS, WRITES)

PROGRAM_DIMS = (1, 2, 3, 4, 5, 7)
# The pure ops drawn by default: exp is left out (a state fed back through it overflows in a few steps), div
# (its divisor would need the guard DIVIDING writes get; it is there for the shrinker's out-of-place form of div_),
# and mean (drawn only as the one-element value a scalar is read from: SCALAR_READ_ONE_IN).
DRAWN_PURE = tuple(name for name in PURE_OPS if name not in ("exp", "div", "mean"))
# Writes whose last operand divides: it is read through a clamp into [0.25, 3] drawn with it. A divisor near 0 (a
# state cancelling, a "zeros" input) makes the quotient hang on one rounding of the divisor, which compiled and
# eager kernels may honestly round differently: a false finding, or inf and nothing judged.
DIVIDING = ("div_", "addcdiv_")
DIVISOR_GUARD = {"min": 0.25, "max": 3.0}
# Writes whose target a clamp_ into it, drawn with them, bounds first: exp_ of a state fed back grows so fast that a
# later sin reads one rounding of it as a random phase (jax's float64 exp(50.47) is 1 ulp from numpy's, and the sin of
# that differed by 0.03: a false finding of a clean campaign).
BOUNDED_TARGET = {"exp_": {"min": -3.0, "max": 3.0}}
UNARY_PURE = ("neg", "abs", "sin", "cos", "tanh", "sigmoid", "relu", "clamp")
# One in this many writes with a scalar argument (SCALAR_ATTRS) reads it with `.item()` from a one-element value of
# the program (one there, else the mean of one): the state a step leaves decides the next step's scalar. A branch_
# always reads its condition so (a constant one is no control flow).
SCALAR_READ_ONE_IN = 3
MAX_STATEMENTS = 8
# One program in this many changes its inputs' size between steps (ir.Resize), where its rules allow: guards and
# recompiles of torch.compile (jax, which translates a program for one set of shapes, runs the others).
RESIZED_ONE_IN = 3


def vocabulary(op_names) -> tuple[list[str], list[str]]:
    """(statements, pure ops) to draw from: those `op_names` names where it names a statement, else all."""
    named = [name for name in op_names or () if name in STATEMENTS]
    if not named:
        return sorted(STATEMENTS), list(DRAWN_PURE)
    return named, [name for name in op_names if name in PURE_OPS]


def require_programs(op_names, regime_names) -> None:
    """Refuse a campaign whose --ops name only a program's statements but whose regimes draw no program."""
    from fuzzer.drawing.regimes import BY_NAME

    if op_names and all(name in STATEMENTS for name in op_names) and \
            not any(BY_NAME[name].programs for name in regime_names or ()):
        raise UserError(f"The ops {', '.join(op_names)} are a program's statements, which only programs have; "
                        "add `--regimes programs` to draw programs.")


def require_program_runners(regime_names, backends) -> None:
    """Refuse a campaign that draws programs only where none of its backends runs one (a backend of another
    environment, KIND@ENV, does not yet): every graph would be skipped, and the campaign would end with nothing run."""
    from fuzzer.backends import table
    from fuzzer.drawing.regimes import BY_NAME

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
    """index_add_'s, index_copy_'s and index_fill_'s dim and index (index_copy_'s without repeats, where torch's
    copy is undefined)."""
    dim = draw(st.integers(0, len(shape) - 1))
    positions = list(range(shape[dim]))
    if op == "index_copy_":
        index = draw(st.permutations(positions))[:draw(st.integers(1, shape[dim]))]
    else:
        index = draw(st.lists(st.sampled_from(positions), min_size=1, max_size=shape[dim] + 1))
    return {"dim": dim, "index": index}


def _scatter_attrs(draw, op: str, shape: tuple[int, ...]) -> dict:
    """A scatter's dim and index, of the source's shape: scatter_'s lines along dim without repeats."""
    dim = draw(st.integers(0, len(shape) - 1))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))  # one draw for the whole nested list
    if op == "scatter_":
        count = draw(st.integers(1, shape[dim]))
        index = np.argsort(rng.random(shape), axis=dim).take(range(count), axis=dim)
    else:
        count = draw(st.integers(1, shape[dim] + 1))
        index = rng.integers(0, shape[dim], shape[:dim] + (count,) + shape[dim + 1:])
    return {"dim": dim, "index": index.tolist()}


def _index_put_attrs(draw, shape: tuple[int, ...]) -> dict:
    """index_put_'s positions in the first `leading` dims (distinct without accumulate) and accumulate."""
    leading, accumulate = draw(st.integers(1, len(shape))), draw(st.booleans())
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    cells = int(np.prod(shape[:leading]))
    flat = rng.choice(cells, draw(st.integers(1, min(cells, 6) + accumulate)), replace=accumulate)
    return {"indices": [row.tolist() for row in np.unravel_index(flat, shape[:leading])], "accumulate": accumulate}


def _write_attrs(draw, op: str, shape: tuple[int, ...]) -> dict:
    if op in ("add_", "sub_", "index_add_"):
        attrs = {"alpha": draw(st.sampled_from((1.0, -0.5, 2.0)))}
        return attrs | (_index_attrs(draw, op, shape) if op == "index_add_" else {})
    if op in ("addcmul_", "addcdiv_"):
        return {"value": draw(st.sampled_from((1.0, -0.5, 2.0)))}
    if op == "branch_":
        return {"then": draw(st.sampled_from(BRANCH_ARMS)), "otherwise": draw(st.sampled_from(BRANCH_ARMS))}
    if op == "lerp_":  # torch switches formula at weight 0.5
        return {"weight": draw(st.sampled_from((0.25, 0.5, 0.75, 1.5)))}
    if op == "clamp_":
        return {"min": -0.5, "max": draw(st.sampled_from((0.5, 1.0)))}
    if op in ("fill_", "masked_fill_", "index_fill_"):
        value = {"value": draw(st.sampled_from((0.5, -1.0, 0.0)))}
        return value | (_index_attrs(draw, op, shape) if op == "index_fill_" else {})
    if op == "index_copy_":
        return _index_attrs(draw, op, shape)
    if op in ("scatter_", "scatter_add_"):
        return _scatter_attrs(draw, op, shape)
    if op == "index_put_":
        return _index_put_attrs(draw, shape)
    return {}


def _operand_shapes(op: str, shape: tuple[int, ...], attrs: dict) -> list[list[tuple[int, ...]]]:
    """For each operand of write `op` into `shape` after its target, the shapes it may have."""
    arity = STATEMENTS[op].arity[0]
    if op in ("index_add_", "index_copy_"):
        return [[tuple(len(attrs["index"]) if d == attrs["dim"] else n for d, n in enumerate(shape))]]
    if op in ("scatter_", "scatter_add_"):
        return [[tuple(np.shape(attrs["index"]))]]
    if op == "index_put_":
        rest = shape[len(attrs["indices"]):]
        return [[(len(attrs["indices"][0]), *rest), *([rest] if rest else [])]]
    if op.endswith("_out"):  # the first operand makes the out tensor's shape, the second broadcasts into it
        return [[shape], _broadcast_shapes(shape)][:arity - 1]
    return [_broadcast_shapes(shape)] * (arity - 1)


def _broadcast_shapes(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Shapes an operand of a write into `shape` may have: the same, its last dims, a row or a column."""
    return [shape, shape[1:] or shape, (1,) * (len(shape) - 1) + shape[-1:]]


def _guarded(name: str, op: str, target: str, operands: list[str]) -> tuple[tuple[Node, ...], str, list[str]]:
    """The nodes a write `op` needs before it (DIVIDING, BOUNDED_TARGET), and its target and operands after them."""
    guards = []
    if op in BOUNDED_TARGET:
        guards.append(Node(f"{name}_bounded", "clamp_", (target,), BOUNDED_TARGET[op]))
        target = guards[-1].name
    if op in DIVIDING:
        guards.append(Node(f"{name}_divisor", "clamp", (operands[-1],), DIVISOR_GUARD))
        operands = [*operands[:-1], guards[-1].name]
    return tuple(guards), target, operands


def _item_reads(nodes: list[Node]) -> list[str]:
    """The values earlier writes read a number from with `.item()`."""
    return sorted({node.inputs[-1] for node in nodes if ITEM in node.attrs and ELEMENT not in node.attrs})


def _scalar_read(draw, name: str, op: str, attrs: dict, shapes: dict, nodes: list[Node],
                 forms: list[str], listing: bool, share: bool = False) -> tuple[tuple[Node, ...], dict, str]:
    """(the nodes it needs first, the write's attributes, the operand): write `op`'s scalar read with `.item()`, often
    the value an earlier write read (one number, several uses: program.shared_reads), half the time through one of
    `forms` (Python arithmetic on the number, program_ops.FORMS) with constants it declares; where `listing`, half the
    time an element of a small 1-D value's `.tolist()` instead (_listed_read); where `share`, the value an earlier write
    read with `.item()`."""
    attrs = {key: value for key, value in attrs.items() if key != SCALAR_ATTRS[op]} | {ITEM: SCALAR_ATTRS[op]}
    if forms and draw(st.booleans()):
        form = draw(st.sampled_from(forms))
        constants = {key: draw(st.sampled_from(constant.drawn)) for key, constant in FORMS[form][1].items()}
        attrs[ARITHMETIC] = {"form": form, **constants}
    if listing and draw(st.booleans()):
        listed = _listed_read(draw, name, shapes, nodes)
        if listed is not None:
            reader, operand, size = listed
            return reader, attrs | {ELEMENT: draw(st.integers(0, size - 1))}, operand
    read_before = _item_reads(nodes)
    if read_before and (share or draw(st.booleans())):
        return (), attrs, draw(st.sampled_from(read_before))
    one_element = [value for value, shape in shapes.items() if int(np.prod(shape)) == 1]
    if one_element and draw(st.booleans()):
        return (), attrs, draw(st.sampled_from(one_element))
    value = draw(st.sampled_from(sorted(shapes)))
    mean = Node(f"{name}_scalar", "mean", (value,), {"dims": list(range(len(shapes[value]))), "keepdim": False})
    return (mean,), attrs, mean.name


def _listed_read(draw, name: str, shapes: dict, nodes: list[Node]) -> tuple[tuple[Node, ...], str, int] | None:
    """(the nodes it needs first, the operand, its size) of a number read from a list: often the list an earlier write
    read (several numbers of one `.tolist()`), else a 1-D value of 2 to MAX_LISTED elements, else the mean of one over
    all dims but its last (a statistic a row), or None where no value has such a last dim."""
    listed = lambda shape: len(shape) == 1 and 2 <= shape[0] <= MAX_LISTED  # noqa: E731
    read_before = sorted({node.inputs[-1] for node in nodes if ELEMENT in node.attrs})
    if read_before and draw(st.booleans()):
        operand = draw(st.sampled_from(read_before))
        return (), operand, shapes[operand][0]
    lists = [value for value, shape in shapes.items() if listed(shape)]
    if lists and draw(st.booleans()):
        operand = draw(st.sampled_from(lists))
        return (), operand, shapes[operand][0]
    rows = [value for value, shape in shapes.items() if len(shape) >= 2 and listed(shape[-1:])]
    if not rows:
        return None
    value = draw(st.sampled_from(rows))
    mean = Node(f"{name}_list", "mean", (value,), {"dims": list(range(len(shapes[value]) - 1)), "keepdim": False})
    return (mean,), mean.name, shapes[value][-1]


@st.composite
def programs(draw, op_names=None, regime: str = "") -> Graph:
    statements, pure = vocabulary(op_names)
    views = [name for name in statements if name in VIEWS]
    writes = [name for name in statements if name in WRITES]
    sized = [name for name in statements if name in SIZED_BY_VALUES]
    forms = [name for name in statements if name in FORMS]
    listing = LIST_READ in statements
    rank = draw(st.sampled_from((1, 2, 2, 2, 3)))
    inputs = [TensorSpec("x0", tuple(draw(st.sampled_from(PROGRAM_DIMS[1:])) for _ in range(rank)))]
    nodes: list[Node] = []
    shapes = {"x0": inputs[0].shape}

    def add(*new_nodes: Node, new_inputs=()) -> bool:
        graph = Graph(tuple(inputs) + tuple(new_inputs), tuple(nodes) + new_nodes, (new_nodes[-1].name,), steps=2)
        try:
            found = infer_shapes(graph)
        except UserError:
            return False
        inputs.extend(new_inputs)
        nodes.extend(new_nodes)
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
            # One number, several uses (program.shared_reads): after a write that read a number with .item(), often one
            # more that reads it again, as an optimizer's updates all take the step size it read once.
            readers = [write for write in writes if write in SCALAR_ATTRS]
            sharing = bool(readers and _item_reads(nodes)) and draw(st.booleans())
            op = draw(st.sampled_from(readers if sharing else writes))
            attrs = _write_attrs(draw, op, shapes[value])
            operands, new_inputs = [], []
            for sources in _operand_shapes(op, shapes[value], attrs):
                fitting = [v for v in values if shapes[v] in sources]
                if fitting and draw(st.booleans()):
                    operands.append(draw(st.sampled_from(fitting)))
                else:  # a new input: state of its own
                    new_inputs.append(TensorSpec(f"x{len(inputs) + len(new_inputs)}", draw(st.sampled_from(sources))))
                    operands.append(new_inputs[-1].name)
            guards, value, operands = _guarded(name, op, value, operands)
            if op in SCALAR_ATTRS and (sharing or op == "branch_" or draw(st.integers(1, SCALAR_READ_ONE_IN)) == 1):
                reader, attrs, scalar = _scalar_read(draw, name, op, attrs, shapes, nodes, forms, listing and not sharing,
                                                     sharing)
                if op in NUMBER_OPERANDS:  # the number takes the last operand's place (x.mul_(s.item()))
                    new_inputs = [spec for spec in new_inputs if spec.name != operands[-1]]
                    operands = operands[:-1]
                guards, operands = guards + reader, [*operands, scalar]
            add(*guards, Node(name, op, (value, *operands), attrs), new_inputs=new_inputs)
        elif sized and draw(st.integers(0, 3)) == 0:  # one element, summed over a selection sized by the values
            value, op = draw(st.sampled_from(values)), draw(st.sampled_from(sized))
            fits = _broadcast_shapes(shapes[value]) if op == "masked_select_sum" else [shapes[value][:1]]  # one a row
            masks = [v for v in values if shapes[v] in fits]
            if masks:
                add(Node(name, op, (value, draw(st.sampled_from(masks)))))
            else:
                mask = TensorSpec(f"x{len(inputs)}", fits[0])
                add(Node(name, op, (value, mask.name)), new_inputs=[mask])
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
    graph = Graph(tuple(inputs), tuple(nodes), tuple(outputs), regime, steps=draw(st.integers(2, 4)))
    return _resized(draw, graph) if draw(st.integers(1, RESIZED_ONE_IN)) == 1 else graph


def _resized(draw, graph: Graph) -> Graph:
    """`graph` whose inputs of x0's rows change size between steps (ir.Resize: a row count a step, changing at least
    once, dim 0 marked dynamic or unbacked), where x0 has rows enough and the program keeps its rules at every count;
    else with x0 alone resized, else `graph` as it is."""
    rows = graph.inputs[0].shape[0]
    if rows <= MIN_RESIZED_ROWS:
        return graph
    counts = draw(st.lists(st.integers(MIN_RESIZED_ROWS, rows), min_size=graph.steps, max_size=graph.steps).filter(
        lambda counts: len(set(counts)) > 1))
    mark = draw(st.sampled_from(MARKS))
    for names in ([spec.name for spec in graph.inputs if spec.shape[:1] == (rows,)], [graph.inputs[0].name]):
        candidate = replace(graph, resized=Resize(tuple(names), tuple(counts), mark))
        try:
            infer_shapes(candidate)
        except UserError:
            continue
        return candidate
    return graph
