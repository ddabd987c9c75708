"""Oracle gaps that produced false findings (issue 31), each from a stored case of the GPU
campaign's corpus, with the output its backend gave there; each is paired with a planted error in
the same op that must still fail.
"""

from dataclasses import replace

import numpy as np
import torch

from fuzzer import oracle, verdicts
from fuzzer.backends import get_backend
from fuzzer.ir import Case, Graph, Node, TensorSpec
from fuzzer.judging.check import check_case
from fuzzer.judging.reference import evaluate_all
from fuzzer.ops import get_op
from fuzzer.running.execute import run_backend
from test_oracle_undefined import chain, judged


BILINEAR = {"align_corners": False, "mode": "bilinear", "scale_factor": None}


def test_a_nonfinite_neighbour_of_weight_zero_is_a_convention_of_bilinear():
    # torch-eager:cpu:float32, case 151: [0, nan] resized to [7, 2] keeps the width, so column 0
    # reads the nan with weight 0: torch copies (0.0), the weighted sum gives 0 * nan = nan.
    case = Case(chain((1, 1, 1, 2), ("interpolate", {**BILINEAR, "size": [7, 2]})), {"x0": np.array([0.0, np.nan]).reshape(1, 1, 1, 2)}, seed=1)
    torch_output = get_backend("torch-eager:cpu:float32").run(case)
    assert np.all(torch_output[0][..., 0] == 0.0) and np.all(np.isnan(torch_output[0][..., 1]))
    assert judged(case, "float32", torch_output) == verdicts.AGREE
    # The nan of column 1 has weight 1: required. A kernel that drops it is wrong.
    dropped = np.zeros((1, 1, 7, 2))
    assert judged(case, "float32", [dropped]) == verdicts.NAN_INF


def test_an_infinite_neighbour_is_a_convention_of_bilinear_but_its_finite_neighbours_are_not():
    # jax-jit:cpu:float32 case 365 gave -inf where the weighted sum is 0 * -inf = nan; torch-compile:cuda
    # case 367 gave nan where it is -inf (a lerp, -inf + 0 * (0 - -inf)).
    attrs = {**BILINEAR, "size": None, "scale_factor": [3.0, 1.5]}
    case = Case(chain((1, 1, 2, 2), ("interpolate", attrs)), {"x0": np.array([0.0, 0.0, -np.inf, 0.0]).reshape(1, 1, 2, 2)}, seed=1)
    jit_output = get_backend("jax-jit:cpu:float32").run(case)
    assert judged(case, "float32", jit_output) == verdicts.AGREE
    lerp = Case(chain((1, 1, 1, 2), ("interpolate", attrs)), {"x0": np.array([-np.inf, 0.0]).reshape(1, 1, 1, 2)}, seed=1)
    compiled = np.array([[np.nan, np.nan, 0.0]] * 3).reshape(1, 1, 3, 3)
    assert judged(lerp, "float32", [compiled]) == verdicts.AGREE
    # Planted: the entries that read no non-finite neighbour (0 here) given wrong.
    wrong = compiled.copy()
    wrong[..., 2] = 1.0
    assert judged(lerp, "float32", [wrong]) == verdicts.MISMATCH


def test_a_value_rounded_onto_an_integer_makes_a_negative_power_undefined():
    # torch-eager:cpu:float32, case 207: tanh(-9.2358) is -0.99999998 in float64 and -1 in float32, so
    # pow(t, t) is -1 there and nan in float64 (a negative base to a non-integer power).
    graph = Graph([TensorSpec("x0", (1, 1))], [Node("n0", "tanh", ["x0"], {}), Node("n1", "pow", ["n0", "n0"], {})], ["n1"])
    case = Case(graph, {"x0": np.array([[-9.235797882080078]])}, seed=1)
    torch_output = get_backend("torch-eager:cpu:float32").run(case)
    assert torch_output[0][0, 0] == -1.0
    assert judged(case, "float32", torch_output) in (verdicts.AGREE, verdicts.INVALID)
    # In float64 -0.99999998 is 2e-8 from -1, far beyond rounding: the nan is required there.
    assert judged(case, "float64", [np.array([[-1.0]])]) == verdicts.NAN_INF
    # Planted: an exponent that is really not an integer (tanh(-0.5) = -0.46), given finite.
    genuine = Case(graph, {"x0": np.array([[-0.5]])}, seed=1)
    assert np.isnan(oracle.compute_reference(genuine, {"float32"}).outputs[0][0, 0])
    assert judged(genuine, "float32", [np.array([[1.0]])]) == verdicts.NAN_INF


def test_a_product_whose_partial_products_overflow_is_the_product_itself(monkeypatch):
    # np.prod of [1e200, 1e200, 1e-200, 1e-200] is inf; the product is 1. The reference said inf, and
    # only the longdouble run (oracle.models.float64_overflow) kept that from being required: where
    # longdouble is float64 (arm64 macOS, Windows) a kernel in an order that does not overflow
    # (XLA's pairwise reduction) was a nan-inf.
    monkeypatch.setattr(oracle.models, "float64_overflow", lambda graph, inputs, params, outputs: [np.zeros(np.shape(o), dtype=bool) for o in outputs])
    op = get_op("prod")
    attrs = {"dim": 1, "keepdim": False}
    factors = np.array([[1e200, 1e200, 1e-200, 1e-200], [2.0, 3.0, -4.0, 0.5]])
    assert op.reference([factors], {}, attrs).tolist() == [1.0, -12.0]
    # An honest kernel's order decides between inf and 1 there: undefined; the plain row is defined.
    assert op.numerics.undefined([factors], {}, attrs).tolist() == [True, False]
    # The whole product underflows: 0, not inf.
    assert op.reference([np.array([[1e200, 1e200, 1e-300, 1e-300, 1e-300]])], {}, attrs).tolist() == [0.0]
    case = Case(chain((2, 4), ("prod", attrs)), {"x0": factors}, seed=1)
    for first in (1.0, np.inf):  # the orders that do not overflow and those that do
        assert judged(case, "float64", [np.array([first, -12.0])]) == verdicts.AGREE
    # Planted: the plain row overflowing.
    assert judged(case, "float64", [np.array([1.0, -np.inf])]) == verdicts.NAN_INF


def test_a_bfloat16_input_rounding_onto_minus_one_makes_log1p_undefined():
    # bfloat16 rounds -0.999 to -1, where log1p is -inf; the float64 reference is -6.9.
    case = Case(chain((1, 2), ("log1p", {})), {"x0": np.array([[-0.999, 0.5]])}, seed=1)
    assert judged(case, "bfloat16", [np.array([[-np.inf, np.log1p(0.5)]])]) == verdicts.AGREE
    # Planted: -inf at an input bfloat16 keeps well away from -1.
    planted = Case(chain((1, 2), ("log1p", {})), {"x0": np.array([[-0.5, 0.5]])}, seed=1)
    assert judged(planted, "bfloat16", [np.array([[-np.inf, np.log1p(0.5)]])]) == verdicts.NAN_INF


def test_a_normalized_constant_row_may_be_off_by_its_forward_error_but_not_by_more():
    # torch-eager:cpu:float32, case 134 of the 1-hour CPU campaign: instance_norm (eps 1e-12) of a
    # constant row is 0 exactly, yet the float32 mean's last bit over sqrt(var + eps) ~ 2e-6 gives
    # -0.052: the forward error of normalizing near-constant data, which both runs once zeroed.
    case = Case(chain((1, 1, 1, 2), ("instance_norm", {"affine": False, "eps": 1e-12})),
                {"x0": np.full((1, 1, 1, 2), np.float32(1.1367198), dtype=np.float64)}, seed=1)
    torch_output = get_backend("torch-eager:cpu:float32").run(case)
    assert np.abs(torch_output[0]).max() > 0.01
    assert judged(case, "float32", torch_output) == verdicts.AGREE
    assert judged(case, "float32", [np.full((1, 1, 1, 2), 50.0)]) == verdicts.MISMATCH


def test_hardswish_may_overflow_where_x_times_six_does_in_its_dtype():
    # torch-eager:cpu:float32, case 384 of the 1-hour CPU campaign: hardswish(2.03e38) multiplies
    # x by relu6(x + 3) = 6 first, past float32's largest value: inf, as the same-dtype run now shows.
    case = Case(chain((2,), ("hardswish", {})), {"x0": np.array([np.float32(2.029716e38), 1.0])}, seed=1)
    torch_output = get_backend("torch-eager:cpu:float32").run(case)
    assert np.isinf(torch_output[0][0])
    assert judged(case, "float32", torch_output) == verdicts.AGREE
    # Below a sixth of float32's largest value x * 6 is finite: an inf there is still a finding.
    below = Case(chain((1,), ("hardswish", {})), {"x0": np.array([np.float32(5e37)], dtype=np.float64)}, seed=1)
    assert judged(below, "float32", [np.array([np.inf])]) == verdicts.NAN_INF


def test_log1p_of_a_value_a_rounding_moved_onto_its_pole_is_undefined():
    # torch-eager:cpu:float32, case 262 of the 1-hour CPU campaign: tanh(-9.877) is -0.99999999 in
    # float64 (log1p: -18.4) and -1 in float32 (log1p: -inf).
    case = Case(chain((2,), ("tanh", {}), ("log1p", {})), {"x0": np.array([np.float32(-9.877435), 0.5])}, seed=1)
    torch_output = get_backend("torch-eager:cpu:float32").run(case)
    assert np.isneginf(torch_output[0][0])
    assert judged(case, "float32", torch_output) == verdicts.AGREE
    # Only that entry: the other is judged as before, and a tanh far from -1 keeps its finite log1p.
    assert judged(case, "float32", [np.array([-np.inf, 0.0])]) == verdicts.MISMATCH
    far = Case(chain((1,), ("tanh", {}), ("log1p", {})), {"x0": np.array([-2.0])}, seed=1)
    assert judged(far, "float32", [np.array([-np.inf])]) == verdicts.NAN_INF


# Values within rounding of zero or of a pole, from the 1-hour CPU campaign of issue 31.


def test_a_deviation_of_values_a_dtype_rounds_to_equal_is_a_computed_zero():
    # torch-eager:cpu:float32, case 371: layer_norm of two-element rows is +-(1 - 2e-9), which float32
    # rounds to +-1, so the std across rows is 0 there and its log -inf; float64 gives log(2e-10) = -22.
    graph = chain((2, 2), ("layer_norm", {"affine": False, "eps": 1e-6, "normalized_shape": [2]}),
                  ("std", {"correction": 0, "dim": 0, "keepdim": True}), ("log", {}))
    case = Case(graph, {"x0": np.array([[15.7689666748, -18.5880966187], [70.2657699585, 39.5567512512]])}, seed=1)
    assert np.all(np.isfinite(oracle.compute_reference(case, {"float32"}).outputs[0]))
    assert judged(case, "float32", [np.array([[-np.inf, -np.inf]])]) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: three-element rows normalized to different values: their std is ordinary, its log required.
    planted = Case(chain((2, 3), ("layer_norm", {"affine": False, "eps": 1e-6, "normalized_shape": [3]}),
                         ("std", {"correction": 0, "dim": 0, "keepdim": True}), ("log", {})),
                   {"x0": np.array([[1.0, 2.0, 4.0], [1.0, 3.0, 4.0]])}, seed=1)
    assert judged(planted, "float32", [np.full((1, 3), -np.inf)]) == verdicts.NAN_INF


def test_a_product_through_flushed_partial_products_is_a_zero_of_either_sign():
    # jax-eager:cpu:float32, case 368: the product is -1.8e-36, a normal float32, but XLA's order passes
    # through a subnormal partial product, flushed to -0: rsqrt gives -inf where the reference is nan.
    factors = np.array([1.04112402e-07, -2.01898729e-04, 5.01873255e-05, -2.57452996e-03, 1.86812319e-02,
                        1.34463193e-07, -3.59801538e-06, -1.10660565e-08, -6.57532959e03]).reshape(9, 1)
    graph = chain((9, 1), ("prod", {"dim": 0, "keepdim": False}), ("rsqrt", {}))
    case = Case(graph, {"x0": factors}, seed=1)
    jax_output = get_backend("jax-eager:cpu:float32").run(case)
    assert np.isneginf(jax_output[0]) and np.isnan(oracle.compute_reference(case, {"float32"}).outputs[0])
    assert judged(case, "float32", jax_output) in (verdicts.AGREE, verdicts.INVALID)
    assert judged(case, "float32", [np.array([np.inf])]) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: factors whose partial products stay normal in any order: the nan of a negative is required.
    planted = Case(graph, {"x0": np.array([-2.0, 3.0, 0.5, 1e-3, 7.0, 1.0, 1.0, 1.0, 1.0]).reshape(9, 1)}, seed=1)
    assert judged(planted, "float32", [np.array([-np.inf])]) == verdicts.NAN_INF


def attention_case(mask_row, values):
    """q, k of zeros (every score 0) plus the additive mask `mask_row`, over `values` (one column)."""
    size = len(mask_row)
    graph = chain((1, 1, 2), ("scaled_dot_product_attention", {"causal": False, "mask": True, "scale": 0.125}, ["x1", "x2", "x3"]),
                  extra_inputs=[("x1", (1, size, 2)), ("x2", (1, size, 1)), ("x3", (1, size))])
    arrays = {"x0": np.zeros((1, 1, 2)), "x1": np.zeros((1, size, 2)), "x2": np.array(values, dtype=np.float64).reshape(1, size, 1),
              "x3": np.array([mask_row], dtype=np.float64)}
    return Case(graph, arrays, seed=1)


def test_a_subnormal_attention_weight_flushed_to_zero_may_make_an_infinite_value_nan():
    # jax-eager:cpu:float32, case 352: the weight exp(-88.72) is subnormal in float32; XLA flushes it
    # to 0, and 0 * -inf is nan where the reference is -inf.
    case = attention_case([np.float32(88.72), 0.0], [0.0, -np.inf])
    jax_output = get_backend("jax-eager:cpu:float32").run(case)
    assert np.isnan(jax_output[0]).all() and np.isneginf(oracle.compute_reference(case, {"float32"}).outputs[0]).all()
    assert judged(case, "float32", jax_output) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: a weight of 1/2 on the -inf: -inf is required, in float64 too.
    planted = attention_case([0.0, 0.0], [0.0, -np.inf])
    assert judged(planted, "float32", [np.full((1, 1, 1), np.nan)]) == verdicts.NAN_INF
    assert judged(case, "float64", [np.full((1, 1, 1), np.nan)]) == verdicts.NAN_INF


def test_an_attention_weight_the_normalization_makes_subnormal_may_be_flushed_too():
    # jax-eager:cpu:float32, clean CPU campaign case 42: exp(1.4514 - 88.72) = 1.26e-38 is normal, but
    # divided by the row's total (2) it is subnormal; XLA flushes it to 0, and 0 * inf is nan where the
    # reference is inf.
    case = attention_case([np.float32(88.72), np.float32(1.4514377), np.float32(88.72)], [0.0, np.inf, 0.0])
    jax_output = get_backend("jax-eager:cpu:float32").run(case)
    assert np.isnan(jax_output[0]).all() and np.isposinf(oracle.compute_reference(case, {"float32"}).outputs[0]).all()
    assert judged(case, "float32", jax_output) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: with one key at 88.72 the weight stays normal (1.26e-38): inf is required.
    planted = attention_case([np.float32(88.72), np.float32(1.4514377)], [0.0, np.inf])
    assert judged(planted, "float32", [np.full((1, 1, 1), np.nan)]) == verdicts.NAN_INF


def test_a_normalized_constant_row_is_a_computed_zero_of_either_sign_in_float64_too():
    # torch-eager:cpu:float64, case 343 (case 342 the same in float32 after local_response_norm):
    # instance_norm of a constant row is 0, and -1e-17 in torch (its rounded mean): sqrt gives nan.
    # Each entry is zero within rounding, whatever the rounding runs draw (the seed).
    graph = chain((1, 1, 2, 6), ("instance_norm", {"affine": False, "eps": 1e-3}), ("sqrt", {}))
    constant = {"x0": np.full((1, 1, 2, 6), 0.9149218798)}
    for dtype in ("float64", "float32"):
        torch_output = get_backend(f"torch-eager:cpu:{dtype}").run(Case(graph, constant, seed=1))
        for seed in range(8):
            case = Case(graph, constant, seed=seed)
            assert judged(case, dtype, torch_output) in (verdicts.AGREE, verdicts.INVALID)
            assert judged(case, dtype, [np.full((1, 1, 2, 6), np.nan)]) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: an ordinary row, whose positive normalized entries a sqrt that gives nan gets wrong.
    planted = Case(graph, {"x0": np.arange(12.0).reshape(1, 1, 2, 6)}, seed=1)
    for dtype in ("float64", "float32"):
        assert judged(planted, dtype, [np.full((1, 1, 2, 6), np.nan)]) == verdicts.NAN_INF


def test_equal_softmax_outputs_normalized_to_zero_make_a_reciprocal_undefined():
    # torch-eager:cpu:float32, case 321: softmax of equal values is 1/7 everywhere; layer_norm of that
    # is 9e-17 in float64 (its own rounding) and 0 in float32, whose reciprocal is inf, not 1e16.
    graph = chain((7, 2), ("softmax", {"dim": 0}), ("layer_norm", {"affine": False, "eps": 0.1, "normalized_shape": [7, 2]}),
                  ("reciprocal", {}))
    case = Case(graph, {"x0": np.zeros((7, 2))}, seed=1)
    torch_output = get_backend("torch-eager:cpu:float32").run(case)
    assert judged(case, "float32", torch_output) in (verdicts.AGREE, verdicts.INVALID)
    assert judged(case, "float32", [np.full((7, 2), np.inf)]) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: softmax of distinct values, normalized to ordinary numbers: an inf is wrong.
    planted = Case(graph, {"x0": np.arange(14.0).reshape(7, 2) / 4}, seed=1)
    assert judged(planted, "float32", [np.full((7, 2), np.inf)]) == verdicts.NAN_INF


def test_log_softmax_near_zero_is_a_computed_zero_before_a_negative_power():
    # torch-eager:cpu:float64, case 201: log_softmax's largest entry is log(1 + 4e-17) = -1e-16 in the
    # reference (pow(., -0.0004) is nan) and 0 in torch (log of a sum rounded to 1): pow gives inf.
    graph = chain((1, 5), ("log_softmax", {"dim": -1}), ("pow", {}, ["x1"]), extra_inputs=[("x1", (1,))])
    case = Case(graph, {"x0": np.array([[0.0, 0.0, 0.0, 0.0, 38.0137901306]]), "x1": np.array([-0.0003733404])}, seed=1)
    assert np.isnan(oracle.compute_reference(case, {"float64"}).outputs[0][0, 4])
    # torch's own run, whose sum rounds to 1 or not by its order of summation (its thread count), and inf there.
    torch_output = get_backend("torch-eager:cpu:float64").run(case)
    assert judged(case, "float64", torch_output) == verdicts.AGREE
    inf_at_zero = torch_output[0].copy()
    inf_at_zero[0, 4] = np.inf
    assert judged(case, "float64", [inf_at_zero]) == verdicts.AGREE
    # The other entries are -38, whose nan is required; and a largest entry of -0.6 is no zero.
    assert judged(case, "float64", [np.full((1, 5), np.inf)]) == verdicts.NAN_INF
    planted = Case(graph, {"x0": np.array([[0.0, 0.0, 0.0, 0.0, 1.0]]), "x1": np.array([-0.0003733404])}, seed=1)
    assert judged(planted, "float64", [np.array([[np.nan] * 4 + [np.inf]])]) == verdicts.NAN_INF


def test_a_float16_result_within_rounding_of_the_largest_value_may_overflow():
    # torch-eager:cuda:float16, GPU case 285: a product of 65,519.8 in float64 is inf in float16 (one
    # operand, itself computed, rounded up by 3e-4); the same-dtype run rounded it down to 65,504.
    graph = Graph([TensorSpec("x0", (1, 2)), TensorSpec("x1", (1, 2))],
                  [Node("n0", "mul_scalar", ["x0"], {"value": 0.265625}), Node("n1", "mul", ["n0", "x1"], {})], ["n1"])
    # Here 482 * 0.265625 = 128.03 rounds to 128 (then 128 * 511.75 = 65,504); a kernel off by one unit, 128.125, overflows.
    case = Case(graph, {"x0": np.array([[-482.0, 2.0]]), "x1": np.array([[-511.75, 3.0]])}, seed=3)
    product = oracle.compute_reference(case, {"float16"}).outputs[0][0, 0]
    assert 65504 < product < 65520
    assert judged(case, "float16", [np.array([[np.inf, 1.59375]])]) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: inf where the product is 20% below the largest value.
    far = Case(graph, {"x0": np.array([[-382.0, 2.0]]), "x1": np.array([[-511.75, 3.0]])}, seed=3)
    assert judged(far, "float16", [np.array([[np.inf, 1.59375]])]) == verdicts.NAN_INF


def test_a_kernel_may_flush_one_subnormal_read_and_not_another():
    # jax-eager:cpu:float32, GPU-machine case 323: -inf times a flushed 1.9e-39 is nan, and pow(nan, -8e-39)
    # stays nan (XLA did not flush that exponent), while flushing both gives pow(nan, -0.0) = 1 and the
    # float64 reference is pow(-inf, -8e-39) = 0.
    graph = Graph([TensorSpec("x0", (1, 1, 2)), TensorSpec("x1", (1, 2, 1)), TensorSpec("x3", (1,))],
                  [Node("n0", "matmul", ["x0", "x1"], {}), Node("n1", "pow", ["n0", "x3"], {})], ["n1"])
    arrays = {"x0": np.array([[[-np.inf, 0.0]]]), "x1": np.array([[[1.888974e-39], [0.0]]]), "x3": np.array([-8.275535e-39])}
    case = Case(graph, arrays, seed=5)
    jax_output = get_backend("jax-eager:cpu:float32").run(case)
    assert np.isnan(jax_output[0]).all()
    assert judged(case, "float32", jax_output) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: the same nan where the weight is 1.0 and no read can be flushed into 0 * inf.
    normal = Case(graph, {**arrays, "x1": np.array([[[1.0], [0.0]]])}, seed=5)
    assert judged(normal, "float32", jax_output) == verdicts.NAN_INF


def test_a_float16_kernel_may_compute_inside_in_float32():
    # torch-eager:cuda:float16, GPU-machine case 78: baddbmm(pow(-3, 9534.467), x3, x4) with a product of -1.55e6.
    # The exponent rounds to 9536 in float16, so the input is +inf; numpy's float16 bmm overflows to -inf and
    # inf + -inf is nan, while a kernel that accumulates in float32 adds inf + -1.55e6 = inf.
    graph = Graph([TensorSpec("x2", (1,)), TensorSpec("x3", (1, 1, 2)), TensorSpec("x4", (1, 2, 1)), TensorSpec("x5", (1, 1))],
                  [Node("n4", "pow", ["x5", "x2"], {}), Node("n7", "baddbmm", ["n4", "x3", "x4"], {"alpha": 1.0, "beta": 1.0})], ["n7"])
    arrays = {"x2": np.array([9534.467]), "x3": np.array([[[-4455.4116, 0.0]]]), "x4": np.array([[[347.66553], [0.0]]]),
              "x5": np.array([[-3.0]])}
    case = Case(graph, arrays, seed=2)
    assert judged(case, "float16", [np.array([[[np.inf]]])]) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: an exponent that is no integer in float16 either (0.5): nan in every model, so inf is wrong.
    genuine = Case(graph, {**arrays, "x2": np.array([0.5])}, seed=2)
    assert judged(genuine, "float16", [np.array([[[np.inf]]])]) == verdicts.NAN_INF


def test_a_source_coordinate_rounded_below_an_integer_reads_the_row_before():
    # jax-jit:cpu:float32 and torch-eager:cuda:float64, GPU-machine cases 380 and 381: [nan, 0] resized x3 by
    # height. Output row 4 has src = 4.5 / 3 - 0.5 = 1 exactly (row 1 alone: 0), but a float32 step 1/3 gives
    # 0.99999994, which reads the nan of row 0 with weight 6e-8.
    attrs = {**BILINEAR, "size": None, "scale_factor": [3.0, 2.0]}
    case = Case(chain((1, 2, 2, 1), ("interpolate", attrs)), {"x0": np.array([0.0, 0.0, np.nan, 0.0]).reshape(1, 2, 2, 1)}, seed=1)
    jit_output = get_backend("jax-jit:cpu:float32").run(case)
    assert np.isnan(jit_output[0][0, 1, 4]).all()
    assert judged(case, "float32", jit_output) == verdicts.AGREE
    # Planted: row 5 (src 1.33, far from any integer) reads row 1 alone; a nan there is wrong.
    wrong = np.array(jit_output[0], dtype=np.float64)
    wrong[0, 1, 5] = np.nan
    assert judged(case, "float32", [wrong]) == verdicts.NAN_INF


def test_an_infinite_factor_times_a_flushed_partial_product_is_nan_in_some_order():
    # jax-eager:cpu:float32, GPU-machine case 250: -inf among 65 factors of magnitude 0.02..0.7, whose
    # product is far below float32's smallest normal: XLA's order flushed it to 0 first (0 * -inf = nan)
    # where numpy's float32 order multiplies -inf in first and stays -inf.
    graph = Graph([TensorSpec("x0", (65,))], [Node("n0", "prod", ["x0"], {"dim": 0, "keepdim": False})], ["n0"])
    case = Case(graph, {"x0": np.array([-np.inf] + [0.1] * 64)}, seed=4)
    assert judged(case, "float32", [np.array([np.nan])]) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: three factors whose product stays normal: -inf is the only answer.
    short = Case(Graph([TensorSpec("x0", (3,))], graph.nodes, ["n0"]), {"x0": np.array([-np.inf, 0.5, 0.5])}, seed=4)
    assert judged(short, "float32", [np.array([np.nan])]) == verdicts.NAN_INF


def test_a_class_decided_by_one_rounding_is_reached_whatever_the_draws():
    # torch-eager:cuda:bfloat16, GPU-machine case 172: exp(linear) where the linear's terms are +-4.1e17 and
    # cancel to -2e14: bfloat16 inputs cancel them exactly and leave 65,504, so exp is inf; the float64 exp is 0.
    # numpy's order loses the 65,504 (exp 1), and the random runs snapped the sum to 0 (exp 1): all finite.
    graph = Graph([TensorSpec("x0", (2, 504))], [Node("n0", "linear", ["x0"], {"bias": False, "out_features": 78}),
                                                 Node("n1", "exp", ["n0"], {})], ["n1"])
    x, w = np.zeros((2, 504)), np.zeros((78, 504))
    x[1, [159, 418, 502]] = [9.999999980506448e18, 9.999999980506448e18, 65504.0]

    def case_with(weights):
        w[77, [159, 418, 502]] = weights
        return Case(graph, {"x0": x, "n0.weight": w.copy()}, seed=1757)

    cuda = np.ones((2, 78))
    cuda[1, 77] = np.inf
    assert judged(case_with([0.04105877876281738, -0.041078463196754456, 1.0]), "bfloat16", [cuda]) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: a sum far beyond its rounding bound's reach (-9e16 against 1.4e16): exp is 0, inf is wrong.
    assert judged(case_with([0.04105877876281738, -0.05, 1.0]), "bfloat16", [cuda]) == verdicts.NAN_INF


def test_the_flush_to_zero_run_starts_from_the_values_the_backend_gets():
    # torch-eager:cuda:bfloat16, GPU-machine case 589: an exponent of 19.055 is 19 in bfloat16, so
    # pow(-0.00757, 19) is -5e-41, a subnormal CUDA flushes to -0, and log gives -inf; in float64 pow is nan.
    graph = Graph([TensorSpec("x0", (1, 1)), TensorSpec("x1", (1, 1))],
                  [Node("n0", "pow", ["x0", "x1"], {}), Node("n1", "log", ["n0"], {})], ["n1"])
    case = Case(graph, {"x0": np.array([[-0.007581591577048607]]), "x1": np.array([[19.05507088]])}, seed=3)
    assert judged(case, "bfloat16", [np.array([[-np.inf]])]) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: an exponent bfloat16 keeps (19.5): pow of a negative base is nan in every model.
    kept = Case(graph, {"x0": np.array([[-0.007581591577048607]]), "x1": np.array([[19.5]])}, seed=3)
    assert judged(kept, "bfloat16", [np.array([[-np.inf]])]) == verdicts.NAN_INF


def test_a_gru_step_whose_update_gate_rounds_to_one_loses_a_small_hidden_state():
    # torch-eager:cpu:float32, 1-hour campaign case 233: h = n + z * (h_prev - n) with z = sigmoid(690) = 1 and
    # h_prev = 1.4e-8: h_prev - n rounds to -1 in float32, so h is 0 and rsqrt(h) inf (float64: 8,497).
    gru = {"batch_first": False, "bias": False, "hidden_size": 1, "initial_state": False, "num_layers": 1}
    graph = Graph([TensorSpec("x0", (2, 1, 1))], [Node("n0", "gru", ["x0"], gru), Node("n1", "rsqrt", ["n0"], {})], ["n1"])
    weights = {"n0.weight_ih_l0": np.array([[0.0], [1.0], [1.0]]), "n0.weight_hh_l0": np.zeros((3, 1))}
    case = Case(graph, {"x0": np.array([2.770327789392013e-08, 690.783935546875]).reshape(2, 1, 1), **weights}, seed=2)
    torch_output = get_backend("torch-eager:cpu:float32").run(case)
    assert np.isinf(torch_output[0][1]).all()
    assert judged(case, "float32", torch_output) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: a hidden state of 0.23 that no rounding loses: inf is wrong there.
    kept = Case(graph, {"x0": np.array([0.5, 690.783935546875]).reshape(2, 1, 1), **weights}, seed=2)
    assert judged(kept, "float32", [np.full((2, 1, 1), np.inf)]) == verdicts.NAN_INF


def test_group_norm_of_a_constant_row_is_its_bias_plus_rounding_noise_of_either_sign():
    # torch-eager:cpu:float32, 1-hour campaign case 73: a row of one value (-17.7) normalized with eps 1e-12
    # is 0 in float64 (the output is the bias, -0.873, and rsqrt nan) but the rounded mean's noise over
    # sqrt(eps) in float32: torch gave 0.011, rsqrt 9.5.
    attrs = {"affine": True, "eps": 1e-12, "num_groups": 1}
    graph = Graph([TensorSpec("x0", (1, 2920))], [Node("n0", "group_norm", ["x0"], attrs), Node("n1", "rsqrt", ["n0"], {})], ["n1"])
    affine = {"n0.weight": np.full(2920, 0.9773693680763245), "n0.bias": np.full(2920, -0.8731250166893005)}
    constant = Case(graph, {"x0": np.full((1, 2920), -17.702173233032227), **affine}, seed=1)
    torch_output = get_backend("torch-eager:cpu:float32").run(constant)
    assert np.isfinite(torch_output[0]).any()
    assert judged(constant, "float32", torch_output) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: rows of +-1 normalize exactly; where x is -1 the output is -1.85 and rsqrt's nan is required.
    spread = Case(graph, {"x0": np.array([[-1.0, 1.0] * 1460]), **affine}, seed=1)
    assert judged(spread, "float32", [np.full((1, 2920), 9.496045112609863)]) == verdicts.NAN_INF


def test_a_sequential_mean_over_many_equal_values_is_off_by_the_count_of_roundoffs():
    # torch-eager:cpu:float64, 1-hour campaign case 326: batch_norm (training, eps 1e-12) of a channel of
    # 2,036 equal values: torch's mean is 150 roundoffs off, amplified by 1 / sqrt(eps) to an error of 8e-8.
    graph = Graph([TensorSpec("x0", (1, 2, 509, 4))], [Node("n0", "batch_norm", ["x0"], {"eps": 1e-12, "training": True})], ["n0"])
    x = np.empty((1, 2, 509, 4))
    x[:, 0], x[:, 1] = 1.7413593864896035, -0.43266239581860355
    case = Case(graph, {"x0": x, "n0.weight": np.array([1.37524867, 1.01452148]), "n0.bias": np.array([0.16167492, -0.03141262]),
                        "n0.running_mean": np.zeros(2), "n0.running_var": np.ones(2)}, seed=5)
    torch_output = get_backend("torch-eager:cpu:float64").run(case)
    assert judged(case, "float64", torch_output) == verdicts.AGREE
    # Planted: the same output off by 1e-4 (a mean 1e-10 off: a million roundoffs).
    assert judged(case, "float64", [torch_output[0] + 1e-4]) == verdicts.MISMATCH


def test_an_undefined_entry_may_be_nan_which_alone_gets_through_a_clamp_above_its_max():
    # jax-eager:cpu:float32, 1-hour campaign case 307: pow_scalar(-inf, 0.5) is +inf in jax (IEEE pow) and
    # nan in numpy's sqrt; clamp(min=1.88, max=0) makes every number 0 and keeps nan: jax 0 and float64 nan.
    graph = Graph([TensorSpec("x0", (1, 2))], [Node("n0", "pow_scalar", ["x0"], {"exponent": 0.5}),
                                               Node("n1", "clamp", ["n0"], {"min": 1.884765625, "max": 0.0})], ["n1"])
    case = Case(graph, {"x0": np.array([[-np.inf, -0.25]])}, seed=6)
    jax_output = get_backend("jax-eager:cpu:float32").run(case)
    assert jax_output[0][0, 0] == 0.0
    assert judged(case, "float32", jax_output) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: the second entry, (-0.25) ** 0.5, is nan in every convention: 0 there is wrong.
    assert judged(case, "float32", [np.zeros((1, 2))]) == verdicts.NAN_INF


def test_the_sign_of_sin_of_a_sum_near_1e18_is_its_rounding():
    # torch-eager:cpu:float32, 1-hour campaign case 154: a sum of values near 1e18 is off by 3e10 in float32,
    # ten billion periods of sin: sin is 0.92 in torch and -0.96 in float64, so log is finite or nan.
    graph = Graph([TensorSpec("x0", (1, 1, 18))], [Node("n0", "sum", ["x0"], {"dim": 2, "keepdim": False}),
                                                   Node("n1", "sin", ["n0"], {}), Node("n2", "log", ["n1"], {})], ["n2"])
    x = np.zeros((1, 1, 18))
    x[0, 0, [4, 6, 15, 16, 17]] = [-1.5782648290329231e18, -1.39592458664149e17, 2.8323383024287744e16,
                                   -1.0104451729719296e17, 2.864852493349683e16]
    case = Case(graph, {"x0": x}, seed=331114499)
    torch_output = get_backend("torch-eager:cpu:float32").run(case)
    assert judged(case, "float32", torch_output) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: a sum of 3 whose sin is 0.14 in every rounding: nan is wrong there.
    small = Case(graph, {"x0": np.array([1.0, 1.0, 1.0] + [0.0] * 15).reshape(1, 1, 18)}, seed=2)
    assert judged(small, "float32", [np.full((1, 1), np.nan)]) == verdicts.NAN_INF


def test_a_normalization_over_one_element_keeps_its_rounding_error_in_both_runs():
    # torch-eager:cpu:float32, 40-minute campaign case 71: group_norm with a group per channel of [2, 33] (one
    # element each, eps 1e-12) is its bias exactly, but torch's fused x * scale + shift is off by
    # u |x| / sqrt(eps) = 0.03; the run that snapped the float64 zero back to 0 erased that error, and the
    # max over the batch hid the other run's negative one.
    attrs = {"affine": True, "eps": 1e-12, "num_groups": 33}
    graph = Graph([TensorSpec("x0", (2, 33))], [Node("n0", "group_norm", ["x0"], attrs),
                                                Node("n1", "max", ["n0"], {"dim": 0, "keepdim": False})], ["n1"])
    x = np.zeros((2, 33))
    x[1, 32] = 0.86767578125
    case = Case(graph, {"x0": x, "n0.weight": np.ones(33), "n0.bias": np.zeros(33)}, seed=3)
    torch_output = get_backend("torch-eager:cpu:float32").run(case)
    assert judged(case, "float32", torch_output) == verdicts.AGREE
    # Planted: 30 off, a hundred times what the fused form can do here (0.2 a run).
    wrong = np.array(torch_output[0], dtype=np.float64)
    wrong[32] += 30.0
    assert judged(case, "float32", [wrong]) == verdicts.MISMATCH


def test_nearest_may_read_either_source_where_float32_rounds_an_integer_coordinate_below():
    # torch-eager:cpu:float64, GPU-machine case 738: [nan, 0] resized to 214 rows. Output row 107 has the
    # source coordinate 107 * 2 / 214 = 1 exactly: torch's float32 kernels read row 0 (107 * float32(2/214)
    # is 0.99999994), its float64 CPU kernel reads row 1.
    attrs = {"align_corners": None, "mode": "nearest", "scale_factor": None, "size": [214, 4]}
    for values in ([np.nan, 0.0], [1.5, -2.0]):
        case = Case(chain((1, 1, 2, 1), ("interpolate", attrs)), {"x0": np.array(values).reshape(1, 1, 2, 1)}, seed=1)
        for dtype in ("float64", "float32"):
            output = get_backend(f"torch-eager:cpu:{dtype}").run(case)[0]
            assert judged(case, dtype, [output]) == verdicts.AGREE, (values, dtype)
        float64_output = get_backend("torch-eager:cpu:float64").run(case)[0]
        assert float64_output[0, 0, 107, 0] == values[1], "the float64 kernel reads row 1 there"
        # Planted: row 106 (coordinate 0.99) reads row 1; and row 108 (1.01) reads row 0.
        for row, source in ((106, 1), (108, 0)):
            wrong = np.array(float64_output)
            wrong[0, 0, row] = values[source]
            assert judged(case, "float64", [wrong]) in (verdicts.MISMATCH, verdicts.NAN_INF), (values, row)


def test_an_attention_row_whose_scores_overflow_to_minus_inf_may_be_zero_or_nan():
    # torch-eager:cuda:float16, GPU-machine case 196: cosh gave q = 1.1e15, inf in float16, and causal
    # attention with one query keeps key 0 alone, whose k is -1.3e-6: the row's only score is -inf.
    # The answer, v's row 0, is 0 in float64 and in the float16 model alike.
    # torch's math kernel gives 0 for a row with no finite score, the fused CUDA kernel 0 / 0 = nan.
    attention = ("scaled_dot_product_attention", {"causal": True, "mask": False, "scale": 1.0}, ["k", "v"])
    graph = chain((1, 1, 2), ("cosh", {}), attention, extra_inputs=[("k", (1, 2, 2)), ("v", (1, 2, 1))])
    arrays = {"x0": np.array([[[35.32, 0.0]]]), "k": np.array([[[-1.3e-6, 0.0], [1.0, 1.0]]]), "v": np.array([[[0.0], [2.0]]])}
    case = Case(graph, arrays, seed=1)
    for output in (np.nan, 0.0):
        assert judged(case, "float16", [np.array([[[output]]])]) in (verdicts.AGREE, verdicts.INVALID), output
    assert judged(case, "float32", [np.array([[[np.nan]]])]) == verdicts.NAN_INF, "finite in float32: v's row 0 is the answer"
    # Planted: cosh(1.0), whose score is finite in float16: nan is wrong.
    finite = Case(graph, {**arrays, "x0": np.array([[[1.0, 0.0]]])}, seed=1)
    assert judged(finite, "float16", [np.array([[[np.nan]]])]) == verdicts.NAN_INF


def test_a_kernel_may_flush_one_operand_and_read_a_later_subnormal_as_it_is():
    # jax-eager:cpu:float32 on jax 0.12.0.1, CPU campaign case 53: XLA's dot flushes the subnormal
    # 5.1e-41, so 5.1e-41 * 1e19 is 0, and then its pow reads the subnormal exponent -7.3e-39 as it is:
    # pow(0, -7.3e-39) is inf, where a run that flushes every read gives pow(0, -0.0) = 1.
    graph = Graph([TensorSpec("x0", (1, 2)), TensorSpec("x1", (2, 1)), TensorSpec("x2", (1,))],
                  [Node("n0", "matmul", ["x0", "x1"]), Node("n1", "pow", ["n0", "x2"])], ["n1"])
    arrays = {"x0": np.array([[5.1492e-41, 0.0]]), "x1": np.array([[1e19], [0.0]]), "x2": np.array([-7.280212e-39])}
    case = Case(graph, arrays, seed=1)
    jax_output = get_backend("jax-eager:cpu:float32").run(case)[0]
    assert judged(case, "float32", [jax_output]) in (verdicts.AGREE, verdicts.INVALID), jax_output
    # Planted: beside a normal product of 2, flushing the subnormal one changes nothing: pow is 1, not inf.
    normal = Case(graph, {**arrays, "x0": np.array([[5.1492e-41, 1.0]]), "x1": np.array([[1e19], [2.0]])}, seed=1)
    assert judged(normal, "float32", [np.array([[np.inf]])]) == verdicts.NAN_INF


def test_cos_of_a_dot_product_that_rounding_moves_by_radians_may_have_either_sign():
    # jax-eager:cpu:float32 on jax 0.12.0.1, CPU campaign case 135: a float32 dot product of 129 terms
    # up to 4.5e7 cancels to -2.1e6, 1.9 off in jax, so cos of it is any value of either sign, and sqrt
    # of it nan or not; the rounding runs happened to sample only negative cosines. Here two terms near
    # 4.1e7 cancel to -3.3e5, and the runs of seed 1 sample cosines of one sign.
    graph = Graph([TensorSpec("x0", (1, 2)), TensorSpec("x1", (2, 1))],
                  [Node("n0", "matmul", ["x0", "x1"]), Node("n1", "cos", ["n0"]), Node("n2", "sqrt", ["n1"])], ["n2"])
    large = {"x0": np.array([[5341.494140625, 7965.67529296875]]), "x1": np.array([[-7642.60595703125], [5083.90283203125]])}
    case = Case(graph, large, seed=1)
    for output in (np.nan, 0.648):
        assert judged(case, "float32", [np.array([[output]])]) in (verdicts.AGREE, verdicts.INVALID), output
    # Planted: a dot product of 1.25, whose cos is 0.315 in every correct float32 kernel: nan is wrong.
    small = Case(graph, {"x0": np.array([[1.5, 2.0]]), "x1": np.array([[0.5], [0.25]])}, seed=1)
    assert judged(small, "float32", [np.array([[np.nan]])]) == verdicts.NAN_INF


# 1-hour CPU campaign case 70 (torch 2.15.0): one output channel of a conv1d over 39 channels,
# kernel 2, whose terms (magnitudes summing to 1,739) cancel to 369.0000146: 369.0 in float32.
CONV70_INPUT = np.array([-147.5233154296875, 5.489167506311787e-06, -1.155286099674413e-05, -14.340693473815918, 2.465563511577784e-06, 1.2653779357663097e-08, 0.06568655371665955, -714.9400024414062, -32.422603607177734, -7.28165864944458, -5.680148973397081e-08, 0.16310231387615204, 0.43479716777801514, -5199.81201171875, 215.82777404785156, 2.235280990600586, 0.05172901600599289, 4509.0751953125, -7.282389560714364e-05, -2.7589915134740295e-06, 1.4337682841869537e-05, -0.5625778436660767, -68.80015563964844, -0.00196224101819098, -3406.169921875, -0.0010374661069363356, -2.8118665795773268e-05, 1.1790165288516619e-08, -8.663968401378952e-06, -6731.3486328125, -0.06774690747261047, 3.206481835604791e-07, -0.25523313879966736, 0.007020412012934685, 180.6520233154297, -0.0395943783223629, -2.0400157154654153e-06, 7.244123116834089e-05, -6.527967798319878e-06, 18.93484878540039, -1.0754130919110594e-08, -1938.6317138671875, 0.006875676568597555, -599.2566528320312, 1.0150322360402697e-08, 1.1008302180925966e-06, -0.05275781452655792, 4.3654406908899546e-05, -2.259320020675659, -0.35907289385795593, -2.4971720904432004e-06, 237.1954803466797, 54.47831344604492, -31.331295013427734, -2.2193308524265376e-08, -0.8393504023551941, 85.90203094482422, -1.9367225170135498, -3.7972245081618894e-07, 1.7803039042973978e-08, -0.34670841693878174, 1.9750901628867723e-05, 0.06279531866312027, -13.764904022216797, 2370.185302734375, 9425.2529296875, -139.5708465576172, -5.784424047305947e-06, 57.00373458862305, 0.8260430693626404, 1.1694373824866489e-05, 0.0002161708107450977, 1.271641281164193e-08, 22.854503631591797, 10.95217227935791, -34.67578887939453, 0.03206878900527954, 0.00016955146566033363]).reshape(1, 39, 2)
CONV70_WEIGHT = np.array([-0.051591791212558746, 0.002416942734271288, -0.0008174898102879524, 0.011829301714897156, 0.014571021310985088, -0.03274534270167351, 0.0032603933941572905, 0.04006260633468628, -0.027221227064728737, 0.03092011623084545, 0.07541724294424057, 0.028224077075719833, -0.014294985681772232, -0.051995452493429184, -0.009136022068560123, 0.06655919551849365, 0.02826371043920517, -0.05702004209160805, 0.00957062654197216, -0.020908931270241737, 0.06319589912891388, 0.034282371401786804, 0.09215694665908813, 0.02614273875951767, 0.05121577903628349, 0.0215583648532629, -0.14776387810707092, -0.003248125547543168, -0.057037483900785446, 0.030356356874108315, 0.07612121105194092, 0.09828591346740723, 0.028930367901921272, 0.07764346152544022, -0.03511380776762962, -0.052254997193813324, -0.0008418418583460152, -0.058925069868564606, -0.013168171048164368, -0.06458798795938492, 0.12677201628684998, -0.048371441662311554, -0.010314030572772026, -0.06887689977884293, -0.03165769577026367, 0.020308997482061386, 0.06758902966976166, -0.04545320197939873, 0.07212416082620621, 0.01815413497388363, 0.08509300649166107, 0.015063140541315079, -0.032255176454782486, 0.023339983075857162, 0.05343984067440033, -0.003957696259021759, 0.06952139735221863, 0.029271481558680534, -0.011215569451451302, 0.011296278797090054, -0.019816754385828972, 0.06623370200395584, 0.021288549527525902, -0.03952183574438095, 0.031788554042577744, 0.05866061896085739, -0.012928681448101997, 0.014586271718144417, -0.007507962640374899, 0.00917160976678133, -0.05510435998439789, 0.012725293636322021, 0.03171044588088989, -0.0019439057214185596, -0.03847995400428772, 0.005387905985116959, -0.010614458471536636, -0.06839693337678909]).reshape(1, 39, 2)


def _conv_then_power(bias):
    conv = {"bias": True, "dilation": [1], "groups": 1, "kernel_size": [2], "out_channels": 1, "padding": [0], "stride": [1]}
    graph = Graph([TensorSpec("x0", (1, 39, 2)), TensorSpec("base", (1, 1, 1))],
                  [Node("n0", "conv1d", ["x0"], conv), Node("n1", "pow", ["base", "n0"], {})], ["n1"])
    return Case(graph, {"x0": CONV70_INPUT, "base": np.array([[[-0.01231230515986681]]]),
                        "n0.weight": CONV70_WEIGHT, "n0.bias": np.array([bias])}, seed=1)


def test_a_cancelling_sum_rounded_onto_an_integer_makes_a_negative_power_undefined():
    # The exponent is 1.5e-5 from 369, within the conv's rounding (u * 1,739) but not within rounding
    # of |369| itself: float32 gives exactly 369.0, and pow(-0.0123, 369.0) is -0.0 where float64's
    # 369.0000146 makes it nan.
    # torch 2.15's 255-channel kernel gave that -0.0; which order a kernel sums in is its own choice.
    case = _conv_then_power(-0.5659613013267517)
    exponent = evaluate_all(case.graph, {"x0": CONV70_INPUT, "base": case.arrays["base"]},
                            {"n0": {"weight": CONV70_WEIGHT, "bias": case.arrays["n0.bias"]}})["n0"]
    assert abs(exponent.ravel()[0] - 369.0000146) < 1e-7 and np.float32(exponent.ravel()[0]) == 369.0
    # Seeds 11 and 12 are the draws that kept the operand beyond rounding of 369 (a false nan-inf).
    for seed in range(1, 13):
        assert judged(replace(case, seed=seed), "float32", [np.array([[[-0.0]]])]) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: a bias that puts the exponent 0.3 from any integer, far beyond rounding: nan is required.
    genuine = _conv_then_power(-0.2659613013267517)
    assert np.isnan(oracle.compute_reference(genuine, {"float32"}).outputs[0].ravel()[0])
    assert judged(genuine, "float32", [np.zeros((1, 1, 1))]) == verdicts.NAN_INF


def test_a_bfloat16_running_sum_may_stall_as_a_kernel_scanning_in_bfloat16_does():
    # torch-eager:cuda:bfloat16, GPU campaign case 162: 576 terms near 0.73; the CUDA kernel carries
    # the running sum in bfloat16 (expected upstream: pytorch#180150, #180155), which stops growing
    # at 256 where adding 0.73 no longer moves it; the float64 sum is ~422.
    import ml_dtypes

    x = np.random.default_rng(5).uniform(0.6, 0.86, size=(1, 576))
    x = x.astype(ml_dtypes.bfloat16).astype(np.float64)
    case = Case(chain((1, 576), ("cumsum", {"dim": 1})), {"x0": x}, seed=1)
    stalled = np.cumsum(x.astype(ml_dtypes.bfloat16), axis=1).astype(np.float64)
    assert stalled[0, -1] == 256.0 and np.cumsum(x)[-1] > 400
    assert judged(case, "bfloat16", [stalled]) == verdicts.AGREE
    # The float32-accumulating kernels (torch on the CPU) agree as well.
    assert judged(case, "bfloat16", get_backend("torch-eager:cpu:bfloat16").run(case)) == verdicts.AGREE
    # float32 keeps its tight allowance: a stall of the same kind is a mismatch there.
    float32_stalled = np.minimum(np.cumsum(x, axis=1), 256.0)
    assert judged(case, "float32", [float32_stalled]) == verdicts.MISMATCH
    # Planted, on a scan short enough that bfloat16 carries it to within a few roundoffs: a kernel
    # that returns its input, not its running sum, is a mismatch in bfloat16 too.
    short = Case(chain((1, 32), ("cumsum", {"dim": 1})), {"x0": x[:, :32]}, seed=1)
    assert judged(short, "bfloat16", [np.cumsum(x[:, :32].astype(ml_dtypes.bfloat16), axis=1).astype(np.float64)]) == verdicts.AGREE
    assert judged(short, "bfloat16", [x[:, :32]]) == verdicts.MISMATCH


def test_a_kernel_that_flushes_one_operand_and_not_another_may_jump_at_zero_to_the_power_zero():
    # jax-eager:cpu:float32 (README campaign, jax 0.10.2): argmin of [0, -1.6e-41] is 0 where XLA
    # flushes the subnormal (0 == -0) and 1 in float64; pow(0, 3e-41) is then 0 with the exponent read
    # unflushed, 1 with it flushed (pow(0, 0)) and in float64 (pow(1, 3e-41)). Row 1 is all normal.
    graph = Graph([TensorSpec("x0", (2, 2)), TensorSpec("x1", (2,))],
                  [Node("n0", "argmin", ["x0"], {"dim": 1, "keepdim": False}), Node("n1", "pow", ["n0", "x1"], {})], ["n1"])
    case = Case(graph, {"x0": np.array([[0.0, -1.6279e-41], [3.0, 2.0]]), "x1": np.array([3.0026e-41, 2.5])}, seed=1)
    jax_output = get_backend("jax-eager:cpu:float32").run(case)
    assert jax_output[0][1] == 1.0 and jax_output[0][0] in (0.0, 1.0)
    assert judged(case, "float32", [np.array([0.0, 1.0])]) == verdicts.AGREE
    # Either value, not any: a nan there is wrong; and the jump widens this output's allowance to
    # what the rounding runs allow for a change of 1 (K_SAME), not beyond (row 1, pow(1, 2.5) = 1).
    assert judged(case, "float32", [np.array([np.nan, 1.0])]) == verdicts.NAN_INF
    assert judged(case, "float32", [np.array([0.0, 40.0])]) == verdicts.MISMATCH


def test_scores_a_dtype_rounds_to_a_tie_make_attention_the_mean_of_their_values():
    # jax-jit:gpu:bfloat16, GPU campaign case 283 (and jax-jit:cpu:bfloat16 alike): scores -9703.5 and
    # -9723.1 are both -9728 in bfloat16 (here -9704 and -9724), so the row's output is the mean of two values of opposite
    # sign (1.5e-7) where float64 gives the first (-1.1e-7), and log of it is finite, not nan.
    sdpa = {"causal": False, "mask": True, "scale": 1.0}
    graph = Graph([TensorSpec("q", (2, 1)), TensorSpec("k", (2, 1)), TensorSpec("v", (2, 1)), TensorSpec("m", (2, 1))],
                  [Node("n0", "scaled_dot_product_attention", ["q", "k", "v", "m"], sdpa), Node("n1", "log", ["n0"], {})], ["n1"])
    # Every input is exact in bfloat16; the scores q k + m are computed: -9704 and -9724 in row 0.
    arrays = {"q": np.array([[1.0], [1.0]]), "k": np.array([[152.0], [132.0]]), "v": np.array([[-1.14e-7], [4.18e-7]]),
              "m": np.array([[-9856.0], [-10.0]])}  # one bias a row, as in the case: rounding it moves no key past another
    case = Case(graph, arrays, seed=1)
    jax_output = get_backend("jax-jit:cpu:bfloat16").run(case)
    assert np.isfinite(jax_output[0][0, 0]) and np.isnan(jax_output[0][1, 0])
    assert judged(case, "bfloat16", jax_output) == verdicts.AGREE
    # Row 1's scores (142, 122) are 20 apart, far beyond rounding: its nan is required in bfloat16 too.
    assert judged(case, "bfloat16", [np.array([[-15.7], [-15.7]])]) == verdicts.NAN_INF
    # float32 rounds neither score onto the other: the finite row 0 is wrong there.
    assert judged(case, "float32", [np.array([[-15.7], [np.nan]])]) == verdicts.NAN_INF


def _conv_then_self_power(big):
    """GPU campaign case 439, shrunk: one conv2d output of terms 1e19 x -0.000385, 88.72 x 0.049 and
    -2.24 x 0.099, minus a zero, to the power of itself."""
    conv = {"bias": False, "dilation": [1, 2], "groups": 1, "kernel_size": [1, 2], "out_channels": 1, "padding": [0, 0], "stride": [1, 1]}
    graph = Graph([TensorSpec("x0", (1, 2, 1, 3)), TensorSpec("x1", (1, 1))],
                  [Node("n0", "conv2d", ["x0"], conv), Node("n1", "sub", ["n0", "x1"], {}), Node("n2", "pow", ["n1", "n1"], {})], ["n2"])
    x0 = np.zeros((1, 2, 1, 3))
    x0[0, 0, 0, 0], x0[0, 0, 0, 2], x0[0, 1, 0, 2] = big, 88.72000122070312, -2.240701198577881
    weight = np.array([-0.00038519897498190403, 0.049294453114271164, -0.07848014682531357, 0.09946310520172119]).reshape(1, 2, 1, 2)
    return Case(graph, {"x0": x0, "x1": np.zeros((1, 1)), "n0.weight": weight}, seed=1)


def test_a_float64_sum_that_lands_on_an_integer_may_land_half_off_it_under_a_negative_power():
    # The conv output is -3851989742310140 in the reference's summation order and -...139.5 in
    # torch's (float64 is spaced 0.5 there): pow(t, t) is 0 in one and nan in the other. Seeds 1, 10,
    # 12, 18, 19 and 20 kept every run on the integer (a false nan-inf on CPU and CUDA alike).
    case = _conv_then_self_power(9.999999980506448e+18)
    assert (oracle.compute_reference(case, {"float64"}).outputs[0] == 0.0).all()
    # torch's own run (its order of summation, so its thread count, decides which) and the nan it gave.
    for output in (get_backend("torch-eager:cpu:float64").run(case), [np.full((1, 1, 1, 1), np.nan)]):
        for seed in range(1, 25):
            assert judged(replace(case, seed=seed), "float64", output) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: the same sum 100 times larger, near 4e17, where float64 holds integers only: 0 is required.
    planted = _conv_then_self_power(1e21)
    assert judged(planted, "float64", [np.full((1, 1, 1, 1), np.nan)]) == verdicts.NAN_INF


def _norm_then_cos(x, shift):
    """sqrt(cos(norm_1(x) - shift)): GPU campaign case 362's norm > addmm > cos > sqrt, the addmm a shift."""
    graph = Graph([TensorSpec("x0", x.shape)],
                  [Node("n0", "norm", ["x0"], {"dims": [0, 1], "keepdim": False, "p": 1}), Node("n1", "sub_scalar", ["n0"], {"value": float(shift)}),
                   Node("n2", "cos", ["n1"], {}), Node("n3", "sqrt", ["n2"], {})], ["n3"])
    return Case(graph, {"x0": x}, seed=1)


def test_a_float32_norm_summed_term_after_term_may_move_a_cosine_across_its_zero():
    # torch's CPU vector_norm(ord=1) adds float32 terms one after the other (its sum does not): over
    # 16,236 terms near 4,072 it is 40 roundoffs off (344 over 4,161 terms in the campaign's case). With the cosine's
    # zero between that and the float64 norm, sqrt(cos) is nan in one and finite in the other.
    x = np.random.default_rng(0).uniform(0.0, 0.5, (1, 16236)).astype(np.float32).astype(np.float64)
    torch_norm = float(torch.linalg.vector_norm(torch.tensor(x, dtype=torch.float32), ord=1.0))
    assert abs(torch_norm - x.sum()) > 20 * 2.0**-24 * x.sum()
    case = _norm_then_cos(x, x.sum() - np.pi / 2 + (torch_norm - x.sum()) / 2)
    torch_output = get_backend("torch-eager:cpu:float32").run(case)
    assert np.isnan(torch_output[0]).all() and np.isfinite(oracle.compute_reference(case, {"float32"}).outputs[0]).all()
    for seed in range(1, 6):
        assert judged(replace(case, seed=seed), "float32", torch_output) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: the first 4,000 terms (sum 1,000, so the 3,999 roundoffs of summing one after the
    # other are 0.24) with the cosine's zero 0.8 away: it is positive in any order, and a nan is wrong.
    few = x[:, :4000]
    planted = _norm_then_cos(few, few.sum() - np.pi / 2 + 0.8)
    assert judged(planted, "float32", [np.full(1, np.nan)]) == verdicts.NAN_INF


def test_a_nan_that_weighs_only_the_reference_coordinates_rounding_is_a_convention_of_bilinear():
    # torch-compile:cuda:float32, GPU campaign case 694 (torch eager on the CPU alike): align_corners
    # maps output column 11 of 12 onto 11 * (15 / 11), which is 15 in float32 and 14.999999999999998
    # in float64, so the reference reads a nan in column 14 with weight 2e-15 and torch does not.
    attrs = {"align_corners": True, "mode": "bilinear", "scale_factor": [0.5, 0.75], "size": None}
    x = np.zeros((1, 1, 2, 16))
    x[..., 14] = np.nan
    case = Case(chain((1, 1, 2, 16), ("interpolate", attrs)), {"x0": x}, seed=1)
    torch_output = get_backend("torch-eager:cpu:float32").run(case)
    assert torch_output[0][..., 11] == 0.0 and np.isnan(oracle.compute_reference(case, {"float32"}).outputs[0][..., 11])
    assert judged(case, "float32", torch_output) == verdicts.AGREE
    # Planted: column 10 reads column 14 at 13.64, with weight 0.64: its nan is required.
    dropped = torch_output[0].copy()
    dropped[..., 10] = 0.0
    assert judged(case, "float32", [dropped]) == verdicts.NAN_INF


def test_a_key_whose_float32_score_rounding_may_sink_it_below_the_smallest_weight_may_weigh_nothing():
    # jax-eager:cpu:float32, GPU campaign case 186: scores near 3.4e7, rounded by units in float32,
    # with key 1 83.7 below key 0 in float64 (weight 4e-37): XLA's scores put it past float32's
    # smallest normal, flushed to 0, and 0 * -inf is nan where the reference is -inf.
    graph = chain((1, 1, 3), ("scaled_dot_product_attention", {"causal": False, "mask": False, "scale": 2.0}, ["x1", "x2"]),
                  extra_inputs=[("x1", (1, 2, 3)), ("x2", (1, 2, 1))])
    query = np.array([4497.82177734375, -107.57593536376953, 2135.8154296875]).reshape(1, 1, 3)
    keys = np.array([3879.98681640625, -4144.25830078125, -318.04241943359375, -4346.85693359375, 601.0011596679688,
                     17245.88671875]).reshape(1, 2, 3)
    case = Case(graph, {"x0": query, "x1": keys, "x2": np.array([0.0, -np.inf]).reshape(1, 2, 1)}, seed=1)
    jax_output = get_backend("jax-eager:cpu:float32").run(case)
    assert np.isnan(jax_output[0]).all() and np.isneginf(oracle.compute_reference(case, {"float32"}).outputs[0]).all()
    assert judged(case, "float32", jax_output) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: a key 80 below the other by its mask, with scores a float32 kernel rounds by 5e-6:
    # its weight 1.8e-35 is a normal float32 number in any order, and the -inf it brings is required.
    planted = attention_case([0.0, -80.0], [0.0, -np.inf])
    assert judged(planted, "float32", [np.full((1, 1, 1), np.nan)]) == verdicts.NAN_INF


def test_a_constant_row_keeps_its_normalization_error_though_the_rounding_runs_perturb_it():
    # torch-eager:cpu:float32, GPU campaign case 560 (reproduced on torch 2.13 and 2.15): instance_norm
    # (eps 1e-12) of [207417, 207417] is 0, yet torch's x * scale + shift with scale ~1.3e6 gives
    # -2625.75. The rounding runs perturbed the row, whose variance of 1.5e-4 then shrank the error
    # bound 1e4-fold: the bound is now also taken at the float64 operands, where the variance is 0.
    from fuzzer.arrays import materialize

    case = materialize(chain((1, 1, 2), ("instance_norm", {"affine": True, "eps": 1e-12})), 1)
    weight = next(name for name in case.arrays if name.endswith(".weight"))
    bias = next(name for name in case.arrays if name.endswith(".bias"))
    case.arrays.update({"x0": np.full((1, 1, 2), 207417.0), weight: np.array([1.3283043]), bias: np.array([0.0])})
    torch_output = get_backend("torch-eager:cpu:float32").run(case)
    assert np.abs(torch_output[0]).max() > 1000
    assert judged(case, "float32", torch_output) == verdicts.AGREE
    # Planted: far past what rounding a float32 row of 207417 through 1 / sqrt(1e-12) can give.
    assert judged(case, "float32", [np.full((1, 1, 2), 1e8)]) == verdicts.MISMATCH
    # A row that varies keeps its bound (set by the floor, RTOL * 207417 * sens: 32 before and after).
    case.arrays["x0"] = np.array([207417.0, 207419.0]).reshape(1, 1, 2)
    right = get_backend("torch-eager:cpu:float64").run(case)[0]
    assert oracle.allowed_error(oracle.compute_reference(case, {"float32"}), 0, "float32") < 100
    assert judged(case, "float32", [right + 200.0]) == verdicts.MISMATCH


def test_gelu_far_below_zero_is_a_tiny_negative_not_a_zero_from_a_cancelling_sum():
    # GPU campaign case 52: jax's gelu(-8.86) is -3.5e-18 (erfc), times inf -inf; our reference summed
    # 1 + erf to -0.0, whose product with inf (nan) it required. torch's -0.0 (nan) is honest too.
    graph = chain((1, 2), ("gelu", {"approximate": "none"}), ("mul", {}, ["x1"]), extra_inputs=[("x1", (1, 2))])
    case = Case(graph, {"x0": np.array([[-8.86311, 1.0]]), "x1": np.array([[np.inf, 2.0]])}, seed=1)
    assert judged(case, "float32", get_backend("jax-eager:cpu:float32").run(case)) == verdicts.AGREE
    assert judged(case, "float32", get_backend("torch-eager:cpu:float32").run(case)) == verdicts.AGREE
    # Without the inf, a gelu far off is still wrong; so is either form's value where nothing cancels.
    for approximate in ("none", "tanh"):
        alone = Case(chain((1, 2), ("gelu", {"approximate": approximate})), {"x0": np.array([[-8.86311, -3.0]])}, seed=1)
        assert judged(alone, "float32", get_backend("jax-eager:cpu:float32").run(alone)) == verdicts.AGREE
        assert judged(alone, "float32", [np.array([[0.5, -0.004]])]) == verdicts.MISMATCH
        assert judged(alone, "float32", [np.array([[0.0, -0.1]])]) == verdicts.MISMATCH


def test_a_bilinear_copy_of_a_negative_zero_keeps_its_sign():
    # Cross-version campaign case 53: align_corners bilinear from 2 rows to 1 copies row 0, -0.0, and
    # torch's pow(-0.0, -1) is -inf, then where(<= 0) keeps it; our reference summed the four weighted
    # corners from Python's int 0, and 0 + -0.0 is +0.0, so it required 0 there.
    attrs = {**BILINEAR, "align_corners": True, "size": None, "scale_factor": [0.5, 1.25]}
    x = np.array([-0.0, -1.0]).reshape(1, 1, 2, 1)
    assert np.signbit(get_op("interpolate").reference([x], {}, attrs)).all()
    graph = chain((1, 1, 2, 1), ("interpolate", attrs), ("pow", {}, ["x1"]), ("where", {"compare": "le"}, ["x2"]),
                  extra_inputs=[("x1", (1,)), ("x2", (1, 1, 1))])
    case = Case(graph, {"x0": x, "x1": np.array([-1.0]), "x2": np.zeros((1, 1, 1))}, seed=1)
    torch_output = get_backend("torch-eager:cpu:float32").run(case)
    assert torch_output[0].ravel().tolist() == [-np.inf]
    assert judged(case, "float32", torch_output) != verdicts.NAN_INF


def test_a_bfloat16_scalar_is_rounded_to_bfloat16_before_it_is_added():
    """GPU campaign (seed 341), jax-jit:gpu:bfloat16: x + -1.1591796875 -> sqrt -> reciprocal at
    x = 1.154081. Both operands round to 1.15625 in bfloat16 (jax's weak type; torch's bfloat16
    too), so the sum is 0 and the result inf, where the exact scalar gives sqrt(-0.0029), nan.
    Real torch and jax eager in bfloat16 agree; the planted backend's sqrt(|x|) is caught where no
    rounding of the scalar explains it (x = 0.5, the sum -0.66)."""
    graph = chain((1, 2), ("add_scalar", {"value": -1.1591796875}), ("sqrt", {}), ("reciprocal", {}))
    case = Case(graph, {"x0": np.array([[1.154081, 0.5]])}, seed=1)
    backends = [get_backend(name) for name in ("torch-eager:cpu:bfloat16", "jax-eager:cpu:bfloat16")]
    sqrt_of_abs = backends[0].derive("sqrt-of-abs", {"sqrt": lambda xs, ps, attrs: torch.sqrt(torch.abs(xs[0]))})
    result = check_case(case, [*backends, sqrt_of_abs])
    assert [v.verdict for v in result.verdicts] == [verdicts.AGREE, verdicts.AGREE, verdicts.NAN_INF]
    assert np.isinf(run_backend(backends[1], case).outputs[0][0, 0])  # the real inf, judged right
    assert check_case(case, [get_backend("torch-eager:cpu:float32")]).verdict == verdicts.AGREE  # float32: the exact scalar


def test_a_variance_whose_range_squared_overflows_its_dtype_may_be_infinite():
    # torch-eager:cuda:float32, H200 campaign (seed 349): var of 0 and 1.97e19 is 1.94e38, finite in
    # float32, but CUDA's Welford combine squares the means' difference (3.9e38): inf. Row 1 is plain.
    graph = chain((1, 2, 2, 1, 1), ("var", {"correction": 1, "dims": [2], "keepdim": True}))
    case = Case(graph, {"x0": np.array([0.0, 1.9689011893189476e19, 1.0, 3.0]).reshape(1, 2, 2, 1, 1)}, seed=1)
    for first in (np.inf, 1.9382859e38):
        assert judged(case, "float32", [np.array([first, 2.0]).reshape(1, 2, 1, 1, 1)]) == verdicts.AGREE
    assert judged(case, "float32", [np.array([np.inf, np.inf]).reshape(1, 2, 1, 1, 1)]) == verdicts.NAN_INF
    assert judged(case, "float64", [np.array([np.inf, 2.0]).reshape(1, 2, 1, 1, 1)]) == verdicts.NAN_INF
    # A range whose square is within float32: the finite variance is required.
    below = Case(graph, {"x0": np.array([0.0, 1.8e19, 1.0, 3.0]).reshape(1, 2, 2, 1, 1)}, seed=1)
    assert judged(below, "float32", [np.array([np.inf, 2.0]).reshape(1, 2, 1, 1, 1)]) == verdicts.NAN_INF


def test_a_square_within_rounding_of_the_largest_value_may_overflow_in_local_response_norm():
    # torch-eager:cuda:float16, H200 campaign (seed 353), batch row 103 of case 186: cuBLAS's einsum
    # accumulates in float32 and rounds 256.01 to 256.0, whose square LRN takes in float16: inf, so
    # the output is 0 where the reference (59 -> neg -> ** 2.375) is nan. numpy's float16 einsum
    # gives 255.875, whose square is finite.
    x0 = [[[0.97412109375, -1.9248046875, -1.9892578125, 1.7021484375, 0.0, 0.8876953125, 1.2099609375, -0.146728515625,
            -1.61328125, 0.0784912109375, -0.12060546875, -1.8955078125, -0.337158203125, 0.9091796875, -1.6337890625,
            -1.6767578125]]]
    x1 = [[[0.0, 151.625], [0.0, -43.71875], [0.0, -65.0625], [0.0, 42.40625], [0.0, 0.0], [0.0, -59.34375], [0.0, -102.1875],
           [0.0, 17.34375], [0.0, -45.5625], [0.0, -85.75], [0.0, -185.875], [0.0, 0.8837890625], [0.0, -66.6875],
           [0.0, 41.65625], [0.0, 104.875], [0.0, -14.84375]]]
    graph = Graph([TensorSpec("x0", (1, 1, 16)), TensorSpec("x1", (1, 16, 2))],
                  [Node("n0", "einsum", ["x0", "x1"], {"equation": "bij,bjk->bik"}),
                   Node("n1", "local_response_norm", ["n0"], {"alpha": 0.0001, "beta": 0.75, "k": 0.5, "size": 1}),
                   Node("n2", "neg", ["n1"], {}), Node("n3", "pow_scalar", ["n2"], {"exponent": 2.375})], ["n3"])
    values = np.array(x1)
    values[0, :, 0] = -0.125 * np.array(x0)[0, 0]  # column 0: a negative einsum, a finite output
    case = Case(graph, {"x0": np.array(x0), "x1": values}, seed=1)
    reference = oracle.compute_reference(case, {"float16"}).outputs[0]
    assert np.isnan(reference[0, 0, 1]) and np.isfinite(reference[0, 0, 0])
    assert judged(case, "float16", [np.array([[[reference[0, 0, 0], 0.0]]])]) == verdicts.AGREE
    # The other entry is still judged: twice its value is a finding.
    assert judged(case, "float16", [np.array([[[2 * reference[0, 0, 0], 0.0]]])]) == verdicts.MISMATCH


def test_cos_of_a_large_cosh_may_take_either_sign_through_the_shifted_exponential():
    # jax-eager:cpu:float64, H200 campaign (seed 359): cosh(33.143150329589844) is 123838962628855.03,
    # jax's 123838962628854.81 (exp(|x| + log(1/2)) rounds the shifted argument); cos of that is
    # 0.16 or negative, and sqrt of it 0.40 or nan. Case seed 6: rounding runs that, without the
    # shifted exponential's error, all keep the cos positive.
    graph = chain((2,), ("cosh", {}), ("cos", {}), ("sqrt", {}))
    case = Case(graph, {"x0": np.array([33.143150329589844, 0.5])}, seed=6)
    jax_output = get_backend("jax-eager:cpu:float64").run(case)
    assert np.isnan(jax_output[0][0]) and np.isfinite(oracle.compute_reference(case, {"float64"}).outputs[0][0])
    assert judged(case, "float64", jax_output) == verdicts.AGREE
    # A small argument is judged as before: a wrong value there is a finding.
    small = Case(chain((1,), ("cosh", {}), ("cos", {}), ("sqrt", {})), {"x0": np.array([0.5])}, seed=6)
    assert judged(small, "float64", [np.array([0.5])]) == verdicts.MISMATCH


def test_the_reciprocal_of_a_float64_zero_a_kernel_computes_off_by_an_ulp_is_undefined():
    # torch-eager:cpu:float64 (and :cuda:float16), H200 campaign (seed 359), case 218: conv2d gives two
    # equal values in float64 (-1.1303305923938751) and two an ulp apart in torch, so instance_norm
    # is 0 in float64 and +-3e-16 in torch: its reciprocal is +-1e16 and the `where` after it picks
    # either branch. Such an entry is undefined, as a run's own computed zero is.
    conv = {"bias": False, "dilation": [2, 1], "groups": 1, "kernel_size": [3, 3], "out_channels": 1, "padding": [0, 0],
            "stride": [2, 2]}
    graph = Graph([TensorSpec("x0", (1, 1, 7, 4)), TensorSpec("x1", (1, 1))],
                  [Node("n0", "conv2d", ["x0"], conv), Node("n1", "instance_norm", ["n0"], {"affine": False, "eps": 0.1}),
                   Node("n2", "reciprocal", ["n1"], {}), Node("n3", "where", ["n2", "x1"], {"compare": "le"})], ["n3"])
    x0 = np.zeros((1, 1, 7, 4))
    x0[0, 0, 4, 1:3] = x0[0, 0, 6, 1:3] = -1.0
    weight = np.zeros((1, 1, 3, 3))
    weight[0, 0, 2, 1:] = [0.13033059239387512, 1.0]
    case = Case(graph, {"x0": x0, "x1": np.zeros((1, 1)), "n0.weight": weight}, seed=1)
    torch_output = get_backend("torch-eager:cpu:float64").run(case)
    assert np.abs(torch_output[0]).max() > 1e15  # torch's conv: two values an ulp apart
    assert judged(case, "float64", torch_output) in (verdicts.AGREE, verdicts.INVALID)
    # A reciprocal of a float64 zero a graph input gives is exact: 1 / 0 is inf.
    exact = Case(chain((2,), ("reciprocal", {})), {"x0": np.array([0.0, 2.0])}, seed=1)
    assert judged(exact, "float64", [np.array([-1e16, 0.5])]) == verdicts.NAN_INF


def test_an_overflow_times_a_flushed_subnormal_is_undefined_but_not_an_overflow_alone():
    # GPU campaign seed 363 (jax-eager on the CPU): cosh(103) is inf in float32 (honest), and XLA's
    # CPU dot reads x1 = -2.1e-42 as 0: inf * 0 = nan, then tanh(nan). The flush run (float64's
    # range: 3.7e44 * 0 = 0) and numpy in float32 (no flush: -inf) each had a number.
    graph = Graph([TensorSpec("x0", (1, 3)), TensorSpec("x1", (3, 1))],
                  [Node("n0", "cosh", ["x0"]), Node("n1", "matmul", ["n0", "x1"]), Node("n2", "tanh", ["n1"])], ["n2"])
    case = Case(graph, {"x0": np.array([[0.0, 103.0, 0.0]]), "x1": np.array([[0.0], [-2.141e-42], [0.0]])}, seed=1)
    assert judged(case, "float32", [np.array([[np.nan]])]) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: the same nan where x1 is normal (inf * -2e-3 = -inf, tanh -1 in every model).
    normal = Case(graph, {"x0": case.arrays["x0"], "x1": np.array([[0.0], [-2.141e-3], [0.0]])}, seed=1)
    assert judged(normal, "float32", [np.array([[np.nan]])]) == verdicts.NAN_INF
    # And an overflow alone is judged: tanh of inf is -1 or 1, never nan.
    assert judged(normal, "float32", [np.array([[-1.0]])]) == verdicts.AGREE


def _dot_then_cosh(terms):
    graph = Graph([TensorSpec("x0", (1, 1, 3)), TensorSpec("x1", (1, 3, 1))],
                  [Node("n0", "bmm", ["x0", "x1"], {}), Node("n1", "cosh", ["n0"], {})], ["n1"])
    return [Case(graph, {"x0": np.array(terms).reshape(1, 1, 3), "x1": np.ones((1, 3, 1))}, seed=seed) for seed in range(1, 9)]


def test_a_float64_sum_that_cancels_to_zero_in_one_order_may_be_its_rounding_bound_in_another():
    # Default CPU campaign, jax-eager:cpu:float64, bmm > cosh: 1e21 + 65504 - 1e21 is 0 in numpy's
    # order (cosh 1) and 65,504 summed otherwise (cosh inf). The directed runs snapped the computed
    # zero back to 0 though its rounding bound reaches 1e5: inf was a false nan-inf on seeds 3 .. 8.
    for case in _dot_then_cosh([1e21, 65504.0, -1e21]):
        assert judged(case, "float64", [np.full((1, 1, 1), np.inf)]) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: a sum that cancels exactly within the subnormals' reach (1 - 1): cosh is 1, inf is wrong.
    for case in _dot_then_cosh([1.0, 0.0, -1.0]):
        assert judged(case, "float64", [np.full((1, 1, 1), np.inf)]) == verdicts.NAN_INF
