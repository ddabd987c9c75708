"""Convolutions over 1, 2 and 3 spatial dims (NCL, NCHW, NCDHW) and their transposes.

conv1d/conv2d/conv3d (stride, padding or padding="same", dilation, groups with a
depthwise share, bias) and conv_transpose1d/conv_transpose2d (stride, padding,
output_padding, dilation, groups, bias). Each rank is one declaration of the same
generic shape rule, reference and implementations. The references loop over kernel
offsets only: batch, groups and channels are one batched matmul per offset.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np

from fuzzer.ops import Ladder, OpDef
from fuzzer.ops._common import check, rank_between, st
from fuzzer.ops.matmul import CONTRACTION

# torch warns on every call of an even kernel with padding="same" that it pads a copy of the input:
# correct, and thousands of lines in a campaign's log.
warnings.filterwarnings("ignore", message="Using padding='same' with even kernel lengths")

# jax dimension letters per spatial rank: lhs/out "NC" + these, rhs "OI" + these.
SPATIAL_LETTERS = {1: "H", 2: "HW", 3: "DHW"}
# One draw in four is depthwise (groups == in_channels, out_channels = k * in_channels), one in
# four grouped with another divisor of in_channels: the depthwise and grouped kernels are
# separate code paths in oneDNN, XNNPACK and inductor.
GROUPS_KINDS = ("dense", "dense", "grouped", "depthwise")
SAME_PADDING_SHARE = 5  # one conv in five uses padding="same" (which requires stride 1)


def per_dim(draw, strategy, rank: int) -> list[int]:
    """One value per spatial dim; all equal half the time (the common square case)."""
    first = draw(strategy)
    return [first] * rank if draw(st.booleans()) else [first, *(draw(strategy) for _ in range(rank - 1))]


def spatial_rank(attrs) -> int:
    return len(attrs["kernel_size"])


def _check_rank(shape, rank: int, what: str) -> None:
    layout = "(N, C, " + ", ".join(SPATIAL_LETTERS[rank]) + ")"
    check(len(shape) == rank + 2, f"{what} takes {layout}, got {list(shape)}")


def _check_ints(attrs, names, rank: int, low: int) -> None:
    for name in names:
        value = attrs[name]
        check(isinstance(value, list) and len(value) == rank and all(isinstance(v, int) and v >= low for v in value),
              f"{name} must be {rank} integers >= {low}, got {value!r}")


def _check_groups(channels: int, out_channels: int, groups: int) -> None:
    check(groups >= 1 and channels % groups == 0, f"in_channels {channels} is not divisible by groups {groups}")
    check(out_channels >= 1 and out_channels % groups == 0, f"out_channels {out_channels} is not divisible by groups {groups}")


def _draw_groups(draw, channels: int) -> tuple[int, int]:
    """(groups, out_channels)."""
    kind = draw(st.sampled_from(GROUPS_KINDS))
    if kind == "depthwise":
        return channels, channels * draw(st.sampled_from([1, 2, 3]))
    divisors = [g for g in range(1, channels + 1) if channels % g == 0]
    groups = draw(st.sampled_from(divisors)) if kind == "grouped" else 1
    return groups, groups * draw(st.sampled_from([1, 2, 3, 4, 8]))


# -- convolution -------------------------------------------------------------------


# A dense conv contracts over in_channels x kernel: the ladder goes on in_channels (a grouped one's
# groups would have to divide the rung).
IN_CHANNELS_CONTRACT = Ladder("contraction", lambda attrs, shapes: (1,) if attrs["groups"] == 1 else ())


def padding_pairs(attrs) -> list[tuple[int, int]]:
    """(low, high) zero padding per spatial dim. padding="same" pads dilation * (kernel - 1)
    in total, the odd element on the high side, as torch does (and XLA's SAME)."""
    if attrs["padding"] == "same":
        totals = [d * (k - 1) for k, d in zip(attrs["kernel_size"], attrs["dilation"])]
        return [(t // 2, t - t // 2) for t in totals]
    return [(p, p) for p in attrs["padding"]]


def _conv_out_size(size, kernel, stride, pads, dilation):
    return (size + pads[0] + pads[1] - dilation * (kernel - 1) - 1) // stride + 1


def _fits(spatial, kernel, padding, dilation):
    return all(s + 2 * p >= d * (k - 1) + 1 for s, k, p, d in zip(spatial, kernel, padding, dilation))


def _draw_conv(draw, shapes):
    channels, spatial = shapes[0][1], shapes[0][2:]
    rank = len(spatial)
    groups, out_channels = _draw_groups(draw, channels)
    kernel = [draw(st.integers(1, min(3, s + 2))) for s in spatial]
    dilation = [draw(st.integers(1, 2)) if k > 1 else 1 for k in kernel]
    attrs = {"out_channels": out_channels, "kernel_size": kernel, "dilation": dilation, "groups": groups, "bias": draw(st.booleans())}
    if draw(st.integers(1, SAME_PADDING_SHARE)) == 1:
        return {**attrs, "stride": [1] * rank, "padding": "same"}
    padding = [draw(st.integers(0, k // 2)) for k in kernel]
    if not _fits(spatial, kernel, padding, dilation):
        dilation = [1] * rank
        padding = [k // 2 for k in kernel]
        if not _fits(spatial, kernel, padding, dilation):
            kernel, padding = [1] * rank, [0] * rank
    return {**attrs, "kernel_size": kernel, "dilation": dilation, "stride": per_dim(draw, st.integers(1, 2), rank), "padding": padding}


def _infer_conv(attrs, shapes):
    rank, shape = spatial_rank(attrs), shapes[0]
    _check_rank(shape, rank, f"conv{rank}d")
    _check_groups(shape[1], attrs["out_channels"], attrs["groups"])
    _check_ints(attrs, ("kernel_size", "stride", "dilation"), rank, 1)
    if attrs["padding"] == "same":
        check(attrs["stride"] == [1] * rank, f"padding='same' needs stride 1, got {attrs['stride']}")
    else:
        _check_ints(attrs, ("padding",), rank, 0)
    out = [
        _conv_out_size(s, k, st_, pads, d)
        for s, k, st_, pads, d in zip(shape[2:], attrs["kernel_size"], attrs["stride"], padding_pairs(attrs), attrs["dilation"])
    ]
    check(min(out) >= 1, f"kernel does not fit: output spatial size would be {out}")
    return (shape[0], attrs["out_channels"], *out)


def _conv_params(attrs, shapes):
    params = {"weight": (attrs["out_channels"], shapes[0][1] // attrs["groups"], *attrs["kernel_size"])}
    if attrs["bias"]:
        params["bias"] = (attrs["out_channels"],)
    return params


def _conv_intermediates(attrs, shapes):
    """The reference's zero-padded input (`_conv_reference`'s xp)."""
    padded = [s + low + high for s, (low, high) in zip(shapes[0][2:], padding_pairs(attrs))]
    return {"padded input": (*shapes[0][:2], *padded)}


def _add_bias(out, ps, attrs):
    if not attrs["bias"]:
        return out
    return out + ps["bias"].reshape(1, -1, *[1] * (out.ndim - 2))


def _mix_channels(x, weight):
    """out[n, g, o, ...] = sum_c weight[g, o, c] * x[n, g, c, ...]: one batched matmul (BLAS; numpy's
    einsum of the same runs its own loop, 2-3x slower on the campaign's shapes)."""
    out = weight @ x.reshape(*x.shape[:3], -1)
    return out.reshape(*out.shape[:3], *x.shape[3:])


def _conv_reference(xs, ps, attrs):
    """Cross-correlation (no kernel flip), as torch and cuDNN define convolution:
    out[n, o, i...] = b[o] + sum_{c < C/groups, k...} w[o, c, k...] * xpad[n, g(o) * C/groups + c, i*s + k*d ...]
    with g(o) = o // (out_channels / groups) and xpad the input zero-padded per `padding_pairs`."""
    x, groups = xs[0], attrs["groups"]
    out_shape = _infer_conv(attrs, [x.shape])
    batch, channels = x.shape[0], x.shape[1]
    out_per_group = out_shape[1] // groups
    xp = np.pad(x, ((0, 0), (0, 0), *padding_pairs(attrs)))
    xp = xp.reshape(batch, groups, channels // groups, *xp.shape[2:])
    weight = ps["weight"].reshape(groups, out_per_group, channels // groups, *attrs["kernel_size"])
    out = np.zeros((batch, groups, out_per_group, *out_shape[2:]), dtype=x.dtype)
    for offset in itertools.product(*(range(k) for k in attrs["kernel_size"])):
        window = tuple(
            slice(k * d, k * d + s * (n - 1) + 1, s)
            for k, d, s, n in zip(offset, attrs["dilation"], attrs["stride"], out_shape[2:])
        )
        out += _mix_channels(xp[(..., *window)], weight[(..., *offset)])
    return _add_bias(out.reshape(out_shape), ps, attrs).astype(x.dtype)


def _torch_conv(xs, ps, attrs):
    import torch

    conv = getattr(torch.nn.functional, f"conv{spatial_rank(attrs)}d")
    return conv(xs[0], ps["weight"], ps.get("bias"), attrs["stride"], attrs["padding"], attrs["dilation"], attrs["groups"])


def _jax_dimension_numbers(rank: int):
    letters = SPATIAL_LETTERS[rank]
    return ("NC" + letters, "OI" + letters, "NC" + letters)


def _jax_conv(xs, ps, attrs):
    from jax import lax

    rank = spatial_rank(attrs)
    out = lax.conv_general_dilated(
        xs[0],
        ps["weight"],
        window_strides=attrs["stride"],
        padding=padding_pairs(attrs),
        rhs_dilation=attrs["dilation"],
        dimension_numbers=_jax_dimension_numbers(rank),
        feature_group_count=attrs["groups"],
    )
    return _add_bias(out, ps, attrs)


# -- transposed convolution --------------------------------------------------------


def _transpose_out_size(size, kernel, stride, padding, output_padding, dilation):
    return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1


def _draw_conv_transpose(draw, shapes):
    channels, rank = shapes[0][1], len(shapes[0]) - 2
    divisors = [g for g in range(1, channels + 1) if channels % g == 0]
    groups = draw(st.sampled_from(divisors)) if draw(st.integers(0, 3)) == 0 else 1
    kernel = per_dim(draw, st.integers(1, 3), rank)
    stride = per_dim(draw, st.integers(1, 3), rank)
    dilation = [draw(st.integers(1, 2)) if k > 1 else 1 for k in kernel]
    return {
        "out_channels": groups * draw(st.sampled_from([1, 2, 3, 4])),
        "kernel_size": kernel,
        "stride": stride,
        # At most half the dilated kernel: the output keeps at least one row per input row.
        "padding": [draw(st.integers(0, d * (k - 1) // 2)) for k, d in zip(kernel, dilation)],
        "output_padding": [draw(st.integers(0, max(s, d) - 1)) for s, d in zip(stride, dilation)],
        "dilation": dilation,
        "groups": groups,
        "bias": draw(st.booleans()),
    }


def _infer_conv_transpose(attrs, shapes):
    rank, shape = spatial_rank(attrs), shapes[0]
    _check_rank(shape, rank, f"conv_transpose{rank}d")
    _check_groups(shape[1], attrs["out_channels"], attrs["groups"])
    _check_ints(attrs, ("kernel_size", "stride", "dilation"), rank, 1)
    _check_ints(attrs, ("padding", "output_padding"), rank, 0)
    for k, s, p, op, d in zip(attrs["kernel_size"], attrs["stride"], attrs["padding"], attrs["output_padding"], attrs["dilation"]):
        # torch's rule; the extra row would otherwise be a whole new output row nothing reaches.
        check(op < s or op < d, f"output_padding {op} must be smaller than stride {s} or dilation {d}")
        # Beyond d * (k - 1) the jax lowering would need negative padding; we never draw it.
        check(p <= d * (k - 1), f"padding {p} exceeds dilation * (kernel_size - 1) = {d * (k - 1)}")
    out = [
        _transpose_out_size(*args)
        for args in zip(shape[2:], attrs["kernel_size"], attrs["stride"], attrs["padding"], attrs["output_padding"], attrs["dilation"])
    ]
    check(min(out) >= 1, f"output spatial size would be {out}")
    return (shape[0], attrs["out_channels"], *out)


def _conv_transpose_params(attrs, shapes):
    params = {"weight": (shapes[0][1], attrs["out_channels"] // attrs["groups"], *attrs["kernel_size"])}
    if attrs["bias"]:
        params["bias"] = (attrs["out_channels"],)
    return params


def _conv_transpose_reference(xs, ps, attrs):
    """The adjoint of the convolution with the same stride, padding and dilation (torch's
    conv_transpose; weight is (in_channels, out_channels / groups, k...)). Every input element
    scatters into a full-size output:
        full[n, g(c) * Og + o, i*s + k*d ...] += x[n, c, i...] * w[c, o, k...]
    with g(c) = c // (C / groups), Og = out_channels / groups, and full long enough for
    (in - 1) * s + d * (k - 1) + 1 + output_padding rows; the output is full[p : p + out_size]
    per dim (`padding` cuts both ends, `output_padding` rows at the high end receive only the bias)."""
    x, groups = xs[0], attrs["groups"]
    out_shape = _infer_conv_transpose(attrs, [x.shape])
    batch, channels = x.shape[:2]
    out_per_group = out_shape[1] // groups
    kernel, stride, dilation = attrs["kernel_size"], attrs["stride"], attrs["dilation"]
    full_sizes = [(n - 1) * s + d * (k - 1) + 1 + op
                  for n, k, s, d, op in zip(x.shape[2:], kernel, stride, dilation, attrs["output_padding"])]
    grouped = x.reshape(batch, groups, channels // groups, *x.shape[2:])
    weight = ps["weight"].reshape(groups, channels // groups, out_per_group, *kernel)
    full = np.zeros((batch, groups, out_per_group, *full_sizes), dtype=x.dtype)
    for offset in itertools.product(*(range(k) for k in kernel)):
        target = tuple(slice(k * d, k * d + s * (n - 1) + 1, s) for k, d, s, n in zip(offset, dilation, stride, x.shape[2:]))
        full[(..., *target)] += _mix_channels(grouped, np.swapaxes(weight[(..., *offset)], 1, 2))
    crop = tuple(slice(p, p + n) for p, n in zip(attrs["padding"], out_shape[2:]))
    return _add_bias(full[(..., *crop)].reshape(out_shape), ps, attrs).astype(x.dtype)


def _torch_conv_transpose(xs, ps, attrs):
    import torch

    conv = getattr(torch.nn.functional, f"conv_transpose{spatial_rank(attrs)}d")
    return conv(xs[0], ps["weight"], ps.get("bias"), attrs["stride"], attrs["padding"], attrs["output_padding"],
                attrs["groups"], attrs["dilation"])


def _jax_conv_transpose(xs, ps, attrs):
    """The textbook lowering: a stride-1 correlation of the input dilated by `stride` with the
    spatially flipped kernel, padded by d * (k - 1) - p low and that plus output_padding high."""
    import jax.numpy as jnp
    from jax import lax

    rank, groups = spatial_rank(attrs), attrs["groups"]
    weight = ps["weight"]
    in_channels, out_per_group, kernel = weight.shape[0], weight.shape[1], weight.shape[2:]
    # (C, Og, k...) -> (groups * Og, C / groups, k...): the grouped forward conv's OI layout.
    weight = weight.reshape(groups, in_channels // groups, out_per_group, *kernel)
    weight = jnp.swapaxes(weight, 1, 2).reshape(groups * out_per_group, in_channels // groups, *kernel)
    weight = jnp.flip(weight, axis=tuple(range(2, 2 + rank)))
    padding = [
        (d * (k - 1) - p, d * (k - 1) - p + op)
        for k, p, op, d in zip(attrs["kernel_size"], attrs["padding"], attrs["output_padding"], attrs["dilation"])
    ]
    out = lax.conv_general_dilated(
        xs[0],
        weight,
        window_strides=[1] * rank,
        padding=padding,
        lhs_dilation=attrs["stride"],
        rhs_dilation=attrs["dilation"],
        dimension_numbers=_jax_dimension_numbers(rank),
        feature_group_count=groups,
    )
    return _add_bias(out, ps, attrs)


OPS = [
    *[
        OpDef(
            name=f"conv{rank}d",
            attrs=('out_channels', 'kernel_size', 'stride', 'padding', 'dilation', 'groups', 'bias'),
            infer=_infer_conv,
            reference=_conv_reference,
            torch=_torch_conv,
            jax=_jax_conv,
            accepts=rank_between(rank + 2, rank + 2),
            draw_attrs=_draw_conv,
            params=_conv_params,
            intermediates=_conv_intermediates,
            numerics=CONTRACTION,
            ladder=IN_CHANNELS_CONTRACT,
            notes="depthwise 1 in 4, grouped 1 in 4, padding='same' 1 in 5",
        )
        for rank in (1, 2, 3)
    ],
    *[
        OpDef(
            name=f"conv_transpose{rank}d",
            attrs=('out_channels', 'kernel_size', 'stride', 'padding', 'output_padding', 'dilation', 'groups', 'bias'),
            infer=_infer_conv_transpose,
            reference=_conv_transpose_reference,
            torch=_torch_conv_transpose,
            jax=_jax_conv_transpose,
            accepts=rank_between(rank + 2, rank + 2),
            draw_attrs=_draw_conv_transpose,
            params=_conv_transpose_params,
            numerics=CONTRACTION,
            ladder=IN_CHANNELS_CONTRACT,
        )
        for rank in (1, 2)
    ],
]
