"""Every finding exports, in every format, and the minimal reproducer is what upstream wants: short,
public calls, expected values computed in float64 in the script, exit 1 while the bug is there.

The cases are every file of corpus/regression and corpus/known: the framework bugs our campaigns
found and every canary's shrunk finding (what `fuzz selftest` finds), bug and clean twins. The
scripts run in a fresh interpreter, as a maintainer would run them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fuzzer.arrays import materialize
from fuzzer.backends import get_backend
from fuzzer.cli import main
from fuzzer.corpus import Corpus, load_case_file
from fuzzer.exact_dtypes import is_exact
from fuzzer.ir import Graph, Node, TensorSpec
from fuzzer.plugins import canary_names, load_plugin
from fuzzer.reproducers.issue_report import export_issue
from fuzzer.reproducers.minimal_reproducer import build_minimal_script
from fuzzer.reproducers.program_source import compact_array, compact_arrays
from fuzzer.reproducers.reproducer import build_script
from fuzzer.running.replay import Replayer
from fuzzer.running.selftest import run_selftest
from test_hostile import fuzz

ROOT = Path(__file__).resolve().parents[1]
CASE_FILES = sorted((ROOT / "corpus" / "regression").glob("*.json")) + sorted((ROOT / "corpus" / "known").glob("*.json"))
# Run standalone: known bugs of torch eager (a wrong value, a crash) and of jax.jit, a canary whose
# override is a lambda (gru-stale-hidden), and a clean case (exit 0).
RUN = ("torch-layer-norm-huge.json", "jax-jit-log-pow-negative-base.json", "torch-local-response-norm-5d-view.json",
       "gru-stale-hidden.json", "gru-stale-hidden-clean.json")


def _run(script: str, folder: Path, name: str) -> subprocess.Popen:
    (folder / name).write_text(script)
    return subprocess.Popen([sys.executable, name], cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _backend_of(data: dict) -> str:
    findings = [f["backend"] for f in data.get("findings", []) if f.get("verdict") != "agree"]
    return findings[0] if findings else data["backends"][0]


@pytest.fixture(scope="module")
def exported(tmp_path_factory, canaries):
    """{file name: {format: text}} for every case file, and the case files' expectations."""
    folder = tmp_path_factory.mktemp("every-finding")
    corpus = Corpus(folder / "cases.db")
    texts, expect = {}, {}
    with Replayer(["torch-eager:cpu:float32"], canary_names(), timeout=120) as replayer:
        for path in CASE_FILES:
            data = load_case_file(path)
            case_id = corpus.import_case(data)
            stored, backend = corpus.get_case(case_id), get_backend(_backend_of(data))
            finding = next((f for f in stored.findings if f.get("backend") == backend.name), None)
            title = stored.signature or path.stem
            full = not is_exact(backend.dtype)  # an integer case: the minimal script (build_script refuses it)
            texts[path.name] = {
                "minimal": build_minimal_script(stored.case, backend, title, finding),
                "script": build_script(stored.case, backend, title, verdict=(finding or {}).get("verdict", "")) if full else None,
                "pytest": build_script(stored.case, backend, title, pytest_style=True) if full else None,
                "json": json.dumps(corpus.export_case(case_id)),
                "issue": export_issue(corpus, case_id, backend, folder / "README.md", canary_names(), replayer)
                if finding else "",
            }
            expect[path.name] = data.get("expect")
    return texts, expect, folder


@pytest.mark.slow
def test_every_case_file_exports_in_every_format_and_the_python_ones_compile(exported):
    texts, _, _ = exported
    assert len(texts) == len(CASE_FILES) >= 20
    for name, formats in texts.items():
        for fmt in ("minimal", "script", "pytest"):
            if formats[fmt] is not None:
                compile(formats[fmt], f"{name} as {fmt}", "exec")
        assert json.loads(formats["json"])["graph"]["nodes"]
        assert not formats["issue"] or formats["issue"].startswith("# "), name
        assert "fuzz replay" not in formats["issue"] or "--db" not in formats["issue"], "the issue names no local corpus"


def test_the_case_files_hold_every_canary_s_finding():
    """So exporting them exports what `fuzz selftest` finds, for every canary there is."""
    backends = {f["backend"] for path in CASE_FILES for f in load_case_file(path).get("findings", [])}
    assert {f"canary-{name}" for name in canary_names()} <= backends


@pytest.mark.slow
def test_minimal_scripts_run_standalone_with_the_right_exit_code(exported):
    texts, expect, folder = exported
    running = {name: _run(texts[name]["minimal"], folder, f"minimal_{Path(name).stem.replace('-', '_')}.py") for name in RUN}
    for name, process in running.items():
        output, _ = process.communicate(timeout=300)
        assert process.returncode == (1 if expect[name] == "disagree" else 0), f"{name}:\n{output}"
        assert output.startswith("torch ") or output.startswith("jax "), "the versions come first"


def test_a_minimal_script_of_a_one_op_bug_is_short_and_computes_its_expected_values(exported):
    texts, _, _ = exported
    script = texts["jax-jit-log-pow-negative-base.json"]["minimal"]
    assert len(script.splitlines()) <= 26, script  # 8 of them the check that ends in one MISMATCH line (33 before)
    assert "jax.jit(graph)" in script and "float64 reference: jax on the CPU" in script
    atol = re.search(r"zip\(outputs, expected, \[([^],]+)\]", script).group(1)
    assert len(atol) <= 8 and float(f"{float(atol):.3g}") == float(atol), "the allowance: 3 significant digits"


def test_values_are_written_in_their_shortest_form():
    values = np.zeros((1, 2, 4, 2))
    values[0, 1, 2, 0] = np.float32(89.14406)
    assert compact_array("x", values, "float32", "torch") == ["x = torch.full((1, 2, 4, 2), 0.0)", "x[0, 1, 2, 0] = 89.14406"]
    assert compact_array("m", np.array([True, False]), "bool", "numpy") == ["m = np.array([True, False])"]
    assert compact_array("x", np.array([0.1, -2.5, np.nan]), "float32", "numpy") == ["x = np.array([0.1, -2.5, np.nan], np.float32)"]


def test_a_large_array_the_campaign_drew_is_rebuilt_from_its_seed():
    case = materialize(Graph([TensorSpec("x", (30, 20))], [Node("n0", "relu", ["x"], {})], ["n0"]), seed=5)
    (line,) = compact_arrays(case, "numpy")
    assert "np.random.default_rng(5).standard_normal((30, 20))" in line
    namespace = {"np": np}
    exec(line, namespace)  # our own line: the case's values come back exactly
    # (under the placeholder name the script writer gives the input until it names it: program_source)
    (name,) = [key for key in namespace if key not in ("np", "__builtins__")]
    assert np.array_equal(namespace[name].astype(np.float64), case.arrays["x"])


PLUGIN = '''
import torch

from fuzzer.ops import get_op

SCALE = torch.tensor(1.001)  # built at import: no script can write it, so this file comes along whole


def registry_layer_norm(xs, ps, attrs):
    return get_op("layer_norm").impl("torch")(xs, ps, attrs) * 1.001


def scaled_relu(xs, ps, attrs):
    return torch.relu(xs[0]) * SCALE


def register(api):
    api.derive_backend("plugin-registry-calls", base="torch-eager:cpu:float32",
                       overrides={"layer_norm": registry_layer_norm, "relu": scaled_relu})
'''


@pytest.mark.slow
def test_a_plugin_using_our_registry_or_an_import_time_object_still_exports(tmp_path):
    """Code the inliner cannot write comes from the fuzzer package (get_op) or as the plugin file
    itself (SCALE), with a comment saying why the script needs the fuzzer; the script still runs."""
    plugin = tmp_path / "registry_plugin.py"
    plugin.write_text(PLUGIN)
    load_plugin(str(plugin))
    graph = Graph([TensorSpec("x", (2, 4))], [Node("n0", "layer_norm", ["x"], {"normalized_shape": [4], "eps": 1e-5, "affine": False}),
                                              Node("n1", "relu", ["n0"], {})], ["n1"])
    backend = get_backend("plugin-registry-calls")
    script = build_minimal_script(materialize(graph, 0), backend, "registry calls", {"verdict": "mismatch"})
    assert build_script(materialize(graph, 0), backend, "registry calls")
    assert "from fuzzer.ops import get_op" in script and "# registry_plugin.py, whole" in script
    assert "# Needs the fuzzer: fuzzer.ops.get_op cannot stand alone" in script
    ran = _run(script, tmp_path, "repro.py")
    output, _ = ran.communicate(timeout=300)
    assert ran.returncode == 1 and output.strip().splitlines()[-1].startswith("MISMATCH: "), output


def test_a_script_for_a_device_this_machine_lacks_exits_2_with_one_sentence(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has the device")
    case = materialize(Graph([TensorSpec("x", (2, 3))], [Node("n0", "tanh", ["x"], {})], ["n0"]), 0)
    script = build_minimal_script(case, get_backend("torch-eager:cuda:float32"), "on CUDA", {"verdict": "mismatch"})
    ran = _run(script, tmp_path, "repro.py")
    output, _ = ran.communicate(timeout=300)
    assert ran.returncode == 2 and output.strip().splitlines()[-1] == "This reproducer needs a CUDA GPU, and torch sees none here.", output


# -- what `fuzz selftest` finds, exported as a user would (issue 51: the GRU canaries' exited 3)

FORMATS = ("minimal", "script", "pytest", "json", "issue")


def _selftest_exports(folder: Path, canaries: list[str]) -> dict:
    """{(canary, format): the `fuzz export` result} of each canary's shrunk finding in a selftest corpus."""
    db = folder / "selftest.db"
    with Corpus(db) as corpus:
        results = run_selftest(corpus, canaries=canaries)
    exports = {}
    for result in results:
        assert result["shrunk_case"], result
        for fmt in FORMATS:
            out = folder / f"{result['canary']}-{fmt}.out"
            exports[result["canary"], fmt] = (fuzz("export", result["shrunk_case"], "--db", db, "--plugin", result["canary"],
                                                   "--format", fmt, "-o", out), out)
    return exports


def _assert_every_format_exported(exports: dict) -> None:
    for (canary, fmt), (result, out) in exports.items():
        assert result.exit_code == 0, f"{canary} as {fmt}: {result.output}{result.stderr}"
        if fmt in ("minimal", "script", "pytest"):
            compile(out.read_text(), f"{canary} as {fmt}", "exec")


# long (out of CI's 15 minutes): every format of every stored case file exports in CI (test_every_case_file_exports_in_every_format...).
@pytest.mark.long
@pytest.mark.slow
def test_a_gru_canary_s_selftest_finding_exports_in_every_format(tmp_path):
    """Its shrunk case (batch_first False) holds a local the inliner copies together with a function
    of ours (the canary's step): that copy raised TypeError, exit 3, in every format but json."""
    exports = _selftest_exports(tmp_path, ["gru-stale-hidden"])
    _assert_every_format_exported(exports)
    ran = _run(exports["gru-stale-hidden", "minimal"][1].read_text(), tmp_path, "repro.py")
    output, _ = ran.communicate(timeout=300)
    assert ran.returncode == 1 and output.strip().splitlines()[-1].startswith("MISMATCH: "), output


@pytest.mark.long
def test_every_canary_s_selftest_finding_exports_in_every_format(tmp_path):
    _assert_every_format_exported(_selftest_exports(tmp_path, canary_names()))


def test_an_integer_case_exports_a_minimal_script_and_refuses_the_full_harness_in_one_sentence(tmp_path):
    db = str(tmp_path / "fuzz.db")
    runner = CliRunner()
    assert runner.invoke(main, ["import", "--db", db, str(ROOT / "corpus" / "known" / "torch-int-trunc-div-min-sigfpe.json")]).exit_code == 0
    minimal = runner.invoke(main, ["export", "1", "--db", db])
    assert minimal.exit_code == 0 and "trunc" in minimal.output, minimal.output
    full = runner.invoke(main, ["export", "1", "--db", db, "--format", "script"])
    assert full.exit_code == 2 and "minimal script" in full.output and len(full.output.strip().splitlines()) == 1, full.output
