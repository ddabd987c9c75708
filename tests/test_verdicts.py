"""One verdict table: replay, regress and bisect read every verdict the same way, and a derived
backend's finding that its base shares is recorded as the base's (`inherited`)."""

import numpy as np
import pytest

from fuzzer import verdicts
from fuzzer.arrays import materialize
from fuzzer.backends import get_backend
from fuzzer.ir import Graph, Node, TensorSpec
from fuzzer.judging.check import check_case
from fuzzer.oracle import BackendVerdict
from fuzzer.triaging.bisect import NEW, OLD, SKIP, outcome_of


@pytest.mark.parametrize("verdict", verdicts.TABLE, ids=lambda v: v.name)
def test_bisect_and_replay_read_a_verdict_as_the_table_says(verdict):
    old, _ = outcome_of(BackendVerdict("b", verdict.name), find_fix=False)
    if verdict.name == verdicts.UNSUPPORTED:
        assert old == SKIP  # an old release without the op tells nothing either way
        return
    assert old == (OLD if verdict.passes else NEW)
    fix, _ = outcome_of(BackendVerdict("b", verdict.name), find_fix=True)
    assert fix == (NEW if verdict.passes else OLD)
    assert verdict.passes != verdict.is_bug, "a verdict either passes or is a bug"
    assert not verdict.wrong_value or verdict.is_bug
    assert not verdict.shrink or verdict.is_bug, "only bugs are shrunk"


def test_the_worst_verdict_of_a_case_is_the_most_severe_bug():
    assert verdicts.worst(["agree", "precision-policy", "mismatch", "nan-inf"]) == "nan-inf"
    assert verdicts.worst(["agree", "unsupported"]) == "agree"
    assert verdicts.worst([]) == "agree"
    assert verdicts.is_bug("a-verdict-from-a-newer-release"), "unknown verdicts never pass silently"


def sign_of_nan_case():
    graph = Graph([TensorSpec("x0", (4,))], [Node("n0", "sign", ["x0"])], ["n0"])
    case = materialize(graph, 0)
    case.arrays["x0"] = np.array([np.nan, 1.5, -2.0, 0.0])
    return case


def test_a_plugin_is_not_charged_with_its_bases_bug_and_the_base_is_charged_instead():
    """torch.sign(nan) is 0 (pytorch/pytorch#41245): torch-eager's own finding. A plugin that derives
    from torch-eager and overrides another op gets `inherited` for it, naming the base; the base,
    not asked for, is judged too, so the bug is recorded where it lives (an `inherited` bucket
    alone is no bug to triage: the finding would be lost)."""
    import torch

    case = sign_of_nan_case()
    base = get_backend("torch-eager:cpu:float32")
    assert check_case(case, [base]).verdict == verdicts.NAN_INF
    plugin = base.derive("relu-plugin", {"relu": lambda xs, ps, attrs: torch.relu(xs[0])})
    result = check_case(case, [plugin])
    assert result.judged == ["relu-plugin", "torch-eager:cpu:float32"]
    assert [v.verdict for v in result.verdicts] == [verdicts.INHERITED, verdicts.NAN_INF]
    assert "torch-eager:cpu:float32" in result.findings[0].detail
    assert result.findings[1].signature == "nan-inf | torch-eager:cpu:float32 | sign"
    both = check_case(case, [base, plugin])  # asked for already: judged once
    assert both.judged == ["torch-eager:cpu:float32", "relu-plugin"]


def test_a_plugins_own_fault_on_the_same_op_stays_its_finding():
    import torch

    case = sign_of_nan_case()
    wrong_sign = get_backend("torch-eager:cpu:float32").derive("wrong-sign", {"sign": lambda xs, ps, attrs: -torch.sign(xs[0])})
    result = check_case(case, [wrong_sign])
    # Also wrong on the nan entry, like its base, but not only there: the outputs differ, so it is its own.
    assert result.verdict == verdicts.NAN_INF and result.findings[0].signature.startswith("nan-inf | wrong-sign | sign")


def test_flat_outputs_share_the_mismatch_bucket():
    """A bug that gives a flat output on some inputs and not on others is one bucket."""
    assert {verdicts.bucket_verdict(v) for v in ("mismatch", "constant", "all-zeros")} == {"mismatch"}
    assert verdicts.bucket_verdict("nan-inf") == "nan-inf"
    assert verdicts.bucket_verdict("crash") == "crash"


def test_a_nan_inf_its_base_has_is_inherited_even_where_the_finite_entries_round_differently():
    """torch.sign(nan) is 0 on torch eager; a derived backend running the same kernels whose other
    entries round in another order (a strided layout's sums) shares the failure: `inherited`, on
    this case as on one where the rounding matches, not a nan-inf bucket of its own."""
    import torch

    graph = Graph([TensorSpec("x0", (4,))], [Node("n0", "sign", ["x0"]), Node("n1", "exp", ["x0"])], ["n0", "n1"])
    case = materialize(graph, 0)
    case.arrays["x0"] = np.array([np.nan, 1.5, -2.0, 0.0])
    rounds_apart = get_backend("torch-eager:cpu:float32").derive(
        "rounds-apart", {"exp": lambda xs, ps, attrs: torch.exp(xs[0]) * (1 + 2 ** -22)})
    result = check_case(case, [rounds_apart])
    assert [v.verdict for v in result.verdicts] == [verdicts.INHERITED, verdicts.NAN_INF]
