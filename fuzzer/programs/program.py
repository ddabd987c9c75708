"""Programs: a graph whose nodes may write in place and take views, called for several steps with the
state it leaves (issue 55's first slice).

The smallest extension of the IR that can say "write through this view" and "read an alias after a
write": a program is a `Graph` with `steps` >= 1 whose nodes are statements run in order, with the
frameworks' own semantics of names. A view node's value aliases its operand (`getitem` (a slice), `swapaxes`,
`diagonal`, `broadcast_to`, `unfold`, `view`, `as_strided`: fuzzer/programs/statements.py); a write node
(`add_`, `sin_`, `addcdiv_`, `copy_`, `fill_`, `index_add_`, `scatter_`, `index_put_`, `masked_fill_`, `add_out` (torch.add's
out=), ...) writes its first operand, which may be a view, and its value is that operand. Reading a name reads its memory as it is at that point, so an alias read after a write
sees the write. Still data: JSON nodes and arrays, no code.

The whole body is one step, called `steps` times with the same input tensors: what it wrote into an
input persists into the next call, as an optimizer step or a running statistic does. A program's
results, in order: each step's outputs (as they are when the step returns), then the final value of
every input some node writes (`written_inputs`). A compiling backend compiles the body once and
calls it `steps` times.

Who runs it how, and why
------------------------
- torch eager and torch.compile run the statements literally (`fuzzer.ir.interpret` over the body),
  so torch's functionalization and aliasing analysis are what gets tested.
- The float64 reference runs them literally in numpy (`literal_step`), where slices, swapaxes,
  diagonal, view and as_strided are real views too: its aliasing semantics come from numpy's
  memory model, not from bookkeeping of ours. broadcast_to and unfold are numpy read-only views,
  which is why no program writes through them (`check_program`).
- jax has no views: `functional_step` translates the program, each alias an index map into its
  root (the view's numpy reference run on the root's element numbers), a read a gather, a write
  a scatter (`.at[].set`) into the root. This is our bookkeeping; the campaign checks it against
  numpy's views on every case, as the other backends are checked.
A write may read its scalar argument from a one-element value at run time (`item`, program_ops.SCALAR_ATTRS):
`.item()` in torch and numpy, the traced value in jax (`scalar_reads`); or one element of a small 1-D value's
`.tolist()` (`element`).
The oracle compares every step's outputs and the final written inputs against the float64 literal
run, with honest models run the same way in each dtype (fuzzer/oracle/reference.py, `program_reference`).

Bounds: a view stays inside its base (the view's shape rule), at most MAX_STEPS steps, and the
writes are ones both numpy and torch define (`check_program`), all before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from fuzzer.errors import UserError
from fuzzer.programs.statements import (ARITHMETIC, ELEMENT, ITEM, LIST_READ, SCALAR_ATTRS, STATEMENTS, VIEWS, WRITES,
                                       arithmetic_of)

MAX_STEPS = 8
# How torch marks a resized input's dim 0 before each call (ir.Resize): a backed symbol that guards may specialize
# (torch._dynamo.mark_dynamic), or an unbacked one that no guard may (mark_unbacked, torch 2.3 on).
MARKS = ("dynamic", "unbacked")
# dynamo specializes sizes 0 and 1: a dim marked dynamic that arrives with 1 row is an error, not a recompile.
MIN_RESIZED_ROWS = 2
# Writes whose operand torch turns into a new tensor first (a mask), and writes at an index (torch refuses any
# operand sharing memory with their target).
MASK_WRITES = ("masked_fill_",)
INDEX_WRITES = ("index_add_", "index_copy_", "scatter_", "scatter_add_", "index_put_")
# The registry ops a program may compute with: their results are new tensors in every framework
# (a registry op whose torch implementation returns a view would alias silently).
# mean: a one-element value (of all dims) a write reads its scalar from with `.item()` (program_ops.SCALAR_ATTRS).
PURE_OPS = ("add", "sub", "mul", "div", "neg", "abs", "sin", "cos", "tanh", "sigmoid", "relu", "clamp", "exp", "mean")
# Views numpy gives read-only (and torch refuses most writes through): never written through.
READ_ONLY_VIEWS = ("broadcast_to", "unfold")
# Views that depend on how the base is laid out in memory: taken of an input or a contiguous part of one (as_strided:
# of the input itself), contiguous in every backend.
LAYOUT_VIEWS = ("view", "as_strided")


@dataclass(frozen=True)
class Alias:
    """Where a value lives: its root (an input or a pure op's result) and, for a view, the element
    numbers of the root it shows (C order); `read_only`: made through a read-only view."""

    root: str
    index: np.ndarray | None = None
    read_only: bool = False

    def elements(self, shape) -> np.ndarray:
        return np.arange(int(np.prod(shape))).reshape(shape) if self.index is None else self.index


def aliases(graph, shapes: dict) -> dict[str, Alias]:
    """Every value's Alias, from the body's statements (shapes: fuzzer.ir.infer_shapes)."""
    table = {spec.name: Alias(spec.name) for spec in graph.inputs}
    for node in graph.nodes:
        if node.op in VIEWS:
            base = table[node.inputs[0]]
            elements = base.elements(shapes[base.root])
            if node.op in LAYOUT_VIEWS:  # numpy's view needs contiguous memory; check_program refuses what is not
                elements = np.ascontiguousarray(elements)
            index = np.asarray(STATEMENTS[node.op].reference([elements], {}, node.attrs))
            table[node.name] = Alias(base.root, index, base.read_only or node.op in READ_ONLY_VIEWS)
        elif node.op in WRITES:
            table[node.name] = table[node.inputs[0]]
        else:
            table[node.name] = Alias(node.name)
    return table


def check_statements(graph, shapes: dict) -> None:
    """A program's rules (check_program); a plain graph has no writes or views of a program's."""
    if graph.steps:
        check_program(graph, shapes)
        check_resized(graph)
        return
    if graph.resized is not None:
        raise UserError("The graph resizes its inputs between steps but has no 'steps'; set 'steps' or drop 'resized'.")
    for node in graph.nodes:
        if node.op in STATEMENTS:
            raise UserError(f"Node '{node.name}' ({node.op}) is a program's statement, but the graph has no 'steps'; "
                            f"set 'steps' (1 to {MAX_STEPS}) to make it a program.")


def check_program(graph, shapes: dict) -> None:
    """Refuse, with one sentence naming the node, what numpy and torch do not both define: a write
    through a read-only view or into elements that repeat, an operand sharing memory with the elements
    it is written into without being that very tensor (for an index write, at all), a layout view of
    anything but an input (or a contiguous part of one), a registry op outside PURE_OPS, a parameter."""
    from fuzzer.ops import get_op

    if not 1 <= graph.steps <= MAX_STEPS:
        raise UserError(f"The program runs {graph.steps} steps; a program takes 1 to {MAX_STEPS}.")
    for spec in graph.inputs:
        if spec.layout != "contiguous":
            raise UserError(f"Program input '{spec.name}' has layout '{spec.layout}'; a program's inputs are contiguous, "
                            "so drop the layout.")
    table = aliases(graph, shapes)
    inputs = {spec.name for spec in graph.inputs}
    for node in graph.nodes:
        where = f"Node '{node.name}' ({node.op})"
        if node.op not in STATEMENTS:
            if node.op not in PURE_OPS:
                raise UserError(f"{where} is not allowed in a program, which computes with {', '.join(PURE_OPS)} "
                                "besides its writes and views; use one of those.")
            if get_op(node.op).params(node.attrs, [shapes[i] for i in node.inputs]):
                raise UserError(f"{where} takes parameters, which a program does not carry; use an op without them.")
            continue
        base = table[node.inputs[0]]
        if node.op in LAYOUT_VIEWS and (base.root not in inputs or not _contiguous(base.elements(shapes[base.root]))):
            raise UserError(f"{where} takes a view that depends on memory layout of '{node.inputs[0]}', which is not "
                            "a program input or a contiguous part of one; take it of an input.")
        if node.op == "as_strided" and base.index is not None:  # torch's offset counts from the storage, numpy's from the view
            raise UserError(f"{where} takes as_strided of '{node.inputs[0]}', a view, where torch and numpy place it "
                            "differently; take it of the input itself.")
        if node.op not in WRITES:
            continue
        target = base.elements(shapes[base.root])
        if base.read_only:
            raise UserError(f"{where} writes through a read-only view ({' or '.join(READ_ONLY_VIEWS)}); write into "
                            "its base instead.")
        if np.unique(target).size != target.size:
            raise UserError(f"{where} writes into '{node.inputs[0]}', whose elements repeat (an overlapping view); "
                            "write into a view whose elements are distinct.")
        if node.op in MASK_WRITES:  # its operand becomes a new mask tensor before anything is written
            continue
        for operand in tensor_operands(node)[1:]:  # a scalar read with .item() is a number by the time it writes
            other = table[operand]
            if other.root != base.root or not np.intersect1d(other.elements(shapes[other.root]), target).size:
                continue
            # torch allows only the very tensor it writes, and an index write not even that.
            if node.op not in INDEX_WRITES and _tensor_of(graph, operand) == _tensor_of(graph, node.inputs[0]):
                continue
            raise UserError(f"{where} reads '{operand}', which shares memory with the elements it writes without being "
                            "that very tensor; read a clone or a disjoint view.")


def check_resized(graph) -> None:
    """Refuse, with one sentence, a resize (ir.Resize) that is not one row count a step of named inputs, each count
    from MIN_RESIZED_ROWS to the input's rows (ir.infer_shapes checks the program at each of its row counts)."""
    resize = graph.resized
    if resize is None:
        return
    shapes = {spec.name: spec.shape for spec in graph.inputs}
    if len(resize.rows) != graph.steps:
        raise UserError(f"'resized' gives {len(resize.rows)} row counts for a program of {graph.steps} steps; give one a step.")
    for name in resize.inputs:
        if not shapes.get(name):
            raise UserError(f"'resized' names '{name}', which is not an input with a dim 0; name the program's inputs.")
        if not all(MIN_RESIZED_ROWS <= rows <= shapes[name][0] for rows in resize.rows):
            raise UserError(f"'resized' cuts '{name}' of {shapes[name][0]} rows to {list(resize.rows)}; give counts from "
                            f"{MIN_RESIZED_ROWS} (dynamo specializes 0 and 1) to {shapes[name][0]}.")


def tensor_operands(node) -> tuple[str, ...]:
    """The operands a statement takes as tensors: all but the one a write reads its scalar from (`item`)."""
    return node.inputs[:-1] if ITEM in node.attrs else node.inputs


def scalar_reads(impl_for: Callable, read: Callable = lambda tensor: tensor.item()) -> Callable:
    """`impl_for` whose writes that read a scalar at run time (program_ops.SCALAR_ATTRS) get it as the
    attribute it names, read from their last operand by `read`: `.item()` in torch (an unbacked symbol
    under torch.compile(fullgraph=True)) and in numpy (a Python float, as `float(s)`); jax passes the
    traced value as a 0-d array, as a jitted function must. A write naming an `element` takes that element of the
    operand's list instead (`impl_for("tolist")`: `.tolist()` in torch and numpy, the traced elements in jax)."""

    def impl(op: str):
        run = impl_for(op)
        if op not in SCALAR_ATTRS:
            return run
        listed = impl_for(LIST_READ)  # looked up now: a compiled step need not trace the registry

        def run_reading_scalar(xs, ps, attrs):
            if ITEM not in attrs:
                return run(xs, ps, attrs)
            number = listed([xs[-1]], {}, {})[attrs[ELEMENT]] if ELEMENT in attrs else read(xs[-1])
            return run(xs[:-1], ps, with_scalar(attrs, computed_scalar(attrs, number, impl_for)))

        return run_reading_scalar

    return impl


def computed_scalar(attrs: dict, number, impl_for: Callable):
    """The scalar a write takes from the `number` it read: the number, or its Python arithmetic (program_ops.ARITHMETIC),
    the form's implementation found by `impl_for` as an op's is (a plugin overrides one by name)."""
    arithmetic = arithmetic_of(attrs)
    if arithmetic is None:
        return number
    form, constants = arithmetic
    return impl_for(form)([number], {}, constants)


def shared_reads(graph, shapes: dict) -> dict[str, str]:
    """For each node that reads a number with `.item()` (or an element of `.tolist()`), the node whose read it takes the
    number (the list) of: the first to read the same value with nothing written into that value's memory since, else
    itself. The number is the same either way; torch-compile-breaks and the reproducers read it once so, as an optimizer reads its step size once for every
    parameter's update: one number used twice in the graph resumed after the break (pytorch#185382's path)."""
    table = aliases(graph, shapes)
    first, shared = {}, {}
    for node in graph.nodes:
        if ITEM in node.attrs:
            shared[node.name] = first.setdefault(node.inputs[-1], node.name)
        if node.op in WRITES:  # after its own read: a write reads its operands before it writes
            written = table[node.inputs[0]].root
            first = {value: reader for value, reader in first.items() if table[value].root != written}
    return shared


def with_scalar(attrs: dict, number) -> dict:
    """A write's attributes with the scalar it reads (`item`), computed already, given as `number`."""
    return {**{key: value for key, value in attrs.items() if key not in (ITEM, ARITHMETIC, ELEMENT)}, attrs[ITEM]: number}


def _tensor_of(graph, name: str) -> str:
    """The value `name` is the very tensor of: a write returns its target."""
    producers = {node.name: node for node in graph.nodes}
    while name in producers and producers[name].op in WRITES:
        name = producers[name].inputs[0]
    return name


def _contiguous(elements: np.ndarray) -> bool:
    flat = elements.reshape(-1)
    return bool(np.array_equal(flat, np.arange(flat[0], flat[0] + flat.size)))


def written_inputs(graph) -> list[str]:
    """The inputs some node writes (through a view or not), in the order of the graph's inputs: their
    final values follow the outputs of every step."""
    roots = {}
    for spec in graph.inputs:
        roots[spec.name] = spec.name
    for node in graph.nodes:
        roots[node.name] = roots[node.inputs[0]] if node.op in VIEWS | WRITES else node.name
    written = {roots[node.inputs[0]] for node in graph.nodes if node.op in WRITES}
    return [spec.name for spec in graph.inputs if spec.name in written]


# -- running ---------------------------------------------------------------------------------------
# A step: the state (input name -> array or tensor) -> (that step's outputs, the state after it).
Step = Callable[[dict], tuple[list, dict]]


def run_steps(graph, step: Step, state: dict, snapshot: Callable, take: Callable = lambda value, rows: value[:rows]) -> list:
    """The program's results (see the module docstring): `step` called `graph.steps` times, each
    step's outputs taken by `snapshot` (a copy: a later step may write into them) as it returns. A resized
    program's step runs on `take(value, rows)` of each resized input, a view of it (the runs that write in place
    only: torch marks the view's dim 0 there), and the next step on the whole input again."""
    results = []
    resize = graph.resized
    for step_index in range(graph.steps):
        if resize is None:
            outputs, state = step(state)
        else:
            taken = {name: take(state[name], resize.rows[step_index]) for name in resize.inputs}
            outputs, after = step({**state, **taken})
            state = {**after, **{name: state[name] for name in resize.inputs}}  # written through the views
        results += [snapshot(out) for out in outputs]
    return results + [snapshot(state[name]) for name in written_inputs(graph)]


def literal_step(graph, impl_for: Callable, fresh: Callable, watch: Callable = lambda value: None) -> Step:
    """The body run statement by statement, writes in place and views real (numpy, torch eager);
    `fresh(value)` makes a pure op's result a new root array (numpy: C order, the dtype); `watch` sees each value."""

    impl_for = scalar_reads(impl_for)

    def step(state):
        env = dict(state)
        for node in graph.nodes:
            value = impl_for(node.op)([env[name] for name in node.inputs], {}, node.attrs)
            env[node.name] = value if node.op in VIEWS | WRITES else fresh(value)
            watch(env[node.name])
        return [env[name] for name in graph.outputs], state

    return step


def functional_step(graph, impl_for: Callable, shapes: dict) -> Step:
    """The body without views or in-place writes, for jax (see the module docstring): a write computes
    its target's new value (the statement's `jax` implementation) and scatters it into the root;
    every read of a view gathers from its root as it is then."""
    table = aliases(graph, shapes)
    impl_for = scalar_reads(impl_for, lambda value: value.reshape(()))

    def read(roots: dict, name: str):
        alias = table[name]
        value = roots[alias.root]
        return value if alias.index is None else value.reshape(-1)[alias.index.reshape(-1)].reshape(alias.index.shape)

    def step(state):
        roots = dict(state)
        for node in graph.nodes:
            if node.op in VIEWS:
                continue
            operands = [read(roots, name) for name in node.inputs]
            value = impl_for(node.op)(operands, {}, node.attrs)
            if node.op not in WRITES:
                roots[node.name] = value
                continue
            alias = table[node.inputs[0]]
            base = roots[alias.root]
            value = value.astype(base.dtype)
            if alias.index is None:
                roots[alias.root] = value.reshape(base.shape)
            else:
                flat = base.reshape(-1).at[alias.index.reshape(-1)].set(value.reshape(-1))
                roots[alias.root] = flat.reshape(base.shape)
        return [read(roots, name) for name in graph.outputs], {spec.name: roots[spec.name] for spec in graph.inputs}

    return step


def run_in_numpy(graph, inputs: dict, dtype, impl_for: Callable | None = None, peaks: list | None = None) -> list[np.ndarray]:
    """The program's results computed literally in numpy `dtype` (the reference's and the honest models' run); `peaks`,
    where given, gets after each step the largest finite magnitude of any value so far, the inputs' included."""
    from fuzzer.ops import get_op

    impl_for = impl_for or (lambda name: get_op(name).reference)
    state = {name: np.array(value, dtype=dtype, order="C") for name, value in inputs.items()}
    fresh = lambda value: np.array(value, dtype=dtype, order="C")  # noqa: E731 - a new root, never an operand's memory
    largest = [0.0]

    def watch(value):
        with np.errstate(invalid="ignore"):
            largest[0] = max(largest[0], float(np.max(np.abs(value), where=np.isfinite(value), initial=0.0)))

    for value in state.values():
        watch(value)
    step = literal_step(graph, impl_for, fresh, watch)

    def watched_step(state):
        stepped = step(state)
        if peaks is not None:
            peaks.append(largest[0])
        return stepped

    with np.errstate(all="ignore"):
        results = run_steps(graph, watched_step, state, lambda value: np.array(value, dtype=dtype))
    return [np.asarray(result, dtype=np.float64) for result in results]
