"""A compiled backend within tolerance but far less accurate than eager of its own framework, device,
dtype and release on the same case is an `accuracy-regression` against that eager backend (issue 32,
part 6); honest compilers are not.
"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fuzzer import verdicts
from fuzzer.backends import get_backend
from fuzzer.ir import Case, Graph, Node, TensorSpec
from fuzzer.judging.check import check_case, eager_peer

PLUGIN = Path(__file__).resolve().parent / "plugins" / "jit_sloppy_sum.py"
FUZZ = str(Path(sys.executable).with_name("fuzz"))


def sloppy_jit():
    """The plugin's backend, built here rather than registered (a registration would outlive the test)."""
    spec = importlib.util.spec_from_file_location("jit_sloppy_sum", PLUGIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return get_backend("jax-jit:cpu:float32").derive("plugin-jit-sloppy-sum", {"sum": module.sum_sloppy_when_traced})


def sum_case():
    graph = Graph([TensorSpec("x0", (4, 16))], [Node("n0", "sum", ["x0"], {"dims": [1], "keepdim": False})], ["n0"])
    return Case(graph, {"x0": np.random.default_rng(7).uniform(-2.0, 2.0, (4, 16))}, seed=7)


def verdicts_by_backend(result):
    return {verdict.backend: verdict.verdict for verdict in result.verdicts}


def test_each_compiler_is_compared_with_eager_of_its_framework_device_dtype_and_release():
    assert eager_peer(get_backend("torch-compile:cpu:float64")) == "torch-eager:cpu:float64"
    assert eager_peer(get_backend("jax-jit:cpu:float32")) == "jax-eager:cpu:float32"
    assert eager_peer(sloppy_jit()) == "jax-eager:cpu:float32"  # a plugin derived from jax-jit compiles too
    assert eager_peer(get_backend("torch-eager:cpu:float32")) is None
    assert eager_peer(get_backend("torch-layout:cpu:float32")) is None


def test_a_compiled_sum_far_less_accurate_than_eager_is_an_accuracy_regression():
    case = sum_case()
    result = check_case(case, [get_backend("jax-eager:cpu:float32"), sloppy_jit()])
    assert verdicts_by_backend(result)["plugin-jit-sloppy-sum"] == verdicts.ACCURACY_REGRESSION
    [finding] = result.findings
    assert finding.signature == "mismatch | plugin-jit-sloppy-sum | sum"
    assert "jax-eager:cpu:float32" in finding.detail
    assert 0.1 <= finding.max_error / finding.allowed < 1.0  # within the tolerance: no mismatch
    # The honest compiler on the same case: no finding.
    honest = check_case(case, [get_backend("jax-eager:cpu:float32"), get_backend("jax-jit:cpu:float32")])
    assert honest.findings == [] and honest.verdict == verdicts.AGREE


@pytest.mark.long  # 34 s of CI; CI keeps the judging test of the same sloppy sum above
def test_a_campaign_finds_the_sloppy_compiled_sum_and_no_regression_without_it(tmp_path):
    def campaign(db, backends, *plugin):
        run = subprocess.run([FUZZ, "run", "--db", str(db), *plugin, "--backends", backends, "--ops", "sum,add,relu",
                              "--regimes", "small", "--max-cases", "12", "--workers", "1", "--shrink-time", "0", "--seed", "5"],
                             capture_output=True, text=True, timeout=600)
        listed = subprocess.run([FUZZ, "list", "--db", str(db), "--json"], capture_output=True, text=True, timeout=120)
        return run, [bucket["signature"] for bucket in json.loads(listed.stdout)]

    run, buckets = campaign(tmp_path / "plugin.db", "jax-eager:cpu:float32,plugin-jit-sloppy-sum", "--plugin", str(PLUGIN))
    assert run.returncode == 1 and buckets == ["mismatch | plugin-jit-sloppy-sum | sum"], run.stdout + run.stderr
    run, buckets = campaign(tmp_path / "honest.db", "jax-eager:cpu:float32,jax-jit:cpu:float32")
    assert run.returncode == 0 and buckets == [], run.stdout + run.stderr


def test_an_error_below_the_smallest_normal_is_a_flush_never_an_accuracy_regression():
    # torch-compile:cuda:float32, H200 campaign (seed 353): inductor's tanh flushes subnormals, so
    # tanhshrink of 9.84e-39 is 9.84e-39 there and 0 in eager: within the allowance of 3.53e-38, and
    # below float32's smallest normal: a flush, not a regression to report.
    from fuzzer.judging.check import _accuracy_regressions
    from fuzzer.records import BackendVerdict

    backends = [get_backend("torch-eager:cpu:float32"), get_backend("torch-compile:cpu:float32")]
    eager = BackendVerdict("torch-eager:cpu:float32", verdicts.AGREE, 0.0, 3.53e-38)
    flushed = BackendVerdict("torch-compile:cpu:float32", verdicts.AGREE, 9.84e-39, 3.53e-38)
    assert [v.verdict for v in _accuracy_regressions(backends, [eager, flushed])[0]] == [verdicts.AGREE] * 2
    # The same shares at normal magnitudes: ten times eager's share of the allowance is a regression.
    eager = BackendVerdict("torch-eager:cpu:float32", verdicts.AGREE, 0.0, 3.53e-8)
    sloppy = BackendVerdict("torch-compile:cpu:float32", verdicts.AGREE, 9.84e-9, 3.53e-8)
    assert _accuracy_regressions(backends, [eager, sloppy])[0][1].verdict == verdicts.ACCURACY_REGRESSION
