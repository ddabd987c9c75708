"""Unary math and activations, one `unary(...)` row each (builder in elementwise.py).

Non-finite results stay where the math puts them (log(0) = -inf, sqrt(-1) = nan): the
oracle requires a backend to match them. Rounding: every op here is evaluated by a
correct float32 implementation to a few ulps of its output, which the oracle's rounding
model allows, except where an op subtracts nearly equal numbers inside itself
(tanhshrink; elu written as exp(x) - 1), or carries its operand's rounding beyond its own (sin
and cos of a large argument): those declare `forward_error`.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fuzzer.drawing.branch_points import BranchPoints, declare, fixed, overflow_boundary
from fuzzer.errors import OpUnsupported
from fuzzer.ops._common import st
from fuzzer.ops._complex import complex_semantics
from fuzzer.ops._exact import integer_semantics
from fuzzer.ops.elementwise import erf, sigmoid, unary
from fuzzer.ops.numerics import PIECEWISE_CONSTANT, Numerics


def _argument_rounding(x):
    """sin and cos of a computed x carry x's rounding, a roundoff of |x| (slope at most 1), which no
    bound on their own result (at most 1) covers: past |x| ~ 1e7 in float32 it exceeds the period,
    and the sign of sin(sum of values near 1e18) is the rounding's (1-hour campaign case 154)."""
    return np.abs(x)


def _shifted_exponential(x):
    """sinh and cosh computed as exp(|x| + log(1/2)) (XLA's, and a common way to keep e^x/2 from
    overflowing early) round the shifted argument: a relative error of |x| roundoffs in the result,
    14 ulps at x = 33 in float64 (jax-eager's cosh(33.14) = ...854.81 against ...855.03), which a
    cos after it turns into a sign (H200 campaign, seed 359)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.abs(np.cosh(x)) * np.abs(x)


def _rsqrt_reference(x):
    """1 / sqrt(x): rsqrt(+0) = inf, rsqrt(-0) = 1 / -0 = -inf (IEEE), rsqrt(x < 0) = nan."""
    return 1.0 / np.sqrt(x)


def _sign_reference(x):
    """-1, 0 or 1; sign(+-0) = 0 (either zero), sign(nan) = nan."""
    return np.sign(x)


def _round_reference(x):
    """To the nearest integer, ties to even (like torch.round and jnp.round, unlike Python 2 or C
    round): 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> -0."""
    return np.rint(x)


def _silu_reference(x):
    """x * sigmoid(x), with the sign-split sigmoid: no overflow, relative accuracy for x << 0."""
    return x * sigmoid(x)


def _softplus(z):
    """log(1 + e^z) without overflow: max(z, 0) + log1p(e^-|z|)."""
    return np.logaddexp(0.0, z)


def _softplus_reference(x, beta=1.0, threshold=20.0):
    """log(1 + e^(beta x)) / beta, and x itself where beta * x > threshold (torch's switch, a
    strict >). The two differ there by log1p(e^-threshold) / beta, below the oracle's floor for
    the thresholds drawn (>= 10), so a backend rounding beta * x across the switch still agrees."""
    return np.where(beta * x > threshold, x, _softplus(beta * x) / beta)


# torch's defaults (beta 1, threshold 20) first; thresholds stay >= 10 (see the reference).
SOFTPLUS_BETAS = (1.0, 0.5, 2.0, 3.0, 10.0)
SOFTPLUS_THRESHOLDS = (20.0, 10.0, 15.0, 30.0)


def _draw_softplus(draw, shapes):
    return {"beta": draw(st.sampled_from(SOFTPLUS_BETAS)), "threshold": draw(st.sampled_from(SOFTPLUS_THRESHOLDS))}


def _jax_softplus(x, beta=1.0, threshold=20.0):
    import jax

    return jax.numpy.where(beta * x > threshold, x, jax.nn.softplus(beta * x) / beta)


def _mish_reference(x):
    """x * tanh(softplus(x)), softplus(x) = log(1 + e^x)."""
    return x * np.tanh(_softplus(x))


def _jax_mish(x):
    import jax

    if not hasattr(jax.nn, "mish"):
        raise OpUnsupported(f"jax {jax.__version__} has no jax.nn.mish")
    return jax.nn.mish(x)


def _hardsigmoid_reference(x):
    """relu6(x + 3) / 6: 0 below -3, 1 above 3, linear between."""
    return np.clip(x + 3.0, 0.0, 6.0) / 6.0


def _hardswish_reference(x):
    """x * relu6(x + 3) / 6, multiplied first as torch and jax do: in a narrow dtype x * 6 overflows
    for |x| past a sixth of its largest value, which the oracle's same-dtype run then shows."""
    return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0


def _leaky_relu_reference(x, negative_slope=0.01):
    """x where x > 0, negative_slope * x elsewhere (at 0 both are 0)."""
    return np.where(x > 0, x, negative_slope * x)


def _draw_leaky_relu(draw, shapes):
    return {"negative_slope": draw(st.sampled_from((0.01, 0.2, 0.1, 0.02, 0.3, 0.0, 1.0)))}


def _elu_reference(x, alpha=1.0):
    """x where x > 0, alpha * (e^x - 1) elsewhere (written with expm1)."""
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0)))


def _elu_error(x, alpha=1.0):
    """torch computes alpha * (exp(x) - 1) for x <= 0: exp(x) rounded by ~roundoff * e^x, and the
    subtraction cancels for x near 0, where the output is only ~alpha * x."""
    return np.abs(alpha) * np.where(x > 0, 0.0, np.exp(np.minimum(x, 0.0)))


def _draw_elu(draw, shapes):
    return {"alpha": draw(st.sampled_from((1.0, 0.5, 2.0, 1.6732632423543772)))}


def _logsigmoid_reference(x):
    """log(sigmoid(x)) = -softplus(-x), stable for either sign."""
    return -_softplus(-x)


def _tanhshrink_reference(x):
    """x - tanh(x)."""
    return x - np.tanh(x)


def _tanhshrink_error(x):
    """x - tanh(x) cancels for small x: tanh(x) ~ x carries ~roundoff * |x| while the result is ~x^3 / 3."""
    return np.abs(np.tanh(x))


def _jax_tanhshrink(x):
    import jax

    return x - jax.numpy.tanh(x)


# Branch points (fuzzer/drawing/branch_points.py): where these ops' math or their kernels switch path.
AT_ZERO = fixed(zero=0.0)  # relu-likes, sign, and the edge of log's and sqrt's domain
# exp-like functions overflow the dtype past log(max); exp's result turns subnormal below log(tiny).
OVERFLOW_POINT = BranchPoints(("overflow",), lambda attrs, dtype: {"overflow": overflow_boundary(dtype)})
EXPONENTIAL_POINTS = BranchPoints(("overflow", "subnormal"), lambda attrs, dtype: {
    "overflow": overflow_boundary(dtype), "subnormal": float(np.log(np.finfo(dtype).tiny))})
# sinh and cosh are e^|x| / 2: they overflow log 2 later (XLA computes exp(|x| + log(1/2)) to get there).
HALF_EXPONENTIAL_POINTS = BranchPoints(("overflow",), lambda attrs, dtype: {"overflow": overflow_boundary(dtype, shift=-np.log(2.0))})
HARD_BENDS = fixed(low=-3.0, high=3.0)  # hardswish and hardsigmoid are piecewise at +-3
# Ties go to even: 0.5 down, 1.5 up; 2^22 + 0.5 is where an add-2^23 trick's rounding meets the tie.
ROUND_TIES = fixed(tie=0.5, odd_tie=1.5, negative_tie=-2.5, large_tie=2.0**22 + 0.5)
# fdlibm's (and so many libms') range reductions: atan at 7/16, 11/16, 19/16 and 39/16; erf at
# 0.84375, 1.25, 1 / 0.35 and 6, where it switches rational approximations.
ATAN_POINTS = fixed(seven_sixteenths=7 / 16, eleven_sixteenths=11 / 16, nineteen_sixteenths=19 / 16, thirty_nine_sixteenths=39 / 16)
ERF_POINTS = fixed(small=0.84375, medium=1.25, large=1 / 0.35, saturated=6.0)
# beta * x > threshold returns x itself; exp(beta * x) overflows past log(max) / beta where the
# threshold is above that.
SOFTPLUS_POINTS = BranchPoints(("threshold", "overflow"), lambda attrs, dtype: {
    "threshold": attrs.get("threshold", 20.0) / attrs.get("beta", 1.0),
    "overflow": overflow_boundary(dtype) / attrs.get("beta", 1.0)})

NAN_BELOW_ZERO = Numerics(zero_sign_matters=True, why={"zero_sign_matters": "the result at +-0 and just below 0 differs in class"})
PERIODIC = Numerics(forward_error=_argument_rounding, period=2 * np.pi, why={
    "forward_error": "a computed argument's rounding (a roundoff of |x|) is carried whole",
    "period": "an argument rounding moves by a quarter period leaves the result anywhere in [-1, 1]"})
SHIFTED_EXPONENTIAL = Numerics(forward_error=_shifted_exponential, why={
    "forward_error": "computed as exp(|x| + log(1/2)), which rounds the shifted argument (XLA)"})

OPS = [
    declare(unary("exp", np.exp, "exp", "numpy.exp", notes="overflows to inf above ~88.7 in float32"), EXPONENTIAL_POINTS),
    declare(unary("expm1", np.expm1, "expm1", "numpy.expm1", notes="e^x - 1 without cancellation near 0"), OVERFLOW_POINT),
    declare(unary("log", np.log, "log", "numpy.log", numerics=NAN_BELOW_ZERO, notes="log(0) = -inf, log(x < 0) = nan"), AT_ZERO),
    declare(unary("log1p", np.log1p, "log1p", "numpy.log1p", notes="log1p(-1) = -inf, log1p(x < -1) = nan", numerics=Numerics(
        integer_matters=True, why={"integer_matters": "a computed operand a rounding moves onto -1 (float32 tanh(-9.88) is -1) "
                                                      "meets the pole: -inf"})), fixed(pole=-1.0)),
    declare(unary("sqrt", np.sqrt, "sqrt", "numpy.sqrt", numerics=NAN_BELOW_ZERO, notes="sqrt(x < 0) = nan, sqrt(-0) = -0"), AT_ZERO),
    declare(unary("rsqrt", _rsqrt_reference, "rsqrt", "lax.rsqrt", numerics=Numerics(
        zero_sign_matters=True, why={"zero_sign_matters": "rsqrt(+-0) is +-inf, and nan just below 0"})), AT_ZERO),
    integer_semantics(unary("abs", np.abs, "abs", "numpy.abs", notes="on integers abs(INT_MIN) wraps to INT_MIN")),
    integer_semantics(unary("neg", np.negative, "neg", "numpy.negative", notes="on integers -INT_MIN wraps to INT_MIN")),
    declare(unary("sign", _sign_reference, "sign", "numpy.sign", numerics=PIECEWISE_CONSTANT), AT_ZERO),
    unary("sin", np.sin, "sin", "numpy.sin", numerics=PERIODIC),
    unary("cos", np.cos, "cos", "numpy.cos", numerics=PERIODIC),
    declare(unary("sinh", np.sinh, "sinh", "numpy.sinh", numerics=SHIFTED_EXPONENTIAL), HALF_EXPONENTIAL_POINTS),
    declare(unary("cosh", np.cosh, "cosh", "numpy.cosh", numerics=SHIFTED_EXPONENTIAL), HALF_EXPONENTIAL_POINTS),
    unary("asinh", np.arcsinh, "asinh", "numpy.arcsinh"),
    declare(unary("atan", np.arctan, "atan", "numpy.arctan"), ATAN_POINTS),
    declare(unary("erf", erf, "erf", "lax.erf"), ERF_POINTS),
    declare(unary("reciprocal", lambda x: 1.0 / x, "reciprocal", "numpy.reciprocal", notes="1 / +-0 = +-inf", numerics=Numerics(
        zero_sign_matters=True, why={"zero_sign_matters": "1 / +-0 is +-inf by the zero's sign"})), fixed(pole=0.0)),
    unary("square", np.square, "square", "numpy.square"),
    declare(unary("floor", np.floor, "floor", "numpy.floor", numerics=PIECEWISE_CONSTANT), fixed(integer=1.0, negative_integer=-1.0)),
    declare(unary("round", _round_reference, "round", "numpy.round", numerics=PIECEWISE_CONSTANT, notes="ties to even"), ROUND_TIES),
    unary("silu", _silu_reference, "nn.functional.silu", "nn.silu"),
    declare(unary(
        "softplus",
        _softplus_reference,
        "nn.functional.softplus",
        _jax_softplus,
        draw_attrs=_draw_softplus,
        attrs=("beta", "threshold"),
        notes="jax has no beta/threshold: written as where(beta x > threshold, x, softplus(beta x) / beta)",
    ), SOFTPLUS_POINTS),
    declare(unary("mish", _mish_reference, "nn.functional.mish", _jax_mish), fixed(softplus_threshold=20.0)),
    declare(unary("hardswish", _hardswish_reference, "nn.functional.hardswish", "nn.hard_swish"), HARD_BENDS),
    # torch implements no derivative of hardsigmoid_backward (torch 2.13).
    replace(declare(unary("hardsigmoid", _hardsigmoid_reference, "nn.functional.hardsigmoid", "nn.hard_sigmoid"), HARD_BENDS),
            second_order=False),
    declare(unary(
        "leaky_relu",
        _leaky_relu_reference,
        "nn.functional.leaky_relu",
        "nn.leaky_relu",
        draw_attrs=_draw_leaky_relu,
        attrs=("negative_slope",),
    ), AT_ZERO),
    declare(unary("elu", _elu_reference, "nn.functional.elu", "nn.elu", draw_attrs=_draw_elu, attrs=("alpha",), numerics=Numerics(
        forward_error=_elu_error, why={"forward_error": "torch computes alpha * (exp(x) - 1), which cancels near 0"})), AT_ZERO),
    unary("logsigmoid", _logsigmoid_reference, "nn.functional.logsigmoid", "nn.log_sigmoid"),
    unary(
        "tanhshrink",
        _tanhshrink_reference,
        "nn.functional.tanhshrink",
        _jax_tanhshrink,
        numerics=Numerics(forward_error=_tanhshrink_error, why={"forward_error": "x - tanh(x) cancels for small x"}),
        notes="jax has no tanhshrink: written as x - tanh(x)",
    ),
]
OPS = complex_semantics(OPS, {**dict.fromkeys(("exp", "log", "sqrt", "neg", "sin", "cos", "sinh", "cosh", "square", "reciprocal"),
                                               "complex"), "abs": "real"},
                        jax_differs={"sqrt": "on its branch cut, the negative real axis, jax's sqrt ignores the sign of a zero "
                                             "imaginary part: sqrt(-4 - 0j) is +2j there, -2j in C99, numpy and torch"},
                        periods=dict.fromkeys(("exp", "sin", "cos", "sinh", "cosh"), 2 * np.pi))
