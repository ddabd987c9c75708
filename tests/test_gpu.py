"""GPU backends: clean agreement on CUDA, and TF32-style differences classified as precision policy.

Marked `gpu`: skipped without CUDA. Run on a GPU machine with `pytest -m gpu`.
"""

import subprocess
import sys

import numpy as np
import pytest

from fuzzer import verdicts
from fuzzer.arrays import materialize
from fuzzer.backends import backend_sets, get_backend
from fuzzer.drawing.generate import CaseGenerator
from fuzzer.ir import Graph, Node, TensorSpec
from fuzzer.judging.check import check_case
from fuzzer.ops import get_op

pytestmark = pytest.mark.gpu
GPU_BACKENDS = backend_sets()["gpu"]


def available(names):
    backends = [get_backend(name) for name in names]
    return [b for b in backends if b.unavailable_reason() is None]


def big_matmul_case(k=1024):
    graph = Graph([TensorSpec("x0", (16, k)), TensorSpec("x1", (k, 16))], [Node("n0", "matmul", ["x0", "x1"], {})], ["n0"])
    case = materialize(graph, 0)
    case.arrays["x1"] = case.arrays["x1"] * np.sqrt(k)  # O(1) outputs whatever k
    return case


@pytest.mark.parametrize("name", GPU_BACKENDS)
def test_gpu_backend_is_available(name):
    assert get_backend(name).unavailable_reason() is None


# Real CUDA bugs this guard must not trip on (reports/bugs/torch-cuda-hardsigmoid-float64): the false-
# alarm guard covers every other op. The small regime only: the bfloat16 model's limits with special
# values and extreme magnitudes are recorded in reports/bugs/README.md.
KNOWN_CUDA_BUGS = {"hardsigmoid", "hardswish"}


def test_generated_graphs_agree_or_are_precision_policy_on_gpu():
    from fuzzer.drawing.regimes import BY_NAME
    from fuzzer.ops import registry

    backends = available([n for n in GPU_BACKENDS if "compile" not in n])
    generator = CaseGenerator(sorted(set(registry()) - KNOWN_CUDA_BUGS), regimes=(BY_NAME["small"],))
    seen = {}
    for seed in range(60):
        result = check_case(generator.case(seed), backends)
        for verdict in result.verdicts:
            seen.setdefault(verdict.verdict, []).append((seed, verdict.backend, verdict.detail))
    bugs = {k: v for k, v in seen.items() if verdicts.is_bug(k)}
    assert not bugs, bugs


def test_torch_compile_on_cuda_agrees_on_a_few_graphs():
    (backend,) = available(["torch-compile:cuda:float32"])
    generator = CaseGenerator()
    for seed in range(3):
        assert check_case(generator.case(seed), [backend]).verdict in (verdicts.AGREE, verdicts.PRECISION_POLICY, verdicts.INVALID)


def test_tf32_matmul_is_precision_policy_not_a_bug():
    import torch

    backend = get_backend("torch-eager:cuda:float32")
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True  # what many training scripts switch on
    try:
        result = check_case(big_matmul_case(), [backend])
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    assert result.verdict == verdicts.PRECISION_POLICY, [v.to_dict() for v in result.verdicts]
    assert "TF32" in result.findings[0].detail


def test_jax_default_gpu_precision_is_precision_policy_not_a_bug():
    backend = get_backend("jax-jit:gpu:float32")
    result = check_case(big_matmul_case(), [backend])
    assert result.verdict in (verdicts.PRECISION_POLICY, verdicts.AGREE)
    if result.verdict == verdicts.PRECISION_POLICY:
        assert result.findings[0].max_error > result.findings[0].allowed


def test_cpu_and_gpu_agree_with_the_same_reference():
    backends = available(["torch-eager:cpu:float32", "torch-eager:cuda:float32", "jax-jit:cpu:float32", "jax-jit:gpu:float32"])
    result = check_case(CaseGenerator().case(7), backends)
    assert result.verdict in (verdicts.AGREE, verdicts.PRECISION_POLICY)


def test_cuda_backends_in_another_environment_compute_what_they_compute_in_process(tmp_path, monkeypatch):
    """KIND:cuda@ENV: this interpreter registered as an environment, so results must be identical."""
    import torch

    from fuzzer.running import envs
    from fuzzer.running.execute import OK, run_backend

    monkeypatch.setenv("FUZZ_ENV_HOME", str(tmp_path / "envs"))
    envs.add("here", sys.executable)
    generator = CaseGenerator()
    for kind in ("torch-eager:cuda:float32", "jax-jit:gpu:float32"):
        local, remote = get_backend(kind), get_backend(f"{kind}@here")
        assert remote.unavailable_reason() is None
        for seed in range(10):
            case = generator.case(seed)
            mine, theirs = run_backend(local, case), run_backend(remote, case)
            assert (mine.status, theirs.status) == (OK, OK), theirs.error
            for a, b in zip(mine.outputs, theirs.outputs):
                np.testing.assert_array_equal(a, b)
        assert remote.other_environment()[1]["device"] == torch.cuda.get_device_name(0)


def test_a_real_cuda_sticky_error_is_one_crash_of_the_case_that_caused_it(tmp_path):
    """A device-side assert (an out-of-range embedding row) leaves the worker's CUDA context unusable:
    every later CUDA call there fails, torch-eager:cuda's too. The campaign stores one bucket, the
    tanh that triggers it, from the cases that trigger it in a fresh worker; no later case is blamed."""
    from pathlib import Path

    from fuzzer.corpus import Corpus
    from fuzzer.running.campaign import CampaignOptions, run_campaign

    plugin = Path(__file__).resolve().parent / "plugins" / "cuda_device_assert.py"
    options = CampaignOptions(backends=["torch-eager:cuda:float32", "plugin-cuda-assert-tanh"], plugins=[str(plugin)],
                              ops=["relu", "tanh", "add", "mul"], max_nodes=3, max_cases=8, workers=1, timeout=60,
                              shrink_time=5)
    with Corpus(tmp_path / "corpus.db") as corpus:
        progress = run_campaign(corpus, options)
        buckets = [b["signature"] for b in corpus.buckets()]
        assert len(buckets) == 1 and buckets[0].startswith("crash | plugin-cuda-assert-tanh | tanh | "), buckets
        assert "device-side assert triggered" in buckets[0]
        assert progress.poisoned_restarts == 3 * progress.crashes > 0


def test_the_strict_rerun_of_a_graph_with_an_rnn_uses_torchs_own_rnn_kernels():
    import torch

    backend = available(["torch-eager:cuda:float32"])
    if not backend:
        pytest.skip("no CUDA")
    attrs = {"hidden_size": 8, "num_layers": 1, "bias": True, "batch_first": False, "initial_state": True}
    graph = Graph([TensorSpec("x0", (5, 2, 4))], [Node("n0", "gru", ["x0"], attrs)], ["n0"])
    case = materialize(graph, 3)
    strict = backend[0].strict_variant().run(case)[0]
    with torch.backends.cudnn.flags(enabled=False):
        native = backend[0].run(case)[0]
    assert np.array_equal(strict, native)
    assert torch.backends.cudnn.enabled  # the strict run restored it
    # A cuDNN RNN error past the limit stays a finding; a graph without an RNN has no limit.
    assert backend[0].precision_policy_limit(graph) < float("inf")
    assert backend[0].precision_policy_limit(Graph([TensorSpec("x0", (2, 2))], [Node("n0", "tanh", ["x0"], {})], ["n0"])) == float("inf")


def test_jax_jit_const_on_cpu_runs_on_the_cpu_when_every_input_is_a_constant(tmp_path):
    """GPU campaign case 277: a gru whose only input is closed over (odd seed) takes no argument, and
    jax ran it on the GPU, where TF32 rounds -1.7785486 + 1.8559638 to 0.078: a false mismatch of
    jax-jit-const:cpu. On the CPU it agrees; its reproducer runs there too."""
    from fuzzer.backends.jax_jit_const import constant_inputs
    from fuzzer.reproducers.reproducer import build_script

    attrs = {"batch_first": True, "bias": False, "hidden_size": 1, "initial_state": True, "num_layers": 1}
    graph = Graph([TensorSpec("x0", (9, 2, 9))], [Node("n0", "gru", ["x0"], attrs)], ["n0"])
    case = materialize(graph, 1)
    for name, value in case.arrays.items():
        case.arrays[name] = np.zeros_like(value)
    case.arrays["x0"][4, 1, 4], case.arrays["x0"][4, 1, 7] = -1.7785486, 1.8559638
    case.arrays["n0.weight_ih_l0"][2, 3:8] = 1.0
    backend = get_backend("jax-jit-const:cpu:float32")
    assert constant_inputs(case) == ["x0"]
    result = check_case(case, [backend])
    assert not result.findings, result.verdicts
    (tmp_path / "repro.py").write_text(build_script(case, backend, "placement"))
    ran = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr


def gru_cancelling_case():
    """GPU campaign case 449: gru -> rsqrt -> square. Output 4's candidate state is
    tanh(0.7916 - 0.7307 - 0.0385) = tanh(0.022): with TF32's 10-bit inputs cuDNN's GRU is 3.6% off
    there, 115 allowances past 1 / h."""
    attrs = {"batch_first": False, "bias": True, "hidden_size": 5, "initial_state": True, "num_layers": 1}
    graph = Graph([TensorSpec("x0", (1, 2, 3))], [Node("n0", "gru", ["x0"], attrs), Node("n1", "rsqrt", ["n0"], {}),
                                                  Node("n2", "square", ["n1"], {})], ["n2"])
    case = materialize(graph, 0)
    arrays = {name: np.zeros(np.shape(value)) for name, value in case.arrays.items()}
    arrays["x0"][0, 0] = [1.5678622722625732, -1.9858516454696655, -0.2685451805591583]
    arrays["n0.weight_ih_l0"][4, :2] = [-0.853863537311554, 0.7021497488021851]
    arrays["n0.weight_ih_l0"][9, 1] = 1.0
    arrays["n0.weight_ih_l0"][14] = [0.640857994556427, 0.1328810751438141, -0.18863511085510254]
    arrays["n0.weight_hh_l0"][14, 1] = 0.6296730637550354
    arrays["n0.bias_ih_l0"][[4, 14]] = [1.0, -0.7306899428367615]
    arrays["n0.bias_hh_l0"][4] = -1.0
    arrays["n0.h0"][0, 0, 1] = -1.0
    case.arrays.update(arrays)
    return case


def test_a_cudnn_rnn_error_that_tf32_makes_past_the_limit_is_precision_policy_and_a_kernel_s_own_is_not():
    import torch

    backend = available(["torch-eager:cuda:float32"])
    if not backend:
        pytest.skip("no CUDA")
    eager, case = backend[0], gru_cancelling_case()
    assert eager.same_kernels_strict_variant(case.graph).run(case)  # runs, with cuDNN on and TF32 off
    assert check_case(case, [eager]).verdicts[0].verdict in (verdicts.AGREE, verdicts.PRECISION_POLICY)
    gru = get_op("gru").torch

    def halves_state_on_cudnn(xs, ps, attrs):  # a cuDNN-only bug: half the hidden state read
        if torch.backends.cudnn.enabled:
            ps = {**ps, "h0": ps["h0"] / 2}
        return gru(xs, ps, attrs)

    planted = eager.derive("torch-eager:cuda:float32@cudnn-halves-state", {"gru": halves_state_on_cudnn})
    verdict = check_case(case, [planted]).verdicts[0]
    assert verdict.verdict == verdicts.MISMATCH, verdict


def test_a_cuda_gradient_is_judged_beside_cudas_own_eager_backward():
    """std's gradient at subnormal inputs: CUDA's eager backward gives 0 where the CPU's gives
    +-0.707 (a ratio of two subnormals); both are honest float32, so torch-module-grad on CUDA (whose
    kernels are CUDA's eager ones) agrees, and the CPU twin of the same case still agrees too."""
    graph = Graph([TensorSpec("x", (2, 1, 1, 1))],
                  [Node("n0", "std", ["x"], {"dims": [0], "correction": 1, "keepdim": True})], ["n0"])
    case = materialize(graph, 0)
    case.arrays["x"] = np.array([-8.516646e-39, 0.0]).reshape(2, 1, 1, 1)
    backends = available(["torch-module-grad:cuda:float32", "torch-module-grad:cpu:float32"])
    assert len(backends) == 2
    result = check_case(case, backends)
    assert [v.verdict for v in result.verdicts] == [verdicts.AGREE, verdicts.AGREE], result.verdicts
