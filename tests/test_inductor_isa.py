"""Inductor's CPU ISA probes run once per machine (fuzzer/backends/inductor_isa.py): a second
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
