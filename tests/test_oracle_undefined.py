"""Results an honest kernel of the dtype may round to zero, across zero, or flush are undefined, not
mismatches; the same shapes of graph with a real bug in them are still caught.

Each false finding below is a real case of the GPU campaign of 2026-11-25 (reports/bugs/README.md),
with the output its backend gave there; each is paired with a planted bug of the same shape where
the reference is well-conditioned.
"""

import numpy as np

from fuzzer import oracle, verdicts
from fuzzer.backends import get_backend
from fuzzer.ir import Case, Graph, Node, TensorSpec


def chain(shape, *ops, extra_inputs=()):
    """A graph x0 -> ops[0] -> ops[1] -> ...; each op is (name, attrs), or (name, attrs, [other inputs])."""
    nodes, previous = [], "x0"
    for index, (op, attrs, *others) in enumerate(ops):
        nodes.append(Node(f"n{index}", op, [previous, *(others[0] if others else [])], attrs))
        previous = f"n{index}"
    return Graph([TensorSpec("x0", shape), *(TensorSpec(name, s) for name, s in extra_inputs)], nodes, [previous])


def judged(case, dtype, outputs):
    """The verdict of a backend of `dtype` giving `outputs`, or `invalid` where nothing is defined."""
    reference = oracle.compute_reference(case, {dtype})
    if not reference.defines_anything:
        return verdicts.INVALID
    return oracle.judge_outputs("backend", dtype, [np.asarray(y, dtype=np.float64) for y in outputs], reference).verdict


def test_a_cancellation_to_zero_then_a_reciprocal_is_undefined():
    # torch-eager:cpu:float32, case 147: x - tanh(x) of 3.3e-4 is 0 in float32 (float64: 1.2e-11), so
    # its pow(-1) is inf where the reference is 8e10.
    graph = chain((1, 1), ("tanhshrink", {}), ("pow_scalar", {"exponent": -1.0}))
    case = Case(graph, {"x0": np.array([[0.0003329537]])}, seed=1)
    torch_output = get_backend("torch-eager:cpu:float32").run(case)
    assert not np.all(np.isfinite(torch_output[0]))
    assert judged(case, "float32", torch_output) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: the same graph where tanhshrink is well-conditioned (x = 2), giving inf.
    planted = Case(graph, {"x0": np.array([[2.0]])}, seed=1)
    assert judged(planted, "float32", [np.array([[np.inf]])]) == verdicts.NAN_INF
    assert judged(planted, "float32", [np.array([[0.0]])]) == verdicts.MISMATCH


def test_a_subnormal_read_as_zero_inside_an_op_is_allowed():
    # torch-compile:cuda:float32, case 130: Triton's tanhshrink of a subnormal x is x - 0 = x; float64 gives 0.
    graph = chain((1, 1, 1), ("tanhshrink", {}))
    case = Case(graph, {"x0": np.array([[[3.6293630226e-43]]])}, seed=1)
    assert judged(case, "float32", [np.array([[[3.62936302e-43]]])]) == verdicts.AGREE
    # Planted: a normal-sized result given as zero.
    planted = Case(graph, {"x0": np.array([[[2.0, -3.0]]])}, seed=1)
    assert judged(planted, "float32", [np.zeros((1, 1, 2))]) == verdicts.ALL_ZEROS


def test_a_bfloat16_sum_rounded_to_zero_before_a_pow_is_undefined():
    # torch-eager:cuda:bfloat16, case 143: the cumsum's last entry is -9.4 of magnitudes ~9800, which
    # bfloat16 may round to 0 or across it; pow(., 13.5) is then 0 where the reference is nan.
    graph = chain((1, 1, 4, 1, 1), ("cumsum", {"dim": -3}), ("pow", {}, ["x2"]), extra_inputs=[("x2", (1, 1, 1))])
    x0 = np.array([-3639.8571777344, 1128.0131835938, -1276.6254882812, 3779.0324707031]).reshape(1, 1, 4, 1, 1)
    case = Case(graph, {"x0": x0, "x2": np.array([[[13.5186309814]]])}, seed=1)
    gpu_output = np.full((1, 1, 4, 1, 1), np.nan)
    gpu_output[0, 0, 3] = 0.0
    assert judged(case, "bfloat16", [gpu_output]) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: a sum well below zero (-3.6e3, -2.5e3, -3.8e3, -2.7e3) whose pow is still given as 0
    # (exponent 1.5: past ~100 ** 13.5 bfloat16 may overflow, which leaves a nan undefined too).
    planted = Case(graph, {"x0": x0 * np.array([1, 1, 1, 0.3]).reshape(1, 1, 4, 1, 1), "x2": np.array([[[1.5]]])}, seed=1)
    assert judged(planted, "bfloat16", [gpu_output]) == verdicts.NAN_INF


def test_batch_norm_cancelling_to_zero_in_bfloat16_before_a_log_is_undefined():
    # jax-jit:gpu:bfloat16, case 308: eval batch_norm gives 0.00075 from terms of ~0.28, which bfloat16's
    # x * scale + shift may round to 0: log is -inf where the reference is -7.24.
    graph = chain((1, 2, 3, 1), ("batch_norm", {"eps": 1e-05, "training": False}), ("log", {}))
    arrays = {"x0": np.array([1.9394369125, 0.0, 0.7830576897, 0.0, 0.0, 0.0]).reshape(1, 2, 3, 1),
              "n0.weight": np.array([0.879206121, 0.0]), "n0.bias": np.array([0.2847709656, 0.0]),
              "n0.running_mean": np.array([1.1653478146, 0.0]), "n0.running_var": np.array([1.4001163244, 0.0])}
    case = Case(graph, arrays, seed=1)
    exact = oracle.compute_reference(case, {"bfloat16"}).outputs[0]
    gpu_output = exact.copy()
    gpu_output[0, 0, 2, 0] = -np.inf
    assert judged(case, "bfloat16", [gpu_output]) == verdicts.AGREE
    # Planted: -inf at the entry whose batch_norm is -0.15, far from zero.
    planted = exact.copy()
    planted[0, 0, 0, 0] = -np.inf
    assert judged(case, "bfloat16", [planted]) == verdicts.NAN_INF


def test_an_undefined_entry_stays_undefined_through_a_select():
    # torch-compile:cuda:float32, case 445: amin of (-6.6e-39, 0) is a subnormal, flushed to -0 by
    # Triton: rsqrt is -inf, and where(rsqrt <= amin, rsqrt, amin) selects it. A select reads the
    # undefined rsqrt's nan as false; the oracle must not.
    graph = chain((1, 1, 2), ("amin", {"dims": [-3, -2, -1], "keepdim": False}), ("rsqrt", {}),
                  ("where", {"compare": "le"}, ["n0"]))
    case = Case(graph, {"x0": np.array([[[-6.579875412e-39, 0.0]]])}, seed=1)
    assert judged(case, "float32", [np.array([-np.inf])]) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: amin of (-2, 3) is -2, rsqrt is nan and where selects amin: -inf is a bug.
    planted = Case(graph, {"x0": np.array([[[-2.0, 3.0]]])}, seed=1)
    assert judged(planted, "float32", [np.array([-np.inf])]) == verdicts.NAN_INF


def test_a_sum_of_minus_zero_may_be_plus_zero():
    # jax's cumsum of -0.0 is +0.0 (an honest sum starting from +0), so reciprocal then log1p is
    # log1p(+inf) = inf where the reference's log1p(-inf) is nan.
    graph = chain((1, 2), ("cumsum", {"dim": 1}), ("reciprocal", {}), ("log1p", {}))
    case = Case(graph, {"x0": np.array([[-0.0, -0.0]])}, seed=1)
    jax_output = get_backend("jax-eager:cpu:float32").run(case)
    assert judged(case, "float32", jax_output) in (verdicts.AGREE, verdicts.INVALID)
    # Planted: an input -0.0 the case gives is exact: reciprocal then log1p must be nan (IEEE).
    direct = Graph([TensorSpec("x0", (1, 2))], [Node("n0", "reciprocal", ["x0"], {}), Node("n1", "log1p", ["n0"], {})], ["n1"])
    planted = Case(direct, {"x0": np.array([[-0.0, -0.0]])}, seed=1)
    assert judged(planted, "float32", [np.array([[np.inf, np.inf]])]) == verdicts.NAN_INF


def test_pow_of_minus_inf_to_a_half_is_a_convention():
    # jax-eager:gpu:float32, case 235: IEEE pow(-inf, 0.5) is +inf (jax); numpy's and torch's sqrt gives nan.
    graph = chain((1, 2), ("pow_scalar", {"exponent": 0.5}))
    case = Case(graph, {"x0": np.array([[-np.inf, 4.0]])}, seed=1)
    jax_output = get_backend("jax-eager:cpu:float32").run(case)
    torch_output = get_backend("torch-eager:cpu:float32").run(case)
    assert np.isinf(jax_output[0][0, 0]) and np.isnan(torch_output[0][0, 0])
    assert judged(case, "float32", jax_output) == verdicts.AGREE
    assert judged(case, "float32", torch_output) == verdicts.AGREE
    # Planted: the other entries are still judged (pow(4, 0.5) = 2), and so is pow(-4, 0.5) = nan.
    assert judged(case, "float32", [np.array([[np.inf, 3.0]])]) == verdicts.MISMATCH
    negative = Case(graph, {"x0": np.array([[-4.0, 4.0]])}, seed=1)
    assert judged(negative, "float32", [np.array([[2.0, 2.0]])]) == verdicts.NAN_INF
