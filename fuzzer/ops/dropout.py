"""dropout, in eval mode (identity) and training mode.

Training-mode dropout draws a random mask, and torch and jax draw from different
generators, so only p = 0 (identity) and p = 1 (all zeros) are comparable across
backends; the shape rule refuses other p in training mode. Eval-mode dropout with
any p must be the identity: seed bug 2 was dropout left active at inference.
"""

from __future__ import annotations

from fuzzer.ops import OpDef
from fuzzer.ops._common import check, rank_between, st


def _draw(draw, shapes):
    if draw(st.integers(0, 3)) == 0:
        return {"p": draw(st.sampled_from([0.0, 1.0])), "training": True}
    return {"p": draw(st.sampled_from([0.1, 0.25, 0.5, 0.9])), "training": False}


def _infer(attrs, shapes):
    p = attrs["p"]
    check(0.0 <= p <= 1.0, f"p={p} must be in [0, 1]")
    if attrs["training"]:
        check(p in (0.0, 1.0), f"training-mode dropout with p={p} is random; only p 0 or 1 is comparable")
    return shapes[0]


def _reference(xs, ps, attrs):
    """Dropout multiplies by its mask (torch's definition and kernel): with p = 1 in training
    every entry is x * 0, so an inf or nan input stays nan rather than becoming 0."""
    x = xs[0]
    return x * 0.0 if attrs["training"] and attrs["p"] == 1.0 else x.copy()


def _torch_dropout(xs, ps, attrs):
    import torch

    return torch.nn.functional.dropout(xs[0], p=attrs["p"], training=attrs["training"])


def _jax_dropout(xs, ps, attrs):
    x = xs[0]
    return x * 0.0 if attrs["training"] and attrs["p"] == 1.0 else x


OPS = [
    OpDef(
        name="dropout",
        attrs=('p', 'training'),
        infer=_infer,
        reference=_reference,
        torch=_torch_dropout,
        jax=_jax_dropout,
        accepts=rank_between(1, 5),
        draw_attrs=_draw,
    )
]
