"""The minimal reproducer (`fuzz export`'s default) is what an upstream maintainer wants: public
calls with the shapes written out, only the part of the graph the finding is about, no unused
import, and one line at the end: `MISMATCH: ...` and exit 1 while the bug is there, `OK: ...` and
exit 0 once fixed, exit 2 with one sentence where the device is missing.

The bug used is jax.jit's -inf where exp(inf) - inf is nan (XLA on the CPU, jax 0.10), a real
finding of our campaigns (exp > sub > flatten > permute)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from fuzzer.arrays import materialize
from fuzzer.backends import get_backend
from fuzzer.cli import main
from fuzzer.corpus import Corpus, load_case_file
from fuzzer.ir import Case, Graph, Node, TensorSpec
from fuzzer.ops import get_op
from fuzzer.reproducers.minimal_reproducer import build_minimal_script
from fuzzer.reproducers.program_source import argument_names, variable_name

ROOT = Path(__file__).resolve().parents[1]
JAX_JIT = "jax-jit:cpu:float32"
FINDING = {"verdict": "nan-inf", "culprit": "permute@fused"}
# The graph of the stored finding; `extra` adds an output that has nothing to do with it.
NODES = [Node("n4", "exp", ["x2"], {}), Node("n5", "sub", ["n4", "x1"], {}),
         Node("n6", "flatten", ["n5"], {"start_dim": 2, "end_dim": -1}), Node("n7", "permute", ["n6"], {"perm": [-1, 0, 1]})]


def _case(value: float, extra: bool = False) -> Case:
    inputs = [TensorSpec("x1", (1, 1)), TensorSpec("x2", (1, 1, 1, 1))]
    nodes = NODES + [Node("n8", "tanh", ["x1"], {}), Node("n9", "sigmoid", ["n8"], {})] * extra
    case = materialize(Graph(inputs, nodes, ["n7", "n9"] if extra else ["n7"]), seed=0)
    case.arrays["x1"] = np.full((1, 1), value)
    case.arrays["x2"] = np.full((1, 1, 1, 1), value)
    return case


def _run(script: str, folder) -> tuple[int, str, str]:
    (folder / "repro.py").write_text(script)
    ran = subprocess.run([sys.executable, "repro.py"], cwd=folder, capture_output=True, text=True, timeout=300)
    return ran.returncode, ran.stdout, ran.stderr


@pytest.mark.slow
def test_a_jit_bug_exits_1_with_one_mismatch_line_and_0_once_the_values_agree(tmp_path):
    script = build_minimal_script(_case(np.inf), get_backend(JAX_JIT), "nan-inf | jax-jit | permute@fused", FINDING)
    assert len(script.splitlines()) <= 30, script  # 72 before the shapes were written out
    code, _, errors = _run(script, tmp_path)
    assert code == 1 and errors.splitlines() == [
        "MISMATCH: 1 of 1 entries differ, worst at [0, 0, 0]: expected nan, got -inf"], script  # no allowance for a kind
    fixed = build_minimal_script(_case(1.0), get_backend(JAX_JIT), "the same graph where jit agrees", FINDING)
    code, output, errors = _run(fixed, tmp_path)
    assert code == 0 and output.splitlines()[-1].startswith("OK: ") and not errors, output + errors


def test_a_finding_past_an_entrys_own_allowance_exits_1_though_the_outputs_allowance_passes_it(tmp_path):
    """A real bug (reports/bugs/torch-cpu-softmax-outer-dim-accuracy): torch CPU's float32 softmax over a
    non-last dim, ~1,000 ulp off at entries of 6e-5 while the output's allowance (from its largest entry,
    1.8e-4) is 9e-5. The script carries the per-entry allowances, so it fails as the oracle did."""
    case = materialize(Graph([TensorSpec("x0", (16385, 1))], [Node("n0", "softmax", ["x0"], {"dim": 0})], ["n0"]), seed=0)
    case.arrays["x0"] = np.zeros((16385, 1))
    case.arrays["x0"][0, 0] = 1.0
    finding = {"verdict": "mismatch", "culprit": "softmax"}
    script = build_minimal_script(case, get_backend("torch-eager:cpu:float32"), "mismatch | torch-eager | softmax", finding)
    assert "allowed0 = np.full((16385, 1), " in script, script
    code, _, errors = _run(script, tmp_path)
    assert code == 1 and errors.startswith("MISMATCH: ") and "(allowed error 1.54e-08)" in errors, (script, errors)


def test_shapes_a_helper_computes_are_written_out_and_nothing_unused_is_imported():
    script = build_minimal_script(_case(np.inf), get_backend(JAX_JIT), "title", FINDING)
    assert "n6 = n5.reshape((1, 1, 1))" in script and "_infer_flatten" not in script and "def check" not in script
    imports = [line for line in script.splitlines() if line.startswith(("import ", "from "))]
    assert len(imports) == len(set(imports)) and "import math" not in imports and "import torch" not in imports, imports
    torch_script = build_minimal_script(_case(np.inf), get_backend("torch-eager:cpu:float32"), "title", FINDING)
    assert "jax" not in torch_script and "reshape((1, 1, 1))" not in torch_script, torch_script  # torch.flatten is public


@pytest.mark.slow
def test_an_output_the_finding_is_not_about_is_left_out(tmp_path):
    script = build_minimal_script(_case(np.inf, extra=True), get_backend(JAX_JIT), "title", FINDING)
    assert "tanh" not in script and "sigmoid" not in script and len(script.splitlines()) <= 30, script
    code, _, errors = _run(script, tmp_path)
    assert code == 1 and errors.startswith("MISMATCH: 1 of 1 entries differ"), errors


@pytest.mark.slow
def test_a_one_op_bug_reads_like_a_hand_written_report_in_25_lines(tmp_path):
    """jax on the CPU drops a nan from max over 4,096 elements or more, and jax's float64 does
    too, so the script holds the expected values: a jax bug's script never needs torch."""
    x = np.ones(4096, np.float32)
    x[2048] = np.nan
    case = Case(Graph([TensorSpec("x", (4096,))], [Node("n0", "amax", ["x"], {"dims": [0], "keepdim": True})], ["n0"]), {"x": x}, 0)
    script = build_minimal_script(case, get_backend("jax-eager:cpu:float32"), "nan-inf | jax-eager | amax",
                                  {"verdict": "nan-inf", "culprit": "amax"})
    lines = script.splitlines()
    assert len(lines) <= 26, script  # 42 before
    assert [line for line in lines if line.startswith("print(f'jax ")] == [lines[lines.index("print(f'jax {jax.__version__}, "
                                                                                             "jaxlib {jax.lib.__version__}, device "
                                                                                             "{jax.devices()[0].device_kind}')")]]
    assert "x = np.full((4096,), 1.0, np.float32)" in lines and "x[2048] = np.nan" in lines, "the inputs, compactly"
    assert "expected0 = np.full((1,), np.nan, np.float64)" in lines and "torch" not in script, script
    assert "def reference" not in script and "from math" not in script, script
    code, _, errors = _run(script, tmp_path)
    assert code == 1 and errors.splitlines() == ["MISMATCH: 1 of 1 entries differ, worst at [0]: expected nan, got 1.0"], errors


def test_a_torch_float64_bug_is_judged_by_written_values_never_by_jax():
    """torch's own float64 cannot judge a finding of torch's float64: the expected values are written out."""
    script = build_minimal_script(_case(np.inf), get_backend("torch-eager:cpu:float64"), "title", FINDING)
    assert "jax" not in script and "expected0 = " in script, script


def test_a_script_for_a_jax_gpu_exits_2_with_one_sentence_without_one(tmp_path):
    backend = get_backend("jax-eager:gpu:float32")
    if not backend.unavailable_reason():
        pytest.skip("this machine has the device")
    case = materialize(Graph([TensorSpec("x", (2, 3))], [Node("n0", "tanh", ["x"], {})], ["n0"]), 0)
    code, _, errors = _run(build_minimal_script(case, backend, "on a GPU", {"verdict": "mismatch"}), tmp_path)
    assert code == 2 and errors.splitlines() == ["This reproducer needs a GPU, and jax sees none here."], errors


def test_exporting_a_case_without_a_finding_names_the_backends_to_choose_from(tmp_path):
    corpus = Corpus(tmp_path / "cases.db")
    case_id = corpus.import_case(load_case_file(ROOT / "corpus" / "regression" / "dropout-in-eval-clean.json"))
    result = CliRunner().invoke(main, ["export", str(case_id), "--db", str(tmp_path / "cases.db")])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "has no finding; pass --backend with one of the backends it was checked on (torch-eager:cpu:float32, " \
        in result.output, result.output


# Ops whose implementation is more than one call (helpers, branches on attributes, closures, a
# loop over the spatial dims): their minimal script still shows only public calls, the attribute
# values put in and the branches this node does not take left out (fuzzer/reproducers/op_source.py
# `specialize`). Before, each brought 40 to 60 lines of our helper code.
SPECIALIZED = [
    ("conv2d", "jax", {"kernel_size": [1, 3], "out_channels": 4, "stride": [1, 1], "padding": "same", "dilation": [1, 2],
                       "groups": 2, "bias": True}, (2, 4, 3, 5), "lax.conv_general_dilated("),
    ("conv2d", "torch", {"kernel_size": [3, 3], "out_channels": 4, "stride": [2, 1], "padding": [1, 0], "dilation": [1, 1],
                         "groups": 1, "bias": False}, (2, 4, 5, 5), "F.conv2d("),
    ("interpolate", "jax", {"size": None, "scale_factor": [2.0, 0.5], "mode": "bilinear", "align_corners": True},
     (1, 2, 3, 4), "jnp.take("),
    ("amax", "torch", {"dims": [-1, 0], "keepdim": False}, (2, 3, 4), "torch.amax("),
    ("amax", "jax", {"dims": [-1, 0], "keepdim": False}, (2, 3, 4), "jnp.max("),
    ("select", "jax", {"dim": 1, "index": -1}, (2, 3, 4), "x"),
    # A check that the release has the API (raise OpUnsupported) is left out: 100 lines before.
    ("norm", "jax", {"dims": [0, -1], "keepdim": True, "p": 2}, (2, 3, 4), "jnp.linalg.vector_norm(x, ord=2.0, axis=(0, -1)"),
    ("rms_norm", "torch", {"normalized_shape": [4], "eps": 1e-05, "affine": False}, (2, 3, 4), "F.rms_norm("),
    ("mish", "jax", {}, (2, 3, 4), "jax.nn.mish("),
]


@pytest.mark.slow
@pytest.mark.parametrize("op, family, attrs, shape, call", SPECIALIZED, ids=[f"{op}-{family}" for op, family, *_ in SPECIALIZED])
def test_a_one_op_script_of_an_op_with_helpers_is_public_calls_only_and_runs(op, family, attrs, shape, call, tmp_path):
    case = materialize(Graph([TensorSpec("x", shape)], [Node("n0", op, ["x"], attrs)], ["n0"]), seed=0)
    backend = get_backend("torch-eager:cpu:float32" if family == "torch" else JAX_JIT)
    script = build_minimal_script(case, backend, "title", {"verdict": "mismatch", "culprit": op})
    graph = script[script.index("def graph"):script.index("\n\n\n", script.index("def graph"))]
    assert call in graph and "def " not in script.replace("def graph(", ""), script
    assert len(script.splitlines()) <= 32, script  # 60 to 90 lines before
    code, output, errors = _run(script, tmp_path)
    assert code == 0 and output.splitlines()[-1].startswith("OK: ") and not errors, output + errors


def _exported(file_name: str, tmp_path) -> tuple[str, str]:
    """(the minimal script `fuzz export` writes for the finding of a corpus/regression file, the file's `expect`)."""
    data = load_case_file(ROOT / "corpus" / "regression" / file_name)
    corpus = Corpus(tmp_path / "cases.db")
    stored = corpus.get_case(corpus.import_case(data))
    (finding,) = stored.findings
    return build_minimal_script(stored.case, get_backend(finding["backend"]), stored.signature, finding), data["expect"]


def _defs(script: str) -> list[str]:
    return re.findall(r"^\s*def (\w+)\(", script, re.M)


@pytest.mark.slow
def test_a_jax_norm_finding_is_its_public_call_in_under_30_lines(tmp_path):
    """jax on the CPU drops the nans from a 4,096-element max norm. Its implementation checks that
    this jax has vector_norm (and takes several axes): the script leaves the check out, where it
    brought the whole implementation and its helpers (103 lines). Its one input is `x`, not the
    shrunk case's `x2_n4`."""
    script, expect = _exported("jax-cpu-max-nan-4096.json", tmp_path)
    assert len(script.splitlines()) <= 30 and _defs(script) == ["graph"], script
    assert "return [jnp.linalg.vector_norm(x, ord=float('inf'), axis=(0,), keepdims=False).reshape((1,))]" in script, script
    code, _, errors = _run(script, tmp_path)
    assert expect == "disagree" and code == 1 and errors.startswith("MISMATCH: 1 of 1 entries differ"), errors


LAYOUT_CASES = sorted(path.name for path in (ROOT / "corpus" / "regression").glob("*.json")
                      if any(f["backend"].startswith("torch-layout:") for f in load_case_file(path).get("findings", [])))


@pytest.mark.slow
@pytest.mark.parametrize("file_name", LAYOUT_CASES)
def test_a_torch_layout_finding_writes_each_layout_as_one_torch_expression_and_runs_standalone(file_name, tmp_path):
    """torch-layout re-stores inputs and weights in another memory layout, decided from each one's
    shape when the script is written; the script holds no helper (75 to 89 lines when it carried
    fuzzer/drawing/layouts.py's)."""
    script, expect = _exported(file_name, tmp_path)
    assert _defs(script) == ["graph"] and "relayout" not in script and len(script.splitlines()) <= 30, script
    assert re.search(r"^args\[0\] = args\[0\]\..+  # (channels_last|transposed|strided) layout, as the campaign ran it$", script, re.M), script
    code, output, errors = _run(script, tmp_path)
    assert code == (1 if expect == "disagree" else 0), output + errors
    assert errors.startswith("MISMATCH: ") if code else output.splitlines()[-1].startswith("OK: "), output + errors


def _strides_the_backend_runs(backend, case: Case) -> dict[str, tuple[int, ...]]:
    """The strides of each argument of the case's one node as `backend` hands it to the op."""
    (node,) = case.graph.nodes
    implementation, seen = get_op(node.op).impl("torch"), {}

    def recording(xs, ps, attrs):
        names = [*node.inputs, *(f"{node.name}.{name}" for name in ps)]
        seen.update(zip(names, (tensor.stride() for tensor in [*xs, *ps.values()])))
        return implementation(xs, ps, attrs)

    backend.derive("recording-strides", {node.op: recording}).run(case)
    return seen


def _tensors_the_script_runs(backend, case: Case) -> dict:
    """The tensors `backend`'s reproducer program calls `graph` on, by argument name."""
    _, program = backend.reproducer_program(case)
    run = program[program.index("\n\n\n", program.index("def graph(")):]  # the lines after `def graph`
    called = []
    scope = {"torch": torch, "graph": lambda *tensors: called.extend(tensors) or called,
             **{variable_name(name): case.arrays[name] for name in argument_names(case)}}
    exec(run, scope)  # noqa: S102 - our own lines
    return dict(zip(argument_names(case), called))


CONV = {"out_channels": 4, "kernel_size": [3, 3], "stride": [1, 1], "padding": [1, 1], "dilation": [1, 1], "groups": 1, "bias": True}
# (backend, op, attributes, input shape, its stored layout, the layouts the backend gives the input and each weight)
STRIDES = [
    ("torch-layout", "relu", {}, (2, 3, 4, 5), "contiguous", ["channels_last"]),
    ("torch-layout", "relu", {}, (2, 1, 3, 4), "contiguous", ["transposed"]),
    ("torch-layout", "relu", {}, (3, 1, 4), "expanded", ["transposed"]),  # torch-layout ignores the stored layout
    ("torch-layout", "relu", {}, (5,), "contiguous", ["strided"]),
    ("torch-layout", "relu", {}, (1, 1), "contiguous", ["contiguous"]),
    ("torch-layout", "linear", {"out_features": 4, "bias": True}, (6,), "contiguous", ["strided", "transposed", "contiguous"]),
    ("torch-layout", "conv2d", CONV, (1, 2, 3, 3), "contiguous", ["channels_last", "channels_last", "contiguous"]),
    ("torch-eager", "relu", {}, (2, 3, 4), "transposed", ["transposed"]),
    ("torch-eager", "relu", {}, (6,), "strided", ["strided"]),
    ("torch-eager", "relu", {}, (2, 3, 2, 2), "channels_last", ["channels_last"]),
    ("torch-eager", "relu", {}, (3, 2), "expanded", ["expanded"]),
    ("torch-eager", "conv2d", CONV, (1, 2, 3, 3), "channels_last", ["channels_last", "contiguous", "contiguous"]),
]


@pytest.mark.parametrize("kind, op, attrs, shape, stored, layouts", STRIDES,
                         ids=[f"{kind}-{op}-{shape}-{stored}" for kind, op, _, shape, stored, _ in STRIDES])
def test_the_script_re_stores_each_argument_with_the_strides_the_backend_runs(kind, op, attrs, shape, stored, layouts):
    """Each argument's layout is decided when the script is written (torch-layout's rule, or the
    layout stored with a graph input) and written as one torch expression: it gives the strides
    fuzzer/drawing/layouts.py gives the tensor the backend runs, and the same values."""
    case = materialize(Graph([TensorSpec("x", shape, stored)], [Node("n0", op, ["x"], attrs)], ["n0"]), seed=0)
    backend = get_backend(f"{kind}:cpu:float32")
    tensors = _tensors_the_script_runs(backend, case)
    _, program = backend.reproducer_program(case)
    written = re.findall(r"# (\w+) layout, as the campaign ran it", program)
    assert written == [layout for layout in layouts if layout != "contiguous"], program
    assert {name: tensor.stride() for name, tensor in tensors.items()} == _strides_the_backend_runs(backend, case)
    assert [tensor.is_contiguous() for tensor in tensors.values()] == [layout == "contiguous" for layout in layouts]
    for name, tensor in tensors.items():
        assert np.array_equal(tensor.numpy(), case.arrays[name].astype(np.float32)), name


def test_a_seeded_draw_scaled_after_it_is_written_as_python_that_gives_its_values():
    """`(rng.standard_normal(shape) * 0.001).astype(...)`: without the parentheses the .astype took 0.001 alone (an
    AttributeError in a campaign's exported script)."""
    from fuzzer.reproducers.program_source import _seeded

    values = (np.random.default_rng(7).standard_normal((3, 2)) * 1e-3).astype(np.float32).astype(np.float64)
    text = _seeded(values, "float32", [7]).split("  #")[0]
    assert np.array_equal(eval(text, {"np": np}).astype(np.float64), values)  # noqa: S307 - the line the script holds
