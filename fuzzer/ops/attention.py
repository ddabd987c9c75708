"""scaled_dot_product_attention: softmax(q k^T * scale + mask) v over shared batch dims.

Operands q (*batch, L, E), k (*batch, S, E), v (*batch, S, Ev) and, with attribute
mask=True, an additive float mask broadcastable to (*batch, L, S). The mask is an
operand, not an attribute, so that it can be any value of the graph (a computed bias,
a -inf from log(0) or from the special-values regime). A boolean mask is the additive
mask 0 / -inf, so the float mask covers it without a second dtype in the graph. torch
refuses a mask together with is_causal on older releases: causal cases carry no mask.

The jax side is written with jax.numpy. jax.nn.dot_product_attention is not used: it
casts its logits to float32 for the softmax whatever the input dtype, so its float64
results are only float32-accurate (relative error ~1e-5), which float64 runs would flag.
"""

from __future__ import annotations

import math

import numpy as np

from fuzzer.ops import OpDef
from fuzzer.ops._common import DIMS, check, like, rank_between, st
from fuzzer.ops.matmul import TILE_EDGE_SIZES, broadcasts_to
from fuzzer.ops.numerics import Numerics

SCALES = (None, 0.125, 0.5, 1.0, 2.0)  # None: 1 / sqrt(E)
SEQUENCE_SIZES = sorted(set(DIMS + TILE_EDGE_SIZES))


def _draw_attention(draw, shapes):
    causal = draw(st.booleans())
    return {"causal": causal, "scale": draw(st.sampled_from(SCALES)), "mask": not causal and draw(st.booleans())}


def _draw_operands(draw, first, attrs):
    """k and v share q's batch dims and a drawn key length S; the mask, when drawn, is (L, S),
    (*batch, L, S), or that with some dims 1 (broadcast)."""
    *batch, length, embed = first
    keys = draw(st.sampled_from(SEQUENCE_SIZES))
    value_dim = draw(st.sampled_from(SEQUENCE_SIZES))
    operands = [(*batch, keys, embed), (*batch, keys, value_dim)]
    if attrs["mask"]:
        full = (*batch, length, keys) if draw(st.booleans()) else (length, keys)
        operands.append(tuple(1 if draw(st.integers(0, 3)) == 0 else d for d in full))
    return operands


def _infer_attention(attrs, shapes):
    expected = "q, k, v and a mask" if attrs["mask"] else "q, k, v"
    check(len(shapes) == 3 + bool(attrs["mask"]), f"attention takes {expected}, got {len(shapes)} operands")
    check(not (attrs["causal"] and attrs["mask"]), "causal attention takes no mask")
    q, k, v = shapes[:3]
    check(len(q) >= 2 and len(k) == len(q) and len(v) == len(q), f"q, k, v must have one rank >= 2, got {list(q)}, {list(k)}, {list(v)}")
    check(q[:-2] == k[:-2] == v[:-2], f"q, k, v batch dims differ: {list(q)}, {list(k)}, {list(v)}")
    check(q[-1] == k[-1], f"q and k embedding sizes differ: {q[-1]} and {k[-1]}")
    check(k[-2] == v[-2], f"k and v lengths differ: {k[-2]} and {v[-2]}")
    scores = tuple(q[:-1]) + (k[-2],)
    if attrs["mask"]:
        check(broadcasts_to(shapes[3], scores), f"mask {list(shapes[3])} does not broadcast to the scores' shape {list(scores)}")
    return tuple(q[:-1]) + (v[-1],)


def _intermediates(attrs, shapes):
    """The L x S scores and their softmax weights, both alive in the reference at once."""
    scores = (*shapes[0][:-1], shapes[1][-2])
    return {"attention scores": scores, "attention weights": scores}


def _scale(attrs, embed: int) -> float:
    return 1.0 / math.sqrt(embed) if attrs["scale"] is None else attrs["scale"]


def _scores(xp, xs, attrs):
    """q k^T * scale + mask, with -inf where the causal mask hides a key."""
    q, k = xs[:2]
    scores = xp.matmul(q, xp.swapaxes(k, -1, -2)) * _scale(attrs, q.shape[-1])
    if attrs["mask"]:
        scores = scores + xs[3]
    if attrs["causal"]:
        scores = xp.where(xp.tril(xp.ones(scores.shape[-2:], dtype=bool)), scores, -xp.inf)
    return scores


def _attention(xp, xs, attrs, flush_below=None):
    """softmax(q k^T * scale + mask) v over the last two dims, batch dims shared, with `xp`
    numpy (the reference) or jax.numpy (the jax side); softmax weights below `flush_below` are 0.

    scale None means 1 / sqrt(E), E = q's last dim. causal: query i attends to key j iff
    j <= i, the lower triangle aligned at the upper-left corner even when L != S (torch's
    is_causal): every row keeps key 0. The softmax subtracts the row max first (never
    overflows). A row whose scores are all -inf (a mask of -inf everywhere) attends to
    nothing and gives 0, torch's convention since 2.5 (older releases give nan; the oracle
    leaves such rows undefined, _attention_undefined).
    """
    return xp.matmul(_weights(xp, _scores(xp, xs, attrs), flush_below), xs[2])


def _weights(xp, scores, flush_below=None):
    """softmax of `scores` over the last dim, the row max subtracted first; a row of -inf scores
    gets zero weights; weights below `flush_below` (a number, or one per score) are 0, before the
    division by the row's total and after it (a normal exp(-87.3) halved is subnormal)."""
    peak = xp.max(scores, axis=-1, keepdims=True)
    masked_row = peak == -xp.inf
    weights = xp.exp(scores - xp.where(masked_row, 0, peak))  # all zeros in a masked row
    if flush_below is not None:
        weights = xp.where(weights < flush_below, 0, weights)
    weights = weights / xp.where(masked_row, 1, xp.sum(weights, axis=-1, keepdims=True))
    return weights if flush_below is None else xp.where(weights < flush_below, 0, weights)


def _attention_reference(xs, ps, attrs):
    return like(np.asarray(xs[0]), _attention(np, xs, attrs))


def _attention_in_dtype(xs, ps, attrs):
    """Attention as a kernel of a narrower dtype computes it (the same-dtype model): the weights
    below float32's smallest normal are 0, as a kernel that flushes subnormals (XLA on the CPU)
    reads them: exp(-88.72) times a -inf value is -inf in float64 and 0 * -inf = nan there, so the
    oracle leaves that entry undefined. A key whose weight the kernel's rounding of the row's
    scores may take below it is 0 too: scores near 1e9 are rounded by hundreds in float32, so a
    key 100 below the row's best in float64 may tie it or weigh nothing (jax-eager:cpu, GPU
    campaign case 186). That is a weight under the smallest normal times exp(2 delta)
    (_scores_delta), from the float64 scores; never the row's best key's."""
    q = np.asarray(xs[0])
    tiny = np.finfo(np.float32).tiny
    with np.errstate(all="ignore"):
        exact = [np.asarray(x, dtype=np.float64) for x in xs]
        scores = _scores(np, exact, attrs)
        delta = np.max(_scores_delta(exact[0], exact[1], scores, attrs, float(np.finfo(np.float32).eps) / 2), axis=-1, keepdims=True)
        weights = np.exp(scores - np.max(scores, axis=-1, keepdims=True))
        may_vanish = (weights < tiny * np.exp(2.0 * delta)) & (weights < 1.0)
        flush_below = np.where(may_vanish, np.inf, tiny)
    return like(q, _attention(np, xs, attrs, flush_below))


def _attention_undefined(xs, ps, attrs):
    """A row whose scores are all -inf: 0 by torch's convention for a row the mask hides entirely,
    nan by the softmax's formula (0 / 0), which fused kernels follow where a score is -inf from
    its values (an infinite q times a negative k; CUDA's float16 kernel on the GPU machine)."""
    with np.errstate(invalid="ignore", over="ignore"):
        empty = np.max(_scores(np, xs, attrs), axis=-1, keepdims=True) == -np.inf
    return np.broadcast_to(empty, _infer_attention(attrs, [np.shape(x) for x in xs]))


# Past this many (query, key, value column) triples the spread of the values around the output is
# bounded by magnitudes (|v| + |out|) rather than summed exactly.
EXACT_SPREAD_SIZE = 4_000_000


def _scores_delta(q, k, scores, attrs, roundoff):
    """Per score (`scores`, _scores of float64 operands q, k, ...), how far a kernel's rounding moves
    it: rounded twice (q k^T * scale, then + mask), by roundoff (|q k^T scale| + |score|); 0 where
    the score is not finite."""
    product = np.matmul(q, np.swapaxes(k, -1, -2)) * _scale(attrs, q.shape[-1])
    return np.where(np.isfinite(scores), roundoff * (np.abs(product) + np.abs(scores)), 0.0)


def _scores_rounding_error(xs, ps, attrs, roundoff):
    """How far a kernel's rounding of the scores moves the output. A score is rounded twice
    (q k^T * scale, then + mask): by delta = roundoff (|q k^T scale| + |score|). That moves each
    weight by a factor within exp(+-2 delta_max) of its row, so the output by at most
    expm1(2 delta_max) sum_j w_j |v_j - out|, and never past the farthest value (the output stays
    a convex combination of the v_j). In bfloat16 the scores -9703.5 and -9723.1 both round to
    -9728: the row's winning key becomes a tie, and the output the mean of two values."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in xs[:3])
    with np.errstate(all="ignore"):
        scores = _scores(np, [q, k, v, *xs[3:]], attrs)
        finite = np.isfinite(scores)
        delta = _scores_delta(q, k, scores, attrs, roundoff)
        weights = _weights(np, np.where(finite, scores, -np.inf))  # the keys with a finite score
        out = np.matmul(weights, v)
        if weights.size * v.shape[-1] <= EXACT_SPREAD_SIZE:
            spread = np.sum(weights[..., None] * np.abs(v[..., None, :, :] - out[..., :, None, :]), axis=-2)
        else:
            spread = np.matmul(weights, np.abs(v)) + np.abs(out)
        farthest = np.max(np.abs(v), axis=-2, keepdims=True) + np.abs(out)
        error = np.minimum(np.expm1(2.0 * np.max(delta, axis=-1, keepdims=True)) * spread, farthest)
    return np.where(np.isfinite(error), error, 0.0)


def _torch_attention(xs, ps, attrs):
    import torch

    q, k, v = xs[:3]
    return torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=xs[3] if attrs["mask"] else None, is_causal=attrs["causal"], scale=attrs["scale"]
    )


def _jax_attention(xs, ps, attrs):
    import jax.numpy as jnp

    return _attention(jnp, xs, attrs)


OPS = [
    OpDef(
        name="scaled_dot_product_attention",
        attrs=('causal', 'mask', 'scale'),
        infer=_infer_attention,
        reference=_attention_reference,
        torch=_torch_attention,
        jax=_jax_attention,
        accepts=rank_between(2, 4),
        draw_attrs=_draw_attention,
        draw_operands=_draw_operands,
        arity=(3, 4),
        intermediates=_intermediates,
        numerics=Numerics(
            sensitivity=4.0, undefined=_attention_undefined, intermediate_error=_scores_rounding_error,
            low_precision_model=_attention_in_dtype, why={
                "sensitivity": "a matmul, a softmax and a matmul in one op",
                "undefined": "a row of -inf scores is 0 by torch's convention, nan by the softmax's formula",
                "intermediate_error": "rounding the scores can turn a row's winning key into a tie (_scores_rounding_error)",
                "low_precision_model": "a flushing kernel reads a weight below float32's smallest normal, or one its "
                                       "rounded scores may take there, as 0 (_attention_in_dtype)"}),
    ),
]
