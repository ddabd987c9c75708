"""Plugins from files outside the package, one per kind: a new backend class, a derived backend
(the README's example), a graph transformation, and external-process backends."""

from pathlib import Path

import pytest

from fuzzer.campaign import CampaignOptions, run_campaign
from fuzzer.corpus import Corpus

PLUGINS = Path(__file__).parent / "plugins"
TRANSPOSE_OPS = ["transpose", "layer_norm", "relu", "matmul", "linear", "add", "softmax"]


def campaign(tmp_path, backends, plugin, ops=None, max_cases=12):
    corpus = Corpus(tmp_path / "c.db")
    progress = run_campaign(corpus, CampaignOptions(
        backends=backends, plugins=[str(PLUGINS / plugin)], ops=ops, max_cases=max_cases, workers=1, shrink_time=10))
    assert progress.status == "finished"
    return corpus, progress


def signatures(corpus):
    return {bucket["signature"] for bucket in corpus.buckets()}


def test_new_backend_class_from_a_file_agrees(tmp_path):
    corpus, progress = campaign(tmp_path, ["torch-eager:cpu:float32", "plugin-numpy32"], "numpy32_backend.py")
    assert progress.checked > 0 and signatures(corpus) == set()


def test_readme_derived_backend_agrees(tmp_path):
    corpus, progress = campaign(tmp_path, ["torch-eager:cpu:float32", "my-layernorm"], "readme_layernorm.py",
                                ops=["conv2d", "transpose", "permute", "layer_norm", "relu"])
    assert progress.checked > 0 and signatures(corpus) == set()


def test_transformation_from_a_file_agrees(tmp_path):
    corpus, progress = campaign(tmp_path, ["transpose-as-permute"], "transpose_as_permute.py", ops=TRANSPOSE_OPS)
    assert progress.checked > 0 and signatures(corpus) == set()


def test_external_runner_agrees_and_draws_only_its_ops(tmp_path):
    corpus, progress = campaign(tmp_path, ["torch-eager:cpu:float32", "numpy-runner"], "external_numpy.py")
    assert progress.checked > 0 and signatures(corpus) == set()
    assert set(progress.op_counts) <= {"relu", "tanh", "sigmoid", "add", "mul", "matmul", "linear", "transpose"}


@pytest.mark.slow
def test_external_runner_bug_and_crash_are_findings(tmp_path):
    corpus, _ = campaign(tmp_path, ["numpy-runner-buggy", "always-fails"], "external_numpy.py",
                         ops=["relu", "add", "tanh"], max_cases=6)
    found = signatures(corpus)
    assert "mismatch | numpy-runner-buggy | relu" in found
    crash = [s for s in found if s.startswith("crash | always-fails")]
    assert crash and "exited with status N" in crash[0]
