"""References of the linear algebra, attention, reduction and normalization ops, by hand.

Every expected value comes from the op's defining equation written out here (plain
python floats, `math`, or a naive loop), never from torch, jax, or the reference
itself. The declared forward errors are checked against naive float32
implementations that a framework could legitimately use.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import find
from hypothesis.errors import NoSuchExample
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from fuzzer.errors import ShapeError
from fuzzer.ops import get_op
from fuzzer.ops.norm import EPS_CHOICES
from fuzzer.oracle import ROUNDING_SLACK, UNIT_ROUNDOFF

EPS = 1e-5
INF = math.inf


def ref(name, xs, ps=None, dtype=np.float64, **attrs):
    """Run an op in numpy on arrays of `dtype`: float64 (unless told) runs its reference, another
    dtype its low-precision model where it declares one (Numerics.low_precision_model)."""
    xs = [np.asarray(x, dtype=dtype) for x in xs]
    ps = {k: np.asarray(v, dtype=dtype) for k, v in (ps or {}).items()}
    return get_op(name).impl("numpy")(xs, ps, attrs)


def infer(name, shapes, **attrs):
    return tuple(get_op(name).infer(attrs, [tuple(s) for s in shapes]))


# -- reductions over dims ------------------------------------------------------------


def test_amax_and_amin_over_dims():
    x = [[1.0, 5.0], [3.0, -2.0]]
    assert_array_equal(ref("amax", [x], dims=[0], keepdim=False), [3.0, 5.0])
    assert_array_equal(ref("amin", [x], dims=[1], keepdim=True), [[1.0], [-2.0]])


def test_a_full_reduction_without_keepdim_has_shape_1():
    out = ref("amin", [[[1.0, 5.0], [3.0, -2.0]]], dims=[0, 1], keepdim=False)
    assert out.shape == (1,) and out[0] == -2.0
    assert infer("logsumexp", [(2, 3)], dims=[0, 1], keepdim=False) == (1,)


def test_max_and_min_take_one_dim_and_give_values():
    x = [[1.0, 5.0, 2.0], [3.0, -2.0, 3.0]]
    assert_array_equal(ref("max", [x], dim=1, keepdim=False), [5.0, 3.0])
    assert_array_equal(ref("min", [x], dim=-2, keepdim=True), [[1.0, -2.0, 2.0]])


def test_prod_by_hand_keeps_the_sign():
    assert_array_equal(ref("prod", [[[2.0, 3.0], [4.0, -0.5]]], dim=1, keepdim=False), [6.0, -2.0])


def test_prod_is_infinite_in_a_dtype_where_some_multiplication_order_overflows():
    # 1e19 * 1e19 * 100 = 1e40 overflows float32 (max 3.4e38), though the product 1e35 does not.
    x = [1e19, 1e19, 1e-5, 100.0]
    with np.errstate(over="ignore"):
        assert ref("prod", [x], dtype=np.float32, dim=0, keepdim=False)[0] == INF
        assert ref("prod", [[1e19, -1e19, 1e-5, 100.0]], dtype=np.float32, dim=0, keepdim=False)[0] == -INF
    assert_allclose(ref("prod", [x], dim=0, keepdim=False), [1e35], rtol=1e-6)  # float32 inputs, float64 math


def test_var_of_1_2_3_4_is_5_thirds_unbiased_and_5_quarters_biased():
    x = [1.0, 2.0, 3.0, 4.0]  # deviations from 2.5: squares sum to 2.25 + 0.25 + 0.25 + 2.25 = 5
    assert_allclose(ref("var", [x], dims=[0], keepdim=False, correction=1), [5 / 3], rtol=1e-15)
    assert_allclose(ref("var", [x], dims=[0], keepdim=False, correction=0), [5 / 4], rtol=1e-15)
    assert_allclose(ref("std", [x], dims=[0], keepdim=False, correction=1), [math.sqrt(5 / 3)], rtol=1e-15)
    assert_allclose(ref("std", [x], dims=[0], keepdim=False, correction=0), [math.sqrt(5 / 4)], rtol=1e-15)


def test_var_pools_every_reduced_dim():
    x = [[1.0, 2.0], [3.0, 4.0]]
    assert_allclose(ref("var", [x], dims=[0, 1], keepdim=True, correction=1), [[5 / 3]], rtol=1e-15)
    assert_allclose(ref("var", [x], dims=[1], keepdim=False, correction=0), [0.25, 0.25], rtol=1e-15)


def test_the_variance_of_a_constant_row_is_exactly_zero_and_an_overflowing_shift_keeps_the_plain_one():
    # The mean of 12 copies of -0.02404618 is not that value in float64: unshifted, std is 3.5e-18.
    x = [[-0.02404618] * 6, [-0.02404618] * 6, [1.5, 2.5, 1.5, 2.5, 1.5, 2.5]]
    assert ref("std", [x], dims=[1], keepdim=False, correction=0)[:2].tolist() == [0.0, 0.0]
    assert ref("std", [x], dims=[1], keepdim=False, correction=0)[2] == 0.5
    assert ref("var", [[1e308, -1e308, 0.0]], dims=[0], keepdim=False, correction=0)[0] == INF  # as np.var


def test_unbiased_variance_of_one_value_is_refused():
    with pytest.raises(ShapeError, match="more than one value"):
        infer("var", [(3, 1)], dims=[1], keepdim=False, correction=1)


def test_logsumexp_of_0_and_log_3_is_log_4():
    assert_allclose(ref("logsumexp", [[0.0, math.log(3.0)]], dims=[0], keepdim=False), [math.log(4.0)], rtol=1e-15)


def test_logsumexp_does_not_overflow_and_follows_torch_on_infinities():
    x = [[1000.0, 1000.0], [-INF, -INF], [INF, 0.0]]
    with np.errstate(divide="ignore"):  # log(0) for the all -inf row
        out = ref("logsumexp", [x], dims=[1], keepdim=False)
    assert_allclose(out, [1000.0 + math.log(2.0), -INF, INF], rtol=1e-15)


def test_norm_orders_by_hand():
    x = [3.0, -4.0]
    assert ref("norm", [x], dims=[0], keepdim=False, p=1)[0] == 7.0
    assert ref("norm", [x], dims=[0], keepdim=False, p=2)[0] == 5.0
    assert ref("norm", [x], dims=[0], keepdim=False, p="inf")[0] == 4.0


def test_norm_over_two_dims_is_the_vector_norm_not_a_matrix_norm():
    # The spectral norm of this rank-1 matrix is also 5; the max-abs-row-sum (matrix inf norm) is 6.
    x = [[1.0, 2.0], [2.0, 4.0]]
    assert_allclose(ref("norm", [x], dims=[0, 1], keepdim=False, p=2), [5.0], rtol=1e-15)
    assert ref("norm", [x], dims=[0, 1], keepdim=False, p="inf")[0] == 4.0
    assert ref("norm", [x], dims=[0, 1], keepdim=False, p=1)[0] == 9.0


def test_norm_refuses_an_unknown_order():
    with pytest.raises(ShapeError, match="p must be one of"):
        infer("norm", [(3,)], dims=[0], keepdim=False, p=3)


# -- argmax / argmin -------------------------------------------------------------------


def test_argmax_and_argmin_ties_give_the_first_index():
    assert_array_equal(ref("argmax", [[1.0, 3.0, 3.0, 0.0]], dim=0, keepdim=False), [1.0])
    assert_array_equal(ref("argmin", [[2.0, 0.0, 0.0]], dim=0, keepdim=False), [1.0])
    assert_array_equal(ref("argmax", [[[5.0, 5.0], [5.0, 5.0]]], dim=1, keepdim=True), [[0.0], [0.0]])


def test_argmax_returns_indices_in_the_input_dtype():
    out = ref("argmax", [[[0.0, 1.0], [3.0, 2.0]]], dtype=np.float32, dim=0, keepdim=False)
    assert out.dtype == np.float32
    assert_array_equal(out, [1.0, 1.0])
    assert get_op("argmax").numerics.exact and get_op("argmin").numerics.exact


# -- cumsum ------------------------------------------------------------------------------


def test_cumsum_is_an_inclusive_scan_along_dim():
    x = [[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]]
    assert_array_equal(ref("cumsum", [x], dim=1), [[1.0, 3.0, 6.0], [10.0, 30.0, 60.0]])
    assert_array_equal(ref("cumsum", [x], dim=-2), [[1.0, 2.0, 3.0], [11.0, 22.0, 33.0]])


# -- the variance's declared error ---------------------------------------------------------


def welford_float32(values):
    """Welford's updating variance (population), every step rounded to float32: how a GPU
    reduction computes a variance in one pass."""
    mean, m2 = np.float32(0.0), np.float32(0.0)
    for count, value in enumerate(np.asarray(values, dtype=np.float32), start=1):
        delta = value - mean
        mean = np.float32(mean + delta / np.float32(count))
        m2 = np.float32(m2 + delta * (value - mean))
    return float(m2) / len(values)


def test_variance_forward_error_covers_a_float32_welford_on_near_equal_values():
    rng = np.random.default_rng(7)
    x = np.asarray(1000.0 + 1e-3 * rng.standard_normal(64), dtype=np.float32).astype(np.float64)
    exact = float(np.var(x))
    error = abs(welford_float32(x) - exact)
    roundoff = ROUNDING_SLACK * UNIT_ROUNDOFF["float32"]
    attrs = dict(dims=[0], keepdim=False, correction=0)
    # Without a declared error the rounding model moves var by a few roundoffs of var: far too little.
    assert error > 10 * roundoff * exact
    assert error <= roundoff * get_op("var").numerics.forward_error([x], {}, attrs)[0]
    std_error = abs(math.sqrt(welford_float32(x)) - math.sqrt(exact))
    assert std_error <= roundoff * get_op("std").numerics.forward_error([x], {}, attrs)[0]


# -- bmm / addmm / baddbmm ----------------------------------------------------------------

A = [[1.0, 2.0], [3.0, 4.0]]
B = [[5.0, 6.0], [7.0, 8.0]]
A_TIMES_B = [[1 * 5 + 2 * 7, 1 * 6 + 2 * 8], [3 * 5 + 4 * 7, 3 * 6 + 4 * 8]]  # [[19, 22], [43, 50]]


def test_bmm_multiplies_each_batch_entry():
    identity = [[1.0, 0.0], [0.0, 1.0]]
    out = ref("bmm", [[A, identity], [B, A]])
    assert_array_equal(out, [A_TIMES_B, A])


def test_addmm_is_beta_input_plus_alpha_product():
    added = [[1.0, -1.0], [0.0, 2.0]]
    out = ref("addmm", [added, A, B], alpha=2.0, beta=0.5)
    expected = [[0.5 * added[i][j] + 2.0 * A_TIMES_B[i][j] for j in range(2)] for i in range(2)]
    assert_array_equal(out, expected)


def test_addmm_broadcasts_a_row_input():
    out = ref("addmm", [[10.0, 20.0], A, B], alpha=1.0, beta=-1.0)
    assert_array_equal(out, [[19 - 10, 22 - 20], [43 - 10, 50 - 20]])
    assert infer("addmm", [(2,), (3, 4), (4, 2)], alpha=1.0, beta=1.0) == (3, 2)


def test_addmm_with_beta_0_ignores_nan_and_inf_in_the_input():
    out = ref("addmm", [[[math.nan, INF], [-INF, 0.0]], A, B], alpha=1.0, beta=0.0)
    assert_array_equal(out, A_TIMES_B)


def test_addmm_refuses_an_input_that_does_not_broadcast():
    with pytest.raises(ShapeError, match="does not broadcast"):
        infer("addmm", [(3,), (2, 4), (4, 2)], alpha=1.0, beta=1.0)


def test_baddbmm_adds_a_broadcast_matrix_to_every_batch_entry():
    added = [[1.0, 1.0], [1.0, 1.0]]
    identity = [[1.0, 0.0], [0.0, 1.0]]
    out = ref("baddbmm", [added, [A, identity], [B, B]], alpha=-1.0, beta=2.0)
    expected_0 = [[2.0 - A_TIMES_B[i][j] for j in range(2)] for i in range(2)]
    expected_1 = [[2.0 - B[i][j] for j in range(2)] for i in range(2)]
    assert_array_equal(out, [expected_0, expected_1])


def test_scaled_product_error_is_the_magnitude_of_both_terms_whatever_their_signs():
    # beta * input and alpha * product cancel exactly here; rounding is still relative to 2 + 2.
    bound = get_op("addmm").numerics.forward_error([np.array([[2.0]]), np.array([[1.0]]), np.array([[2.0]])], {}, dict(alpha=-1.0, beta=1.0))
    assert_array_equal(bound, [[4.0]])


# -- einsum ------------------------------------------------------------------------------


def test_einsum_two_dim_equations_by_hand():
    assert_array_equal(ref("einsum", [A], equation="ij->ji"), [[1.0, 3.0], [2.0, 4.0]])
    assert_array_equal(ref("einsum", [A], equation="ii->i"), [1.0, 4.0])
    assert_array_equal(ref("einsum", [A, [1.0, -1.0]], equation="ij,j->i"), [1 - 2, 3 - 4])
    assert_array_equal(ref("einsum", [[1.0, 2.0], [3.0, 4.0, 5.0]], equation="i,j->ij"), [[3, 4, 5], [6, 8, 10]])
    assert_array_equal(ref("einsum", [A, B], equation="bi,bi->b"), [1 * 5 + 2 * 6, 3 * 7 + 4 * 8])


def test_einsum_batched_products_match_naive_loops():
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4))  # (b, q, d), (b, k, d)
    naive = [[[sum(x[b, q, d] * y[b, k, d] for d in range(4)) for k in range(5)] for q in range(3)] for b in range(2)]
    out = ref("einsum", [x[None], y[None]], equation="bhqd,bhkd->bhqk")
    assert_allclose(out[0], naive, rtol=1e-13)
    z = rng.standard_normal((2, 4, 3))  # (b, j, k)
    naive = [[[sum(x[b, i, j] * z[b, j, k] for j in range(4)) for k in range(3)] for i in range(3)] for b in range(2)]
    assert_allclose(ref("einsum", [x, z], equation="bij,bjk->bik"), naive, rtol=1e-13)
    assert_allclose(ref("einsum", [x, z[0]], equation="bij,jk->bik"), [np.array(x[b]) @ z[0] for b in range(2)], rtol=1e-13)


def test_einsum_shape_rule_names_the_conflicting_letter():
    assert infer("einsum", [(2, 3, 4), (2, 4, 5)], equation="bij,bjk->bik") == (2, 3, 5)
    with pytest.raises(ShapeError, match="dim 'j'"):
        infer("einsum", [(2, 3, 4), (2, 5, 5)], equation="bij,bjk->bik")
    with pytest.raises(ShapeError, match="is not one of"):
        infer("einsum", [(2, 3)], equation="ij->i")


def einsum_equations(shape):
    op = get_op("einsum")
    return st.composite(lambda draw: op.draw_attrs(draw, [shape])["equation"])()


def test_einsum_draws_the_diagonal_only_for_square_first_operands():
    assert find(einsum_equations((3, 3)), lambda equation: equation == "ii->i")
    with pytest.raises(NoSuchExample):
        find(einsum_equations((2, 3)), lambda equation: equation == "ii->i")
    assert not get_op("einsum").accepts((2, 3, 4, 5, 6))


# -- scaled_dot_product_attention --------------------------------------------------------


def softmax_row(scores):
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    return [w / sum(weights) for w in weights]


def attend(weights, values):
    return [sum(w * v[j] for w, v in zip(weights, values)) for j in range(len(values[0]))]


Q = [[1.0, 0.0], [0.0, 1.0]]
K = [[1.0, 0.0], [0.0, 1.0]]
V = [[1.0, 2.0], [3.0, 4.0]]


def test_2x2_causal_attention_by_hand():
    # scale 1/sqrt(2); query 0 sees key 0 only, query 1 sees scores (0, 1/sqrt 2).
    row_1 = attend(softmax_row([0.0, 1 / math.sqrt(2.0)]), V)
    out = ref("scaled_dot_product_attention", [Q, K, V], causal=True, scale=None, mask=False)
    assert_allclose(out, [V[0], row_1], rtol=1e-14)


def test_attention_with_an_explicit_scale_and_additive_mask():
    mask = [[0.0, 1.0], [-1.0, 0.0]]
    scale = 2.0
    scores = [[scale * (Q[i][0] * K[j][0] + Q[i][1] * K[j][1]) + mask[i][j] for j in range(2)] for i in range(2)]
    rows = [attend(softmax_row(scores[i]), V) for i in range(2)]
    out = ref("scaled_dot_product_attention", [Q, K, V, mask], causal=False, scale=scale, mask=True)
    assert_allclose(out, rows, rtol=1e-14)


def test_causal_mask_is_aligned_at_the_upper_left_corner_when_lengths_differ():
    keys = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    values = [[1.0], [2.0], [4.0]]
    one_query = ref("scaled_dot_product_attention", [[[0.5, -0.5]], keys, values], causal=True, scale=None, mask=False)
    assert_allclose(one_query, [[1.0]], rtol=1e-15)  # query 0 sees key 0 only
    three_queries = ref("scaled_dot_product_attention", [keys, [[1.0, 0.0]], [[7.0]]], causal=True, scale=None, mask=False)
    assert_allclose(three_queries, [[7.0]] * 3, rtol=1e-15)  # every query sees the one key


def test_a_fully_masked_row_attends_to_nothing_and_gives_zero():
    mask = [[-INF, -INF], [0.0, -INF]]
    out = ref("scaled_dot_product_attention", [Q, K, V, mask], causal=False, scale=None, mask=True)
    assert_array_equal(out, [[0.0, 0.0], V[0]])


def test_attention_shape_rule():
    shapes = [(2, 3, 4), (2, 5, 4), (2, 5, 7), (3, 1)]
    assert infer("scaled_dot_product_attention", shapes, causal=False, scale=None, mask=True) == (2, 3, 7)
    with pytest.raises(ShapeError, match="causal attention takes no mask"):
        infer("scaled_dot_product_attention", [(3, 4), (5, 4), (5, 7), (3, 5)], causal=True, scale=None, mask=True)
    with pytest.raises(ShapeError, match="does not broadcast"):
        infer("scaled_dot_product_attention", [(3, 4), (5, 4), (5, 7), (5, 3)], causal=False, scale=None, mask=True)


# -- normalization -------------------------------------------------------------------------


def test_group_norm_of_a_1x4x1_input_in_2_groups():
    # groups (1, 3): mean 2, var 1; (2, 6): mean 4, var 4.
    x = [[[1.0], [3.0], [2.0], [6.0]]]
    s1, s2 = math.sqrt(1 + EPS), math.sqrt(4 + EPS)
    out = ref("group_norm", [x], num_groups=2, affine=False, eps=EPS)
    assert_allclose(out, [[[-1 / s1], [1 / s1], [-2 / s2], [2 / s2]]], rtol=1e-14)


def test_group_norm_pools_channels_and_positions_of_a_group_then_applies_per_channel_affine():
    x = [[[1.0, 3.0], [5.0, 7.0]]]  # one group: mean 4, var (9 + 1 + 1 + 9) / 4 = 5
    weight, bias = [2.0, -1.0], [0.5, 0.0]
    s = math.sqrt(5 + EPS)
    expected = [[[2 * -3 / s + 0.5, 2 * -1 / s + 0.5], [-1 / s, -3 / s]]]
    out = ref("group_norm", [x], {"weight": weight, "bias": bias}, num_groups=1, affine=True, eps=EPS)
    assert_allclose(out, expected, rtol=1e-14)


def test_group_norm_refuses_groups_that_do_not_divide_the_channels():
    with pytest.raises(ShapeError, match="does not divide"):
        infer("group_norm", [(2, 6, 3)], num_groups=4, affine=False, eps=EPS)


def test_instance_norm_normalizes_each_channel_of_each_sample_on_its_own():
    x = [[[1.0, 2.0, 3.0], [10.0, 10.0, 16.0]]]  # channel means 2 and 12, variances 2/3 and 8
    s1, s2 = math.sqrt(2 / 3 + EPS), math.sqrt(8 + EPS)
    expected = [[[-1 / s1, 0.0, 1 / s1], [-2 / s2, -2 / s2, 4 / s2]]]
    assert_allclose(ref("instance_norm", [x], affine=False, eps=EPS), expected, rtol=1e-14)
    out = ref("instance_norm", [x], {"weight": [3.0, 1.0], "bias": [0.0, 1.0]}, affine=True, eps=EPS)
    assert_allclose(out, [[[-3 / s1, 0.0, 3 / s1], [1 - 2 / s2, 1 - 2 / s2, 1 + 4 / s2]]], rtol=1e-14)


def test_instance_norm_needs_more_than_one_position():
    assert not get_op("instance_norm").accepts((2, 3, 1))
    assert get_op("instance_norm").accepts((2, 3, 2))


def test_rms_norm_divides_by_the_root_mean_square_and_subtracts_nothing():
    s = math.sqrt((9 + 16) / 2 + EPS)
    assert_allclose(ref("rms_norm", [[3.0, 4.0]], normalized_shape=[2], affine=False, eps=EPS), [3 / s, 4 / s], rtol=1e-15)
    out = ref("rms_norm", [[3.0, 4.0]], {"weight": [2.0, -1.0]}, normalized_shape=[2], affine=True, eps=EPS)
    assert_allclose(out, [6 / s, -4 / s], rtol=1e-15)


def test_rms_norm_over_two_dims_pools_both():
    x = [[1.0, 1.0], [1.0, 5.0]]  # mean square (1 + 1 + 1 + 25) / 4 = 7
    s = math.sqrt(7 + 0.1)
    assert_allclose(ref("rms_norm", [x], normalized_shape=[2, 2], affine=False, eps=0.1), [[1 / s, 1 / s], [1 / s, 5 / s]], rtol=1e-15)


def lrn_by_hand(channels, size, alpha, beta, k):
    """A loop over channels; the window of c is c - size // 2 .. c + (size - 1) // 2, clipped."""
    out = []
    for c, a in enumerate(channels):
        window = range(c - size // 2, c + (size - 1) // 2 + 1)
        total = sum(channels[j] ** 2 for j in window if 0 <= j < len(channels))
        out.append(a / (k + alpha / size * total) ** beta)
    return out


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_local_response_norm_matches_a_loop_over_channels(size):
    channels = [1.0, 2.0, 3.0, -1.0]
    x = [[[c] for c in channels]]  # (N, C, L) = (1, 4, 1)
    out = ref("local_response_norm", [x], size=size, alpha=0.5, beta=0.75, k=2.0)
    assert_allclose(out[0, :, 0], lrn_by_hand(channels, size, 0.5, 0.75, 2.0), rtol=1e-14)


def test_local_response_norm_size_3_by_hand():
    # windows: c0 {0, 1} -> 1 + 4 = 5; c1 {0, 1, 2} -> 14; c2 {1, 2} -> 13 (channels beyond the ends are 0).
    out = ref("local_response_norm", [[[[1.0], [2.0], [3.0]]]], size=3, alpha=3.0, beta=1.0, k=1.0)
    assert_allclose(out[0, :, 0], [1 / 6, 2 / 15, 3 / 14], rtol=1e-14)


NORMALIZATIONS_WITH_EPS = [("layer_norm", (2, 3)), ("batch_norm", (2, 3)), ("group_norm", (2, 4, 3)), ("instance_norm", (2, 2, 3)), ("rms_norm", (2, 3))]


@pytest.mark.parametrize("name, shape", NORMALIZATIONS_WITH_EPS)
@pytest.mark.parametrize("eps", [1e-12, 0.1])
def test_eps_is_drawn_beyond_the_default(name, shape, eps):
    op = get_op(name)
    attrs = find(st.composite(lambda draw: op.draw_attrs(draw, [shape]))(), lambda a: a["eps"] == eps)
    assert attrs["eps"] in EPS_CHOICES


def naive_group_norm_float32(x, groups, eps):
    """Sequential float32 sums (no pairwise trick), two passes: an honest float32 group_norm."""
    x = np.asarray(x, dtype=np.float32)
    rows = x.reshape(x.shape[0], groups, -1)
    out = np.empty_like(rows)
    for n in range(rows.shape[0]):
        for g in range(groups):
            row = rows[n, g]
            total = np.float32(0.0)
            for value in row:
                total = np.float32(total + value)
            mean = np.float32(total / np.float32(row.size))
            var = np.float32(np.mean((row - mean) ** 2, dtype=np.float32))
            out[n, g] = (row - mean) / np.sqrt(var + np.float32(eps))
    return out.reshape(x.shape).astype(np.float64)


def test_group_norm_forward_error_covers_a_float32_implementation_on_near_constant_groups():
    rng = np.random.default_rng(11)
    x = np.asarray(3.0 + 1e-6 * rng.standard_normal((2, 4, 9)), dtype=np.float32).astype(np.float64)
    attrs = dict(num_groups=2, affine=False, eps=1e-12)
    error = np.abs(naive_group_norm_float32(x, 2, 1e-12) - ref("group_norm", [x], **attrs))
    bound = ROUNDING_SLACK * UNIT_ROUNDOFF["float32"] * get_op("group_norm").numerics.forward_error([x], {}, attrs)
    assert np.max(error) > 0.01  # the result is mostly rounding here
    assert np.all(error <= bound)
