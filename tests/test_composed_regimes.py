"""Composed regimes and big contractions (fuzzer/drawing/regimes.py): a composition draws cases with the
features of both its parts, its name survives JSON, the shrinker and `--regimes`, and the faults
that live only where two regions meet, in an all -inf row or in a contraction with every dim
large (tests/plugins/composed_faults.py) are found with the feature and missed without it."""

import json
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from fuzzer.arrays import from_npy_bytes, input_values, materialize, regime_profiles, to_npy_bytes
from fuzzer.backends import get_backend
from fuzzer.drawing.generate import BIG_CONTRACTIONS, CaseGenerator
from fuzzer.drawing.regimes import BY_NAME, COMPOSITIONS, CONTRACTION_DIMS, DEFAULT, REGIMES, Regime, get_regime, parse_regime_list
from fuzzer.errors import UserError
from fuzzer.ir import Graph, infer_shapes
from fuzzer.judging.check import check_case, still_fails_predicate
from fuzzer.plugins import load_plugins
from fuzzer.running.pipeline import seed_for
from fuzzer.shrinking.shrink import shrink_case

PLUGIN = str(Path(__file__).parent / "plugins" / "composed_faults.py")


def set_features(regime: Regime) -> set[str]:
    return {f.name for f in fields(Regime)[3:] if getattr(regime, f.name) != f.default}


def test_each_drawn_composition_joins_two_regimes_that_set_different_features():
    for first, second, _ in COMPOSITIONS:
        a, b = BY_NAME[first], BY_NAME[second]
        assert not (set_features(a) & set_features(b)) - {"max_elements"}, (first, second)
        composed = BY_NAME[f"{first}+{second}"]
        assert set_features(composed) == set_features(a) | set_features(b)
    assert sum(r.weight for r in REGIMES if "+" in r.name) == 10


def test_a_composed_name_round_trips_through_json_and_older_names_still_parse():
    graph = CaseGenerator(["relu"], 1, parse_regime_list("large-op+special-values")).case(0).graph
    assert graph.regime == "large-op+special-values"
    assert Graph.from_json(graph.to_json()) == graph
    assert get_regime("large-op+special-values") is BY_NAME["large-op+special-values"]
    assert get_regime("layout") is BY_NAME["layout"] and get_regime("") is DEFAULT and get_regime("gone") is DEFAULT
    # A composition no longer drawn (COMPOSITIONS changed) still means both parts.
    assert set_features(get_regime("size-1+special-values")) == {"size_one_share", "value_profiles"}
    with pytest.raises(UserError, match="regime"):
        Graph.from_dict({**graph.to_dict(), "regime": "large op;"})


def test_the_regimes_option_takes_compositions_and_refuses_unknown_names():
    assert [r.name for r in parse_regime_list("small, large-op+layout")] == ["small", "large-op+layout"]
    with pytest.raises(UserError, match="Unknown regime 'large-op\\+small'"):
        parse_regime_list("large-op+small")


def test_fuzz_regimes_lists_the_compositions_and_run_refuses_an_unknown_one(tmp_path):
    from click.testing import CliRunner

    from fuzzer.cli import main

    listed = CliRunner().invoke(main, ["regimes", "--json"])
    rows = {row["name"]: row["percent"] for row in json.loads(listed.output)}
    assert rows["large-op+special-values"] == 2 and rows["big-contraction"] == 3 and sum(rows.values()) == 100
    refused = CliRunner().invoke(main, ["run", "--db", str(tmp_path / "f.db"), "--regimes", "layout+bogus", "--max-cases", "1"])
    assert refused.exit_code == 2 and "Unknown regime 'layout+bogus'" in refused.output


def test_a_composed_case_has_the_features_of_both_parts():
    generator = CaseGenerator(None, 4, parse_regime_list("large-op+special-values,layout+special-values"))
    cases = [generator.case(seed) for seed in range(40)]
    large = [c for c in cases if c.graph.regime == "large-op+special-values"]
    laid_out = [c for c in cases if c.graph.regime == "layout+special-values"]
    assert any(max(np.prod(spec.shape) for spec in c.graph.inputs) > 20_000
               and not all(np.isfinite(c.arrays[s.name]).all() for s in c.graph.inputs) for c in large)
    assert any(spec.layout != "contiguous" for c in laid_out for spec in c.graph.inputs)


def test_a_row_fill_sets_a_whole_row_along_every_axis():
    for seed in range(6):
        values = input_values(np.random.default_rng(seed), (3, 4, 5), "special-rows")
        for axis in range(3):
            rows = np.moveaxis(values, axis, -1)
            same = np.all(rows == rows[..., :1], axis=-1) | np.all(np.isnan(rows), axis=-1)
            assert same.any(), (seed, axis)
        assert np.isfinite(values).sum() >= values.size - (4 + 5 + 3), "only the three rows are filled"


def test_big_contraction_cases_have_every_dim_large_and_pass_the_resource_bounds():
    generator = CaseGenerator(list(BIG_CONTRACTIONS), 1, parse_regime_list("big-contraction"))
    ops = set()
    for seed in range(24):
        case = generator.case(seed)
        node = case.graph.nodes[0]
        shapes = infer_shapes(case.graph)  # raises past the per-tensor and per-case bounds
        first = case.graph.inputs[0].shape
        if node.op in ("conv1d", "conv2d"):
            large = [first[1], node.attrs["out_channels"], int(np.prod(shapes[node.name][2:]))]
        elif node.op == "linear":
            large = [first[-2], first[-1], node.attrs["out_features"]]
        else:
            large = [first[-2], first[-1], shapes[node.name][-1]]
        assert min(large) >= 121 and max(large) <= max(CONTRACTION_DIMS), (node.op, large)
        assert all(from_npy_bytes(to_npy_bytes(a), shape=a.shape).shape == a.shape for a in case.arrays.values())
        ops.add(node.op)
    assert ops == set(BIG_CONTRACTIONS)


def test_the_reference_agrees_with_torch_eager_on_big_contractions():
    """No false finding: float32 sums of 512 products stay within the tolerance model."""
    generator = CaseGenerator(list(BIG_CONTRACTIONS), 1, parse_regime_list("big-contraction"))
    eager = get_backend("torch-eager:cpu:float32")
    for seed in range(6):
        case = generator.case(seed)
        result = check_case(case, [eager])
        assert not result.findings, (case.graph.nodes[0], result.verdicts)


def first_finding(backend: str, ops: list[str], regimes: str, graphs: int, profile_off: dict | None = None):
    """(case, signatures) of the first finding of a seeded in-process campaign of `graphs` graphs,
    two input sets each as `fuzz run` draws them; `profile_off` maps a value profile to the one
    drawn instead (a feature switched off). None when nothing is found."""
    load_plugins([PLUGIN])
    generator = CaseGenerator(ops, 4, parse_regime_list(regimes))
    for index in range(graphs):
        drawn = generator.case(seed_for(0, index))
        for seed in (drawn.seed, drawn.seed + 1):
            profiles = {name: (profile_off or {}).get(p, p) for name, p in regime_profiles(drawn.graph, seed).items()}
            case = materialize(drawn.graph, seed, profiles)
            result = check_case(case, [get_backend(backend)])
            if result.findings:
                return case, {f.signature for f in result.findings}
    return None


@pytest.mark.slow
def test_a_nonfinite_value_in_a_large_sum_is_found_and_shrunk_only_where_the_two_regimes_compose():
    backend, ops = "fault-large-nonfinite-sum", ["sum", "abs"]
    assert first_finding(backend, ops, "large-op,special-values", 12) is None
    found = first_finding(backend, ops, "large-op+special-values", 12)
    assert found and found[1] == {f"nan-inf | {backend} | sum"}
    signature = found[1].pop()
    shrunk = shrink_case(found[0], still_fails_predicate(get_backend(backend), signature), "sum", time_budget=20).case
    assert shrunk.graph.op_names() == ["sum"] and shrunk.graph.regime == "large-op+special-values"


def test_an_all_minus_inf_softmax_row_is_found_only_with_whole_row_fills():
    backend, ops = "fault-masked-softmax-row", ["softmax", "relu"]
    assert first_finding(backend, ops, "special-values", 20, {"special-rows": "special"}) is None
    found = first_finding(backend, ops, "special-values", 20)
    assert found and found[1] == {f"nan-inf | {backend} | softmax"}


def test_a_fault_above_a_work_size_in_every_dim_is_found_only_by_big_contractions():
    backend, ops = "fault-big-matmul", ["matmul", "linear", "relu"]
    assert first_finding(backend, ops, "large-op,batch-threshold", 8) is None
    found = first_finding(backend, ops, "big-contraction", 8)
    assert found and found[1] <= {f"mismatch | {backend} | matmul", f"mismatch | {backend} | linear"}
