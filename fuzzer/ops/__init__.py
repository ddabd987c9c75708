"""The op registry: every module in this package declares its ops once, as `OPS = [OpDef(...)]`.

An OpDef carries everything about one op: how to draw valid attributes for
given input shapes, the shape rule, the parameters it needs, a float64 numpy
reference written from the math, the torch and jax implementations, and its
numerics (numerics.py: how its correct kernels round, each fact with its reason).
Backends materialize a graph by calling `op.impl(family)`; nothing else in the
code base knows about individual ops. Adding an op touches one file here.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from fuzzer.drawing.branch_points import BranchPoints
from fuzzer.errors import UserError, did_you_mean
from fuzzer.ops.numerics import Numerics

Shape = tuple[int, ...]
# Marks on implementations made by builders, so a reproducer can write them as source
# (fuzzer/reproducers/op_source.py): the framework function called with (*inputs, **attrs), e.g.
# "torch.nn.functional.silu", or the plain function (*inputs, **attrs) that is called; and
# the keywords attributes are passed as where the API names them otherwise ({"dim": "axis"}).
API_PATH = "api_path"
API_KEYWORDS = "api_keywords"
WRAPS = "wraps"
# (draw, input shapes) -> attrs; `draw` is hypothesis's draw function.
AttrDrawer = Callable[[Callable, list[Shape]], dict]


@dataclass(frozen=True)
class Regions:
    """The regions an op's kernels switch on that fuzzer/drawing/regions.py's generic keys miss: `of(attrs,
    operand shapes)` gives the keys a node exercises, without the op's name ("batch=broadcast"),
    and `declared` is every key it can give."""

    declared: tuple[str, ...]
    of: Callable[[dict, list[Shape]], set[str]]


@dataclass(frozen=True)
class Ladder:
    """The axes of an op's first operand that reduce or contract, where a size ladder (fuzzer/drawing/ladder.py)
    puts 2^k - 1, 2^k or 2^k + 1 elements: `kind` is "reduction" or "contraction", `axes(attrs, operand
    shapes)` the axes (non-negative; none where these attributes contract nothing worth a ladder)."""

    kind: str
    axes: Callable[[dict, list[Shape]], tuple[int, ...]]


def _no_params(attrs: dict, shapes: list[Shape]) -> dict[str, Shape]:
    return {}


def _no_attrs(draw: Callable, shapes: list[Shape]) -> dict:
    return {}


@dataclass(frozen=True)
class OpDef:
    name: str
    infer: Callable[[dict, list[Shape]], Shape]  # raises ShapeError with the broken rule
    reference: Callable  # (inputs, params, attrs) -> np.ndarray; the float64 math in numpy
    torch: Callable  # (inputs, params, attrs) -> torch.Tensor
    jax: Callable  # (inputs, params, attrs) -> jax.Array
    accepts: Callable[[Shape], bool]  # can the first operand have this shape?
    draw_attrs: AttrDrawer = _no_attrs
    # The attribute names the op takes, as draw_attrs draws them; a name ending in "?" may be left out
    # (pad's fill value, a reduction's `dim` or `dims`). A graph read from a file is checked against
    # them (ir.check_attribute_names); None, a plugin's op that does not say, is not checked.
    attrs: tuple[str, ...] | None = None
    # The values an attribute may take where they are a few (gelu's `approximate`): a case file's
    # other value is refused at load (ir.check_attribute_choices), never run as a framework crash.
    choices: dict[str, tuple] = field(default_factory=dict)
    params: Callable[[dict, list[Shape]], dict[str, Shape]] = _no_params
    # (attrs, operand shapes) -> {what: shape} of the temporaries its reference allocates beyond its
    # output (attention's L x S scores, a conv's padded input): the resource bounds count them too.
    intermediates: Callable[[dict, list[Shape]], dict[str, Shape]] = _no_params
    # For ops with more than one operand: (draw, first shape, attrs) -> shapes of the other operands.
    draw_operands: Callable | None = None
    arity: tuple[int, int] = (1, 1)
    # How its correct kernels round, beyond the float64 reference, each fact with its reason
    # (fuzzer/ops/numerics.py); an op that declares nothing is judged by the generic models.
    numerics: Numerics = field(default_factory=Numerics)
    # (attrs, input shapes) -> attrs: re-derives the attributes that restate an input's shape
    # (layer_norm's normalized_shape, reshape's target) after the shrinker changed that shape;
    # never mutates `attrs` (the shrinker's candidates share it). None: no attribute does.
    repair_attrs: Callable[[dict, list[Shape]], dict] | None = None
    # Parameters that are state, not weights (batch_norm's running statistics, an RNN's initial
    # states): model-level backends and reproducers register them as buffers (saved in the
    # state_dict, never trained), every other parameter as an nn.Parameter.
    buffers: frozenset[str] = frozenset()
    # torch runs the op on cuDNN's RNN kernels on CUDA, and the torch backends ask this one fact
    # (TorchEager._on_cudnn_rnn): those kernels refuse non-contiguous parameters (torch-layout keeps
    # the op's contiguous there), run a backward in training mode only (torch-module-grad, in eval
    # mode, leaves the op out there), and approximate their activations even with TF32 off (the
    # strict run turns cuDNN off; torch-eager's precision policy caps the error it explains).
    cudnn_rnn: bool = False
    # False for an op nobody reviewed the numerics of: a plugin's op whose `numerics` is the
    # default Numerics() (register_op), as the ops derived from an op database will be. The oracle then
    # measures what a reviewer would have declared (fuzzer/oracle/undeclared.py).
    declares_numerics: bool = True
    # False where jax cannot differentiate the op's jax implementation, so jax-grad skips it.
    jax_differentiable: bool = True
    # False where torch or jax does not implement the op's second derivative (its backward's own
    # backward), so the double-gradient backends (fuzzer/backends/second_order.py) skip it.
    second_order: bool = True
    # The op this one computes in a torch.autograd.Function with a backward of ours (ops/autograd_function.py):
    # gradient references differentiate that op's stock implementation instead; "" for every other op.
    custom_gradient_of: str = ""
    # The integer and bool dtypes (fuzzer/exact_dtypes.py) the op runs on, judged exactly against
    # `exact_reference` (fuzzer/oracle/exact.py); () for a float-only op.
    exact_dtypes: tuple[str, ...] = ()
    # (inputs, params, attrs) -> the result in torch's dtype and semantics on integer and bool operands
    # (sum of int32 is int64); None where `reference`, run on them, already is that.
    exact_reference: Callable | None = None
    # Why jax's integer semantics differ from torch's, where they may (an op derived from torch's op
    # database, whose jax twin was checked on float samples only): jax backends are then judged against
    # jax eager's own run (fuzzer/oracle/exact.py).
    jax_exact_differs: str = ""
    # False for an integer-only op (bitwise, shifts): float backends never draw it.
    float_dtypes: bool = True
    # How it runs on complex64 and complex128 (fuzzer/complex_dtypes.py; "" not at all): its `reference`
    # is also the math on complex128, each component judged by the float model (fuzzer/oracle/complex.py).
    # "complex": a complex result from operands of one kind; "promotes": a pointwise op whose real operand
    # beside a complex one is made complex (torch and jax promote; a matmul of float32 and complex64 raises
    # in torch); "real": a real result (abs, angle), the reference's real part (fuzzer/ops/_complex.py).
    complex_dtypes: str = ""
    # Why jax's complex convention differs from torch's (and numpy's), where it does (a branch cut on
    # another side): jax backends are then judged against jax eager's own run.
    jax_complex_differs: str = ""
    # The period of its complex result in a component of its operand (exp and sinh in the imaginary
    # part, sin in the real part: 2 pi; tanh: pi), where it has one: an operand a rounding of the dtype
    # moves a quarter of it leaves the result undefined there (fuzzer/oracle/complex.py).
    complex_period: float | None = None
    # Regions beyond the generic ones (attribute values, regime, layout, special values, sizes).
    regions: Regions | None = None
    ladder: Ladder | None = None  # its reduction or contraction axes, for the ladder regime
    branch_points: BranchPoints | None = None  # where its math or kernels switch (fuzzer/drawing/branch_points.py)
    family: str = ""
    # Forward-identical to another op (a custom autograd.Function, an autocast region): only gradient
    # backends tell them apart, so they are drawn only where named (--ops), never in a default campaign.
    named_only: bool = False
    notes: str = ""

    def arity_ok(self, n: int) -> bool:
        return self.arity[0] <= n <= self.arity[1]

    def arity_text(self) -> str:
        low, high = self.arity
        return f"{low} input{'s' * (low != 1)}" if low == high else f"{low} to {high} inputs"

    def taken_attrs(self) -> set[str]:
        return {name.removesuffix("?") for name in self.attrs or ()}

    def required_attrs(self) -> set[str]:
        return {name for name in self.attrs or () if not name.endswith("?")}

    def impl(self, family: str) -> Callable:
        numpy = self.reference if self.numerics.low_precision_model is None else self.in_numpy
        return {"numpy": numpy, "torch": self.torch, "jax": self.jax}[family]

    def in_numpy(self, xs: list, ps: dict, attrs: dict):
        """The op in numpy on operands of any dtype: the float64 reference, or on operands of another
        dtype the honest kernel model the op declares (Numerics.low_precision_model), if any."""
        model = self.numerics.low_precision_model
        if model is None or np.asarray(xs[0]).dtype == np.float64:
            return self.reference(xs, ps, attrs)
        return model(xs, ps, attrs)


_REGISTRY: dict[str, OpDef] | None = None


def registry() -> dict[str, OpDef]:
    """All ops, discovered from the modules of this package (no central list)."""
    global _REGISTRY
    if _REGISTRY is None:
        found: dict[str, OpDef] = {}
        for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
            if module_info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{__name__}.{module_info.name}")
            for op in getattr(module, "OPS", []):
                if op.name in found:
                    raise RuntimeError(f"op {op.name!r} is declared twice")
                found[op.name] = _with_family(op, module_info.name)
        _REGISTRY = found
    return _REGISTRY


def _with_family(op: OpDef, family: str) -> OpDef:
    return op if op.family else replace(op, family=family)


def register_op(op: OpDef) -> None:
    """Adds a plugin's op (PluginAPI.add_op) to the registry; a name already taken is refused. An
    op whose numerics are the default Numerics() declares nothing (OpDef.declares_numerics): a shipped
    op's defaults were reviewed, a plugin's were not."""
    ops = registry()
    if op.name in ops:
        raise UserError(f"Op '{op.name}' is already declared; give the plugin's op another name.")
    ops[op.name] = replace(op, family=op.family or "plugin", declares_numerics=op.numerics != Numerics())


def get_op(name: str) -> OpDef:
    """A hand-written or plugin op, a program's statement (fuzzer/programs/statements.py), else one derived from
    torch's op database (fuzzer/ops/derived/), read from its table only when a name is none of those."""
    ops = registry()
    if name in ops:
        return ops[name]
    from fuzzer.programs.statements import STATEMENTS

    if name in STATEMENTS:
        return STATEMENTS[name]
    from fuzzer.ops.derived import derived_registry, problem

    derived = derived_registry(build=name.startswith("torch."))  # a derived op's name: build a missing table
    if name not in derived:
        why = f" ({problem()})" if name.startswith("torch.") and problem() else ""
        raise UserError(f"Unknown op '{name}'{did_you_mean(name, {**ops, **derived})}; run `fuzz ops` to list them{why}.")
    return derived[name]


def float_op_names() -> list[str]:
    """The hand-written and plugin ops a float backend runs (a float campaign's, before its backends'
    support is asked): the integer-only ops and the comparisons, whose results are not floats, left out."""
    return sorted(name for name, op in registry().items() if op.float_dtypes and not op.named_only)


def known_op_names() -> set[str]:
    """Every name get_op resolves: the hand-written and plugin ops, programs' statements (a known-bug entry
    may name `masked_fill_`), and those derived from torch's op database where its table is here already
    (a known-bug entry may name one; reading the registry never builds it)."""
    from fuzzer.ops.derived import derived_registry
    from fuzzer.programs.statements import STATEMENTS

    return set(registry()) | set(STATEMENTS) | set(derived_registry())


def parse_op_list(text: str | None) -> list[str]:
    """'conv2d,layer_norm' -> validated names; None or '' -> all hand-written and plugin ops; the word
    `derived` stands for every op derived from torch's op database (opt-in, fuzzer/ops/derived/)."""
    if not text:
        return sorted(registry())
    names = [n.strip() for n in text.split(",") if n.strip()]
    if "derived" in names:
        from fuzzer.ops.derived import derived_registry

        at = names.index("derived")
        names[at:at + 1] = sorted(derived_registry(build=True))
    for name in names:
        get_op(name)
    return list(dict.fromkeys(names))
