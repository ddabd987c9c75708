"""A wrong value that the strict re-run keeps (not TF32's doing) is localized with TF32 off: an
upstream matmul that TF32 alone puts off must not take the blame for a later op's bug. GPU-machine
case 282 was bucketed under a compiled conv2d whose only error was TF32's; here a CPU stand-in
rounds matmul operands to TF32's 10-bit mantissa unless strict."""

from __future__ import annotations

import contextlib

import numpy as np

from fuzzer import verdicts
from fuzzer.backends import get_backend
from fuzzer.backends.torch_eager import TorchEager
from fuzzer.ir import Case, Graph, Node, TensorSpec
from fuzzer.judging.check import check_case

STRICT = {"on": False}


def matmul_in_tf32_unless_strict(xs, ps, attrs):
    import torch

    if STRICT["on"]:
        return torch.matmul(xs[0], xs[1])
    tf32 = [(x.view(torch.int32) & ~0x1FFF).view(torch.float32) for x in xs]  # 10 mantissa bits, as TF32 reads them
    return torch.matmul(*tf32)


def sin_off_by_half(xs, ps, attrs):
    import torch

    return torch.sin(xs[0]) + 0.5


class TF32StandIn(TorchEager):
    def has_precision_policy(self) -> bool:
        return True

    @contextlib.contextmanager
    def precision_context(self, graph):
        STRICT["on"] = self.strict
        try:
            yield
        finally:
            STRICT["on"] = False


def matmul_then_sin() -> Case:
    graph = Graph([TensorSpec("x0", (4, 8)), TensorSpec("x1", (8, 4))],
                  [Node("n0", "matmul", ["x0", "x1"]), Node("n1", "sin", ["n0"])], ["n1"])
    rng = np.random.default_rng(3)
    return Case(graph, {"x0": rng.standard_normal((4, 8)), "x1": rng.standard_normal((8, 4))}, seed=3)


def test_a_bug_the_strict_run_keeps_is_blamed_on_its_op_not_on_tf32s_matmul():
    backend = TF32StandIn("cpu", "float32", {"matmul": matmul_in_tf32_unless_strict, "sin": sin_off_by_half}, name="tf32-standin")
    [finding] = check_case(matmul_then_sin(), [backend]).findings
    assert (finding.verdict, finding.culprit) == (verdicts.MISMATCH, "sin")


def test_tf32s_own_error_is_its_precision_policy_and_stays_on_the_matmul():
    backend = TF32StandIn("cpu", "float32", {"matmul": matmul_in_tf32_unless_strict}, name="tf32-standin")
    [finding] = check_case(matmul_then_sin(), [backend]).findings
    assert (finding.verdict, finding.culprit) == (verdicts.PRECISION_POLICY, "matmul")


OFFSET = {"value": 1e-4}


def tanh_off_unless_strict(xs, ps, attrs):
    """Stands in for cuDNN's RNN: its approximate activations are off by OFFSET, torch's own are not."""
    import torch

    return torch.tanh(xs[0]) + (0.0 if STRICT["on"] else OFFSET["value"])


class CappedPolicyStandIn(TF32StandIn):
    def precision_policy_limit(self, graph) -> float:
        return 100.0  # as for a graph with cuDNN's RNN (fuzzer/backends/torch_eager.py)


def tanh_then_sqrt(x0) -> Case:
    graph = Graph([TensorSpec("x0", (4,))], [Node("n0", "tanh", ["x0"]), Node("n1", "sqrt", ["n0"])], ["n1"])
    return Case(graph, {"x0": np.array(x0)}, seed=3)


def verdict_with_offset(offset: float, x0) -> str:
    OFFSET["value"] = offset
    try:
        backend = CappedPolicyStandIn("cpu", "float32", {"tanh": tanh_off_unless_strict}, name="capped-standin")
        result = check_case(tanh_then_sqrt(x0), [backend])
    finally:
        OFFSET["value"] = 1e-4
    return result.verdicts[0].verdict


def test_a_number_where_the_math_has_none_is_the_capped_policys_when_the_strict_run_agrees():
    # GPU campaign case 117: cuDNN's GRU put an output of -4.4e-5 at +4.4e-5, and sqrt gave 0.0066
    # against nan; a nan-inf on an RNN graph was never precision-policy (the cap measured nothing).
    assert verdict_with_offset(1e-4, [-5e-5, 0.5, 1.0, 2.0]) == verdicts.PRECISION_POLICY
    # The other way, nan where the math has a number, stays a finding, though the strict run agrees.
    assert verdict_with_offset(-1e-4, [5e-5, 0.5, 1.0, 2.0]) == verdicts.NAN_INF
    # So does an error past the cap on the entries both runs compute.
    assert verdict_with_offset(0.5, [-5e-5, 0.5, 1.0, 2.0]) == verdicts.NAN_INF
    # And any class change where an input is not finite (cuDNN's conv drops a -inf input: a bug).
    assert verdict_with_offset(1e-4, [-5e-5, 0.5, 1.0, np.inf]) == verdicts.NAN_INF


def group_norm_with_eps_in_half(xs, ps, attrs):
    """Stands in for torch's CUDA float16 group_norm (pytorch#151110): eps added in float16, so
    1e-12 is 0 and a constant group is 0 / 0."""
    import torch

    x = xs[0]
    grouped = x.reshape(x.shape[0], attrs["num_groups"], -1)
    centred = grouped - grouped.mean(-1, keepdim=True)
    var = (centred * centred).mean(-1, keepdim=True)
    return (centred / torch.sqrt(var + torch.tensor(attrs["eps"], dtype=x.dtype))).reshape(x.shape)


def layer_norm_abs_group_norm(eps: float) -> Case:
    graph = Graph([TensorSpec("x0", (1, 1, 1, 2))],
                  [Node("n0", "layer_norm", ["x0"], {"affine": False, "eps": 1e-05, "normalized_shape": [2]}),
                   Node("n1", "abs", ["n0"]),
                   Node("n2", "group_norm", ["n1"], {"affine": False, "eps": eps, "num_groups": 1})], ["n2"])
    return Case(graph, {"x0": np.array([1.0, 0.55206]).reshape(1, 1, 1, 2)}, seed=1)


def test_a_float16_group_norm_that_rounds_eps_to_zero_is_blamed_not_the_layer_norm_before_it():
    # GPU campaign case 473: the nan was bucketed under layer_norm, so the registry entry of
    # pytorch#151110 missed it. Alone on the equal pair [1, 1], the group_norm was judged by a
    # float16 model that added eps in float16 too: the bug itself, taken for honest.
    backend = TorchEager("cpu", "float16", {"group_norm": group_norm_with_eps_in_half}, name="eps-in-half")
    [finding] = check_case(layer_norm_abs_group_norm(1e-12), [backend]).findings
    assert (finding.verdict, finding.culprit) == (verdicts.NAN_INF, "group_norm")
    # An eps that float16 holds is added right: no finding.
    assert check_case(layer_norm_abs_group_norm(1e-3), [backend]).findings == []


def test_torch_and_our_jax_forms_keep_a_tiny_eps_in_float16():
    # The jax form computes the root in float32, as flax's LayerNorm does; in float16 it made a
    # constant row 0 / 0, a false finding of ours.
    backends = [get_backend(name) for name in ("torch-eager:cpu:float16", "jax-eager:cpu:float16", "jax-jit:cpu:bfloat16")]
    for op, attrs in (("group_norm", {"num_groups": 1}), ("layer_norm", {"normalized_shape": [2]}), ("rms_norm", {"normalized_shape": [2]})):
        graph = Graph([TensorSpec("x0", (1, 1, 1, 2))], [Node("n0", op, ["x0"], {"affine": False, "eps": 1e-12, **attrs})], ["n0"])
        for row in ([1.0, 1.0], [0.0, 0.0]):
            result = check_case(Case(graph, {"x0": np.array(row).reshape(1, 1, 1, 2)}, seed=1), backends)
            assert result.findings == [], (op, row, result.findings)


def rms_norm_nan_row_on_inf(xs, ps, attrs):
    """Stands in for torch's CUDA rms_norm (registry torch-cuda-rms-norm-inf-row): a row that
    holds an inf is nan in every entry, where 0 / inf is 0 for the finite ones."""
    import torch

    x = xs[0]
    out = torch.nn.functional.rms_norm(x, attrs["normalized_shape"], None, attrs["eps"])
    return torch.where(torch.isinf(x).any(), torch.full_like(out, float("nan")), out)


def test_an_op_wrong_on_an_honest_overflow_of_its_operand_is_blamed_not_the_overflowing_op():
    # GPU campaign case 961: float16 expm1(11.09) overflows to inf, honestly (the float64 value
    # 65,517 rounds past float16's largest), and CUDA's rms_norm made 0 / inf nan. Isolation fed
    # rms_norm the rounded 65,504, which it gets right, and the blame went back to expm1.
    graph = Graph([TensorSpec("x0", (1, 2))], [Node("n0", "expm1", ["x0"]),
                                               Node("n1", "rms_norm", ["n0"], {"affine": False, "eps": 0.001, "normalized_shape": [1, 2]})], ["n1"])
    backend = TorchEager("cpu", "float16", {"rms_norm": rms_norm_nan_row_on_inf}, name="rms-norm-inf-row")
    [finding] = check_case(Case(graph, {"x0": np.array([[0.0, 11.09]])}, seed=1), [backend]).findings
    assert (finding.verdict, finding.culprit) == (verdicts.NAN_INF, "rms_norm")


class KernelStandIn(TF32StandIn):
    """Stands in for torch on CUDA with an RNN: a capped policy, a strict run on other kernels (off
    cuDNN) and a strict variant on the default run's own kernels (same_kernels_strict_variant)."""
    keeps_kernels = False

    def precision_policy_limit(self, graph) -> float:
        return 100.0

    def same_kernels_strict_variant(self, graph):
        variant = self.strict_variant()
        variant.keeps_kernels, variant.name = True, f"{self.name}+strict-same-kernels"
        return variant

    @contextlib.contextmanager
    def precision_context(self, graph):
        STRICT["on"], STRICT["default_kernels"] = self.strict, not self.strict or self.keeps_kernels
        try:
            yield
        finally:
            STRICT["on"], STRICT["default_kernels"] = False, True


def tanh_with_errors(tf32: float, kernel: float):
    def tanh(xs, ps, attrs):  # TF32's error unless strict; the default kernel's own wherever it runs
        import torch

        return torch.tanh(xs[0]) + (0.0 if STRICT["on"] else tf32) + (kernel if STRICT.get("default_kernels", True) else 0.0)
    return tanh


def test_an_error_past_the_cap_that_tf32_makes_is_policy_and_one_the_default_kernels_make_without_it_is_not():
    # GPU campaign case 449: cuDNN's GRU with TF32, 115 allowances off where its output cancels; with
    # TF32 off cuDNN's kernel is within the cap, and torch's own agrees: the precision's.
    case = tanh_then_sqrt([0.5, 1.0, 2.0, 3.0])
    verdict = check_case(case, [KernelStandIn("cpu", "float32", {"tanh": tanh_with_errors(0.1, 0.0)}, name="k")]).verdicts[0]
    assert verdict.verdict == verdicts.PRECISION_POLICY, verdict
    assert "error" in verdict.detail and float(verdict.detail.split()[1]) > 100 * verdict.allowed  # past the cap
    # A kernel that errs as much with TF32 off (a GRU that drops its state): a finding, though the
    # strict run on other kernels agrees.
    verdict = check_case(case, [KernelStandIn("cpu", "float32", {"tanh": tanh_with_errors(0.0, 0.1)}, name="k")]).verdicts[0]
    assert verdict.verdict == verdicts.MISMATCH, verdict
