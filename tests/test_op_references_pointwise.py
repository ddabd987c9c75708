"""The float64 references of the pointwise ops against values worked out by hand.

Expected values come from the defining equations written out here with plain Python
floats and `math`, never from torch, jax, or the reference itself; edge values (signed
zeros, infinities, nan, ties, thresholds) are written as the conventions the references
state in their docstrings.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from fuzzer.ops import get_op, registry

INF, NAN = math.inf, math.nan


def ref(name, *xs, **attrs):
    """Run an op's reference on float64 arrays (non-finite results are expected here)."""
    with np.errstate(all="ignore"):
        return get_op(name).reference([np.asarray(x, dtype=np.float64) for x in xs], {}, attrs)


def signs(values) -> list[bool]:
    return list(np.signbit(np.asarray(values)))


# -- unary math: (op, attrs, inputs, expected), each expected value from `math` or by hand -----

UNARY = [
    ("exp", {}, [0.0, 1.0, -2.0, -INF], [1.0, math.e, 1 / math.e**2, 0.0]),
    ("expm1", {}, [0.0, 1e-10, -1.0], [0.0, 1e-10 + 1e-20 / 2, 1 / math.e - 1]),
    ("log", {}, [1.0, math.e, 0.5, 0.0, -1.0, INF], [0.0, 1.0, -math.log(2), -INF, NAN, INF]),
    ("log1p", {}, [0.0, 1e-10, math.e - 1, -1.0, -2.0], [0.0, 1e-10 - 1e-20 / 2, 1.0, -INF, NAN]),
    ("sqrt", {}, [4.0, 2.0, 0.0, -1.0, INF], [2.0, math.sqrt(2), 0.0, NAN, INF]),
    ("rsqrt", {}, [4.0, 0.25, 0.0, -0.0, -1.0, INF], [0.5, 2.0, INF, -INF, NAN, 0.0]),
    ("abs", {}, [-2.5, 0.0, -INF], [2.5, 0.0, INF]),
    ("neg", {}, [2.5, -1.0, INF], [-2.5, 1.0, -INF]),
    ("sign", {}, [-3.5, 0.0, 2.0, -INF, NAN], [-1.0, 0.0, 1.0, -1.0, NAN]),
    ("sin", {}, [0.0, math.pi / 6, -math.pi / 2], [0.0, 0.5, -1.0]),
    ("cos", {}, [0.0, math.pi / 3, math.pi], [1.0, 0.5, -1.0]),
    ("sinh", {}, [0.0, 1.0, -2.0], [0.0, (math.e - 1 / math.e) / 2, -(math.e**2 - math.e**-2) / 2]),
    ("cosh", {}, [0.0, 1.0, -2.0], [1.0, (math.e + 1 / math.e) / 2, (math.e**2 + math.e**-2) / 2]),
    # asinh(x) = log(x + sqrt(x^2 + 1)); odd, so asinh(-1e6) is -asinh(1e6) (no cancellation).
    ("asinh", {}, [0.0, 1.0, -1e6], [0.0, math.log(1 + math.sqrt(2)), -math.log(1e6 + math.sqrt(1e12 + 1))]),
    ("atan", {}, [0.0, 1.0, -INF], [0.0, math.pi / 4, -math.pi / 2]),
    ("erf", {}, [0.0, 1.0, -0.5, INF], [0.0, 0.8427007929497149, -0.5204998778130465, 1.0]),
    ("reciprocal", {}, [4.0, -0.5, 0.0, -0.0, INF], [0.25, -2.0, INF, -INF, 0.0]),
    ("square", {}, [-3.0, 0.5, 1e200], [9.0, 0.25, INF]),
    ("floor", {}, [2.7, -2.1, -0.5, 3.0], [2.0, -3.0, -1.0, 3.0]),
    # Ties to even.
    ("round", {}, [0.5, 1.5, 2.5, -2.5, 2.6, -0.4], [0.0, 2.0, 2.0, -2.0, 3.0, -0.0]),
]


@pytest.mark.parametrize("name, attrs, x, expected", UNARY, ids=[row[0] for row in UNARY])
def test_unary_math_by_hand(name, attrs, x, expected):
    assert_allclose(ref(name, x, **attrs), expected, rtol=1e-15, atol=0, equal_nan=True)


def test_signed_zeros_of_unary_math():
    assert signs(ref("sqrt", [-0.0])) == [True]  # IEEE sqrt(-0) = -0
    assert signs(ref("round", [-0.4, -0.5])) == [True, True]
    assert signs(ref("abs", [-0.0])) == [False]


# -- activations --------------------------------------------------------------------


def logistic(v: float) -> float:
    return 1.0 / (1.0 + math.exp(-v))


def test_silu_is_x_times_sigmoid():
    xs = [-2.0, 0.0, 1.5, -40.0]
    assert_allclose(ref("silu", xs), [v * logistic(v) for v in xs], rtol=1e-14, atol=0)
    assert_allclose(ref("silu", [-800.0]), [-800.0 * math.exp(-800.0)], rtol=0, atol=1e-300)


def test_softplus_with_beta_and_its_threshold():
    x = [0.0, 1.0, -3.0, 5.0]
    assert_allclose(ref("softplus", x), [math.log(2), math.log(1 + math.e), math.log1p(math.exp(-3.0)), math.log1p(math.exp(5.0))], rtol=1e-15)
    beta = 2.0
    assert_allclose(ref("softplus", [1.0], beta=beta, threshold=20.0), [math.log1p(math.exp(2.0)) / 2], rtol=1e-15)
    # Above the threshold (beta * x > threshold) the result is x itself, not log(1 + e^(beta x)) / beta.
    assert_array_equal(ref("softplus", [10.5, 30.0], beta=1.0, threshold=10.0), [10.5, 30.0])
    assert_array_equal(ref("softplus", [6.0], beta=2.0, threshold=10.0), [6.0])
    # At the threshold itself (not strictly above) it is still the formula.
    assert_allclose(ref("softplus", [10.0], beta=1.0, threshold=10.0), [10.0 + math.log1p(math.exp(-10.0))], rtol=1e-15)
    assert ref("softplus", [10.0], beta=1.0, threshold=10.0)[0] != 10.0


def test_softplus_does_not_overflow_or_lose_tiny_values():
    assert_allclose(ref("softplus", [800.0], beta=1.0, threshold=1000.0), [800.0], rtol=1e-15)
    assert_allclose(ref("softplus", [-50.0]), [math.exp(-50.0)], rtol=1e-13, atol=0)


def test_mish_is_x_tanh_softplus():
    xs = [-1.0, 0.0, 2.0, 30.0]
    assert_allclose(ref("mish", xs), [v * math.tanh(math.log1p(math.exp(v))) for v in xs], rtol=1e-14)


def test_hardsigmoid_and_hardswish():
    xs = [-4.0, -3.0, -1.5, 0.0, 1.5, 3.0, 5.0]
    hard = [0.0, 0.0, 0.25, 0.5, 0.75, 1.0, 1.0]  # (x + 3) / 6 clipped to [0, 1]
    assert_allclose(ref("hardsigmoid", xs), hard, rtol=0, atol=0)
    assert_allclose(ref("hardswish", xs), [v * h for v, h in zip(xs, hard)], rtol=0, atol=0)


def test_leaky_relu_slope():
    assert_allclose(ref("leaky_relu", [-2.0, 0.0, 3.0], negative_slope=0.2), [-0.4, 0.0, 3.0], rtol=1e-15)
    assert_allclose(ref("leaky_relu", [-100.0]), [-1.0], rtol=1e-15)  # default slope 0.01


def test_elu_alpha_and_its_forward_error():
    assert_allclose(ref("elu", [-1.0, 0.0, 2.0], alpha=2.0), [2.0 * (1 / math.e - 1), 0.0, 2.0], rtol=1e-15)
    assert_allclose(ref("elu", [-1e-10]), [-1e-10 + 1e-20 / 2], rtol=1e-15)  # expm1, no cancellation
    assert_allclose(ref("elu", [-INF]), [-1.0], rtol=0)
    # exp(x) - 1 near 0 carries ~alpha units of roundoff where the output is tiny; none for x > 0.
    error = get_op("elu").numerics.forward_error([np.array([-1e-6, 0.0, 1.0])], {}, {"alpha": 2.0})
    assert_allclose(error, [2.0 * math.exp(-1e-6), 2.0, 0.0], rtol=1e-15)


def test_logsigmoid_is_log_of_sigmoid_and_stable():
    xs = [-2.0, 0.0, 3.0]
    assert_allclose(ref("logsigmoid", xs), [math.log(logistic(v)) for v in xs], rtol=1e-14)
    assert_allclose(ref("logsigmoid", [-800.0, 50.0]), [-800.0, -math.exp(-50.0)], rtol=1e-13)


def test_tanhshrink_and_its_forward_error():
    xs = [0.0, 1.0, -2.0]
    assert_allclose(ref("tanhshrink", xs), [v - math.tanh(v) for v in xs], rtol=1e-15)
    # For small x the result is ~x^3 / 3 while tanh(x) ~ x carries ~roundoff * |x|.
    assert_allclose(ref("tanhshrink", [1e-3]), [1e-9 / 3], rtol=1e-6)
    error = get_op("tanhshrink").numerics.forward_error([np.array([1e-3, -2.0])], {}, {})
    assert_allclose(error, [math.tanh(1e-3), math.tanh(2.0)], rtol=1e-15)


def test_gelu_forms():
    phi = lambda v: 0.5 * (1 + math.erf(v / math.sqrt(2)))  # noqa: E731
    tanh_form = lambda v: 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))  # noqa: E731
    xs = [-1.0, 0.0, 1.0, 2.0]
    assert_allclose(ref("gelu", xs, approximate="none"), [v * phi(v) for v in xs], rtol=1e-14)
    assert_allclose(ref("gelu", xs, approximate="tanh"), [tanh_form(v) for v in xs], rtol=1e-14)
    assert_allclose(ref("gelu", xs), ref("gelu", xs, approximate="none"), rtol=0)  # stored cases without the attr


# -- tensor with a Python scalar ---------------------------------------------------------


def test_scalar_arithmetic_forms():
    x = [1.0, -2.0, 0.5]
    assert_allclose(ref("add_scalar", x, value=0.125), [1.125, -1.875, 0.625], rtol=0)
    assert_allclose(ref("sub_scalar", x, value=2.0), [-1.0, -4.0, -1.5], rtol=0)
    assert_allclose(ref("mul_scalar", x, value=-1.0), [-1.0, 2.0, -0.5], rtol=0)
    assert_allclose(ref("div_scalar", x, value=0.5), [2.0, -4.0, 1.0], rtol=0)
    assert_allclose(ref("rsub", x, value=2.0), [1.0, 4.0, 1.5], rtol=0)  # value - x


def test_mul_by_zero_is_nan_for_infinities():
    assert_array_equal(ref("mul_scalar", [INF, 3.0, NAN], value=0.0), [NAN, 0.0, NAN])


@pytest.mark.parametrize(
    "exponent, x, expected",
    [
        (2, [-3.0, 0.5], [9.0, 0.25]),
        (3.0, [-2.0, 0.5], [-8.0, 0.125]),
        (0.5, [4.0, -4.0], [2.0, NAN]),  # a negative base to a non-integer power is nan
        (-1, [4.0, -0.5, 0.0], [0.25, -2.0, INF]),
        (-0.5, [4.0, 0.0, -1.0], [0.5, INF, NAN]),
        (1.5, [4.0, -4.0], [8.0, NAN]),
        (0, [NAN, 0.0, -5.0], [1.0, 1.0, 1.0]),  # x ** 0 is 1, even for nan
    ],
)
def test_pow_scalar_by_hand(exponent, x, expected):
    assert_allclose(ref("pow_scalar", x, exponent=exponent), expected, rtol=1e-15, equal_nan=True)


def test_pow_scalar_of_signed_zeros_follows_ieee_pow():
    zeros = [-0.0, 0.0]
    assert signs(ref("pow_scalar", zeros, exponent=0.5)) == [False, False]  # +0, not sqrt's -0
    assert_array_equal(ref("pow_scalar", zeros, exponent=-0.5), [INF, INF])
    assert signs(ref("pow_scalar", zeros, exponent=3)) == [True, False]  # odd integer: sign kept
    assert_array_equal(ref("pow_scalar", zeros, exponent=-1), [-INF, INF])
    assert_array_equal(ref("pow_scalar", zeros, exponent=-2.0), [INF, INF])


def test_clamp_bounds_either_absent_and_crossed():
    x = [-7.0, -0.5, 3.0, 8.0, NAN]
    assert_array_equal(ref("clamp", x, min=0.0, max=6.0), [0.0, 0.0, 3.0, 6.0, NAN])
    assert_array_equal(ref("clamp", x, min=-1.0, max=None), [-1.0, -0.5, 3.0, 8.0, NAN])
    assert_array_equal(ref("clamp", x, min=None, max=1.0), [-7.0, -0.5, 1.0, 1.0, NAN])
    # min > max: every element is max (torch's documented rule).
    assert_array_equal(ref("clamp", x[:4], min=2.0, max=1.0), [1.0, 1.0, 1.0, 1.0])


# -- binary, broadcasting ----------------------------------------------------------------


def test_sub_and_div_broadcast():
    a = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert_allclose(ref("sub", a, [1.0, 2.0, 3.0]), [[0, 0, 0], [3, 3, 3]], rtol=0)
    assert_allclose(ref("div", a, [[2.0], [-4.0]]), [[0.5, 1.0, 1.5], [-1.0, -1.25, -1.5]], rtol=0)
    assert_array_equal(ref("div", [1.0, -1.0, 0.0, 1.0], [0.0, 0.0, 0.0, -0.0]), [INF, -INF, NAN, -INF])
    assert get_op("div").infer({}, [(2, 1, 3), (4, 1)]) == (2, 4, 3)


def test_maximum_and_minimum_propagate_nan_and_order_zeros():
    a, b = [1.0, -2.0, NAN, 3.0], [0.5, 4.0, 1.0, NAN]
    assert_array_equal(ref("maximum", a, b), [1.0, 4.0, NAN, NAN])
    assert_array_equal(ref("minimum", a, b), [0.5, -2.0, NAN, NAN])
    assert signs(ref("maximum", [-0.0, 0.0, -0.0], [0.0, -0.0, -0.0])) == [False, False, True]
    assert signs(ref("minimum", [-0.0, 0.0, 0.0], [0.0, -0.0, 0.0])) == [True, True, False]


def test_pow_of_two_tensors():
    assert_allclose(ref("pow", [2.0, 9.0, -2.0, -2.0, 0.0], [3.0, 0.5, 2.0, 0.5, -1.0]), [8.0, 3.0, 4.0, NAN, INF], rtol=1e-15, equal_nan=True)


def test_atan2_quadrants_and_branch_cut():
    y, x = [1.0, 1.0, -1.0, 0.0, -0.0, 1.0], [1.0, -1.0, -1.0, -1.0, -1.0, 0.0]
    expected = [math.pi / 4, 3 * math.pi / 4, -3 * math.pi / 4, math.pi, -math.pi, math.pi / 2]
    assert_allclose(ref("atan2", y, x), expected, rtol=1e-15)


@pytest.mark.parametrize(
    "compare, expected",
    [("gt", [3.0, 2.0, 5.0]), ("ge", [3.0, 2.0, 5.0]), ("lt", [1.0, 2.0, 4.0]), ("le", [1.0, 2.0, 4.0])],
)
def test_where_selects_by_comparing_the_operands(compare, expected):
    # a = [3, 2, 4], b = [1, 2, 5]: gt/ge pick the larger (ties give the same value), lt/le the smaller.
    assert_array_equal(ref("where", [3.0, 2.0, 4.0], [1.0, 2.0, 5.0], compare=compare), expected)


def test_where_selects_b_when_a_comparison_meets_nan():
    assert_array_equal(ref("where", [NAN, 1.0], [7.0, NAN], compare="gt"), [7.0, NAN])


def test_where_threshold_ties_follow_the_comparison():
    a, b = [0.5, 0.25, 1.0], [-1.0, -2.0, -3.0]
    assert_array_equal(ref("where_threshold", a, b, compare="gt", threshold=0.5), [-1.0, -2.0, 1.0])
    assert_array_equal(ref("where_threshold", a, b, compare="ge", threshold=0.5), [0.5, -2.0, 1.0])
    assert_array_equal(ref("where_threshold", a, b, compare="lt", threshold=0.5), [-1.0, 0.25, -3.0])
    assert_array_equal(ref("where_threshold", a, b, compare="le", threshold=0.5), [0.5, 0.25, -3.0])


# -- declarations -------------------------------------------------------------------------


def test_piecewise_constant_ops_are_exact_and_continuous_ones_are_not():
    exact = {name for name, op in registry().items() if op.numerics.exact and op.family in ("unary", "scalar", "elementwise")}
    assert exact == {"sign", "floor", "round", "where_threshold"}


def test_ops_whose_result_follows_the_sign_of_a_zero_declare_it():
    declared = {name for name, op in registry().items() if op.numerics.zero_sign_matters}
    assert declared == {"custom_grad_div", "atan2", "div", "log", "pow", "pow_scalar", "reciprocal", "rsqrt", "sqrt"}
    # Each gives more than a zero of another sign when a zero operand changes sign, or turns nan just
    # below zero (fuzzer/oracle/rules.py, "Signed zeros").
    for name, attrs, at_zero, at_negative_zero, just_below in [
        ("atan2", {}, ([0.0], [-1.0]), ([-0.0], [-1.0]), ([-1e-30], [-1.0])),
        ("div", {}, ([1.0], [0.0]), ([1.0], [-0.0]), ([1.0], [-1e-30])),
        ("log", {}, ([0.0],), ([-0.0],), ([-1e-30],)),
        ("pow", {}, ([0.0], [-1.0]), ([-0.0], [-1.0]), ([-1e-30], [0.5])),
        ("pow_scalar", {"exponent": -1}, ([0.0],), ([-0.0],), ([-1e-30],)),
        ("reciprocal", {}, ([0.0],), ([-0.0],), ([-1e-30],)),
        ("rsqrt", {}, ([0.0],), ([-0.0],), ([-1e-30],)),
        ("sqrt", {}, ([0.0],), ([-0.0],), ([-1e-30],)),
    ]:
        zero = ref(name, *at_zero, **attrs)
        sign_matters = not np.array_equal(zero, ref(name, *at_negative_zero, **attrs), equal_nan=True)  # +0 == -0
        domain_ends = np.isnan(ref(name, *just_below, **attrs)).all() and not np.isnan(zero).any()
        assert sign_matters or domain_ends, name


def test_references_keep_the_input_dtype():
    for name in ("exp", "gelu", "softplus", "pow_scalar", "erf"):
        attrs = {"exponent": 0.5} if name == "pow_scalar" else {}
        for dtype in (np.float16, np.float32):
            out = get_op(name).reference([np.array([0.5, 1.5], dtype=dtype)], {}, attrs)
            assert out.dtype == dtype, f"{name} returns {out.dtype} for {dtype.__name__} input"
