"""The exit-code contract holds for hostile plugins, text and case files (issue 30), and generated
scripts name every variable uniquely without shadowing a module or builtin.

A plugin that aborts, exits or hangs while loading is refused in one sentence (exit 2) before the
command loads it; a worker's prints never reach the parent's stdout (`--json`); bad text or numbers
in a case file, a registry or on the command line are exit 2, never 3; a damaged campaign row is
listed, not a crash. Every attack goes through the real CLI.
"""

from __future__ import annotations

import ast
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from fuzzer.arrays import materialize, to_npy_bytes
from fuzzer.corpus import Corpus
from fuzzer.ir import Graph, Node, TensorSpec
from test_hostile import FUZZ, TORCH, exported, fuzz, refused, relu_case, write_json

PLUGINS = Path(__file__).parent / "plugins"


# -- plugins that end or freeze the process while loading -----------------------------------------

@pytest.mark.parametrize("plugin, env, needle", [
    ("load_abort.py", {}, "was killed by SIGABRT before register(api) returned"),
    ("load_exit0.py", {}, "called sys.exit(0) while loading"),
    ("load_sleep.py", {"FUZZ_PLUGIN_LOAD_TIMEOUT": "2"}, "did not finish loading within 2 s"),
], ids=["abort", "sys.exit(0)", "hang"])
def test_a_plugin_that_ends_or_freezes_its_process_while_loading_is_refused(tmp_path, monkeypatch, plugin, env, needle):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    db = tmp_path / "fuzz.db"
    done = subprocess.run([FUZZ, "run", "--db", str(db), "--max-cases", "1", "--plugin", str(PLUGINS / plugin)],
                          capture_output=True, text=True, timeout=120)
    refused(done, needle, plugin)
    assert not db.exists()


@pytest.mark.slow  # one campaign of two graphs (~10 s)
def test_a_workers_prints_never_reach_the_parents_stdout(tmp_path):
    done = subprocess.run([FUZZ, "run", "--db", str(tmp_path / "fuzz.db"), "--max-cases", "2", "--workers", "1",
                           "--plugin", str(PLUGINS / "print_relu.py"), "--backends", "plugin-print-relu", "--ops", "relu",
                           "--inputs-per-graph", "1", "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["checked"] == 2  # stdout is the summary alone
    for line in ("imported", "registered", "relu ran", "fd 1"):
        assert f"plugin-print-relu: {line}" in done.stderr


# -- bad text and numbers are bad input (exit 2), never an internal error (3) ----------------------------

def test_a_note_that_is_not_utf8_is_refused(tmp_path):
    db = tmp_path / "fuzz.db"
    assert fuzz("import", "--db", db, write_json(tmp_path / "c.json", exported(relu_case()))).exit_code == 0
    done = subprocess.run([FUZZ.encode(), b"triage", b"--db", str(db).encode(), b"1", b"--status", b"confirmed",
                           b"--note", b"x\xed\xa0\x80"], capture_output=True, text=True, timeout=60)
    refused(done, "--note", "not UTF-8 text")


def npy_without_its_header_end() -> str:
    import base64

    raw = to_npy_bytes(relu_case().arrays["x0"])
    length = int.from_bytes(raw[8:10], "little")
    header = b"{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3".ljust(length - 1) + b"\n"
    return base64.b64encode(raw[:10] + header + raw[10 + length:]).decode()


def with_finding(case: dict, **changes) -> dict:
    finding = {"backend": TORCH, "verdict": "mismatch", "culprit": "relu", "signature": f"mismatch | {TORCH} | relu",
               "max_error": 1.0, "allowed": 1e-5, **changes}
    return {**case, "verdict": "mismatch", "findings": [finding]}


@pytest.mark.parametrize("change, needle", [
    (lambda c: with_finding(c, signature="mismatch | relu \ud800"), "lone surrogate"),
    (lambda c: {**c, "arrays": {"x0": npy_without_its_header_end()}}, "is not a plain numeric .npy array"),
    (lambda c: {**c, "seed": 2**64}, "'seed' must be a whole number from 0 to 2**63-1"),
    (lambda c: with_finding(c, max_error="big"), "numbers 'max_error' and 'allowed'"),
], ids=["surrogate-in-signature", "npy-header-unterminated", "seed-2**64", "max_error-text"])
def test_bad_text_or_numbers_in_a_case_file_are_bad_input(tmp_path, change, needle):
    path = write_json(tmp_path / "case.json", json.dumps(change(exported(relu_case()))))
    refused(fuzz("import", "--db", tmp_path / "fuzz.db", path), needle)


def test_a_seed_of_5000_digits_is_bad_input(tmp_path):
    text = json.dumps(exported(relu_case())).replace('"seed": 0', '"seed": ' + "9" * 5000)
    refused(fuzz("import", "--db", tmp_path / "fuzz.db", write_json(tmp_path / "case.json", text)), "a number too long")


def test_a_surrogate_in_the_known_bug_registry_is_bad_input(tmp_path):
    entry = {"id": "x-bug", "title": "\ud800", "match": {"verdicts": ["mismatch"]}, "status": "open", "link": None,
             "affected": None, "cases": [], "report": None}
    refused(fuzz("known", "list", "--known-bugs", write_json(tmp_path / "bugs.json", json.dumps([entry]))),
            "lone surrogate")


@pytest.mark.parametrize("column, value", [("config", "'[1]'"), ("checkpoint", "'{\"elapsed\": \"soon\"}'"),
                                           ("findings", "X'00'"), ("lease_pid", "'abc'")])
def test_a_damaged_campaign_row_is_listed_not_a_crash(tmp_path, column, value):
    db = tmp_path / "fuzz.db"
    with Corpus(db) as corpus:
        corpus.finish_campaign(corpus.start_campaign({"backends": [TORCH]}, 0, {}), "interrupted")
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE campaigns SET {column} = {value}, lease_heartbeat = 'x'")
    for args in ([], ["--json"]):
        result = fuzz("campaigns", "--db", db, *args)
        assert result.exit_code == 0, result.output
    assert json.loads(fuzz("campaigns", "--db", db, "--json").stdout)[0]["id"] == 1


# -- generated scripts: unique names that shadow nothing -------------------------------------------------

SHADOWING = Graph((TensorSpec("np", (2, 3)), TensorSpec("torch", (2, 3)), TensorSpec("sys", (2, 3)),
                   TensorSpec("n0_weight", (2, 3))),
                  (Node("print", "add", ("np", "torch")), Node("n0", "linear", ("print",), {"out_features": 3, "bias": True}),
                   Node("n2", "mul", ("n0", "sys")), Node("n3", "add", ("n2", "n0_weight"))), ("n3",))


@pytest.mark.slow  # four scripts run in their own Python (~15 s)
@pytest.mark.parametrize("backend", [TORCH, pytest.param("jax-jit:cpu:float32", marks=pytest.mark.long)])  # long: CI's 15 minutes
def test_scripts_for_names_that_shadow_modules_or_another_variable_run_and_agree(tmp_path, backend):
    db = tmp_path / "fuzz.db"
    case = materialize(SHADOWING, 1)
    assert fuzz("import", "--db", db, write_json(tmp_path / "c.json", exported(case, backends=(backend,)))).exit_code == 0
    for fmt in ("minimal", "script"):
        script = tmp_path / f"{fmt}.py"
        assert fuzz("export", "--db", db, 1, "--format", fmt, "--backend", backend, "-o", script).exit_code == 0
        tree = ast.parse(script.read_text())
        graph = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "graph")
        arguments = [argument.arg for argument in graph.args.args]
        imported = {(alias.asname or alias.name).partition(".")[0] for node in ast.walk(tree)
                    if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
        if fmt == "script":  # the full harness keeps the case's names, renamed where they would shadow
            assert arguments[0] == "np_" and arguments[3:5] == ["n0_weight", "n0_weight_"], arguments
        else:  # the minimal script names its inputs afresh (x0, x1, ...), so nothing can shadow
            assert arguments[:4] == ["x0", "x1", "x2", "x3"], arguments
        assert len(set(arguments)) == len(arguments) and not imported & set(arguments), (arguments, imported)
        assert "print" not in {target.id for node in ast.walk(graph) if isinstance(node, ast.Assign)
                               for target in node.targets if isinstance(target, ast.Name)}
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (fmt, done.stdout, done.stderr)
