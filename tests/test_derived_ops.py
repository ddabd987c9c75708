"""Ops derived from torch's op database (fuzzer/ops/derived/): the shipped table, its refusal of a
tampered copy, derived ops against their references on torch and jax backends, a fault only a derived
op exposes, and the replay of a stored case naming one. The derived ops are sampled, never enumerated."""

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fuzzer import verdicts
from fuzzer.backends import get_backend
from fuzzer.cli import main
from fuzzer.corpus import Corpus
from fuzzer.drawing.generate import CaseGenerator
from fuzzer.errors import OpUnsupported, UserError
from fuzzer.ir import Case, Graph, Node, TensorSpec
from fuzzer.judging.check import check_case
from fuzzer.ops import derived, get_op, parse_op_list, registry
from fuzzer.ops.derived import table
from fuzzer.ops.derived.ops import NUMPY, derived_ops, reference_source
from fuzzer.plugins import _LOADED
from fuzzer.running.campaign import CampaignOptions, run_campaign

SHIPPED = table.SHIPPED_DIR / "torch-2.13.0.json"
FAULT_PLUGIN = Path(__file__).parent / "plugins" / "derived_op_fault.py"
SPECIAL_FAULT_PLUGIN = Path(__file__).parent / "plugins" / "derived_special_fault.py"
# Pinned: present in torch 2.13's op database, with a scipy reference and a jax twin.
ERFCX = "torch.special.erfcx"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty user cache: the registry reads the shipped table (or a test's own) afresh, and forgets it after."""
    monkeypatch.setenv("FUZZ_DERIVED_CACHE", str(tmp_path / "derived"))
    derived.forget()
    yield tmp_path / "derived"
    derived.forget()


def test_the_shipped_table_loads_with_400_ops_and_150_references():
    loaded = table.load(SHIPPED)
    ops, twins = derived_ops(loaded["ops"], registry())
    with_numpy = sum(reference_source(op) == NUMPY for op in ops.values())
    with_jax = sum(entry["jax"] is not None for entry in loaded["ops"] if entry["name"] in ops)
    print(f"hand-written {len(registry())}, derived {len(ops)} (numpy/scipy ref {with_numpy}, jax twin {with_jax}), "
          f"{len(twins)} of them calling a hand-written op's function; build counts {loaded['counts']}")
    assert len(registry()) + len(ops) >= 400
    assert len(registry()) + with_numpy >= 150
    # Named by their function, derived ops never take a hand-written op's name: `add` stays hand-written.
    assert ERFCX in ops and twins["torch.add"] == "add" and get_op("add").family == "elementwise"
    assert get_op(ERFCX).family == "derived" and not get_op(ERFCX).declares_numerics


@pytest.mark.parametrize("tamper", [
    lambda op: op.update(call="torch.load", name="torch.load"),  # a function that reads a pickle
    lambda op: op["reference"].update(module="os", name="system"),
    lambda op: op["templates"][0]["kwargs"].update(dim={"__class__": "x"}),
    lambda op: op.update(code="import os"),
])
def test_a_tampered_table_is_refused_in_one_sentence_and_gives_no_derived_ops(cache, tamper):
    data = json.loads(SHIPPED.read_text())
    tamper(data["ops"][0])
    cache.mkdir(parents=True)
    tampered = cache / table.table_name(table.torch_release())  # read before the shipped table of this release
    tampered.write_text(json.dumps(data))
    with pytest.raises(UserError) as refused:
        table.load(tampered)
    message = str(refused.value)
    assert message.count(". ") == 0 and "fuzz ops --rebuild-derived" in message and "\n" not in message
    result = CliRunner().invoke(main, ["ops", "--json"])
    assert result.exit_code == 0 and not any(row["family"] == "derived" for row in json.loads(result.stdout))
    assert "is invalid" in result.stderr
    with pytest.raises(UserError, match=f"Unknown op '{ERFCX}'.*is invalid"):
        get_op(ERFCX)


def test_a_release_without_a_table_or_an_op_database_has_no_derived_ops_and_says_why(cache, tmp_path, monkeypatch):
    import sys

    monkeypatch.setattr(table, "SHIPPED_DIR", tmp_path / "nothing shipped")
    monkeypatch.setitem(sys.modules, "torch.testing._internal.common_methods_invocations", None)  # import fails
    assert derived.derived_registry() == {}, "nobody asked for derived ops: no build"
    assert "--rebuild-derived" in derived.problem() and "\n" not in derived.problem()
    with pytest.raises(UserError, match="Unknown op 'torch.special.erfcx'.*install expecttest"):
        get_op(ERFCX)  # a derived op's name asks for the table: the build is tried, and says why it cannot be
    assert derived.derived_registry() == {} and "install expecttest" in derived.problem()


def test_fuzz_ops_says_where_each_op_comes_from(cache):
    rows = {row["name"]: row for row in json.loads(CliRunner().invoke(main, ["ops", "--json"]).stdout)}
    assert rows["relu"]["source"] == "hand-written"
    assert rows[ERFCX]["source"] == "derived: numpy ref" and "scipy.special.erfcx" in rows[ERFCX]["notes"]
    assert "derived: torch f64" in {row["source"] for row in rows.values()}
    # Not hand-written ops (a default campaign draws them at its derived share: pipeline.campaign_ops), all under `derived`.
    assert ERFCX not in parse_op_list(None) and ERFCX in parse_op_list("relu,derived")


def test_sampled_derived_ops_draw_graphs_whose_shapes_torch_computes(cache):
    """The generator composes derived ops: graphs of a seeded sample of them (with relu between) are drawn
    without an invalid node, and every node's inferred shape is the one torch eager computes."""
    import random

    import torch

    names = random.Random(52).sample(sorted(derived.derived_registry()), 12)
    generator = CaseGenerator([*names, "relu"], max_nodes=4)
    drawn = set()
    for seed in range(12):
        case = generator.case(seed)
        drawn |= {node.op for node in case.graph.nodes}
        values = {name: torch.tensor(np.asarray(array, np.float32)) for name, array in case.arrays.items()}
        for node in case.graph.nodes:
            op = get_op(node.op)
            operands = [values[name] for name in node.inputs]
            try:
                values[node.name] = op.torch(operands, {}, node.attrs)
            except OpUnsupported:
                break
            assert tuple(values[node.name].shape) == op.infer(node.attrs, [tuple(t.shape) for t in operands]), node
    assert len(drawn & set(names)) >= 6, drawn


@pytest.mark.parametrize("name", [ERFCX, "torch.hypot", "torch.nn.functional.hardtanh"])
def test_a_derived_op_agrees_with_its_reference_on_torch_eager_compile_and_jax(cache, name):
    case = CaseGenerator([name], max_nodes=1).case(3)
    assert [node.op for node in case.graph.nodes] == [name]
    backends = [get_backend(b) for b in ("torch-eager:cpu:float32", "torch-compile:cpu:float32", "jax-eager:cpu:float32")]
    result = check_case(case, backends)
    assert result.verdict in (verdicts.AGREE, verdicts.INVALID) and not result.findings, result.verdicts


def test_a_derived_op_without_a_dtype_kernel_or_jax_twin_is_unsupported_not_a_crash(cache):
    op = get_op(ERFCX)
    import torch

    with pytest.raises(OpUnsupported, match="no float16 kernel"):
        op.torch([torch.ones(2, dtype=torch.float16)], {}, {})
    no_twin = next(o for o in derived.derived_registry().values() if "jax: none" in o.notes)
    with pytest.raises(OpUnsupported, match="no jax twin"):
        no_twin.jax([np.ones(2)], {}, {})


def test_a_fault_only_a_derived_op_exposes_is_found_and_its_case_replays(cache, tmp_path):
    corpus_path = tmp_path / "c.db"
    try:
        progress = run_campaign(Corpus(corpus_path), CampaignOptions(
            backends=["torch-eager:cpu:float32", "derived-erfcx-high"], plugins=[str(FAULT_PLUGIN)], ops=[ERFCX],
            max_cases=6, workers=1, shrink_time=0, seed=5))
    finally:
        _LOADED.pop(FAULT_PLUGIN.resolve(), None)
    assert progress.status == "finished"
    buckets = Corpus(corpus_path).buckets()
    assert buckets and all("derived-erfcx-high" in bucket["signature"] for bucket in buckets), buckets
    handle, script = f"B{buckets[0]['id']}", tmp_path / "repro.py"
    for command, exit_code in ((["replay", handle, "--plugin", str(FAULT_PLUGIN)], 1), (["show", handle], 0),
                               (["export", handle, "--plugin", str(FAULT_PLUGIN), "-o", str(script)], 0)):
        done = CliRunner().invoke(main, [*command, "--db", str(corpus_path)])
        assert done.exit_code == exit_code, (command, done.output)
    assert f"{ERFCX}(" in script.read_text()


def test_a_derived_op_never_places_its_result_on_the_cpu(cache):
    """The op database samples ones_like(x, device="cpu"): kept, the argument pins a CUDA backend's result to
    the CPU (a crash of ours on the GPU machine: block_diag(ones_like(x0), x1, x2) on torch-eager:cuda)."""
    ones_like = get_op("torch.ones_like")
    assert "device" not in ones_like.taken_attrs()
    assert all("device" not in op.taken_attrs() and "pin_memory" not in op.taken_attrs()
               for op in derived.derived_registry(build=True).values())


def test_as_strided_of_a_view_reads_the_views_values_not_its_bases_storage(cache):
    """as_strided's storage_offset counts from the start of the storage: on a slice it read the base's
    elements before the slice (shrunk from a default campaign: a mismatch on every torch kind, nan on
    torch-layout, whose copy's storage holds padding). Its operand is a fresh contiguous copy now."""
    graph = Graph((TensorSpec("x0", (6,)),),
                  (Node("n0", "slice", ("x0",), {"dim": -1, "start": 3, "step": 1, "stop": 10}),
                   Node("n1", "torch.as_strided", ("n0",), {"size": [2, 1, 1, 2], "stride": [1, 7, 7, 1], "storage_offset": 0})),
                  ("n1",))
    case = Case(graph, {"x0": np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])}, seed=0)
    result = check_case(case, [get_backend(b) for b in ("torch-eager:cpu:float32", "torch-layout:cpu:float32")])
    assert result.verdict == verdicts.AGREE and not result.findings, result.verdicts


def test_the_shipped_registry_loads_on_a_release_without_a_derived_table(cache, monkeypatch):
    """Entries name derived ops (torch.heaviside): on torch 2.11 (the GPU machine) no table was here and
    every campaign stopped at 'unknown op' in the registry; the shipped tables' names are known ops there."""
    from fuzzer.triaging.known import load_registry

    monkeypatch.setattr(table, "torch_release", lambda: "2.99.0")
    derived.forget()
    assert not derived.derived_registry() and derived.problem()
    assert any("torch.heaviside" in bug.rule.ops for bug in load_registry().bugs)


def test_a_default_campaign_draws_derived_ops_in_its_share_of_graphs_and_steers_toward_the_others(cache):
    """Sampled graphs of a default campaign: about DEFAULT_SHARE of them hold a derived op, the others only
    hand-written ones; --derived-share 0 and a campaign given its --ops draw the ops as before; the derived
    ops' region keys are left to that share (steering and the one-op tier go to the hand-written ops first)."""
    from fuzzer.running.budget import single_op_order
    from fuzzer.running.pipeline import CaseDrawer, CaseSource, WorkerConfig

    backends = [get_backend("torch-eager:cpu:float32")]
    drawer = CaseDrawer(WorkerConfig(backends=["torch-eager:cpu:float32"], seed=52, derived_share=0.2), backends)
    assert len(drawer.shared) >= 300 and set(drawer.shared) <= set(drawer.ops) and ERFCX in drawer.shared
    with_derived = sum(any(get_op(node.op).family == "derived" for node in drawer.graph_case(CaseSource(index)).graph.nodes)
                       for index in range(60))
    print(f"{with_derived} of 60 graphs hold a derived op (share 0.2)")
    assert 3 <= with_derived <= 24
    order = single_op_order(drawer.ops, {}, 52, drawer.shared)
    assert {get_op(op).family for op in order[:len(drawer.ops) - len(drawer.shared)]} != {"derived"}
    assert all(get_op(op).family == "derived" for op in order[len(drawer.ops) - len(drawer.shared):])
    for config in (WorkerConfig(backends=["torch-eager:cpu:float32"]),  # `fuzz run --derived-share 0`, or a campaign built in code
                   WorkerConfig(backends=["torch-eager:cpu:float32"], ops=["relu", ERFCX], derived_share=derived.DEFAULT_SHARE)):
        plain = CaseDrawer(config, backends)
        assert not plain.shared and (ERFCX not in plain.ops) == (config.ops is None)


def test_a_default_campaign_without_a_table_says_so_once_and_runs(cache, tmp_path, monkeypatch):
    """A release without a table: the campaign says so once and runs the hand-written ops; it builds nothing
    (minutes, past a short campaign's whole time). Its workers fork from this process, which has no table."""
    monkeypatch.setattr(table, "torch_release", lambda: "2.99.0")
    result = CliRunner().invoke(main, ["run", "--db", str(tmp_path / "c.db"), "--max-cases", "2", "--workers", "1",
                                       "--backends", "torch-eager:cpu:float32", "--seed", "1", "--localize-time", "0"])
    assert result.exit_code == 0, result.output
    assert result.stderr.count("Derived ops skipped: no derived-op table for torch 2.99.0") == 1
    assert "fuzz ops --rebuild-derived" in result.stderr and not (cache / "torch-2.99.0.json").exists()


def test_a_declared_convention_leaves_an_entry_undefined_where_jax_and_torch_differ(cache, monkeypatch):
    """sign(nan): torch's float64 run (the reference) gives 0, jax nan. Declared (conventions.py), that entry
    is undefined and jax agrees on the others; without the declaration jax's nan is a finding."""
    from dataclasses import replace

    from fuzzer.ops.numerics import Numerics

    sign = get_op("torch.sign")
    graph = Graph((TensorSpec("x0", (4,)),), (Node("n0", "torch.sign", ("x0",), {}),), ("n0",))
    case = Case(graph, {"x0": np.array([np.nan, 0.25, -2.0, 1.5])}, seed=0)
    assert sign.numerics.undefined_operands([case.arrays["x0"]], {}, {})[0].tolist() == [True, False, False, False]
    backends = [get_backend(b) for b in ("torch-eager:cpu:float32", "jax-eager:cpu:float32")]
    result = check_case(case, backends)
    assert result.verdict == verdicts.AGREE and not result.findings, result.verdicts
    monkeypatch.setitem(derived.derived_registry(), "torch.sign", replace(sign, numerics=Numerics()))
    undeclared = check_case(case, backends)
    assert [(f.backend, f.verdict) for f in undeclared.findings] == [("jax-eager:cpu:float32", verdicts.NAN_INF)], \
        [(v.backend, v.verdict, v.detail) for v in undeclared.verdicts]


@pytest.mark.slow
def test_a_blend_that_reads_an_infinite_neighbour_is_left_to_convention(cache):
    """upsample_bilinear of a 2 x 2 input with inf at a corner, align_corners: torch eager gives inf at that corner
    (the other neighbours weigh 0), inductor's lerp nan (a campaign's false finding on torch 2.13); what reads
    the inf is undefined, as for the hand-written interpolate."""
    graph = Graph((TensorSpec("x0", (1, 1, 2, 2)),),
                  (Node("n0", "torch.nn.functional.upsample_bilinear", ("x0",), {"size": [5, 5]}),), ("n0",))
    case = Case(graph, {"x0": np.array([[[[np.inf, 0.0], [0.0, 0.0]]]])}, seed=0)
    marked = get_op("torch.nn.functional.upsample_bilinear").numerics.undefined_operands([case.arrays["x0"]], {}, {"size": [5, 5]})
    assert marked[0][0, 0, 0, 0] and marked[0].sum() == 1
    result = check_case(case, [get_backend("torch-compile:cpu:float32")])
    assert result.verdict == verdicts.AGREE, result.verdicts


def test_a_fault_in_derived_ops_is_found_by_a_default_campaign_within_60_s(cache, tmp_path):
    corpus_path = tmp_path / "c.db"
    try:
        progress = run_campaign(Corpus(corpus_path), CampaignOptions(
            backends=["torch-eager:cpu:float32", "derived-special-high"], plugins=[str(SPECIAL_FAULT_PLUGIN)],
            time_limit=60, stop_after_findings=1, workers=1, shrink_time=5, seed=52, derived_share=derived.DEFAULT_SHARE))
    finally:
        _LOADED.pop(SPECIAL_FAULT_PLUGIN.resolve(), None)
    buckets = Corpus(corpus_path).buckets()
    print(f"{progress.graphs} graphs in {progress.elapsed:.0f} s; buckets {[b['signature'] for b in buckets]}")
    assert any("derived-special-high" in b["signature"] and "torch.special." in b["signature"] for b in buckets), buckets


def test_values_outside_a_derived_op_s_domain_make_the_case_invalid_not_a_crash(cache):
    """gaussian_nll_loss's torch run refuses a negative var (ValueError); its draw probed a one-element var that
    was positive by chance. torch eager refuses it too: the case is invalid, not a crash finding (it was one),
    and not an internal error that loses the case (the golden set's build met that)."""
    graph = Graph((TensorSpec("x0", (17,)), TensorSpec("x1", (1,)), TensorSpec("x2", (1,))),
                  (Node("n0", "torch.nn.functional.gaussian_nll_loss", ("x0", "x1", "x2"), {"reduction": "none"}),
                   Node("n1", "relu", ("x0",), {})), ("n0", "n1"))
    arrays = {"x0": np.linspace(-1, 1, 17), "x1": np.ones(1), "x2": -np.ones(1)}
    backends = [get_backend("torch-eager:cpu:float32")]
    assert check_case(Case(graph, arrays, seed=0), backends).verdict == verdicts.INVALID
    assert check_case(Case(graph, {**arrays, "x2": np.ones(1)}, seed=0), backends).verdict == verdicts.AGREE
