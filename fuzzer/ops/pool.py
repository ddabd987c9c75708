"""Pooling over NCHW: max_pool2d (dilation, ceil_mode), avg_pool2d (ceil_mode,
count_include_pad, divisor_override) and adaptive_avg_pool2d.

jax has none of torch's pooling flags: its implementations build the same windows
with `lax.reduce_window` and explicit padding, and the divisors with jnp ops. The
references gather every window from explicit source positions (numpy indexing), so
torch's window rules are written out here once, in `pooled_size` and `window_positions`.
"""

from __future__ import annotations

import numpy as np

from fuzzer.ops import OpDef
from fuzzer.ops._common import check, rank_between, st
from fuzzer.ops.conv import per_dim

# Old cases (before ceil_mode and friends were drawn) lack these attributes: torch's defaults.
POOL_DEFAULTS = {"dilation": [1, 1], "ceil_mode": False, "count_include_pad": True, "divisor_override": None}


def _pool_attrs(attrs) -> dict:
    return {**POOL_DEFAULTS, **attrs}


def pooled_size(size, kernel, stride, padding, dilation, ceil_mode) -> int:
    """torch's pooling_output_shape: (size + 2p - d(k-1) - 1) / s + 1, rounded down, or up
    with ceil_mode; in ceil mode a last window that would start at or past size + p (in the
    right padding, or beyond it) is dropped: every window starts inside the input or its left
    padding."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def window_positions(size, kernel, stride, padding, dilation, out):
    """For one spatial dim: (positions, inside, counted), each (out, kernel).

    positions[i, j] = i*s - p + j*d, the source index of tap j of window i; inside says
    whether it is a real input element; counted whether count_include_pad counts it: torch
    counts the left and right padding (position < size + p), never the part of a ceil-mode
    window that hangs past the right padding.
    """
    positions = np.arange(out)[:, None] * stride - padding + np.arange(kernel)[None, :] * dilation
    inside = (positions >= 0) & (positions < size)
    return positions, inside, positions < size + padding


def _draw_pool(kind):
    def draw_attrs(draw, shapes):
        spatial = shapes[0][2:]
        kernel = [draw(st.integers(1, min(3, s))) for s in spatial]
        attrs = {
            "kernel_size": kernel,
            # Up to kernel + 1: strides past the kernel leave gaps, another indexing path.
            "stride": [draw(st.integers(1, k + 1)) for k in kernel],
            "padding": [draw(st.integers(0, k // 2)) for k in kernel],
            "ceil_mode": draw(st.booleans()),
        }
        if kind == "max":
            dilation = per_dim(draw, st.integers(1, 2), 2)
            attrs["dilation"] = dilation if _windows_valid(attrs | {"dilation": dilation}, shapes[0]) else [1, 1]
        else:
            attrs["count_include_pad"] = draw(st.booleans())
            attrs["divisor_override"] = draw(st.sampled_from([None, None, None, 1, 2, 5]))
        return attrs

    return draw_attrs


def _geometry(attrs, shape):
    """Per spatial dim: (size, kernel, stride, padding, dilation, out)."""
    a = _pool_attrs(attrs)
    dims = []
    for size, k, s, p, d in zip(shape[2:], a["kernel_size"], a["stride"], a["padding"], a["dilation"]):
        dims.append((size, k, s, p, d, pooled_size(size, k, s, p, d, a["ceil_mode"])))
    return dims


def _windows_valid(attrs, shape) -> bool:
    """Every output has at least one real input element (else max would be -inf and torch's
    avg an unexplained 0); with dilation 1 and padding <= kernel / 2 this always holds."""
    for size, k, s, p, d, out in _geometry(attrs, shape):
        if out < 1 or not window_positions(size, k, s, p, d, out)[1].any(axis=1).all():
            return False
    return True


def _infer_pool(attrs, shapes):
    shape, a = shapes[0], _pool_attrs(attrs)
    check(len(shape) == 4, f"pooling takes (N, C, H, W), got {list(shape)}")
    for name in ("kernel_size", "stride", "padding", "dilation"):
        check(isinstance(a[name], list) and len(a[name]) == 2, f"{name} must be two integers, got {a[name]!r}")
    for k, s, p, d in zip(a["kernel_size"], a["stride"], a["padding"], a["dilation"]):
        check(k >= 1 and s >= 1 and d >= 1, "kernel_size, stride and dilation must be positive")
        check(0 <= p <= k // 2, f"padding {p} must be at most half the kernel size {k}")
    check(a["divisor_override"] is None or a["divisor_override"] > 0, f"divisor_override must be positive, got {a['divisor_override']}")
    out = [dim[-1] for dim in _geometry(a, shape)]
    check(min(out) >= 1, f"kernel does not fit: output spatial size would be {out}")
    check(_windows_valid(a, shape), "a pooling window covers only padding")
    return (shape[0], shape[1], *out)


def _infer_avg_pool(attrs, shapes):
    check("dilation" not in attrs, "avg_pool2d takes no dilation (torch's has none)")
    return _infer_pool(attrs, shapes)


def _gather_windows(x, attrs):
    """(values, inside, counted): values[n, c, i, a, j, b] = x[n, c, row(i, a), col(j, b)] with
    positions clipped into the input (masked by `inside`); `counted` per (i, a, j, b)."""
    (rows, rows_in, rows_counted), (cols, cols_in, cols_counted) = (
        window_positions(*dim) for dim in _geometry(attrs, x.shape)
    )
    values = x[:, :, np.clip(rows, 0, x.shape[2] - 1)[:, :, None, None], np.clip(cols, 0, x.shape[3] - 1)[None, None, :, :]]
    inside = rows_in[:, :, None, None] & cols_in[None, None, :, :]
    counted = rows_counted[:, :, None, None] & cols_counted[None, None, :, :]
    return values, inside, counted


def _max_pool_reference(xs, ps, attrs):
    """Max over the window's taps inside the input (padding is never chosen: it acts as -inf);
    windows per `pooled_size` / `window_positions` (dilation spaces the taps). nan propagates."""
    values, inside, _ = _gather_windows(xs[0], attrs)
    return np.max(np.where(inside, values, -np.inf), axis=(3, 5)).astype(xs[0].dtype)


def _avg_pool_reference(xs, ps, attrs):
    """Sum of the window's input elements (padding adds zeros) divided by divisor_override when
    given, else by the count of taps that are inside the input or, with count_include_pad, inside
    the padded input (a ceil-mode window's overhang past the right padding is never counted)."""
    a = _pool_attrs(attrs)
    values, inside, counted = _gather_windows(xs[0], a)
    total = np.sum(np.where(inside, values, 0.0), axis=(3, 5))
    if a["divisor_override"] is not None:
        divisor = a["divisor_override"]
    else:
        divisor = np.sum(counted if a["count_include_pad"] else inside, axis=(1, 3))
    return (total / divisor).astype(xs[0].dtype)


def _torch_max_pool(xs, ps, attrs):
    import torch

    a = _pool_attrs(attrs)
    return torch.nn.functional.max_pool2d(xs[0], a["kernel_size"], a["stride"], a["padding"], a["dilation"], a["ceil_mode"])


def _torch_avg_pool(xs, ps, attrs):
    import torch

    a = _pool_attrs(attrs)
    return torch.nn.functional.avg_pool2d(
        xs[0], a["kernel_size"], a["stride"], a["padding"], a["ceil_mode"], a["count_include_pad"], a["divisor_override"]
    )


def _jax_window_padding(attrs, shape):
    """reduce_window padding per spatial dim: p low, p plus the overhang of the last ceil-mode
    window high; and the output size to keep (reduce_window may fit one more window)."""
    padding, sizes = [], []
    for size, k, s, p, d, out in _geometry(attrs, shape):
        overhang = max(0, (out - 1) * s + d * (k - 1) + 1 - (size + 2 * p))
        padding.append((p, p + overhang))
        sizes.append(out)
    return padding, sizes


def _jax_reduce(x, init, op, attrs, padding):
    """lax.reduce_window with a general reducer, which jax cannot differentiate (measured:
    "Linearization failed to produce known values for all output primals"): the pools that
    use it declare jax_differentiable=False."""
    from jax import lax

    a = _pool_attrs(attrs)
    return lax.reduce_window(
        x, init, op, (1, 1, *a["kernel_size"]), (1, 1, *a["stride"]), ((0, 0), (0, 0), *padding),
        window_dilation=(1, 1, *a["dilation"]),
    )


def _jax_max_pool(xs, ps, attrs):
    import jax.numpy as jnp
    from jax import lax

    x = xs[0]
    padding, (out_h, out_w) = _jax_window_padding(attrs, x.shape)
    return _jax_reduce(x, jnp.array(-jnp.inf, x.dtype), lax.max, attrs, padding)[:, :, :out_h, :out_w]


def _jax_avg_pool(xs, ps, attrs):
    import jax.numpy as jnp
    from jax import lax

    x, a = xs[0], _pool_attrs(attrs)
    padding, (out_h, out_w) = _jax_window_padding(a, x.shape)
    zero = jnp.array(0, x.dtype)
    total = _jax_reduce(x, zero, lax.add, a, padding)[:, :, :out_h, :out_w]
    if a["divisor_override"] is not None:
        return total / a["divisor_override"]
    ones = jnp.ones((1, 1, *x.shape[2:]), x.dtype)
    if a["count_include_pad"]:
        # The padded input counts as ones; only the ceil-mode overhang (zero padding) does not.
        ones = jnp.pad(ones, ((0, 0), (0, 0), *[(low, low) for low, _ in padding]), constant_values=1)
        padding = [(0, high - low) for low, high in padding]
    count = _jax_reduce(ones, zero, lax.add, a, padding)[:, :, :out_h, :out_w]
    return total / count


# -- adaptive pooling ----------------------------------------------------------------


def adaptive_bounds(size: int, out: int) -> list[tuple[int, int]]:
    """torch's adaptive windows: output i averages [floor(i * size / out), ceil((i + 1) * size / out))."""
    return [((i * size) // out, -(-(i + 1) * size // out)) for i in range(out)]


def _draw_adaptive(draw, shapes):
    # Sizes that divide the input, that do not, equal to it and larger (overlapping windows).
    return {"output_size": [draw(st.sampled_from(sorted({1, 2, 3, max(1, s - 2), max(1, s - 1), s, s + 1}))) for s in shapes[0][2:]]}


def _infer_adaptive(attrs, shapes):
    shape, size = shapes[0], attrs["output_size"]
    check(len(shape) == 4, f"adaptive_avg_pool2d takes (N, C, H, W), got {list(shape)}")
    check(isinstance(size, list) and len(size) == 2 and min(size) >= 1, f"output_size must be two positive integers, got {size!r}")
    return (shape[0], shape[1], *size)


def _adaptive_reference(xs, ps, attrs):
    """out[n, c, i, j] = mean of x[n, c, h0(i):h1(i), w0(j):w1(j)] over the windows of
    `adaptive_bounds`, computed as the mean over rows, then over columns (the same value)."""
    x = xs[0]
    for axis, out in zip((2, 3), attrs["output_size"]):
        windows = [np.take(x, np.arange(start, end), axis=axis) for start, end in adaptive_bounds(x.shape[axis], out)]
        x = np.stack([np.mean(window, axis=axis) for window in windows], axis=axis)
    return x


def _torch_adaptive(xs, ps, attrs):
    import torch

    return torch.nn.functional.adaptive_avg_pool2d(xs[0], attrs["output_size"])


def _jax_adaptive(xs, ps, attrs):
    """Per dim, gather every window padded to the longest one (ceil(size / out) + 1) from iota
    bounds (start = floor(i * size / out), end = ceil((i + 1) * size / out)), zero the taps past
    `end` with a select (not a multiply: 0 * inf is nan), sum, and divide by end - start."""
    import jax.numpy as jnp

    x = xs[0]
    for axis, out in zip((2, 3), attrs["output_size"]):
        size = x.shape[axis]
        longest = -(-size // out) + 1
        index = jnp.arange(out)
        start, end = (index * size) // out, ((index + 1) * size + out - 1) // out
        taps = start[:, None] + jnp.arange(longest)[None, :]  # (out, longest)
        windows = jnp.take(x, jnp.minimum(taps, size - 1).reshape(-1), axis=axis)
        windows = windows.reshape(x.shape[:axis] + (out, longest) + x.shape[axis + 1 :])
        inside = (taps < end[:, None]).reshape((out, longest) + (1,) * (x.ndim - 1 - axis))
        total = jnp.sum(jnp.where(inside, windows, 0), axis=axis + 1)
        x = total / (end - start).astype(x.dtype).reshape((out,) + (1,) * (x.ndim - 1 - axis))
    return x


OPS = [
    OpDef(
        name="max_pool2d",
        attrs=('kernel_size', 'stride', 'padding', 'dilation', 'ceil_mode'),
        infer=_infer_pool,
        reference=_max_pool_reference,
        torch=_torch_max_pool,
        jax=_jax_max_pool,
        accepts=rank_between(4, 4),
        draw_attrs=_draw_pool("max"),
        jax_differentiable=False,  # see _jax_reduce
    ),
    OpDef(
        name="avg_pool2d",
        attrs=('kernel_size', 'stride', 'padding', 'ceil_mode', 'count_include_pad', 'divisor_override'),
        infer=_infer_avg_pool,
        reference=_avg_pool_reference,
        torch=_torch_avg_pool,
        jax=_jax_avg_pool,
        accepts=rank_between(4, 4),
        draw_attrs=_draw_pool("avg"),
        jax_differentiable=False,  # see _jax_reduce
    ),
    OpDef(
        name="adaptive_avg_pool2d",
        attrs=('output_size',),
        infer=_infer_adaptive,
        reference=_adaptive_reference,
        torch=_torch_adaptive,
        jax=_jax_adaptive,
        accepts=rank_between(4, 4),
        draw_attrs=_draw_adaptive,
    ),
]
