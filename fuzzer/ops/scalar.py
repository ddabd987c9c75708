"""Tensor-with-Python-scalar forms (x + c, c - x, x ** c, ...) and clamp.

The scalar is an attribute, drawn first from the values compilers' pattern matchers key on
(attention's 1/sqrt(head_dim), halving, doubling, negation, 0 and 1 that simplifiers fold),
then from a grid of random ones. The arithmetic forms are the Python operators: what users
write, and the same expression on numpy (the reference), torch and jax arrays.
"""

from __future__ import annotations

import math

import numpy as np

from fuzzer.drawing.branch_points import BranchPoints, declare
from fuzzer.jsonform import number
from fuzzer.ops._common import st
from fuzzer.ops._exact import EXACT_DTYPES, FLOAT_RESULT, INTEGERS, as_weak_scalar, integer_semantics, scalar_result_dtype
from fuzzer.ops.elementwise import unary
from fuzzer.ops.numerics import Numerics

# 1/sqrt(d) as a float32 constant, the way an attention scale reaches a float32 kernel.
ATTENTION_SCALES = tuple(float(np.float32(1.0 / math.sqrt(d))) for d in (64, 128, 96, 3))
SPECIAL_VALUES = (0.125, 0.5, 2.0, -1.0, 1.0, 0.0, *ATTENTION_SCALES)
WEAK_SCALAR = "a Python scalar becomes a constant of the tensor's dtype (jax's weak type; torch in bfloat16)"
# Random values on a grid of 1/1024 in [-4, 4]: exact in float32, so no backend rounds them.
def grid_values():
    """k / 1024 in [-4, 4]: exact in float32. A function, not a module constant: ops are imported
    where hypothesis is not installed (other environments' workers), and only drawing needs it."""
    return st.integers(-4096, 4096).map(lambda k: k / 1024)


# Python scalars of other kinds, half the draws: ints and bools (an integer tensor keeps its
# dtype, wrapping the int; a bool tensor becomes int64) and the floats compilers special-case (-0.0;
# inf and nan, stored as the strings "inf", "-inf", "nan" as JSON forms of them: fuzzer/jsonform.py).
# Their kind is a region key through the attribute's own keys (fuzzer/drawing/region_keys.py): value=True,
# value=False, value=1 (an int), value=inf, value=-inf, value=nan, value=0 (either zero).
INT_SCALARS = (1, -1, -128, 255, 2**31 - 1)  # few small ones: each int 0 .. 4 is a region key to steer to
SPECIAL_FLOATS = (-0.0, "inf", "-inf", "nan")


def scalar_value(value):
    """The Python scalar an attribute holds: its JSON form of a non-finite float read back."""
    return number(value) if isinstance(value, str) else value


def _draw_value(exclude=()):
    def draw_attrs(draw, shapes):
        usual = st.one_of(st.sampled_from(SPECIAL_VALUES), grid_values())
        # Each value a branch of its own, so steering reaches its attribute key in a few draws (fuzzer/drawing/regions.py).
        other = st.one_of(st.sampled_from(INT_SCALARS), st.booleans(), *map(st.just, SPECIAL_FLOATS))
        # By type as well: torch refuses x - True, where x - 1 is fine (and True == 1).
        values = st.one_of(usual, other).filter(
            lambda v: not any(type(v) is type(excluded) and v == excluded for excluded in exclude))
        return {"value": draw(values)}

    return draw_attrs


def _with_scalar(expression):
    return lambda x, value: expression(x, scalar_value(value))


def _exact_scalar(expression, true_division=False):
    """The exact reference (OpDef.exact_reference): `expression` in torch's dtype for the tensor and scalar."""
    def run(xs, ps, attrs):
        x, value = np.asarray(xs[0]), scalar_value(attrs["value"])
        dtype = FLOAT_RESULT if true_division and x.dtype.kind != "f" else scalar_result_dtype(x.dtype, value)
        return np.asarray(expression(x.astype(dtype), as_weak_scalar(value, dtype))).astype(dtype)

    return run


def _operator(name, expression, exclude=(), notes="", true_division=False, dtypes=INTEGERS):
    """`expression(x, value)` serves as reference and as both implementations; `value` is a weak
    scalar (Numerics.weak_scalars): grid values are exact in float32, not in bfloat16."""
    op = unary(name, _with_scalar(expression), _with_scalar(expression), _with_scalar(expression),
               draw_attrs=_draw_value(exclude), attrs=("value",),
               numerics=Numerics(weak_scalars=("value",), why={"weak_scalars": WEAK_SCALAR}), notes=notes)
    return integer_semantics(op, dtypes, _exact_scalar(expression, true_division))


# Integers go to torch's and jax's integer-power paths (x * x, ...), floats to their general pow;
# both forms of 2 and 3 are drawn. Random exponents are multiples of 1/8 (exact in float32).
EXPONENTS = (2, 3, 0.5, -1, -0.5, 1.5, 2.0, 3.0, -2, -1.0, 0, 1, 4)
def random_exponents():
    return st.integers(-24, 24).map(lambda k: k / 8)


def _draw_exponent(draw, shapes):
    return {"exponent": draw(st.one_of(st.sampled_from(EXPONENTS), random_exponents()))}


def _pow_scalar_reference(x, exponent):
    """x ** exponent by IEEE 754 pow: a negative base with a non-integer exponent is nan;
    x ** 0 = 1 (even 0 ** 0 and nan ** 0); a zero base keeps its sign only for an odd integer
    exponent: (-0) ** 0.5 = +0, (-0) ** -0.5 = +inf, (-0) ** 3 = -0, (-0) ** -1 = -inf
    (numpy's x ** 0.5 shortcut through sqrt would give -0)."""
    out = x**exponent
    odd_integer = float(exponent).is_integer() and int(exponent) % 2 == 1
    return out if odd_integer else np.where(x == 0, np.abs(out), out)


def _pow_scalar_undefined(x, exponent):
    """(-inf) ** +-0.5 is a convention: IEEE 754 pow (jax, torch's tensor pow, numpy's power of an
    array exponent) gives +inf and +0, the sqrt and rsqrt shortcuts (numpy's and torch's ** 0.5,
    torch's ** -0.5) give nan."""
    return (x == -np.inf) & (abs(exponent) == 0.5)


def _pow_scalar(x, exponent):
    return x**exponent


def _clamp_reference(x, min=None, max=None):
    """max(x, min), then min(., max): with min > max every element is max (as torch documents);
    nan stays nan; an absent bound (None) does not clamp."""
    low = x if min is None else np.maximum(x, min)
    return low if max is None else np.minimum(low, max)


def bounds():
    return st.one_of(st.sampled_from((0.0, 6.0, -1.0, 1.0, -6.0, 0.5)), grid_values())


def _draw_clamp(draw, shapes):
    present = draw(st.sampled_from(("both", "min", "max")))
    return {
        "min": draw(bounds()) if present != "max" else None,
        "max": draw(bounds()) if present != "min" else None,
    }


# Its bounds are its branch points (fuzzer/drawing/branch_points.py), where given.
CLAMP_BOUNDS = BranchPoints(("min", "max"), lambda attrs, dtype: {
    bound: attrs[bound] for bound in ("min", "max") if attrs.get(bound) is not None})


def _jax_clamp(x, min=None, max=None):
    import jax

    return jax.numpy.clip(x, min, max)  # positional: the keywords were renamed in jax 0.4.27


def _add_scalar(x, value):
    return x + value


def _sub_scalar(x, value):
    return x - value


def _mul_scalar(x, value):
    return x * value


def _div_scalar(x, value):
    return x / value


def _rsub(x, value):
    return value - x


OPS = [
    _operator("add_scalar", _add_scalar, dtypes=EXACT_DTYPES),
    _operator("sub_scalar", _sub_scalar, exclude=(True, False)),
    # Not on bool: jax 0.10.2 gives False * nan = 0 where torch (and IEEE) give nan; left to a follow-up.
    _operator("mul_scalar", _mul_scalar, notes="value 0 is drawn: x * 0 is nan for x = inf or nan"),
    _operator("div_scalar", _div_scalar, exclude=(0.0, 0, False), true_division=True, notes="true division: an integer tensor's is float32"),
    _operator("rsub", _rsub, exclude=(True, False), notes="value - x, what `2.0 - x` calls (torch.rsub)"),
    unary("pow_scalar", _pow_scalar_reference, _pow_scalar, _pow_scalar, draw_attrs=_draw_exponent, attrs=("exponent",),
          numerics=Numerics(zero_sign_matters=True, undefined=_pow_scalar_undefined, why={
              "zero_sign_matters": "(+-0) ** negative odd is +-inf, and a base just below 0 is nan for a non-integer exponent",
              "undefined": "(-inf) ** +-0.5 is +inf or nan by whether the kernel takes the sqrt shortcut"}), notes=(
        "x ** exponent; negative bases give nan for a non-integer exponent. torch computes x ** -0.5 "
        "as rsqrt and x ** 0.5 as sqrt, so -0 ** -0.5 is -inf in torch where IEEE pow (numpy, jax) "
        "gives +inf"
    )),
    declare(unary("clamp", _clamp_reference, "clamp", _jax_clamp, draw_attrs=_draw_clamp, attrs=("min", "max"),
                  numerics=Numerics(weak_scalars=("min", "max"), why={"weak_scalars": WEAK_SCALAR})), CLAMP_BOUNDS),
]
