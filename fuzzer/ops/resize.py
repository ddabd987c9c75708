"""Resizing NCHW images: interpolate (nearest, bilinear), pixel_shuffle, pixel_unshuffle.

interpolate follows torch's definitions, which jax.image.resize does not share (its
"nearest" samples pixel centres, and it has no align_corners): the jax side gathers
from the source indices torch defines, and the references below write them out.
"""

from __future__ import annotations

import math

import numpy as np

from fuzzer.ops import OpDef
from fuzzer.ops._common import check, rank_between, st
from fuzzer.ops.numerics import Numerics

MODES = ("nearest", "bilinear")
# Exact in binary, so floor(size * factor) has no rounding doubt in any framework; and torch
# stores 1 / factor in float32 rounded up (or exactly), so its floor(dst * (1 / factor)) in
# float32 equals the exact floor(dst / factor) for every size drawn here (checked for 1..17).
SCALE_FACTORS = (0.5, 0.75, 1.25, 1.5, 2.0, 2.5, 3.0)


def scaled_size(size: int, factor: float) -> int:
    return math.floor(size * factor)


def _output_sizes(attrs, shape) -> list[int]:
    if attrs["size"] is not None:
        return list(attrs["size"])
    return [scaled_size(s, f) for s, f in zip(shape[2:], attrs["scale_factor"])]


def _draw_interpolate(draw, shapes):
    spatial = shapes[0][2:]
    mode = draw(st.sampled_from(MODES))
    attrs = {"mode": mode, "align_corners": draw(st.booleans()) if mode == "bilinear" else None, "size": None, "scale_factor": None}
    if draw(st.booleans()):
        attrs["size"] = [draw(st.integers(1, 2 * s + 1)) for s in spatial]
    else:
        # Never a factor that keeps a dim's size: torch's eager kernels then copy that dim and
        # ignore the factor, while torch.compile applies it (pytorch#198201; bilinear too). A
        # known bug that every campaign would otherwise rediscover.
        attrs["scale_factor"] = [draw(st.sampled_from([f for f in SCALE_FACTORS if scaled_size(s, f) not in (0, s)])) for s in spatial]
    return attrs


def _infer_interpolate(attrs, shapes):
    shape = shapes[0]
    check(len(shape) == 4, f"interpolate takes (N, C, H, W), got {list(shape)}")
    check(attrs["mode"] in MODES, f"mode must be one of {MODES}, got {attrs['mode']!r}")
    if attrs["mode"] == "nearest":
        check(attrs["align_corners"] is None, "align_corners must be null for mode 'nearest'")
    else:
        check(isinstance(attrs["align_corners"], bool), f"align_corners must be true or false, got {attrs['align_corners']!r}")
    check((attrs["size"] is None) != (attrs["scale_factor"] is None), "give exactly one of size and scale_factor")
    if attrs["scale_factor"] is not None:
        factors = attrs["scale_factor"]
        check(isinstance(factors, list) and len(factors) == 2 and min(factors) > 0, f"scale_factor must be two positive numbers, got {factors!r}")
    out = _output_sizes(attrs, shape)
    check(len(out) == 2 and min(out) >= 1, f"output size must be two positive integers, got {out}")
    return (shape[0], shape[1], *out)


def nearest_step(size: int, out: int, factor: float | None) -> np.float32:
    """torch's nearest step, a float32: float32(size) / float32(out), or float32(1 / scale_factor)
    when a factor is given (recompute_scale_factor unset)."""
    return np.float32(1.0 / factor) if factor is not None else np.float32(size) / np.float32(out)


def nearest_sources(size: int, out: int, factor: float | None) -> np.ndarray:
    """torch's legacy "nearest": output index i reads min(floor(float32(i) * step), size - 1),
    the product rounded to float32 (`nearest_step`). The float32 rounding is part of torch's
    float32 kernels, in eager and torch.compile alike: for about 7% of (size, out) pairs up to 4097
    it reads one index lower than floor(i * size / out) (2 -> 3920: output 1960 reads 0). torch's
    CPU float64 kernel computes in float64 (nearest_sources_exact): either is correct there.
    Not pixel centres ("nearest-exact" is that)."""
    products = np.arange(out, dtype=np.float32) * nearest_step(size, out, factor)
    return np.minimum(np.floor(products).astype(np.int64), size - 1)


def nearest_sources_exact(size: int, out: int, factor: float | None) -> np.ndarray:
    """The other rule a correct kernel follows: the exact floor(i * size / out) (torch's CPU kernel
    for float64 tensors reads that), or floor(i / factor) in float64 when a factor is given."""
    dst = np.arange(out, dtype=np.int64)
    exact = np.floor(dst / factor).astype(np.int64) if factor is not None else dst * size // out
    return np.minimum(exact, size - 1)


def _nearest_alternative(x, attrs):
    """(what nearest gives, what it gives by the other rule): they differ only at the outputs whose
    exact source coordinate is an integer that float32 rounds just below."""
    dims = _axis_sources(attrs, x.shape)
    (rows, cols), (rows_exact, cols_exact) = ([rule(*dim) for dim in dims] for rule in (nearest_sources, nearest_sources_exact))
    return x[:, :, rows[:, None], cols[None, :]], x[:, :, rows_exact[:, None], cols_exact[None, :]]


# How far a kernel's source coordinate may fall below (or rise above) the exact one, relative to (src + 1): a few
# float32 roundoffs of the step and of the product (_interpolate_undefined).
COORDINATE_ROUNDING = 8 * 2.0**-24


def linear_sources(size: int, out: int, factor: float | None, align_corners: bool, nudge: float = 0.0):
    """(i0, i1, weight of i1, source coordinate) per output index along one dim, torch's rule:
    align_corners=True maps the corner pixel centres onto each other: src = i * (size - 1) / (out - 1)
    (0 when out == 1; the factor is then unused); align_corners=False maps pixel edges:
    src = (i + 0.5) * step - 0.5 clamped below at 0, step = 1 / scale_factor or size / out.
    i0 = floor(src), i1 = i0 + 1 except at the last row (then i0), weight = src - i0.
    `nudge`: src moved down by that many times (src + 1), as a kernel's rounded step may move it."""
    dst = np.arange(out, dtype=np.float64)
    if align_corners:
        src = dst * ((size - 1) / (out - 1)) if out > 1 else np.zeros(out)
    else:
        step = 1.0 / factor if factor is not None else size / out
        src = np.maximum((dst + 0.5) * step - 0.5, 0.0)
    src = np.maximum(src - nudge * (src + 1.0), 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), size - 1)
    return i0, np.minimum(i0 + 1, size - 1), src - i0, src


def _axis_sources(attrs, shape):
    """Per spatial dim: (size, out, scale factor or None)."""
    factors = attrs["scale_factor"] or [None, None]
    return list(zip(shape[2:], _output_sizes(attrs, shape), factors))


def _bilinear_corners(x, attrs, nudge: float = 0.0):
    """The four corner values and their weights for every output element: [(weight, values)]."""
    (h0, h1, a, _), (w0, w1, b, _) = (linear_sources(*dim, attrs["align_corners"], nudge) for dim in _axis_sources(attrs, x.shape))
    a, b = a[:, None], b[None, :]
    rows, cols = (h0[:, None], h1[:, None]), (w0[None, :], w1[None, :])
    return [
        ((1 - a) * (1 - b), x[:, :, rows[0], cols[0]]),
        ((1 - a) * b, x[:, :, rows[0], cols[1]]),
        (a * (1 - b), x[:, :, rows[1], cols[0]]),
        (a * b, x[:, :, rows[1], cols[1]]),
    ]


def _interpolate_reference(xs, ps, attrs):
    """nearest: out[n, c, i, j] = x[n, c, r(i), s(j)] with r, s from `nearest_sources`.
    bilinear: the weighted sum of the four neighbours from `linear_sources`:
    (1-a)(1-b) x[h0, w0] + (1-a) b x[h0, w1] + a (1-b) x[h1, w0] + a b x[h1, w1]."""
    x = xs[0]
    if attrs["mode"] == "nearest":
        return _nearest_alternative(x, attrs)[0]
    first, *others = (weight * values for weight, values in _bilinear_corners(x, attrs))
    return sum(others, first).astype(x.dtype)  # from the first term, not 0: 0 + -0.0 is +0.0


def _interpolate_error(xs, ps, attrs):
    """A correct float kernel computes the source coordinate in working precision, off by a few
    roundoffs of (src + 1) per dim; bilinear output is continuous in it with slope at most twice
    the largest neighbour, so it errs by about 6 (src_h + src_w + 2) * max |corner| roundoffs,
    relative to no output value (a flat region where the neighbours cancel has a tiny output).
    nearest copies: no error (where it may read either of two values, _interpolate_undefined)."""
    x = xs[0]
    if attrs["mode"] == "nearest":
        return np.zeros(_infer_interpolate(attrs, [x.shape]))
    (*_, src_h), (*_, src_w) = (linear_sources(*dim, attrs["align_corners"]) for dim in _axis_sources(attrs, x.shape))
    largest = np.max([np.abs(values) for _, values in _bilinear_corners(x, attrs)], axis=0)
    # A non-finite neighbour makes the output non-finite anyway (0 * inf is nan): no bound there.
    return 6.0 * (src_h[:, None] + src_w[None, :] + 2.0) * np.where(np.isfinite(largest), largest, 0.0)


def _interpolate_undefined(xs, ps, attrs):
    """Where bilinear output reads a non-finite neighbour and no neighbour of nonzero weight is nan:
    how the kernel writes the blend decides the class there. The weighted sum gives nan for a
    non-finite neighbour of weight 0 (0 * inf, 0 * nan), torch's CPU kernel skips that neighbour
    (a dim it does not resize is copied), XLA drops or clamps it, and a lerp a + t (b - a) is nan
    for any infinite neighbour (inf - inf). A nan of nonzero weight is nan in every form: required.
    A source coordinate that is an integer k in exact arithmetic may come out just below it from a
    float32 step (4.5 * float32(1/3) - 0.5 < 1), so the kernel reads row k - 1 with weight ~1e-7:
    a non-finite value there is read too (CUDA's float64 kernel gives nan, the exact blend 0). And
    the other way: float64's 11 * (15 / 11) is 14.999999999999998, float32's 15, so a nan in column
    14 weighs 2e-15 in the reference and nothing in torch (GPU campaign case 694): a nan is required
    only where it weighs something whether the coordinate moves down or up by its rounding.
    nearest: where its two rules read different values (nearest_sources_exact), as a bilinear
    blend is continuous in its coordinate and nearest is not."""
    x = xs[0]
    if attrs["mode"] == "nearest":
        value, other = _nearest_alternative(x, attrs)
        return ~((value == other) | (np.isnan(value) & np.isnan(other)))
    if np.all(np.isfinite(x)):
        return np.zeros(_infer_interpolate(attrs, [x.shape]), dtype=bool)
    # The exact coordinate, and one moved down and one up by a kernel's rounding of it.
    variants = [_bilinear_corners(x, attrs, nudge) for nudge in (0.0, COORDINATE_ROUNDING, -COORDINATE_ROUNDING)]
    nonfinite = np.logical_or.reduce([~np.isfinite(values) for corners in variants for _, values in corners])
    weighted_nan = np.logical_and.reduce([np.logical_or.reduce([(weight != 0) & np.isnan(values) for weight, values in corners])
                                          for corners in variants])
    return nonfinite & ~weighted_nan


def _torch_interpolate(xs, ps, attrs):
    import torch

    return torch.nn.functional.interpolate(
        xs[0], size=attrs["size"], scale_factor=attrs["scale_factor"], mode=attrs["mode"], align_corners=attrs["align_corners"]
    )


def _jax_resize_axis(x, axis: int, size: int, out: int, factor, attrs):
    """Resize dim `axis` (of 2, 3) from `size` to `out` by gathering torch's source indices
    (jnp.take) and, for bilinear, blending the two neighbours with weights computed in jax's
    default float precision. Sizes are arguments, not read from `x`, so a reproducer shows them."""
    import jax.numpy as jnp

    dst = jnp.arange(out)
    if attrs["mode"] == "nearest":
        products = dst.astype(jnp.float32) * nearest_step(size, out, factor)  # float32 like torch, also under x64
        return jnp.take(x, jnp.minimum(jnp.floor(products).astype(jnp.int32), size - 1), axis=axis)
    dst = dst + 0.0
    if attrs["align_corners"]:
        src = dst * ((size - 1) / (out - 1)) if out > 1 else dst * 0.0
    else:
        step = 1.0 / factor if factor is not None else size / out
        src = jnp.maximum((dst + 0.5) * step - 0.5, 0.0)
    low = jnp.minimum(jnp.floor(src).astype(jnp.int32), size - 1)
    high = jnp.minimum(low + 1, size - 1)
    weight = (src - low).astype(x.dtype).reshape((out,) + (1,) * (3 - axis))  # x is (N, C, H, W)
    return jnp.take(x, low, axis=axis) * (1 - weight) + jnp.take(x, high, axis=axis) * weight


def _jax_interpolate(xs, ps, attrs):
    x = xs[0]
    for axis, (size, out, factor) in zip((2, 3), _axis_sources(attrs, x.shape)):
        x = _jax_resize_axis(x, axis, size, out, factor, attrs)
    return x


# -- pixel shuffle -------------------------------------------------------------------


def _shuffle_factors(shape) -> list[int]:
    """Upscale factors for these channels; 1 (the identity) only where no other divides them."""
    return [r for r in range(2, math.isqrt(shape[1]) + 1) if shape[1] % (r * r) == 0] or [1]


def _unshuffle_factors(shape) -> list[int]:
    common = math.gcd(shape[2], shape[3])
    return [r for r in range(2, common + 1) if common % r == 0] or [1]


def _infer_pixel_shuffle(attrs, shapes):
    shape, r = shapes[0], attrs["upscale_factor"]
    check(len(shape) == 4, f"pixel_shuffle takes (N, C, H, W), got {list(shape)}")
    check(r >= 1 and shape[1] % (r * r) == 0, f"channels {shape[1]} are not divisible by upscale_factor^2 = {r * r}")
    return (shape[0], shape[1] // (r * r), shape[2] * r, shape[3] * r)


def _infer_pixel_unshuffle(attrs, shapes):
    shape, r = shapes[0], attrs["downscale_factor"]
    check(len(shape) == 4, f"pixel_unshuffle takes (N, C, H, W), got {list(shape)}")
    check(r >= 1 and shape[2] % r == 0 and shape[3] % r == 0, f"height and width {list(shape[2:])} are not divisible by downscale_factor {r}")
    return (shape[0], shape[1] * r * r, shape[2] // r, shape[3] // r)


def _pixel_shuffle_reference(xs, ps, attrs):
    """out[n, c, h*r + i, w*r + j] = x[n, c*r*r + i*r + j, h, w], gathered position by position."""
    x, r = xs[0], attrs["upscale_factor"]
    _, channels, height, width = _infer_pixel_shuffle(attrs, [x.shape])
    rows, cols = np.arange(height)[:, None], np.arange(width)[None, :]
    source_channel = np.arange(channels)[:, None, None] * r * r + (rows % r) * r + cols % r
    return x[:, source_channel, rows // r, cols // r]


def _pixel_unshuffle_reference(xs, ps, attrs):
    """out[n, c*r*r + i*r + j, h, w] = x[n, c, h*r + i, w*r + j], gathered position by position."""
    x, r = xs[0], attrs["downscale_factor"]
    _, channels, height, width = _infer_pixel_unshuffle(attrs, [x.shape])
    out_channel = np.arange(channels)[:, None, None]
    offset = out_channel % (r * r)
    rows = np.arange(height)[None, :, None] * r + offset // r
    cols = np.arange(width)[None, None, :] * r + offset % r
    return x[:, out_channel // (r * r), rows, cols]


def _torch_pixel_shuffle(xs, ps, attrs):
    import torch

    return torch.nn.functional.pixel_shuffle(xs[0], attrs["upscale_factor"])


def _torch_pixel_unshuffle(xs, ps, attrs):
    import torch

    return torch.nn.functional.pixel_unshuffle(xs[0], attrs["downscale_factor"])


def _jax_pixel_shuffle(xs, ps, attrs):
    import jax.numpy as jnp

    x, r = xs[0], attrs["upscale_factor"]
    n, c, h, w = x.shape
    x = x.reshape(n, c // (r * r), r, r, h, w)
    return jnp.transpose(x, (0, 1, 4, 2, 5, 3)).reshape(n, c // (r * r), h * r, w * r)


def _jax_pixel_unshuffle(xs, ps, attrs):
    import jax.numpy as jnp

    x, r = xs[0], attrs["downscale_factor"]
    n, c, h, w = x.shape
    x = x.reshape(n, c, h // r, r, w // r, r)
    return jnp.transpose(x, (0, 1, 3, 5, 2, 4)).reshape(n, c * r * r, h // r, w // r)


OPS = [
    OpDef(
        name="interpolate",
        attrs=('size', 'scale_factor', 'mode', 'align_corners'),
        infer=_infer_interpolate,
        reference=_interpolate_reference,
        torch=_torch_interpolate,
        jax=_jax_interpolate,
        accepts=rank_between(4, 4),
        draw_attrs=_draw_interpolate,
        numerics=Numerics(forward_error=_interpolate_error, undefined=_interpolate_undefined, why={
            "forward_error": "a kernel computes bilinear's source coordinate in working precision (_interpolate_error)",
            "undefined": "a blend reading a non-finite neighbour, or a nearest read on a rounded coordinate, "
                         "depends on how the kernel is written (_interpolate_undefined)"}),
        notes="torch's legacy nearest and bilinear; factors that keep a dim's size are not drawn (pytorch#198201)",
    ),
    OpDef(
        name="pixel_shuffle",
        attrs=('upscale_factor',),
        infer=_infer_pixel_shuffle,
        reference=_pixel_shuffle_reference,
        torch=_torch_pixel_shuffle,
        jax=_jax_pixel_shuffle,
        accepts=rank_between(4, 4),
        draw_attrs=lambda draw, shapes: {"upscale_factor": draw(st.sampled_from(_shuffle_factors(shapes[0])))},
    ),
    OpDef(
        name="pixel_unshuffle",
        attrs=('downscale_factor',),
        infer=_infer_pixel_unshuffle,
        reference=_pixel_unshuffle_reference,
        torch=_torch_pixel_unshuffle,
        jax=_jax_pixel_unshuffle,
        accepts=rank_between(4, 4),
        draw_attrs=lambda draw, shapes: {"downscale_factor": draw(st.sampled_from(_unshuffle_factors(shapes[0])))},
    ),
]
