"""The lazy oracle (oracle.paths.LAZY; "Cost" in fuzzer/oracle/paths.py) gives the verdicts and signatures of computing
every honest model: check_case with the lazy path and without it, on cases drawn as a campaign
draws them (its generator, every regime at its share, two input sets a graph), judged by real
backends: torch eager in float32, float16 and bfloat16, jax eager in float32, and torch eager with
every op's result drifted around the allowance, under a name of its own and as another release of
torch eager (so accuracy-regression compares floor verdicts, which check_case judges again in full).

The one documented difference: a case whose every entry is undefined in some honest model is
`invalid` with the models, and `agree` at the floor when every backend agrees at the floor.
"""

import numpy as np
import pytest

from fuzzer import oracle, verdicts
from fuzzer.arrays import materialize, regime_profiles
from fuzzer.backends import get_backend
from fuzzer.drawing.regimes import REGIMES
from fuzzer.ir import Graph, Node, TensorSpec
from fuzzer.judging.check import check_case
from fuzzer.running.execute import run_backend
from fuzzer.running.pipeline import WorkerConfig, case_generator, seed_for

from test_oracle_fast import drifting

TORCH = ["torch-eager:cpu:float32", "torch-eager:cpu:float16", "torch-eager:cpu:bfloat16"]
JAX = "jax-eager:cpu:float32"
JAX_EVERY = 8  # jax eager compiles each op anew for each shape (~0.5 s a new graph): every 8th graph
# The drifted backends judge every other graph: on the rest, the clean backends alone may all agree
# at the floor (the case where `invalid` is not asked).
DRIFT_EVERY = 2


def drawn_cases(graphs: int, seed: int, regimes: list[str] | None = None) -> list:
    """(graph index, case) pairs: `graphs` graphs, two input sets each, of `regimes` (None: all, at
    the campaign's shares)."""
    generator = case_generator(WorkerConfig(backends=TORCH, regimes=regimes), [get_backend(name) for name in TORCH])
    drawn = []
    for index in range(graphs):
        case = generator.case(seed_for(seed, index))
        other = case.seed + 1
        drawn += [(index, case), (index, materialize(case.graph, other, regime_profiles(case.graph, other)))]
    return drawn


DRIFTED = [drifting("torch-eager:cpu:float32", "drift32", 1e-4),
           drifting("torch-eager:cpu:float32", "torch-eager:cpu:float32@drift", 2e-5)]


def judges(index: int) -> list:
    """The backends that judge the cases of graph `index`."""
    chosen = [get_backend(name) for name in TORCH] + (DRIFTED if index % DRIFT_EVERY == 0 else [])
    return chosen + ([get_backend(JAX)] if index % JAX_EVERY == 0 else [])


class OnceRunner:
    """Runs each backend once per case and gives the same outcome after: both paths judge the same
    outputs (the case is kept, so its id is not reused)."""

    def __init__(self):
        self.outcomes = {}

    def __call__(self, backend, case):
        key = (backend.name, id(case))
        if key not in self.outcomes:
            self.outcomes[key] = (case, run_backend(backend, case))
        return self.outcomes[key][1]


def compare_paths(drawn, monkeypatch) -> dict:
    """Asserts, case by case, that the lazy path gives the full path's verdicts and signatures;
    returns counts of what was seen."""
    seen = {"verdicts": set(), "at_floor": 0, "in_full": 0, "invalid_at_floor": 0, "rejudged_pairs": 0,
            "at_floor_nonfinite": 0}
    for index, case in drawn:
        chosen = [b for b in judges(index) if b.supports_graph(case.graph)]
        runner, results = OnceRunner(), {}
        for lazy in (False, True):
            monkeypatch.setattr(oracle.paths, "LAZY", lazy)
            results[lazy] = check_case(case, chosen, runner=runner)
        full, lazy = results[False], results[True]
        finite_everywhere = oracle.compute_reference(case, {"float32"}).finite_everywhere
        where = (case.graph.regime, case.graph.op_names(), [b.name for b in chosen])
        if full.verdict == verdicts.INVALID and lazy.verdict != verdicts.INVALID:
            # The documented difference, and only it.
            assert all(v.verdict == verdicts.AGREE and v.at_floor for v in lazy.verdicts), where
            seen["invalid_at_floor"] += 1
            continue
        assert lazy.verdict == full.verdict, where
        assert [(v.backend, v.verdict) for v in lazy.verdicts] == [(v.backend, v.verdict) for v in full.verdicts], where
        assert [f.to_dict() for f in lazy.findings] == [f.to_dict() for f in full.findings], where
        for lazy_verdict, full_verdict in zip(lazy.verdicts, full.verdicts):
            assert not full_verdict.at_floor
            if lazy_verdict.at_floor:
                assert lazy_verdict.verdict == verdicts.AGREE, where
                seen["at_floor"] += 1
                seen["at_floor_nonfinite"] += not finite_everywhere
            else:
                assert lazy_verdict.to_dict() == full_verdict.to_dict(), where  # the same numbers, bit for bit
                seen["in_full"] += 1
        release_pair = [v for v in lazy.verdicts if v.backend.startswith("torch-eager:cpu:float32")]
        if len(release_pair) == 2 and all(v.verdict == verdicts.AGREE for v in release_pair):
            assert not any(v.at_floor for v in release_pair), where  # judged again in full for the comparison
            seen["rejudged_pairs"] += 1
        seen["verdicts"].update(v.verdict for v in lazy.verdicts)
    return seen


def test_floor_never_exceeds_the_allowance():
    for _, case in drawn_cases(40, 11):
        reference = oracle.compute_reference(case, {"bfloat16", "float16", "float32", "float64"})
        for dtype in reference.same_dtype:
            for index in range(len(reference.outputs)):
                assert oracle.floor_allowance(reference, index, dtype) <= oracle.allowed_error(reference, index, dtype)


def test_a_floor_verdict_says_so_and_reads_back():
    verdict = oracle.BackendVerdict("torch-eager:cpu:float32", verdicts.AGREE, 1e-7, 3e-5, 0, at_floor=True)
    assert verdict.to_dict()["at_floor"] is True
    assert oracle.BackendVerdict.from_dict(verdict.to_dict()) == verdict
    assert "at_floor" not in oracle.BackendVerdict("x", verdicts.AGREE).to_dict()  # older readers see no new key


def atan2_of_computed_zeros():
    """atan2 of relu's computed zeros and negative x: +pi in float64, -pi had the zeros come out -0,
    so every entry is undefined (see "Signed zeros" in fuzzer/oracle/rules.py) while r64 is finite everywhere.
    Returns the case, torch eager, and torch eager with atan2 giving -pi (not at the floor)."""
    import torch

    case = materialize(Graph([TensorSpec("x0", (3, 4)), TensorSpec("x1", (3, 4))],
                             [Node("n0", "relu", ["x0"]), Node("n1", "atan2", ["n0", "x1"])], ["n1"]), 0)
    case.arrays["x0"], case.arrays["x1"] = -np.ones((3, 4)), -np.ones((3, 4))
    eager = get_backend("torch-eager:cpu:float32")
    return case, eager, eager.derive("minus-pi", {"atan2": lambda xs, ps, attrs: -torch.atan2(xs[0], xs[1])})


def test_a_case_every_model_leaves_undefined_is_invalid_unless_every_verdict_agrees_at_the_floor(monkeypatch):
    case, eager, minus_pi = atan2_of_computed_zeros()
    assert check_case(case, [eager]).verdict == verdicts.AGREE
    assert check_case(case, [eager]).verdicts[0].at_floor
    assert check_case(case, [eager, minus_pi]).verdict == verdicts.INVALID  # -pi needs the models: they say invalid
    monkeypatch.setattr(oracle.paths, "LAZY", False)
    assert check_case(case, [eager]).verdict == verdicts.INVALID


@pytest.mark.slow
def test_lazy_verdicts_and_signatures_are_the_full_ones(monkeypatch):
    """Three graphs of each regime but the big contractions, whose 512^3 float64 products would take
    most of the time (a CI-sized sample; the long test below takes thousands of cases of every regime)."""
    regimes = [regime for regime in REGIMES if not regime.contraction_dims]
    drawn = [(index * len(regimes) + k, case) for k, regime in enumerate(regimes)
             for index, case in drawn_cases(3, 1, [regime.name])]
    seen = compare_paths(drawn, monkeypatch)
    # Both paths were taken, also where r64 has non-finite entries, errors fell on both sides of
    # the allowance, and releases were compared.
    assert seen["at_floor"] > 0 and seen["in_full"] > 0 and seen["at_floor_nonfinite"] > 0
    assert {verdicts.AGREE, verdicts.MISMATCH} <= seen["verdicts"]
    assert seen["rejudged_pairs"] > 0


@pytest.mark.long
def test_lazy_verdicts_and_signatures_are_the_full_ones_on_thousands_of_cases(monkeypatch):
    """The same on 2,400 cases (about 9 minutes on 2 busy cores): `pytest -m long -k thousands`."""
    seen = compare_paths(drawn_cases(1200, 7), monkeypatch)
    assert seen["at_floor"] > 0 and seen["in_full"] > 0
    print(seen)


def test_a_non_finite_reference_agrees_at_the_floor_only_where_every_class_matches():
    """exp of +inf, -inf and nan: r64 is +inf, 0 and nan. torch eager gives the same classes and
    agrees at the floor, without the honest models; a backend that gives nan for +inf is judged
    in full, and the models say the math defines +inf there."""
    import torch

    case = materialize(Graph([TensorSpec("x0", (2, 3))], [Node("n0", "exp", ["x0"])], ["n0"]), 0)
    case.arrays["x0"] = np.array([[np.inf, -np.inf, np.nan], [0.5, -1.0, 2.0]])
    eager = get_backend("torch-eager:cpu:float32")
    nan_for_inf = eager.derive("nan-for-inf", {"exp": lambda xs, ps, attrs: torch.nan_to_num(torch.exp(xs[0]), posinf=float("nan"))})
    agreed = check_case(case, [eager])
    assert agreed.verdict == verdicts.AGREE and agreed.verdicts[0].at_floor
    caught = check_case(case, [eager, nan_for_inf])
    assert [(v.verdict, v.at_floor) for v in caught.verdicts] == [(verdicts.AGREE, True), (verdicts.NAN_INF, False)]


def test_the_longdouble_run_waits_for_a_backend_that_contradicts_a_non_finite_entry(monkeypatch):
    """log(exp(1000)) is inf in float64 but 1000 in longdouble: an overflow, which the math does not
    define, so XLA's folding to 1000 agrees. The longdouble run decides only that: a backend of
    r64's classes is judged without it; one that contradicts a non-finite entry computes it."""
    runs = []
    overflow = oracle.models.float64_overflow
    monkeypatch.setattr(oracle.models, "float64_overflow", lambda *args: runs.append(1) or overflow(*args))
    graph = Graph([TensorSpec("x0", (1, 2))], [Node("n0", "exp", ["x0"]), Node("n1", "log", ["n0"])], ["n1"])
    case = materialize(graph, 0)
    case.arrays["x0"] = np.array([[1000.0, 0.5]])

    def verdict(case, outputs) -> str:
        reference = oracle.compute_reference(case, {"float32"})
        return oracle.judge_outputs("b", "float32", outputs, reference).verdict

    assert verdict(case, [np.array([[np.inf, 0.5]])]) == verdicts.AGREE and runs == []
    assert verdict(case, [np.array([[np.inf, 0.7]])]) == verdicts.MISMATCH and runs == []  # judged in full, no contradiction
    assert verdict(case, [np.array([[1000.0, 0.5]])]) == verdicts.AGREE and runs == [1]
    # Planted: a pole (log(0) = -inf in every range) given finite is still caught.
    pole = materialize(Graph([TensorSpec("x0", (1, 2))], [Node("n0", "log", ["x0"])], ["n0"]), 0)
    pole.arrays["x0"] = np.array([[0.0, 0.5]])
    assert verdict(pole, [np.array([[-1000.0, np.log(0.5)]])]) == verdicts.NAN_INF and runs == [1, 1]
