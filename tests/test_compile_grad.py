"""torch-compile-grad: torch.compile of the forward and its backward, gradients w.r.t. the graph
inputs and the parameters, judged against float64 eager autograd (fuzzer/backends/gradients.py).

Real inductor compiles, kept few: one structure at three input sets, and one campaign of one
graph of `mul`s against a plugin whose mul has a backward that halves the gradient (a fault only
a compiled backward reaches: its forward is right)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fuzzer import verdicts
from fuzzer.arrays import materialize
from fuzzer.backends import get_backend, parse_backend_list
from fuzzer.backends.gradients import differentiated
from fuzzer.cli import main
from fuzzer.corpus import Corpus
from fuzzer.ir import Graph, Node, TensorSpec
from fuzzer.judging.backend_verdict import reference_for
from fuzzer.judging.check import check_case
from fuzzer.oracle import allowed_error, compute_reference
from fuzzer.plugins import load_plugins
from fuzzer.reproducers.reproducer import build_script
from fuzzer.running.campaign import CampaignOptions, run_campaign

PLUGIN = str(Path(__file__).parent / "plugins" / "compile_grad_half_mul.py")
# linear -> batch_norm (eval) -> tanh: weights to differentiate, and running statistics that get none.
GRAPH = Graph(inputs=[TensorSpec("x", (4, 3))],
              nodes=[Node("n0", "linear", ["x"], {"out_features": 5, "bias": True}),
                     Node("n1", "batch_norm", ["n0"], {"eps": 1e-5, "training": False}), Node("n2", "tanh", ["n1"], {})],
              outputs=["n2"])


def test_compiled_gradients_match_eager_module_gradients_and_cover_the_parameters():
    compiled, module = get_backend("torch-compile-grad:cpu:float32"), get_backend("torch-module-grad:cpu:float32")
    for seed in range(3):  # one structure: one forward and one backward compile
        case = materialize(GRAPH, seed)
        assert differentiated(case, parameters=True) == ["x", "n0.weight", "n0.bias", "n1.weight", "n1.bias"]
        assert check_case(case, [compiled, module]).verdict == verdicts.AGREE
        ours, theirs = compiled.run(case), module.run(case)
        assert len(ours) == 1 + 5 and len(theirs) == 1 + 1  # outputs, then x's gradient (and the weights')
        reference = reference_for(compiled, case, compute_reference(case, {"float32"}))
        for index in (0, 1):  # the output and x's gradient: the same numbers as eager autograd's
            assert np.abs(ours[index] - theirs[index]).max() <= allowed_error(reference, index, "float32")
        assert all(np.abs(gradient).max() > 0 for gradient in ours[2:])  # every weight gets its gradient


def test_the_grad_set_names_every_gradient_backend():
    assert [b.name for b in parse_backend_list("grad")] == [
        "torch-module-grad:cpu:float32", "jax-grad:cpu:float32", "jax-double-grad:cpu:float32",
        "torch-compile-grad:cpu:float32", "torch-compile-grad-dynamic:cpu:float32", "torch-compile-double-grad:cpu:float32",
        "torch-export-grad:cpu:float32", "torch-jvp:cpu:float32",
        "torch-compile-jvp:cpu:float32", "torch-compile-hvp:cpu:float32", "jax-jvp:cpu:float32", "jax-hvp:cpu:float32"]


def test_a_plugin_s_autograd_function_comes_along_with_its_file():
    # A script cannot import a plugin file as a module (it is loaded under a name of ours): its
    # autograd.Function class is written out with the file, not imported from `fuzzer_plugin_...`.
    load_plugins([PLUGIN])
    case = materialize(Graph([TensorSpec("a", (2, 3)), TensorSpec("b", (2, 3))], [Node("n0", "mul", ["a", "b"], {})], ["n0"]), 0)
    script = build_script(case, get_backend("plugin-compile-grad-half-mul"), "planted")
    assert "class MulHalvingItsGradient(torch.autograd.Function)" in script and "import fuzzer_plugin" not in script


@pytest.fixture(scope="module")
def half_gradient_finding(tmp_path_factory):
    """A short campaign (one graph of muls) against the planted backward fault, and its bucket."""
    db = tmp_path_factory.mktemp("compile-grad") / "c.db"
    progress = run_campaign(Corpus(db), CampaignOptions(
        backends=["plugin-compile-grad-half-mul"], plugins=[PLUGIN], ops=["mul"], max_cases=1,
        inputs_per_graph=2, workers=1, shrink_time=5))
    assert progress.status == "finished"
    buckets = Corpus(db).buckets()
    assert [bucket["signature"] for bucket in buckets] == ["mismatch | plugin-compile-grad-half-mul | mul@vjp"]
    return db, f"B{buckets[0]['id']}"


def _export_and_run(db, bucket: str, fmt: str, folder: Path) -> subprocess.CompletedProcess:
    script = folder / f"{fmt}.py"
    exported = CliRunner().invoke(main, ["export", bucket, "--db", str(db), "--plugin", PLUGIN, "--format", fmt,
                                         "-o", str(script)])
    assert exported.exit_code == 0, exported.output
    text = script.read_text()
    # The backward runs through the compiled program: autograd.grad on torch.compile's outputs.
    assert "program = torch.compile(graph" in text and "torch_outputs_and_gradients(program, args)" in text
    return subprocess.run([sys.executable, script.name], cwd=folder, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_backward_only_fault_is_found_and_its_script_exits_1(half_gradient_finding, tmp_path):
    ran = _export_and_run(*half_gradient_finding, "script", tmp_path)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "output 1: max abs error" in ran.stdout  # a gradient, not the forward output 0, is wrong


@pytest.mark.long  # a second fresh-process compile of the same graph; the full harness above is CI's
def test_the_minimal_export_of_a_gradient_finding_exits_1(half_gradient_finding, tmp_path):
    ran = _export_and_run(*half_gradient_finding, "minimal", tmp_path)
    assert ran.returncode == 1 and "MISMATCH: output 1:" in ran.stderr, ran.stdout + ran.stderr


def test_gradient_contributions_that_cancel_are_allowed_their_rounding():
    """div(x, x): the two contributions to x's gradient, 1/x and -x/x^2, cancel exactly in float64
    eager autograd, and to within an ulp of 1/x in a float32 backward that fuses them (inductor on
    CUDA gives -5.96e-8 at x = -0.527); the honest models round each contribution, so the allowance
    covers that ulp, and a gradient off by 1e-3 of 1/x is still far outside it."""
    graph = Graph([TensorSpec("x", (1, 2))], [Node("n0", "div", ["x", "x"], {})], ["n0"])
    case = materialize(graph, 0)
    case.arrays["x"] = np.array([[0.75, -0.52707404]])
    backend = get_backend("torch-compile-grad:cpu:float32")
    reference = reference_for(backend, case, compute_reference(case, {"float32"}))
    gradient = len(graph.outputs)  # the first gradient output: d/dx
    allowed = allowed_error(reference, gradient, "float32")
    ulp = float(np.spacing(np.float32(1 / 0.52707404)))
    assert ulp <= allowed < 1e-3 / 0.75, allowed
