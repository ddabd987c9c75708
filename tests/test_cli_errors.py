"""Bad input through the real `fuzz` CLI: exit status 2, one helpful `Error: ...` line on
stderr, nothing on stdout, and nothing stored lost or changed."""

from __future__ import annotations

import base64
import io
import json
import pickle
import random
import shutil
import sqlite3
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

import fuzzer
from fuzzer.cli import main
from fuzzer.corpus import Corpus
from fuzzer.drawing.generate import generate_case
from fuzzer.judging.check import Finding
from fuzzer.records import CaseRecord

PLUGINS = Path(__file__).resolve().parent / "plugins"


# -- helpers ------------------------------------------------------------------------------

def fuzz(*args) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def assert_user_error(result, *needles: str) -> str:
    """Exit 2 with exactly one line `Error: ...` on stderr that mentions every needle; returns the line."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception  # not an escaped traceback
    stderr = result.stderr
    assert stderr.endswith("\n") and stderr.count("\n") == 1, f"not a single line: {stderr!r}"
    assert stderr.startswith("Error: "), stderr
    assert "Traceback" not in stderr
    assert result.stdout == "", result.stdout
    for needle in needles:
        assert needle in stderr, f"{needle!r} not in {stderr!r}"
    return stderr


def dump(db_path: Path) -> str:
    """The whole logical content of a sqlite file (schema, rows, blobs), after an integrity check."""
    conn = sqlite3.connect(str(db_path))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return "\n".join(conn.iterdump())
    finally:
        conn.close()


def count(db_path: Path, table: str = "cases") -> int:
    conn = sqlite3.connect(str(db_path))
    try:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


@pytest.fixture(scope="module")
def valid_case_file(tmp_path_factory) -> Path:
    """A valid exported case JSON, written by Corpus.export_case."""
    folder = tmp_path_factory.mktemp("export")
    with Corpus(folder / "scratch.db") as corpus:
        case_id = corpus.add_case(CaseRecord(generate_case(1), verdict="agree", backends=[]))
        data = corpus.export_case(case_id)
    path = folder / "valid.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def good_db(tmp_path, valid_case_file) -> Path:
    """A real corpus holding one case imported through the CLI, and one case with a finding and its bucket."""
    db = tmp_path / "good.db"
    result = fuzz("import", "--db", db, valid_case_file)
    assert result.exit_code == 0, result.output
    assert "Imported 1 case(s): 1" in result.stdout
    with Corpus(db) as corpus:
        finding = Finding("torch-eager:cpu:float32", "mismatch", "relu", "mismatch | torch-eager:cpu:float32 | relu",
                          max_error=1.0, allowed=1e-5, detail="test finding")
        corpus.add_case(CaseRecord(generate_case(2, ["relu"]), verdict="mismatch", backends=["torch-eager:cpu:float32"],
                                   findings=[finding]))
        corpus.triage(2, "confirmed", "kept across errors")
    assert count(db) == 2
    return db


@pytest.fixture
def unchanged(good_db):
    """Asserts, after the test, that the good corpus is byte-for-byte the same logical content."""
    before = dump(good_db)
    yield good_db
    assert dump(good_db) == before, "a failed command changed the corpus"


# -- corpus files ---------------------------------------------------------------------------

@pytest.mark.parametrize("content", [
    pytest.param(random.Random(0).randbytes(8192), id="random-bytes"),
    pytest.param(b"SQLite format 3\x00" + random.Random(1).randbytes(8176), id="sqlite-header-then-garbage"),
])
@pytest.mark.parametrize("command", [["list"], ["stats"], ["show", "1"], ["triage", "1", "--status", "fixed"]])
def test_corrupt_db_is_refused_untouched(tmp_path, content, command):
    db = tmp_path / "broken.db"
    db.write_bytes(content)
    line = assert_user_error(fuzz(*command, "--db", db), str(db), "not a fuzzer corpus", "--db")
    assert len(line) < 300
    assert db.read_bytes() == content, "the foreign file was modified"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.db"], "sqlite side files were created"


def test_missing_db_is_not_created_by_list(tmp_path):
    db = tmp_path / "nowhere.db"
    assert_user_error(fuzz("list", "--db", db), str(db), "fuzz run")
    assert not db.exists()


def test_directory_as_db(tmp_path):
    assert_user_error(fuzz("stats", "--db", tmp_path), "is a directory", "--db")


# -- unknown names and ids --------------------------------------------------------------------

@pytest.mark.parametrize("command", [
    ["show", "999"], ["replay", "999"], ["export", "999"], ["export", "999", "--format", "json"],
    ["triage", "999", "--status", "fixed"], ["shrink", "999"],
])
def test_unknown_case_id(unchanged, command):
    assert_user_error(fuzz(*command, "--db", unchanged), "No case with id 999", "fuzz list")


def test_export_makes_a_missing_output_folder_as_run_does_but_not_for_an_unknown_case(unchanged, tmp_path):
    assert_user_error(fuzz("export", "999", "--db", unchanged, "--format", "json", "-o", tmp_path / "none" / "c.json"))
    assert not (tmp_path / "none").exists()
    result = fuzz("export", "1", "--db", unchanged, "--format", "json", "-o", tmp_path / "new" / "sub" / "case.json")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "new" / "sub" / "case.json").read_text())["format"] == "fuzzer-case"


def test_unknown_backend(unchanged):
    assert_user_error(fuzz("run", "--db", unchanged, "--backends", "torch-eagr", "--max-cases", "1"),
                      "'torch-eagr'", "fuzz backends")
    assert count(unchanged, "campaigns") == 0


def test_unknown_op(unchanged):
    assert_user_error(fuzz("run", "--db", unchanged, "--ops", "layer_nrom", "--max-cases", "1"),
                      "'layer_nrom'", "fuzz ops")


@pytest.mark.parametrize("args", [
    ["run", "--backends", "torch-eagr", "--max-cases", "1"],
    ["run", "--ops", "layer_nrom", "--max-cases", "1"],
    ["run", "--time", "10x"],
    ["run", "--max-cases", "1", "--plugin", PLUGINS / "register_error.py"],
], ids=["backend", "op", "duration", "plugin"])
def test_bad_run_creates_no_corpus(tmp_path, args):
    db = tmp_path / "new" / "fuzz.db"
    assert fuzz(*args, "--db", db).exit_code == 2
    assert not db.parent.exists(), "bad input left a corpus (folder) behind"


@pytest.mark.parametrize("command", [["triage", "2", "--status", "bogus"], ["list", "--status", "bogus"]])
def test_unknown_triage_status(unchanged, command):
    assert_user_error(fuzz(*command, "--db", unchanged), "'bogus'", "new, confirmed, reported, fixed, wontfix, flaky")


# -- import -----------------------------------------------------------------------------------

def test_import_malformed_json(unchanged, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "fuzzer-case", "version": 1,')
    assert_user_error(fuzz("import", "--db", unchanged, bad), str(bad), "not valid JSON", "fuzz export")
    assert count(unchanged) == 2


class Trap:
    """Unpickling this creates the marker file: proof that a payload was (not) executed."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def raw_pickle(marker: Path) -> bytes:
    return pickle.dumps(Trap(marker))


def npy_with_pickle(marker: Path) -> bytes:
    buffer = io.BytesIO()
    array = np.empty(1, dtype=object)
    array[0] = Trap(marker)
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


@pytest.mark.parametrize("payload", [raw_pickle, npy_with_pickle], ids=["raw-pickle", "object-npy"])
def test_import_refuses_pickled_array(unchanged, valid_case_file, tmp_path, payload):
    marker = tmp_path / "PWNED"
    data = json.loads(valid_case_file.read_text())
    name = sorted(data["arrays"])[0]
    data["arrays"][name] = base64.b64encode(payload(marker)).decode("ascii")
    evil = tmp_path / "evil.json"
    evil.write_text(json.dumps(data))
    assert_user_error(fuzz("import", "--db", unchanged, evil), f"array '{name}'", "refusing")
    assert not marker.exists(), "the pickle payload was executed"
    assert count(unchanged) == 2


def test_import_is_all_or_nothing(unchanged, valid_case_file, tmp_path):
    bad = tmp_path / "second.json"
    bad.write_text("[1, 2, 3]")
    copy = tmp_path / "first.json"
    shutil.copy(valid_case_file, copy)
    assert_user_error(fuzz("import", "--db", unchanged, copy, bad), str(bad))
    assert count(unchanged) == 2, "the valid file before the bad one was imported anyway"


def test_import_into_a_new_db_creates_nothing_on_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("not json at all")
    db = tmp_path / "fresh.db"
    assert_user_error(fuzz("import", "--db", db, bad), str(bad))
    assert not db.exists()


# -- plugins ------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [["run", "--max-cases", "1"], ["backends"]])
def test_plugin_that_fails_to_import(unchanged, command):
    plugin = PLUGINS / "import_error.py"
    extra = ["--db", unchanged] if command[0] == "run" else []
    assert_user_error(fuzz(*command, *extra, "--plugin", plugin),
                      "import_error.py", "failed to import", "ImportError", "cannot be imported (on purpose)")


@pytest.mark.parametrize("command", [["run", "--max-cases", "1"], ["backends"]])
def test_plugin_whose_register_raises(unchanged, command):
    plugin = PLUGINS / "register_error.py"
    extra = ["--db", unchanged] if command[0] == "run" else []
    assert_user_error(fuzz(*command, *extra, "--plugin", plugin),
                      "register_error.py", "ValueError", "register failed on purpose", "fix the plugin")


def test_missing_plugin_file(unchanged, tmp_path):
    missing = tmp_path / "nope.py"
    assert_user_error(fuzz("run", "--db", unchanged, "--max-cases", "1", "--plugin", missing), str(missing), "does not exist")


def test_unknown_plugin_name_lists_canaries():
    assert_user_error(fuzz("backends", "--plugin", "layout-layernrom"), "'layout-layernrom'", "layout-layernorm")


# -- run limits and durations ---------------------------------------------------------------------

def test_run_needs_a_limit(unchanged):
    assert_user_error(fuzz("run", "--db", unchanged), "--time", "--max-cases")
    assert count(unchanged, "campaigns") == 0


def test_run_without_limit_creates_no_corpus(tmp_path):
    db = tmp_path / "new" / "fuzz.db"
    assert fuzz("run", "--db", db).exit_code == 2
    assert not db.exists()


@pytest.mark.parametrize("text", ["10x", "ten minutes", "-5m", "5 m s"])
def test_bad_duration(unchanged, text):
    assert_user_error(fuzz("run", "--db", unchanged, "--time", text), f"'{text}'", "90s, 10m or 2h")


@pytest.mark.parametrize("text", ["0", "0s", "0m"])
def test_a_zero_duration_is_refused(unchanged, text):
    assert_user_error(fuzz("run", "--db", unchanged, "--time", text), f"--time {text}", "no time")
    assert count(unchanged, "campaigns") == 0


@pytest.mark.parametrize("option, typo, meant", [("--ops", "layer_nrom", "layer_norm"), ("--regimes", "smal", "small")])
def test_a_mistyped_op_or_regime_gets_the_closest_name(unchanged, option, typo, meant):
    assert_user_error(fuzz("run", "--db", unchanged, "--max-cases", "1", option, typo), f"'{typo}'",
                      f"did you mean '{meant}'?")


# Each typo is refused (exit 2) before torch or jax is imported: what tens of seconds of a loaded machine
# went to. Checked in a fresh interpreter, which says at exit whether either was ever imported.
NO_FRAMEWORK_AT_EXIT = """
import atexit, sys
atexit.register(lambda: print("frameworks imported:", sorted({"torch", "jax"} & set(sys.modules)), file=sys.stderr))
sys.argv = ["fuzz", *sys.argv[1:]]
from fuzzer.cli import main
main()
"""


@pytest.mark.parametrize("typo", [
    ["--ops", "relux"], ["--time", "5q"], ["--time", "0s"], ["--regimes", "smal"], ["--resume", "99"],
    ["--compile-share", "jax-jt=0.3"], ["--backends", "torch-eagr"], ["--max-nodes", "0"],
], ids=lambda typo: typo[0])
def test_an_option_typo_is_refused_before_torch_or_jax_is_imported(unchanged, typo):
    done = subprocess.run([sys.executable, "-c", NO_FRAMEWORK_AT_EXIT, "run", "--db", str(unchanged), "--max-cases", "1",
                           *typo], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("Error: ") or "Usage:" in done.stderr, done.stderr
    assert done.stderr.rstrip().endswith("frameworks imported: []"), done.stderr


# -- regress ---------------------------------------------------------------------------------------

def test_regress_on_folder_without_json(tmp_path):
    folder = tmp_path / "regression"
    folder.mkdir()
    (folder / "notes.txt").write_text("not a case")
    assert_user_error(fuzz("regress", folder), str(folder), "fuzz export")


def test_regress_on_missing_folder(tmp_path):
    assert_user_error(fuzz("regress", tmp_path / "absent"), "does not exist")


# -- help ------------------------------------------------------------------------------------------

def test_top_level_help_has_examples():
    result = fuzz("--help")
    assert result.exit_code == 0 and "Example" in result.output


def test_version_is_read_from_our_own_distribution():
    # `fuzzer` on the package index is another project: pyproject.toml's name is ours, and --version finds it.
    assert metadata.version(fuzzer.DISTRIBUTION) == fuzzer.__version__
    result = fuzz("--version")
    assert result.exit_code == 0 and result.output.endswith(f", version {fuzzer.__version__}\n")


@pytest.mark.parametrize("name", sorted(main.commands))
def test_every_command_has_help_with_an_example(name):
    result = fuzz(name, "--help")
    assert result.exit_code == 0, result.output
    assert "Example" in result.output, f"`fuzz {name} --help` shows no example"
    assert result.stderr == ""
