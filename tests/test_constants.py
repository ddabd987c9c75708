"""Compile-time constants: jax-jit-const closes over the weights (and, in half the cases, the first
input), so a fault that lives only in constant folding is found by it and not by jax-jit; each
input set is compiled with its own constants; torch-compile-frozen really freezes its weights."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fuzzer.arrays import materialize
from fuzzer.backends import get_backend
from fuzzer.backends.jax_jit_const import constant_inputs
from fuzzer.drawing.generate import CaseGenerator
from fuzzer.drawing.regimes import BY_NAME
from fuzzer.ir import split_arrays
from fuzzer.judging.check import check_case
from fuzzer.judging.reference import evaluate_all
from fuzzer.plugins import load_plugins
from fuzzer.reproducers.reproducer import build_script

PLUGIN = str(Path(__file__).parent / "plugins" / "composed_faults.py")


def linear_cases(count: int):
    generator = CaseGenerator(["linear", "relu", "add"], 3, (BY_NAME["small"],))
    return [generator.case(seed) for seed in range(count)]


@pytest.mark.slow
def test_a_fault_in_folded_weights_is_found_with_constants_and_not_with_arguments():
    load_plugins([PLUGIN])
    cases = [case for case in linear_cases(6) if "linear" in case.graph.op_names()]
    assert cases
    for name, expected in (("fault-folded-linear", True), ("fault-folded-linear-args", False)):
        found = [f.signature for case in cases for f in check_case(case, [get_backend(name)]).findings]
        assert bool(found) == expected, (name, found)
        assert all(signature == f"mismatch | {name} | linear" for signature in found)


def test_each_input_set_is_compiled_with_its_own_constants():
    backend = get_backend("jax-jit-const")
    graph = next(case.graph for case in linear_cases(6) if "linear" in case.graph.op_names())
    outputs = []
    for seed in (10, 11):  # an even and an odd seed: the first input a constant in one of them
        case = materialize(graph, seed)
        outputs.append(backend.run(case)[0])
        expected = evaluate_all(graph, *split_arrays(case))[graph.outputs[0]]
        np.testing.assert_allclose(outputs[-1], expected, rtol=1e-4, atol=1e-5)
    assert not np.allclose(*outputs)
    assert constant_inputs(materialize(graph, 11)) == [graph.inputs[0].name] and not constant_inputs(materialize(graph, 10))


@pytest.mark.slow
def test_random_graphs_with_constants_agree_with_the_reference():
    """Whole graphs folded by XLA (an odd seed, one small input, no weights) included."""
    backend = get_backend("jax-jit-const")
    generator = CaseGenerator(None, 5)
    for seed in range(8):
        drawn = generator.case(seed)
        for case in (drawn, materialize(drawn.graph, drawn.seed + 1)):
            result = check_case(case, [backend])
            assert not result.findings, (case.graph.op_names(), case.seed, result.verdicts)


@pytest.mark.slow
def test_the_reproducer_closes_over_the_same_arrays(tmp_path):
    case = next(case for case in linear_cases(6) if case.seed % 2 and len(case.graph.inputs) >= 1)
    script = build_script(case, get_backend("jax-jit-const"), "constants")
    free = [index for index, spec in enumerate(case.graph.inputs) if spec.name not in constant_inputs(case)]
    assert f"FREE = {free}" in script and "jax.jit(closed_over)" in script
    (tmp_path / "repro.py").write_text(script)
    ran = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr


FREEZING_PROBE = """
import json, torch
from torch._dynamo.utils import counters
from fuzzer.backends.torch_compile_frozen import TorchCompileFrozen
from fuzzer.drawing.generate import CaseGenerator
from fuzzer.judging.check import check_case

class Unfrozen(TorchCompileFrozen):
    compile_options = {"freezing": False}

case = CaseGenerator(["linear"], 1).case(0)
packed = {"mkldnn": torch.backends.mkldnn.is_available()}
for backend in (TorchCompileFrozen(), Unfrozen()):
    counters.clear()
    torch._dynamo.reset()
    with torch._inductor.config.patch(force_disable_caches=True):  # a cached graph runs no pass to count
        assert not check_case(case, [backend]).findings
    packed[type(backend).__name__] = counters["inductor"]["mkldnn_linear_weight_pack_matcher_count"]
print(json.dumps(packed))
"""


@pytest.mark.long  # CI's 15 minutes: inductor's frozen and unfrozen compiles in a Python of their own
def test_torch_compile_frozen_folds_its_weights_as_constants():
    """Inductor packs a linear's weight for mkldnn only when it is a frozen constant: the pass
    fires under torch-compile-frozen and not when the same compile leaves freezing off. In a fresh
    interpreter: inductor's state after other tests' compiles (caches, patterns) hides the count."""
    ran = subprocess.run([sys.executable, "-c", FREEZING_PROBE], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    packed = json.loads(ran.stdout.strip().splitlines()[-1])
    if not packed["mkldnn"]:
        pytest.skip("this torch has no mkldnn, whose weight packing shows the freezing")
    assert packed["TorchCompileFrozen"] >= 1 and packed["Unfrozen"] == 0, packed


PLACEMENT_PROBE = """
import json, jax, jax.numpy as jnp
from fuzzer.backends import get_backend
from fuzzer.ir import Graph, Node, TensorSpec
jax.config.update("jax_default_device", jax.devices("cpu")[1])  # stands in for a GPU as jax's default
graph = Graph([TensorSpec("x0", (2,))], [Node("n0", "relu", ["x0"], {})], ["n0"])
def no_argument():
    return jax.jit(lambda: jnp.ones(2) * 2)()
seen = {"default": str(no_argument().devices())}
with get_backend("jax-jit-const:cpu:float32").running_context(graph):
    seen["backend"] = str(no_argument().devices())
seen["first"] = str({jax.devices("cpu")[0]})
print(json.dumps(seen))
"""


def test_a_jitted_function_without_arguments_runs_on_the_backends_own_device():
    """jax runs a jitted function that takes no argument (jax-jit-const closing over every input) on
    its default device: the GPU on a GPU machine, where jax-jit-const:cpu's case 277 of the GPU
    campaign was really TF32 on the GPU. A second host device stands in for the GPU here."""
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    ran = subprocess.run([sys.executable, "-c", PLACEMENT_PROBE], capture_output=True, text=True, timeout=300, env=env)
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout.strip().splitlines()[-1])
    assert seen["default"] != seen["first"], seen  # the probe can see a wrong placement
    assert seen["backend"] == seen["first"], seen
