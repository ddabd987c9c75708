"""softmax and log_softmax over one dim."""

from __future__ import annotations

import numpy as np

from fuzzer.ops import Ladder, OpDef
from fuzzer.ops._common import draw_dim, norm_dim, rank_between
from fuzzer.ops.elementwise import jax_function, torch_function
from fuzzer.ops.numerics import Numerics


def _draw_dim(draw, shapes):
    return {"dim": draw_dim(draw, len(shapes[0]))}


def _infer(attrs, shapes):
    norm_dim(attrs["dim"], len(shapes[0]))
    return shapes[0]


def _log_softmax_reference(xs, ps, attrs):
    """log_softmax(x) = x - max - log(sum(exp(x - max))), stable for any magnitude."""
    x, dim = xs[0], attrs["dim"]
    shifted = x - np.max(x, axis=dim, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=dim, keepdims=True))


def _log_softmax_error(xs, ps, attrs):
    """log(sum(exp(x - max))) takes the log of a rounded sum >= 1: an absolute error of ~roundoff,
    which no relative bound covers where the result is near 0 (the largest entry of a row whose
    others are far below it: -1e-16 in float64, and 0 in torch's float64)."""
    return np.ones(np.shape(xs[0]))


def _softmax_reference(xs, ps, attrs):
    return np.exp(_log_softmax_reference(xs, ps, attrs))


SHIFTED_SUM = "exponentials of shifted values summed over the dim, each rounded"

OPS = [
    OpDef(
        name=name,
        attrs=('dim',),
        infer=_infer,
        reference=reference,
        torch=torch_function(name),
        jax=jax_function(f"nn.{name}", keywords={"dim": "axis"}),
        accepts=rank_between(1, 5),
        draw_attrs=_draw_dim,
        ladder=Ladder("reduction", lambda attrs, shapes: (norm_dim(attrs["dim"], len(shapes[0])),)),
        numerics=numerics,
    )
    for name, reference, numerics in (
        ("softmax", _softmax_reference, Numerics(sensitivity=2.0, why={"sensitivity": SHIFTED_SUM})),
        ("log_softmax", _log_softmax_reference, Numerics(sensitivity=2.0, forward_error=_log_softmax_error, why={
            "sensitivity": SHIFTED_SUM,
            "forward_error": "the log of a rounded sum >= 1 errs by a roundoff where the result is near 0"})),
    )
]
