"""conv2d (stride, padding, dilation, groups, bias), max_pool2d and avg_pool2d, all NCHW."""

from __future__ import annotations

import numpy as np

from fuzzer.ops import OpDef
from fuzzer.ops._common import check, rank_between, st


def _pair(draw, strategy):
    first = draw(strategy)
    return [first, first] if draw(st.booleans()) else [first, draw(strategy)]


def _out_size(size, kernel, stride, padding, dilation):
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _fits(spatial, kernel, padding, dilation):
    return all(s + 2 * p >= d * (k - 1) + 1 for s, k, p, d in zip(spatial, kernel, padding, dilation))


def _draw_conv(draw, shapes):
    channels, spatial = shapes[0][1], shapes[0][2:]
    divisors = [g for g in range(1, channels + 1) if channels % g == 0]
    groups = draw(st.sampled_from(divisors)) if draw(st.integers(0, 3)) == 0 else 1
    kernel = [draw(st.integers(1, min(3, s + 2))) for s in spatial]
    dilation = [draw(st.integers(1, 2)) if k > 1 else 1 for k in kernel]
    padding = [draw(st.integers(0, k // 2)) for k in kernel]
    if not _fits(spatial, kernel, padding, dilation):
        dilation = [1, 1]
        padding = [k // 2 for k in kernel]
        if not _fits(spatial, kernel, padding, dilation):
            kernel, padding = [1, 1], [0, 0]
    return {
        "out_channels": groups * draw(st.sampled_from([1, 2, 3, 4, 8])),
        "kernel_size": kernel,
        "stride": _pair(draw, st.integers(1, 2)),
        "padding": padding,
        "dilation": dilation,
        "groups": groups,
        "bias": draw(st.booleans()),
    }


def _infer_conv(attrs, shapes):
    shape = shapes[0]
    check(len(shape) == 4, f"conv2d takes (N, C, H, W), got {list(shape)}")
    groups, channels, out_channels = attrs["groups"], shape[1], attrs["out_channels"]
    check(groups >= 1 and channels % groups == 0, f"in_channels {channels} is not divisible by groups {groups}")
    check(out_channels >= 1 and out_channels % groups == 0, f"out_channels {out_channels} is not divisible by groups {groups}")
    for name in ("kernel_size", "stride", "dilation"):
        check(len(attrs[name]) == 2 and min(attrs[name]) >= 1, f"{name} must be two positive integers")
    check(len(attrs["padding"]) == 2 and min(attrs["padding"]) >= 0, "padding must be two non-negative integers")
    out = [
        _out_size(s, k, st_, p, d)
        for s, k, st_, p, d in zip(shape[2:], attrs["kernel_size"], attrs["stride"], attrs["padding"], attrs["dilation"])
    ]
    check(min(out) >= 1, f"kernel does not fit: output spatial size would be {out}")
    return (shape[0], out_channels, *out)


def _conv_params(attrs, shapes):
    params = {"weight": (attrs["out_channels"], shapes[0][1] // attrs["groups"], *attrs["kernel_size"])}
    if attrs["bias"]:
        params["bias"] = (attrs["out_channels"],)
    return params


def _windows(x, kernel, stride, dilation, out_hw):
    """Yield (kh, kw, x[..., strided window rows/cols]) for each kernel offset."""
    for kh in range(kernel[0]):
        for kw in range(kernel[1]):
            rows = slice(kh * dilation[0], kh * dilation[0] + stride[0] * (out_hw[0] - 1) + 1, stride[0])
            cols = slice(kw * dilation[1], kw * dilation[1] + stride[1] * (out_hw[1] - 1) + 1, stride[1])
            yield kh, kw, x[:, :, rows, cols]


def _pad(x, padding, value):
    widths = ((0, 0), (0, 0), (padding[0], padding[0]), (padding[1], padding[1]))
    return np.pad(x, widths, constant_values=value)


def _conv_reference(xs, ps, attrs):
    """Cross-correlation (no kernel flip), as torch and cuDNN define conv2d:
    out[n, o, i, j] = b[o] + sum_{c in group(o), kh, kw} w[o, c, kh, kw] * xpad[n, c, i*s + kh*d, j*s + kw*d]."""
    x, weight, groups = xs[0], ps["weight"], attrs["groups"]
    out_shape = _infer_conv(attrs, [x.shape])
    xp = _pad(x, attrs["padding"], 0.0)
    out = np.zeros(out_shape, dtype=x.dtype)
    in_per_group, out_per_group = x.shape[1] // groups, out_shape[1] // groups
    for kh, kw, window in _windows(xp, attrs["kernel_size"], attrs["stride"], attrs["dilation"], out_shape[2:]):
        for g in range(groups):
            cin = slice(g * in_per_group, (g + 1) * in_per_group)
            cout = slice(g * out_per_group, (g + 1) * out_per_group)
            out[:, cout] += np.einsum("nchw,oc->nohw", window[:, cin], weight[cout, :, kh, kw])
    if attrs["bias"]:
        out += ps["bias"].reshape(1, -1, 1, 1)
    return out


def _torch_conv(xs, ps, attrs):
    import torch

    return torch.nn.functional.conv2d(
        xs[0], ps["weight"], ps.get("bias"), attrs["stride"], attrs["padding"], attrs["dilation"], attrs["groups"]
    )


def _jax_conv(xs, ps, attrs):
    from jax import lax

    out = lax.conv_general_dilated(
        xs[0],
        ps["weight"],
        window_strides=attrs["stride"],
        padding=[(p, p) for p in attrs["padding"]],
        rhs_dilation=attrs["dilation"],
        dimension_numbers=("NCHW", "OIHW", "NCHW"),
        feature_group_count=attrs["groups"],
    )
    return out + ps["bias"].reshape(1, -1, 1, 1) if attrs["bias"] else out


def _draw_pool(draw, shapes):
    spatial = shapes[0][2:]
    kernel = [draw(st.integers(1, min(3, s))) for s in spatial]
    return {
        "kernel_size": kernel,
        "stride": [draw(st.integers(1, k)) for k in kernel],
        "padding": [draw(st.integers(0, k // 2)) for k in kernel],
    }


def _infer_pool(attrs, shapes):
    shape = shapes[0]
    check(len(shape) == 4, f"pooling takes (N, C, H, W), got {list(shape)}")
    for k, s, p in zip(attrs["kernel_size"], attrs["stride"], attrs["padding"]):
        check(k >= 1 and s >= 1, "kernel_size and stride must be positive")
        check(0 <= p <= k // 2, f"padding {p} must be at most half the kernel size {k}")
    out = [_out_size(s, k, st_, p, 1) for s, k, st_, p in zip(shape[2:], attrs["kernel_size"], attrs["stride"], attrs["padding"])]
    check(min(out) >= 1, f"kernel does not fit: output spatial size would be {out}")
    return (shape[0], shape[1], *out)


def _pool_reference(kind):
    def run(xs, ps, attrs):
        """max: padding is -inf (never chosen); avg: padding counts as zeros (count_include_pad=True)."""
        x = xs[0]
        out_shape = _infer_pool(attrs, [x.shape])
        fill = -np.inf if kind == "max" else 0.0
        xp = _pad(x, attrs["padding"], fill)
        windows = [w for _, _, w in _windows(xp, attrs["kernel_size"], attrs["stride"], (1, 1), out_shape[2:])]
        if kind == "max":
            return np.max(np.stack(windows), axis=0)
        return (np.sum(np.stack(windows), axis=0) / len(windows)).astype(x.dtype)

    return run


def _torch_pool(kind):
    def run(xs, ps, attrs):
        import torch

        fn = getattr(torch.nn.functional, f"{kind}_pool2d")
        return fn(xs[0], attrs["kernel_size"], attrs["stride"], attrs["padding"])

    return run


def _jax_pool(kind):
    def run(xs, ps, attrs):
        import jax.numpy as jnp
        from jax import lax

        window = (1, 1, *attrs["kernel_size"])
        strides = (1, 1, *attrs["stride"])
        padding = ((0, 0), (0, 0)) + tuple((p, p) for p in attrs["padding"])
        if kind == "max":
            return lax.reduce_window(xs[0], -jnp.inf, lax.max, window, strides, padding)
        total = lax.reduce_window(xs[0], 0.0, lax.add, window, strides, padding)
        return total / (attrs["kernel_size"][0] * attrs["kernel_size"][1])

    return run


OPS = [
    OpDef(
        name="conv2d",
        infer=_infer_conv,
        reference=_conv_reference,
        torch=_torch_conv,
        jax=_jax_conv,
        accepts=rank_between(4, 4),
        draw_attrs=_draw_conv,
        params=_conv_params,
        sensitivity=2.0,
    ),
    *[
        OpDef(
            name=f"{kind}_pool2d",
            infer=_infer_pool,
            reference=_pool_reference(kind),
            torch=_torch_pool(kind),
            jax=_jax_pool(kind),
            accepts=rank_between(4, 4),
            draw_attrs=_draw_pool,
        )
        for kind in ("max", "avg")
    ],
]
