"""Pointwise activations and broadcasting binary ops."""

from __future__ import annotations

import math

import numpy as np

from fuzzer.ops import OpDef
from fuzzer.ops._common import check, like, st


def _same_shape(attrs, shapes):
    return shapes[0]


def _any_shape(shape):
    return 1 <= len(shape) <= 5


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(np.asarray(x, dtype=np.float64))


def _gelu_reference(xs, ps, attrs):
    """Exact GELU, x * Phi(x) with the error function (torch's default, approximate='none')."""
    x = xs[0]
    return like(x, 0.5 * x.astype(np.float64) * (1.0 + _erf(x / math.sqrt(2.0))))


def _sigmoid_reference(xs, ps, attrs):
    x = xs[0]
    # Written per sign so that exp never overflows and, for x < 0, no 1 - p cancellation
    # loses the tiny values: sigmoid(x) = e^x / (1 + e^x) there.
    e = np.exp(-np.abs(x))
    return like(x, np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)))


def _torch_fn(name):
    def run(xs, ps, attrs):
        import torch

        return getattr(torch, name)(xs[0])

    return run


def _jax_fn(path):
    def run(xs, ps, attrs):
        import jax

        module, name = path.rsplit(".", 1)
        return getattr({"jnp": jax.numpy, "nn": jax.nn}[module], name)(xs[0])

    return run


def _torch_gelu(xs, ps, attrs):
    import torch

    return torch.nn.functional.gelu(xs[0])


def _jax_gelu(xs, ps, attrs):
    import jax

    return jax.nn.gelu(xs[0], approximate=False)


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


def _binary(name, numpy_fn, torch_name, jax_name):
    def torch_impl(xs, ps, attrs):
        import torch

        return getattr(torch, torch_name)(xs[0], xs[1])

    def jax_impl(xs, ps, attrs):
        import jax.numpy as jnp

        return getattr(jnp, jax_name)(xs[0], xs[1])

    return OpDef(
        name=name,
        infer=_broadcast_infer,
        reference=lambda xs, ps, attrs: numpy_fn(xs[0], xs[1]),
        torch=torch_impl,
        jax=jax_impl,
        accepts=_any_shape,
        draw_operands=_draw_broadcast_operand,
        arity=(2, 2),
    )


OPS = [
    OpDef(
        name="relu",
        infer=_same_shape,
        reference=lambda xs, ps, attrs: np.maximum(xs[0], 0).astype(xs[0].dtype),
        torch=_torch_fn("relu"),
        jax=_jax_fn("nn.relu"),
        accepts=_any_shape,
    ),
    OpDef(
        name="gelu",
        infer=_same_shape,
        reference=_gelu_reference,
        torch=_torch_gelu,
        jax=_jax_gelu,
        accepts=_any_shape,
        notes="exact (erf) form; tanh approximation differs by ~1e-3 and is not what torch computes by default",
    ),
    OpDef(
        name="tanh",
        infer=_same_shape,
        reference=lambda xs, ps, attrs: np.tanh(xs[0]),
        torch=_torch_fn("tanh"),
        jax=_jax_fn("jnp.tanh"),
        accepts=_any_shape,
    ),
    OpDef(
        name="sigmoid",
        infer=_same_shape,
        reference=_sigmoid_reference,
        torch=_torch_fn("sigmoid"),
        jax=_jax_fn("nn.sigmoid"),
        accepts=_any_shape,
    ),
    _binary("add", np.add, "add", "add"),
    _binary("mul", np.multiply, "mul", "multiply"),
]
