"""Integer-only ops: bitwise logic, shifts, integer division and remainder by a Python int, and
comparisons (a bool result). Float backends never draw them (OpDef.float_dtypes); the ops that also
mean something on floats (add, mul, sum, reshape, ...) declare their integer semantics where they
are declared (`integer_semantics`), so one op has one declaration.

References follow torch's documentation: floor_divide rounds down and `div(rounding_mode="trunc")`
toward zero; remainder takes the divisor's sign and fmod the dividend's; a shift by the dtype's
width or more gives 0 (left) or the sign (right); INT_MIN // -1 wraps to INT_MIN. The divisor is a
nonzero Python int (torch raises on an integer division by zero, jax returns a value).
"""

from __future__ import annotations

import numpy as np

from fuzzer.ops._common import st
from fuzzer.ops._exact import EXACT_DTYPES, INTEGERS, as_weak_scalar, integer_semantics, promoted, result_dtype
from fuzzer.ops.elementwise import binary, unary

# Nonzero divisors in every integer dtype (none is a multiple of 256), -1 for INT_MIN // -1.
DIVISORS = (1, -1, 2, -2, 3, -3, 5, 7, 8, 16, 100, 127, -128)
SHIFTS = (0, 1, 2, 3, 7, 8, 15, 16, 31, 32, 33, 63)


def _draw_divisor(draw, shapes):
    return {"value": draw(st.sampled_from(DIVISORS))}


def _draw_shift(draw, shapes):
    return {"shift": draw(st.sampled_from(SHIFTS))}


def _by_scalar(function):
    """An exact reference of `function(x, divisor)` with the Python int divisor in x's dtype (wrapping)."""
    def run(xs, ps, attrs):
        x = np.asarray(xs[0])
        return np.asarray(function(x, as_weak_scalar(attrs["value"], x.dtype))).astype(x.dtype)

    return run


def _trunc_divide(x, divisor):
    """Rounded toward zero: the floor quotient, one up where the division is inexact and the signs differ."""
    floor = np.floor_divide(x, divisor)
    inexact = np.remainder(x, divisor) != 0
    return floor + (inexact & ((x < 0) != (divisor < 0))).astype(x.dtype)


def _shift_left(x, shift):
    """x << shift in x's width, wrapping (computed on the unsigned view); 0 from the width on."""
    x = np.asarray(x)
    bits = 8 * x.dtype.itemsize
    if shift >= bits:
        return np.zeros_like(x)
    unsigned = x.view(f"u{x.dtype.itemsize}")
    return np.left_shift(unsigned, np.asarray(shift, unsigned.dtype)).view(x.dtype)


def _shift_right(x, shift):
    """x >> shift, arithmetic for signed dtypes: from the width on, the sign (-1 or 0), or 0 unsigned."""
    x = np.asarray(x)
    bits = 8 * x.dtype.itemsize
    return np.right_shift(x, np.asarray(min(shift, bits - 1), x.dtype)) if x.dtype.kind == "i" or shift < bits else np.zeros_like(x)


def _torch_scalar(method, **keywords):
    def run(x, value):
        import torch

        return getattr(torch, method)(x, value, **keywords)

    return run


def _jax_scalar(function):
    def run(x, value):
        import jax.numpy as jnp

        return getattr(jnp, function)(x, value)

    return run


def _torch_trunc(x, value):
    import torch

    return torch.div(x, value, rounding_mode="trunc")


def _jax_trunc(x, value):
    import jax.numpy as jnp

    value = jnp.asarray(value).astype(x.dtype)  # as torch converts it: -1 is 255 in uint8
    quotient = jnp.floor_divide(x, value)
    return quotient + ((jnp.remainder(x, value) != 0) & ((x < 0) != (value < 0))).astype(x.dtype)


def _torch_shift(left):
    def run(x, shift):
        return x << shift if left else x >> shift

    return run


def _jax_shift(left):
    def run(x, shift):
        import jax.numpy as jnp

        return jnp.left_shift(x, shift) if left else jnp.right_shift(x, shift)

    return run


def _by_divisor(name, function, torch_impl, jax_impl, notes):
    op = unary(name, lambda x, value: function(x, as_weak_scalar(value, np.asarray(x).dtype)), torch_impl, jax_impl,
               draw_attrs=_draw_divisor, attrs=("value",), notes=notes)
    return integer_semantics(op, INTEGERS, _by_scalar(function), floats=False)


def _shift(name, function, left):
    op = unary(name, lambda x, shift: function(x, shift), _torch_shift(left), _jax_shift(left), draw_attrs=_draw_shift,
               attrs=("shift",), notes="by a Python int; by the dtype's width or more: 0, or the sign for >>")
    return integer_semantics(op, INTEGERS, lambda xs, ps, attrs: function(xs[0], attrs["shift"]), floats=False)


def _bitwise(name, function):
    return integer_semantics(binary(name, function, name, f"numpy.{name}"), EXACT_DTYPES, promoted(function), floats=False)


def _comparison(name, function):
    op = binary(name, function, name, f"numpy.{function.__name__}", notes="a bool result")
    compare = lambda xs, ps, attrs: function(*(np.asarray(x).astype(result_dtype(*xs)) for x in xs))  # noqa: E731
    return integer_semantics(op, EXACT_DTYPES, compare, floats=False)


OPS = [
    _bitwise("bitwise_and", np.bitwise_and),
    _bitwise("bitwise_or", np.bitwise_or),
    _bitwise("bitwise_xor", np.bitwise_xor),
    integer_semantics(unary("bitwise_not", np.invert, "bitwise_not", "numpy.invert"), EXACT_DTYPES, floats=False),
    _shift("shift_left", _shift_left, left=True),
    _shift("shift_right", _shift_right, left=False),
    _by_divisor("floor_divide_scalar", np.floor_divide, _torch_scalar("floor_divide"), _jax_scalar("floor_divide"),
                "x // value, rounded down; INT_MIN // -1 wraps to INT_MIN"),
    _by_divisor("trunc_divide_scalar", _trunc_divide, _torch_trunc, _jax_trunc,
                'torch.div(x, value, rounding_mode="trunc"): rounded toward zero'),
    _by_divisor("remainder_scalar", np.remainder, _torch_scalar("remainder"), _jax_scalar("remainder"),
                "x mod value with the divisor's sign (Python's %)"),
    _by_divisor("fmod_scalar", np.fmod, _torch_scalar("fmod"), _jax_scalar("fmod"), "x mod value with the dividend's sign (C's %)"),
    _comparison("eq", np.equal),
    _comparison("ne", np.not_equal),
    _comparison("lt", np.less),
    _comparison("le", np.less_equal),
]
