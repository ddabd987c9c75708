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
# probe children inductor started (the probe loads the built library with ctypes' LoadLibrary).
CHILD = textwrap.dedent("""
    import subprocess, sys
    probes = []
    original_run = subprocess.run
    def counting_run(args, *rest, **options):
        if any("LoadLibrary" in str(part) for part in args):
            probes.append(args)
        return original_run(args, *rest, **options)
    subprocess.run = counting_run
    import numpy as np
    from fuzzer.backends import get_backend
    from fuzzer.ir import Case, Graph, Node, TensorSpec
    graph = Graph([TensorSpec("x0", (3, 5))], [Node("n0", "gelu", ["x0"], {})], ["n0"])
    case = Case(graph, {"x0": np.linspace(-2, 2, 15).reshape(3, 5)}, seed=1)
    outputs = get_backend("torch-compile:cpu:float32").run(case)
    print(len(probes), float(np.sum(outputs[0])))
""")


def _compile_in_child(env) -> tuple[int, float]:
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    probes, total = done.stdout.split()
    return int(probes), float(total)


def test_a_second_process_answers_the_isa_probes_from_the_cache(tmp_path):
    memo = tmp_path / "isa.json"
    memo.write_text("not json: a cache file from elsewhere is probed again, not trusted")
    env = {**os.environ, "FUZZ_INDUCTOR_ISA_CACHE": str(memo), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    first_probes, first_total = _compile_in_child(env)
    answers = json.loads(memo.read_text())
    assert first_probes > 0
    assert sum(len(probes) for probes in answers.values()) == first_probes
    second_probes, second_total = _compile_in_child(env)
    assert second_probes == 0
    assert second_total == first_total
    # A cache it may not write (its folder is a file) costs the probes again, never the compile.
    unwritable = {**env, "FUZZ_INDUCTOR_ISA_CACHE": str(memo / "isa.json")}
    third_probes, third_total = _compile_in_child(unwritable)
    assert third_probes == first_probes and third_total == first_total




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
