"""The float64 numpy references against values worked out by hand.

Every expected value here comes from the op's defining equation written out
independently in the test (plain python floats and `math`, or a naive loop),
never from torch, jax, or the reference itself. The references are the
fuzzer's judge, so they are specified here like a contract.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.testing import assert_allclose

from fuzzer.errors import ShapeError
from fuzzer.ops import get_op

EPS = 1e-5


def ref(name, xs, ps=None, **attrs):
    """Run an op's reference on float64 arrays."""
    xs = [np.asarray(x, dtype=np.float64) for x in xs]
    ps = {k: np.asarray(v, dtype=np.float64) for k, v in (ps or {}).items()}
    return get_op(name).reference(xs, ps, attrs)


def sigmoid(v: float) -> float:
    return 1.0 / (1.0 + math.exp(-v))


# -- GRU ------------------------------------------------------------------------
# input size 2, hidden size 1, seq_len 3, batch 1, one layer, initial state given.
# weight_ih_l0 is (3H, I) = (3, 2) with rows r, z, n; weight_hh_l0 is (3H, H) = (3, 1).

GRU_X = [[0.5, -1.0], [1.5, 0.25], [-0.75, 2.0]]  # x_t, t = 0..2
GRU_W_IH = [[0.3, -0.2], [0.1, 0.4], [-0.5, 0.6]]
GRU_W_HH = [[0.7], [-0.3], [0.9]]
GRU_B_IH = [0.1, -0.2, 0.05]
GRU_B_HH = [-0.15, 0.25, 0.2]
GRU_H0 = 0.8


def gru_by_hand(use_previous_step: bool = True) -> list[float]:
    """The torch GRU equations, one scalar step at a time.

    With use_previous_step=False every step reads h0 instead of the previous step's
    output: that is seed bug 3b.
    """
    (w_ir, w_ir2), (w_iz, w_iz2), (w_in, w_in2) = GRU_W_IH
    (w_hr,), (w_hz,), (w_hn,) = GRU_W_HH
    b_ir, b_iz, b_in = GRU_B_IH
    b_hr, b_hz, b_hn = GRU_B_HH
    h, outputs = GRU_H0, []
    for x1, x2 in GRU_X:
        h_prev = h if use_previous_step else GRU_H0
        r = sigmoid(w_ir * x1 + w_ir2 * x2 + b_ir + w_hr * h_prev + b_hr)
        z = sigmoid(w_iz * x1 + w_iz2 * x2 + b_iz + w_hz * h_prev + b_hz)
        n = math.tanh(w_in * x1 + w_in2 * x2 + b_in + r * (w_hn * h_prev + b_hn))
        h = (1.0 - z) * n + z * h_prev
        outputs.append(h)
    return outputs


def gru_reference(batch_first=False):
    x = np.array(GRU_X).reshape(3, 1, 2)  # (T, B, I)
    if batch_first:
        x = x.transpose(1, 0, 2)
    params = {
        "weight_ih_l0": GRU_W_IH,
        "weight_hh_l0": GRU_W_HH,
        "bias_ih_l0": GRU_B_IH,
        "bias_hh_l0": GRU_B_HH,
        "h0": [[[GRU_H0]]],
    }
    attrs = dict(hidden_size=1, num_layers=1, batch_first=batch_first, initial_state=True, bias=True)
    return ref("gru", [x], params, **attrs)


def test_gru_matches_the_torch_equations_step_by_step():
    out = gru_reference()
    assert out.shape == (3, 1, 1)
    assert_allclose(out.reshape(3), gru_by_hand(), rtol=1e-12, atol=0)


def test_gru_uses_previous_step_hidden_state():
    expected, bug_3b = np.array(gru_by_hand()), np.array(gru_by_hand(use_previous_step=False))
    # The variant that feeds h0 to every step agrees on step 1 and must differ from step 2 on,
    # so a reference (or backend) with seed bug 3b is told apart by this case.
    assert expected[0] == bug_3b[0]
    assert np.all(np.abs(expected[1:] - bug_3b[1:]) > 1e-3)
    out = gru_reference().reshape(3)
    assert_allclose(out, expected, rtol=1e-12, atol=0)
    assert np.all(np.abs(out[1:] - bug_3b[1:]) > 1e-3)


def test_gru_batch_first_only_changes_the_layout():
    out = gru_reference(batch_first=True)
    assert out.shape == (1, 3, 1)
    assert_allclose(out.reshape(3), gru_by_hand(), rtol=1e-12, atol=0)


def test_gru_with_zero_weights_halves_the_state_each_step():
    # r = z = sigmoid(0) = 1/2, n = tanh(0) = 0, so h_t = h_{t-1} / 2.
    params = {"weight_ih_l0": np.zeros((3, 2)), "weight_hh_l0": np.zeros((3, 1)), "h0": [[[1.0]]]}
    out = ref("gru", [np.ones((3, 1, 2))], params, hidden_size=1, num_layers=1, batch_first=False, initial_state=True, bias=False)
    assert_allclose(out.reshape(3), [0.5, 0.25, 0.125], rtol=1e-15)


def test_gru_without_initial_state_starts_from_zero():
    # Zero weights and h0 = 0: every gate input is 0, so h stays 0 * ... = 0 whatever x is.
    params = {"weight_ih_l0": np.zeros((3, 2)), "weight_hh_l0": np.zeros((3, 1))}
    out = ref("gru", [np.ones((3, 1, 2))], params, hidden_size=1, num_layers=1, batch_first=False, initial_state=False, bias=False)
    assert_allclose(out, np.zeros((3, 1, 1)), atol=0)


# -- LSTM -----------------------------------------------------------------------
# input size 1, hidden size 1, seq_len 3, batch 1; gate rows ordered i, f, g, o.

LSTM_X = [1.0, -0.5, 2.0]
LSTM_W_IH = [[0.5], [-0.4], [0.8], [0.3]]  # i, f, g, o
LSTM_W_HH = [[0.2], [0.6], [-0.7], [0.1]]
LSTM_B_IH = [0.1, 0.2, -0.1, 0.05]
LSTM_B_HH = [-0.05, 0.3, 0.15, -0.2]
LSTM_H0, LSTM_C0 = 0.9, -1.2


def lstm_by_hand(gate_order=("i", "f", "g", "o")) -> list[float]:
    """torch's LSTM equations; `gate_order` names which weight row feeds which gate."""
    row = {gate: k for k, gate in enumerate(gate_order)}

    def pre(gate, x, h):
        k = row[gate]
        return LSTM_W_IH[k][0] * x + LSTM_B_IH[k] + LSTM_W_HH[k][0] * h + LSTM_B_HH[k]

    h, c, outputs = LSTM_H0, LSTM_C0, []
    for x in LSTM_X:
        i = sigmoid(pre("i", x, h))
        f = sigmoid(pre("f", x, h))
        g = math.tanh(pre("g", x, h))
        o = sigmoid(pre("o", x, h))
        c = f * c + i * g
        h = o * math.tanh(c)
        outputs.append(h)
    return outputs


def lstm_reference(**overrides):
    params = {
        "weight_ih_l0": LSTM_W_IH,
        "weight_hh_l0": LSTM_W_HH,
        "bias_ih_l0": LSTM_B_IH,
        "bias_hh_l0": LSTM_B_HH,
        "h0": [[[LSTM_H0]]],
        "c0": [[[LSTM_C0]]],
    }
    attrs = dict(hidden_size=1, num_layers=1, batch_first=False, initial_state=True, bias=True)
    attrs.update(overrides)
    return ref("lstm", [np.array(LSTM_X).reshape(3, 1, 1)], params, **attrs)


def test_lstm_matches_the_torch_equations_with_gate_order_ifgo():
    out = lstm_reference()
    assert out.shape == (3, 1, 1)
    assert_allclose(out.reshape(3), lstm_by_hand(), rtol=1e-12, atol=0)
    # The weights are chosen so that another gate order gives other numbers.
    for wrong_order in (("i", "f", "o", "g"), ("f", "i", "g", "o"), ("i", "g", "f", "o")):
        assert np.max(np.abs(np.array(lstm_by_hand(wrong_order)) - out.reshape(3))) > 1e-3


def test_lstm_with_zero_weights_halves_the_cell_each_step():
    # i = f = o = 1/2 and g = tanh(0) = 0: c_t = c_{t-1} / 2 and h_t = tanh(c_t) / 2.
    params = {"weight_ih_l0": np.zeros((4, 1)), "weight_hh_l0": np.zeros((4, 1)), "h0": [[[0.0]]], "c0": [[[1.0]]]}
    out = ref("lstm", [np.ones((3, 1, 1))], params, hidden_size=1, num_layers=1, batch_first=False, initial_state=True, bias=False)
    assert_allclose(out.reshape(3), [0.5 * math.tanh(0.5), 0.5 * math.tanh(0.25), 0.5 * math.tanh(0.125)], rtol=1e-15)


def test_lstm_uses_previous_step_hidden_and_cell_state():
    out = lstm_reference().reshape(3)
    # Step 2 computed from (h0, c0) instead of step 1's (h, c) is a different number.
    def step(x, h, c):
        i = sigmoid(LSTM_W_IH[0][0] * x + LSTM_B_IH[0] + LSTM_W_HH[0][0] * h + LSTM_B_HH[0])
        f = sigmoid(LSTM_W_IH[1][0] * x + LSTM_B_IH[1] + LSTM_W_HH[1][0] * h + LSTM_B_HH[1])
        g = math.tanh(LSTM_W_IH[2][0] * x + LSTM_B_IH[2] + LSTM_W_HH[2][0] * h + LSTM_B_HH[2])
        o = sigmoid(LSTM_W_IH[3][0] * x + LSTM_B_IH[3] + LSTM_W_HH[3][0] * h + LSTM_B_HH[3])
        c = f * c + i * g
        return o * math.tanh(c), c

    h1, c1 = step(LSTM_X[0], LSTM_H0, LSTM_C0)
    assert out[0] == pytest.approx(h1, rel=1e-12)
    assert out[1] == pytest.approx(step(LSTM_X[1], h1, c1)[0], rel=1e-12)
    assert abs(out[1] - step(LSTM_X[1], LSTM_H0, LSTM_C0)[0]) > 1e-3


# -- layer_norm -----------------------------------------------------------------


def test_layer_norm_on_a_2x3_example_by_hand():
    x = [[1.0, 2.0, 3.0], [4.0, 6.0, 8.0]]
    # Row 1: mean 2, biased variance 2/3. Row 2: mean 6, biased variance 8/3.
    s1, s2 = math.sqrt(2 / 3 + EPS), math.sqrt(8 / 3 + EPS)
    expected = [[-1 / s1, 0.0, 1 / s1], [-2 / s2, 0.0, 2 / s2]]
    out = ref("layer_norm", [x], normalized_shape=[3], affine=False, eps=EPS)
    assert_allclose(out, expected, rtol=1e-14, atol=1e-15)


def test_layer_norm_affine_scales_then_shifts():
    x = [[1.0, 2.0, 3.0], [4.0, 6.0, 8.0]]
    s1, s2 = math.sqrt(2 / 3 + EPS), math.sqrt(8 / 3 + EPS)
    weight, bias = [2.0, 3.0, -1.0], [0.5, -0.5, 1.0]
    expected = [
        [2.0 * -1 / s1 + 0.5, -0.5, -1.0 * 1 / s1 + 1.0],
        [2.0 * -2 / s2 + 0.5, -0.5, -1.0 * 2 / s2 + 1.0],
    ]
    out = ref("layer_norm", [x], {"weight": weight, "bias": bias}, normalized_shape=[3], affine=True, eps=EPS)
    assert_allclose(out, expected, rtol=1e-14, atol=1e-15)


def test_layer_norm_over_two_dims_pools_both():
    x = [[1.0, 2.0, 3.0], [4.0, 6.0, 8.0]]
    # mean 4; deviations -3 -2 -1 0 2 4; biased variance 34/6.
    s = math.sqrt(34 / 6 + EPS)
    expected = [[-3 / s, -2 / s, -1 / s], [0.0, 2 / s, 4 / s]]
    out = ref("layer_norm", [x], normalized_shape=[2, 3], affine=False, eps=EPS)
    assert_allclose(out, expected, rtol=1e-14, atol=1e-15)


def test_layer_norm_of_a_transposed_input_equals_its_contiguous_copy():
    stored = np.array([[1.0, 4.0], [2.0, 6.0], [3.0, 8.0]])  # (3, 2) in memory
    x = stored.T  # logical [[1, 2, 3], [4, 6, 8]], not C-contiguous
    assert not x.flags["C_CONTIGUOUS"]
    attrs = dict(normalized_shape=[3], affine=False, eps=EPS)
    out = ref("layer_norm", [x], **attrs)
    assert_allclose(out, ref("layer_norm", [np.ascontiguousarray(x)], **attrs), rtol=0, atol=0)
    s1, s2 = math.sqrt(2 / 3 + EPS), math.sqrt(8 / 3 + EPS)
    assert_allclose(out, [[-1 / s1, 0.0, 1 / s1], [-2 / s2, 0.0, 2 / s2]], rtol=1e-14, atol=1e-15)


def test_layer_norm_of_a_permuted_4d_input_equals_its_contiguous_copy():
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).transpose(0, 2, 3, 1)  # NCHW -> NHWC view
    attrs = dict(normalized_shape=[5, 3], affine=False, eps=EPS)
    # Equal up to summation order (numpy may add in memory order): a few ulps, never O(1).
    assert_allclose(ref("layer_norm", [x], **attrs), ref("layer_norm", [np.ascontiguousarray(x)], **attrs), rtol=1e-13, atol=1e-14)


# -- conv2d ---------------------------------------------------------------------


def conv_attrs(**overrides):
    attrs = dict(out_channels=1, kernel_size=[2, 2], stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=1, bias=False)
    attrs.update(overrides)
    return attrs


def test_conv2d_2x2_kernel_on_3x3_input_by_hand():
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]).reshape(1, 1, 3, 3)
    w = np.array([[1.0, 2.0], [3.0, 4.0]]).reshape(1, 1, 2, 2)
    # Cross-correlation, no kernel flip:
    #   out[0,0] = 1*1 + 2*2 + 3*4 + 4*5 = 37    out[0,1] = 1*2 + 2*3 + 3*5 + 4*6 = 47
    #   out[1,0] = 1*4 + 2*5 + 3*7 + 4*8 = 67    out[1,1] = 1*5 + 2*6 + 3*8 + 4*9 = 77
    out = ref("conv2d", [x], {"weight": w}, **conv_attrs())
    assert_allclose(out, [[[[37.0, 47.0], [67.0, 77.0]]]], rtol=1e-15)
    with_bias = ref("conv2d", [x], {"weight": w, "bias": [0.5]}, **conv_attrs(bias=True))
    assert_allclose(with_bias, [[[[37.5, 47.5], [67.5, 77.5]]]], rtol=1e-15)


def naive_conv2d(x, w, b, stride, padding, dilation, groups):
    """out[n,o,i,j] = b[o] + sum_{c,kh,kw} w[o,c,kh,kw] * x[n, g*Cg + c, i*s - p + kh*d, j*s - p + kw*d] (zero outside)."""
    n_batch, c_in, height, width = x.shape
    c_out, c_per_group, k_h, k_w = w.shape
    out_per_group = c_out // groups
    out_h = (height + 2 * padding[0] - dilation[0] * (k_h - 1) - 1) // stride[0] + 1
    out_w = (width + 2 * padding[1] - dilation[1] * (k_w - 1) - 1) // stride[1] + 1
    out = np.zeros((n_batch, c_out, out_h, out_w))
    for n in range(n_batch):
        for o in range(c_out):
            group = o // out_per_group
            for i in range(out_h):
                for j in range(out_w):
                    total = 0.0 if b is None else float(b[o])
                    for c in range(c_per_group):
                        for kh in range(k_h):
                            for kw in range(k_w):
                                row = i * stride[0] - padding[0] + kh * dilation[0]
                                col = j * stride[1] - padding[1] + kw * dilation[1]
                                if 0 <= row < height and 0 <= col < width:
                                    total += w[o, c, kh, kw] * x[n, group * c_per_group + c, row, col]
                    out[n, o, i, j] = total
    return out


@pytest.mark.parametrize(
    "x_shape, attrs",
    [
        ((2, 4, 5, 5), conv_attrs(out_channels=6, kernel_size=[3, 2], groups=2, bias=True)),
        ((1, 4, 4, 6), conv_attrs(out_channels=4, kernel_size=[1, 3], groups=4)),  # depthwise
        ((1, 3, 7, 6), conv_attrs(out_channels=2, kernel_size=[2, 3], stride=[2, 1], padding=[1, 1], dilation=[2, 1], bias=True)),
        ((2, 2, 6, 8), conv_attrs(out_channels=4, kernel_size=[3, 3], stride=[2, 3], padding=[1, 1], dilation=[1, 2], groups=2)),
    ],
    ids=["grouped", "depthwise", "strided-padded-dilated", "grouped-strided-padded-dilated"],
)
def test_conv2d_matches_a_naive_loop(x_shape, attrs):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(x_shape)
    w = rng.standard_normal((attrs["out_channels"], x_shape[1] // attrs["groups"], *attrs["kernel_size"]))
    b = rng.standard_normal(attrs["out_channels"]) if attrs["bias"] else None
    params = {"weight": w} | ({"bias": b} if b is not None else {})
    expected = naive_conv2d(x, w, b, attrs["stride"], attrs["padding"], attrs["dilation"], attrs["groups"])
    out = ref("conv2d", [x], params, **attrs)
    assert out.shape == expected.shape == get_op("conv2d").infer(attrs, [x_shape])
    assert_allclose(out, expected, rtol=1e-12, atol=1e-12)


# -- pooling --------------------------------------------------------------------

NEGATIVE_3X3 = -np.arange(1.0, 10.0).reshape(1, 1, 3, 3)  # [[-1 -2 -3] [-4 -5 -6] [-7 -8 -9]]
POOL_2_STRIDE_2_PAD_1 = dict(kernel_size=[2, 2], stride=[2, 2], padding=[1, 1])
# Padded to 5x5; the four windows cover {x00}, {x01, x02}, {x10, x20}, {x11, x12, x21, x22}.


def test_max_pool2d_never_picks_the_padding():
    out = ref("max_pool2d", [NEGATIVE_3X3], **POOL_2_STRIDE_2_PAD_1)
    assert_allclose(out, [[[[-1.0, -2.0], [-4.0, -5.0]]]], rtol=0)


def test_avg_pool2d_counts_padding_as_zeros():
    out = ref("avg_pool2d", [NEGATIVE_3X3], **POOL_2_STRIDE_2_PAD_1)
    expected = [[[[-1.0 / 4, (-2.0 - 3.0) / 4], [(-4.0 - 7.0) / 4, (-5.0 - 6.0 - 8.0 - 9.0) / 4]]]]
    assert_allclose(out, expected, rtol=1e-15)


def test_pooling_3x3_stride_1_pad_1_keeps_the_size():
    x = np.arange(1.0, 10.0).reshape(1, 1, 3, 3)
    attrs = dict(kernel_size=[3, 3], stride=[1, 1], padding=[1, 1])
    assert_allclose(ref("max_pool2d", [x], **attrs), [[[[5, 6, 6], [8, 9, 9], [8, 9, 9]]]], rtol=0)
    # Corner (0,0) window holds 1 2 4 5 and five zeros; the centre holds all nine.
    expected_avg = np.array([[12, 21, 16], [27, 45, 33], [24, 39, 28]]) / 9.0
    assert_allclose(ref("avg_pool2d", [x], **attrs), expected_avg.reshape(1, 1, 3, 3), rtol=1e-15)


def test_pooling_without_padding_on_rectangular_window():
    x = np.arange(1.0, 13.0).reshape(1, 1, 3, 4)  # [[1 2 3 4] [5 6 7 8] [9 10 11 12]]
    attrs = dict(kernel_size=[2, 3], stride=[1, 1], padding=[0, 0])
    assert_allclose(ref("max_pool2d", [x], **attrs), [[[[7, 8], [11, 12]]]], rtol=0)
    assert_allclose(ref("avg_pool2d", [x], **attrs), [[[[24 / 6, 30 / 6], [48 / 6, 54 / 6]]]], rtol=1e-15)


# -- batch_norm -----------------------------------------------------------------

BN_PARAMS = {"weight": [2.0, 1.0], "bias": [0.0, 1.0], "running_mean": [1.0, 2.0], "running_var": [4.0, 9.0]}


def test_batch_norm_eval_uses_running_statistics():
    x = [[1.0, 2.0], [3.0, 8.0]]  # (N=2, C=2)
    expected = [
        [2.0 * (1 - 1) / math.sqrt(4 + EPS) + 0.0, 1.0 * (2 - 2) / math.sqrt(9 + EPS) + 1.0],
        [2.0 * (3 - 1) / math.sqrt(4 + EPS) + 0.0, 1.0 * (8 - 2) / math.sqrt(9 + EPS) + 1.0],
    ]
    assert_allclose(ref("batch_norm", [x], BN_PARAMS, training=False, eps=EPS), expected, rtol=1e-14)


def test_batch_norm_training_uses_biased_batch_variance():
    x = [[1.0, 2.0], [3.0, 8.0]]
    # Channel 0: values 1, 3 -> mean 2, biased var 1 (unbiased would be 2).
    # Channel 1: values 2, 8 -> mean 5, biased var 9 (unbiased would be 18).
    expected = [
        [2.0 * -1 / math.sqrt(1 + EPS), 1.0 * -3 / math.sqrt(9 + EPS) + 1.0],
        [2.0 * 1 / math.sqrt(1 + EPS), 1.0 * 3 / math.sqrt(9 + EPS) + 1.0],
    ]
    assert_allclose(ref("batch_norm", [x], BN_PARAMS, training=True, eps=EPS), expected, rtol=1e-14)


def test_batch_norm_training_pools_batch_and_spatial_dims_per_channel():
    x = np.array([[[1.0, 2.0]], [[3.0, 6.0]]])  # (N=2, C=1, L=2)
    # Values 1 2 3 6: mean 3, biased variance (4 + 1 + 0 + 9) / 4 = 3.5.
    params = {"weight": [1.0], "bias": [0.0], "running_mean": [100.0], "running_var": [100.0]}
    s = math.sqrt(3.5 + EPS)
    expected = np.array([[[-2 / s, -1 / s]], [[0.0, 3 / s]]])
    assert_allclose(ref("batch_norm", [x], params, training=True, eps=EPS), expected, rtol=1e-14, atol=1e-15)


# -- softmax / log_softmax --------------------------------------------------------


def test_softmax_of_log_1_2_3_is_one_two_three_sixths():
    row = [0.0, math.log(2.0), math.log(3.0)]
    x = [row, [v + 1000.0 for v in row]]  # a shifted row must not overflow
    assert_allclose(ref("softmax", [x], dim=-1), [[1 / 6, 2 / 6, 3 / 6]] * 2, rtol=1e-13)
    assert_allclose(ref("softmax", [x], dim=1), [[1 / 6, 2 / 6, 3 / 6]] * 2, rtol=1e-13)


def test_log_softmax_rows_by_hand():
    row = [0.0, math.log(2.0), math.log(3.0)]
    x = [row, [v - 500.0 for v in row]]
    expected = [math.log(1 / 6), math.log(2 / 6), math.log(3 / 6)]
    assert_allclose(ref("log_softmax", [x], dim=-1), [expected] * 2, rtol=1e-13)


def test_softmax_over_dim_0_normalizes_columns():
    x = [[0.0, 5.0], [math.log(3.0), 5.0]]
    assert_allclose(ref("softmax", [x], dim=0), [[1 / 4, 1 / 2], [3 / 4, 1 / 2]], rtol=1e-14)


# -- reductions -----------------------------------------------------------------

X_2X3 = np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])


def test_sum_with_and_without_keepdim():
    assert_allclose(ref("sum", [X_2X3], dims=[1], keepdim=True), [[3.0], [12.0]], rtol=0)
    assert ref("sum", [X_2X3], dims=[1], keepdim=True).shape == (2, 1)
    out = ref("sum", [X_2X3], dims=[1], keepdim=False)
    assert out.shape == (2,)
    assert_allclose(out, [3.0, 12.0], rtol=0)


def test_sum_over_every_dim_gives_shape_1_or_1x1():
    full = ref("sum", [X_2X3], dims=[0, 1], keepdim=False)
    assert full.shape == (1,)
    assert_allclose(full, [15.0], rtol=0)
    kept = ref("sum", [X_2X3], dims=[0, 1], keepdim=True)
    assert kept.shape == (1, 1)
    assert_allclose(kept, [[15.0]], rtol=0)


def test_mean_with_and_without_keepdim():
    kept = ref("mean", [X_2X3], dims=[0], keepdim=True)
    assert kept.shape == (1, 3)
    assert_allclose(kept, [[1.5, 2.5, 3.5]], rtol=0)
    assert_allclose(ref("mean", [X_2X3], dims=[1], keepdim=False), [1.0, 4.0], rtol=0)
    assert_allclose(ref("mean", [X_2X3], dims=[0, 1], keepdim=False), [2.5], rtol=0)


# -- layout ops -----------------------------------------------------------------


def test_reshape_infers_the_minus_one_dim():
    out = ref("reshape", [np.arange(6.0)], shape=[3, -1])
    assert_allclose(out, [[0, 1], [2, 3], [4, 5]], rtol=0)
    assert get_op("reshape").infer({"shape": [3, -1]}, [(6,)]) == (3, 2)
    assert get_op("reshape").infer({"shape": [-1, 2, 3]}, [(2, 3, 2)]) == (2, 2, 3)


def test_reshape_reads_in_row_major_logical_order():
    x = np.arange(6.0).reshape(2, 3).T  # logical [[0 3] [1 4] [2 5]], non-contiguous
    assert_allclose(ref("reshape", [x], shape=[6]), [0, 3, 1, 4, 2, 5], rtol=0)


def test_flatten_merges_the_given_dim_range():
    x = np.arange(12.0).reshape(2, 3, 2)
    out = ref("flatten", [x], start_dim=1, end_dim=2)
    assert_allclose(out, [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]], rtol=0)
    assert ref("flatten", [x], start_dim=0, end_dim=1).shape == (6, 2)
    assert ref("flatten", [x], start_dim=0, end_dim=-1).shape == (12,)
    assert get_op("flatten").infer({"start_dim": 1, "end_dim": -1}, [(2, 3, 2)]) == (2, 6)


def test_concat_stacks_along_dim():
    a, b = [[1.0, 2.0]], [[3.0, 4.0], [5.0, 6.0]]
    assert_allclose(ref("concat", [a, b], dim=0), [[1, 2], [3, 4], [5, 6]], rtol=0)
    c, d, e = [[1.0], [2.0]], [[3.0, 4.0], [5.0, 6.0]], [[7.0], [8.0]]
    assert_allclose(ref("concat", [c, d, e], dim=1), [[1, 3, 4, 7], [2, 5, 6, 8]], rtol=0)
    assert get_op("concat").infer({"dim": -1}, [(2, 1), (2, 2), (2, 1)]) == (2, 4)


def test_permute_moves_dims():
    x = np.arange(24.0).reshape(2, 3, 4)  # x[i, j, k] = 12 i + 4 j + k
    out = ref("permute", [x], perm=[2, 0, 1])  # out[k, i, j] = x[i, j, k]
    assert out.shape == (4, 2, 3)
    for k in range(4):
        for i in range(2):
            for j in range(3):
                assert out[k, i, j] == 12 * i + 4 * j + k
    assert get_op("permute").infer({"perm": [2, 0, 1]}, [(2, 3, 4)]) == (4, 2, 3)


def test_transpose_swaps_two_dims():
    assert_allclose(ref("transpose", [[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]], dim0=0, dim1=1), [[1, 4], [2, 5], [3, 6]], rtol=0)
    x = np.arange(24.0).reshape(2, 3, 4)
    out = ref("transpose", [x], dim0=-1, dim1=0)  # out[k, j, i] = x[i, j, k]
    assert out.shape == (4, 3, 2)
    assert out[3, 2, 1] == 12 * 1 + 4 * 2 + 3


# -- linear / matmul --------------------------------------------------------------


def test_linear_is_x_times_w_transposed_plus_b():
    w = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]  # (out_features=3, in_features=2)
    x = [[1.0, 2.0], [-1.0, 3.0]]
    out = ref("linear", [x], {"weight": w, "bias": [0.0, 0.0, 10.0]}, out_features=3, bias=True)
    assert_allclose(out, [[1, 2, 13], [-1, 3, 12]], rtol=0)
    assert_allclose(ref("linear", [x], {"weight": w}, out_features=3, bias=False), [[1, 2, 3], [-1, 3, 2]], rtol=0)


def test_linear_on_a_vector_and_on_a_3d_batch():
    w = [[2.0, -1.0]]
    assert_allclose(ref("linear", [[3.0, 4.0]], {"weight": w}, out_features=1, bias=False), [2.0], rtol=0)
    x = np.array([[[1.0, 1.0], [0.0, 2.0]]])  # (1, 2, 2)
    out = ref("linear", [x], {"weight": w, "bias": [0.5]}, out_features=1, bias=True)
    assert_allclose(out, [[[1.5], [-1.5]]], rtol=0)


def test_matmul_batched_with_unbatched_right_operand():
    a = np.array([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]])  # identity, swap rows
    b = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert_allclose(ref("matmul", [a, b]), [[[1, 2], [3, 4]], [[3, 4], [1, 2]]], rtol=0)


def test_matmul_broadcasts_batch_dims():
    a = np.stack([np.eye(2) * (i + 1) for i in range(2)]).reshape(2, 1, 2, 2)  # a[i, 0] = (i + 1) I
    b = np.array([[[1.0, 2.0], [3.0, 4.0]], [[0.0, 1.0], [1.0, 0.0]], [[5.0, 0.0], [0.0, -1.0]]])  # (3, 2, 2)
    out = ref("matmul", [a, b])
    assert out.shape == (2, 3, 2, 2)
    for i in range(2):
        for j in range(3):
            assert_allclose(out[i, j], (i + 1) * b[j], rtol=0)
    assert get_op("matmul").infer({}, [(2, 1, 2, 2), (3, 2, 2)]) == (2, 3, 2, 2)


def test_matmul_non_square_by_hand():
    a = [[1.0, 2.0, 3.0]]  # (1, 3)
    b = [[1.0, 0.0], [0.0, 1.0], [2.0, -1.0]]  # (3, 2)
    assert_allclose(ref("matmul", [a, b]), [[1 + 0 + 6, 0 + 2 - 3]], rtol=0)


# -- pointwise --------------------------------------------------------------------


def test_gelu_is_the_exact_erf_form():
    out = ref("gelu", [[-1.0, 0.0, 1.0, 2.0]])
    # x * Phi(x), Phi(1) = 0.8413447460685429, Phi(2) = 0.9772498680518208.
    assert_allclose(out, [-(1 - 0.8413447460685429), 0.0, 0.8413447460685429, 2 * 0.9772498680518208], rtol=1e-14)
    tanh_form = 0.5 * (1 + math.tanh(math.sqrt(2 / math.pi) * (1 + 0.044715)))
    assert abs(out[2] - tanh_form) > 1e-4  # not the tanh approximation


def test_sigmoid_does_not_overflow_for_large_negative_inputs():
    x = np.array([-1000.0, -800.0, -50.0, -5.0, 0.0, 5.0, 800.0, 1000.0])
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # underflow to 0 is fine
        out = ref("sigmoid", [x])
    assert np.all(np.isfinite(out))
    assert np.all((out >= 0) & (out <= 1))
    assert np.all(np.diff(out) >= 0)
    assert_allclose(out[3:], [1 / (1 + math.exp(5.0)), 0.5, 1 / (1 + math.exp(-5.0)), 1.0, 1.0], rtol=1e-12)
    assert_allclose(out[:3], [0.0, 0.0, 0.0], atol=1e-21)


def test_sigmoid_keeps_relative_accuracy_for_large_negative_inputs():
    x = np.array([-20.0, -37.0, -50.0, -700.0])
    expected = [math.exp(v) / (1.0 + math.exp(v)) for v in x]  # exp(x) never overflows here
    assert_allclose(ref("sigmoid", [x]), expected, rtol=1e-13, atol=0)


def test_relu_and_tanh_by_hand():
    assert_allclose(ref("relu", [[-2.0, -0.0, 0.0, 3.5]]), [0.0, 0.0, 0.0, 3.5], rtol=0)
    assert_allclose(ref("tanh", [[0.0, 1.0, -30.0]]), [0.0, (math.e - 1 / math.e) / (math.e + 1 / math.e), -1.0], rtol=1e-15)


def test_dropout_in_eval_mode_is_the_identity_for_any_p():
    x = np.array([[1.0, -2.0], [3.5, 0.0]])
    for p in (0.1, 0.5, 0.9, 1.0):
        assert_allclose(ref("dropout", [x], p=p, training=False), x, rtol=0, atol=0)


def test_dropout_in_training_mode():
    x = np.array([[1.0, -2.0], [3.5, 0.25]])
    assert_allclose(ref("dropout", [x], p=1.0, training=True), np.zeros((2, 2)), rtol=0, atol=0)
    assert_allclose(ref("dropout", [x], p=0.0, training=True), x, rtol=0, atol=0)


def test_add_and_mul_broadcast():
    a = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert_allclose(ref("add", [a, [10.0, 20.0, 30.0]]), [[11, 22, 33], [14, 25, 36]], rtol=0)
    assert_allclose(ref("mul", [a, [[2.0], [-1.0]]]), [[2, 4, 6], [-4, -5, -6]], rtol=0)
    outer = ref("mul", [[[1.0], [2.0]], [[3.0, 4.0, 5.0]]])  # (2, 1) * (1, 3)
    assert_allclose(outer, [[3, 4, 5], [6, 8, 10]], rtol=0)
    assert get_op("add").infer({}, [(2, 1, 3), (4, 1)]) == (2, 4, 3)


# -- shape rules refuse invalid attributes with a message that says why -----------


@pytest.mark.parametrize(
    "name, attrs, shapes, message",
    [
        pytest.param("conv2d", conv_attrs(out_channels=4, groups=2), [(1, 3, 5, 5)], "in_channels 3 is not divisible by groups 2", id="conv2d-groups-not-dividing-in-channels"),
        pytest.param("conv2d", conv_attrs(out_channels=3, groups=2), [(1, 4, 5, 5)], "out_channels 3 is not divisible by groups 2", id="conv2d-groups-not-dividing-out-channels"),
        pytest.param("conv2d", conv_attrs(kernel_size=[4, 4]), [(1, 1, 3, 3)], "kernel does not fit", id="conv2d-kernel-larger-than-input"),
        pytest.param("conv2d", conv_attrs(), [(3, 5, 5)], r"conv2d takes \(N, C, H, W\), got \[3, 5, 5\]", id="conv2d-wrong-rank"),
        pytest.param("layer_norm", dict(normalized_shape=[4], affine=False, eps=EPS), [(2, 3)], r"normalized_shape \[4\] does not match .*\[2, 3\]", id="layer_norm-normalized-shape-mismatch"),
        pytest.param("layer_norm", dict(normalized_shape=[1, 2, 3], affine=False, eps=EPS), [(2, 3)], "longer than the input rank", id="layer_norm-normalized-shape-too-long"),
        pytest.param("reshape", dict(shape=[4, 2]), [(2, 3)], r"shape \[4, 2\] does not hold 6 elements", id="reshape-wrong-numel"),
        pytest.param("reshape", dict(shape=[4, -1]), [(2, 3)], r"cannot infer -1: 6 elements into \[4, -1\]", id="reshape-minus-one-not-integral"),
        pytest.param("reshape", dict(shape=[-1, -1]), [(2, 3)], "at most one -1", id="reshape-two-minus-ones"),
        pytest.param("dropout", dict(p=0.5, training=True), [(2, 3)], "training-mode dropout with p=0.5 is random", id="dropout-training-random-p"),
        pytest.param("dropout", dict(p=1.5, training=False), [(2, 3)], r"p=1.5 must be in \[0, 1\]", id="dropout-p-out-of-range"),
        pytest.param("matmul", {}, [(2, 3), (4, 5)], r"inner dims differ: \[2, 3\] @ \[4, 5\]", id="matmul-inner-dims"),
        pytest.param("matmul", {}, [(2, 2, 3), (3, 3, 4)], "batch dims .* do not broadcast", id="matmul-batch-dims"),
        pytest.param("add", {}, [(2, 3), (4,)], "do not broadcast", id="add-not-broadcastable"),
        pytest.param("concat", dict(dim=0), [(2, 3), (2, 4)], "differ outside dim 0", id="concat-other-dims-differ"),
        pytest.param("permute", dict(perm=[0, 0, 1]), [(2, 3, 4)], "not a permutation", id="permute-not-a-permutation"),
        pytest.param("transpose", dict(dim0=0, dim1=3), [(2, 3)], "dim 3 is out of range for rank 2", id="transpose-dim-out-of-range"),
        pytest.param("softmax", dict(dim=2), [(2, 3)], "dim 2 is out of range for rank 2", id="softmax-dim-out-of-range"),
        pytest.param("sum", dict(dims=[1, -1], keepdim=False), [(2, 3)], "distinct", id="sum-repeated-dim"),
        pytest.param("max_pool2d", dict(kernel_size=[2, 2], stride=[1, 1], padding=[2, 0]), [(1, 1, 4, 4)], "padding 2 must be at most half the kernel size 2", id="max_pool2d-padding-over-half-kernel"),
        pytest.param("batch_norm", dict(training=True, eps=EPS), [(1, 3)], "more than one value per channel", id="batch_norm-training-one-value-per-channel"),
        pytest.param("batch_norm", dict(training=False, eps=EPS), [(4,)], "batch_norm takes", id="batch_norm-wrong-rank"),
        pytest.param("gru", dict(hidden_size=2, num_layers=1, batch_first=False, initial_state=False, bias=True), [(3, 4)], "3-d sequence", id="gru-not-a-sequence"),
    ],
)
def test_shape_rule_refuses_invalid_attrs_with_a_helpful_message(name, attrs, shapes, message):
    with pytest.raises(ShapeError, match=message):
        get_op(name).infer(attrs, shapes)


def test_shape_rules_accept_the_valid_neighbours_of_those_cases():
    assert get_op("conv2d").infer(conv_attrs(out_channels=4, groups=2), [(1, 4, 5, 5)]) == (1, 4, 4, 4)
    assert get_op("layer_norm").infer(dict(normalized_shape=[3], affine=False, eps=EPS), [(2, 3)]) == (2, 3)
    assert get_op("reshape").infer(dict(shape=[3, 2]), [(2, 3)]) == (3, 2)
    assert get_op("dropout").infer(dict(p=0.5, training=False), [(2, 3)]) == (2, 3)
    assert get_op("dropout").infer(dict(p=1.0, training=True), [(2, 3)]) == (2, 3)
    assert get_op("max_pool2d").infer(dict(kernel_size=[2, 2], stride=[2, 2], padding=[1, 1]), [(1, 1, 3, 3)]) == (1, 1, 2, 2)
    assert get_op("gru").infer(dict(hidden_size=5, num_layers=2, batch_first=True, initial_state=False, bias=True), [(2, 7, 3)]) == (2, 7, 5)
