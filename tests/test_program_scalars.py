"""A program's write reading its scalar at run time with `.item()` (fuzzer/programs/program.py, `scalar_reads`), a sum over
a selection whose size depends on the values (`masked_select_sum`), torch-compile-capture, where dynamo
captures both, and torch-compile-breaks, where `.item()` breaks the graph."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conftest import fuzz, planted_fault_campaign
from fuzzer.arrays import to_base64
from fuzzer.backends import get_backend
from fuzzer.corpus.case_forms import EXPORT_FORMAT, EXPORT_VERSION
from fuzzer.ir import Case, Graph, Node, TensorSpec
from fuzzer.programs.statements import FORMS

PLUGIN = str(Path(__file__).parent / "plugins" / "program_faults.py")

# x.addcmul_(ones, ones, value=x.mean().item()), two steps from x = [1, 2]: the mean is 1.5 and then 3, so x is
# [2.5, 3.5] after the first step and [5.5, 6.5] after the second (each step's output, then x's final value).
MEAN_SCALED = Graph(
    (TensorSpec("x", (2,)), TensorSpec("ones", (2,))),
    (Node("scalar", "mean", ("x",), {"dims": [0], "keepdim": False}),
     Node("update", "addcmul_", ("x", "ones", "ones", "scalar"), {"item": "value"})),
    ("update",), steps=2)
ARRAYS = {"x": np.array([1.0, 2.0], np.float32), "ones": np.ones(2, np.float32)}
EXPECTED = [[2.5, 3.5], [5.5, 6.5], [5.5, 6.5]]


# m.fill_(masked_select_sum(x, m).item()): the sum of x where m > 0, written into m. From m = [1, -1, 1] the first
# step selects 1 + 3 + 4 + 6 = 14 and the second, every element now, 21; from m = [-1, -1, -1] nothing, so 0 twice.
SELECTED = Graph(
    (TensorSpec("x", (2, 3)), TensorSpec("m", (3,))),
    (Node("picked", "masked_select_sum", ("x", "m"), {}), Node("update", "fill_", ("m", "picked"), {"item": "value"})),
    ("picked",), steps=2)
X = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
SELECTIONS = [({"x": X, "m": np.array([1, -1, 1], np.float32)}, [[14], [21], [21, 21, 21]]),
              ({"x": X, "m": np.array([-1, -1, -1], np.float32)}, [[0], [0], [0, 0, 0]])]
# x.add_(nonzero_rows_sum(x, m)); m.neg_(): the rows of x = [[0, 1], [2, 3], [4, 5]] where m > 0 are summed, so the
# picked rows alternate with m's sign: from m = [1, -1, 1] two rows, then one, then two; from m = [-1, -1, -1] none,
# all three, none. Each step's sum (the final x and m follow).
ROWS = Graph(
    (TensorSpec("x", (3, 2)), TensorSpec("m", (3,))),
    (Node("picked", "nonzero_rows_sum", ("x", "m"), {}), Node("update", "add_", ("x", "picked"), {"alpha": 1.0}),
     Node("flip", "neg_", ("m",), {})), ("picked",), steps=3)
X_ROWS = np.arange(6, dtype=np.float32).reshape(3, 2)
ROW_SELECTIONS = [({"x": X_ROWS, "m": np.array([1, -1, 1], np.float32)}, [[4, 6], [6, 9], [24, 36]]),
                  ({"x": X_ROWS, "m": np.array([-1, -1, -1], np.float32)}, [[0, 0], [6, 9], [0, 0]])]
# if x.mean().item() > 0: x.sub_(y) else: x.mul_(y), three steps from x = [1, 2, 3], y = 3: the mean is 2, so x - 3 is
# [-2, -1, 0]; the mean is -1 from then on, so x * 3 is [-6, -3, 0] and then [-18, -9, 0] (then x's final value).
BRANCHED = Graph(
    (TensorSpec("x", (3,)), TensorSpec("y", (3,))),
    (Node("scalar", "mean", ("x",), {"dims": [0], "keepdim": False}),
     Node("update", "branch_", ("x", "y", "scalar"), {"then": "sub_", "otherwise": "mul_", "item": "condition"})),
    ("update",), steps=3)
BRANCH_ARRAYS = {"x": np.array([1.0, 2.0, 3.0], np.float32), "y": np.full(3, 3.0, np.float32)}
BRANCH_EXPECTED = [[-2, -1, 0], [-6, -3, 0], [-18, -9, 0], [-18, -9, 0]]
# The reference and the runs that compile quickly (jax.jit); torch.compile has tests of its own below.
QUICK = ["numpy-ref:cpu:float64", "torch-eager:cpu:float32", "jax-eager:cpu:float32", "jax-jit:cpu:float32"]


@pytest.mark.parametrize("backend", QUICK)
def test_a_scalar_read_with_item_takes_the_value_the_state_has_at_that_step(backend):
    results = get_backend(backend).run(Case(MEAN_SCALED, ARRAYS))
    assert [list(result) for result in results] == EXPECTED


@pytest.mark.parametrize("backend", QUICK)
@pytest.mark.parametrize("arrays, expected", SELECTIONS)
def test_a_selection_sized_by_the_values_sums_what_the_mask_picks_at_that_step(backend, arrays, expected):
    results = get_backend(backend).run(Case(SELECTED, arrays))
    assert [list(result) for result in results] == expected


@pytest.mark.parametrize("backend", QUICK + [pytest.param("torch-compile-capture:cpu:float32", marks=pytest.mark.slow)])
@pytest.mark.parametrize("arrays, expected", ROW_SELECTIONS)
def test_rows_picked_by_nonzero_flow_through_index_select_into_a_sum_at_each_step(backend, arrays, expected):
    results = get_backend(backend).run(Case(ROWS, arrays))
    assert [list(result) for result in results[:3]] == expected


@pytest.mark.slow
def test_a_short_campaign_finds_a_sum_wrong_only_where_nonzero_picks_none_or_one_row(tmp_path):
    rows, shrunk = planted_fault_campaign(tmp_path, PLUGIN, "fault-few-rows", "nonzero_rows_sum,add_", "--regimes", "programs")
    # The sum a later step's add_ feeds back into the rows nonzero picks: a prefix without that add_ never picks so few,
    # so a case may be charged to the add_ (fuzzer/programs/localize.py), still the one fault.
    signatures = {row["signature"] for row in rows}
    assert "mismatch | fault-few-rows | nonzero_rows_sum" in signatures
    assert signatures <= {"mismatch | fault-few-rows | nonzero_rows_sum", "mismatch | fault-few-rows | add_"}
    assert [node["op"] for node in shrunk["graph"]["nodes"]][-1] == "nonzero_rows_sum", shrunk["graph"]


@pytest.mark.parametrize("backend", QUICK + [pytest.param("torch-compile-breaks:cpu:float32", marks=pytest.mark.slow)])
def test_a_branch_on_a_value_read_with_item_takes_the_arm_the_state_decides_at_each_step(backend):
    results = get_backend(backend).run(Case(BRANCHED, BRANCH_ARRAYS))
    assert [list(result) for result in results] == BRANCH_EXPECTED


@pytest.mark.parametrize("kind", ["torch-compile", "torch-compile-capture", "torch-compile-dynamic"])
def test_a_compile_of_one_whole_graph_runs_no_branch_on_a_value(kind):
    """fullgraph=True cannot trace Python control flow on a number read at run time (dynamo's documented limit):
    no verdict, rather than an error that reads as a bug; torch-compile-breaks takes the branch after its break."""
    assert not get_backend(f"{kind}:cpu:float32").supports_graph(BRANCHED)
    assert get_backend("torch-compile-breaks:cpu:float32").supports_graph(BRANCHED)


def test_a_branch_s_script_writes_the_if_on_item_literally_and_exits_0_where_torch_is_right(tmp_path):
    from fuzzer.reproducers.minimal_reproducer import build_minimal_script
    from test_reproducers import _run

    script = build_minimal_script(Case(BRANCHED, BRANCH_ARRAYS), get_backend("torch-eager:cpu:float32"), "a branch")
    assert "    if scalar.item() > 0:\n        update = torch.Tensor.sub_(x0, x1)\n    else:\n" in script, script
    assert "for step in range(3):" in script and _run(script, tmp_path, None).returncode == 0


@pytest.mark.parametrize("change, message", [
    ({"then": "div_"}, "then div_ must name one of add_, sub_, mul_, copy_"),
    ({"otherwise": "exec"}, "otherwise exec must name one of add_, sub_, mul_, copy_"),
])
def test_a_case_file_naming_a_branch_arm_outside_the_declared_writes_exits_2_with_one_sentence(tmp_path, change, message):
    graph = json.loads(json.dumps(BRANCHED.to_dict()))  # a copy: to_dict shares the nodes' attributes
    graph["nodes"][1]["attrs"].update(change)
    done = fuzz("import", "--db", tmp_path / "fuzz.db", _case_file(tmp_path, graph, BRANCH_ARRAYS))
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert done.stderr.strip().count(". ") == 0 and "Traceback" not in done.stderr
    assert not (tmp_path / "fuzz.db").exists()


@pytest.mark.long  # CI's 15 minutes (75 s on a loaded machine): the branch's unit checks and its script above stay in CI
def test_a_short_campaign_finds_a_branch_that_keeps_its_first_arm_and_its_script_keeps_the_loop_and_the_if(tmp_path):
    from test_reproducers import _run

    rows, shrunk = planted_fault_campaign(tmp_path, PLUGIN, "fault-stale-branch", "branch_,getitem", "--regimes", "programs")
    assert {row["signature"] for row in rows} == {"mismatch | fault-stale-branch | branch_"}
    graph = shrunk["graph"]
    assert graph["steps"] >= 2 and len(graph["nodes"]) <= 2 and graph["nodes"][-1]["op"] == "branch_", graph
    script = fuzz("export", "--db", tmp_path / "fuzz.db", shrunk["id"], "--format", "minimal", "--plugin", PLUGIN).stdout
    assert f"for step in range({graph['steps']}):" in script and ".item()" in script, script
    assert _run(script, tmp_path, None).returncode == 1


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["torch-compile", "torch-compile-capture"])
def test_a_step_that_reads_item_compiles_whole_into_one_graph(kind):
    """fullgraph=True: dynamo keeps `.item()` in the graph as an unbacked symbol (torch 2.13 and 2.15 do so even
    without capture_scalar_outputs, which torch-compile-capture sets), never a break and a second graph."""
    import torch._dynamo

    torch._dynamo.reset()
    before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    results = get_backend(f"{kind}:cpu:float32").run(Case(MEAN_SCALED, ARRAYS))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] - before == 1
    assert [list(result) for result in results] == EXPECTED


@pytest.mark.slow
def test_torch_compile_capture_compiles_a_selection_sized_by_the_values_into_one_graph_for_any_selection():
    import torch._dynamo

    torch._dynamo.reset()
    before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    for arrays, expected in SELECTIONS:  # 4 elements selected, 3, then none: one compiled graph for all
        results = get_backend("torch-compile-capture:cpu:float32").run(Case(SELECTED, arrays))
        assert [list(result) for result in results] == expected
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] - before == 1


@pytest.mark.slow
def test_torch_compile_breaks_ends_the_graph_at_item_and_resumes_in_a_graph_recompiled_for_each_new_number(tmp_path):
    """fullgraph=False, capture off: the graph of the mean, the break, then the resumed graph of addcmul_ taking the
    number as a constant, compiled for 1.5 and again for 3 (the second step): three graphs, as its script says."""
    import torch._dynamo
    from fuzzer.reproducers.minimal_reproducer import build_minimal_script
    from test_reproducers import _run

    backend = get_backend("torch-compile-breaks:cpu:float32")
    before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert [list(result) for result in backend.run(Case(MEAN_SCALED, ARRAYS))] == EXPECTED
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] - before == 3
    script = build_minimal_script(Case(MEAN_SCALED, ARRAYS), backend, "a program through a graph break")
    assert "fullgraph=False" in script and "value=scalar.item())" in script and "'capture_scalar_outputs': False" in script
    ran = _run(script, tmp_path, None)
    assert ran.returncode == 0 and "dynamo graphs: 3" in ran.stderr, ran.stdout + ran.stderr


def test_torch_compile_breaks_runs_programs_only():
    backend = get_backend("torch-compile-breaks:cpu:float32")
    assert backend.supports_graph(MEAN_SCALED) and not backend.supports_graph(Graph(
        (TensorSpec("x", (2,)),), (Node("y", "sin", ("x",), {}),), ("y",)))


def test_the_reproducer_reads_the_scalar_with_item_and_patches_dynamo_as_the_campaign_did():
    imports, code = get_backend("torch-compile-capture:cpu:float32").reproducer_program(Case(MEAN_SCALED, ARRAYS))
    assert "torch.Tensor.addcmul_(" in code and ".item())" in code and "for step in range(2):" in code
    assert "torch._dynamo.config.patch({'capture_scalar_outputs': True, 'capture_dynamic_output_shape_ops': True})" in code


def _case_file(folder, graph: dict, arrays: dict):
    case_file = folder / "case.json"
    case_file.write_text(json.dumps({"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "graph": graph,
                                     "arrays": {name: to_base64(array) for name, array in arrays.items()},
                                     "seed": 0, "verdict": "agree", "findings": [], "backends": []}))
    return case_file


def test_a_case_file_whose_scalar_operand_is_not_one_element_exits_2_with_one_sentence(tmp_path):
    graph = MEAN_SCALED.to_dict()
    graph["nodes"][1]["inputs"][-1] = "x"  # two elements
    done = fuzz("import", "--db", tmp_path / "fuzz.db", _case_file(tmp_path, graph, ARRAYS))
    assert done.returncode == 2, done.stderr
    assert "the operand read with .item() has shape [2], which is not one element" in done.stderr
    assert done.stderr.strip().count(". ") == 0 and "Traceback" not in done.stderr
    assert not (tmp_path / "fuzz.db").exists()


@pytest.mark.parametrize("backend", [
    pytest.param("fault-half-scalar", marks=pytest.mark.long),  # CI's 15 minutes: the .item() scalar's unit checks stay in CI
    # The number a graph resumed after the .item() break takes: a compile a step (one a new number): a minute or more.
    pytest.param("fault-broken-half-scalar", marks=pytest.mark.long),
])
def test_a_short_campaign_finds_a_scalar_read_in_the_wrong_dtype_and_its_minimal_script_keeps_the_loop_and_the_item(
        tmp_path, backend):
    from test_reproducers import _run

    # A compile a step of each input set: seed 0's first graph has the fault (2 new buckets after 538 s at a load of 6).
    fewer = (("--inputs-per-graph", 2), 2) if backend == "fault-broken-half-scalar" else ((), 20)
    rows, shrunk = planted_fault_campaign(tmp_path, PLUGIN, backend, "addcmul_", "--regimes", "programs", *fewer[0],
                                          max_cases=fewer[1])
    # A scalar past float16's range becomes inf: the fault's nan-inf, charged to the same write.
    assert f"mismatch | {backend} | addcmul_" in {row["signature"] for row in rows}
    assert {row["signature"] for row in rows} <= {f"{verdict} | {backend} | addcmul_" for verdict in ("mismatch", "nan-inf")}
    graph = shrunk["graph"]
    # Through the break each candidate is a compile a step: 20 s of shrinking left 5 statements at a load of 6.
    assert len(graph["nodes"]) <= (3 if backend == "fault-half-scalar" else 5), graph
    assert any(node["op"] == "addcmul_" and "item" in node["attrs"] for node in graph["nodes"])
    script = fuzz("export", "--db", tmp_path / "fuzz.db", shrunk["id"], "--format", "minimal", "--plugin", PLUGIN).stdout
    assert f"for step in range({graph['steps']}):" in script and ".item()" in script, script
    ran = _run(script, tmp_path, None)
    assert ran.returncode == 1 and "MISMATCH" in ran.stdout + ran.stderr, ran.stdout + ran.stderr


# Python arithmetic on the number read (program_ops.FORMS): x.addcmul_(ones, ones, value=2 * x.mean().item() - 0.5) from
# x = [1, 2]: the mean is 1.5, so the value 2.5 and x [3.5, 4.5]; then the mean 4, the value 7.5 and x [11, 12].
SCALED = Graph(MEAN_SCALED.inputs, (MEAN_SCALED.nodes[0], Node("update", "addcmul_", ("x", "ones", "ones", "scalar"), {
    "item": "value", "arithmetic": {"form": "scale_shift", "c": 2.0, "d": -0.5}})), ("update",), steps=2)
SCALED_EXPECTED = [[3.5, 4.5], [11, 12], [11, 12]]


@pytest.mark.parametrize("backend", QUICK + [pytest.param("torch-compile-capture:cpu:float32", marks=pytest.mark.slow)])
def test_a_scalar_computed_in_python_from_the_number_read_takes_the_form_s_value_at_each_step(backend):
    results = get_backend(backend).run(Case(SCALED, ARRAYS))
    assert [list(result) for result in results] == SCALED_EXPECTED


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_arithmetic_form_is_defined_for_every_number_its_constants_allow(form):
    compute, constants, _ = FORMS[form]
    for corner in ({key: c.low for key, c in constants.items()}, {key: c.high for key, c in constants.items()}):
        for number in (0.0, -0.0, 1e-300, -1e300, 3.4e38, float("inf"), float("-inf")):
            assert np.isfinite(compute([number], {}, corner)) or not np.isfinite(number), (corner, number)


@pytest.mark.parametrize("change, message", [
    ({"form": "exec"}, "arithmetic form 'exec' is not declared; use one of scale_shift, bias_correction, power_complement, damped"),
    ({"c": float("nan")}, "arithmetic constant c = nan must be a number in [-4.0, 4.0]"),
    ({"e": 1.0}, "arithmetic form scale_shift takes the constants c, d, got c, d, e"),
])
def test_a_case_file_naming_an_arithmetic_form_outside_the_declared_ones_exits_2_with_one_sentence(tmp_path, change, message):
    graph = json.loads(json.dumps(SCALED.to_dict()))
    graph["nodes"][1]["attrs"]["arithmetic"].update(change)
    case_file = _case_file(tmp_path, graph, ARRAYS)
    done = fuzz("import", "--db", tmp_path / "fuzz.db", case_file)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert done.stderr.strip().count(". ") == 0 and "Traceback" not in done.stderr
    assert not (tmp_path / "fuzz.db").exists()


# s = x.mean().item() read once for x.add_(m, alpha=s) and then x.mul_(s), as an optimizer reads its step size once.
SHARED = Graph(
    (TensorSpec("x", (3,)), TensorSpec("m", (3,))),
    (Node("s", "mean", ("x",), {"dims": [0], "keepdim": False}), Node("a", "add_", ("x", "m", "s"), {"item": "alpha"}),
     Node("b", "mul_", ("x", "s"), {"item": "other", "arithmetic": {"form": "damped", "c": 2.0}})), ("b",), steps=3)
SHARED_ARRAYS = {"x": np.ones(3, np.float32), "m": np.arange(3, dtype=np.float32)}


def test_a_number_read_once_feeds_every_later_write_that_reads_the_value_until_its_memory_is_written():
    from fuzzer.ir import infer_shapes
    from fuzzer.programs.program import shared_reads

    assert shared_reads(SHARED, infer_shapes(SHARED)) == {"a": "a", "b": "a"}
    rewritten = Graph(SHARED.inputs, SHARED.nodes[:2] + (Node("w", "fill_", ("s",), {"value": 1.0}),) + SHARED.nodes[2:],
                      ("b",), steps=3)
    assert shared_reads(rewritten, infer_shapes(rewritten)) == {"a": "a", "b": "b"}, "s was written: read it again"


def test_a_script_reads_a_shared_number_once_and_writes_its_arithmetic_literally_and_exits_0_where_torch_is_right(tmp_path):
    from fuzzer.reproducers.minimal_reproducer import build_minimal_script
    from test_reproducers import _run

    script = build_minimal_script(Case(SHARED, SHARED_ARRAYS), get_backend("torch-eager:cpu:float32"), "a shared number")
    assert "    a_number = s.item()  # one number for every statement that reads it\n" in script, script
    assert "alpha=a_number)" in script and "other=2.0 / (1 + abs(a_number)))" in script, script
    assert _run(script, tmp_path, None).returncode == 0


@pytest.mark.slow
def test_a_short_campaign_finds_arithmetic_on_the_number_read_rounded_to_half(tmp_path):
    from test_reproducers import _run

    rows, shrunk = planted_fault_campaign(tmp_path, PLUGIN, "fault-half-correction", "addcdiv_,bias_correction",
                                          "--regimes", "programs")
    assert {row["signature"] for row in rows} == {"mismatch | fault-half-correction | addcdiv_"}
    graph = shrunk["graph"]
    assert len(graph["nodes"]) <= 3 and graph["nodes"][-1]["attrs"]["arithmetic"]["form"] == "bias_correction", graph
    script = fuzz("export", "--db", tmp_path / "fuzz.db", shrunk["id"], "--format", "minimal", "--plugin", PLUGIN).stdout
    assert " ** (1 + abs(" in script and ".item()" in script, script
    assert _run(script, tmp_path, None).returncode == 1


@pytest.mark.long  # CI's 15 minutes: 40 graphs that find nothing
def test_a_campaign_whose_ops_leave_the_arithmetic_out_never_reaches_the_half_correction_fault(tmp_path):
    done = fuzz("run", "--db", tmp_path / "without.db", "--plugin", PLUGIN, "--backends", "fault-half-correction", "--ops",
                "addcdiv_", "--regimes", "programs", "--max-cases", 40, "--workers", 1, "--seed", 0)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


# Several numbers of one `.tolist()` (statements.ELEMENT): h = x.mean(0) read once as a list, x.add_(m, alpha=h[0]), then
# if h[1] > 0: x.sub_(m) else: x.mul_(m). From x = [[1, 2], [3, -4]], m = 1: h = [2, -1], so x + 2 = [[3, 4], [5, -2]], then
# times 1; h = [4, 1] the second step, so x + 4 = [[7, 8], [9, 2]], then minus 1: [[6, 7], [8, 1]].
LISTED = Graph(
    (TensorSpec("x", (2, 2)), TensorSpec("m", (2, 2))),
    (Node("h", "mean", ("x",), {"dims": [0], "keepdim": False}),
     Node("a", "add_", ("x", "m", "h"), {"item": "alpha", "element": 0}),
     Node("b", "branch_", ("x", "m", "h"), {"then": "sub_", "otherwise": "mul_", "item": "condition", "element": 1})),
    ("b",), steps=2)
LISTED_ARRAYS = {"x": np.array([[1, 2], [3, -4]], np.float32), "m": np.ones((2, 2), np.float32)}
LISTED_EXPECTED = [[[3, 4], [5, -2]], [[6, 7], [8, 1]], [[6, 7], [8, 1]]]


@pytest.mark.parametrize("backend", QUICK + [pytest.param("torch-compile-breaks:cpu:float32", marks=pytest.mark.slow)])
def test_numbers_read_with_tolist_feed_a_scalar_argument_and_a_branch_with_the_values_of_that_step(backend):
    results = get_backend(backend).run(Case(LISTED, LISTED_ARRAYS))
    assert [np.asarray(result).tolist() for result in results] == LISTED_EXPECTED


def test_a_script_reads_the_list_once_and_takes_each_number_from_it_and_exits_0_where_torch_is_right(tmp_path):
    from fuzzer.reproducers.minimal_reproducer import build_minimal_script
    from test_reproducers import _run

    script = build_minimal_script(Case(LISTED, LISTED_ARRAYS), get_backend("torch-eager:cpu:float32"), "a list")
    assert "    a_numbers = h.tolist()  # one list for every statement that reads it\n" in script, script
    assert "alpha=a_numbers[0])" in script and "    if a_numbers[1] > 0:\n" in script, script
    assert _run(script, tmp_path, None).returncode == 0


@pytest.mark.parametrize("node, change, message", [
    (1, {"element": 2}, "element 2 is not one of the 2 numbers .tolist() reads (0 to 1)"),
    (1, {"element": "0"}, "element 0 is not one of the 2 numbers .tolist() reads"),
    (0, {"keepdim": True}, "the operand read with .tolist() has shape [1, 2], which is not a list of 2 to 8 numbers"),
])
def test_a_case_file_reading_an_element_tolist_does_not_give_exits_2_with_one_sentence(tmp_path, node, change, message):
    graph = json.loads(json.dumps(LISTED.to_dict()))
    graph["nodes"][node]["attrs"].update(change)
    done = fuzz("import", "--db", tmp_path / "fuzz.db", _case_file(tmp_path, graph, LISTED_ARRAYS))
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert done.stderr.strip().count(". ") == 0 and "Traceback" not in done.stderr
    assert not (tmp_path / "fuzz.db").exists()


@pytest.mark.long  # 40 s on 2 shared cores: the list's unit checks and its script above stay in CI
def test_a_short_campaign_finds_a_tolist_that_rotates_its_numbers_shrinks_it_and_its_script_keeps_the_list(tmp_path):
    from test_reproducers import _run

    rows, shrunk = planted_fault_campaign(tmp_path, PLUGIN, "fault-rotated-list", "addcmul_,tolist", "--regimes", "programs")
    # A number larger than the right one grows the state past float32's range: the fault's nan-inf, charged to the same write.
    assert "mismatch | fault-rotated-list | addcmul_" in {row["signature"] for row in rows}
    assert {row["signature"] for row in rows} <= {f"{verdict} | fault-rotated-list | addcmul_" for verdict in ("mismatch", "nan-inf")}
    graph = shrunk["graph"]
    assert len(graph["nodes"]) <= 3 and "element" in graph["nodes"][-1]["attrs"], graph
    script = fuzz("export", "--db", tmp_path / "fuzz.db", shrunk["id"], "--format", "minimal", "--plugin", PLUGIN).stdout
    assert ".tolist()" in script and f"for step in range({graph['steps']}):" in script, script
    assert _run(script, tmp_path, None).returncode == 1



def test_a_first_step_is_judged_by_the_values_so_far_not_by_what_the_state_grows_to_later():
    """MEAN_SCALED for 4 steps: x grows from [1, 2] to [23.5, 24.5], its number read with .item() each step. An addcmul_
    whose number is 0.1% too large is 0.0015 off after the first step, where one scale for every result (24.5, and the
    sensitivity of all 4 steps) allowed 0.0096; the first step's own allows 4e-4. torch eager stays within every step's."""
    from fuzzer.oracle.compare import compare_output
    from fuzzer.oracle.reference import program_reference
    from fuzzer.plugins import load_plugin

    load_plugin(PLUGIN)
    case = Case(replace(MEAN_SCALED, steps=4), ARRAYS)
    reference = program_reference(case, {"float32"})
    judged = lambda backend: [compare_output(np.asarray(out, np.float64), index, reference, "float32")[0]  # noqa: E731
                              for index, out in enumerate(get_backend(backend).run(case))]
    assert judged("fault-slight-scalar")[0] == "mismatch"
    assert set(judged("torch-eager:cpu:float32")) == {"agree"}
