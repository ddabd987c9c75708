"""Compile configurations and transformations as backends (issue 19): each finds a planted fault
that only it can see (a control configuration with the same fault agrees), each agrees on clean
random graphs, and an accuracy regression across releases is a finding."""

from pathlib import Path

import numpy as np
import pytest

from fuzzer import verdicts
from fuzzer.arrays import materialize
from fuzzer.backends import all_ops_supported_by, get_backend, register_derived
from fuzzer.backends.gradients import cotangent
from fuzzer.backends.torch_compile import COMPILED
from fuzzer.drawing.generate import CaseGenerator
from fuzzer.ir import Graph, Node, TensorSpec
from fuzzer.judging.check import check_case
from fuzzer.plugins import load_plugin

PLUGINS = Path(__file__).parent / "plugins"


@pytest.fixture(scope="module")
def planted():
    load_plugin(str(PLUGINS / "compile_pass_faults.py"))
    load_plugin(str(PLUGINS / "transform_faults.py"))


def case_of(op, shapes, attrs=None, seed=0, **node_params):
    """A one-node case on graph inputs of these shapes."""
    inputs = [TensorSpec(f"x{i}", shape) for i, shape in enumerate(shapes)]
    graph = Graph(inputs, [Node("n0", op, [spec.name for spec in inputs], attrs or {})], ["n0"])
    return materialize(graph, seed)


def verdict_of(backend_name, case):
    [verdict] = check_case(case, [get_backend(backend_name)]).verdicts
    return verdict


def finds(backend_name, case, culprit):
    result = check_case(case, [get_backend(backend_name)])
    assert result.verdict == verdicts.MISMATCH, result.verdicts
    assert result.findings[0].culprit == culprit, result.findings[0].signature


def linear_case(seed=0):
    return case_of("linear", [(3, 5)], {"bias": True, "out_features": 4}, seed)


def test_freezing_turns_weights_into_constants_that_a_constant_fault_corrupts(planted):
    finds("planted-frozen-constants", linear_case(), "linear")
    assert verdict_of("planted-unfrozen-constants", linear_case()).verdict == verdicts.AGREE, \
        "unfrozen, the weights are graph inputs: a pass over constants must find none"


def test_dynamic_compiles_once_per_shape_free_structure_and_sees_a_symbolic_shape_fault(planted):
    small, large = case_of("tanh", [(3, 4)]), case_of("tanh", [(5, 6)])
    assert verdict_of("planted-static-symbolic", small).verdict == verdicts.AGREE, "static shapes have no symbol"
    finds("planted-dynamic-symbolic", small, "tanh")
    misses = COMPILED.misses
    assert verdict_of("torch-compile-dynamic", small).verdict == verdicts.AGREE
    assert verdict_of("torch-compile-dynamic", large).verdict == verdicts.AGREE
    assert COMPILED.misses == misses + 1, "the second shape must reuse the first shape's dynamic compile"


def test_vmap_judges_every_batch_copy_and_finds_a_rule_that_ignores_a_batch_axis(planted):
    case = case_of("add", [(3, 4), (3, 4)])
    assert verdict_of("jit-ignores-batch", case).verdict == verdicts.AGREE, "jit alone never calls the batching rule"
    finds("vmap-ignores-batch", case, "add@vmap")  # copy 0 reads its own operand: only the other copies are wrong


def test_torch_compile_vmap_judges_every_batch_copy_and_finds_a_rule_that_ignores_a_batch_axis(planted):
    case = case_of("mul", [(3, 4), (3, 4)])
    assert verdict_of("torch-compile-ignores-batch", case).verdict == verdicts.AGREE, "compile alone never batches"
    assert verdict_of("torch-compile-vmap:cpu:float32", case).verdict == verdicts.AGREE
    assert len(get_backend("torch-compile-vmap:cpu:float32").run(case)) == 3, "copy 0, then the other two copies"
    finds("torch-vmap-ignores-batch", case, "mul@vmap")


def test_dynamic_gradients_compile_once_per_shape_free_structure():
    misses = COMPILED.misses
    for shape in ((3, 4), (5, 6)):
        assert verdict_of("torch-compile-grad-dynamic:cpu:float32", case_of("tanh", [shape])).verdict == verdicts.AGREE
    assert COMPILED.misses == misses + 1, "the second shape must reuse the first shape's dynamic compile"


def test_jax_grad_finds_a_wrong_vjp_that_the_forward_cannot_show(planted):
    case = case_of("sin", [(3, 4)])
    assert verdict_of("jit-wrong-vjp", case).verdict == verdicts.AGREE
    finds("jax-wrong-vjp", case, "sin@vjp")


def test_torch_module_grad_checks_input_gradients_and_finds_a_wrong_backward(planted):
    case = case_of("sin", [(3, 4)])
    assert verdict_of("module-wrong-backward", case).verdict == verdicts.AGREE
    finds("torch-wrong-backward", case, "sin@vjp")
    # The stock module: forward and gradients agree, and the gradients are really there.
    outputs = get_backend("torch-module-grad").run(case)
    np.testing.assert_allclose(outputs[1], np.cos(case.arrays["x0"]) * cotangent(0, (3, 4)), rtol=1e-6, atol=1e-6)
    assert len(outputs) == 2 and verdict_of("torch-module-grad", case).verdict == verdicts.AGREE


def test_donated_inputs_are_consumed_and_the_answer_stays_right():
    from fuzzer.backends.jax_eager import import_jax

    jax = import_jax()
    case = case_of("tanh", [(3, 4)])
    backend = get_backend("jax-jit-donate")
    donated = {"x0": jax.numpy.asarray(case.arrays["x0"], dtype=jax.numpy.float32)}
    backend._graph_fn(case.graph)(donated, {})
    assert donated["x0"].is_deleted(), "the input buffer was not donated"
    assert verdict_of("jax-jit-donate", case).verdict == verdicts.AGREE


def test_max_autotune_says_it_needs_cuda():
    reason = get_backend("torch-compile-max-autotune").unavailable_reason()
    assert reason and "CUDA only" in reason


@pytest.mark.long
def test_aoti_compiles_a_tiny_model_that_agrees_and_sees_a_fault_only_in_aot_compilation(planted):
    """Two AOTInductor compiles of one linear layer: ~30 s on 2 cores."""
    backend = get_backend("torch-aoti")
    if backend.unavailable_reason():
        pytest.skip(backend.unavailable_reason())
    assert verdict_of("torch-aoti", linear_case()).verdict == verdicts.AGREE
    assert verdict_of("planted-jit-aot", linear_case()).verdict == verdicts.AGREE
    finds("planted-aot", linear_case(), "linear")


CLEAN_SEEDS = {"torch-compile-frozen": 3, "torch-compile-dynamic": 3, "jax-vmap": 3, "jax-grad": 2,
               "jax-jit-donate": 3, "torch-module-grad": 6}


@pytest.mark.parametrize("name", sorted(CLEAN_SEEDS))
def test_clean_random_graphs_agree(name):
    backend = get_backend(name)
    generator = CaseGenerator(all_ops_supported_by([backend]), 5)
    for seed in range(CLEAN_SEEDS[name]):
        case = generator.case(seed)
        result = check_case(case, [backend])
        assert not result.findings, (case.graph.op_names(), result.verdicts)


def test_an_error_ten_times_another_releases_is_an_accuracy_regression():
    """A backend named as torch-eager in another environment whose tanh is off by half of each entry's
    allowance: each alone agrees; together, the sloppy one is an accuracy regression, blamed on
    tanh (not on the exact neg after it) and bucketed with the mismatches of the same op: one
    wrong op is within the tolerance on some inputs and past it on others."""
    import torch

    from fuzzer.oracle import compute_reference
    from fuzzer.oracle.compare import entry_allowance

    case = case_of("tanh", [(4, 5)])
    # Half of each entry's own allowance (oracle/compare.py, "Per entry"), which the output's caps.
    allowed = torch.as_tensor(0.5 * entry_allowance(compute_reference(case, {"float32"}), 0, "float32"), dtype=torch.float32)
    sloppy = get_backend("torch-eager:cpu:float32").derive(
        "torch-eager:cpu:float32@sloppy", {"tanh": lambda xs, ps, attrs: torch.tanh(xs[0]) + allowed})
    register_derived(sloppy)
    case = materialize(Graph(case.graph.inputs, [Node("n0", "tanh", ["x0"], {}), Node("n1", "neg", ["n0"], {})], ["n1"]), 0)
    assert verdict_of(sloppy.name, case).verdict == verdicts.AGREE
    result = check_case(case, [get_backend("torch-eager:cpu:float32"), sloppy])
    assert [v.verdict for v in result.verdicts] == [verdicts.AGREE, verdicts.ACCURACY_REGRESSION]
    assert result.findings[0].verdict == verdicts.ACCURACY_REGRESSION
    assert result.findings[0].signature == f"mismatch | {sloppy.name} | tanh"
    assert verdicts.is_bug(result.verdict)
    # Another kind is no peer: torch-module's error is not torch-eager's release.
    assert check_case(case, [get_backend("torch-module:cpu:float32"), sloppy]).verdict == verdicts.AGREE
