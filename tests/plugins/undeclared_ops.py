"""Ops that declare nothing about their numerics, as the ops derived from torch's op database will
(issue 49, item 2): a shape rule, torch's and jax's functions, and a float64 reference that is
torch's own float64 CPU run. No sensitivity, forward_error, exact, undefined, zero_sign_matters,
integer_matters or period: the oracle's generic honest models alone must judge them.

They stress those models: piecewise and discontinuous (trunc, ceil, frac, fmod, remainder,
copysign), poles and branch cuts (lgamma, digamma, erfinv, tan, atanh, acosh, logit, xlogy,
ndtri), cancellation and special functions (hypot, logaddexp, sinc, i0, i1, erfc, entr). None is
in the shipped registry. `fuzz run --plugin tests/plugins/undeclared_ops.py --ops trunc,lgamma ...`
"""

from __future__ import annotations

import numpy as np

from fuzzer.errors import OpUnsupported, ShapeError
from fuzzer.ops import OpDef
from fuzzer.ops._common import st
from fuzzer.ops.elementwise import any_rank, jax_function, same_shape, torch_function

# name: (torch path, jax path or None where jax has no such function). Unary, then binary.
# As op_db's `dtypes`: torch's ndtri and log_ndtr have no float16/bfloat16 CPU kernel, jax's none either.
UNARY = {
    "trunc": ("trunc", "numpy.trunc"),
    "ceil": ("ceil", "numpy.ceil"),
    "frac": ("frac", None),
    "tan": ("tan", "numpy.tan"),
    "atanh": ("atanh", "numpy.arctanh"),
    "acos": ("acos", "numpy.arccos"),
    "acosh": ("acosh", "numpy.arccosh"),
    "lgamma": ("lgamma", "scipy.special.gammaln"),
    "digamma": ("digamma", "scipy.special.digamma"),
    "erfinv": ("erfinv", "scipy.special.erfinv"),
    "erfc": ("special.erfc", "scipy.special.erfc"),
    "logit": ("logit", "scipy.special.logit"),
    "sinc": ("sinc", "numpy.sinc"),
    "i0": ("i0", "numpy.i0"),
    "i1": ("special.i1", "scipy.special.i1"),
    "log2": ("log2", "numpy.log2"),
    "exp2": ("exp2", "numpy.exp2"),
    "entr": ("special.entr", "scipy.special.entr"),
    "ndtri": ("special.ndtri", "scipy.special.ndtri"),
    "log_ndtr": ("special.log_ndtr", "scipy.special.log_ndtr"),
}
FLOAT32_ONLY = {"ndtri", "log_ndtr"}
BINARY = {
    "fmod": ("fmod", "numpy.fmod"),
    "remainder": ("remainder", "numpy.remainder"),
    "hypot": ("hypot", "numpy.hypot"),
    "logaddexp": ("logaddexp", "numpy.logaddexp"),
    "xlogy": ("xlogy", "scipy.special.xlogy"),
    "copysign": ("copysign", "numpy.copysign"),
    "fmax": ("fmax", "numpy.fmax"),
}


def torch_float64_reference(path: str):
    """torch.<path> run in float64 on the CPU, cast back to the first operand's dtype (references are
    dtype-generic: the oracle also calls them with float32 and float16 operands)."""
    def reference(xs, ps, attrs):
        import torch

        function = torch
        for name in path.split("."):
            function = getattr(function, name)
        result = function(*(torch.from_numpy(np.array(x, dtype=np.float64)) for x in xs))
        return np.asarray(result.numpy(), dtype=np.asarray(xs[0]).dtype)

    return reference


def float32_only(name: str, run):
    """`run`, refusing the half-precision dtypes the framework has no kernel of (a dtype table, not numerics)."""
    def checked(xs, ps, attrs):
        if str(xs[0].dtype).rsplit(".", 1)[-1] in ("float16", "bfloat16"):
            raise OpUnsupported(f"{name} has no {xs[0].dtype} kernel")
        return run(xs, ps, attrs)

    return checked


def jax_missing(name: str):
    def run(xs, ps, attrs):
        raise OpUnsupported(f"jax has no {name}")

    return run


def broadcast_shape(attrs, shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(f"shapes {[list(s) for s in shapes]} do not broadcast") from None


def draw_broadcast_operand(draw, first, attrs):
    """The second operand: `first`'s shape with some dims set to 1."""
    return [tuple(1 if draw(st.booleans()) and draw(st.booleans()) else d for d in first)]


def undeclared_op(name: str, torch_path: str, jax_path: str | None, arity: int) -> OpDef:
    shape_rule = {"infer": broadcast_shape, "draw_operands": draw_broadcast_operand, "arity": (2, 2)} if arity == 2 \
        else {"infer": same_shape}
    torch_impl, jax_impl = torch_function(torch_path), jax_function(jax_path) if jax_path else jax_missing(name)
    if name in FLOAT32_ONLY:
        torch_impl, jax_impl = float32_only(name, torch_impl), float32_only(name, jax_impl)
    return OpDef(name=name, accepts=any_rank, reference=torch_float64_reference(torch_path), torch=torch_impl, jax=jax_impl,
                 notes="undeclared: torch's float64 run as its reference, no numerics fields", **shape_rule)


OPS = [undeclared_op(name, *paths, arity=1) for name, paths in UNARY.items()] + \
      [undeclared_op(name, *paths, arity=2) for name, paths in BINARY.items()]


def register(api):
    for op in OPS:
        api.add_op(op)
