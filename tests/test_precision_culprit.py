"""A wrong value that the strict re-run keeps (not TF32's doing) is localized with TF32 off: an
upstream matmul that TF32 alone puts off must not take the blame for a later op's bug. GPU-machine
case 282 was bucketed under a compiled conv2d whose only error was TF32's; here a CPU stand-in
rounds matmul operands to TF32's 10-bit mantissa unless strict."""

from __future__ import annotations

import contextlib

import numpy as np

from fuzzer import verdicts
from fuzzer.backends.torch_eager import TorchEager
from fuzzer.check import check_case
from fuzzer.ir import Case, Graph, Node, TensorSpec

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
