"""The onnxruntime backends (fuzzer/backends/ort.py): `ort` (graph optimizations on) and
`ort-unoptimized` (off) run the graph exported by torch.onnx, agree with the reference where
torch.onnx and ORT are right, take one export per graph structure, skip what cannot be exported
with the reason, write standalone reproducers, and a planted optimizer fault is found and shrunk.

Skipped, with the reason, where onnxruntime is not installed; the test that the rest of the
fuzzer works without it runs everywhere.
"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fuzzer.arrays import materialize
from fuzzer.backends import get_backend
from fuzzer.drawing.generate import CaseGenerator
from fuzzer.ir import Case, Graph, Node, TensorSpec
from fuzzer.judging.check import check_case
from fuzzer.reproducers.reproducer import build_script
from fuzzer.running.execute import UNSUPPORTED, run_backend

FUZZ = str(Path(sys.executable).with_name("fuzz"))
PLUGIN = str(Path(__file__).parent / "plugins" / "ort_planted_fault.py")
needs_onnxruntime = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ("onnxruntime", "onnx", "onnxscript")),
    reason="onnxruntime, onnx or onnxscript is not installed; `pip install 'opdiff-fuzz[onnx]'` adds them")


def fuzz(*args) -> subprocess.CompletedProcess:
    return subprocess.run([FUZZ, *map(str, args)], capture_output=True, text=True, timeout=300)


def one_node_case(op: str, shapes: dict, attrs: dict, seed: int = 0) -> Case:
    inputs = tuple(TensorSpec(name, shape) for name, shape in shapes.items())
    return materialize(Graph(inputs, (Node("n0", op, tuple(shapes), attrs),), ("n0",)), seed)


@needs_onnxruntime
@pytest.mark.parametrize("ops", [["conv2d", "relu", "layer_norm", "transpose"], ["gru", "linear", "softmax"],
                                 ["matmul", "batch_norm", "max_pool2d", "add"]])
def test_both_kinds_agree_with_the_reference_on_drawn_graphs(ops):
    generator = CaseGenerator(op_names=ops, max_nodes=4)
    backends = [get_backend("ort"), get_backend("ort-unoptimized")]
    for seed in range(2):
        case = generator.case(seed)
        verdicts = {v.backend: v.verdict for v in check_case(case, backends).verdicts}
        assert set(verdicts.values()) <= {"agree", "unsupported"}, (case.graph.to_json(), verdicts)


@needs_onnxruntime
def test_one_export_serves_every_case_of_a_structure_with_its_own_weights():
    from fuzzer.backends.ort import EXPORTS

    graph = Graph((TensorSpec("x", (2, 6)),), (Node("n0", "linear", ("x",), {"out_features": 3, "bias": True}),), ("n0",))
    first, second = materialize(graph, 1), materialize(graph, 2)
    assert not np.array_equal(first.arrays["n0.weight"], second.arrays["n0.weight"])
    backend = get_backend("ort")
    misses = EXPORTS.misses
    for case in (first, second):
        expected = case.arrays["x"] @ case.arrays["n0.weight"].T + case.arrays["n0.bias"]
        np.testing.assert_allclose(backend.run(case)[0], expected, rtol=1e-5, atol=1e-5)
    assert EXPORTS.misses == misses + 1, "the second case reused the first one's export"


@needs_onnxruntime
def test_the_torchscript_exporter_takes_what_the_dynamo_exporter_cannot():
    """torchlib's attention takes 4-D query, key and value only; the TorchScript exporter takes 3-D."""
    case = one_node_case("scaled_dot_product_attention", {"q": (2, 3, 5), "k": (2, 4, 5), "v": (2, 4, 5)},
                         {"causal": False, "mask": False, "scale": None})
    exported, _ = get_backend("ort").exported(case)
    assert exported.exporter == "torchscript"
    assert [v.verdict for v in check_case(case, [get_backend("ort")]).verdicts] == ["agree"]


@needs_onnxruntime
def test_what_torch_onnx_exports_as_another_computation_is_unsupported_with_the_reason():
    case = one_node_case("batch_norm", {"x": (4, 3, 2)}, {"eps": 1e-5, "training": True})
    outcome = run_backend(get_backend("ort-unoptimized"), case)
    assert outcome.status == UNSUPPORTED and "inference BatchNormalization" in outcome.error


@needs_onnxruntime
def test_reproducer_runs_without_the_fuzzer_and_exits_1_only_with_the_planted_fault(tmp_path):
    """The planted fault's rewrite is in the embedded model, so the script shows it without the plugin."""
    from fuzzer.plugins import load_plugin

    load_plugin(PLUGIN)
    case = one_node_case("softmax", {"x": (3, 4)}, {"dim": 0})
    case = materialize(Graph(case.graph.inputs, case.graph.nodes + (Node("n1", "log", ("n0",), {}),), ("n1",)), 0)
    for backend, exit_code in (("ort", 0), ("ort-unoptimized", 0), ("ort-planted-fault", 1)):
        script = tmp_path / f"{backend}.py"
        script.write_text(build_script(case, get_backend(backend), "planted-fault check"))
        done = subprocess.run([sys.executable, "-I", str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert done.returncode == exit_code, (backend, done.stdout[-1500:], done.stderr[-1500:])
        assert "onnxruntime" in done.stdout.splitlines()[0], "the script prints the versions first"


@needs_onnxruntime
@pytest.mark.slow
def test_a_short_campaign_finds_and_shrinks_the_planted_optimizer_fault(tmp_path):
    db = tmp_path / "fuzz.db"
    run = fuzz("run", "--db", db, "--plugin", PLUGIN, "--backends", "ort-planted-fault", "--ops", "softmax,log,relu",
               "--regimes", "small", "--max-cases", 6, "--workers", 1, "--shrink-time", 10, "--seed", 0,
               "--compile-share", 1, "--json")
    assert run.returncode == 1, run.stderr[-2000:]
    rows = json.loads(fuzz("list", "--cases", "--db", db, "--json").stdout)
    assert rows and all(row["signature"].split(" | ")[1] == "ort-planted-fault:cpu:float32" for row in rows)
    shrunk = min((row for row in rows if row["shrunk_from"]), key=lambda row: row["node_count"])
    ops = shrunk["op_sequence"].split(">")
    assert len(ops) <= 3 and "softmax>log" in shrunk["op_sequence"], ops


def test_without_onnxruntime_the_backend_says_how_to_install_it_and_the_rest_works():
    """A fresh interpreter where `import onnxruntime` fails (the module entry set to None, which is
    how Python marks a module that must not import)."""
    program = (
        "import sys; sys.modules['onnxruntime'] = None\n"
        "import fuzzer.cli\n"
        "from fuzzer.backends import get_backend, parse_backend_list\n"
        "from fuzzer.errors import UserError\n"
        "print(get_backend('ort').unavailable_reason())\n"
        "assert len(parse_backend_list('cpu')) > 1\n"
        "try:\n"
        "    parse_backend_list('cpu,ort')\n"
        "except UserError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    reason, error = done.stdout.strip().splitlines()
    assert "pip install 'opdiff-fuzz[onnx]'" in reason
    assert error.startswith("Backend 'ort:cpu:float32' is not available here:") and "opdiff-fuzz[onnx]" in error
