"""Integer, bool and complex graphs inside a float campaign (fuzzer/running/dtype_families.py): which indices
take them, which backends run them, on whose compile budget, under which region keys, and short
float campaigns that find faults planted only on integer and complex tensors
(tests/plugins/integer_faults.py, tests/plugins/complex_faults.py)."""

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from conftest import fuzz, planted_fault_campaign
from fuzzer.backends import get_backend, name_backend_list
from fuzzer.drawing.generate import Focus
from fuzzer.drawing.region_pairs import declared_pairs
from fuzzer.drawing.regions import focus_of, lane_targets
from fuzzer.plugins import load_plugins
from fuzzer.running.campaign import Progress
from fuzzer.running.dtype_families import budget_account, drawn_dtype, lane_backends, turns
from fuzzer.running.pipeline import CaseSource, Pipeline, WorkerConfig

PLUGINS = Path(__file__).parent / "plugins"
INTEGERS = ("int8", "int16", "int32", "int64", "uint8", "bool")


def test_family_graphs_are_spread_evenly_at_their_shares_and_each_dtype_takes_its_turn():
    drawn = [drawn_dtype(index, 0.1, 0.05) for index in range(1200)]
    counts = Counter(drawn)
    assert counts[None] == 1020 and sum(counts[d] for d in INTEGERS) == 120 and counts["complex64"] + counts["complex128"] == 60
    assert {counts[d] for d in INTEGERS} == {20} and counts["complex64"] == counts["complex128"] == 30
    assert [d for d in drawn if d in INTEGERS][:7] == [*INTEGERS, "int8"], "in turn, so a short campaign meets each"
    gaps = np.diff([index for index, dtype in enumerate(drawn) if dtype])
    assert set(gaps) <= {6, 7}, "spread evenly, never in runs"
    assert turns(INTEGERS, {"int32"}) == ("int32", "int8", "int32", "int16", "int32", "int64", "int32", "uint8", "int32", "bool")
    assert drawn_dtype(7, 0.0, 0.0) is None and drawn_dtype(7, 1.0, 0.0, integers=()) is None, "a family without a lane draws none"


def test_a_lane_runs_the_campaign_s_own_backends_of_its_dtype_then_the_kinds_that_declare_it():
    load_plugins([str(PLUGINS / "integer_faults.py")])
    campaign = name_backend_list("cpu,fault-saturating-mul")
    assert [b.name for b in lane_backends(campaign, "int32")] == [
        "fault-saturating-mul", "torch-eager:cpu:int32", "torch-compile:cpu:int32", "jax-eager:cpu:int32",
        "jax-jit:cpu:int32", "jax-jit-const:cpu:int32"], "once per kind; torch-module and the gradients have no int32"
    floats = [b for b in campaign if b.dtype.startswith("float")]
    assert budget_account(get_backend("torch-compile:cpu:complex64"), floats) == "torch-compile:cpu:float32"
    assert budget_account(get_backend("jax-jit:cpu:bool"), floats) == "jax-jit:cpu:float32", "the first of its kind"
    assert budget_account(get_backend("torch-compile-dynamic:cpu:int8"), floats) is None


@pytest.mark.parametrize("shares, message", [
    (("--integer-share", "0"), "Backend 'torch-eager:cpu:int32' runs int32 tensors, which a campaign of float backends draws "
                               "only with --integer-share above 0; raise it or leave the backend out."),
    (("--integer-share", "0.7", "--complex-share", "0.5"), "add up to more than 1"),
])
def test_a_family_backend_that_would_never_run_or_shares_over_one_are_refused_in_one_sentence(tmp_path, shares, message):
    result = fuzz("run", "--db", tmp_path / "fuzz.db", "--backends", "torch-eager,torch-eager:cpu:int32", *shares, "--max-cases", 1)
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_family_index_is_drawn_by_its_lane_judged_in_its_dtype_and_keyed_by_it():
    """One float graph, then an integer and a complex one: each of its family's values, run on its dtype's
    variants, covering its dtype's region keys; a lane's compiler spends the families' part of its float peer's share."""
    pipeline = Pipeline(WorkerConfig(backends=["torch-eager:cpu:float32", "jax-jit:cpu:float32"], seed=3,
                                     integer_share=0.25, complex_share=0.25, compiled_inputs=1))
    by_dtype = {pipeline.drawer.lane(index).dtype: index for index in range(8)}
    assert set(by_dtype) == {None, "int8", "int16", "complex64", "complex128"}
    for dtype, kind in ((None, "f"), ("int8", "i"), ("complex64", "c")):
        case = pipeline.drawer.graph_case(CaseSource(by_dtype[dtype]))
        assert {array.dtype.kind for array in case.arrays.values()} <= {kind, "f"} and any(a.dtype.kind == kind for a in case.arrays.values())
    replies = {index: pipeline.run_index(index, set()) for index in range(8)}
    int8 = replies[by_dtype["int8"]]
    assert set(int8.backends) <= {"torch-eager:cpu:int8", "jax-jit:cpu:int8"} and "torch-eager:cpu:int8" in int8.backends
    assert int8.regions and all(key.endswith(":dtype=int8") for key in int8.regions if "dtype=" in key)
    assert {f"{op}:dtype=int8" for op in int8.ops} <= set(int8.regions)
    assert not any("dtype=" in key for key in replies[by_dtype[None]].regions)
    compiled = Counter(name for reply in replies.values() for name in reply.compiled_structures)
    family_compiles = sum(count for name, count in compiled.items() if name != "jax-jit:cpu:float32")
    assert family_compiles, compiled
    budget = pipeline.budget
    assert budget.compiled == {"jax-jit:cpu:float32": compiled["jax-jit:cpu:float32"], "jax-jit:cpu:float32 families": family_compiles}
    assert budget.shares["jax-jit:cpu:float32 families"] == budget.shares["jax-jit:cpu:float32"] == 0.3, "half of the peer's 0.6"


def test_steering_takes_a_dtype_key_on_its_own_lane_only_and_pairs_never_hold_one():
    targets = ["mul:dtype=int32", "mul:dtype=int8", "exp:dtype=complex64", "mul:value=True", "conv2d:groups=1 & layout=channels_last"]
    assert lane_targets(targets, "int32") == ["mul:dtype=int32"]
    assert lane_targets(targets, None) == ["mul:value=True", "conv2d:groups=1 & layout=channels_last"]
    assert focus_of("mul:dtype=int32") == Focus("mul")
    assert declared_pairs(["mul:dtype=int32", "mul:dtype=int8"]) == []


def _new_signatures(db) -> set[str]:
    return {b["signature"] for b in json.loads(fuzz("list", "--db", db, "--json").stdout) if b["status"] == "new"}


# -m long (CI's 15 minutes): tests/test_exact_dtypes.py and test_complex_dtypes.py find both faults in an integer and a
# complex campaign, and the lane's drawing and judging have their tests above.
@pytest.mark.long
@pytest.mark.parametrize("plugin, backend, shares", [
    ("integer_faults.py", "fault-saturating-mul", ("--integer-share", "0.5", "--complex-share", "0")),
    ("complex_faults.py", "fault-conj-mul", ("--integer-share", "0", "--complex-share", "0.5")),
])
def test_a_float_campaign_finds_a_fault_planted_only_in_a_family_dtype_and_replays_it_there(tmp_path, plugin, backend, shares):
    """Half the graphs in the family, half of those in the plugin backend's dtype (it is listed: `turns`)."""
    rows, shrunk = planted_fault_campaign(tmp_path, str(PLUGINS / plugin), f"torch-eager:cpu:float32,{backend}",
                                          "mul,add,reshape,sum", *shares)
    assert {row["signature"] for row in rows} == {f"mismatch | {backend} | mul"}
    assert [node["op"] for node in shrunk["graph"]["nodes"]][-1:] == ["mul"] and len(shrunk["graph"]["nodes"]) <= 2
    replayed = fuzz("replay", "--db", tmp_path / "fuzz.db", "--plugin", str(PLUGINS / plugin), shrunk["id"])
    assert replayed.returncode == 1 and backend in replayed.stdout, replayed.stdout[-2000:] + replayed.stderr[-2000:]


@pytest.mark.long
@pytest.mark.parametrize("plugin, backend", [("integer_faults.py", "fault-saturating-mul"), ("complex_faults.py", "fault-conj-mul")])
def test_the_default_campaign_on_the_ops_involved_finds_a_family_fault_in_a_minute_and_not_without_the_shares(tmp_path, plugin, backend):
    """The default set and shares, restricted to the ops involved: found within 60 s (55 s and 57 s at a
    load of 13 on 2 cores; every op, the default set checked 10 graphs in that minute). Without the share
    no graph runs the dtype: the backend is refused."""
    db, ops = tmp_path / "fuzz.db", ("--ops", "mul,add,reshape,sum")
    found = fuzz("run", "--db", db, "--plugin", str(PLUGINS / plugin), "--backends", f"cpu,{backend}", *ops, "--time", "60s",
                 "--seed", 4242, "--localize-time", 0, "--shrink-time", 20)
    assert found.returncode == 1 and _new_signatures(db) == {f"mismatch | {backend} | mul"}, found.stdout[-3000:]
    refused = fuzz("run", "--db", db, "--plugin", str(PLUGINS / plugin), "--backends", f"cpu,{backend}", *ops, "--time", "60s",
                   "--integer-share", 0, "--complex-share", 0)
    assert refused.returncode == 2 and backend in refused.stderr


def test_a_compiler_is_not_called_starved_for_the_time_its_family_variants_spent_on_its_share():
    progress = Progress(1, checked=100, worker_seconds=100.0, backend_cases={"torch-compile:cpu:float32": 2},
                        backend_seconds={"torch-compile:cpu:float32": 20.0, "torch-compile:cpu:int8": 20.0})
    assert progress.rarely_run(["torch-compile:cpu:float32"], {"torch-compile:cpu:float32": 0.45}) == []
    progress.backend_seconds.pop("torch-compile:cpu:int8")
    assert progress.rarely_run(["torch-compile:cpu:float32"], {"torch-compile:cpu:float32": 0.45}) == ["torch-compile:cpu:float32"]
