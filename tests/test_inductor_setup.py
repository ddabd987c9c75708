"""Inductor's CPU ISA probes run once per machine (fuzzer/backends/inductor_setup.py): a second
process that compiles answers them from the cache file, without a probe child."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch._inductor.cpu_vec_isa")

# A child that compiles one graph on the CPU through our torch-compile backend and prints how many
# probe children inductor started (the probe loads the built library with ctypes' LoadLibrary), how
# many of them imported torch, and the ISA inductor picked. Its inductor probes with torch 2.11's
# child, which imports torch (torch 2.13's Linux child no longer does).
CHILD = textwrap.dedent("""
    import subprocess, sys
    from torch._inductor.cpu_vec_isa import VecISA, pick_vec_isa
    VecISA._avx_py_load = 'import torch\\nfrom ctypes import cdll\\ncdll.LoadLibrary("__lib_path__")\\n'
    probes = []
    original_run, original_call = subprocess.run, subprocess.check_call
    def counting(original):
        def run(args, *rest, **options):
            if any("LoadLibrary" in str(part) for part in args):
                probes.append(args[-1])
            return original(args, *rest, **options)
        return run
    subprocess.run, subprocess.check_call = counting(original_run), counting(original_call)
    import numpy as np
    from fuzzer.backends import get_backend
    from fuzzer.ir import Case, Graph, Node, TensorSpec
    graph = Graph([TensorSpec("x0", (3, 5))], [Node("n0", "gelu", ["x0"], {})], ["n0"])
    case = Case(graph, {"x0": np.linspace(-2, 2, 15).reshape(3, 5)}, seed=1)
    outputs = get_backend("torch-compile:cpu:float32").run(case)
    importing = sum("import torch" in probe.splitlines() for probe in probes)
    print(len(probes), importing, str(pick_vec_isa()).replace(" ", "+"), float(np.sum(outputs[0])))
""")


def _compile_in_child(env) -> tuple[int, int, str, float]:
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    probes, importing, isa, total = done.stdout.split()
    return int(probes), int(importing), isa, float(total)


@pytest.mark.long  # two cold inductor starts, 38 s
def test_a_second_process_answers_the_isa_probes_from_the_cache_and_the_first_probes_without_importing_torch(tmp_path):
    memo = tmp_path / "isa.json"
    memo.write_text("not json: a cache file from elsewhere is probed again, not trusted")
    env = {**os.environ, "FUZZ_INDUCTOR_ISA_CACHE": str(memo), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    first_probes, first_importing, first_isa, first_total = _compile_in_child(env)
    answers = json.loads(memo.read_text())
    assert first_probes > 0 and first_importing == 0
    assert sum(len(probes) for probes in answers.values()) == first_probes
    second_probes, _, second_isa, second_total = _compile_in_child(env)
    assert second_probes == 0
    assert (second_isa, second_total) == (first_isa, first_total)


@pytest.mark.long  # CI's 15 minutes: inductor's own probing imports torch in every child
def test_the_torch_free_probes_give_inductors_own_answers(tmp_path):
    """With the cache switched off inductor probes as it does alone, importing torch in every child:
    the torch-free children give the same answers (the same ISA), and the same compiled results."""
    env = {**os.environ, "FUZZ_INDUCTOR_ISA_CACHE": str(tmp_path / "isa.json"), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    first_probes, first_importing, first_isa, first_total = _compile_in_child(env)
    own_probes, own_importing, own_isa, own_total = _compile_in_child({**env, "FUZZ_INDUCTOR_ISA_CACHE": ""})
    assert first_importing == 0 and own_importing == own_probes == first_probes
    assert (own_isa, own_total) == (first_isa, first_total)




# Inductor reports a failure twice in one child: before the set-up (written: the test can fail) and after.
QUIET_CHILD = textwrap.dedent("""
    import sys, warnings
    import torch._inductor.lowering, torch._inductor.scheduler
    from fuzzer.backends.inductor_setup import prepare_inductor
    def report_a_failure(line):
        torch._inductor.scheduler.log.fatal("Error in codegen for %s", "buf6")
        warnings.warn_explicit("Online softmax is disabled on the fly", UserWarning, "lowering.py", line,
                               module="torch._inductor.lowering")
    report_a_failure(1)
    print("PREPARED", file=sys.stderr, flush=True)
    prepare_inductor()
    report_a_failure(2)
""")


@pytest.mark.long  # CI's 15 minutes: a campaign to read its stderr
def test_inductor_reports_of_a_failure_stay_off_the_campaign_stderr(tmp_path):
    """A worker's stderr is the progress line: inductor's CRITICAL dump of a node whose codegen failed
    (the failure is the case's outcome) and its performance warnings are not written there."""
    env = {key: value for key, value in os.environ.items() if key != "TORCH_LOGS"}
    env["FUZZ_INDUCTOR_ISA_CACHE"] = str(tmp_path / "isa.json")
    done = subprocess.run([sys.executable, "-c", QUIET_CHILD], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    bare, prepared = done.stderr.split("PREPARED")
    assert "Error in codegen" in bare and "Online softmax" in bare
    assert "Error in codegen" not in prepared and "Online softmax" not in prepared


def test_a_cache_it_may_not_write_costs_the_probe_again_never_the_answer(tmp_path):
    from fuzzer.backends.inductor_setup import _remembered

    (tmp_path / "file").write_text("a file where the cache's folder would be")
    asked = []
    remembered = _remembered(lambda isa, code: asked.append(code) or True, tmp_path / "file" / "isa.json", "machine")
    assert remembered(object(), "probe") is True and remembered(object(), "probe") is True
    assert asked == ["probe", "probe"]


def test_a_probe_the_torch_free_child_cannot_load_is_asked_again_as_inductor_asks_it():
    from fuzzer.backends.inductor_setup import _torch_free_first

    class Probe:  # stands in for VecISA: its check_build loads only through `import torch`
        _avx_py_load = "import torch\nfrom ctypes import cdll\n"

    loaders = []
    check = _torch_free_first(lambda isa, code: loaders.append(Probe._avx_py_load) or "import torch" in Probe._avx_py_load, Probe)
    assert check(Probe(), "code") is True
    assert [("import torch" in loader) for loader in loaders] == [False, True]
    assert Probe._avx_py_load.startswith("import torch")  # inductor's own loader is back
