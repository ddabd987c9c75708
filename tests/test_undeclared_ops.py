"""Ops that declare nothing about their numerics (tests/plugins/undeclared_ops.py: torch functions with
torch's float64 run as reference, as the ops of an op database will come) are judged by the generic
honest models without false findings; the same graphs with a real error are still caught.

Each false finding below is a real case of the undeclared-ops campaigns of 2026-12-02
(reports/clean-campaigns/undeclared-ops.md), with the output its backend gives."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from fuzzer import oracle, verdicts
from fuzzer.backends import get_backend
from fuzzer.corpus import Corpus
from fuzzer.ir import Case, Graph, Node, TensorSpec
from fuzzer.ops import registry
from fuzzer.plugins import _LOADED, load_plugin
from fuzzer.running.campaign import CampaignOptions, run_campaign

PLUGINS = Path(__file__).parent / "plugins"
OPS_PLUGIN, FAULT_PLUGIN = PLUGINS / "undeclared_ops.py", PLUGINS / "undeclared_ops_fault.py"


@pytest.fixture(scope="module")
def undeclared_ops():
    """The plugin's ops in the registry for this module's tests, and out of it after (other tests count ops)."""
    spec = importlib.util.spec_from_file_location("undeclared_ops", OPS_PLUGIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    names = [op.name for op in module.OPS]
    load_plugin(str(OPS_PLUGIN))
    yield names
    for name in names:
        registry().pop(name, None)
    for plugin in (OPS_PLUGIN, FAULT_PLUGIN):
        _LOADED.pop(plugin.resolve(), None)


def chain(*ops):
    """x0 (one entry) -> ops[0] -> ops[1] -> ..."""
    nodes = [Node(f"n{index}", op, [f"n{index - 1}" if index else "x0"], {}) for index, op in enumerate(ops)]
    return Graph([TensorSpec("x0", (1,))], nodes, [nodes[-1].name])


def judged(case, dtype, outputs):
    reference = oracle.compute_reference(case, {dtype})
    if not reference.defines_anything:
        return verdicts.INVALID
    return oracle.judge_outputs("backend", dtype, [np.asarray(y, dtype=np.float64) for y in outputs], reference).verdict


def torch_run(case, dtype="float32"):
    return get_backend(f"torch-eager:cpu:{dtype}").run(case)


def test_the_plugin_ops_declare_nothing(undeclared_ops):
    assert len(undeclared_ops) >= 20 and not set(undeclared_ops) & {"floor", "round", "sign", "log1p", "expm1"}
    assert not any(registry()[name].declares_numerics for name in undeclared_ops)
    assert registry()["log"].declares_numerics and registry()["relu"].declares_numerics


def test_a_result_whose_sign_the_op_rounding_decides_is_undefined(undeclared_ops):
    # sinc(1) is sin(pi x) / (pi x): 3.9e-17 in float64, -2.8e-8 in float32 (pi rounds), so log2 of it
    # is nan where the reference's is -54.5: the op on absolute values bounds none of that.
    graph = chain("sinc", "log2", "erfc")
    case = Case(graph, {"x0": np.array([1.0])}, seed=1)
    output = torch_run(case)
    assert np.isnan(output[0]).all()
    assert judged(case, "float32", output) in (verdicts.AGREE, verdicts.INVALID)
    planted = Case(graph, {"x0": np.array([0.5])}, seed=1)  # sinc(0.5) = 0.64: well away from 0
    assert judged(planted, "float32", [np.array([np.nan])]) == verdicts.NAN_INF
    assert judged(planted, "float32", [np.array([1.5])]) == verdicts.MISMATCH


def test_a_cancellation_inside_an_op_widens_its_rounding(undeclared_ops):
    # digamma(-1.6e-7) is 6.07e6, whose frac is 0.55 in float64 and 0 in float32 (spacing 0.5 there):
    # ndtri(0) = -inf where the reference is 0.12.
    graph = chain("digamma", "frac", "ndtri")
    case = Case(graph, {"x0": np.array([-1.647129437287731e-07])}, seed=1)
    output = torch_run(case)
    assert np.isneginf(output[0]).all()
    assert judged(case, "float32", output) in (verdicts.AGREE, verdicts.INVALID)
    planted = Case(graph, {"x0": np.array([2.5])}, seed=1)  # digamma(2.5) = 0.70: frac is exact
    assert judged(planted, "float32", [np.array([-np.inf])]) == verdicts.NAN_INF


def test_a_computed_operand_within_rounding_of_a_pole_is_undefined(undeclared_ops):
    # i0(-0.00122) is 1 + 3.7e-7 in float64 (logit's nan) and 1.0 in torch's float32 (logit's inf).
    graph = chain("i0", "logit")
    case = Case(graph, {"x0": np.array([-0.0012215549359098077])}, seed=1)
    output = torch_run(case)
    assert np.isposinf(output[0]).all()
    assert judged(case, "float32", output) in (verdicts.AGREE, verdicts.INVALID)
    planted = Case(graph, {"x0": np.array([2.0])}, seed=1)  # logit(i0(2) = 2.28) is nan, far from the pole
    assert judged(planted, "float32", [np.array([np.inf])]) == verdicts.NAN_INF


def test_the_sign_of_a_computed_nan_decides_nothing(undeclared_ops):
    # erfinv(-3) is nan; copysign(1, nan) is 1 in torch's float64 and -1 in its bfloat16.
    graph = Graph([TensorSpec("x0", (1,)), TensorSpec("x1", (1,))],
                  [Node("n0", "erfinv", ["x0"], {}), Node("n1", "copysign", ["x1", "n0"], {})], ["n1"])
    case = Case(graph, {"x0": np.array([-3.0]), "x1": np.array([1.0])}, seed=1)
    output = torch_run(case, "bfloat16")
    assert judged(case, "bfloat16", output) in (verdicts.AGREE, verdicts.INVALID)
    planted = Case(graph, {"x0": np.array([-0.5]), "x1": np.array([1.0])}, seed=1)  # copysign(1, -0.48) = -1
    assert judged(planted, "bfloat16", [np.array([1.0])]) == verdicts.MISMATCH


def test_a_steep_op_that_overflows_early_is_still_a_finding(undeclared_ops):
    # torch's float32 i1(-89.83) is -inf, while the result, -4.3e37, is a float32 number: a real
    # (accuracy) bug that the measured reach (90 roundoffs of the result here) must not excuse.
    case = Case(chain("i1"), {"x0": np.array([-89.82891845703125])}, seed=1)
    output = torch_run(case)
    assert np.isneginf(output[0]).all()
    assert judged(case, "float32", output) == verdicts.NAN_INF


def test_a_short_campaign_of_undeclared_ops_finds_only_the_planted_bug(tmp_path, undeclared_ops):
    # i0, i1 (early overflow) and jax's digamma(0) (nan, where scipy and torch give -inf) are real
    # findings of the long campaigns, left out here; torch's digamma is drawn.
    ops = [name for name in undeclared_ops if name not in ("i0", "i1")]
    corpus = Corpus(tmp_path / "c.db")
    progress = run_campaign(corpus, CampaignOptions(
        backends=["torch-eager:cpu:float32", "torch-eager:cpu:bfloat16", "undeclared-trunc-as-floor"],
        plugins=[str(OPS_PLUGIN), str(FAULT_PLUGIN)], ops=ops, max_cases=20, workers=1, shrink_time=0, seed=7))
    assert progress.status == "finished" and progress.checked > 10
    found = {bucket["signature"] for bucket in corpus.buckets()}
    assert found and all("undeclared-trunc-as-floor" in signature for signature in found), found


def test_a_plugin_op_may_not_take_a_declared_name_and_must_be_an_opdef():
    from fuzzer.errors import UserError
    from fuzzer.plugins import PluginAPI

    relu = registry()["relu"]
    with pytest.raises(UserError, match="'relu' is already declared"):
        PluginAPI("'mine.py'").add_op(relu)
    with pytest.raises(UserError, match="add_op needs an OpDef"):
        PluginAPI("'mine.py'").add_op({"name": "relu2"})
    assert registry()["relu"] is relu
