"""Pointwise ops: the builders every pointwise family uses (`unary`, `binary`), the classic
activations (relu, gelu, tanh, sigmoid) and the broadcasting binary ops.

Binary ops broadcast like numpy: the second operand is drawn to broadcast into the first.
"""

from __future__ import annotations

import functools
import math
import operator
from dataclasses import replace

import numpy as np

from fuzzer.drawing.branch_points import BranchPoints, declare, fixed
from fuzzer.ops import API_KEYWORDS, API_PATH, WRAPS, OpDef
from fuzzer.ops._common import check, like, st
from fuzzer.ops._complex import complex_semantics
from fuzzer.ops._exact import EXACT_DTYPES, INTEGERS, integer_semantics, promoted
from fuzzer.ops.numerics import Numerics


def same_shape(attrs, shapes):
    return shapes[0]


def any_rank(shape):
    return 1 <= len(shape) <= 5


def _no_attrs(draw, shapes):
    return {}


def _lookup(module, path: str):
    for name in path.split("."):
        module = getattr(module, name)
    return module


def torch_function(path: str, keywords: dict[str, str] | None = None):
    """An implementation calling torch.<path>(*inputs, **attrs): attrs named as torch's keywords,
    or renamed by `keywords` ({attr: keyword})."""

    def run(xs, ps, attrs):
        import torch

        return _lookup(torch, path)(*xs, **_renamed(attrs, keywords))

    return _mark(run, "torch." + path, keywords)


def jax_function(path: str, keywords: dict[str, str] | None = None):
    """An implementation calling jax.<path>(*inputs, **attrs), e.g. "numpy.expm1", "nn.silu";
    `keywords` as torch_function's ({"dim": "axis"})."""

    def run(xs, ps, attrs):
        import jax

        return _lookup(jax, path)(*xs, **_renamed(attrs, keywords))

    return _mark(run, "jax." + path, keywords)


def _renamed(attrs: dict, keywords: dict[str, str] | None) -> dict:
    return {keywords.get(k, k): v for k, v in attrs.items()} if keywords else attrs


def _mark(run, path: str, keywords: dict[str, str] | None):
    setattr(run, API_PATH, path)
    setattr(run, API_KEYWORDS, keywords or {})
    return run


def _implementation(impl, framework_function):
    """A path under the framework, or a function (*inputs, **attrs) that imports what it uses."""
    if isinstance(impl, str):
        return framework_function(impl)
    def run(xs, ps, attrs):
        return impl(*xs, **attrs)

    setattr(run, WRAPS, impl)
    return run


def unary(name, reference, torch_impl, jax_impl, *, draw_attrs=_no_attrs, attrs=(), choices=None, numerics=Numerics(), notes=""):
    """A one-input op whose output has its input's shape.

    `reference(x, **attrs)` is numpy from the math (its result is cast back to x's dtype);
    `numerics` as OpDef's, its `forward_error(x, **attrs)` and `undefined(x, **attrs)` taking the one
    input; torch_impl / jax_impl as `_implementation`.
    """
    return OpDef(
        name=name,
        infer=same_shape,
        reference=lambda xs, ps, attrs: like(xs[0], reference(xs[0], **attrs)),
        torch=_implementation(torch_impl, torch_function),
        jax=_implementation(jax_impl, jax_function),
        accepts=any_rank,
        draw_attrs=draw_attrs,
        attrs=attrs,
        choices=choices or {},
        numerics=replace(numerics, forward_error=_on_first_operand(numerics.forward_error),
                         undefined=_on_first_operand(numerics.undefined)),
        notes=notes,
    )


def _on_first_operand(fn):
    """`fn(x, **attrs)` as an OpDef-level (inputs, params, attrs) function (None stays None)."""
    if fn is None:
        return None
    return functools.wraps(fn)(lambda xs, ps, attrs: fn(xs[0], **attrs))


def _broadcast_infer(attrs, shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        check(False, f"shapes {[list(s) for s in shapes]} do not broadcast")


def _draw_broadcast_operand(draw, first, attrs):
    """Another operand that broadcasts into `first`: some dims set to 1, maybe fewer leading dims."""
    drop = draw(st.integers(0, len(first) - 1))
    other = [1 if draw(st.booleans()) and draw(st.booleans()) else d for d in first[drop:]]
    return [tuple(other)]


def binary(name, reference, torch_impl, jax_impl, *, draw_attrs=_no_attrs, attrs=(), choices=None, numerics=Numerics(), notes=""):
    """A two-input op broadcasting like numpy; `reference(a, b, **attrs)`, impls as in `unary`."""
    return OpDef(
        name=name,
        infer=_broadcast_infer,
        reference=lambda xs, ps, attrs: like(xs[0], reference(xs[0], xs[1], **attrs)),
        torch=_implementation(torch_impl, torch_function),
        jax=_implementation(jax_impl, jax_function),
        accepts=any_rank,
        draw_attrs=draw_attrs,
        attrs=attrs,
        choices=choices or {},
        draw_operands=_draw_broadcast_operand,
        arity=(2, 2),
        numerics=numerics,
        notes=notes,
    )


# -- activations ----------------------------------------------------------------


def _entrywise(function, x):
    # A math function entry by entry (numpy has no erf): over a list, 1.7x faster than np.vectorize.
    x = np.asarray(x, dtype=np.float64)
    return np.fromiter(map(function, x.ravel().tolist()), dtype=np.float64, count=x.size).reshape(x.shape)


def erf(x):
    return _entrywise(math.erf, x)


def sigmoid(x):
    # Written per sign so that exp never overflows and, for x < 0, no 1 - p cancellation
    # loses the tiny values: sigmoid(x) = e^x / (1 + e^x) there.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _gelu_reference(x, approximate="none"):
    """approximate="none" (torch's default): exact GELU, x * Phi(x) = x/2 (1 + erf(x / sqrt 2)).
    approximate="tanh": x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), ~1e-3 away from the exact form.
    A case stored without the attribute is the exact form.

    Computed without the cancellation of 1 + erf (or tanh) for x << 0, as x/2 erfc(-x / sqrt 2) and
    x sigmoid(2u): gelu(-8.86) is -3.5e-18, which jax gives, not the -0.0 of the float64 sum, whose
    product with inf (nan) made jax's -inf a false finding (GPU campaign case 52)."""
    x64 = np.asarray(x, dtype=np.float64)
    if approximate == "tanh":
        return x64 * sigmoid(2.0 * math.sqrt(2.0 / math.pi) * (x64 + 0.044715 * x64**3))
    return 0.5 * x64 * _entrywise(math.erfc, -x64 / math.sqrt(2.0))


GELU_FORMS = ("none", "tanh")


def _draw_gelu(draw, shapes):
    return {"approximate": draw(st.sampled_from(GELU_FORMS))}


def _jax_gelu(x, approximate="none"):
    import jax

    return jax.nn.gelu(x, approximate=approximate == "tanh")


def _maximum_reference(a, b):
    """The larger; nan if either is nan; +0 is larger than -0 (IEEE 754-2019 maximum, as jax:
    torch and numpy return one of two zeros by position)."""
    both_zero = (a == 0) & (b == 0)
    return np.where(both_zero, np.where(np.signbit(a) & np.signbit(b), -0.0, 0.0), np.maximum(a, b))


def _minimum_reference(a, b):
    """The smaller; nan if either is nan; -0 is smaller than +0 (IEEE 754-2019 minimum)."""
    both_zero = (a == 0) & (b == 0)
    return np.where(both_zero, np.where(np.signbit(a) | np.signbit(b), -0.0, 0.0), np.minimum(a, b))


# -- where: select by a comparison --------------------------------------------------

# The Python operators: what users write, and the same on numpy, torch and jax arrays.
COMPARISONS = {"gt": operator.gt, "lt": operator.lt, "ge": operator.ge, "le": operator.le}


def _draw_compare(draw, shapes):
    return {"compare": draw(st.sampled_from(sorted(COMPARISONS)))}


def _where_reference(a, b, compare):
    """where(a <compare> b, a, b): a max/min written as a select. Continuous (at a == b both
    branches agree), so not `exact`; a nan makes every comparison false, selecting b."""
    return np.where(COMPARISONS[compare](a, b), a, b)


def _torch_where(a, b, compare):
    import torch

    return torch.where(COMPARISONS[compare](a, b), a, b)


def _jax_where(a, b, compare):
    import jax

    return jax.numpy.where(COMPARISONS[compare](a, b), a, b)


# Thresholds float32 holds exactly: a backend compares float32 data with float32(threshold),
# the reference with the threshold itself, and those must be the same comparison.
THRESHOLDS = (0.0, 0.5, -0.5, 1.0, -1.0, 0.125, 2.0)


def _draw_threshold(draw, shapes):
    return {**_draw_compare(draw, shapes), "threshold": draw(st.sampled_from(THRESHOLDS))}


def _where_threshold_reference(a, b, compare, threshold):
    """where(a <compare> threshold, a, b): jumps from b to a where a crosses the threshold,
    so a rounding error in a can move the output by |a - b|: an `exact` op."""
    return np.where(COMPARISONS[compare](a, threshold), a, b)


def _torch_where_threshold(a, b, compare, threshold):
    import torch

    return torch.where(COMPARISONS[compare](a, threshold), a, b)


def _jax_where_threshold(a, b, compare, threshold):
    import jax

    return jax.numpy.where(COMPARISONS[compare](a, threshold), a, b)


OPS = [
    declare(unary("relu", lambda x: np.maximum(x, 0), "relu", "nn.relu"), fixed(zero=0.0)),
    unary(
        "gelu",
        _gelu_reference,
        "nn.functional.gelu",
        _jax_gelu,
        draw_attrs=_draw_gelu,
        attrs=("approximate",),
        choices={"approximate": GELU_FORMS},
        # Both forms compute x/2 (1 + erf or tanh): for x << 0 the sum cancels with an error
        # ~roundoff * |x| / 2, which the rounding model's gelu(|x|) ~ |x| magnitude already allows.
        notes="approximate drawn: 'none' (erf) or 'tanh'; the two differ by ~1e-3",
    ),
    # Eigen's float tanh (XLA:CPU, torch's vectorized kernels) returns x below 0.0004 and clamps at 7.9053.
    declare(unary("tanh", np.tanh, "tanh", "numpy.tanh"), fixed(small=0.0004, saturation=7.90531110763549805)),
    unary("sigmoid", sigmoid, "sigmoid", "nn.sigmoid"),
    integer_semantics(binary("add", np.add, "add", "numpy.add"), EXACT_DTYPES, promoted(np.add)),
    integer_semantics(binary("sub", np.subtract, "sub", "numpy.subtract"), INTEGERS, promoted(np.subtract)),
    integer_semantics(binary("mul", np.multiply, "mul", "numpy.multiply"), EXACT_DTYPES, promoted(np.multiply)),
    binary("div", np.divide, "div", "numpy.divide", notes="true division; x / 0 = +-inf, 0 / 0 = nan",
           numerics=Numerics(zero_sign_matters=True, why={"zero_sign_matters": "x / +-0 is +-inf by the zero's sign"})),
    integer_semantics(binary("maximum", _maximum_reference, "maximum", "numpy.maximum"), INTEGERS, promoted(np.maximum)),
    integer_semantics(binary("minimum", _minimum_reference, "minimum", "numpy.minimum"), INTEGERS, promoted(np.minimum)),
    binary(
        "pow",
        np.power,
        "pow",
        "numpy.power",
        numerics=Numerics(zero_sign_matters=True, integer_matters=True, why={
            "zero_sign_matters": "0 ** negative is +-inf by the zero's sign (odd exponents), and a base just below 0 is nan",
            "integer_matters": "a negative base is nan unless the exponent is an integer"}),
        notes="a ** b; a negative base with a non-integer exponent is nan, 0 ** negative is inf; "
        "random float exponents make most negative bases nan",
    ),
    binary(
        "atan2",
        np.arctan2,
        "atan2",
        "numpy.arctan2",
        numerics=Numerics(zero_sign_matters=True, why={"zero_sign_matters": "atan2(+-0, b < 0) is +-pi: the branch cut follows a's sign"}),
        notes="atan2(a, b): the angle of the point (x=b, y=a), in [-pi, pi]; the branch cut is the "
        "negative x axis, where atan2(+-0, b < 0) = +-pi",
    ),
    integer_semantics(binary(
        "where",
        _where_reference,
        _torch_where,
        _jax_where,
        draw_attrs=_draw_compare,
        attrs=("compare",),
        choices={"compare": tuple(sorted(COMPARISONS))},
        notes="where(a <compare> b, a, b), compare in gt/lt/ge/le",
    ), INTEGERS, promoted(_where_reference)),
    declare(binary(
        "where_threshold",
        _where_threshold_reference,
        _torch_where_threshold,
        _jax_where_threshold,
        draw_attrs=_draw_threshold,
        attrs=("compare", "threshold"),
        choices={"compare": tuple(sorted(COMPARISONS))},
        numerics=Numerics(exact=True, why={"exact": "a comparison: one rounding of a can move it across the threshold, a whole step"}),
        notes="where(a <compare> threshold, a, b), compare in gt/lt/ge/le, thresholds exact in float32",
    ), BranchPoints(("threshold",), lambda attrs, dtype: {"threshold": attrs["threshold"]})),
]
OPS = complex_semantics(OPS, {"tanh": "complex", "add": "promotes", "sub": "promotes", "mul": "promotes", "div": "promotes"},
                        periods={"tanh": np.pi})
