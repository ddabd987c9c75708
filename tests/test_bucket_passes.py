"""The compiler pass in a bucket's identity, and a campaign that names the pass of each new compiler
bucket (fuzzer/triaging/buckets.py "The pass", Corpus.record_localization, fuzzer/triaging/new_bucket_passes.py).

The corpus-level tests store real case files and localizations as `fuzz localize` returns them; the
campaign tests run torch.compile with a planted fault in one inductor post-grad pass
(tests/plugins/faulty_post_grad_pass.py), and the one that runs torch's CompilerBisector is `long`."""

from __future__ import annotations

import base64
import io
import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fuzzer.cli import main
from fuzzer.corpus import Corpus
from fuzzer.triaging.pass_bisect import PassVerdict

ROOT = Path(__file__).resolve().parent.parent
CONV_ABORT = ROOT / "reports" / "bugs" / "xla-cpu-conv-lhs-dilation-abort" / "case.json"
FAULTY_PASS = str(ROOT / "tests" / "plugins" / "faulty_post_grad_pass.py")
VERSIONS = {"jax": "0.10.2", "torch": None}


def _another_input(case: dict, shift: float) -> dict:
    """The case with its input shifted: another case of the same finding (its content differs)."""
    array = np.load(io.BytesIO(base64.b64decode(case["arrays"]["x0"])), allow_pickle=False)
    buffer = io.BytesIO()
    np.save(buffer, array + shift, allow_pickle=False)
    return {**case, "arrays": {**case["arrays"], "x0": base64.b64encode(buffer.getvalue()).decode()}}


def two_cases_of_one_bucket(tmp_path) -> str:
    """A corpus whose bucket B1 holds two imported cases (1 and 2) of XLA's conv abort."""
    case = json.loads(CONV_ABORT.read_text())
    files = []
    for index, shift in enumerate((0.0, 1.0)):
        path = tmp_path / f"case{index}.json"
        path.write_text(json.dumps(_another_input(case, shift)))
        files.append(str(path))
    db = str(tmp_path / "fuzz.db")
    imported = CliRunner().invoke(main, ["import", "--db", db, *files])
    assert imported.exit_code == 0, imported.output
    with Corpus(db) as corpus:
        assert [b["id"] for b in corpus.buckets()] == [1] and corpus.bucket_by_id(1)["count"] == 2
    return db


def localized(passes: list[str], case_id: int) -> dict:
    summary = f"Disabling the HLO pass '{passes[0]}' alone makes it agree." if passes else "nothing named"
    return PassVerdict("jax-grad:cpu:float32", "xla", passes, 40, 8, summary).stored(VERSIONS, case_id)


def bucket_table(db: str) -> list[tuple]:
    with Corpus(db) as corpus:
        return sorted((b["id"], b["signature"], b["count"], b["status"], b["representative"]) for b in corpus.buckets())


def test_another_case_that_names_another_pass_gets_a_bucket_of_its_own(tmp_path):
    db = two_cases_of_one_bucket(tmp_path)
    with Corpus(db) as corpus:
        base = corpus.bucket_by_id(1)["signature"]
        corpus.triage("B1", "known", "the conv abort")
        assert corpus.record_localization(base, localized(["algsimp"], 1)) == base, "a first pass is kept on the bucket"
        assert corpus.record_localization(base, localized([], 2)) == base, "naming nothing moves nothing"
        assert json.loads(corpus.bucket(base)["localization"])["passes"] == ["algsimp"], "nor hides the pass found"
        split = corpus.record_localization(base, localized(["fusion"], 2))
    assert split == base.replace("| conv2d |", "| conv2d [pass fusion] |")
    table = bucket_table(db)
    assert [row[1:] for row in table] == [(base, 1, "known", 1), (split, 1, "new", 2)] and table[0][0] == 1, table
    with Corpus(db) as corpus:
        note = corpus.bucket(split)["note"]
        case = corpus.get_case(2)
    assert "split from B1" in note and "pass fusion, not algsimp" in note
    assert [f.get("compiler_pass") for f in case.findings] == ["fusion"]

    listed = CliRunner().invoke(main, ["list", "--db", db, "--json"])
    assert [row["pass"] for row in sorted(json.loads(listed.output), key=lambda row: row["id"])] == ["algsimp", "fusion"]
    text = CliRunner().invoke(main, ["list", "--db", db]).output
    assert "conv2d | worker process killed by signal SIGABRT [pass algsimp]" in text, text
    assert text.count("[pass fusion]") == 1, "a split bucket's signature says its pass once"

    # The identity survives what regroups buckets: a rebucket changes nothing, a merge keeps both.
    rebucketed = CliRunner().invoke(main, ["rebucket", "--db", db, "--json"])
    assert rebucketed.exit_code == 0 and json.loads(rebucketed.output)["changes"] == [], rebucketed.output
    assert bucket_table(db) == table
    merged = str(tmp_path / "merged.db")
    assert CliRunner().invoke(main, ["merge", "--db", merged, db]).exit_code == 0
    assert [row[1:3] for row in bucket_table(merged)] == [row[1:3] for row in table]


def test_a_corpus_from_before_passes_were_identity_regroups_as_it_was(tmp_path):
    """A localization stored before it named its case (schema 9) is of the representative: a new one
    replaces it, never splits; findings without a pass bucket as they always did."""
    db = two_cases_of_one_bucket(tmp_path)
    old = PassVerdict("jax-grad:cpu:float32", "xla", ["algsimp"], 40, 8, "old").to_dict()
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE buckets SET localization = ?",
                           [json.dumps({**old, "versions": VERSIONS, "checked_at": "2026-12-02T10:00:00+00:00"})])
    before = bucket_table(db)
    rebucketed = CliRunner().invoke(main, ["rebucket", "--db", db, "--json"])
    assert json.loads(rebucketed.output)["changes"] == [] and bucket_table(db) == before
    with Corpus(db) as corpus:
        base = corpus.bucket_by_id(1)["signature"]
        assert corpus.record_localization(base, localized(["fusion"], 1)) == base
        assert json.loads(corpus.bucket(base)["localization"])["passes"] == ["fusion"]
    assert bucket_table(db) == before


def test_a_finding_with_a_damaged_pass_is_one_sentence(tmp_path):
    db = two_cases_of_one_bucket(tmp_path)
    with sqlite3.connect(db) as connection:
        findings = json.loads(connection.execute("SELECT findings FROM cases WHERE id = 1").fetchone()[0])
        findings[0]["compiler_pass"] = 7
        connection.execute("UPDATE cases SET findings = ? WHERE id = 1", [json.dumps(findings)])
    result = CliRunner().invoke(main, ["rebucket", "--db", db])
    assert result.exit_code == 2 and "Case 1" in result.output and "damaged" in result.output, result.output


def run_planted_pass_campaign(tmp_path, localize_time: str):
    db = str(tmp_path / "fuzz.db")
    result = CliRunner().invoke(main, [
        "run", "--db", db, "--plugin", FAULTY_PASS, "--backends", "torch-eager,planted-post-grad-mul", "--ops", "mul",
        "--max-cases", "3", "--workers", "1", "--seed", "3", "--localize-time", localize_time, "--json"])
    assert result.exit_code == 1, result.output  # a new bucket
    summary = json.loads(result.stdout)
    return db, summary


@pytest.mark.long  # CI's 15 minutes: the localizing campaign's budget
def test_a_campaign_without_time_to_localize_names_the_buckets_it_left(tmp_path):
    db, summary = run_planted_pass_campaign(tmp_path, "10s")
    with Corpus(db) as corpus:
        planted = [b["id"] for b in corpus.buckets() if b["signature"].startswith("mismatch | planted-post-grad-mul")]
    assert summary["passes"]["left"] == planted and summary["passes"]["localized"] == [], summary["passes"]


@pytest.mark.long
def test_a_campaign_names_the_inductor_pass_of_its_new_bucket(tmp_path):
    db, summary = run_planted_pass_campaign(tmp_path, "5m")
    named = {item["bucket"]: item["passes"] for item in summary["passes"]["localized"]}
    assert ["inductor/post_grad_passes: post_grad_custom_post_pass"] in named.values(), summary["passes"]
    assert summary["passes"]["median_seconds"] > 0
    listed = json.loads(CliRunner().invoke(main, ["list", "--db", db, "--json"]).output)
    assert any(row["pass"] == "inductor/post_grad_passes: post_grad_custom_post_pass" for row in listed), listed


@pytest.mark.parametrize("schema", [5, 6, 7])
def test_old_corpora_regroup_as_before_with_no_pass_in_any_bucket(tmp_path, schema):
    """tests/data's corpora from earlier releases: upgraded and regrouped, no bucket takes a pass, and a
    second regrouping changes nothing (schema 6's constant bucket merging into mismatch is older rules')."""
    db = tmp_path / "old.db"
    shutil.copy(ROOT / "tests" / "data" / f"corpus-schema{schema}.db", db)
    runner = CliRunner()
    first = runner.invoke(main, ["rebucket", "--db", str(db), "--json"])
    assert first.exit_code == 0, first.output
    assert all("[pass " not in change["signature"] for change in json.loads(first.output)["changes"])
    table = bucket_table(str(db))
    assert table and all("[pass " not in row[1] for row in table)
    again = runner.invoke(main, ["rebucket", "--db", str(db), "--json"])
    assert json.loads(again.output)["changes"] == [] and bucket_table(str(db)) == table


def test_localizing_a_case_again_keeps_it_in_the_bucket_it_was_split_into(tmp_path):
    db = two_cases_of_one_bucket(tmp_path)
    with Corpus(db) as corpus:
        base = corpus.bucket_by_id(1)["signature"]
        corpus.record_localization(base, localized(["algsimp"], 1))
        split = corpus.record_localization(base, localized(["fusion"], 2))
        [own] = corpus.case_buckets(2)
        assert own["signature"] == split
        assert corpus.record_localization(split, localized(["fusion"], 2)) == split
    assert [row[1] for row in bucket_table(db)] == [base, split]


def test_a_bucket_whose_smallest_case_is_on_no_compiler_is_said_so_and_the_rest_go_on(tmp_path):
    from fuzzer.triaging.new_bucket_passes import localize_new_buckets

    db = tmp_path / "old.db"
    shutil.copy(ROOT / "tests" / "data" / "corpus-schema7.db", db)
    with Corpus(str(db)) as corpus:
        signatures = [b["signature"] for b in sorted(corpus.buckets(), key=lambda b: b["id"])]
        said = []
        found = localize_new_buckets(corpus, signatures + ["no such bucket"], [], 60.0, 600.0, on_result=said.append)
    assert [item["bucket"] for item in found.localized] == [1, 2] and said == found.localized
    assert all(item["passes"] == [] and "covers the torch.compile" in item["summary"] for item in found.localized)
    assert found.left == [] and "Pass of each new compiler bucket" in found.text("")
