"""Training-graph features (issue 54, items 2-4): double backward (fuzzer/backends/second_order.py),
judged against float64 eager double backward; custom autograd.Function nodes (fuzzer/ops/autograd_function.py),
judged against the plain op's autograd; autocast regions (fuzzer/backends/torch_compile_autocast_grad.py)
with nested autocast(enabled=False) regions (fuzzer/ops/autocast_region.py), judged in the dtype autocast
chose for each op; subgradients at ties, which the perturbed honest runs keep; and short campaigns that find faults planted only there
(tests/plugins/training_faults.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import planted_fault_campaign
from fuzzer import verdicts
from fuzzer.arrays import materialize
from fuzzer.backends import get_backend
from fuzzer.backends.gradients import cotangent, torch_eager_gradients, torch_outputs_and_gradients
from fuzzer.backends.second_order import torch_double_backward
from fuzzer.backends.torch_compile_autocast_grad import autocast_choices
from fuzzer.ir import Case, Graph, Node, TensorSpec
from fuzzer.judging.check import check_case
from fuzzer.ops import get_op, registry
from fuzzer.ops.autograd_function import WRAPPED
from fuzzer.plugins import load_plugins
from fuzzer.reproducers.reproducer import build_script

PLUGIN = str(Path(__file__).parent / "plugins" / "training_faults.py")


def one_op(op: str, *inputs: str, shape=(2, 3)) -> Graph:
    return Graph([TensorSpec(name, shape) for name in dict.fromkeys(inputs)], [Node("n0", op, inputs, {})], ["n0"])


def test_the_second_order_output_is_the_gradient_of_the_gradient_norm():
    """sin: g = c cos x, N = 1/2 sum (c cos x)^2, dN/dx = -c^2 sin x cos x (the math, not autograd's word)."""
    case = materialize(one_op("sin", "x"), 0)
    x, c = case.arrays["x"], cotangent(0, (2, 3))
    gradient, second = torch_eager_gradients(case, "float64", differentiate=torch_double_backward)
    np.testing.assert_allclose(gradient, c * np.cos(x), rtol=1e-12)
    np.testing.assert_allclose(second, -c * c * np.sin(x) * np.cos(x), rtol=1e-12, atol=1e-15)


def test_a_second_derivative_autograd_gives_as_a_zero_tensor_is_zeros():
    """abs: autograd's second derivative is a ZeroTensor, which numpy cannot take."""
    case = materialize(one_op("abs", "x"), 0)
    assert not torch_eager_gradients(case, "float64", differentiate=torch_double_backward)[1].any()


def test_a_graph_with_no_float_output_has_zero_gradients_of_both_orders():
    import torch

    from fuzzer.backends.second_order import torch_functional_double_backward

    x = torch.rand(2, 3)
    argmax, *gradients = torch_functional_double_backward(lambda x: [torch.argmax(x, 1)], [x], [], [torch.ones(2)])
    assert argmax.tolist() == torch.argmax(x, 1).tolist() and len(gradients) == 2 and not any(g.any() for g in gradients)


def test_jax_double_grad_agrees_and_returns_outputs_gradients_and_second_order():
    case = materialize(Graph([TensorSpec("x", (3, 4))], [Node("n0", "tanh", ["x"], {}), Node("n1", "mul", ["n0", "x"], {})], ["n1"]), 0)
    backend = get_backend("jax-double-grad:cpu:float32")
    assert [out.shape for out in backend.run(case)] == [(3, 4)] * 3
    assert check_case(case, [backend]).verdict == verdicts.AGREE


def test_an_op_without_a_second_derivative_declares_it_and_is_not_drawn_there():
    undeclared = sorted(name for name, op in registry().items() if not op.second_order)
    assert undeclared == ["hardsigmoid"]
    with pytest.raises(RuntimeError, match="not implemented"):  # the declaration is torch's fact, checked
        torch_eager_gradients(materialize(one_op("hardsigmoid", "x"), 0), "float64", differentiate=torch_double_backward)
    for kind in ("torch-compile-double-grad", "jax-double-grad"):
        assert not get_backend(kind).supports("hardsigmoid") and get_backend(kind).supports("sin")


@pytest.mark.slow
@pytest.mark.long  # 6 minutes of CI beside another compile (71 s alone); CI keeps the fault's reproducer test below
def test_a_short_campaign_finds_a_double_backward_that_drops_its_second_order_term(tmp_path):
    rows, shrunk = planted_fault_campaign(tmp_path, PLUGIN, "fault-double-grad-sin", "sin", max_cases=1, shrink_time=20)
    assert {row["signature"] for row in rows} == {"mismatch | fault-double-grad-sin | sin@double-vjp"}
    assert [node["op"] for node in shrunk["graph"]["nodes"]] == ["sin"]


@pytest.mark.parametrize("op", WRAPPED)
def test_a_custom_function_s_backward_from_the_math_equals_autograd_of_the_plain_op(op):
    """Broadcast operands summed back to their shapes, and one tensor as both operands (two contributions)."""
    import torch

    custom, plain = get_op(f"custom_grad_{op}"), get_op(op)
    assert custom.custom_gradient_of == op and custom.reference is plain.reference
    x = torch.rand(2, 3, 3, dtype=torch.float64) + 0.5
    operand_sets = [[x]] if plain.arity == (1, 1) else [[x, x[:1, :, :]], [x, x]]
    for operands in operand_sets:
        ours = torch_outputs_and_gradients(lambda *xs: [custom.torch(list(xs), {}, {})], operands)
        stock = torch_outputs_and_gradients(lambda *xs: [plain.torch(list(xs), {}, {})], operands)
        for a, b in zip(ours, stock):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_a_custom_div_s_backward_stays_finite_where_the_divisor_s_square_underflows():
    """Found by a clean campaign: a = 0, b = 3.6e-42 (float32 subnormal); -grad * a / (b * b) was 0 / 0."""
    import torch

    a, b = torch.zeros(1), torch.tensor([3.6e-42, 0.5])
    ours = torch_outputs_and_gradients(lambda *xs: [get_op("custom_grad_div").torch(list(xs), {}, {})], [a, b])
    stock = torch_outputs_and_gradients(lambda *xs: [torch.div(*xs)], [a, b])
    for x, y in zip(ours[1:], stock[1:]):
        torch.testing.assert_close(x, y)


def test_a_custom_function_given_one_tensor_twice_is_judged_against_the_plain_op_s_gradient():
    load_plugins([PLUGIN])
    backend = get_backend("fault-custom-grad-twice")
    twice, distinct = one_op("custom_grad_mul", "x", "x"), one_op("custom_grad_mul", "x", "y")
    assert check_case(materialize(twice, 0), [backend]).verdict == verdicts.MISMATCH
    assert check_case(materialize(distinct, 0), [backend]).verdict == verdicts.AGREE
    assert not get_backend("torch-compile-double-grad").supports("custom_grad_mul"), "pytorch#193279"


@pytest.mark.long  # 28 s of CI; CI keeps the judging test of one tensor given twice above
def test_a_short_campaign_finds_a_custom_function_that_halves_its_gradient_given_one_tensor_twice(tmp_path):
    rows, shrunk = planted_fault_campaign(tmp_path, PLUGIN, "fault-custom-grad-twice", "custom_grad_mul", max_cases=20, shrink_time=20)
    assert {row["signature"] for row in rows} == {"mismatch | fault-custom-grad-twice | custom_grad_mul@vjp"}
    [node] = shrunk["graph"]["nodes"]
    assert node["op"] == "custom_grad_mul" and node["inputs"][0] == node["inputs"][1]


def test_the_dtype_autocast_chose_is_read_from_an_autocast_run_and_a_nested_disabled_region_keeps_float32():
    graph = Graph([TensorSpec("x", (2, 3)), TensorSpec("w", (3, 4))],
                  [Node("n0", "matmul", ["x", "w"], {}), Node("n1", "sin", ["n0"], {}),
                   Node("n2", "autocast_off_matmul", ["x", "w"], {}), Node("n3", "tanh", ["n2"], {})], ["n1", "n3"])
    assert autocast_choices(materialize(graph, 0), "cpu", "bfloat16") == {
        "matmul": "bfloat16", "sin": "bfloat16", "autocast_off_matmul": "float32", "tanh": "float32"}


@pytest.mark.long  # compiles a graph and its shrunk candidates under autocast: ~2 minutes on a loaded 2-core machine
def test_a_short_campaign_finds_a_disabled_autocast_region_ignored_in_backward(tmp_path):
    backend = "fault-autocast-off-ignored-in-backward"
    rows, shrunk = planted_fault_campaign(tmp_path, PLUGIN, backend, "autocast_off_matmul", max_cases=1, shrink_time=30)
    assert {row["signature"] for row in rows} == {f"mismatch | {backend} | autocast_off_matmul@autocast-vjp"}
    assert [node["op"] for node in shrunk["graph"]["nodes"]] == ["autocast_off_matmul"]


def test_a_wrong_subgradient_at_a_tie_is_a_mismatch_and_torch_s_own_agrees():
    """maximum(x, y) where x == y: torch gives each operand half the gradient. The perturbed honest runs
    move equal values alike (gradients.rounding_noise), so they keep the tie, and the allowance stays a
    float32 one; when they broke it, it was the cotangent's size and a whole gradient to both passed."""
    load_plugins([PLUGIN])
    graph = Graph([TensorSpec("x", (2, 4)), TensorSpec("y", (2, 4))], [Node("n0", "maximum", ["x", "y"], {})], ["n0"])
    x = np.array([[0.0, 1.0, -2.0, 3.0], [2.0, 2.0, 0.5, -1.0]])
    case = Case(graph, {"x": x, "y": np.where([[1, 1, 0, 1], [1, 0, 1, 0]], x, -x)}, 0)
    assert check_case(case, [get_backend("torch-module-grad:cpu:float32")]).verdict == verdicts.AGREE
    assert check_case(case, [get_backend("fault-maximum-tie-gradient")]).verdict == verdicts.MISMATCH


@pytest.mark.long  # a fresh-process compile each, 10-20 s; CI keeps the campaigns above
@pytest.mark.parametrize("backend, op, inputs, exit_code", [
    ("fault-double-grad-sin", "sin", ("x",), 1),
    ("jax-double-grad:cpu:float32", "sin", ("x",), 0),
    ("fault-autocast-off-ignored-in-backward", "autocast_off_matmul", ("x", "w"), 1),
    ("torch-compile-autocast-grad:cpu:float32", "autocast_off_matmul", ("x", "w"), 0),
])
def test_a_new_kind_s_reproducer_runs_its_own_transformation(tmp_path, backend, op, inputs, exit_code):
    """The script runs the double backward or the autocast region as the campaign did: exit 1 on a planted fault, 0 on the stock kind."""
    load_plugins([PLUGIN])
    shapes = {"x": (2, 3), "w": (3, 4)}
    case = materialize(Graph([TensorSpec(name, shapes[name]) for name in inputs], [Node("n0", op, inputs, {})], ["n0"]), 0)
    script = tmp_path / "repro.py"
    script.write_text(build_script(case, get_backend(backend), "planted"))
    ran = subprocess.run([sys.executable, script.name], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert ran.returncode == exit_code, ran.stdout[-2000:] + ran.stderr[-2000:]
