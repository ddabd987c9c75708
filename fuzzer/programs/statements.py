"""The statements only a program (fuzzer/programs/program.py) has: in-place writes and views, under the
frameworks' own names (`add_`, `sin_`, `copy_`, `index_add_`, `scatter_`, `swapaxes`, `as_strided`, ...), and
writes through `out=` (`add_out(c, a, b)` is `torch.add(a, b, out=c)`: the first operand is always the target),
and `masked_select_sum`, a sum over a selection whose size depends on the values.

Each is an OpDef, so that a plugin overrides one by name with `derive_backend` like any op, but
they live outside the op registry (fuzzer/ops/): a plain graph never draws them, and the
registry-wide tests (references, jax twins, regions) do not apply to them. `get_op` finds them.

What each implementation means:
- `torch`: the literal statement (`x.add_(y)`, `x.swapaxes(0, 1)`): torch eager and torch.compile
  run it as written, so functionalization and aliasing analysis are what a program tests.
- `reference`: the literal statement in numpy, on numpy's own views (basic slicing, swapaxes,
  `shape` assignment and as_strided are real views; np.diagonal's read-only view is made writable;
  broadcast_to and sliding windows stay read-only, and a program never writes through them).
- `jax`: a write's new value of its target, computed out of place (`x + y`); fuzzer/programs/program.py
  scatters it into the target's base. A view has none: jax reads views through index maps made
  by running the view's `reference` on an array of element numbers.
`WRITES` and `VIEWS` name them; `OUT_OF_PLACE` is each write's out-of-place form in the op
registry, where it has one (the shrinker's "replace an in-place op by its out-of-place form").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fuzzer.ops import API_PATH, OpDef
from fuzzer.ops._common import check, norm_dim, numel
from fuzzer.ops.numerics import Numerics

Shape = tuple[int, ...]


def _never(shape) -> bool:  # no plain graph draws a statement
    return False


def _method(name: str):
    """torch's `Tensor.<name>` called on the operands with the attributes as keywords (`x.add_(y, alpha=2.0)`),
    marked so that a reproducer writes it as that call (fuzzer/reproducers/op_source.py)."""

    def run(xs, ps, attrs):
        return getattr(xs[0], name)(*xs[1:], **attrs)

    setattr(run, API_PATH, f"torch.Tensor.{name}")
    return run


def _broadcasts_into(source: Shape, target: Shape, what: str) -> None:
    """Refuse a source that does not broadcast to the target's shape (an in-place op never resizes)."""
    try:
        shape = np.broadcast_shapes(tuple(source), tuple(target))
    except ValueError:
        shape = None
    check(shape == tuple(target), f"{what} of shape {list(source)} does not broadcast to the written shape {list(target)}")


def _same(attrs, shapes):
    return tuple(shapes[0])


def _pointwise_write_shape(attrs, shapes):
    for source in shapes[1:]:
        _broadcasts_into(source, shapes[0], "the operand")
    for key in ("alpha", "value", "weight"):
        check(key not in attrs or _is_number(attrs[key]), f"{key} {str(attrs.get(key))[:40]} must be a finite number")
    return tuple(shapes[0])


def _is_number(value) -> bool:
    return type(value) in (int, float) and bool(np.isfinite(value))


# A write that only moves or selects values (copy_, fill_, relu_, ...) rounds nothing: it adds nothing to the
# oracle's sensitivity, which the arithmetic ones (add_, mul_, index_add_) do once a step.
MOVES_VALUES = Numerics(sensitivity=0.0, why={"sensitivity": "moves, selects or fills values exactly: no rounding"})


# Writes whose scalar argument a program may read at run time from a one-element tensor, as `.item()`
# (`x.addcmul_(a, b, value=s.item())`): the attribute `item` names that argument, and the write's last operand
# holds it. fuzzer/programs/program.py reads it (`scalar_reads`) before the write's implementation is called.
ITEM = "item"
SCALAR_ATTRS = {"add_": "alpha", "sub_": "alpha", "addcmul_": "value", "addcdiv_": "value", "lerp_": "weight",
                "fill_": "value", "branch_": "condition", "mul_": "other"}
# Writes whose number takes the place of their last tensor operand (`x.mul_(s.item())`) rather than being one more:
# torch passes it as a scalar operand, not a keyword's constant (pytorch#185382's path takes both in one resumed graph).
NUMBER_OPERANDS = ("mul_",)


# -- several numbers read at once: `.tolist()` of a small 1-D tensor (issue 55 item 2) --------------------
# A write may take its number from a list instead: {"item": "alpha", "element": 1} with a last operand of 2 to MAX_LISTED
# elements (1-D) is `alpha=s.tolist()[1]`; several writes reading the same value share one `.tolist()` (program.shared_reads),
# as a user's loop unpacks `lr, beta = hyper.tolist()`. The list is read by the op `tolist` (never a node), so that a
# plugin overrides it by name: torch and numpy call `.tolist()` (Python floats), jax indexes the traced array.
ELEMENT = "element"
LIST_READ = "tolist"
MAX_LISTED = 8


def _tolist(xs, ps, attrs):
    return xs[0].tolist()


def _jax_listed(xs, ps, attrs):  # a traced array has no Python numbers: its elements, indexed as the list would be
    return xs[0].reshape(-1)


def _check_element(element, shape) -> None:
    """Refuse a `.tolist()` read of anything but a 1-D operand of 2 to MAX_LISTED numbers, or of an element it lacks."""
    check(len(shape) == 1 and 2 <= shape[0] <= MAX_LISTED, f"the operand read with .tolist() has shape {list(shape)}, "
          f"which is not a list of 2 to {MAX_LISTED} numbers; read a 1-D tensor of that many elements")
    check(type(element) is int and 0 <= element < shape[0],
          f"{ELEMENT} {str(element)[:40]} is not one of the {shape[0]} numbers .tolist() reads (0 to {shape[0] - 1})")


# -- Python arithmetic on the number read (pytorch#185382's `value=-lr / (1 - beta ** step)`) -------------
# A write that reads its scalar with `.item()` may compute it in Python from that number first: the attribute
# `arithmetic` names one of these forms with its constants, {"item": "value", "arithmetic": {"form": "bias_correction",
# "c": -0.01, "d": 0.9}}. Each form is an OpDef, never a node (its shape rule refuses one), so that a plugin overrides
# it by name; its implementation is plain Python on the number `xs[0]`, the same in every framework (a float in torch
# and numpy, a symbol under torch.compile's capture, a traced 0-d array in jax), which a reproducer writes literally
# (fuzzer/reproducers/op_source.py specializes it). Each is defined for every number: no division by zero, no `**` that overflows.
ARITHMETIC = "arithmetic"


@dataclass(frozen=True)
class Constant:
    """A form's constant: the interval a case file's value must lie in, and the values a program draws."""

    low: float
    high: float
    drawn: tuple[float, ...]


def _scale_shift(xs, ps, attrs):
    return attrs["c"] * xs[0] + attrs["d"]


def _bias_correction(xs, ps, attrs):  # an optimizer's step size, the step read as 1 + |s| (never 0)
    return attrs["c"] / (1 - attrs["d"] ** (1 + abs(xs[0])))


def _power_complement(xs, ps, attrs):
    return 1 - attrs["c"] ** abs(xs[0])


def _damped(xs, ps, attrs):
    return attrs["c"] / (1 + abs(xs[0]))


SCALE = Constant(-4.0, 4.0, (-0.5, 0.1, 2.0))
RATE = Constant(0.01, 0.99, (0.5, 0.9, 0.99))  # a base below 1 raised to a power of at least 0: at most 1
FORMS = {
    "scale_shift": (_scale_shift, {"c": SCALE, "d": Constant(-4.0, 4.0, (0.0, 1.0, -0.25))}, "c * s + d"),
    "bias_correction": (_bias_correction, {"c": Constant(-4.0, 4.0, (-0.01, 0.1, 1.0)), "d": RATE}, "c / (1 - d ** (1 + |s|))"),
    "power_complement": (_power_complement, {"c": RATE}, "1 - c ** |s|"),
    "damped": (_damped, {"c": SCALE}, "c / (1 + |s|)"),
}


def _not_a_node(name: str, what: str, where: str):
    def refuse(attrs, shapes):
        check(False, f"{name} is {what}, not a node; {where}")

    return refuse


def _form(name: str) -> OpDef:
    compute, constants, text = FORMS[name]
    return OpDef(name=name, infer=_not_a_node(name, "Python arithmetic on a number read with .item()",
                                           f"name it in a write's {ARITHMETIC} attribute"), reference=compute, torch=compute, jax=compute, accepts=_never,
                 attrs=tuple(constants), family="program", notes=f"Python arithmetic on a number read with .item(): {text}")


def _check_arithmetic(arithmetic) -> None:
    """Refuse an `arithmetic` attribute that is not a declared form with its constants, each a number in its interval."""
    check(isinstance(arithmetic, dict), f"{ARITHMETIC} {str(arithmetic)[:80]} must be an object of a 'form' and its constants")
    check(arithmetic.get("form") in FORMS,
          f"{ARITHMETIC} form {str(arithmetic.get('form'))[:40]!r} is not declared; use one of {', '.join(FORMS)}")
    constants = FORMS[arithmetic["form"]][1]
    given = set(arithmetic) - {"form"}
    check(given == set(constants), f"{ARITHMETIC} form {arithmetic['form']} takes the constants "
          f"{', '.join(constants)}, got {', '.join(sorted(given)) or 'none'}")
    for key, bound in constants.items():
        value = arithmetic[key]
        check(_is_number(value) and bound.low <= value <= bound.high,
              f"{ARITHMETIC} constant {key} = {str(value)[:40]} must be a number in [{bound.low}, {bound.high}]")


def arithmetic_of(attrs: dict) -> tuple[str, dict] | None:
    """(form, constants) of a write that computes its scalar in Python, else None."""
    if ARITHMETIC not in attrs:
        return None
    return attrs[ARITHMETIC]["form"], {key: value for key, value in attrs[ARITHMETIC].items() if key != "form"}


def _write(name: str, arity: int, infer, reference, torch_impl, jax_new, attrs=(), out_of_place: str | None = None,
           numerics: Numerics = MOVES_VALUES) -> OpDef:
    arities, choices = (arity, arity), {}
    if name in SCALAR_ATTRS:  # one operand more where the scalar is read from it (in place of one: NUMBER_OPERANDS)
        key, tensors = SCALAR_ATTRS[name], arity - (name in NUMBER_OPERANDS)
        arities, choices = (arity, tensors + 1), {ITEM: (key,)}
        infer = _reading_scalar(infer, key, arity, tensors, f"{key}?" in attrs or name in NUMBER_OPERANDS)
        given = () if name in NUMBER_OPERANDS else (f"{key}?",)  # a number operand comes from item only
        attrs = tuple(a for a in attrs if a.removesuffix("?") != key) + given + (f"{ITEM}?", f"{ARITHMETIC}?", f"{ELEMENT}?")
    return OpDef(name=name, infer=infer, reference=reference, torch=torch_impl, jax=jax_new, accepts=_never,
                 attrs=attrs, arity=arities, numerics=numerics, family="program", choices=choices,
                 notes=f"in-place write; out of place: {out_of_place}")


def _reading_scalar(infer, key: str, arity: int, tensors: int, optional: bool):
    """The shape rule of a write whose scalar `key` may be read from its last operand (SCALAR_ATTRS): `arity` operands
    without it, `tensors` and the one holding the number with it."""

    def shape(attrs, shapes):
        reads = ITEM in attrs
        taken = tensors + 1 if reads else arity
        check(len(shapes) == taken, f"it takes {taken} operands {'with' if reads else 'without'} {ITEM}, got {len(shapes)}")
        check(not (reads and key in attrs), f"it gives {key} and also reads it with {ITEM}; give one of them")
        check(reads or optional or key in attrs, f"{key} is missing; give it, or read it from an operand with {ITEM}")
        check(reads or ARITHMETIC not in attrs, f"it computes {key} with {ARITHMETIC} but reads no number; add {ITEM}")
        check(reads or ELEMENT not in attrs, f"it names an {ELEMENT} of .tolist() but reads no number; add {ITEM}")
        if ARITHMETIC in attrs:
            _check_arithmetic(attrs[ARITHMETIC])
        if reads and ELEMENT in attrs:
            _check_element(attrs[ELEMENT], shapes[-1])
        elif reads:
            check(numel(shapes[-1]) == 1, f"the operand read with .item() has shape {list(shapes[-1])}, which is not "
                  "one element; read a one-element tensor")
        if reads:
            attrs, shapes = {**attrs, key: 1.0}, shapes[:-1]  # any number passes the rule's own check
        return infer({k: v for k, v in attrs.items() if k not in (ITEM, ARITHMETIC, ELEMENT)}, shapes)

    return shape


def _np_add_(xs, ps, attrs):
    xs[0] += attrs.get("alpha", 1.0) * xs[1]
    return xs[0]


def _np_mul_(xs, ps, attrs):
    xs[0] *= _other(xs, attrs)
    return xs[0]


def _other(xs, attrs):
    """mul_'s second operand: a tensor, or the number it read with .item() (NUMBER_OPERANDS)."""
    return xs[1] if len(xs) > 1 else attrs["other"]


def _np_sub_(xs, ps, attrs):
    xs[0] -= attrs.get("alpha", 1.0) * xs[1]
    return xs[0]


def _np_div_(xs, ps, attrs):
    xs[0] /= xs[1]
    return xs[0]


def _np_addcmul_(xs, ps, attrs):
    xs[0] += attrs.get("value", 1.0) * xs[1] * xs[2]
    return xs[0]


def _np_addcdiv_(xs, ps, attrs):
    xs[0] += attrs.get("value", 1.0) * (xs[1] / xs[2])
    return xs[0]


def _np_lerp_(xs, ps, attrs):
    xs[0] += attrs["weight"] * (xs[1] - xs[0])
    return xs[0]


def _np_clamp_(xs, ps, attrs):
    np.clip(xs[0], attrs["min"], attrs["max"], out=xs[0])
    return xs[0]


def _np_relu_(xs, ps, attrs):
    np.maximum(xs[0], 0, out=xs[0])
    return xs[0]


def _np_copy_(xs, ps, attrs):
    xs[0][...] = xs[1]
    return xs[0]


def _np_fill_(xs, ps, attrs):
    xs[0][...] = attrs["value"]
    return xs[0]


def _np_zero_(xs, ps, attrs):
    xs[0][...] = 0
    return xs[0]


# -- writes of a registry op's value: in place (`x.sin_()`) or into `out` (`torch.add(a, b, out=c)`) -------------
def _np_assigned(op: str, first: int):
    """numpy: the registry op `op`'s reference of operands `first`.. written into the first operand, so it
    computes as the out-of-place op does in the same run (float64 in the reference's)."""

    def run(xs, ps, attrs):
        from fuzzer.ops import get_op  # the registry loads on first use: it finds this module's statements

        xs[0][...] = get_op(op).reference(xs[first:], ps, attrs)
        return xs[0]

    return run


def _jax_computed(op: str, first: int):
    """jax: the registry op `op`'s value of operands `first`.. (the target's new value)."""

    def run(xs, ps, attrs):
        from fuzzer.ops import get_op

        return get_op(op).jax(xs[first:], ps, attrs)

    return run


def _torch_out(function: str):
    """`torch.<function>(*operands, out=target)`: the value written into the first operand."""

    def run(xs, ps, attrs):
        import torch

        return getattr(torch, function)(*xs[1:], out=xs[0])

    return run


def _out_shape(attrs, shapes):
    try:
        shape = np.broadcast_shapes(*(tuple(source) for source in shapes[1:]))
    except ValueError:
        shape = None
    check(shape == tuple(shapes[0]), f"the operands of shapes {[list(s) for s in shapes[1:]]} do not make the out "
          f"tensor's shape {list(shapes[0])} (an out tensor of another shape would be resized)")
    return tuple(shapes[0])


def _in_place(op: str, numerics: Numerics) -> OpDef:
    """`x.sin_()`: the registry op `op` of x written into x."""
    return _write(f"{op}_", 1, _same, _np_assigned(op, 0), _method(f"{op}_"), _jax_computed(op, 0), out_of_place=op,
                  numerics=numerics)


def _out_form(op: str, arity: int) -> OpDef:
    """`torch.add(a, b, out=c)`, the node `add_out(c, a, b)`: the registry op `op` written into c, of its exact shape."""
    return _write(f"{op}_out", arity + 1, _out_shape, _np_assigned(op, 1), _torch_out(op), _jax_computed(op, 1),
                  out_of_place=op, numerics=Numerics())


def _xp(value):
    """The array module of `value` (jax.numpy for a jax array), for the out-of-place forms."""
    if isinstance(value, np.ndarray):
        return np
    import jax.numpy

    return jax.numpy


# -- index writes: the index is an attribute (a short list of ints), the source an operand ---------------
def _indexed(attrs, rank):
    """The subscript `[:, index]` (on dim `dim`) as numpy and jax take it."""
    return (slice(None),) * norm_dim(attrs["dim"], rank) + (np.asarray(attrs["index"], dtype=np.int64),)


def _selected_shape(attrs, target: Shape, unique: bool) -> list[int]:
    """The target's shape with dim `dim` cut to the positions `index` selects, refusing positions out of bounds
    (or repeated, where `unique`: a copy to one position twice is undefined)."""
    shape = list(target)
    dim = norm_dim(attrs["dim"], len(shape))
    index = attrs["index"]
    check(isinstance(index, list) and 1 <= len(index) <= 64 and all(type(i) is int and 0 <= i < shape[dim] for i in index),
          f"index {str(index)[:80]} must be 1 to 64 positions within 0..{shape[dim] - 1} of dim {dim}")
    check(not unique or len(set(index)) == len(index), f"index {index} repeats a position, where the copy is undefined")
    shape[dim] = len(index)
    return shape


def _index_shape(attrs, shapes, unique: bool):
    selected = _selected_shape(attrs, shapes[0], unique)
    check(tuple(shapes[1]) == tuple(selected), f"the source has shape {list(shapes[1])}, not {selected}")
    return tuple(shapes[0])


def _index_fill_shape(attrs, shapes):
    _selected_shape(attrs, shapes[0], unique=False)  # a fill writes one value, so a repeated position is harmless
    check(_is_number(attrs["value"]), f"value {str(attrs['value'])[:40]} must be a finite number")
    return tuple(shapes[0])


def _np_index_add_(xs, ps, attrs):
    np.add.at(xs[0], _indexed(attrs, xs[0].ndim), attrs.get("alpha", 1.0) * xs[1])  # unbuffered: repeats accumulate
    return xs[0]


def _np_index_copy_(xs, ps, attrs):
    xs[0][_indexed(attrs, xs[0].ndim)] = xs[1]
    return xs[0]


def _torch_index_add_(xs, ps, attrs):
    import torch

    index = torch.tensor(attrs["index"], dtype=torch.int64, device=xs[0].device)
    return xs[0].index_add_(attrs["dim"], index, xs[1], alpha=attrs.get("alpha", 1.0))


def _torch_index_copy_(xs, ps, attrs):
    import torch

    return xs[0].index_copy_(attrs["dim"], torch.tensor(attrs["index"], dtype=torch.int64, device=xs[0].device), xs[1])


def _np_index_fill_(xs, ps, attrs):
    xs[0][_indexed(attrs, xs[0].ndim)] = attrs["value"]
    return xs[0]


def _torch_index_fill_(xs, ps, attrs):
    import torch

    index = torch.tensor(attrs["index"], dtype=torch.int64, device=xs[0].device)
    return xs[0].index_fill_(attrs["dim"], index, attrs["value"])


# -- scatter: source element (i, j, ...) goes to the target's (i, index[i][j], ...) along dim `dim` (dim 1 here) -----
MAX_INDEX_ELEMENTS = 1024


def _nested_shape(value) -> tuple[int, ...] | None:
    """The shape of a regular nested list of ints (an int: ()), None where it is ragged or holds anything else."""
    if type(value) is int:
        return ()
    if not isinstance(value, list) or not value:
        return None
    inner = {_nested_shape(item) for item in value}
    return None if len(inner) != 1 or None in inner else (len(value), *inner.pop())


def _scatter_shape(attrs, shapes, unique: bool):
    target, source = tuple(shapes[0]), tuple(shapes[1])
    dim = norm_dim(attrs["dim"], len(target))
    check(len(source) == len(target) and all(s == t for d, (s, t) in enumerate(zip(source, target)) if d != dim)
          and 1 <= source[dim] <= 64, f"the source has shape {list(source)}, which must be the target's "
          f"{list(target)} but for 1 to 64 entries along dim {dim}")
    index = attrs["index"]
    check(_nested_shape(index) == source and numel(source) <= MAX_INDEX_ELEMENTS
          and bool(np.all((np.asarray(index) >= 0) & (np.asarray(index) < target[dim]))),
          f"index {str(index)[:80]} must be a nested list of the source's shape {list(source)} (at most "
          f"{MAX_INDEX_ELEMENTS} entries) of positions within 0..{target[dim] - 1}")
    lines = np.sort(np.asarray(index), axis=dim)
    check(not unique or not np.any(np.diff(lines, axis=dim) == 0),
          f"index {str(index)[:80]} sends two entries of one line along dim {dim} to one position, where the scatter is undefined")
    return target


def _scattered(attrs, rank):
    """The subscript of the target's elements a scatter writes, in the source's shape (numpy and jax take it)."""
    index = np.asarray(attrs["index"], dtype=np.int64)
    dim = norm_dim(attrs["dim"], rank)
    return tuple(index if d == dim else grid for d, grid in enumerate(np.indices(index.shape)))


def _np_scatter_(xs, ps, attrs):
    xs[0][_scattered(attrs, xs[0].ndim)] = xs[1]
    return xs[0]


def _np_scatter_add_(xs, ps, attrs):
    np.add.at(xs[0], _scattered(attrs, xs[0].ndim), xs[1])
    return xs[0]


def _torch_scatter(method: str):
    """torch's scatter_ or scatter_add_, the index a tensor made from the attribute."""

    def run(xs, ps, attrs):
        import torch

        index = torch.tensor(attrs["index"], dtype=torch.int64, device=xs[0].device)
        return getattr(xs[0], method)(attrs["dim"], index, xs[1])

    return run


# -- index_put_: positions as one list of indices per leading dim ---------------------------------------
def _index_put_shape(attrs, shapes):
    target = tuple(shapes[0])
    indices = attrs["indices"]
    count = _nested_shape(indices)
    check(count is not None and len(count) == 2 and count[0] <= len(target) and count[1] <= 64
          and all(0 <= i < target[d] for d, row in enumerate(indices) for i in row),
          f"indices {str(indices)[:80]} must be one list of 1 to 64 positions per leading dim (at most {len(target)}), "
          f"each within that dim of {list(target)}")
    check(type(attrs["accumulate"]) is bool, f"accumulate {str(attrs['accumulate'])[:40]} must be true or false")
    check(attrs["accumulate"] or len(set(zip(*indices))) == count[1],
          f"indices {str(indices)[:80]} repeat a position, where a put without accumulate is undefined")
    _broadcasts_into(shapes[1], (count[1], *target[count[0]:]), "the values")
    return target


def _positions(attrs):
    return tuple(np.asarray(row, dtype=np.int64) for row in attrs["indices"])


def _np_index_put_(xs, ps, attrs):
    if attrs["accumulate"]:
        np.add.at(xs[0], _positions(attrs), xs[1])
    else:
        xs[0][_positions(attrs)] = xs[1]
    return xs[0]


def _torch_index_put_(xs, ps, attrs):
    import torch

    indices = torch.tensor(attrs["indices"], dtype=torch.int64, device=xs[0].device).unbind(0)
    return xs[0].index_put_(indices, xs[1], accumulate=attrs["accumulate"])


def _jax_index_put_(xs, ps, attrs):
    at = xs[0].at[_positions(attrs)]
    return at.add(xs[1]) if attrs["accumulate"] else at.set(xs[1])


def _mask_shape(attrs, shapes):
    _broadcasts_into(shapes[1], shapes[0], "the mask")
    return tuple(shapes[0])


def _np_masked_fill_(xs, ps, attrs):
    np.copyto(xs[0], attrs["value"], where=np.broadcast_to(xs[1] > 0, xs[0].shape))
    return xs[0]


def _torch_masked_fill_(xs, ps, attrs):
    return xs[0].masked_fill_(xs[1] > 0, attrs["value"])


# -- branch_: Python control flow on a value -----------------------------------------------------------
# `if s.item() > 0: x.add_(y) else: x.mul_(y)` as data: {"op": "branch_", "inputs": ["x", "y", "s"],
# "attrs": {"then": "add_", "otherwise": "mul_", "item": "condition"}}, the arms two-operand writes named here.
# The condition is read with `.item()` (SCALAR_ATTRS): a Python number, so torch.compile breaks the graph at it or
# (fullgraph=True) cannot trace the branch; numpy reads it as a float; jax, whose traced value has no Python truth,
# selects between both arms' new values with where (what lax.cond computes, without its two traced bodies).
BRANCH_ARMS = ("add_", "sub_", "mul_", "copy_")


def _branch_shape(attrs, shapes):
    for key in ("then", "otherwise"):
        check(attrs[key] in BRANCH_ARMS, f"{key} {str(attrs[key])[:40]} must name one of {', '.join(BRANCH_ARMS)}")
    check(_is_number(attrs["condition"]), f"condition {str(attrs['condition'])[:40]} must be a finite number")
    return _pointwise_write_shape({}, shapes)


def _arm(attrs) -> str:
    return attrs["then"] if attrs["condition"] > 0 else attrs["otherwise"]


def _np_branch_(xs, ps, attrs):
    return STATEMENTS[_arm(attrs)].reference(xs, ps, {})


def _torch_branch_(xs, ps, attrs):
    return STATEMENTS[_arm(attrs)].torch(xs, ps, {})


def _jax_branch_(xs, ps, attrs):
    import jax.numpy as jnp

    then, otherwise = (STATEMENTS[attrs[key]].jax(xs, ps, {}) for key in ("then", "otherwise"))
    return jnp.where(attrs["condition"] > 0, then, otherwise)


# In-place math under torch's names (`sin_`), computing as the registry's out-of-place op of that name; the
# registry ops `torch.add(..., out=c)` writes (`add_out`), with their arity.
ROUNDING_MATH = ("sin", "exp", "tanh", "sigmoid")
EXACT_MATH = ("abs", "neg")
OUT_FORMS = (("add", 2), ("mul", 2), ("sin", 1))
WRITE_OPS = [
    _write("add_", 2, _pointwise_write_shape, _np_add_, _method("add_"),
           lambda xs, ps, a: xs[0] + a.get("alpha", 1.0) * xs[1], attrs=("alpha?",), out_of_place="add", numerics=Numerics()),
    _write("mul_", 2, _pointwise_write_shape, _np_mul_, _method("mul_"),
           lambda xs, ps, a: xs[0] * _other(xs, a), out_of_place="mul", numerics=Numerics()),
    _write("clamp_", 1, _same, _np_clamp_, _method("clamp_"),
           lambda xs, ps, a: _xp(xs[0]).clip(xs[0], a["min"], a["max"]), attrs=("min", "max"), out_of_place="clamp"),
    _write("relu_", 1, _same, _np_relu_, _method("relu_"),
           lambda xs, ps, a: _xp(xs[0]).maximum(xs[0], 0), out_of_place="relu"),
    _write("copy_", 2, _pointwise_write_shape, _np_copy_, _method("copy_"),
           lambda xs, ps, a: _xp(xs[0]).broadcast_to(xs[1], xs[0].shape)),
    _write("fill_", 1, _same, _np_fill_, _method("fill_"),
           lambda xs, ps, a: _xp(xs[0]).full_like(xs[0], a["value"]), attrs=("value",)),
    _write("zero_", 1, _same, _np_zero_, _method("zero_"),
           lambda xs, ps, a: _xp(xs[0]).zeros_like(xs[0])),
    _write("index_add_", 2, lambda a, s: _index_shape(a, s, unique=False), _np_index_add_, _torch_index_add_,
           lambda xs, ps, a: xs[0].at[_indexed(a, xs[0].ndim)].add(a.get("alpha", 1.0) * xs[1]), attrs=("dim", "index", "alpha?"),
           numerics=Numerics()),
    _write("index_copy_", 2, lambda a, s: _index_shape(a, s, unique=True), _np_index_copy_, _torch_index_copy_,
           lambda xs, ps, a: xs[0].at[_indexed(a, xs[0].ndim)].set(xs[1]), attrs=("dim", "index")),
    # The mask is where the second operand is positive (a float case has no bool tensors).
    _write("masked_fill_", 2, _mask_shape, _np_masked_fill_, _torch_masked_fill_,
           lambda xs, ps, a: _xp(xs[0]).where(xs[1] > 0, a["value"], xs[0]), attrs=("value",)),
    _write("sub_", 2, _pointwise_write_shape, _np_sub_, _method("sub_"),
           lambda xs, ps, a: xs[0] - a.get("alpha", 1.0) * xs[1], attrs=("alpha?",), out_of_place="sub", numerics=Numerics()),
    _write("div_", 2, _pointwise_write_shape, _np_div_, _method("div_"),
           lambda xs, ps, a: xs[0] / xs[1], out_of_place="div", numerics=Numerics()),
    _write("addcmul_", 3, _pointwise_write_shape, _np_addcmul_, _method("addcmul_"),
           lambda xs, ps, a: xs[0] + a.get("value", 1.0) * xs[1] * xs[2], attrs=("value?",), numerics=Numerics()),
    _write("addcdiv_", 3, _pointwise_write_shape, _np_addcdiv_, _method("addcdiv_"),
           lambda xs, ps, a: xs[0] + a.get("value", 1.0) * (xs[1] / xs[2]), attrs=("value?",), numerics=Numerics()),
    _write("lerp_", 2, _pointwise_write_shape, _np_lerp_, _method("lerp_"),
           lambda xs, ps, a: xs[0] + a["weight"] * (xs[1] - xs[0]), attrs=("weight",), numerics=Numerics()),
    *(_in_place(op, Numerics()) for op in ROUNDING_MATH),
    *(_in_place(op, MOVES_VALUES) for op in EXACT_MATH),
    _write("index_fill_", 1, _index_fill_shape, _np_index_fill_, _torch_index_fill_,
           lambda xs, ps, a: xs[0].at[_indexed(a, xs[0].ndim)].set(a["value"]), attrs=("dim", "index", "value")),
    _write("scatter_", 2, lambda a, s: _scatter_shape(a, s, unique=True), _np_scatter_, _torch_scatter("scatter_"),
           lambda xs, ps, a: xs[0].at[_scattered(a, xs[0].ndim)].set(xs[1]), attrs=("dim", "index")),
    _write("scatter_add_", 2, lambda a, s: _scatter_shape(a, s, unique=False), _np_scatter_add_, _torch_scatter("scatter_add_"),
           lambda xs, ps, a: xs[0].at[_scattered(a, xs[0].ndim)].add(xs[1]), attrs=("dim", "index"), numerics=Numerics()),
    # Rounds where it accumulates: declared so for both (a put that only moves values gets a tolerance a little wide).
    _write("index_put_", 2, _index_put_shape, _np_index_put_, _torch_index_put_, _jax_index_put_,
           attrs=("indices", "accumulate"), numerics=Numerics()),
    *(_out_form(op, arity) for op, arity in OUT_FORMS),
    _write("branch_", 2, _branch_shape, _np_branch_, _torch_branch_, _jax_branch_, attrs=("then", "otherwise", "condition"),
           numerics=Numerics()),
]
# The registry op each write computes out of place, with the same operands and attributes.
OUT_OF_PLACE = {"add_": "add", "mul_": "mul", "clamp_": "clamp", "relu_": "relu", "sub_": "sub", "div_": "div",
                **{f"{op}_": op for op in ROUNDING_MATH + EXACT_MATH}}


# -- views --------------------------------------------------------------------------------------------
def _getitem(xs, ps, attrs):
    """x[:, start:stop:step] (on dim `dim`): a basic slice, a real view in numpy as in torch."""
    dim = attrs["dim"] % xs[0].ndim  # checked by the shape rule; no message string here, which dynamo traces
    return xs[0][(slice(None),) * dim + (slice(attrs["start"], attrs["stop"], attrs["step"]),)]


def _getitem_shape(attrs, shapes):
    shape = list(shapes[0])
    dim = norm_dim(attrs["dim"], len(shape))
    start, stop, step = attrs["start"], attrs["stop"], attrs["step"]
    check(0 <= start < stop <= shape[dim] and step >= 1,
          f"slice [{start}:{stop}:{step}] of dim {dim} is outside 0..{shape[dim]} (start < stop, step >= 1)")
    shape[dim] = len(range(start, stop, step))
    return tuple(shape)


def _swapaxes_shape(attrs, shapes):
    shape = list(shapes[0])
    a, b = norm_dim(attrs["axis0"], len(shape)), norm_dim(attrs["axis1"], len(shape))
    shape[a], shape[b] = shape[b], shape[a]
    return tuple(shape)


def _diagonal_shape(attrs, shapes):
    shape = list(shapes[0])
    check(len(shape) >= 2, "diagonal needs at least 2 dims")
    a, b = norm_dim(attrs["dim1"], len(shape)), norm_dim(attrs["dim2"], len(shape))
    check(a != b, "diagonal's dim1 and dim2 must differ")
    offset = attrs["offset"]
    length = max(0, min(shape[a] + min(offset, 0), shape[b] - max(offset, 0)))
    check(length >= 1, f"diagonal offset {offset} leaves no element of a {shape[a]} x {shape[b]} plane")
    rest = [d for i, d in enumerate(shape) if i not in (a, b)]
    return tuple(rest + [length])


def _np_diagonal(xs, ps, attrs):
    view = np.diagonal(xs[0], attrs["offset"], attrs["dim1"], attrs["dim2"])
    view.flags.writeable = xs[0].flags.writeable  # numpy returns it read-only; it is a real view
    return view


def _expand_shape(attrs, shapes):
    source, size = tuple(shapes[0]), tuple(attrs["size"])
    check(len(size) == len(source) and all(s == t or s == 1 for s, t in zip(source, size)) and all(t >= 1 for t in size),
          f"broadcast_to of shape {list(source)} to {list(size)} (only size-1 dims grow)")
    return size


def _unfold_shape(attrs, shapes):
    shape = list(shapes[0])
    dim = norm_dim(attrs["dimension"], len(shape))
    size, step = attrs["size"], attrs["step"]
    check(1 <= size <= shape[dim] and step >= 1, f"unfold window {size} (step {step}) does not fit dim {dim} of {shape[dim]}")
    shape[dim] = (shape[dim] - size) // step + 1
    return tuple(shape + [size])


def _np_unfold(xs, ps, attrs):
    x = xs[0]
    dim = norm_dim(attrs["dimension"], x.ndim)
    windows = np.lib.stride_tricks.sliding_window_view(x, attrs["size"], axis=dim)
    return windows[(slice(None),) * dim + (slice(None, None, attrs["step"]),)]


def _view_shape(attrs, shapes):
    size = tuple(attrs["size"])
    check(all(d >= 1 for d in size) and numel(size) == numel(shapes[0]),
          f"view as {list(size)} of {numel(shapes[0])} elements")
    return size


def _np_view(xs, ps, attrs):
    view = xs[0].view()
    view.shape = tuple(attrs["size"])  # raises where numpy would need a copy: fuzzer/programs/program.py allows none
    return view


def _as_strided_shape(attrs, shapes):
    size, stride, offset = tuple(attrs["size"]), tuple(attrs["stride"]), attrs["storage_offset"]
    check(len(size) == len(stride) and all(d >= 1 for d in size) and all(s >= 0 for s in stride) and offset >= 0,
          f"as_strided size {list(size)}, stride {list(stride)}, offset {offset} (positive sizes, non-negative strides)")
    last = offset + sum((d - 1) * s for d, s in zip(size, stride))
    check(last < numel(shapes[0]), f"as_strided reaches element {last} of a base of {numel(shapes[0])} elements")
    return size


def _np_as_strided(xs, ps, attrs):
    flat = xs[0].reshape(-1)[attrs["storage_offset"]:]  # a view: fuzzer/programs/program.py allows as_strided on an input only
    strides = tuple(s * flat.itemsize for s in attrs["stride"])
    return np.lib.stride_tricks.as_strided(flat, tuple(attrs["size"]), strides, writeable=flat.flags.writeable)


def _view(name: str, infer, reference, torch_impl, attrs) -> OpDef:
    return OpDef(name=name, infer=infer, reference=reference, torch=torch_impl, jax=None, accepts=_never, attrs=attrs,
                 family="program", notes="a view: its result aliases its operand")


VIEW_OPS = [
    _view("getitem", _getitem_shape, _getitem, _getitem, ("dim", "start", "stop", "step")),
    _view("swapaxes", _swapaxes_shape, lambda xs, ps, a: np.swapaxes(xs[0], a["axis0"], a["axis1"]), _method("swapaxes"),
          ("axis0", "axis1")),
    _view("diagonal", _diagonal_shape, _np_diagonal, _method("diagonal"), ("offset", "dim1", "dim2")),
    _view("broadcast_to", _expand_shape, lambda xs, ps, a: np.broadcast_to(xs[0], tuple(a["size"])), _method("broadcast_to"),
          ("size",)),
    _view("unfold", _unfold_shape, _np_unfold, _method("unfold"), ("dimension", "size", "step")),
    _view("view", _view_shape, _np_view, _method("view"), ("size",)),
    _view("as_strided", _as_strided_shape, _np_as_strided, _method("as_strided"), ("size", "stride", "storage_offset")),
]

# -- sizes that depend on values ------------------------------------------------------------------------
# A statement whose intermediate's size depends on the values (torch.masked_select: as many elements as the mask
# selects), reduced at once, so that the program's own values keep static shapes: under torch.compile the
# selection gets an unbacked size (dynamo's capture_dynamic_output_shape_ops), its sum one element.
def _masked_select_sum_shape(attrs, shapes):
    _broadcasts_into(shapes[1], shapes[0], "the mask")
    return (1,)


def _np_masked_select_sum(xs, ps, attrs):
    """The sum of x where the mask (the second operand, broadcast to x) is positive; 0 where it selects nothing."""
    x = xs[0]
    return np.asarray(x[np.broadcast_to(xs[1] > 0, x.shape)].sum(dtype=x.dtype)).reshape(1)


def _torch_masked_select_sum(xs, ps, attrs):
    import torch

    return torch.masked_select(xs[0], xs[1] > 0).sum().reshape(1)


def _jax_masked_select_sum(xs, ps, attrs):  # jit has no sizes that depend on values: the same sum over a where
    import jax.numpy as jnp

    return jnp.where(xs[1] > 0, xs[0], 0).sum().reshape(1)


def _nonzero_rows_sum_shape(attrs, shapes):
    check(len(shapes[0]) >= 1 and tuple(shapes[1]) == tuple(shapes[0][:1]),
          f"the mask of shape {list(shapes[1])} must have one entry per row of {list(shapes[0])}")
    return tuple(shapes[0][1:]) or (1,)


def _np_nonzero_rows_sum(xs, ps, attrs):
    """The sum of the rows of x whose mask entry (the second operand, one per row) is positive; 0 where none is."""
    x = xs[0]
    return np.asarray(x[np.nonzero(xs[1] > 0)[0]].sum(axis=0, dtype=x.dtype)).reshape(x.shape[1:] or (1,))


def _torch_nonzero_rows_sum(xs, ps, attrs):
    import torch

    rows = torch.nonzero(xs[1] > 0).squeeze(1)  # as many as the mask picks: the size flows into index_select
    return torch.index_select(xs[0], 0, rows).sum(0).reshape(xs[0].shape[1:] or (1,))


def _jax_nonzero_rows_sum(xs, ps, attrs):
    import jax.numpy as jnp

    picked = (xs[1] > 0).reshape(xs[1].shape + (1,) * (xs[0].ndim - 1))
    return jnp.where(picked, xs[0], 0).sum(0).reshape(xs[0].shape[1:] or (1,))


SIZED_BY_VALUES_OPS = [
    # torch.nonzero's rows, as many as the values pick, taken by index_select and summed over them: a data-dependent size
    # one op hands the next (under torch-compile-capture an unbacked size through both).
    OpDef(name="nonzero_rows_sum", infer=_nonzero_rows_sum_shape, reference=_np_nonzero_rows_sum,
          torch=_torch_nonzero_rows_sum, jax=_jax_nonzero_rows_sum, accepts=_never, arity=(2, 2),
          numerics=Numerics(sensitivity=2.0, why={"sensitivity": "a sum of many rounded operands, as the reductions'"}),
          family="program", notes="rows picked by nonzero, index_select, summed"),
    OpDef(name="masked_select_sum", infer=_masked_select_sum_shape, reference=_np_masked_select_sum,
          torch=_torch_masked_select_sum, jax=_jax_masked_select_sum, accepts=_never, arity=(2, 2),
          numerics=Numerics(sensitivity=2.0, why={"sensitivity": "a sum of many rounded operands, as the reductions'"}),
          family="program", notes="a selection whose size depends on the values, summed: one element"),
]

# The registry's `slice`, `narrow`, `transpose` and `expand` are out-of-place ops of plain graphs; a program's
# views take torch's other names for the same views: getitem (a basic slice, as dynamo's graphs name it),
# swapaxes, broadcast_to (an expand).
LIST_READ_OP = OpDef(name=LIST_READ, infer=_not_a_node(LIST_READ, "the Python list a write reads its number from",
                                                       f"give a write {ITEM} and {ELEMENT} instead"),
                     reference=_tolist, torch=_tolist, jax=_jax_listed, accepts=_never, family="program",
                     notes="a small 1-D tensor read as a Python list of numbers, for writes' scalars (element)")
STATEMENTS: dict[str, OpDef] = {op.name: op for op in WRITE_OPS + VIEW_OPS + SIZED_BY_VALUES_OPS + [LIST_READ_OP]
                                + [_form(name) for name in FORMS]}
WRITES = frozenset(op.name for op in WRITE_OPS)
VIEWS = frozenset(op.name for op in VIEW_OPS)
SIZED_BY_VALUES = frozenset(op.name for op in SIZED_BY_VALUES_OPS)
