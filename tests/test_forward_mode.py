"""Forward-mode AD (fuzzer/backends/forward_mode.py): torch-jvp (eager torch.func.jvp), torch-compile-jvp and
jax-jvp return the outputs, then J t of each output along fixed tangents; torch's are judged against
float64 eager reverse mode (the gradient of <J^T u, t> w.r.t. u), jax's against its float64 eager jvp.
torch-compile-hvp and jax-hvp return H t by forward over reverse (the hessians' composition), judged
against reverse over reverse (fuzzer/backends/second_order.py). Faults planted in a forward-mode rule
only (tests/plugins/training_faults.py) are found and reproduced."""

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
from fuzzer.backends.forward_mode import tangent, torch_functional_jvp, torch_jvp_by_reverse, torch_tangents
from fuzzer.backends.gradients import cotangent
from fuzzer.backends.second_order import torch_forward_over_reverse, torch_hvp_by_reverse
from fuzzer.ir import Graph, Node, TensorSpec
from fuzzer.judging.check import check_case
from fuzzer.plugins import load_plugins
from fuzzer.reproducers.reproducer import build_script

PLUGIN = str(Path(__file__).parent / "plugins" / "training_faults.py")
KINDS = ("torch-jvp", "torch-compile-jvp", "jax-jvp", "torch-compile-hvp", "jax-hvp")
# linear -> batch_norm (eval) -> tanh: weights that get tangents, running statistics that get none.
GRAPH = Graph(inputs=[TensorSpec("x", (4, 3))],
              nodes=[Node("n0", "linear", ["x"], {"out_features": 5, "bias": True}),
                     Node("n1", "batch_norm", ["n0"], {"eps": 1e-5, "training": False}), Node("n2", "tanh", ["n1"], {})],
              outputs=["n2"])


def one_op(op: str, *inputs: str, shape=(2, 3)) -> Graph:
    return Graph([TensorSpec(name, shape) for name in dict.fromkeys(inputs)], [Node("n0", op, list(inputs), {})], ["n0"])


def test_reverse_mode_s_jvp_is_forward_mode_s_and_the_finite_difference_s():
    import torch

    def fn(x, w):
        return [torch.nn.functional.layer_norm(x @ w, (4,)).sin(), (x * x).sum(-1)]

    args = [torch.rand(3, 4, dtype=torch.float64), torch.rand(4, 4, dtype=torch.float64)]
    reverse = torch_jvp_by_reverse(fn, args)
    forward = torch_functional_jvp(fn, args, (), torch_tangents(args))
    for a, b in zip(reverse, forward):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    step = 1e-6  # central difference along the tangents
    moved = [[arg + sign * step * t for arg, t in zip(args, torch_tangents(args))] for sign in (1, -1)]
    difference = [(up - down) / (2 * step) for up, down in zip(fn(*moved[0]), fn(*moved[1]))]
    for derived, expected in zip(reverse[2:], difference):
        torch.testing.assert_close(derived, expected, rtol=1e-6, atol=1e-6)


def test_reverse_over_reverse_s_hvp_is_forward_over_reverse_s_and_the_gradient_s_difference():
    import torch

    def fn(x, w):
        return [torch.nn.functional.layer_norm(x @ w, (4,)).sin(), (x * x).sum(-1)]

    args = [torch.rand(3, 4, dtype=torch.float64), torch.rand(4, 4, dtype=torch.float64)]
    reverse, forward = torch_hvp_by_reverse(fn, args), torch_forward_over_reverse(fn, args)
    for a, b in zip(reverse, forward):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    step = 1e-6  # central difference of the gradient along the tangents

    def gradient(values):
        values = [v.detach().requires_grad_(True) for v in values]
        outputs = fn(*values)
        loss = sum((out * torch.as_tensor(cotangent(i, out.shape))).sum() for i, out in enumerate(outputs))
        return torch.autograd.grad(loss, values)

    moved = [[arg + sign * step * t for arg, t in zip(args, torch_tangents(args))] for sign in (1, -1)]
    for derived, up, down in zip(reverse[2:], gradient(moved[0]), gradient(moved[1])):
        torch.testing.assert_close(derived, (up - down) / (2 * step), rtol=1e-5, atol=1e-5)


def test_tangents_are_quarter_integers_of_their_own_stream():
    t = tangent(0, (5, 7))
    assert t.shape == (5, 7) and np.all(t * 4 == np.round(t * 4)) and np.abs(t).max() <= 1
    assert not np.array_equal(t, cotangent(0, (5, 7)))  # not the cotangents of the same index and shape


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_agrees_on_a_graph_with_weights_and_returns_outputs_then_tangents(kind):
    backend = get_backend(f"{kind}:cpu:float32")
    graph = GRAPH if kind.startswith("torch") else one_op("tanh", "x")
    case = materialize(graph, 0)
    assert check_case(case, [backend]).verdict == verdicts.AGREE
    outputs = backend.run(case)
    # outputs, then J t per output, or H t per input and weight (x, n0.weight, n0.bias, n1.weight, n1.bias)
    hvp = kind.endswith("hvp")
    assert len(outputs) == 1 + (len(case.arrays) - 2 if hvp and kind.startswith("torch") else 1)  # no running statistics
    assert outputs[1].shape == (case.arrays["x"] if hvp else outputs[0]).shape and np.abs(outputs[1]).max() > 0


def test_a_tangent_is_zero_where_no_float_output_depends_on_the_inputs():
    case = materialize(Graph([TensorSpec("x", (3, 4))], [Node("n0", "argmax", ["x"], {"dim": 1, "keepdim": False})], ["n0"]), 0)
    backend = get_backend("torch-jvp:cpu:float32")
    assert check_case(case, [backend]).verdict == verdicts.AGREE
    assert not np.any(backend.run(case)[1])


def test_an_expanded_input_goes_in_as_a_contiguous_copy():
    """make_dual copies a tangent into its primal's strides, which a stride-0 primal cannot hold (torch 2.13, 2.15)."""
    import torch

    x = torch.zeros(1, 3).expand(2, 3)
    outputs = torch_functional_jvp(lambda a: [a.sin()], [x], (), torch_tangents([x]))
    torch.testing.assert_close(outputs[1], torch.as_tensor(tangent(0, (2, 3)), dtype=torch.float32))


def test_torch_s_documented_forward_mode_gaps_give_no_verdict():
    from fuzzer.backends.forward_mode import FORWARD_AD_GAPS
    from fuzzer.errors import OpUnsupported, documented_gaps

    for message in ("Trying to use forward AD with mkldnn_rnn_layer that does not support it because it has not been "
                    "implemented yet.", "Cannot access storage of TensorWrapper"):
        with pytest.raises(OpUnsupported, match=message[:20]), documented_gaps(FORWARD_AD_GAPS):
            raise NotImplementedError(message)
    with pytest.raises(RuntimeError), documented_gaps(FORWARD_AD_GAPS):  # anything else stays the case's crash
        raise RuntimeError("shape '[2, 3]' is invalid for input of size 7")


def test_the_hessian_vector_product_of_an_expanded_input_is_its_contiguous_copy_s():
    import torch

    x = torch.rand(1, 3, dtype=torch.float64).expand(2, 3)
    fn = lambda a: [(a * a).sin()]  # noqa: E731
    expanded, copied = torch_forward_over_reverse(fn, [x]), torch_forward_over_reverse(fn, [x.contiguous()])
    for a, b in zip(expanded, copied):
        torch.testing.assert_close(a, b)


def test_where_the_modes_take_different_conventions_the_entry_is_not_judged():
    """maximum(nan, 0): reverse mode passes t_a + t_b, forward mode t_b (torch 2.13); cos(-inf - floor(x)):
    reverse mode multiplies floor's zero derivative into the nan, forward mode gets nan * 0 (both found by a
    campaign). Neither is a finding; a tangent that drops a term away from such points is."""
    backend = get_backend("torch-jvp:cpu:float32")
    nan_operand = materialize(one_op("maximum", "a", "b", shape=(1,)), 0)
    nan_operand.arrays.update(a=np.array([np.nan]), b=np.array([0.0]))
    singular = materialize(Graph([TensorSpec("x", (1,))], [Node("n0", "floor", ["x"], {}), Node("n1", "rsub", ["n0"], {"value": "-inf"}),
                                                         Node("n2", "cos", ["n1"], {})], ["n2"]), 0)
    singular.arrays["x"] = np.array([0.0])
    for case in (nan_operand, singular):
        assert check_case(case, [backend]).verdict == verdicts.AGREE
    load_plugins([PLUGIN])
    apart = materialize(one_op("mul", "a", "b"), 0)
    assert check_case(apart, [get_backend("fault-jvp-mul-drops-a-term")]).verdict == verdicts.MISMATCH
    assert check_case(apart, [get_backend("torch-module-grad:cpu:float32")]).verdict == verdicts.AGREE


def test_inductor_s_forward_mode_roundings_found_by_campaigns_are_honest():
    """Both from clean campaigns (torch 2.13): std over [0, 2.8e-40] (float32 subnormal) has derivative 0.5,
    inductor reads the subnormal as 0 (DAZ) and gives 0 (`inputs_flushed`); var over a constant column is
    0 by cancellation, inductor sums the mean in another order and gets -1e-7 at x = -1.108 (the scale floor)."""
    backend = get_backend("torch-compile-jvp:cpu:float32")
    reduce = {"correction": 0, "dim": 0, "keepdim": False}
    std = materialize(Graph([TensorSpec("x", (2, 1))], [Node("n0", "std", ["x"], reduce)], ["n0"]), 0)
    std.arrays["x"] = np.array([[0.0], [2.8427020906986104e-40]])
    var = materialize(Graph([TensorSpec("x", (8, 1))], [Node("n0", "var", ["x"], reduce)], ["n0"]), 0)
    var.arrays["x"] = np.full((8, 1), -1.1080601215362549)
    for case in (std, var):
        assert check_case(case, [backend]).verdict == verdicts.AGREE


def test_a_hessian_vector_product_that_drops_its_second_order_term_is_a_finding():
    load_plugins([PLUGIN])
    case = materialize(one_op("sin", "x"), 0)
    # sin alone: H t is its second-order term only, so dropped it leaves zeros where the reference is not
    assert check_case(case, [get_backend("fault-hvp-sin")]).verdict == verdicts.ALL_ZEROS


@pytest.mark.long  # CI's 15 minutes: the script test below runs the same fault's case and exits 1
def test_a_short_campaign_finds_a_forward_mode_rule_that_drops_a_term(tmp_path):
    rows, shrunk = planted_fault_campaign(tmp_path, PLUGIN, "fault-jvp-mul-drops-a-term", "mul", max_cases=3, shrink_time=10)
    assert {row["signature"] for row in rows} == {"mismatch | fault-jvp-mul-drops-a-term | mul@jvp"}
    assert [node["op"] for node in shrunk["graph"]["nodes"]] == ["mul"]


@pytest.mark.parametrize("backend, exit_code", [("fault-jvp-mul-drops-a-term", 1), ("torch-jvp:cpu:float32", 0),
                                                pytest.param("torch-compile-jvp:cpu:float32", 0, marks=pytest.mark.long),
                                                ("jax-jvp:cpu:float32", 0), ("jax-hvp:cpu:float32", 0),
                                                pytest.param("torch-compile-hvp:cpu:float32", 0, marks=pytest.mark.long)])
def test_the_script_runs_forward_mode_as_the_campaign_did(tmp_path, backend, exit_code):
    load_plugins([PLUGIN])
    case = materialize(one_op("mul", "a", "b"), 0)
    script = tmp_path / "repro.py"
    script.write_text(build_script(case, get_backend(backend), "planted"))
    assert "jvp" in script.read_text()
    ran = subprocess.run([sys.executable, script.name], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert ran.returncode == exit_code, ran.stdout[-2000:] + ran.stderr[-2000:]
