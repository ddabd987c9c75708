"""An exported reproducer runs the transformation under test, not a stand-in for it.

Each planted fault below is a framework bug that only one backend kind reaches: it is put into
torch or jax by a `sitecustomize.py` in a fresh interpreter (as a real bug would sit in the
installed release). The kind's script must exit 1 with the fault and 0 without it, and the
eager script must exit 0 with it (the fault is not in the ops). A stub `fuzzer` package on the
path makes any import of ours fail: the scripts need only numpy and the framework.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from fuzzer.backends import get_backend
from fuzzer.ir import Case, Graph, Node, TensorSpec
from fuzzer.reproducers.minimal_reproducer import build_minimal_script
from fuzzer.reproducers.reproducer import build_script

# linear -> tanh: a weight for the module kinds to carry, an op for eager and compiled kinds.
CASE = Case(
    graph=Graph(inputs=[TensorSpec("x", (3, 4))],
                nodes=[Node("n0", "linear", ["x"], {"out_features": 5, "bias": True}), Node("n1", "tanh", ["n0"], {})],
                outputs=["n1"]),
    arrays={"x": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4),
            "n0.weight": np.linspace(-0.5, 0.5, 20, dtype=np.float32).reshape(5, 4),
            "n0.bias": np.linspace(0.1, 0.5, 5, dtype=np.float32)},
    seed=0,
)

# kind -> the body of a sitecustomize that plants a bug only that kind reaches.
FAULTS = {
    "torch-compile": """
        import torch, torch._inductor.config as config
        def swap_tanh(graph):  # an inductor pass that lowers tanh wrongly
            for node in graph.nodes:
                if node.target is torch.ops.aten.tanh.default:
                    node.target = torch.ops.aten.sigmoid.default
        config.post_grad_custom_post_pass = swap_tanh
    """,
    "torch-layout": """
        import torch.nn.functional as F
        linear = F.linear
        F.linear = lambda x, *args: linear(x, *args) + (0 if x.is_contiguous() else 0.5)  # wrong on strided input
    """,
    "torch-saveload": """
        import torch
        load = torch.load
        def lossy_load(*args, **kwargs):  # drops the bias on the way back
            state = load(*args, **kwargs)
            return {k: v * 0 if k.endswith("bias") else v for k, v in state.items()}
        torch.load = lossy_load
    """,
    "torch-jit-trace": """
        import torch
        trace = torch.jit.trace
        torch.jit.trace = lambda module, args, **kw: (lambda *xs: [o + 1 for o in trace(module, args, **kw)(*xs)])
    """,
    "torch-export": """
        import torch
        load = torch.export.load
        class Shifted:
            def __init__(self, program): self.program = program
            def module(self): return lambda *xs: [o + 1 for o in self.program.module()(*xs)]
        torch.export.load = lambda *args, **kwargs: Shifted(load(*args, **kwargs))
    """,
    "jax-jit": """
        import jax
        jit = jax.jit
        jax.jit = lambda fn, **kw: jit(lambda *xs: [o * 1.01 for o in fn(*xs)], **kw)
    """,
    "jax-eager": """
        import jax, jax.numpy as jnp
        tanh = jnp.tanh
        def eager_only(x):  # wrong when dispatched op by op, right under tracing
            return tanh(x) if isinstance(x, jax.core.Tracer) else tanh(x) + 0.5
        jnp.tanh = eager_only
    """,
    "torch-eager": """
        import torch
        tanh = torch.tanh
        def eager_only(x):  # wrong when called op by op, right while dynamo traces it
            return tanh(x) if torch.compiler.is_compiling() else tanh(x) + 0.5
        torch.tanh = eager_only
    """,
    "torch-module": """
        import torch
        tanh = torch.tanh
        def inference_only(x):  # wrong only under torch.inference_mode, where the module kind runs
            return tanh(x) + 0.5 if torch.is_inference_mode_enabled() else tanh(x)
        torch.tanh = inference_only
    """,
    # The configured kinds: each fault lives where only that configuration goes.
    "torch-compile-frozen": """
        import torch, torch._inductor.config as config
        def scale_constants(graph):  # a freezing bug: folded weights come out scaled
            for node in list(graph.nodes):
                if node.op == "get_attr":  # only a frozen graph holds its weights as constants
                    with graph.inserting_after(node):
                        scaled = graph.call_function(torch.ops.aten.mul.Tensor, (node, 1.5))
                    node.replace_all_uses_with(scaled, delete_user_cb=lambda user: user is not scaled)
        config.post_grad_custom_post_pass = scale_constants
        config.cpp.weight_prepack = False  # keep the weight an aten operand the pass can see
    """,
    "torch-compile-dynamic": """
        import torch, torch._inductor.config as config
        def scale_if_symbolic(graph):  # wrong only where a size is symbolic
            values = [node.meta.get("val") for node in graph.nodes if node.op == "placeholder"]
            if any(isinstance(v, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in v.shape) for v in values):
                output = next(node for node in graph.nodes if node.op == "output")
                with graph.inserting_before(output):
                    scaled = graph.call_function(torch.ops.aten.mul.Tensor, (output.args[0][0], 1.5))
                output.args = ((scaled, *output.args[0][1:]),)
        config.post_grad_custom_post_pass = scale_if_symbolic
    """,
    "torch-aoti": """
        import torch._inductor
        load = torch._inductor.aoti_load_package
        torch._inductor.aoti_load_package = lambda *a, **kw: (lambda *xs: [o + 1 for o in load(*a, **kw)(*xs)])
    """,
    "torch-module-grad": """
        import torch
        grad = torch.autograd.grad
        torch.autograd.grad = lambda *a, **kw: tuple(None if g is None else g * 1.01 for g in grad(*a, **kw))
    """,
    "jax-jit-donate": """
        import jax
        jit = jax.jit
        def donating_jit(fn, **kw):  # wrong only when buffers are donated
            return jit(lambda *xs: [o * 1.01 for o in fn(*xs)], **kw) if kw.get("donate_argnums") else jit(fn, **kw)
        jax.jit = donating_jit
    """,
    "jax-vmap": """
        import jax
        vmap = jax.vmap
        # a batching rule that is right for the first batch entry only
        jax.vmap = lambda fn, **kw: (lambda *xs: [o.at[1:].multiply(1.01) for o in vmap(fn, **kw)(*xs)])
    """,
    "jax-grad": """
        import jax
        vjp = jax.vjp
        def wrong_vjp(fn, *primals):  # a backward pass 1% off
            outputs, pullback = vjp(fn, *primals)
            return outputs, lambda cotangents: jax.tree_util.tree_map(lambda g: g * 1.01, pullback(cotangents))
        jax.vjp = wrong_vjp
    """,
}
# The kind a fault must not reach, where that kind's script is what a careless writer would print.
UNREACHED = {"torch-compile": "torch-eager", "jax-jit": "jax-eager", "jax-eager": "jax-jit",
             "torch-eager": "torch-compile", "torch-module": "torch-eager",
             "torch-compile-frozen": "torch-compile", "torch-compile-dynamic": "torch-compile",
             "torch-module-grad": "torch-module", "jax-jit-donate": "jax-jit", "jax-vmap": "jax-jit",
             "jax-grad": "jax-jit"}


def _run(script: str, folder, fault: str | None) -> subprocess.CompletedProcess:
    (folder / "fuzzer").mkdir(exist_ok=True)
    (folder / "fuzzer" / "__init__.py").write_text("raise ImportError('a reproducer must not import the fuzzer')\n")
    (folder / "sitecustomize.py").write_text(textwrap.dedent(fault or ""))
    (folder / "repro.py").write_text(script)
    env = {**os.environ, "PYTHONPATH": str(folder)}
    return subprocess.run([sys.executable, "-s", "repro.py"], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=300)


# `long` (CI's 15 minutes keep torch-layout, torch-saveload and jax-jit; inductor's scripts stay in CI through
# test_compile_grad's and test_strict_contracts' findings): the configured compiles (inductor or a C++ compiler three
# times, a minute or more each) and the kinds added with them.
LONG = {"torch-compile", "jax-eager", "torch-compile-frozen", "torch-compile-dynamic", "torch-aoti", "torch-eager", "torch-module", "torch-module-grad",
        "torch-export", "torch-jit-trace", "jax-jit-donate", "jax-vmap", "jax-grad"}


@pytest.mark.slow
@pytest.mark.parametrize("kind", [pytest.param(kind, marks=[pytest.mark.long] * (kind in LONG)) for kind in sorted(FAULTS)])
def test_the_script_exhibits_a_fault_only_its_kind_reaches(kind, tmp_path):
    script = build_script(CASE, get_backend(f"{kind}:cpu:float32"), f"planted {kind} fault")
    with_fault = _run(script, tmp_path, FAULTS[kind])
    assert with_fault.returncode == 1, with_fault.stdout + with_fault.stderr
    assert "max abs error" in with_fault.stdout and "Python " in with_fault.stdout  # the error and the environment
    without = _run(script, tmp_path, None)
    assert without.returncode == 0, without.stdout + without.stderr
    if kind in UNREACHED:
        other = build_script(CASE, get_backend(f"{UNREACHED[kind]}:cpu:float32"), "eager")
        unaffected = _run(other, tmp_path, FAULTS[kind])
        assert unaffected.returncode == 0, f"the fault reaches {UNREACHED[kind]} too:\n{unaffected.stdout}{unaffected.stderr}"


def test_a_crash_reproducer_re_raises_the_error_and_a_hang_one_has_a_timer(tmp_path):
    script = build_script(CASE, get_backend("torch-eager:cpu:float32"), "crash", verdict="crash")
    crash = "import torch\ndef tanh(x): raise RuntimeError('planted crash')\ntorch.tanh = tanh\n"
    ran = _run(script, tmp_path, crash)
    assert ran.returncode == 1 and "RuntimeError: planted crash" in ran.stderr, ran.stderr
    assert ran.stdout.startswith("torch ")  # the environment comes first
    assert _run(script, tmp_path, None).returncode == 0  # fixed: exit 0
    hang = build_script(CASE, get_backend("torch-eager:cpu:float32"), "hang", verdict="hang")
    assert "faulthandler.dump_traceback_later(" in hang and _run(hang, tmp_path, None).returncode == 0


def test_scripts_hold_no_path_of_this_machine(tmp_path):
    for kind in ("torch-eager", "torch-compile", "torch-saveload", "torch-layout", "jax-jit", "jax-eager"):
        script = build_script(CASE, get_backend(f"{kind}:cpu:float32"), "paths")
        for path in {os.getcwd(), sys.prefix, os.path.expanduser("~"), str(tmp_path)} - {"/"}:
            assert path not in script, f"{kind}'s script holds {path}"


# On a GPU machine: the scripts of the CUDA kinds run there, on the GPU, and a compiled kind's still
# shows an inductor fault (the Triton path, not the C++ one tested above).
GPU_KINDS = {"torch-eager:cuda:float32": None, "jax-jit:gpu:float32": None,
             "torch-compile:cuda:float32": "torch-compile", "torch-compile-max-autotune:cuda:float32": None}


@pytest.mark.gpu
@pytest.mark.parametrize("name", [pytest.param(name, marks=[pytest.mark.long] * ("autotune" in name)) for name in sorted(GPU_KINDS)])
def test_a_gpu_kind_s_script_runs_on_the_gpu(name, tmp_path):
    backend = get_backend(name)
    if backend.unavailable_reason():
        pytest.skip(backend.unavailable_reason())
    script = build_script(CASE, backend, f"on the GPU: {name}")
    clean = _run(script, tmp_path, None)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "GPU None" not in clean.stdout and "device cpu" not in clean.stdout, clean.stdout  # it ran on the GPU
    if GPU_KINDS[name]:
        faulty = _run(script, tmp_path, FAULTS[GPU_KINDS[name]])
        assert faulty.returncode == 1, faulty.stdout + faulty.stderr


def test_every_registered_kind_writes_a_script_or_says_in_one_sentence_why_not():
    """Over the whole backend table (a new kind is in it by being written): each writes a full and a
    minimal script that Python compiles and that name it, or refuses with one sentence (numpy-ref: the
    reference is what the others are judged against; torch-bnfold: our own fold has no standalone form)."""
    from fuzzer.backends import table
    from fuzzer.errors import UserError

    written, refused = [], []
    built_in = [kind for kind in table().kinds() if table().classes[kind].__module__.startswith("fuzzer.backends.")]
    for kind in built_in:  # plugins an earlier test loaded are in the table too
        backend = get_backend(kind)
        if backend.unavailable_reason():
            continue
        try:
            script = build_script(CASE, backend, f"every kind: {kind}")
        except UserError as exc:
            assert "\n" not in str(exc) and str(exc).endswith("."), (kind, str(exc))
            refused.append(kind)
            continue
        compile(script, f"{kind}.py", "exec")
        assert f"Backend under test: {backend.name}" in script
        minimal = build_minimal_script(CASE, backend, f"every kind: {kind}", {"verdict": "mismatch"})
        compile(minimal, f"{kind}-minimal.py", "exec")
        assert f"{backend.dtype} on {backend.device.upper()} ({backend.description})" in minimal and "MISMATCH: " in minimal
        written.append(kind)
    assert refused == ["numpy-ref", "torch-bnfold"] and len(written) >= 14, (written, refused)  # 16 without a GPU or onnxruntime


def test_a_plugin_pass_brings_the_library_objects_it_uses_or_its_whole_file(tmp_path):
    """A custom inductor pass reading inductor's `V` is written with `from ... import V`; one whose
    global is an object of the plugin's own (not importable) brings the plugin file whole, and a
    comment says why the script needs the fuzzer (the file imports it)."""
    from fuzzer.plugins import load_plugin

    load_plugin(str(Path(__file__).parent / "plugins" / "compile_pass_faults.py"))
    script = build_script(CASE, get_backend("planted-aot:cpu:float32"), "a pass using V")
    compile(script, "planted-aot.py", "exec")
    assert "from torch._inductor.virtualized import V" in script and "def scale_in_aot(graph):" in script

    plugin = tmp_path / "own_object_pass.py"
    plugin.write_text(textwrap.dedent("""
        from fuzzer.backends.torch_compile import TorchCompile

        class Thresholds:
            low = 0.5

        THRESHOLDS = Thresholds()

        def pass_using_its_own_object(graph):
            return THRESHOLDS.low

        class OwnObjectPass(TorchCompile):
            kind = "own-object-pass"
            compile_options = {"post_grad_custom_post_pass": pass_using_its_own_object}

        def register(api):
            api.add_backend(OwnObjectPass)
    """))
    load_plugin(str(plugin))
    script = build_script(CASE, get_backend("own-object-pass:cpu:float32"), "a pass using its own object")
    compile(script, "own-object-pass.py", "exec")
    assert ("# own_object_pass.py, whole: its pass_using_its_own_object cannot stand alone ('THRESHOLDS' (a Thresholds) "
            "is not a module") in script and "THRESHOLDS = Thresholds()" in script
    assert "# Needs the fuzzer: the code of own_object_pass.py comes along whole" in script
