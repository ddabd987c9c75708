"""The op registry: every module in this package declares its ops once, as `OPS = [OpDef(...)]`.

An OpDef carries everything about one op: how to draw valid attributes for
given input shapes, the shape rule, the parameters it needs, a float64 numpy
reference written from the math, and the torch and jax implementations.
Backends materialize a graph by calling `op.impl(family)`; nothing else in the
code base knows about individual ops. Adding an op touches one file here.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field, replace
from typing import Callable

from fuzzer.errors import UserError, did_you_mean

Shape = tuple[int, ...]
# Marks on implementations made by builders, so a reproducer can write them as source
# (fuzzer/op_source.py): the framework function called with (*inputs, **attrs), e.g.
# "torch.nn.functional.silu", or the plain function (*inputs, **attrs) that is called; and
# the keywords attributes are passed as where the API names them otherwise ({"dim": "axis"}).
API_PATH = "api_path"
API_KEYWORDS = "api_keywords"
WRAPS = "wraps"
# (draw, input shapes) -> attrs; `draw` is hypothesis's draw function.
AttrDrawer = Callable[[Callable, list[Shape]], dict]


@dataclass(frozen=True)
class Regions:
    """The regions an op's kernels switch on that fuzzer/regions.py's generic keys miss: `of(attrs,
    operand shapes)` gives the keys a node exercises, without the op's name ("batch=broadcast"),
    and `declared` is every key it can give."""

    declared: tuple[str, ...]
    of: Callable[[dict, list[Shape]], set[str]]


def _no_params(attrs: dict, shapes: list[Shape]) -> dict[str, Shape]:
    return {}


def _no_attrs(draw: Callable, shapes: list[Shape]) -> dict:
    return {}


@dataclass(frozen=True)
class OpDef:
    name: str
    infer: Callable[[dict, list[Shape]], Shape]  # raises ShapeError with the broken rule
    reference: Callable  # (inputs, params, attrs) -> np.ndarray; dtype-generic numpy
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
    # Multiplies the oracle's dtype tolerance: how much rounding error this op may amplify.
    sensitivity: float = 1.0
    # (inputs, params, attrs) -> per-element bound of the error a correct implementation makes,
    # in units of roundoff, where it exceeds |output| (e.g. normalizing near-constant data);
    # the oracle's rounding model adds it as a systematic error (see oracle.py).
    forward_error: Callable | None = None
    # (inputs, params, attrs, unit roundoff) -> per-element bound of how far a correct kernel's
    # rounding of the op's own intermediates to the dtype moves its result, where that is not
    # linear in the roundoff (sdpa's scores: one rounding can turn a row's winning key into a tie);
    # the oracle's rounding model adds it like forward_error.
    intermediate_error: Callable | None = None
    # Piecewise-constant ops (floor, round, sign, argmax, comparison masks): a rounding error in
    # an input can move the output by a whole step, so the generator applies them only to graph
    # inputs (the same float32 numbers in every backend) and bfloat16 backends skip them (numpy
    # has no bfloat16 to round their inputs the way the backend does).
    exact: bool = False
    # Does the sign of a zero operand matter beyond the sign of the result (atan2(+-0, -1) = +-pi,
    # 1 / +-0 = +-inf, sqrt is nan just below zero)? The oracle then judges the results that depend
    # on the sign of a computed zero, a rounding artifact, as undefined (oracle.py, "Signed zeros").
    zero_sign_matters: bool = False
    # Does the class of a result change where an operand is exactly an integer (a negative base to a
    # non-integer power is nan)? The oracle then judges the results that depend on whether a computed
    # operand within rounding of an integer is that integer as undefined (oracle.py, "Signed zeros").
    integer_matters: bool = False
    # (inputs, params, attrs) -> mask of the entries the math leaves to convention, where IEEE and the
    # frameworks disagree (pow(-inf, 0.5): IEEE's +inf, numpy's and torch's sqrt-shortcut nan): the
    # oracle judges them, and what is computed from them, as undefined (oracle.py, "Signed zeros").
    undefined: Callable | None = None
    # A periodic op's period (sin, cos: 2 pi): where upstream rounding may move its operand by a
    # quarter period, its result may be anything in its range, which a few rounding runs cannot
    # sample; the oracle judges it as undefined there (oracle.py, _moved_a_quarter_period).
    period: float | None = None
    # (attrs, input shapes) -> attrs: re-derives the attributes that restate an input's shape
    # (layer_norm's normalized_shape, reshape's target) after the shrinker changed that shape;
    # never mutates `attrs` (the shrinker's candidates share it). None: no attribute does.
    repair_attrs: Callable[[dict, list[Shape]], dict] | None = None
    # Parameters that are state, not weights (batch_norm's running statistics, an RNN's initial
    # states): model-level backends and reproducers register them as buffers (saved in the
    # state_dict, never trained), every other parameter as an nn.Parameter.
    buffers: frozenset[str] = frozenset()
    # The op's torch implementation on CUDA (cuDNN) refuses non-contiguous parameters, so a
    # backend that relayouts weights (torch-layout) keeps this op's parameters contiguous there.
    cuda_contiguous_params: bool = False
    # A scan (cumsum) whose reduced-precision kernels may carry the running value in the tensor's
    # own dtype: torch's CUDA cumsum/cumprod in float16/bfloat16 do, and its maintainers call that
    # expected (pytorch#180150, #180155), so a bfloat16 running sum of 0.73s stalls at 256. The
    # bfloat16 model then scans in bfloat16 too (reference.py), and the allowance spans both kinds.
    scans_in_dtype: bool = False
    # Attributes a framework turns into a constant of the tensor's dtype before computing (a Python
    # scalar is a weak type in jax, and torch does the same for bfloat16: x + 1.1591796875 adds
    # 1.15625). The bfloat16 model rounds them too (reference.py): the exact-scalar rounding runs
    # beside it then leave the entries whose class hangs on that rounding undefined.
    weak_scalars: tuple[str, ...] = ()
    # False for an op nobody reviewed the numerics of: a plugin's op that sets none of the fields
    # NUMERICS_FIELDS (register_op), as the ops derived from an op database will be. The oracle then
    # measures what a reviewer would have declared (fuzzer/undeclared_numerics.py).
    declares_numerics: bool = True
    # False where jax cannot differentiate the op's jax implementation, so jax-grad skips it.
    jax_differentiable: bool = True
    # Regions beyond the generic ones (attribute values, regime, layout, special values, sizes).
    regions: Regions | None = None
    family: str = ""
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
        return {"numpy": self.reference, "torch": self.torch, "jax": self.jax}[family]


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


# The OpDef fields that say how an op rounds, where its result's class may change, and what the
# math leaves to convention: a shipped op's defaults among them are reviewed, a plugin's are not.
NUMERICS_FIELDS = ("sensitivity", "forward_error", "intermediate_error", "exact", "zero_sign_matters",
                   "integer_matters", "undefined", "period", "scans_in_dtype", "weak_scalars")


def register_op(op: OpDef) -> None:
    """Adds a plugin's op (PluginAPI.add_op) to the registry; a name already taken is refused. An
    op that sets none of NUMERICS_FIELDS declares nothing (OpDef.declares_numerics)."""
    ops = registry()
    if op.name in ops:
        raise UserError(f"Op '{op.name}' is already declared; give the plugin's op another name.")
    defaults = OpDef(name="", infer=None, reference=None, torch=None, jax=None, accepts=None)
    declares = any(getattr(op, name) != getattr(defaults, name) for name in NUMERICS_FIELDS)
    ops[op.name] = replace(op, family=op.family or "plugin", declares_numerics=declares)


def get_op(name: str) -> OpDef:
    ops = registry()
    if name not in ops:
        raise UserError(f"Unknown op '{name}'{did_you_mean(name, ops)}; run `fuzz ops` to list them.")
    return ops[name]


def parse_op_list(text: str | None) -> list[str]:
    """'conv2d,layer_norm' -> validated names; None or '' -> all ops."""
    if not text:
        return sorted(registry())
    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        get_op(name)
    return names
