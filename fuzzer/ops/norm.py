"""Normalizations: layer_norm, batch_norm (train and eval), group_norm, instance_norm,
rms_norm and local_response_norm.

The mean-subtracting ones divide by sqrt(var + eps): for near-constant inputs the
variance is ill-conditioned in float32, which is why their sensitivity is high and they
declare `forward_error` (`_normalization_error`). rms_norm and local_response_norm
subtract nothing: their denominators are sums of squares plus a positive constant, well
conditioned, so the oracle's rounding model covers them with no declared error. The references
are the float64 math; what a half-type kernel does differently (statistics in float32, LRN's
squares overflowing early) is each op's Numerics.low_precision_model (`_kernel_model`).
"""

from __future__ import annotations

import numpy as np

from fuzzer.errors import OpUnsupported
from fuzzer.ops import Ladder, OpDef
from fuzzer.ops._common import check, like, numel, rank_between, st
from fuzzer.ops.numerics import Numerics

# 1e-12 makes near-constant rows divide rounding noise by ~1e-6; 0.1 lets eps dominate small variances.
EPS_CHOICES = (1e-5, 1e-6, 1e-12, 1e-3, 0.1)


def _draw_eps(draw) -> float:
    return draw(st.sampled_from(EPS_CHOICES))


def _check_eps(attrs) -> None:
    check(attrs["eps"] > 0, "eps must be positive")


def _channel_view(values, rank):
    """A per-channel vector shaped to broadcast along dim 1 (numpy, jax or torch)."""
    return values.reshape((1, -1) + (1,) * (rank - 2))


def _over_root(top, var, eps):
    """top / sqrt(var + eps)."""
    return top / np.sqrt(var + eps)


def _over_root_in_float32(top, var, eps):
    """_over_root with the root and the division in float32 or wider, the result in top's dtype:
    kernels hold their statistics in float32 for the half types (torch's opmath, flax's
    LayerNorm), where eps = 1e-12 is not 0. Added in float16 it is, and a constant row is 0 / 0
    (pytorch#151110, a bug, not an honest model)."""
    wide = np.promote_types(var.dtype, np.float32)
    return (top / np.sqrt(var.astype(wide) + eps)).astype(top.dtype)


def _kernel_model(reference, **parts):
    """`reference` with the `parts` it takes as keywords (over_root, squares) replaced by a
    low-precision kernel's: the op's Numerics.low_precision_model."""

    def model(xs, ps, attrs):
        return reference(xs, ps, attrs, **parts)

    model.__qualname__ = f"{reference.__name__}({', '.join(f'{k}={v.__name__}' for k, v in parts.items())})"
    return model


def _jax_over_root(top, var, eps):
    """_over_root in jax."""
    import jax.numpy as jnp

    wide = jnp.promote_types(var.dtype, jnp.float32)
    return (top / jnp.sqrt(var.astype(wide) + eps)).astype(top.dtype)


def _normalize(x, axes, eps, over_root=_over_root):
    """(x - mean) / sqrt(var + eps) over `axes` (logical dims), biased variance (divide by n)."""
    mean = np.mean(x, axis=axes, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=axes, keepdims=True)
    return over_root(x - mean, var, eps)


def _jax_normalize(x, axes, eps):
    import jax.numpy as jnp

    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
    return _jax_over_root(x - mean, var, eps)


def _normalization_error(x, axes, eps, scale=None):
    """Subtracting a rounded mean leaves an error of about roundoff * max|x| in every
    element, which the division by sqrt(var + eps) amplifies: near-constant rows are
    ill-conditioned (the result there is mostly rounding), the same in every framework.
    Measured on CPU for rows of 17 to 32769 near-equal values: torch, jax.jit and numpy
    float32 stay within 5x this bound (blocked/pairwise means), under the oracle's 40x. A
    sequential sum's error grows with the count: torch's float64 batch_norm (training) over 2,036
    equal values of 1.74 has a mean 150 roundoffs off, 41x this bound without the sqrt(count)
    factor (1-hour campaign case 326)."""
    spread = np.max(np.abs(x), axis=axes, keepdims=True)
    var = np.var(x, axis=axes, keepdims=True)
    count = np.prod([np.shape(x)[axis] for axis in axes])
    bound = np.broadcast_to(np.sqrt(count) * spread / np.sqrt(var + eps), x.shape)
    return bound if scale is None else bound * np.abs(scale)


# -- layer_norm and rms_norm (over trailing dims) ----------------------------------


def _draw_trailing_norm(draw, shapes):
    shape = shapes[0]
    count = draw(st.integers(1, min(2, len(shape))))
    return {"normalized_shape": list(shape[-count:]), "affine": draw(st.booleans()), "eps": _draw_eps(draw)}


def _infer_trailing_norm(attrs, shapes):
    normalized, shape = tuple(attrs["normalized_shape"]), shapes[0]
    check(0 < len(normalized) <= len(shape), f"normalized_shape {list(normalized)} is longer than the input rank")
    check(
        tuple(shape[-len(normalized) :]) == normalized,
        f"normalized_shape {list(normalized)} does not match the last dims of input shape {list(shape)}",
    )
    _check_eps(attrs)
    return shape


# The normalized (trailing) dims: each row's mean and variance reduce over them.
TRAILING_AXES = Ladder("reduction", lambda attrs, shapes: tuple(range(len(shapes[0]) - len(attrs["normalized_shape"]), len(shapes[0]))))


def _repair_normalized_shape(attrs, shapes):
    """normalized_shape restated from the input's last dims (as many as before)."""
    return {**attrs, "normalized_shape": list(shapes[0][-len(attrs["normalized_shape"]) :])}


def _trailing_axes(x, attrs):
    return tuple(range(x.ndim - len(attrs["normalized_shape"]), x.ndim))


def _layer_norm_params(attrs, shapes):
    if not attrs["affine"]:
        return {}
    return {"weight": tuple(attrs["normalized_shape"]), "bias": tuple(attrs["normalized_shape"])}


def _layer_norm_reference(xs, ps, attrs, over_root=_over_root):
    """Normalize over the trailing len(normalized_shape) *logical* dims, biased variance.

    Statistics are taken over logical dims, never memory order: a transposed
    input must give the same answer as its contiguous copy.
    """
    x = xs[0]
    out = _normalize(x, _trailing_axes(x, attrs), attrs["eps"], over_root)
    if attrs["affine"]:
        out = out * ps["weight"] + ps["bias"]
    return out.astype(x.dtype)


def _layer_norm_error(xs, ps, attrs):
    x = xs[0]
    return _normalization_error(x, _trailing_axes(x, attrs), attrs["eps"], ps.get("weight"))


def _torch_layer_norm(xs, ps, attrs):
    import torch

    return torch.nn.functional.layer_norm(
        xs[0], attrs["normalized_shape"], ps.get("weight"), ps.get("bias"), attrs["eps"]
    )


def _jax_layer_norm(xs, ps, attrs):
    x = xs[0]
    out = _jax_normalize(x, _trailing_axes(x, attrs), attrs["eps"])
    if attrs["affine"]:
        out = out * ps["weight"] + ps["bias"]
    return out


def _rms_norm_params(attrs, shapes):
    return {"weight": tuple(attrs["normalized_shape"])} if attrs["affine"] else {}


def _rms_norm_reference(xs, ps, attrs, over_root=_over_root):
    """x / sqrt(mean(x^2) + eps) over the trailing len(normalized_shape) logical dims, times
    `weight` when affine (rms_norm has no bias). eps is always given: torch's default (None)
    would be the dtype's machine epsilon."""
    x = xs[0]
    mean_square = np.mean(x * x, axis=_trailing_axes(x, attrs), keepdims=True)
    out = over_root(x, mean_square, attrs["eps"])
    return like(x, out * ps["weight"] if attrs["affine"] else out)


def _torch_rms_norm(xs, ps, attrs):
    import torch

    if not hasattr(torch.nn.functional, "rms_norm"):
        raise OpUnsupported("torch.nn.functional.rms_norm is missing before torch 2.4")
    return torch.nn.functional.rms_norm(xs[0], attrs["normalized_shape"], ps.get("weight"), attrs["eps"])


def _jax_rms_norm(xs, ps, attrs):
    import jax.numpy as jnp

    x = xs[0]
    out = _jax_over_root(x, jnp.mean(jnp.square(x), axis=_trailing_axes(x, attrs), keepdims=True), attrs["eps"])
    return out * ps["weight"] if attrs["affine"] else out


# -- batch_norm ----------------------------------------------------------------------


def _draw_batch_norm(draw, shapes):
    shape = shapes[0]
    # Training mode needs more than one value per channel (torch refuses otherwise).
    can_train = numel(shape) // shape[1] > 1
    return {"training": can_train and draw(st.booleans()), "eps": _draw_eps(draw)}


def _infer_batch_norm(attrs, shapes):
    shape = shapes[0]
    check(2 <= len(shape) <= 4, f"batch_norm takes (N, C), (N, C, L) or (N, C, H, W), got {list(shape)}")
    if attrs["training"]:
        check(numel(shape) // shape[1] > 1, "training mode needs more than one value per channel")
    _check_eps(attrs)
    return shape


def _batch_norm_params(attrs, shapes):
    channels = (shapes[0][1],)
    return {"weight": channels, "bias": channels, "running_mean": channels, "running_var": channels}


def _all_but_channels(x):
    return tuple(i for i in range(x.ndim) if i != 1)


def _batch_norm_reference(xs, ps, attrs, over_root=_over_root):
    """Channels are dim 1. Eval: running statistics. Training: biased batch statistics over
    every dim but 1 (the running-stat update is a side effect, not an output)."""
    x = xs[0]
    if attrs["training"]:
        out = _normalize(x, _all_but_channels(x), attrs["eps"], over_root)
    else:
        mean, var = _channel_view(ps["running_mean"], x.ndim), _channel_view(ps["running_var"], x.ndim)
        out = over_root(x - mean, var, attrs["eps"])
    return (out * _channel_view(ps["weight"], x.ndim) + _channel_view(ps["bias"], x.ndim)).astype(x.dtype)


def _batch_norm_error(xs, ps, attrs):
    x = xs[0]
    if not attrs["training"]:
        # Kernels fold the running statistics into x * scale + shift (scale = w / sqrt(var + eps),
        # shift = b - mean * scale), each rounded: where the terms cancel, the result is mostly
        # their rounding (bfloat16 gives 0 or a negative for a true 0.00075).
        mean, var = _channel_view(ps["running_mean"], x.ndim), _channel_view(ps["running_var"], x.ndim)
        scale = np.abs(_channel_view(ps["weight"], x.ndim)) / np.sqrt(var + attrs["eps"])
        return (np.abs(x) + np.abs(mean)) * scale + np.abs(_channel_view(ps["bias"], x.ndim))
    return _normalization_error(x, _all_but_channels(x), attrs["eps"], _channel_view(ps["weight"], x.ndim))


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
    if attrs["training"]:
        out = _jax_normalize(x, _all_but_channels(x), attrs["eps"])
    else:
        mean, var = _channel_view(ps["running_mean"], x.ndim), _channel_view(ps["running_var"], x.ndim)
        out = _jax_over_root(x - mean, var, attrs["eps"])
    return out * _channel_view(ps["weight"], x.ndim) + _channel_view(ps["bias"], x.ndim)


# -- group_norm and instance_norm (per sample, over channels' groups and space) ---------


def _affine_params(attrs, shapes):
    channels = (shapes[0][1],)
    return {"weight": channels, "bias": channels} if attrs["affine"] else {}


def _per_channel_affine(out, ps, attrs):
    if not attrs["affine"]:
        return out
    return out * _channel_view(ps["weight"], out.ndim) + _channel_view(ps["bias"], out.ndim)


def _group_norm_accepts(shape) -> bool:
    return 2 <= len(shape) <= 5 and numel(shape) > 1


def _torch_accepts_groups(shape, groups) -> bool:
    """torch refuses a group_norm whose N * (C / groups) * prod(spatial) is 1 (its batch-size check)."""
    return numel(shape) // groups > 1


def _draw_group_norm(draw, shapes):
    channels = shapes[0][1]
    divisors = [g for g in range(1, channels + 1) if channels % g == 0 and _torch_accepts_groups(shapes[0], g)]
    return {"num_groups": draw(st.sampled_from(divisors)), "affine": draw(st.booleans()), "eps": _draw_eps(draw)}


def _infer_group_norm(attrs, shapes):
    shape, groups = shapes[0], attrs["num_groups"]
    check(2 <= len(shape) <= 5, f"group_norm takes (N, C, *) of rank 2 to 5, got {list(shape)}")
    check(groups >= 1 and shape[1] % groups == 0, f"num_groups {groups} does not divide the {shape[1]} channels")
    check(
        _torch_accepts_groups(shape, groups),
        f"group_norm of {list(shape)} in {groups} groups has one value per group in the whole batch",
    )
    _check_eps(attrs)
    return shape


def _grouped(x, attrs):
    """(N, C, *) -> (N, groups, C / groups * prod(*)): each group's channels and positions in a row."""
    return x.reshape(x.shape[0], attrs["num_groups"], -1)


def _group_norm_reference(xs, ps, attrs, over_root=_over_root):
    """Dim 1's channels split into num_groups consecutive groups; each (sample, group) is
    normalized over its channels and all positions together (biased variance), then the
    per-channel weight and bias apply when affine."""
    x = xs[0]
    out = _normalize(_grouped(x, attrs), (2,), attrs["eps"], over_root).reshape(x.shape)
    return like(x, _per_channel_affine(out, ps, attrs))


def _group_norm_error(xs, ps, attrs):
    x = np.asarray(xs[0])
    bound = _normalization_error(_grouped(x, attrs), (2,), attrs["eps"]).reshape(x.shape)
    return bound * np.abs(_channel_view(ps["weight"], x.ndim)) if attrs["affine"] else bound


def _torch_group_norm(xs, ps, attrs):
    import torch

    return torch.nn.functional.group_norm(xs[0], attrs["num_groups"], ps.get("weight"), ps.get("bias"), attrs["eps"])


def _jax_group_norm(xs, ps, attrs):
    x = xs[0]
    out = _jax_normalize(_grouped(x, attrs), (2,), attrs["eps"]).reshape(x.shape)
    return _per_channel_affine(out, ps, attrs)


def _instance_norm_accepts(shape) -> bool:
    # Statistics over one position are meaningless; torch refuses them.
    return 3 <= len(shape) <= 5 and numel(shape[2:]) > 1


def _draw_instance_norm(draw, shapes):
    return {"affine": draw(st.booleans()), "eps": _draw_eps(draw)}


def _infer_instance_norm(attrs, shapes):
    check(
        _instance_norm_accepts(shapes[0]),
        f"instance_norm takes (N, C, *) of rank 3 to 5 with more than one position, got {list(shapes[0])}",
    )
    _check_eps(attrs)
    return shapes[0]


def _spatial_axes(x):
    return tuple(range(2, x.ndim))


def _instance_norm_reference(xs, ps, attrs, over_root=_over_root):
    """Each (sample, channel) normalized over its positions (dims 2..), biased variance, from the
    input's own statistics (no running statistics, as in eval without track_running_stats),
    then the per-channel weight and bias when affine."""
    x = xs[0]
    return like(x, _per_channel_affine(_normalize(x, _spatial_axes(x), attrs["eps"], over_root), ps, attrs))


def _instance_norm_error(xs, ps, attrs):
    x = xs[0]
    scale = _channel_view(ps["weight"], x.ndim) if attrs["affine"] else None
    return _normalization_error(x, _spatial_axes(x), attrs["eps"], scale)


def _torch_instance_norm(xs, ps, attrs):
    import torch

    return torch.nn.functional.instance_norm(
        xs[0], weight=ps.get("weight"), bias=ps.get("bias"), use_input_stats=True, eps=attrs["eps"]
    )


def _jax_instance_norm(xs, ps, attrs):
    x = xs[0]
    return _per_channel_affine(_jax_normalize(x, _spatial_axes(x), attrs["eps"]), ps, attrs)


# -- local_response_norm ------------------------------------------------------------


def _draw_local_response_norm(draw, shapes):
    return {
        "size": draw(st.sampled_from([1, 2, 3, 5])),
        "alpha": draw(st.sampled_from([1e-4, 1e-2, 1.0])),
        "beta": draw(st.sampled_from([0.75, 0.5, 1.0])),
        "k": draw(st.sampled_from([1.0, 2.0, 0.5])),
    }


def _infer_local_response_norm(attrs, shapes):
    shape = shapes[0]
    check(3 <= len(shape) <= 5, f"local_response_norm takes (N, C, *) of rank 3 to 5, got {list(shape)}")
    check(attrs["size"] >= 1, "size must be >= 1")
    check(attrs["k"] > 0, "k must be positive (the denominator must not vanish)")
    return shape


def _window_offsets(size):
    """Channel c averages channels c - size // 2 .. c + (size - 1) // 2 (torch's padding)."""
    return range(-(size // 2), (size - 1) // 2 + 1)


def _squares(x):
    return x * x


def _squares_in_dtype(x):
    """x * x, inf where |x| is within two epsilons of the square root of x's dtype's largest value:
    an upstream kernel's rounding may put x past it (cuBLAS's float16 einsum gives 256.0 where
    numpy's gives 255.875; 256 squared overflows float16), and LRN then gives 0."""
    info = np.finfo(x.dtype)
    with np.errstate(over="ignore"):
        return np.where(np.abs(x) * (1 + 2 * info.eps) >= np.sqrt(info.max), np.inf, x * x)


def _local_response_norm_reference(xs, ps, attrs, squares=_squares):
    """b_c = a_c / (k + alpha / size * sum of a_j^2 over the channel window of c)^beta, channels
    along dim 1; window channels outside [0, C) count as zeros and the average always divides
    by `size` (torch pads, then average-pools with the padding counted)."""
    x, size = xs[0], attrs["size"]
    squared, channels = squares(x), x.shape[1]
    window = np.zeros_like(x)
    for offset in _window_offsets(size):
        low, high = max(0, -offset), min(channels, channels - offset)  # channels c whose c + offset exists
        window[:, low:high] += squared[:, low + offset : high + offset]
    return like(x, x / (attrs["k"] + attrs["alpha"] / size * window) ** attrs["beta"])


def _torch_local_response_norm(xs, ps, attrs):
    import torch

    return torch.nn.functional.local_response_norm(xs[0], attrs["size"], attrs["alpha"], attrs["beta"], attrs["k"])


def _jax_local_response_norm(xs, ps, attrs):
    import jax.numpy as jnp

    x, size = xs[0], attrs["size"]
    channels = x.shape[1]
    padding = [(0, 0), (size // 2, (size - 1) // 2)] + [(0, 0)] * (x.ndim - 2)
    padded = jnp.pad(jnp.square(x), padding)
    window = sum(padded[:, start : start + channels] for start in range(size))
    return x / (attrs["k"] + attrs["alpha"] / size * window) ** attrs["beta"]


STATISTICS_IN_FLOAT32 = "half-type kernels hold the statistics in float32, where eps = 1e-12 is not 0 (_over_root_in_float32)"


def _mean_subtracting(reference, forward_error, forward_error_also=""):
    """The numerics of a norm that divides (x - mean) by sqrt(var + eps)."""
    return Numerics(
        sensitivity=4.0, forward_error=forward_error,
        low_precision_model=_kernel_model(reference, over_root=_over_root_in_float32),
        why={"sensitivity": "1 / sqrt(var + eps) amplifies the rounding of near-constant rows",
             "forward_error": "a rounded mean's error in every element, amplified by 1 / sqrt(var + eps) "
                              "(_normalization_error)" + forward_error_also,
             "low_precision_model": STATISTICS_IN_FLOAT32})


OPS = [
    OpDef(
        name="layer_norm",
        attrs=('normalized_shape', 'eps', 'affine'),
        infer=_infer_trailing_norm,
        reference=_layer_norm_reference,
        torch=_torch_layer_norm,
        jax=_jax_layer_norm,
        accepts=rank_between(1, 5),
        draw_attrs=_draw_trailing_norm,
        params=_layer_norm_params,
        numerics=_mean_subtracting(_layer_norm_reference, _layer_norm_error),
        repair_attrs=_repair_normalized_shape,
        ladder=TRAILING_AXES,
    ),
    OpDef(
        name="batch_norm",
        attrs=('eps', 'training'),
        infer=_infer_batch_norm,
        reference=_batch_norm_reference,
        torch=_torch_batch_norm,
        jax=_jax_batch_norm,
        accepts=rank_between(2, 4),
        draw_attrs=_draw_batch_norm,
        params=_batch_norm_params,
        numerics=_mean_subtracting(_batch_norm_reference, _batch_norm_error, "; in eval, the running statistics "
                                   "folded into x * scale + shift, each rounded, cancel (_batch_norm_error)"),
        buffers=frozenset({"running_mean", "running_var"}),
    ),
    OpDef(
        name="group_norm",
        attrs=('num_groups', 'eps', 'affine'),
        infer=_infer_group_norm,
        reference=_group_norm_reference,
        torch=_torch_group_norm,
        jax=_jax_group_norm,
        accepts=_group_norm_accepts,
        draw_attrs=_draw_group_norm,
        params=_affine_params,
        numerics=_mean_subtracting(_group_norm_reference, _group_norm_error),
    ),
    OpDef(
        name="instance_norm",
        attrs=('eps', 'affine'),
        infer=_infer_instance_norm,
        reference=_instance_norm_reference,
        torch=_torch_instance_norm,
        jax=_jax_instance_norm,
        accepts=_instance_norm_accepts,
        draw_attrs=_draw_instance_norm,
        params=_affine_params,
        numerics=_mean_subtracting(_instance_norm_reference, _instance_norm_error),
    ),
    OpDef(
        name="rms_norm",
        attrs=('normalized_shape', 'eps', 'affine'),
        infer=_infer_trailing_norm,
        reference=_rms_norm_reference,
        torch=_torch_rms_norm,
        jax=_jax_rms_norm,
        accepts=rank_between(1, 5),
        draw_attrs=_draw_trailing_norm,
        params=_rms_norm_params,
        numerics=Numerics(sensitivity=4.0, low_precision_model=_kernel_model(_rms_norm_reference, over_root=_over_root_in_float32),
                          why={"sensitivity": "set with the mean-subtracting norms; its denominator is well conditioned",
                               "low_precision_model": STATISTICS_IN_FLOAT32}),
        repair_attrs=_repair_normalized_shape,
        ladder=TRAILING_AXES,
    ),
    OpDef(
        name="local_response_norm",
        attrs=('size', 'alpha', 'beta', 'k'),
        infer=_infer_local_response_norm,
        reference=_local_response_norm_reference,
        torch=_torch_local_response_norm,
        jax=_jax_local_response_norm,
        accepts=rank_between(3, 5),
        draw_attrs=_draw_local_response_norm,
        numerics=Numerics(sensitivity=2.0, low_precision_model=_kernel_model(_local_response_norm_reference, squares=_squares_in_dtype),
                          why={"sensitivity": "divides by a power of a sum of squares, which carries their rounding",
                               "low_precision_model": "a square that an upstream rounding may push past the dtype's "
                                                      "largest value is inf (_squares_in_dtype)"}),
    ),
]
