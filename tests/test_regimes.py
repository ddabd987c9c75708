"""Regimes: each is drawn at its stated share, keeps its promises (sizes, values, layouts), and
reaches faults that live only there (tests/plugins/regime_faults.py), which short campaigns find."""

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from fuzzer.drawing.generate import CaseGenerator
from fuzzer.drawing.regimes import BY_NAME, REGIMES
from fuzzer.ir import infer_shapes

FUZZ = str(Path(sys.executable).with_name("fuzz"))
PLUGIN = str(Path(__file__).parent / "plugins" / "regime_faults.py")
SEEDS = 2000


@pytest.fixture(scope="module")
def drawn():
    generator = CaseGenerator()
    return [generator.case(seed) for seed in range(SEEDS)]


def regime_of(case) -> str:
    return case.graph.regime or "small"


def test_each_regime_is_drawn_at_its_stated_share(drawn):
    counts = Counter(regime_of(case) for case in drawn)
    for regime in REGIMES:
        share = 100.0 * counts[regime.name] / SEEDS
        # 2000 draws: a binomial share's standard deviation is at most 1.1 points.
        assert abs(share - regime.weight) < 3.0, (regime.name, share, regime.weight)


def largest_tensor(case) -> int:
    return max(int(np.prod(shape)) for shape in infer_shapes(case.graph).values())


def test_the_small_regime_stays_under_its_bound_and_the_large_one_leaves_it(drawn):
    small = [largest_tensor(c) for c in drawn if regime_of(c) == "small"]
    large = [largest_tensor(c) for c in drawn if regime_of(c) == "large-op"]
    assert max(small) <= BY_NAME["small"].max_elements
    assert max(large) <= BY_NAME["large-op"].max_elements
    assert sum(size > 100_000 for size in large) >= len(large) // 10, "large-op reaches 1e5+ elements regularly"


def test_only_the_layout_regime_marks_layouts_and_expanded_values_repeat(drawn):
    layouts = Counter()
    for case in drawn:
        for spec in case.graph.inputs:
            if spec.layout != "contiguous":
                assert "layout" in regime_of(case).split("+"), (spec, case.graph.regime)
                layouts[spec.layout] += 1
            if spec.layout == "expanded":
                values = case.arrays[spec.name]
                assert np.array_equal(values, np.broadcast_to(values[:1], values.shape), equal_nan=True)
    assert {"transposed", "strided", "channels_last", "expanded"} <= set(layouts)


def test_value_regimes_reach_tiny_magnitudes_and_special_values(drawn):
    def inputs(regime):
        return [case.arrays[s.name] for case in drawn if regime_of(case) == regime for s in case.graph.inputs]

    special = np.concatenate([a.ravel() for a in inputs("special-values")])
    assert np.isposinf(special).any() and np.isneginf(special).any() and np.isnan(special).any()
    assert (np.signbit(special) & (special == 0)).any(), "-0.0 is drawn"
    assert ((np.abs(special) < np.finfo(np.float32).tiny) & (special != 0)).any(), "subnormals are drawn"
    magnitudes = np.concatenate([np.abs(a.ravel()) for a in inputs("magnitudes")])
    assert magnitudes[magnitudes > 0].min() < 1e-7 and magnitudes.max() > 1e3
    small = np.concatenate([a.ravel() for a in inputs("small")])
    assert np.isfinite(small).all()


def fuzz(*args):
    return subprocess.run([FUZZ, *map(str, args)], capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.parametrize("backend, regime, ops, culprit", [
    # -m long, all four (CI's 15 minutes): the regime draws above still cover their regimes, and test_composed_regimes
    # keeps a campaign that finds a fault where two regimes meet.
    pytest.param("fault-large-sum", "large-op", "sum,relu,reshape,add,mul", "sum", marks=pytest.mark.long),
    pytest.param("fault-tiny-tanh", "magnitudes", "tanh,relu,add,mul", "tanh", marks=pytest.mark.long),
    pytest.param("fault-channels-last-conv", "layout", "conv2d,relu,add,permute,layer_norm", "conv2d", marks=pytest.mark.long),
    pytest.param("fault-ceil-mode-pool", "small", "max_pool2d,conv2d,relu,add", "max_pool2d", marks=pytest.mark.long),
])
def test_a_short_campaign_in_the_regime_finds_a_fault_that_lives_only_there(tmp_path, backend, regime, ops, culprit):
    # Seed 1: since vector tails took a draw of each shape, seed 0's 30 (and 60) layout graphs miss the
    # channels-last conv (seeds 1, 2 and 3 find it in 30, seed 4 does not).
    db = tmp_path / "fuzz.db"
    result = fuzz("run", "--db", db, "--plugin", PLUGIN, "--backends", backend, "--regimes", regime, "--ops", ops,
                  "--max-cases", 30, "--workers", 1, "--shrink-time", 20, "--seed", 1, "--json")
    assert result.returncode == 1, result.stderr[-2000:]
    rows = json.loads(fuzz("list", "--cases", "--db", db, "--json").stdout)
    assert {row["signature"] for row in rows} == {f"mismatch | {backend} | {culprit}"}
    shrunk = json.loads(fuzz("show", "--db", db, min(r["id"] for r in rows if r["shrunk_from"]), "--json").stdout)
    assert [node["op"] for node in shrunk["graph"]["nodes"]] == [culprit]
    assert shrunk["graph"].get("regime", "small") == regime, "the shrunk case keeps its regime"


@pytest.mark.parametrize("layout, shape", [("transposed", (2, 1, 3)), ("strided", (3,)), ("channels_last", (2, 3, 2, 2)),
                                           ("expanded", (3, 2))])
def test_reproducers_rebuild_the_layout_the_backends_run(layout, shape):
    """layout_source (printed in reproducers) and apply_layout (run by backends) make the same tensor."""
    import torch

    from fuzzer.drawing.layouts import apply_layout, layout_source

    tensor = torch.arange(float(np.prod(shape))).reshape(shape)
    if layout == "expanded":
        tensor = tensor[:1].expand(shape).contiguous()
    applied = apply_layout(tensor, layout)
    scope = {"torch": torch, "t": tensor}
    exec(f"result = {layout_source(layout, shape, 't')}", scope)  # the test runs the text a reproducer prints
    assert applied.stride() == scope["result"].stride() and not applied.is_contiguous()
    assert torch.equal(applied, scope["result"]) and torch.equal(applied, tensor)


def test_a_float_campaign_draws_programs_at_their_share_where_one_of_its_backends_runs_them():
    from fuzzer.backends import get_backend
    from fuzzer.running.pipeline import WorkerConfig, campaign_regimes

    config = WorkerConfig(backends=[])
    with_runner = campaign_regimes(config, [get_backend("torch-eager:cpu:float32"), get_backend("jax-grad:cpu:float32")])
    assert BY_NAME["programs"] in with_runner
    assert not any(regime.programs for regime in campaign_regimes(config, [get_backend("jax-grad:cpu:float32")]))
    narrowed = WorkerConfig(backends=[], ops=["relu", "sum"])  # --ops: a program's statements are not among them
    assert not any(regime.programs for regime in campaign_regimes(narrowed, [get_backend("torch-eager:cpu:float32")]))
    generator = CaseGenerator(regimes=with_runner)
    programs = sum(bool(generator.case(seed).graph.steps) for seed in range(600))
    assert 6 <= programs <= 40, programs  # 3% of 600 is 18
