"""check_case's gates (check.GATES): what a verdict becomes after the oracle judged it. Their order is
pinned here, and each gate rewrites a real case's verdicts that, with that gate left out, stay as
the oracle judged them. The cases are the other tests' (named where they come from)."""

import pytest

from fuzzer import verdicts
from fuzzer.backends import get_backend
from fuzzer.judging import check
from fuzzer.judging.check import check_case

from test_accuracy_against_eager import sloppy_jit, sum_case
from test_configurations import case_of
from test_oracle import derived, transpose_layer_norm_case
from test_oracle_fast import drifting
from test_oracle_lazy import atan2_of_computed_zeros
from test_precision_culprit import TF32StandIn, matmul_in_tf32_unless_strict, matmul_then_sin, tanh_with_errors
from test_strict_contracts import cpu_scope, one_node_case, planted  # noqa: F401 (fixtures the contract case asks for)
from test_verdicts import sign_of_nan_case

ORDER = ("precision-policy", "rerun", "inherited", "contract", "in-full-where-compared", "invalid", "accuracy-regression",
         "regression-policy")


def test_the_gates_come_in_this_order_each_with_its_reason():
    assert tuple(gate.name for gate in check.GATES) == ORDER
    assert all(gate.reason.endswith(".") for gate in check.GATES)
    # The gates of one backend's verdict come first: check_case runs them as each backend runs.
    assert [gate.each for gate in check.GATES] == [True] * 4 + [False] * 4


def precision_policy():
    """test_precision_culprit: a matmul off by TF32 alone."""
    backend = TF32StandIn("cpu", "float32", {"matmul": matmul_in_tf32_unless_strict}, name="tf32-standin")
    return matmul_then_sin(), [backend], [verdicts.PRECISION_POLICY], [verdicts.MISMATCH]


def rerun():
    """test_oracle: a layer_norm that returns random numbers."""
    import torch

    backend = derived("noisy", "layer_norm", lambda xs, ps, attrs: torch.rand_like(xs[0]))
    return transpose_layer_norm_case(), [backend], [verdicts.NONDETERMINISTIC], [verdicts.MISMATCH]


def inherited():
    """test_verdicts: torch.sign(nan) is 0 in torch eager, and so in a plugin that overrides relu."""
    import torch

    plugin = get_backend("torch-eager:cpu:float32").derive("relu-plugin", {"relu": lambda xs, ps, attrs: torch.relu(xs[0])})
    return sign_of_nan_case(), [plugin], [verdicts.INHERITED, verdicts.NAN_INF], [verdicts.NAN_INF]


def contract():
    """test_strict_contracts: a relu one ulp up where the batch has one row, under batch_invariant=True and a
    scope that covers the CPU: far inside the oracle's allowance, outside the contract's none."""
    return one_node_case("relu", (6, 5)), [get_backend("batch-size-relu")], [f"{verdicts.CONTRACT} at the floor"], [
        f"{verdicts.AGREE} at the floor"]


# The fixtures a gate's case needs: the planted plugin, and the scope file that puts the CPU in the contract.
CASE_FIXTURES = {"contract": ("planted", "cpu_scope")}


def in_full_where_compared():
    """test_oracle_lazy: torch eager and another release of it with every result drifted by 2e-5,
    both within the floor: judged again in full, so the release's accuracy regression is measured
    against the full allowance."""
    backends = [get_backend("torch-eager:cpu:float32"), drifting("torch-eager:cpu:float32", "torch-eager:cpu:float32@drift", 2e-5)]
    return case_of("tanh", [(4, 5)]), backends, [verdicts.AGREE, verdicts.ACCURACY_REGRESSION], [
        f"{verdicts.AGREE} at the floor", f"{verdicts.ACCURACY_REGRESSION} at the floor"]


def invalid():
    """test_oracle_lazy: atan2 of computed zeros, every entry undefined, and a backend whose -pi needs the honest models."""
    case, eager, minus_pi = atan2_of_computed_zeros()
    return case, [eager, minus_pi], [verdicts.INVALID], [f"{verdicts.AGREE} at the floor", verdicts.AGREE]


def accuracy_regression():
    """test_accuracy_against_eager: a compiled sum within its allowance, far less accurate than eager's."""
    backends = [get_backend("jax-eager:cpu:float32"), sloppy_jit()]
    return sum_case(), backends, [verdicts.AGREE, verdicts.ACCURACY_REGRESSION], [verdicts.AGREE] * 2


def regression_policy():
    """Another release of torch eager whose tanh is off by half of each entry's allowance with TF32 (a stand-in,
    test_precision_culprit) and exact without: ten times eager's error is that release's precision."""
    import torch

    from fuzzer.oracle import compute_reference
    from fuzzer.oracle.compare import entry_allowance

    case = case_of("tanh", [(4, 5)])
    # Half of each entry's own allowance (oracle/compare.py, "Per entry"): within it, ten times eager's error.
    half = torch.as_tensor(0.5 * entry_allowance(compute_reference(case, {"float32"}), 0, "float32"), dtype=torch.float32)
    release = TF32StandIn("cpu", "float32", {"tanh": tanh_with_errors(half, 0.0)}, name="torch-eager:cpu:float32@tf32")
    return case, [get_backend("torch-eager:cpu:float32"), release], [verdicts.AGREE, verdicts.PRECISION_POLICY], [
        verdicts.AGREE, verdicts.ACCURACY_REGRESSION]


CASES = {function.__name__.replace("_", "-"): function for function in (
    precision_policy, rerun, inherited, contract, in_full_where_compared, invalid, accuracy_regression, regression_policy)}


def gated(result) -> list[str]:
    """Each backend's verdict; the case's where it has none (invalid)."""
    return [verdict.verdict + (" at the floor" if verdict.at_floor else "") for verdict in result.verdicts] or [result.verdict]


@pytest.mark.parametrize("name", ORDER)
def test_each_gate_rewrites_its_case_which_without_it_keeps_the_oracles_verdicts(name, monkeypatch, request):
    for fixture in CASE_FIXTURES.get(name, ()):
        request.getfixturevalue(fixture)
    case, backends, with_gate, without_gate = CASES[name]()
    assert gated(check_case(case, backends)) == with_gate
    monkeypatch.setattr(check, "GATES", tuple(gate for gate in check.GATES if gate.name != name))
    assert gated(check_case(case, backends)) == without_gate
