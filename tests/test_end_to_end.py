"""The whole loop through the real `fuzz` command: a short campaign finds an injected bug,
shrinks it, stores it; then list, show, replay, triage, export, import and regress it."""

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import fuzz as campaign

FUZZ = str(Path(sys.executable).with_name("fuzz"))
CANARY_ARGS = ["--plugin", "layout-layernorm", "--backends", "torch-eager,canary-layout-layernorm"]


def fuzz(*args, check_exit=None, cwd=None):
    result = subprocess.run([FUZZ, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=600)
    if check_exit is not None:
        assert result.returncode == check_exit, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def campaign_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("e2e") / "fuzz.db"
    # The canary's layer_norm alone: derived ops would add their frameworks' known bugs' buckets to the corpus.
    result = fuzz("run", "--db", db, "--max-cases", 40, "--workers", 2, "--shrink-time", 20, "--fail-on-finding",
                  "--derived-share", 0, "--json", *CANARY_ARGS, check_exit=1)
    summary = json.loads(result.stdout)
    assert summary["status"] == "finished" and summary["finding_cases"] >= 1 and summary["graphs"] == 40
    return db


@pytest.fixture(scope="module")
def shrunk_id(campaign_db):
    rows = json.loads(fuzz("list", "--cases", "--db", campaign_db, "--verdict", "mismatch", "--json", check_exit=0).stdout)
    shrunk = [row for row in rows if row["shrunk_from"]]
    assert shrunk, "every new finding is stored with a shrunk reproducer"
    assert all(row["signature"] == "mismatch | canary-layout-layernorm | layer_norm" for row in rows)
    return min(shrunk, key=lambda row: row["node_count"])["id"]


def test_the_shrunk_finding_is_small_and_shown_with_versions(campaign_db, shrunk_id):
    text = fuzz("show", "--db", campaign_db, shrunk_id, check_exit=0).stdout
    assert "layer_norm" in text and "Versions: torch 2." in text and "culprit layer_norm" in text
    shown = json.loads(fuzz("show", "--db", campaign_db, shrunk_id, "--json", check_exit=0).stdout)
    assert len(shown["graph"]["nodes"]) <= 3
    assert shown["versions"]["jax"] and shown["versions"]["numpy"]


def test_replay_reproduces_with_exit_1_and_agrees_without_the_canary(campaign_db, shrunk_id):
    result = fuzz("replay", "--db", campaign_db, shrunk_id, check_exit=1)
    assert "mismatch" in result.stdout
    fuzz("replay", "--db", campaign_db, shrunk_id, "--backends", "torch-eager,jax-jit", check_exit=0)


def test_triage_marks_the_whole_bucket(campaign_db, shrunk_id):
    fuzz("triage", "--db", campaign_db, shrunk_id, "--status", "confirmed", "--note", "seen by hand", check_exit=0)
    rows = json.loads(fuzz("list", "--cases", "--db", campaign_db, "--status", "confirmed", "--json", check_exit=0).stdout)
    assert shrunk_id in [row["id"] for row in rows]
    stats = json.loads(fuzz("stats", "--db", campaign_db, "--json", check_exit=0).stdout)
    assert stats["buckets_by_status"] == {"confirmed": 1}


def test_exported_script_runs_without_this_package(campaign_db, shrunk_id, tmp_path):
    script = tmp_path / "repro.py"
    fuzz("export", "--db", campaign_db, shrunk_id, "--format", "script", "-o", script, check_exit=0)
    text = script.read_text()
    assert "fuzzer" not in text.split('"""')[-1], "the script body must not import or mention this package"
    assert len(text.splitlines()) < 100, "a reproducer is a short bug report (graph, run, non-finite-aware check)"
    # Block the package so an accidental import fails loudly.
    runner = f"import sys; sys.modules['fuzzer'] = None; sys.argv = ['repro.py']; exec(open({str(script)!r}).read())"
    result = subprocess.run([sys.executable, "-c", runner], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "max abs error" in result.stdout and "torch 2." in result.stdout


def test_exported_pytest_file_fails_while_the_bug_is_present(campaign_db, shrunk_id, tmp_path):
    test_file = tmp_path / "test_repro.py"
    fuzz("export", "--db", campaign_db, shrunk_id, "--format", "pytest", "-o", test_file, check_exit=0)
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
                            capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode == 1 and "1 failed" in result.stdout


def test_json_export_imports_into_another_db_and_regresses(campaign_db, shrunk_id, tmp_path):
    folder = tmp_path / "regression"
    folder.mkdir()
    case_file = folder / "layernorm.json"
    fuzz("export", "--db", campaign_db, shrunk_id, "--format", "json", "--expect", "disagree", "-o", case_file, check_exit=0)
    other = tmp_path / "other.db"
    imported = json.loads(fuzz("import", "--db", other, case_file, "--json", check_exit=0).stdout)["imported"]
    original = json.loads(fuzz("show", "--db", campaign_db, shrunk_id, "--json").stdout)
    copy = json.loads(fuzz("show", "--db", other, imported[0], "--json").stdout)
    assert copy["graph"] == original["graph"] and copy["signature"] == original["signature"]

    fuzz("regress", folder, check_exit=0)  # the known open bug still disagrees: no surprise
    data = json.loads(case_file.read_text())
    data["expect"] = "agree"  # pretend it was fixed: now it is a surprise
    case_file.write_text(json.dumps(data))
    result = fuzz("regress", folder, "--json", check_exit=1)
    assert json.loads(result.stdout)[0]["surprise"] is True


def test_two_campaigns_on_one_db_at_once_keep_it_intact(tmp_path):
    db = tmp_path / "shared.db"
    args = ["run", "--db", db, "--max-cases", 15, "--workers", 1, "--shrink-time", 5, "--json", *CANARY_ARGS]
    processes = [subprocess.Popen([FUZZ, *map(str, args), "--seed", seed], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for seed in ("1", "2")]
    summaries = [json.loads(p.communicate(timeout=600)[0]) for p in processes]
    connection = sqlite3.connect(db)
    assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # Both campaigns' counts arrived; the bounded corpus keeps a few cases a bucket in full and counts the rest.
    found = sum(s["finding_cases"] for s in summaries)
    assert connection.execute("SELECT sum(findings) FROM campaigns").fetchone()[0] == found > 0
    stored = connection.execute("SELECT count(*) FROM cases WHERE shrunk_from IS NULL").fetchone()[0]
    assert 0 < stored <= found
    assert connection.execute("SELECT count(*) FROM campaigns WHERE status = 'finished'").fetchone()[0] == 2


def test_backends_and_ops_are_listed(tmp_path):
    rows = json.loads(fuzz("backends", "--json", check_exit=0).stdout)
    available = {row["name"] for row in rows if row["available"]}
    assert {"torch-eager:cpu:float32", "jax-jit:cpu:float64", "numpy-ref:cpu:float64"} <= available
    assert any(row["name"] == "torch-eager:cuda:float32" and row["why_not"] for row in rows if not row["available"]) or \
        "torch-eager:cuda:float32" in available
    ops = {row["name"] for row in json.loads(fuzz("ops", "--json", check_exit=0).stdout)}
    assert {"conv2d", "gru", "lstm", "layer_norm", "batch_norm", "dropout", "matmul"} <= ops


def test_each_campaign_draws_from_a_fresh_seed_it_prints_and_stores(tmp_path, monkeypatch):
    monkeypatch.delenv("FUZZ_SEED")  # conftest.py's fixed seed
    db = tmp_path / "fuzz.db"
    runs = [campaign("run", "--db", db, "--max-cases", 1, "--workers", 1, "--backends", "torch-eager", "--shrink-time", 0)
            for _ in range(2)]  # in this process (conftest's): the seed is what the test is about, not the command
    assert all(run.returncode in (0, 1) for run in runs), runs  # a random graph may find something: 1 is fine here
    headers = [run.stderr for run in runs]
    stored = [row["seed"] for row in json.loads(fuzz("campaigns", "--db", db, "--json", check_exit=0).stdout)]
    assert len(set(stored)) == 2, "two default campaigns drew the same graphs"
    for header, seed in zip(headers, stored):
        assert f"seed {seed} (--seed {seed} repeats it)" in header
