"""Programs (fuzzer/programs/program.py): in-place writes through views, aliases read after the writes, and
steps with carried state, run literally by torch and numpy and through index maps by jax; bounded
and refused with one sentence where a case asks for what no framework defines; reaching faults
that live only there (tests/plugins/program_faults.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conftest import fuzz, planted_fault_campaign
from fuzzer import verdicts
from fuzzer.arrays import materialize, to_base64
from fuzzer.backends import get_backend
from fuzzer.corpus.case_forms import EXPORT_FORMAT, EXPORT_VERSION
from fuzzer.drawing.generate import CaseGenerator
from fuzzer.drawing.regimes import BY_NAME
from fuzzer.errors import UserError
from fuzzer.ir import Case, Graph, Node, Resize, TensorSpec
from fuzzer.programs.program import written_inputs
from fuzzer.programs.statements import WRITES
from fuzzer.running.execute import OK, Outcome

PLUGIN = str(Path(__file__).parent / "plugins" / "program_faults.py")
PROGRAM_BACKENDS = ("numpy-ref:cpu:float64", "torch-eager:cpu:float64", "jax-eager:cpu:float64", "jax-jit:cpu:float64",
                    "jax-jit-donate:cpu:float64")


def program(nodes, outputs, steps=3, inputs=(("x", (2, 3)),)) -> Graph:
    return Graph(tuple(TensorSpec(name, shape) for name, shape in inputs),
                 tuple(Node(name, op, operands, attrs) for name, op, operands, attrs in nodes), outputs, "programs", steps=steps)


SLICE_ADD = program([("v", "getitem", ("x",), {"dim": 1, "start": 1, "stop": 3, "step": 1}),
                     ("w", "add_", ("v", "y"), {"alpha": 1.0})], ("v",), inputs=(("x", (2, 3)), ("y", (2,))))
# Every step: the diagonal read after x is filled sees the fill, and a write through the diagonal lands in x.
DIAGONAL_AFTER_FILL = program([("d", "diagonal", ("x",), {"offset": 0, "dim1": 0, "dim2": 1}),
                               ("f", "fill_", ("x",), {"value": 2.0}),
                               ("m", "mul_", ("d", "d"), {})], ("d",), steps=2, inputs=(("x", (2, 2)),))
SPECIFICATIONS = [
    # x = 0, y = 1: x[:, 1:3] += y, three times; each step's view as it returns, then x.
    (SLICE_ADD, {"x": np.zeros((2, 3)), "y": np.ones(2)},
     [np.full((2, 2), 1.0), np.full((2, 2), 2.0), np.full((2, 2), 3.0), np.array([[0.0, 3.0, 3.0], [0.0, 3.0, 3.0]])]),
    (DIAGONAL_AFTER_FILL, {"x": np.arange(4.0).reshape(2, 2)},
     [np.array([4.0, 4.0]), np.array([4.0, 4.0]), np.array([[4.0, 2.0], [2.0, 4.0]])]),
]


@pytest.mark.parametrize("backend", PROGRAM_BACKENDS)
@pytest.mark.parametrize("graph, arrays, expected", SPECIFICATIONS, ids=["slice-add", "diagonal-after-fill"])
def test_a_program_gives_each_step_s_outputs_then_its_written_inputs(backend, graph, arrays, expected):
    results = get_backend(backend).run(Case(graph, arrays))
    assert len(results) == len(expected)
    for result, want in zip(results, expected):
        np.testing.assert_array_equal(result, want)


def test_a_program_s_tolerance_counts_its_arithmetic_once_a_step_up_to_the_result_s_own_and_its_views_and_exact_writes_not_at_all():
    """Each step's outputs by that step's sensitivity and scale (the largest value so far), the final inputs by the last."""
    from fuzzer.oracle.reference import program_reference

    # x[:, 1:3] += 1 three times from 0 (add_ once a step): 1, 2, 3 so far; the diagonal of arange(4) squared after
    # a fill of 2 (mul_ once a step, fill_ rounds nothing): 4 from the first step (the input's 3 before it).
    for (graph, arrays, expected), sensitivities, scales in zip(SPECIFICATIONS, ([2, 3, 4, 4], [2, 3, 3]),
                                                                ([1, 2, 3, 3], [4, 4, 4])):
        reference = program_reference(Case(graph, arrays), {"float32"})
        assert reference.sensitivities == sensitivities and reference.scales == scales


def test_a_mask_from_a_value_an_honest_float32_kernel_may_underflow_to_zero_is_not_judged():
    """GPU campaign, torch 2.11 CUDA: float32 sigmoid(-93.96) is 0 there (1 / (1 + exp(93.96)): exp overflows)
    and 1.7e-41 in numpy, so masked_fill_(s, s > 0) kept 0 where the float64 reference filled -1. The
    flushing model spans both (the allowance was 6e-5 before it)."""
    from fuzzer.oracle import allowed_error
    from fuzzer.oracle.reference import program_reference

    graph = program([("s", "sigmoid", ("x",), {}), ("m", "masked_fill_", ("s", "s"), {"value": -1.0})], ("m",),
                    steps=1, inputs=(("x", (1,)),))
    reference = program_reference(Case(graph, {"x": np.array([-93.9615249633789])}), {"float32"})
    assert reference.outputs[0].tolist() == [-1.0]
    assert allowed_error(reference, 0, "float32") >= 1.0


def test_a_subnormal_input_that_xla_reads_as_zero_is_no_finding_and_a_normal_one_is():
    """2.15 clean campaign, jax 0.12.0.1 CPU: masked_fill_(x0, x1 > 0) with x1 = 2.3e-41 did not fill (XLA on
    the CPU reads subnormals as zero), where numpy fills: a false mismatch until the flushing model read its
    operands flushed too."""
    from fuzzer.judging.check import check_case, verdict_of
    from fuzzer.oracle.reference import program_reference

    graph = program([("m", "masked_fill_", ("x0", "x1"), {"value": -1.0})], ("m",), steps=1,
                    inputs=(("x0", (1,)), ("x1", (1,))))
    backend = get_backend("jax-eager:cpu:float32")
    subnormal = Case(graph, {"x0": np.array([0.0]), "x1": np.array([2.2846770162351818e-41])})
    assert backend.run(subnormal)[0].tolist() == [0.0]  # jax read the mask as zero
    assert check_case(subnormal, [backend]).verdict == verdicts.AGREE
    # Planted: a normal mask is positive on every kernel, so not filling it stays a finding.
    normal = Case(graph, {"x0": np.array([0.0]), "x1": np.array([2.0e-30])})
    unfilled = Outcome(backend.name, OK, outputs=[np.array([0.0]), np.array([0.0])])
    assert verdict_of(backend, normal, unfilled, program_reference(normal, {"float32"})).verdict == verdicts.MISMATCH


# The writes beyond add_ ... masked_fill_, each through x[:, ::2] (3 x 2) of a 3 x 4 x: (op, its operands' shapes, attributes).
THROUGH_A_VIEW = ("v", "getitem", ("x",), {"dim": 1, "start": 0, "stop": 4, "step": 2})
WIDER_WRITES = [
    *((op, (), {}) for op in ("sin_", "exp_", "tanh_", "sigmoid_", "abs_", "neg_")),
    ("sub_", ((2,),), {"alpha": 2.0}),
    ("div_", ((2,),), {}),
    ("addcmul_", ((3, 2), (2,)), {"value": -0.5}),
    ("addcdiv_", ((3, 2), (2,)), {"value": -0.5}),
    ("lerp_", ((3, 2),), {"weight": 0.75}),
    ("index_fill_", (), {"dim": 0, "index": [2, 0, 2], "value": -1.0}),
    ("scatter_", ((2, 2),), {"dim": 0, "index": [[2, 0], [0, 1]]}),
    ("scatter_add_", ((3, 3),), {"dim": 1, "index": [[0, 0, 1], [1, 1, 1], [0, 1, 0]]}),
    ("index_put_", ((3,),), {"indices": [[0, 2, 0], [1, 1, 1]], "accumulate": True}),
    ("index_put_", ((2, 2),), {"indices": [[2, 0]], "accumulate": False}),
    ("add_out", ((3, 2), (2,)), {}),
    ("mul_out", ((3, 2), (2,)), {}),
    ("sin_out", ((3, 2),), {}),
]


def wider_write(op, shapes, attrs) -> Graph:
    operands = tuple(f"y{index}" for index in range(len(shapes)))
    return program([THROUGH_A_VIEW, ("w", op, ("v", *operands), attrs)], ("w",), steps=3,  # an odd count: neg_ twice is no write
                   inputs=(("x", (3, 4)), *zip(operands, shapes)))


@pytest.mark.parametrize("op, shapes, attrs", WIDER_WRITES, ids=[f"{op}-{i}" for i, (op, _, _) in enumerate(WIDER_WRITES)])
def test_each_wider_write_through_a_view_agrees_in_torch_numpy_and_jax(op, shapes, attrs):
    graph = wider_write(op, shapes, attrs)
    rng = np.random.default_rng(0)
    # Operands in [0.5, 2]: a divisor away from 0, as the generator keeps it (program_generate.DIVIDING).
    arrays = {"x": rng.uniform(-2.0, 2.0, (3, 4)), **{name: rng.uniform(0.5, 2.0, shape) for name, shape in zip(("y0", "y1"), shapes)}}
    reference, *others = [get_backend(name).run(Case(graph, arrays))
                          for name in ("numpy-ref:cpu:float64", "torch-eager:cpu:float64", "jax-eager:cpu:float64")]
    assert not np.array_equal(reference[-1], arrays["x"]) and np.array_equal(reference[-1][:, 1::2], arrays["x"][:, 1::2]), \
        "the write lands in x through the view, and only there"
    for results in others:
        for got, want in zip(results, reference, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def _refused_write(op, shapes, attrs, data):
    graph = wider_write(op, shapes, attrs).to_dict()
    return {**graph, "nodes": [graph["nodes"][0], {**graph["nodes"][1], **data}]}


@pytest.mark.parametrize("op, change, message", [
    ("sin_", {"attrs": {"alpha": 2.0}}, "has the attribute 'alpha', which sin_ does not take"),
    ("sub_", {"attrs": {"alpha": "2"}}, "alpha 2 must be a finite number"),
    ("div_", {"inputs": ["v", "x"]}, "the operand of shape [3, 4] does not broadcast to the written shape [3, 2]"),
    ("addcmul_", {"attrs": {"value": [1.0]}}, "value [1.0] must be a finite number"),
    ("addcdiv_", {"attrs": {"value": True}}, "value True must be a finite number"),
    ("lerp_", {"attrs": {}}, "weight is missing; give it, or read it from an operand with item"),
    ("index_fill_", {"attrs": {"dim": 0, "index": [3], "value": 1.0}}, "index [3] must be 1 to 64 positions within 0..2 of dim 0"),
    ("scatter_", {"attrs": {"dim": 0, "index": [[0, 1], [0, 0]]}}, "sends two entries of one line along dim 0 to one position"),
    ("scatter_add_", {"attrs": {"dim": 1, "index": [[0, 0, 1], [1, 2, 1], [0, 1, 0]]}}, "of positions within 0..1"),
    ("scatter_add_", {"attrs": {"dim": 1, "index": [[0, 0], [1, 1], [0, 1]]}}, "must be a nested list of the source's shape [3, 3]"),
    ("index_put_", {"attrs": {"indices": [[0, 2, 0], [1, 1, 1]], "accumulate": False}}, "repeat a position"),
    ("index_put_", {"attrs": {"indices": [[0, 3, 0], [1, 1, 1]], "accumulate": True}}, "each within that dim of [3, 2]"),
    ("add_out", {"inputs": ["v", "y1", "y1"]}, "the operands of shapes [[2], [2]] do not make the out tensor's shape [3, 2]"),
])
def test_a_malformed_wider_write_exits_2_with_one_sentence_and_stores_nothing(tmp_path, op, change, message):
    from click.testing import CliRunner

    from fuzzer.cli import main

    shapes, attrs = next((shapes, attrs) for name, shapes, attrs in WIDER_WRITES if name == op)
    graph = _refused_write(op, shapes, attrs, change)
    arrays = {spec["name"]: to_base64(np.ones(spec["shape"])) for spec in graph["inputs"]}
    case_file = tmp_path / "case.json"
    case_file.write_text(json.dumps({"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "graph": graph, "arrays": arrays,
                                     "seed": 0, "verdict": "agree", "findings": [], "backends": []}))
    done = CliRunner().invoke(main, ["import", "--db", str(tmp_path / "fuzz.db"), str(case_file)])
    assert done.exit_code == 2 and message in done.stderr, (done.exit_code, done.stderr)
    assert done.stderr.count(". ") == 0 and "Traceback" not in done.stderr, "one sentence"
    assert not (tmp_path / "fuzz.db").exists()


@pytest.mark.slow
def test_torch_compile_compiles_a_program_s_step_once_and_runs_it_every_step():
    import torch._dynamo

    torch._dynamo.reset()
    before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    graph, arrays, expected = SPECIFICATIONS[0]
    results = get_backend("torch-compile:cpu:float32").run(Case(graph, arrays))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] - before == 1
    for result, want in zip(results, expected):
        np.testing.assert_array_equal(result, want)


@pytest.mark.long  # a dynamic compile: 6 to 16 s on a loaded 2-core machine; campaigns cover the path
def test_torch_compile_dynamic_runs_a_program_s_step_again_at_another_size():
    """Sizes that change between calls: the step compiled with symbolic sizes for x of 2 x 3, then called for
    a shape variant (x of 2 x 5, fuzzer/drawing/shape_variants.py) on the same compiled function."""
    from fuzzer.backends.torch_compile import COMPILED

    backend, reference = get_backend("torch-compile-dynamic:cpu:float32"), get_backend("numpy-ref:cpu:float64")
    small, _, _ = SPECIFICATIONS[0]
    wider = replace(small, inputs=(TensorSpec("x", (2, 5)), TensorSpec("y", (2,))))
    compiled = len(COMPILED.entries)
    for graph in (small, wider):
        case = materialize(graph, 0)
        for result, want in zip(backend.run(case), reference.run(case), strict=True):
            np.testing.assert_allclose(result, want, rtol=1e-6, atol=1e-6)
    assert len(COMPILED.entries) == compiled + 1, "one compiled function for both sizes"


def test_jax_s_index_maps_agree_with_numpy_s_views_and_torch_on_drawn_programs():
    """The reference's aliasing comes from numpy's memory model, jax's from our index maps: on drawn
    programs, in float64, the two (and torch's own views) agree to the last bits."""
    generator = CaseGenerator(None, 8, (BY_NAME["programs"],))
    backends = [get_backend(name) for name in ("numpy-ref:cpu:float64", "torch-eager:cpu:float64", "jax-jit:cpu:float64")]
    written = 0
    for seed in range(25):
        case = generator.case(seed)
        case = replace(case, graph=replace(case.graph, resized=None))  # jax translates a program for one set of shapes
        written += bool(written_inputs(case.graph))
        reference, *others = [backend.run(case) for backend in backends]
        for results in others:
            for want, got in zip(reference, results, strict=True):
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=case.graph.to_json())
    assert written >= 20, "most drawn programs write into their state"


def test_every_drawn_program_passes_its_rules_and_uses_views_and_steps():
    generator = CaseGenerator(None, 8, (BY_NAME["programs"],))
    graphs = [generator.case(seed).graph for seed in range(60)]
    ops = {node.op for graph in graphs for node in graph.nodes}
    assert {"getitem", "swapaxes", "diagonal", "broadcast_to", "unfold", "view", "as_strided"} <= ops
    assert WRITES <= ops
    assert {graph.steps for graph in graphs} == {2, 3, 4}
    for graph in graphs:
        assert Graph.from_json(graph.to_json()) == graph


GOOD = SLICE_ADD.to_dict()


OVERLAPPING = program([("v", "getitem", ("x",), {"dim": 1, "start": 0, "stop": 2, "step": 1}),
                       ("u", "getitem", ("x",), {"dim": 1, "start": 1, "stop": 3, "step": 1}),
                       ("w", "add_", ("v", "u"), {})], ("w",)).to_dict()


def _with_node(index, **changes):
    nodes = [dict(node) for node in GOOD["nodes"]]
    nodes[index].update(changes)
    return {**GOOD, "nodes": nodes}


@pytest.mark.parametrize("data, message", [
    ({**GOOD, "steps": 1_000_000}, "'steps' must be a whole number from 0 (a graph) to 8, not '1000000'"),
    ({**GOOD, "steps": "3"}, "'steps' must be a whole number"),
    ({**GOOD, "steps": 0}, "Node 'v' (getitem) is a program's statement, but the graph has no 'steps'"),
    (_with_node(0, attrs={"dim": 1, "start": 1, "stop": 9, "step": 1}), "slice [1:9:1] of dim 1 is outside 0..3"),
    (_with_node(0, op="broadcast_to", attrs={"size": [4, 2, 3]}), "broadcast_to of shape [2, 3] to [4, 2, 3]"),
    (_with_node(0, op="as_strided", attrs={"size": [2, 2], "stride": [3, 2], "storage_offset": 1}),
     "as_strided reaches element 6 of a base of 6 elements"),
    (_with_node(0, op="unfold", attrs={"dimension": 1, "size": 2, "step": 1}), "writes through a read-only view"),
    (_with_node(0, op="as_strided", attrs={"size": [2, 2], "stride": [0, 1], "storage_offset": 0}), "whose elements repeat"),
    (OVERLAPPING, "reads 'u', which shares memory with the elements it writes without being that very tensor"),
    # Found by a clean campaign: the same elements through two as_strided views are no one tensor to torch.
    (program([("a", "as_strided", ("x",), {"size": [1, 1], "stride": [2, 2], "storage_offset": 0}),
              ("b", "as_strided", ("x",), {"size": [1, 1], "stride": [1, 1], "storage_offset": 0}),
              ("w", "mul_", ("b", "a"), {})], ("w",)).to_dict(), "reads 'a', which shares memory"),
    (program([("w", "index_add_", ("x", "x"), {"dim": 0, "index": [0, 1]})], ("w",)).to_dict(),
     "reads 'x', which shares memory"),
    # Found by the first clean campaign: torch places as_strided from the storage's start, numpy from the view's.
    (program([("v", "getitem", ("x",), {"dim": 0, "start": 1, "stop": 2, "step": 1}),
              ("s", "as_strided", ("v",), {"size": [2], "stride": [1], "storage_offset": 0}),
              ("w", "relu_", ("s",), {})], ("w",)).to_dict(), "takes as_strided of 'v', a view"),
    (program([("s", "softmax", ("x",), {"dim": 0}), ("w", "relu_", ("s",), {})], ("w",)).to_dict(), "is not allowed in a program"),
])
def test_a_program_no_framework_defines_is_refused_with_one_sentence(data, message):
    from fuzzer.ir import infer_shapes

    with pytest.raises(UserError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")) as refused:
        infer_shapes(Graph.from_dict(data))
    assert str(refused.value).count(". ") == 0, "one sentence"


def test_a_case_file_asking_for_a_million_steps_exits_2_and_stores_nothing(tmp_path):
    case_file = tmp_path / "case.json"
    arrays = {"x": to_base64(np.zeros((2, 3))), "y": to_base64(np.ones(2))}
    case_file.write_text(json.dumps({"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "graph": {**GOOD, "steps": 10**6},
                                     "arrays": arrays, "seed": 0, "verdict": "agree", "findings": [], "backends": []}))
    done = fuzz("import", "--db", tmp_path / "fuzz.db", case_file)
    assert done.returncode == 2, done.stderr
    assert "'steps' must be a whole number from 0 (a graph) to 8" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "fuzz.db").exists()


def test_a_campaign_of_statements_only_without_the_programs_regime_is_refused_in_one_sentence(tmp_path):
    done = fuzz("run", "--db", tmp_path / "fuzz.db", "--ops", "add_,getitem", "--max-cases", 3, "--backends", "torch-eager")
    assert done.returncode == 2 and "add `--regimes programs` to draw programs" in done.stderr, done.stderr[-2000:]


def test_the_shrinker_drops_steps_and_replaces_a_write_the_finding_does_not_need_by_its_out_of_place_form():
    from fuzzer.shrinking.shrink import shrink_case

    graph = program([("w", "add_", ("x", "y"), {})], ("w",), steps=3, inputs=(("x", (2,)), ("y", (2,))))
    case = Case(graph, {"x": np.array([1.0, 2.0]), "y": np.array([3.0, 4.0])})
    reference = get_backend("numpy-ref:cpu:float64")
    # What a wrong `add` would show on the first call: it needs neither the write nor the later calls.
    result = shrink_case(case, lambda candidate: float(np.max(reference.run(candidate)[0])) == 6.0)
    assert result.case.graph.steps == 1 and [node.op for node in result.case.graph.nodes] == ["add"]
    assert result.stats["fewer_steps"].accepted == 1 and result.stats["out_of_place"].accepted == 1


@pytest.mark.long  # CI's 15 minutes: the lost third update and the recompile's fault keep a program campaign in CI
def test_a_short_campaign_finds_a_copy_into_a_view_that_writes_only_the_first_element(tmp_path):
    rows, shrunk = planted_fault_campaign(tmp_path, PLUGIN, "fault-copy-first", "copy_,getitem,sin", "--regimes", "programs")
    assert {row["signature"] for row in rows} == {"mismatch | fault-copy-first | copy_"}
    assert [node["op"] for node in shrunk["graph"]["nodes"]] == ["getitem", "copy_"] and shrunk["graph"]["steps"] == 1


@pytest.mark.long  # CI's 15 minutes: three other program campaigns stay in CI
def test_a_short_campaign_finds_an_addcdiv_that_ignores_its_value_and_shrinks_it_to_one_step(tmp_path):
    rows, shrunk = planted_fault_campaign(tmp_path, PLUGIN, "fault-addcdiv-value", "addcdiv_,getitem", "--regimes", "programs")
    assert {row["signature"] for row in rows} == {"mismatch | fault-addcdiv-value | addcdiv_"}
    ops = [node["op"] for node in shrunk["graph"]["nodes"]]
    assert ops[-1] == "addcdiv_" and len(ops) <= 2 and shrunk["graph"]["steps"] == 1, ops
    attrs = shrunk["graph"]["nodes"][-1]["attrs"]
    assert "item" in attrs or attrs["value"] != 1.0  # a value the fault drops: given, or read with .item()


@pytest.mark.long
@pytest.mark.parametrize("backend, ops, culprit, steps", [
    ("fault-lost-update", "add_,getitem", "add_", 3),  # the update of the third call is lost: three steps stay
    ("fault-stale-diagonal", "diagonal,add_,fill_", "diagonal", 1),  # stale within one step
])
def test_a_short_campaign_finds_a_fault_that_lives_only_in_programs(tmp_path, backend, ops, culprit, steps):
    rows, shrunk = planted_fault_campaign(tmp_path, PLUGIN, backend, ops, "--regimes", "programs")
    assert {row["signature"] for row in rows} == {f"mismatch | {backend} | {culprit}"}
    assert culprit in [node["op"] for node in shrunk["graph"]["nodes"]] and shrunk["graph"]["steps"] == steps


@pytest.mark.slow
def test_a_program_s_minimal_script_keeps_the_loop_and_the_views_and_exits_1_when_the_third_update_is_lost(tmp_path):
    from fuzzer.reproducers.minimal_reproducer import build_minimal_script
    from test_reproducers import _run

    graph, arrays, _ = SPECIFICATIONS[0]
    script = build_minimal_script(Case(graph, arrays), get_backend("torch-eager:cpu:float32"), "a program")
    assert "for step in range(3):" in script and "torch.Tensor.add_(" in script and "slice(1, 3, 1)" in script
    assert _run(script, tmp_path, None).returncode == 0
    fault = ("import torch\nadd_, calls = torch.Tensor.add_, []\n"
             "def lossy(self, *args, **kwargs):\n    calls.append(1)\n    return self if len(calls) == 3 else add_(self, *args, **kwargs)\n"
             "torch.Tensor.add_ = lossy\n")
    lost = _run(script, tmp_path, fault)
    assert lost.returncode == 1 and "MISMATCH: output 2" in lost.stderr + lost.stdout


@pytest.mark.long  # dynamic compiles of each graph and its shape variants: about a minute on 2 cores
def test_a_short_campaign_finds_a_result_wrong_only_after_a_recompile_for_a_new_size(tmp_path):
    """torch-compile-dynamic calls a program's compiled step again for its shape variants; a fault behind a
    guard on a size no program draws (more than 16 rows) is wrong only in the recompile for that size."""
    rows, shrunk = planted_fault_campaign(tmp_path, PLUGIN, "fault-recompiled-add", "add_,getitem",
                                                "--regimes", "programs", max_cases=3)
    assert {row["signature"] for row in rows} == {"mismatch | fault-recompiled-add | add_"}
    assert [node["op"] for node in shrunk["graph"]["nodes"]] == ["add_"] and shrunk["graph"]["inputs"][0]["shape"][0] == 17


def test_a_programs_campaign_whose_backends_run_no_program_is_refused_before_it_starts(tmp_path):
    """It ran 21,286 graphs and 0 cases in 10 minutes, then exited 0: every drawn program was skipped."""
    result = fuzz("run", "--db", tmp_path / "fuzz.db", "--max-cases", 5, "--regimes", "programs", "--backends", "torch-layout")
    assert result.returncode == 2 and "runs programs" in result.stderr, result.stderr
    assert not (tmp_path / "fuzz.db").exists()


def test_a_dynamic_compile_s_script_reads_integer_attributes_as_the_campaign_s_compile_did(tmp_path):
    """GPU programs campaign: view(14) > unfold > add_ crashed torch-compile-dynamic (an unfold's strides
    computed from a symbolic view size) and its script, with `size=[14]` a literal (a constant to dynamo),
    ran clean. The script now takes the integers as `graph`'s keyword defaults, which dynamo reads as
    symbols as it read the campaign's: the script and the backend give one outcome, bug or no bug."""
    from fuzzer.reproducers.minimal_reproducer import build_minimal_script
    from fuzzer.running.execute import OK, run_backend
    from test_reproducers import _run

    graph = program([("v", "view", ("x",), {"size": [14]}), ("u", "unfold", ("v",), {"dimension": 0, "size": 3, "step": 1}),
                     ("w", "add_", ("v", "y"), {"alpha": 2.0})], ("u",), steps=1, inputs=(("x", (2, 7)), ("y", (1,))))
    case = Case(graph, {"x": np.zeros((2, 7)), "y": np.zeros(1)})
    backend = get_backend("torch-compile-dynamic:cpu:float32")
    script = build_minimal_script(case, backend, "a dynamic program")
    assert "def graph(x0, x1, v_size=[14], u_dimension=0, u_size=3, u_step=1):" in script
    assert "view(x0, size=[14])" in build_minimal_script(case, get_backend("torch-compile:cpu:float32"), "a static program")
    crashed_here = run_backend(backend, case).status != OK
    ran = _run(script, tmp_path, None)
    assert (ran.returncode == 1) == crashed_here, (crashed_here, ran.stdout + ran.stderr)
    # An implementation the script inlines takes them too (a getitem's slice: the GPU campaign's fill_ finding).
    inlined = program([("s", "swapaxes", ("x",), {"axis0": 2, "axis1": 0}),
                       ("g", "getitem", ("s",), {"dim": 0, "start": 1, "step": 2, "stop": 2}),
                       ("f", "fill_", ("g",), {"value": 0.0})], ("f",), steps=1, inputs=(("x", (1, 2, 2)),))
    assert "slice(g_start, g_stop, g_step)" in build_minimal_script(Case(inlined, {"x": np.ones((1, 2, 2))}), backend, "inlined")


# Inputs that change size between steps (ir.Resize): x[:r, 1:3] += m[:r] / 2, then sin(x[:r]), at 3, 5 and 2 rows of a
# 5-row state: each step writes the leading rows it takes, a view of x.
RESIZED = Graph((TensorSpec("x", (5, 3)), TensorSpec("m", (5, 2))),
                (Node("v", "getitem", ("x",), {"dim": 1, "start": 1, "stop": 3, "step": 1}),
                 Node("a", "add_", ("v", "m"), {"alpha": 0.5}), Node("s", "sin", ("x",), {})),
                ("s",), steps=3, resized=Resize(("x", "m"), (3, 5, 2), "unbacked"))
RESIZED_ARRAYS = {"x": np.zeros((5, 3), np.float32), "m": np.ones((5, 2), np.float32)}
# Rows 0 and 1 get three halves, row 2 two, rows 3 and 4 one: x's second and third columns after the last step.
RESIZED_FINAL = [[0, 1.5, 1.5], [0, 1.5, 1.5], [0, 1, 1], [0, 0.5, 0.5], [0, 0.5, 0.5]]


@pytest.mark.parametrize("backend", ["numpy-ref:cpu:float64", "torch-eager:cpu:float32",
                                     pytest.param("torch-compile:cpu:float32", marks=pytest.mark.slow)])
def test_a_resized_program_s_step_takes_the_leading_rows_of_its_state_and_writes_them(backend):
    results = get_backend(backend).run(Case(RESIZED, RESIZED_ARRAYS))
    assert [np.shape(result) for result in results] == [(3, 3), (5, 3), (2, 3), (5, 3)]
    np.testing.assert_array_equal(results[-1], RESIZED_FINAL)
    np.testing.assert_allclose(results[2], np.sin(np.asarray(RESIZED_FINAL)[:2]), rtol=1e-6)


def test_jax_gives_no_verdict_on_a_resized_program_whose_translation_is_made_for_one_shape():
    assert not get_backend("jax-jit:cpu:float32").supports_graph(RESIZED)
    assert get_backend("jax-jit:cpu:float32").supports_graph(replace(RESIZED, resized=None))


def test_a_resized_program_s_script_takes_each_step_s_rows_and_marks_them_as_the_campaign_did(tmp_path):
    from fuzzer.reproducers.minimal_reproducer import build_minimal_script
    from test_reproducers import _run

    backend = get_backend("torch-compile:cpu:float32")
    script = build_minimal_script(Case(RESIZED, RESIZED_ARRAYS), backend, "a resized program")
    assert "step_args[i] = args[i][:[3, 5, 2][step]]" in script, script
    assert "torch._dynamo.decorators.mark_unbacked(step_args[i], 0)" in script and "program(*step_args)" in script
    eager = build_minimal_script(Case(RESIZED, RESIZED_ARRAYS), get_backend("torch-eager:cpu:float32"), "a resized program")
    assert "mark_" not in eager and _run(eager, tmp_path, None).returncode == 0


@pytest.mark.parametrize("resized, message", [
    ({"inputs": ["x"], "rows": [3, 5], "mark": "unbacked"}, "'resized' gives 2 row counts for a program of 3 steps"),
    ({"inputs": ["x"], "rows": [3, 1, 2], "mark": "dynamic"}, "'resized' cuts 'x' of 5 rows to [3, 1, 2]; give counts from 2"),
    ({"inputs": ["x"], "rows": [3, 5, 2], "mark": "static"}, "'resized' must be"),
    ({"inputs": ["y"], "rows": [3, 5, 2], "mark": "dynamic"}, "'resized' names 'y', which is not an input with a dim 0"),
    # m keeps its 5 rows, which do not broadcast into 3 rows of x
    ({"inputs": ["x"], "rows": [3, 5, 2], "mark": "dynamic"}, "(at 2 rows of x, as a resized step runs it)"),
])
def test_a_case_file_resizing_what_no_step_can_run_exits_2_with_one_sentence(tmp_path, resized, message):
    graph = RESIZED.to_dict()
    graph["resized"] = resized
    case_file = tmp_path / "case.json"
    case_file.write_text(json.dumps({"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "graph": graph, "seed": 0,
                                     "arrays": {name: to_base64(array) for name, array in RESIZED_ARRAYS.items()},
                                     "verdict": "agree", "findings": [], "backends": []}))
    done = fuzz("import", "--db", tmp_path / "fuzz.db", case_file)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert done.stderr.strip().count(". ") == 0 and "Traceback" not in done.stderr
    assert not (tmp_path / "fuzz.db").exists()


@pytest.mark.long  # a compile a graph and a candidate (5 to 20 s on 2 shared cores, more with a cold cache): unit checks above stay in CI
def test_a_short_campaign_finds_a_compiler_pass_wrong_only_where_a_size_is_unbacked_and_its_cases_keep_the_mark(tmp_path):
    plugin = str(Path(__file__).parent / "plugins" / "unbacked_size_fault.py")
    db = tmp_path / "fuzz.db"
    done = fuzz("run", "--db", db, "--plugin", plugin, "--backends", "planted-unbacked-add", "--ops", "add_", "--regimes",
                "programs", "--compiled-inputs", 0, "--localize-time", 0, "--max-cases", 6, "--workers", 1,
                "--shrink-time", 90, "--seed", 0)
    assert done.returncode == 1, done.stderr[-2000:]
    rows = json.loads(fuzz("list", "--cases", "--db", db, "--json").stdout)
    assert {row["signature"] for row in rows} == {"mismatch | planted-unbacked-add:cpu:float32 | add_"}
    for row in rows:  # a backed size, or none, compiles right: the shrinker keeps the unbacked mark (one add_ after 65 s)
        case = json.loads(fuzz("show", "--db", db, row["id"], "--json").stdout)
        assert case["graph"]["resized"]["mark"] == "unbacked", case["graph"]
