"""Oracle gaps that produced false findings (issue 31), each from a stored case of the GPU
campaign's corpus, with the output its backend gave there; each is paired with a planted error in
the same op that must still fail.
"""

import numpy as np

from fuzzer import oracle, verdicts
from fuzzer.backends import get_backend
from fuzzer.ir import Case, Graph, Node, TensorSpec
from fuzzer.ops import get_op
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
    # only the longdouble run (oracle._float64_overflow) kept that from being required: where
    # longdouble is float64 (arm64 macOS, Windows) a kernel in an order that does not overflow
    # (XLA's pairwise reduction) was a nan-inf.
    monkeypatch.setattr(oracle, "_float64_overflow", lambda graph, inputs, params, outputs: [np.zeros(np.shape(o), dtype=bool) for o in outputs])
    op = get_op("prod")
    attrs = {"dim": 1, "keepdim": False}
    factors = np.array([[1e200, 1e200, 1e-200, 1e-200], [2.0, 3.0, -4.0, 0.5]])
    assert op.reference([factors], {}, attrs).tolist() == [1.0, -12.0]
    # An honest kernel's order decides between inf and 1 there: undefined; the plain row is defined.
    assert op.undefined([factors], {}, attrs).tolist() == [True, False]
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
