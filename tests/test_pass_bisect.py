"""`fuzz localize`: the HLO pass whose disabling makes an XLA finding agree, torch's CompilerBisector's
first bad stage of a torch.compile finding, and the lowest ORT graph optimization level that shows an
ONNX Runtime finding (fuzzer/triaging/pass_bisect.py).

The halving and the reading of a real XLA pass dump run in CI; the whole localization of a stored
real bug (XLA:CPU's algebraic simplifier aborting on a transposed convolution, whose known
workaround is disabling `algsimp`) spawns a worker per trial and is `long`."""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fuzzer.arrays import materialize
from fuzzer.cli import main
from fuzzer.corpus import Corpus
from fuzzer.errors import UserError
from fuzzer.ir import Graph, Node, TensorSpec
from fuzzer.plugins import load_plugin
from fuzzer.triaging.pass_bisect import PassVerdict, _halve, disabled_flag, localizable_backend, localize, localize_inductor, ran_passes

ROOT = Path(__file__).resolve().parent.parent
CONV_ABORT = ROOT / "reports" / "bugs" / "xla-cpu-conv-lhs-dilation-abort" / "case.json"
ORT_PLANTED = str(ROOT / "tests" / "plugins" / "ort_planted_fault.py")
needs_onnxruntime = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ("onnxruntime", "onnx", "onnxscript")),
    reason="onnxruntime, onnx or onnxscript is not installed; `pip install 'opdiff-fuzz[onnx]'` adds them")


def test_halving_keeps_the_half_whose_disabling_helps_and_stops_where_no_half_does():
    passes = ["a", "b", "algsimp", "c", "d", "e", "f"]
    asked = []

    def agrees_without(subset):
        asked.append(list(subset))
        return "algsimp" in subset

    assert _halve(passes, agrees_without) == ["algsimp"]
    assert len(asked) <= 2 * 3, "a halving, not one trial per pass"
    assert _halve(passes, lambda subset: {"b", "e"} <= set(subset)) == passes, "two culprits in different halves: no single pass"
    assert disabled_flag(["algsimp", "dce"]) == "--xla_disable_hlo_passes=algsimp,dce"


def test_the_passes_are_read_from_a_real_xla_dump(tmp_path):
    env = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={tmp_path} --xla_dump_hlo_pass_re=.*", "JAX_PLATFORMS": "cpu"}
    subprocess.run([sys.executable, "-c", "import jax, jax.numpy as jnp; jax.jit(lambda x: (x * 2 + 1).sum())(jnp.ones(8))"],
                   env=env, check=True, capture_output=True, timeout=120)
    passes = ran_passes(tmp_path)
    assert "algsimp" in passes and "pipeline-start" not in passes
    assert len(passes) == len(set(passes))


def test_only_compiler_findings_are_localized():
    assert localizable_backend([{"backend": "torch-eager:cpu:float32"}, {"backend": "jax-jit:cpu:float32"}]) == "jax-jit:cpu:float32"
    assert localizable_backend([{"backend": "torch-compile-grad:cpu:float32"}]) == "torch-compile-grad:cpu:float32"
    both = [{"backend": "torch-compile:cpu:float32"}, {"backend": "jax-jit:cpu:float32"}]
    assert localizable_backend(both, bucket_backend="jax-jit:cpu:float32") == "jax-jit:cpu:float32", "the bucket named"
    assert localizable_backend([{"backend": "torch-eager:cpu:float32"}, {"backend": "ort:cpu:float32"}]) == "ort:cpu:float32"
    with pytest.raises(UserError, match="covers the torch.compile .inductor., XLA and ONNX Runtime kinds; .* torch-eager"):
        localizable_backend([{"backend": "torch-eager:cpu:float32"}, {"backend": "jax-eager:cpu:float32"}])


@needs_onnxruntime
@pytest.mark.slow
def test_an_ort_finding_is_charged_to_the_lowest_optimization_level_that_shows_it():
    """log(softmax(x, dim=0)): the planted fusion drops the axis. Planted as an extended optimization it
    appears at ORT_ENABLE_EXTENDED; planted before the session, it is there with every optimization off."""
    graph = Graph([TensorSpec("x", (3, 4))], [Node("n0", "softmax", ["x"], {"dim": 0}), Node("n1", "log", ["n0"], {})], ["n1"])
    case = materialize(graph, 0)
    load_plugin(ORT_PLANTED)  # the plugin's kinds are on ORT's path here too, as `fuzz localize --plugin` loads them
    extended = localize(case, "ort-planted-extended-fault:cpu:float32", [ORT_PLANTED], 120.0)
    assert (extended.compiler, extended.passes, extended.trials) == ("ort", ["ORT_ENABLE_EXTENDED"], 3), extended
    assert extended.summary.startswith("Appears at ORT_ENABLE_EXTENDED: an extended graph optimization"), extended.summary
    everywhere = localize(case, "ort-planted-fault:cpu:float32", [ORT_PLANTED], 120.0)
    assert (everywhere.passes, everywhere.trials) == (["ORT_DISABLE_ALL"], 1), everywhere
    assert "not an optimizer pass" in everywhere.summary


@pytest.mark.long
def test_localize_names_algsimp_for_the_stored_conv_abort(tmp_path):
    db = str(tmp_path / "fuzz.db")
    runner = CliRunner()
    imported = runner.invoke(main, ["import", "--db", db, str(CONV_ABORT)])
    assert imported.exit_code == 0, imported.output
    result = runner.invoke(main, ["localize", "B1", "--db", db, "--json"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output)
    assert answer["passes"] == ["algsimp"] and answer["backend"] == "jax-grad:cpu:float32"
    shown = runner.invoke(main, ["show", "B1", "--db", db])
    assert "Pass: Disabling the HLO pass 'algsimp' alone makes it agree" in shown.output, shown.output


def var_of_one(value: float):
    graph = Graph([TensorSpec("x", (1,))], [Node("n0", "var", ["x"], {"dim": 0, "correction": 0, "keepdim": False})], ["n0"])
    case = materialize(graph, 0)
    case.arrays["x"] = np.array([value])
    return case


@pytest.mark.long  # CI's 15 minutes: a full bisection of a clean case
def test_an_inductor_case_that_agrees_has_nothing_to_localize():
    """The child process's whole protocol (case folder, CompilerBisector's import, the answer file) on one compile."""
    result = localize_inductor(var_of_one(0.5), "torch-compile:cpu:float32", [], 120.0)
    assert result.summary == "The finding does not reproduce here; nothing to localize.", result
    assert result.trials == 1 and result.passes == []


@pytest.mark.long
def test_torchs_bisector_names_the_var_lowering_for_the_one_element_nan():
    """reports/bugs/torch-compile-var-one-element-nan: var of one nan is 0 under inductor (its Welford lowering)."""
    result = localize_inductor(var_of_one(float("nan")), "torch-compile:cpu:float32", [], 120.0)
    assert result.passes == ["inductor/lowerings: var"], result


def stored_bucket(tmp_path):
    """A corpus holding the conv abort's case in bucket B1, and the PassVerdict a localization of it gives."""
    db = str(tmp_path / "fuzz.db")
    imported = CliRunner().invoke(main, ["import", "--db", db, str(CONV_ABORT)])
    assert imported.exit_code == 0, imported.output
    verdict = PassVerdict("jax-grad:cpu:float32", "xla", ["algsimp"], 8, 8,
                          "Disabling the HLO pass 'algsimp' alone makes it agree (--xla_disable_hlo_passes=algsimp).")
    return db, verdict


def test_a_localization_is_kept_on_its_bucket_through_rebucket_merge_and_the_issue_report(tmp_path):
    db, verdict = stored_bucket(tmp_path)
    with Corpus(db) as corpus:
        corpus.record_localization(corpus.bucket_by_id(1)["signature"], verdict.stored({"jax": "0.10.2", "torch": None}))
    runner = CliRunner()
    line = "Pass: Disabling the HLO pass 'algsimp' alone makes it agree (--xla_disable_hlo_passes=algsimp). (on jax-grad:cpu:float32, jax 0.10.2, "
    assert line in runner.invoke(main, ["show", "B1", "--db", db]).output
    assert runner.invoke(main, ["rebucket", "--db", db]).exit_code == 0
    assert json.loads(runner.invoke(main, ["show", "B1", "--db", db, "--json"]).output)["localization"]["passes"] == ["algsimp"]
    merged = str(tmp_path / "merged.db")
    assert runner.invoke(main, ["merge", "--db", merged, db]).exit_code == 0
    assert line in runner.invoke(main, ["show", "B1", "--db", merged]).output
    issue = runner.invoke(main, ["export", "B1", "--db", db, "--format", "issue", "--force"])
    assert "Disabling the HLO pass 'algsimp' alone makes it agree" in issue.output, issue.output


def test_a_tampered_localization_is_one_sentence(tmp_path):
    db, _ = stored_bucket(tmp_path)
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE buckets SET localization = '{\"passes\": 3}'")
    result = CliRunner().invoke(main, ["show", "B1", "--db", db])
    assert result.exit_code == 2 and "stored pass localization is damaged" in result.output, result.output


def test_xla_takes_the_backend_optimization_flag_the_last_trial_uses(tmp_path):
    """The trial after every HLO pass was disabled sets BACKEND_OPTIMIZATION_OFF: a flag XLA must accept
    (an unknown XLA flag aborts the process, which a trial would read as the finding reproducing)."""
    from fuzzer.triaging.pass_bisect import BACKEND_OPTIMIZATION_OFF

    env = {**os.environ, "XLA_FLAGS": BACKEND_OPTIMIZATION_OFF, "JAX_PLATFORMS": "cpu"}
    ran = subprocess.run([sys.executable, "-c", "import jax, jax.numpy as jnp; print(float(jax.jit(lambda x: (x * 2 + 1).sum())(jnp.ones(8))))"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and ran.stdout.strip() == "24.0", ran.stderr[-2000:]
