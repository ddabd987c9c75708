"""The oracle's registries (fuzzer/oracle/): every honest model and entry rule is a named entry with
its reason, and each case counts and times the models it ran (Reference.model_costs), which a
bench or `fuzz stats` can read without computing anything."""

import numpy as np

from fuzzer import oracle
from fuzzer.arrays import materialize
from fuzzer.ir import Graph, Node, TensorSpec


def exp_log_case(values):
    graph = Graph([TensorSpec("x0", np.shape(values))], [Node("n0", "exp", ["x0"]), Node("n1", "log", ["n0"])], ["n1"])
    case = materialize(graph, 0)
    case.arrays["x0"] = np.asarray(values, dtype=np.float64)
    return case


def test_every_model_and_rule_is_named_once_with_its_reason():
    for registry in (oracle.MODELS, oracle.UNDEFINED_RULES, oracle.VALUE_RULES):
        names = [entry.name for entry in registry]
        assert len(names) == len(set(names)) and all(entry.reason for entry in registry)
    assert oracle.MODELS[0].name == "same-dtype"  # r_d comes first: allowed_error reads it as the first model


def test_model_costs_count_the_runs_a_case_made_and_ask_for_nothing():
    reference = oracle.compute_reference(exp_log_case([[0.5, 2.0]]), {"float16", "float32"})
    assert set(reference.model_costs) == {"float64"}  # the float64 run only: the models wait (paths.LAZY)
    assert reference.models_computed is None
    reference.judged  # asks for the models
    runs = {name: count for name, (count, _) in reference.model_costs.items()}
    # Per dtype: r_d once, two random and two directed rounding runs, one flush run of each kind;
    # float16 also the float32-opmath model. Nothing non-finite: no longdouble run.
    assert runs == {"float64": 1, "same-dtype": 2, "rounding": 4, "directed": 4, "flush-to-zero": 2, "flush-in-range": 2,
                    "float32-opmath": 1}
    assert all(seconds >= 0.0 for _, seconds in reference.model_costs.values())


def test_the_longdouble_run_is_counted_when_it_runs():
    reference = oracle.compute_reference(exp_log_case([[1000.0, 0.5]]), {"float32"})
    # log(exp(1000)) is inf in float64 and 1000 in longdouble: which the defined mask asks.
    assert not reference.defined_nonfinite["float32"][0].any()
    assert reference.model_costs["longdouble-overflow"][0] == 1
