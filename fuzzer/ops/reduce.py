"""sum and mean over a set of dims, with or without keepdim."""

from __future__ import annotations

import numpy as np

from fuzzer.ops import OpDef
from fuzzer.ops._common import check, norm_dim, rank_between, st


def _draw(draw, shapes):
    rank = len(shapes[0])
    dims = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    return {"dims": sorted(dims), "keepdim": draw(st.booleans())}


def _infer(attrs, shapes):
    shape, rank = shapes[0], len(shapes[0])
    dims = sorted({norm_dim(d, rank) for d in attrs["dims"]})
    check(len(dims) == len(attrs["dims"]) and dims, "dims must be distinct and non-empty")
    if attrs["keepdim"]:
        return tuple(1 if i in dims else d for i, d in enumerate(shape))
    out = tuple(d for i, d in enumerate(shape) if i not in dims)
    return out or (1,)


def _reference(numpy_fn):
    def run(xs, ps, attrs):
        out = numpy_fn(xs[0], axis=tuple(attrs["dims"]), keepdims=attrs["keepdim"])
        # A full reduction without keepdim gives shape (1,) everywhere, not a 0-d scalar.
        return np.reshape(out, _infer(attrs, [xs[0].shape]))

    return run


def _torch(name):
    def run(xs, ps, attrs):
        import torch

        out = getattr(torch, name)(xs[0], dim=tuple(attrs["dims"]), keepdim=attrs["keepdim"])
        return out.reshape(_infer(attrs, [tuple(xs[0].shape)]))

    return run


def _jax(name):
    def run(xs, ps, attrs):
        import jax.numpy as jnp

        out = getattr(jnp, name)(xs[0], axis=tuple(attrs["dims"]), keepdims=attrs["keepdim"])
        return out.reshape(_infer(attrs, [tuple(xs[0].shape)]))

    return run


OPS = [
    OpDef(
        name=name,
        infer=_infer,
        reference=_reference(getattr(np, name)),
        torch=_torch(name),
        jax=_jax(name),
        accepts=rank_between(1, 5),
        draw_attrs=_draw,
        sensitivity=2.0,
    )
    for name in ("sum", "mean")
]
