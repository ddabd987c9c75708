"""The conv, pooling and resize references against values worked out by hand.

As in test_op_references.py, every expected value comes from the op's defining
equation written out here (plain python numbers or a naive loop), never from
torch, jax or the reference itself. The window rules (ceil_mode, count_include_pad,
adaptive bounds, interpolation source indices) are torch's, stated in each test.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from fuzzer.errors import ShapeError
from fuzzer.ops import get_op
from fuzzer.ops._common import DIMS
from fuzzer.ops.pool import adaptive_bounds, pooled_size
from fuzzer.ops.resize import scaled_size
from test_op_references import ref


def conv_attrs(rank=1, **overrides):
    attrs = dict(out_channels=1, kernel_size=[2] * rank, stride=[1] * rank, padding=[0] * rank, dilation=[1] * rank, groups=1, bias=False)
    return attrs | overrides


def row(values):
    """A (1, 1, L) signal."""
    return np.array(values, dtype=np.float64).reshape(1, 1, -1)


def image_row(values):
    """A (1, 1, 1, W) image: pooling and resizing along W alone."""
    return np.array(values, dtype=np.float64).reshape(1, 1, 1, -1)


# -- conv1d / conv2d / conv3d ------------------------------------------------------


def test_conv1d_by_hand_plain_and_strided_padded():
    x, w = row([1, 2, 3, 4]), row([1, -1])
    assert_allclose(ref("conv1d", [x], {"weight": w}, **conv_attrs()), row([-1, -1, -1]), rtol=0)
    # Zero-padded to [0 1 2 3 4 0]; windows start at 0, 2, 4: 0-1, 2-3, 4-0.
    out = ref("conv1d", [x], {"weight": w}, **conv_attrs(stride=[2], padding=[1]))
    assert_allclose(out, row([-1, -1, 4]), rtol=0)


def test_conv1d_same_padding_puts_the_odd_zero_on_the_high_side():
    # kernel 2: one zero of padding in total, after the signal: [1 2 3 0] -> 1+20, 2+30, 3+0.
    x, w = row([1, 2, 3]), row([1, 10])
    assert_allclose(ref("conv1d", [x], {"weight": w}, **conv_attrs(padding="same")), row([21, 32, 3]), rtol=0)
    # kernel 2 dilated by 2: two zeros, one each side: [0 1 2 3 0] with taps 0 and 2.
    out = ref("conv1d", [x], {"weight": w}, **conv_attrs(padding="same", dilation=[2]))
    assert_allclose(out, row([0 + 20, 1 + 30, 2 + 0]), rtol=0)


def test_conv2d_depthwise_multiplier_2_reads_channel_o_div_2():
    x = np.array([3.0, 5.0]).reshape(1, 2, 1, 1)
    w = np.array([2.0, 3.0, 5.0, 7.0]).reshape(4, 1, 1, 1)
    out = ref("conv2d", [x], {"weight": w}, **conv_attrs(2, out_channels=4, kernel_size=[1, 1], groups=2))
    assert_allclose(out.ravel(), [2 * 3, 3 * 3, 5 * 5, 7 * 5], rtol=0)


def test_conv3d_all_ones_counts_the_window():
    x = np.ones((1, 1, 3, 3, 3))
    w = np.ones((1, 1, 2, 2, 2))
    out = ref("conv3d", [x], {"weight": w}, **conv_attrs(3, padding=[1, 0, 0]))
    # Depth padded to 5: the first and last depth windows hold one real plane (4 ones), the rest two (8).
    assert out.shape == (1, 1, 4, 2, 2)
    assert_allclose(out[0, 0, :, 0, 0], [4, 8, 8, 4], rtol=0)


def naive_conv(x, w, b, attrs):
    """out[n, o, i...] = b[o] + sum w[o, c, k...] * x[n, g*Cg + c, i*s + k*d - low_pad ...], zero outside."""
    groups, kernel, stride, dilation = attrs["groups"], attrs["kernel_size"], attrs["stride"], attrs["dilation"]
    if attrs["padding"] == "same":
        low = [d * (k - 1) // 2 for k, d in zip(kernel, dilation)]
        out_spatial = list(x.shape[2:])
    else:
        low = attrs["padding"]
        out_spatial = [(n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, s, p, d in zip(x.shape[2:], kernel, stride, low, dilation)]
    c_out, c_per_group = w.shape[:2]
    out = np.zeros((x.shape[0], c_out, *out_spatial))
    for n, o in itertools.product(range(x.shape[0]), range(c_out)):
        group = o // (c_out // groups)
        for position in itertools.product(*(range(m) for m in out_spatial)):
            total = 0.0 if b is None else b[o]
            for c in range(c_per_group):
                for tap in itertools.product(*(range(k) for k in kernel)):
                    source = [i * s + t * d - p for i, s, t, d, p in zip(position, stride, tap, dilation, low)]
                    if all(0 <= q < m for q, m in zip(source, x.shape[2:])):
                        total += w[(o, c, *tap)] * x[(n, group * c_per_group + c, *source)]
            out[(n, o, *position)] = total
    return out


@pytest.mark.parametrize(
    "op, x_shape, attrs",
    [
        ("conv1d", (2, 4, 9), conv_attrs(1, out_channels=6, kernel_size=[3], stride=[2], padding=[1], dilation=[2], groups=2, bias=True)),
        ("conv1d", (1, 3, 7), conv_attrs(1, out_channels=6, kernel_size=[3], groups=3)),  # depthwise, multiplier 2
        ("conv2d", (1, 2, 5, 4), conv_attrs(2, out_channels=3, kernel_size=[2, 3], padding="same", dilation=[2, 1], bias=True)),
        ("conv3d", (1, 2, 4, 3, 5), conv_attrs(3, out_channels=2, kernel_size=[2, 1, 3], stride=[2, 1, 2], padding=[1, 0, 1])),
        ("conv3d", (2, 2, 3, 4, 4), conv_attrs(3, out_channels=4, kernel_size=[3, 2, 2], padding="same", dilation=[1, 2, 1], groups=2)),
    ],
    ids=["conv1d-grouped-strided-dilated", "conv1d-depthwise", "conv2d-same-even-kernel", "conv3d-strided", "conv3d-same-grouped"],
)
def test_conv_matches_a_naive_loop(op, x_shape, attrs):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(x_shape)
    w = rng.standard_normal((attrs["out_channels"], x_shape[1] // attrs["groups"], *attrs["kernel_size"]))
    b = rng.standard_normal(attrs["out_channels"]) if attrs["bias"] else None
    params = {"weight": w} | ({"bias": b} if b is not None else {})
    expected = naive_conv(x, w, b, attrs)
    out = ref(op, [x], params, **attrs)
    assert out.shape == expected.shape == get_op(op).infer(attrs, [x_shape])
    assert_allclose(out, expected, rtol=1e-12, atol=1e-12)


def test_same_padding_with_stride_is_refused():
    with pytest.raises(ShapeError, match="stride 1"):
        get_op("conv2d").infer(conv_attrs(2, padding="same", stride=[2, 1]), [(1, 1, 4, 4)])


# -- conv_transpose ----------------------------------------------------------------


def transpose_attrs(rank=1, **overrides):
    return conv_attrs(rank, output_padding=[0] * rank) | overrides


def test_conv_transpose1d_by_hand():
    x, w = row([1, 2]), row([1, 10, 100])
    # Stride 2: x0 scatters [1 10 100] at 0..2, x1 scatters [2 20 200] at 2..4.
    full = [1, 10, 100 + 2, 20, 200]
    attrs = transpose_attrs(kernel_size=[3], stride=[2])
    assert_allclose(ref("conv_transpose1d", [x], {"weight": w}, **attrs), row(full), rtol=0)
    # padding 1 crops one from each end; output_padding 1 then gives the last one back.
    assert_allclose(ref("conv_transpose1d", [x], {"weight": w}, **attrs | {"padding": [1]}), row(full[1:4]), rtol=0)
    out = ref("conv_transpose1d", [x], {"weight": w}, **attrs | {"padding": [1], "output_padding": [1]})
    assert_allclose(out, row(full[1:5]), rtol=0)
    # Dilation 2, stride 1: taps at 0, 2, 4 for x0 and 1, 3, 5 for x1; a bias adds everywhere.
    out = ref("conv_transpose1d", [x], {"weight": w, "bias": [0.5]}, **transpose_attrs(kernel_size=[3], dilation=[2], bias=True))
    assert_allclose(out, row([1.5, 2.5, 10.5, 20.5, 100.5, 200.5]), rtol=0)


def test_conv_transpose1d_output_padding_past_the_data_is_bias_only():
    # Stride 3 leaves a gap; output_padding 2 appends two rows nothing scatters into.
    x, w = row([1, 2]), row([1])
    attrs = transpose_attrs(kernel_size=[1], stride=[3], output_padding=[2], bias=True)
    out = ref("conv_transpose1d", [x], {"weight": w, "bias": [-1]}, **attrs)
    assert_allclose(out, row([0, -1, -1, 1, -1, -1]), rtol=0)


def naive_conv_transpose2d(x, w, b, attrs):
    """Scatter every input element: out[n, g*Og + o, i*s + k*d - p, ...] += x[n, c, i, j] * w[c, o, k, l]."""
    groups, (kh, kw), (sh, sw), (ph, pw), (oph, opw), (dh, dw) = (
        attrs["groups"], attrs["kernel_size"], attrs["stride"], attrs["padding"], attrs["output_padding"], attrs["dilation"])
    n_batch, c_in, height, width = x.shape
    out_per_group = w.shape[1]
    out_h = (height - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    out_w = (width - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    out = np.zeros((n_batch, out_per_group * groups, out_h, out_w))
    if b is not None:
        out += np.asarray(b).reshape(1, -1, 1, 1)
    for n, c, i, j, o, a, e in itertools.product(range(n_batch), range(c_in), range(height), range(width), range(out_per_group), range(kh), range(kw)):
        row_, col = i * sh + a * dh - ph, j * sw + e * dw - pw
        if 0 <= row_ < out_h and 0 <= col < out_w:
            out[n, c // (c_in // groups) * out_per_group + o, row_, col] += x[n, c, i, j] * w[c, o, a, e]
    return out


@pytest.mark.parametrize(
    "x_shape, attrs",
    [
        ((1, 2, 3, 3), transpose_attrs(2, out_channels=3, kernel_size=[3, 2], stride=[2, 3], padding=[1, 0], output_padding=[1, 2], bias=True)),
        ((2, 4, 2, 3), transpose_attrs(2, out_channels=4, kernel_size=[2, 3], stride=[1, 2], dilation=[2, 1], padding=[1, 1], output_padding=[1, 0], groups=2)),
        ((1, 3, 3, 2), transpose_attrs(2, out_channels=6, kernel_size=[3, 3], stride=[3, 1], padding=[1, 1], groups=3)),
    ],
    ids=["strided-output-padding", "grouped-dilated-output-padding-under-dilation", "depthwise"],
)
def test_conv_transpose2d_matches_a_naive_scatter(x_shape, attrs):
    rng = np.random.default_rng(11)
    x = rng.standard_normal(x_shape)
    w = rng.standard_normal((x_shape[1], attrs["out_channels"] // attrs["groups"], *attrs["kernel_size"]))
    b = rng.standard_normal(attrs["out_channels"]) if attrs["bias"] else None
    params = {"weight": w} | ({"bias": b} if b is not None else {})
    expected = naive_conv_transpose2d(x, w, b, attrs)
    out = ref("conv_transpose2d", [x], params, **attrs)
    assert out.shape == expected.shape == get_op("conv_transpose2d").infer(attrs, [x_shape])
    assert_allclose(out, expected, rtol=1e-12, atol=1e-12)


def test_conv_transpose2d_is_the_adjoint_of_conv2d():
    # <conv(y), x> == <y, conv_transpose(x)> for the same weight, stride, padding, dilation, groups;
    # output_padding restores y's size where the strided conv dropped trailing rows.
    rng = np.random.default_rng(5)
    conv = conv_attrs(2, out_channels=4, kernel_size=[3, 2], stride=[2, 2], padding=[1, 1], dilation=[1, 2], groups=2)
    y = rng.standard_normal((2, 2, 6, 7))
    w = rng.standard_normal((4, 1, 3, 2))
    forward = ref("conv2d", [y], {"weight": w}, **conv)
    x = rng.standard_normal(forward.shape)
    back = ref("conv_transpose2d", [x], {"weight": w}, **conv | {"out_channels": 2, "output_padding": [1, 0]})
    assert back.shape == y.shape
    assert_allclose(np.sum(forward * x), np.sum(y * back), rtol=1e-12)


def test_conv_transpose_output_padding_must_be_below_stride_or_dilation():
    with pytest.raises(ShapeError, match="output_padding"):
        get_op("conv_transpose1d").infer(transpose_attrs(stride=[2], output_padding=[2]), [(1, 1, 3)])
    # Below the dilation is enough.
    assert get_op("conv_transpose1d").infer(transpose_attrs(dilation=[2], output_padding=[1]), [(1, 1, 3)]) == (1, 1, 6)


# -- max_pool2d / avg_pool2d ---------------------------------------------------------


def pool_attrs(**overrides):
    """Pooling along W only (kernel height 1)."""
    return dict(kernel_size=[1, 2], stride=[1, 2], padding=[0, 0], ceil_mode=False) | overrides


def test_ceil_mode_output_sizes():
    # (size + 2p - d(k-1) - 1) / s + 1, rounded down or up.
    assert pooled_size(5, 2, 2, 0, 1, ceil_mode=False) == 2
    assert pooled_size(5, 2, 2, 0, 1, ceil_mode=True) == 3
    # Rounding up would start a third window at 2*3 - 1 = 5 = size + p, in the right padding: dropped.
    assert pooled_size(5, 3, 3, 1, 1, ceil_mode=True) == 2
    # Starting at 3 (inside the input) it is kept: size 4, k 3, s 2, p 1 -> 3 windows.
    assert pooled_size(4, 3, 2, 1, 1, ceil_mode=True) == 3
    assert pooled_size(4, 3, 2, 1, 1, ceil_mode=False) == 2
    # Dilation 2 makes a 2-tap kernel span 3.
    assert pooled_size(5, 2, 1, 0, 2, ceil_mode=False) == 3


def test_ceil_mode_last_window_is_partial():
    x = image_row([1, 2, 3, 4, 5])
    attrs = pool_attrs(ceil_mode=True)
    # Windows [1 2] [3 4] [5]: the last hangs past the input and counts one element.
    assert_allclose(ref("max_pool2d", [x], **attrs), image_row([2, 4, 5]), rtol=0)
    assert_allclose(ref("avg_pool2d", [x], **attrs, count_include_pad=True, divisor_override=None), image_row([1.5, 3.5, 5]), rtol=0)


def test_ceil_mode_window_dropped_when_it_would_start_in_the_right_padding():
    x = image_row([1, 2, 3, 4, 5])
    attrs = pool_attrs(kernel_size=[1, 3], stride=[1, 3], padding=[0, 1], ceil_mode=True)
    # Windows over positions -1..1 and 2..4; the one at 5 is dropped.
    assert_allclose(ref("max_pool2d", [x], **attrs), image_row([2, 5]), rtol=0)


# Size 4, kernel 3, stride 2, padding 1, ceil_mode: windows over positions -1..1, 1..3 and 3..5,
# where -1 and 4 are padding and 5 hangs past the padded input.
CEIL_OVERHANG = pool_attrs(kernel_size=[1, 3], stride=[1, 2], padding=[0, 1], ceil_mode=True)


def test_avg_pool_count_include_pad_counts_padding_but_not_the_overhang():
    x = image_row([1, 2, 3, 4])
    out = ref("avg_pool2d", [x], **CEIL_OVERHANG, count_include_pad=True, divisor_override=None)
    assert_allclose(out, image_row([(0 + 1 + 2) / 3, (2 + 3 + 4) / 3, (4 + 0) / 2]), rtol=1e-15)
    out = ref("avg_pool2d", [x], **CEIL_OVERHANG, count_include_pad=False, divisor_override=None)
    assert_allclose(out, image_row([(1 + 2) / 2, (2 + 3 + 4) / 3, 4 / 1]), rtol=1e-15)
    assert_allclose(ref("max_pool2d", [x], **CEIL_OVERHANG), image_row([2, 4, 4]), rtol=0)


def test_avg_pool_divisor_override_replaces_every_count():
    x = image_row([1, 2, 3, 4])
    out = ref("avg_pool2d", [x], **CEIL_OVERHANG, count_include_pad=False, divisor_override=5)
    assert_allclose(out, image_row([3 / 5, 9 / 5, 4 / 5]), rtol=1e-15)


def test_avg_pool_without_count_include_pad_averages_the_corner_over_real_elements():
    x = np.arange(1.0, 10.0).reshape(1, 1, 3, 3)  # [[1 2 3] [4 5 6] [7 8 9]]
    attrs = dict(kernel_size=[2, 2], stride=[2, 2], padding=[1, 1], ceil_mode=False, count_include_pad=False, divisor_override=None)
    # Padded to 5x5, windows {1}, {2, 3}, {4, 7}, {5, 6, 8, 9}: each divided by its own size.
    assert_allclose(ref("avg_pool2d", [x], **attrs), [[[[1, 2.5], [5.5, 7]]]], rtol=1e-15)


def test_max_pool_dilation_spaces_the_taps():
    x = image_row([1, 5, 2, 4, 3])
    attrs = pool_attrs(stride=[1, 1], dilation=[1, 2])
    # Taps (0, 2), (1, 3), (2, 4).
    assert_allclose(ref("max_pool2d", [x], **attrs), image_row([2, 5, 3]), rtol=0)


def test_pool_window_of_only_padding_is_refused():
    # Width 2, kernel 2 dilated by 3, padding 1: the one window's taps are at -1 and 2, both padding.
    attrs = pool_attrs(padding=[0, 1], stride=[1, 1], dilation=[1, 3])
    with pytest.raises(ShapeError, match="only padding"):
        get_op("max_pool2d").infer(attrs, [(1, 1, 1, 2)])


def test_pool_attrs_from_before_ceil_mode_get_torch_defaults():
    x = image_row([1, 2, 3, 4, 5])
    old = dict(kernel_size=[1, 2], stride=[1, 2], padding=[0, 0])
    assert_allclose(ref("max_pool2d", [x], **old), image_row([2, 4]), rtol=0)
    assert_allclose(ref("avg_pool2d", [x], **old), image_row([1.5, 3.5]), rtol=0)


# -- adaptive_avg_pool2d -------------------------------------------------------------


def test_adaptive_windows_5_to_3_overlap():
    # start = floor(i * 5 / 3), end = ceil((i + 1) * 5 / 3): [0, 2), [1, 4), [3, 5).
    assert adaptive_bounds(5, 3) == [(0, 2), (1, 4), (3, 5)]
    out = ref("adaptive_avg_pool2d", [image_row([1, 2, 3, 4, 5])], output_size=[1, 3])
    assert_allclose(out, image_row([1.5, 3, 4.5]), rtol=1e-15)


def test_adaptive_pooling_to_a_larger_size_repeats_and_blends():
    # 2 -> 3: [0, 1), [0, 2), [1, 2).
    out = ref("adaptive_avg_pool2d", [image_row([2, 6])], output_size=[1, 3])
    assert_allclose(out, image_row([2, 4, 6]), rtol=1e-15)


def test_adaptive_pooling_both_dims():
    x = np.arange(1.0, 13.0).reshape(1, 1, 3, 4)  # [[1 2 3 4] [5 6 7 8] [9 10 11 12]]
    # Rows 3 -> 2: [0, 2), [1, 3); columns 4 -> 1: all.
    out = ref("adaptive_avg_pool2d", [x], output_size=[2, 1])
    assert_allclose(out.ravel(), [sum(range(1, 9)) / 8, sum(range(5, 13)) / 8], rtol=1e-15)


def test_adaptive_pool_implementations_keep_an_inf_inside_its_windows():
    import jax
    import torch

    # 5 -> 3 windows [0, 2), [1, 4), [3, 5): only the first two hold the inf.
    x = image_row([1, np.inf, 3, 4, 5]).astype(np.float32)
    expected = image_row([np.inf, np.inf, 4.5])
    op, attrs = get_op("adaptive_avg_pool2d"), {"output_size": [1, 3]}
    assert_allclose(op.reference([x], {}, attrs), expected, rtol=0)
    assert_allclose(op.torch([torch.from_numpy(x)], {}, attrs).numpy(), expected, rtol=0)
    assert_allclose(np.asarray(jax.jit(lambda v: op.jax([v], {}, attrs))(x)), expected, rtol=0)


# -- interpolate -----------------------------------------------------------------------


def resize_attrs(mode, align_corners=None, size=None, scale_factor=None):
    return dict(mode=mode, align_corners=align_corners, size=size, scale_factor=scale_factor)


def test_nearest_by_size_reads_floor_of_dst_times_in_over_out():
    out = ref("interpolate", [image_row([10, 20, 30])], **resize_attrs("nearest", size=[1, 5]))
    # floor(d * 3 / 5) for d = 0..4: 0 0 1 1 2.
    assert_allclose(out, image_row([10, 10, 20, 20, 30]), rtol=0)


def test_nearest_by_scale_factor_uses_the_factor_not_the_sizes():
    x = image_row([10, 20, 30, 40, 50])
    # Factor 0.75: 5 -> 3 outputs reading floor(d / 0.75) = 0, 1, 2 ...
    by_factor = ref("interpolate", [x], **resize_attrs("nearest", scale_factor=[1.0, 0.75]))
    assert_allclose(by_factor, image_row([10, 20, 30]), rtol=0)
    # ... while size 3 reads floor(d * 5 / 3) = 0, 1, 3.
    by_size = ref("interpolate", [x], **resize_attrs("nearest", size=[1, 3]))
    assert_allclose(by_size, image_row([10, 20, 40]), rtol=0)


def test_nearest_rounds_the_source_position_in_float32_like_torch():
    # float32(2) / float32(3920) is just below 1/1960, and 1960 times it rounds to 0.99999994
    # in float32: output 1960 reads input 0, not floor(1960 * 2 / 3920) = 1.
    assert np.float32(1960) * (np.float32(2) / np.float32(3920)) < 1
    out = ref("interpolate", [image_row([10, 20])], **resize_attrs("nearest", size=[1, 3920]))
    assert out[0, 0, 0, 1960] == 10 and out[0, 0, 0, 1961] == 20
    assert np.count_nonzero(out == 10) == 1961


X_2X2 = np.array([[0.0, 1.0], [2.0, 3.0]]).reshape(1, 1, 2, 2)


@pytest.mark.parametrize("align_corners", [True, False])
def test_bilinear_2x2_to_3x3_both_ways(align_corners):
    # align_corners=True: src = d * (2 - 1) / (3 - 1) = 0, 0.5, 1.
    # align_corners=False: src = (d + 0.5) * 2/3 - 0.5 = -1/6 (clamped to 0), 0.5, 7/6 (past the last
    # row: i0 = i1 = 1). Both sample 0, 0.5, 1 here.
    out = ref("interpolate", [X_2X2], **resize_attrs("bilinear", align_corners, size=[3, 3]))
    assert_allclose(out, [[[[0, 0.5, 1], [1, 1.5, 2], [2, 2.5, 3]]]], rtol=1e-15)


def test_bilinear_align_corners_differ_when_upsampling_2_to_4():
    x = image_row([0, 1])
    corners = ref("interpolate", [x], **resize_attrs("bilinear", True, size=[1, 4]))
    assert_allclose(corners, image_row([0, 1 / 3, 2 / 3, 1]), rtol=1e-15)
    # src = (d + 0.5) / 2 - 0.5 = -0.25 (clamped), 0.25, 0.75, 1.25 (clamped to the last pixel).
    edges = ref("interpolate", [x], **resize_attrs("bilinear", False, size=[1, 4]))
    assert_allclose(edges, image_row([0, 0.25, 0.75, 1]), rtol=1e-15)
    assert_allclose(ref("interpolate", [x], **resize_attrs("bilinear", False, scale_factor=[1.0, 2.0])), edges, rtol=1e-15)


def test_bilinear_downsampling_3_to_2():
    x = image_row([0, 10, 20])
    assert_allclose(ref("interpolate", [x], **resize_attrs("bilinear", True, size=[1, 2])), image_row([0, 20]), rtol=0)
    # src = (d + 0.5) * 1.5 - 0.5 = 0.25, 1.75.
    assert_allclose(ref("interpolate", [x], **resize_attrs("bilinear", False, size=[1, 2])), image_row([2.5, 17.5]), rtol=1e-15)


@settings(max_examples=200, deadline=None, database=None)
@given(data=st.data(), height=st.sampled_from(DIMS), width=st.sampled_from(DIMS))
def test_interpolate_never_draws_a_factor_that_keeps_a_size(data, height, width):
    # pytorch#198201: torch eager then copies that dim while torch.compile applies the factor.
    attrs = get_op("interpolate").draw_attrs(data.draw, [(1, 1, height, width)])
    if attrs["scale_factor"] is not None:
        assert all(scaled_size(s, f) not in (0, s) for s, f in zip((height, width), attrs["scale_factor"]))


def test_interpolate_takes_exactly_one_of_size_and_scale_factor():
    with pytest.raises(ShapeError, match="exactly one"):
        get_op("interpolate").infer(resize_attrs("nearest", size=[2, 2], scale_factor=[2.0, 2.0]), [(1, 1, 2, 2)])


# -- pixel_shuffle / pixel_unshuffle ---------------------------------------------------


def test_pixel_shuffle_of_a_4_channel_1x1_input():
    x = np.array([1.0, 2.0, 3.0, 4.0]).reshape(1, 4, 1, 1)
    # out[0, 0, i, j] = x[0, i*2 + j, 0, 0].
    assert_allclose(ref("pixel_shuffle", [x], upscale_factor=2), [[[[1, 2], [3, 4]]]], rtol=0)


def test_pixel_shuffle_keeps_channel_blocks_apart():
    x = np.arange(8.0).reshape(1, 8, 1, 1)
    out = ref("pixel_shuffle", [x], upscale_factor=2)
    assert_allclose(out, [[[[0, 1], [2, 3]], [[4, 5], [6, 7]]]], rtol=0)


def test_pixel_unshuffle_of_a_2x4_image():
    x = np.arange(8.0).reshape(1, 1, 2, 4)  # [[0 1 2 3] [4 5 6 7]]
    out = ref("pixel_unshuffle", [x], downscale_factor=2)
    # Channel i*2 + j holds x[h*2 + i, w*2 + j]: (0,0) -> 0 2, (0,1) -> 1 3, (1,0) -> 4 6, (1,1) -> 5 7.
    assert_allclose(out.reshape(4, 2), [[0, 2], [1, 3], [4, 6], [5, 7]], rtol=0)


def test_pixel_unshuffle_undoes_pixel_shuffle():
    x = np.random.default_rng(2).standard_normal((2, 18, 2, 3))
    shuffled = ref("pixel_shuffle", [x], upscale_factor=3)
    assert shuffled.shape == (2, 2, 6, 9)
    assert_allclose(ref("pixel_unshuffle", [shuffled], downscale_factor=3), x, rtol=0)
