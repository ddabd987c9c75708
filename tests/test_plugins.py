"""Plugins from files outside the package, one per kind: a new backend class, a derived backend
(the README's example), a graph transformation, and external-process backends."""

from pathlib import Path

import pytest

from fuzzer.corpus import Corpus
from fuzzer.running.campaign import CampaignOptions, run_campaign

PLUGINS = Path(__file__).parent / "plugins"
TRANSPOSE_OPS = ["transpose", "layer_norm", "relu", "matmul", "linear", "add", "softmax"]


def campaign(tmp_path, backends, plugin, ops=None, max_cases=12, shrink_time=10, **options):
    corpus = Corpus(tmp_path / "c.db")
    progress = run_campaign(corpus, CampaignOptions(
        backends=backends, plugins=[str(PLUGINS / plugin)], ops=ops, max_cases=max_cases, workers=1,
        shrink_time=shrink_time, **options))
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
    # Every run of an external backend starts a process (numpy's import each time), a shrink hundreds:
    # three graphs of one input set each (seed 0) draw a relu for the bug and a crash for the failing
    # command, and a one-second shrink still takes both findings through the shrinker.
    corpus, _ = campaign(tmp_path, ["numpy-runner-buggy", "always-fails"], "external_numpy.py",
                         ops=["relu", "add", "tanh"], max_cases=3, inputs_per_graph=1, shrink_time=1)
    found = signatures(corpus)
    assert "mismatch | numpy-runner-buggy | relu" in found
    crash = [s for s in found if s.startswith("crash | always-fails")]
    assert crash and "exited with status N" in crash[0]


def test_a_kind_declares_the_sets_it_joins_and_the_order_they_are_checked_in():
    """No central list: each kind declares its own members of `cpu`, `gpu` and `model`; a set's
    order is its positions; a new kind (here a plugin's) joins where it says; a taken position
    is refused."""
    from fuzzer.backends import backend_sets, default_backends, parse_backend_list, table
    from fuzzer.backends.torch_eager import TorchEager

    sets = backend_sets()
    assert set(sets) == {"cpu", "gpu", "model", "grad"} and default_backends() == sets["cpu"]
    assert [b.name for b in parse_backend_list(None)] == list(sets["cpu"])
    assert sets["cpu"][:2] == ("torch-eager:cpu:float32", "torch-compile:cpu:float32")
    assert "torch-jit-trace:cpu:float32" in sets["model"] and "torch-jit-trace:cpu:float32" not in sets["cpu"]

    class Joining(TorchEager):
        kind = "joining-eager"
        in_sets = {"cpu": {15: "cpu:float64"}}

    class Clashing(TorchEager):
        kind = "clashing-eager"
        in_sets = {"cpu": {15: "cpu:float32"}}

    try:
        table().classes[Joining.kind] = Joining
        assert backend_sets()["cpu"][:3] == ("torch-eager:cpu:float32", "joining-eager:cpu:float64", "torch-compile:cpu:float32")
        table().classes[Clashing.kind] = Clashing
        with pytest.raises(ValueError, match="both take position 15 of set 'cpu'"):
            backend_sets()
    finally:
        table().classes.pop(Joining.kind, None)
        table().classes.pop(Clashing.kind, None)
    assert backend_sets() == sets


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the helper's state from /proc")
def test_a_plugin_that_starts_a_helper_as_it_loads_is_not_taken_for_one_that_hangs(tmp_path, monkeypatch):
    # Issue 51: a helper the plugin starts (a server, here a sleep) held the trial load's pipes open, and
    # the wait for their end was reported as a plugin that "did not finish loading".
    import time

    from fuzzer import plugins
    from test_isolation import ended

    pid_file = tmp_path / "helper.pid"
    plugin = tmp_path / "with_helper.py"
    plugin.write_text(f"import subprocess\n\nhelper = subprocess.Popen(['sleep', '300'])\n"
                      f"open({str(pid_file)!r}, 'w').write(str(helper.pid))\n\n\ndef register(api):\n    pass\n")
    monkeypatch.setattr(plugins, "PLUGIN_LOAD_TIMEOUT_S", 60.0)
    plugins.check_plugins_in_child([str(plugin)])  # no UserError
    helper, deadline = int(pid_file.read_text()), time.monotonic() + 10
    while not ended(helper) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ended(helper), "the trial load's helper ends with it"
