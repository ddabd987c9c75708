"""layer_norm and batch_norm (train and eval).

Both divide by sqrt(var + eps): for near-constant inputs the variance is
ill-conditioned in float32, which is why their sensitivity is high; the oracle's
same-dtype reference term (see oracle.py) absorbs the rest.
"""

from __future__ import annotations

import numpy as np

from fuzzer.ops import OpDef
from fuzzer.ops._common import check, numel, rank_between, st

EPS = 1e-5


def _draw_layer_norm(draw, shapes):
    shape = shapes[0]
    count = draw(st.integers(1, min(2, len(shape))))
    return {"normalized_shape": list(shape[-count:]), "affine": draw(st.booleans()), "eps": EPS}


def _infer_layer_norm(attrs, shapes):
    normalized, shape = tuple(attrs["normalized_shape"]), shapes[0]
    check(0 < len(normalized) <= len(shape), f"normalized_shape {list(normalized)} is longer than the input rank")
    check(
        tuple(shape[-len(normalized) :]) == normalized,
        f"normalized_shape {list(normalized)} does not match the last dims of input shape {list(shape)}",
    )
    check(attrs["eps"] > 0, "eps must be positive")
    return shape


def _layer_norm_params(attrs, shapes):
    if not attrs["affine"]:
        return {}
    return {"weight": tuple(attrs["normalized_shape"]), "bias": tuple(attrs["normalized_shape"])}


def _layer_norm_reference(xs, ps, attrs):
    """Normalize over the trailing len(normalized_shape) *logical* dims, biased variance.

    Statistics are taken over logical dims, never memory order: a transposed
    input must give the same answer as its contiguous copy.
    """
    x = xs[0]
    axes = tuple(range(x.ndim - len(attrs["normalized_shape"]), x.ndim))
    mean = np.mean(x, axis=axes, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=axes, keepdims=True)
    out = (x - mean) / np.sqrt(var + attrs["eps"])
    if attrs["affine"]:
        out = out * ps["weight"] + ps["bias"]
    return out.astype(x.dtype)


def _normalization_error(x, axes, eps, scale=None):
    """Subtracting a rounded mean leaves an error of about roundoff * max|x| in every
    element, which the division by sqrt(var + eps) amplifies: near-constant rows are
    ill-conditioned (the result there is mostly rounding), the same in every framework."""
    spread = np.max(np.abs(x), axis=axes, keepdims=True)
    var = np.var(x, axis=axes, keepdims=True)
    bound = np.broadcast_to(spread / np.sqrt(var + eps), x.shape)
    return bound if scale is None else bound * np.abs(scale)


def _layer_norm_error(xs, ps, attrs):
    x = xs[0]
    axes = tuple(range(x.ndim - len(attrs["normalized_shape"]), x.ndim))
    return _normalization_error(x, axes, attrs["eps"], ps.get("weight"))


def _batch_norm_error(xs, ps, attrs):
    x = xs[0]
    if not attrs["training"]:
        return np.zeros_like(x)  # running statistics: nothing is subtracted that was rounded here
    axes = tuple(i for i in range(x.ndim) if i != 1)
    return _normalization_error(x, axes, attrs["eps"], _channel_view(ps["weight"], x.ndim))


def _torch_layer_norm(xs, ps, attrs):
    import torch

    return torch.nn.functional.layer_norm(
        xs[0], attrs["normalized_shape"], ps.get("weight"), ps.get("bias"), attrs["eps"]
    )


def _jax_layer_norm(xs, ps, attrs):
    import jax.numpy as jnp

    x = xs[0]
    axes = tuple(range(x.ndim - len(attrs["normalized_shape"]), x.ndim))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
    out = (x - mean) / jnp.sqrt(var + attrs["eps"])
    if attrs["affine"]:
        out = out * ps["weight"] + ps["bias"]
    return out


def _draw_batch_norm(draw, shapes):
    shape = shapes[0]
    # Training mode needs more than one value per channel (torch refuses otherwise).
    can_train = numel(shape) // shape[1] > 1
    return {"training": can_train and draw(st.booleans()), "eps": EPS}


def _infer_batch_norm(attrs, shapes):
    shape = shapes[0]
    check(2 <= len(shape) <= 4, f"batch_norm takes (N, C), (N, C, L) or (N, C, H, W), got {list(shape)}")
    if attrs["training"]:
        check(numel(shape) // shape[1] > 1, "training mode needs more than one value per channel")
    check(attrs["eps"] > 0, "eps must be positive")
    return shape


def _batch_norm_params(attrs, shapes):
    channels = (shapes[0][1],)
    return {"weight": channels, "bias": channels, "running_mean": channels, "running_var": channels}


def _channel_view(values, rank):
    return np.reshape(values, (1, -1) + (1,) * (rank - 2))


def _batch_norm_reference(xs, ps, attrs):
    """Channels are dim 1. Eval: running statistics. Training: biased batch statistics over
    every dim but 1 (the running-stat update is a side effect, not an output)."""
    x = xs[0]
    if attrs["training"]:
        axes = tuple(i for i in range(x.ndim) if i != 1)
        mean = np.mean(x, axis=axes, keepdims=True)
        var = np.mean((x - mean) ** 2, axis=axes, keepdims=True)
    else:
        mean, var = _channel_view(ps["running_mean"], x.ndim), _channel_view(ps["running_var"], x.ndim)
    out = (x - mean) / np.sqrt(var + attrs["eps"])
    return (out * _channel_view(ps["weight"], x.ndim) + _channel_view(ps["bias"], x.ndim)).astype(x.dtype)


def _torch_batch_norm(xs, ps, attrs):
    import torch

    # Clones: training mode updates the running statistics in place, and the
    # parameters must stay the same for a re-run.
    return torch.nn.functional.batch_norm(
        xs[0],
        ps["running_mean"].clone(),
        ps["running_var"].clone(),
        ps["weight"],
        ps["bias"],
        training=attrs["training"],
        eps=attrs["eps"],
    )


def _jax_batch_norm(xs, ps, attrs):
    import jax.numpy as jnp

    x = xs[0]
    view = (1, -1) + (1,) * (x.ndim - 2)
    if attrs["training"]:
        axes = tuple(i for i in range(x.ndim) if i != 1)
        mean = jnp.mean(x, axis=axes, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
    else:
        mean, var = ps["running_mean"].reshape(view), ps["running_var"].reshape(view)
    out = (x - mean) / jnp.sqrt(var + attrs["eps"])
    return out * ps["weight"].reshape(view) + ps["bias"].reshape(view)


OPS = [
    OpDef(
        name="layer_norm",
        infer=_infer_layer_norm,
        reference=_layer_norm_reference,
        torch=_torch_layer_norm,
        jax=_jax_layer_norm,
        accepts=rank_between(1, 5),
        draw_attrs=_draw_layer_norm,
        params=_layer_norm_params,
        sensitivity=4.0,
        forward_error=_layer_norm_error,
    ),
    OpDef(
        name="batch_norm",
        infer=_infer_batch_norm,
        reference=_batch_norm_reference,
        torch=_torch_batch_norm,
        jax=_jax_batch_norm,
        accepts=rank_between(2, 4),
        draw_attrs=_draw_batch_norm,
        params=_batch_norm_params,
        sensitivity=4.0,
        forward_error=_batch_norm_error,
    ),
]
