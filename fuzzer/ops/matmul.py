"""linear and matmul (plain, batched, broadcast batch dims).

Tiled kernels hide bugs at tile edges (seed bug 4: a tiled matmul returned zeros),
so the sizes drawn include K = 1 and sizes just off multiples of 8/16/32.
"""

from __future__ import annotations

import numpy as np

from fuzzer.ops import OpDef
from fuzzer.ops._common import DIMS, check, rank_between, st

TILE_EDGE_SIZES = (1, 3, 7, 9, 15, 17, 31, 33)


def _draw_features(draw):
    return draw(st.sampled_from(sorted(set(TILE_EDGE_SIZES + DIMS))))


def _draw_linear(draw, shapes):
    return {"out_features": _draw_features(draw), "bias": draw(st.booleans())}


def _infer_linear(attrs, shapes):
    check(attrs["out_features"] >= 1, "out_features must be >= 1")
    return tuple(shapes[0][:-1]) + (attrs["out_features"],)


def _linear_params(attrs, shapes):
    params = {"weight": (attrs["out_features"], shapes[0][-1])}
    if attrs["bias"]:
        params["bias"] = (attrs["out_features"],)
    return params


def _linear_reference(xs, ps, attrs):
    """y = x W^T + b, W of shape (out_features, in_features) as in torch."""
    out = xs[0] @ ps["weight"].T
    return out + ps["bias"] if attrs["bias"] else out


def _torch_linear(xs, ps, attrs):
    import torch

    return torch.nn.functional.linear(xs[0], ps["weight"], ps.get("bias"))


def _jax_linear(xs, ps, attrs):
    out = xs[0] @ ps["weight"].T
    return out + ps["bias"] if attrs["bias"] else out


def _draw_matmul_operands(draw, first, attrs):
    """(..., K, N) for a first operand (..., M, K); batch dims equal, 1, or absent."""
    k = first[-1]
    n = _draw_features(draw)
    batch = list(first[:-2])
    style = draw(st.sampled_from(["same", "broadcast", "unbatched"])) if batch else "unbatched"
    if style == "same":
        return [tuple(batch) + (k, n)]
    if style == "broadcast":
        return [tuple(1 if draw(st.booleans()) else b for b in batch) + (k, n)]
    return [(k, n)]


def _infer_matmul(attrs, shapes):
    a, b = shapes
    check(len(a) >= 2 and len(b) >= 2, "matmul needs operands of rank >= 2")
    check(a[-1] == b[-2], f"inner dims differ: {list(a)} @ {list(b)}")
    try:
        batch = np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))
    except ValueError:
        check(False, f"batch dims {list(a[:-2])} and {list(b[:-2])} do not broadcast")
    return tuple(batch) + (a[-2], b[-1])


def _torch_matmul(xs, ps, attrs):
    import torch

    return torch.matmul(xs[0], xs[1])


def _jax_matmul(xs, ps, attrs):
    import jax.numpy as jnp

    return jnp.matmul(xs[0], xs[1])


OPS = [
    OpDef(
        name="linear",
        infer=_infer_linear,
        reference=_linear_reference,
        torch=_torch_linear,
        jax=_jax_linear,
        accepts=rank_between(1, 4),
        draw_attrs=_draw_linear,
        params=_linear_params,
        sensitivity=2.0,
    ),
    OpDef(
        name="matmul",
        infer=_infer_matmul,
        reference=lambda xs, ps, attrs: np.matmul(xs[0], xs[1]),
        torch=_torch_matmul,
        jax=_jax_matmul,
        accepts=rank_between(2, 4),
        draw_operands=_draw_matmul_operands,
        arity=(2, 2),
        sensitivity=2.0,
    ),
]
