"""One cause, one bucket (fuzzer/triaging/buckets.py): the same op and verdict on several dtypes is one
bucket, a derived backend's `inherited` copy of its base's bug is a member of the base's bucket,
triage belongs to the bucket and travels with export / import, merge and regression files, and a
corpus the previous release (schema 5) wrote opens with its buckets grouped.

Corpora are real sqlite files. tests/data/corpus-schema5.db was written by the release before
schema 6: a 60-second `fuzz run --regimes special-values --backends
torch-eager:cpu:float32,torch-eager:cpu:float64,jax-jit:cpu:float32,model` (torch's sdpa nan on
float32 and float64 with six inherited copies, jax's sigmoid nan with jax-jit's inherited copy:
ten buckets), then `fuzz triage 1 --status wontfix` and `fuzz triage 3 --status reported`."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from fuzzer.corpus import SCHEMA_VERSION, Corpus
from fuzzer.drawing.generate import generate_case
from fuzzer.judging.check import Finding
from fuzzer.oracle import signature
from fuzzer.records import CaseRecord
from fuzzer.running.replay import load_regression_case
from fuzzer.triaging.buckets import bucket_signatures, own_bucket
from fuzzer.triaging.known import entry_for_bucket
from fuzzer.verdicts import bucket_verdict
from test_cli_errors import assert_user_error, dump, fuzz
from test_known import campaign

SCHEMA5 = Path(__file__).resolve().parent / "data" / "corpus-schema5.db"
TORCH32, TORCH64, MODULE = "torch-eager:cpu:float32", "torch-eager:cpu:float64", "torch-module:cpu:float32"
SINH = "nan-inf | torch-eager:cpu | sinh"


def sinh(backend: str, verdict: str = "nan-inf") -> Finding:
    return Finding(backend, verdict, "sinh", signature(bucket_verdict(verdict), backend, "sinh"), max_error=float("inf"))


def store(corpus: Corpus, seed: int, findings: list[Finding], campaign_id: int | None = None) -> int:
    backends = list(dict.fromkeys(f.backend for f in findings))
    return corpus.add_case(CaseRecord(generate_case(seed, ["sinh"]), campaign_id=campaign_id, verdict=findings[0].verdict,
                                      backends=backends, findings=findings))


@pytest.fixture
def sinh_corpus(tmp_path) -> tuple[Path, list[int]]:
    """Three generated cases of one torch sinh bug: float32 with torch-module's inherited copy, float32
    again, and float64; (db, case ids)."""
    db = tmp_path / "sinh.db"
    with Corpus(db) as corpus:
        run = corpus.start_campaign({}, 0, {})
        ids = [store(corpus, 1, [sinh(TORCH32), sinh(MODULE, "inherited")], run), store(corpus, 2, [sinh(TORCH32)], run),
               store(corpus, 3, [sinh(TORCH64)], run)]
    return db, ids


def members(bucket: dict) -> dict[str, int]:
    return {m["signature"]: m["count"] for m in bucket["members"]}


# -- the bucket of a finding ------------------------------------------------------------------------

def test_a_bucket_drops_the_dtype_and_release_and_keeps_verdict_kind_device_op_and_error():
    def bucket(backend, verdict="mismatch", culprit="sinh", error=""):
        return own_bucket({"signature": signature(bucket_verdict(verdict), backend, culprit, error)})

    assert bucket("torch-eager:cpu:float16") == bucket("torch-eager:cpu:float32") == "mismatch | torch-eager:cpu | sinh"
    assert bucket("jax-jit:cpu:float32@jax-0.4.30") == bucket("jax-jit:cpu:float64") == "mismatch | jax-jit:cpu | sinh"
    assert bucket(TORCH32, "all-zeros") == bucket(TORCH32, "mismatch")
    assert len({bucket(TORCH32), bucket("torch-eager:cuda:float32"), bucket("torch-compile:cpu:float32"),
                bucket(TORCH32, "nan-inf"), bucket(TORCH32, culprit="cosh"), bucket("plugin-x")}) == 6
    crash = [bucket(TORCH32, "crash", "relu", f"RuntimeError: no kernel for shape {shape}") for shape in ("(2, 3)", "(2, 4, 5)")]
    assert crash[0] == crash[1] == "crash | torch-eager:cpu | relu | RuntimeError: no kernel for shape (...)"


def test_an_inherited_finding_is_in_its_bases_bucket_following_derivations():
    grad = {"backend": "jax-grad:cpu:float32", "verdict": "inherited", "signature": "inherited | jax-grad:cpu:float32 | sinh"}
    jit = {"backend": "jax-jit:cpu:float32", "verdict": "inherited", "signature": "inherited | jax-jit:cpu:float32 | sinh"}
    eager = {"backend": "jax-eager:cpu:float32", "verdict": "nan-inf", "signature": "nan-inf | jax-eager:cpu:float32 | sinh"}
    assert bucket_signatures([grad, jit, eager]) == ["nan-inf | jax-eager:cpu | sinh"] * 3
    # Without its base's finding in the case, a bucket of its own.
    assert bucket_signatures([grad]) == ["inherited | jax-grad:cpu | sinh"]


# -- members, listing and triage ------------------------------------------------------------------------

def test_dtypes_and_inherited_copies_are_members_of_one_bucket_and_triage_applies_to_all(sinh_corpus):
    db, (first, second, third) = sinh_corpus
    listed = json.loads(fuzz("list", "--db", db, "--json").stdout)
    assert [(b["signature"], b["count"], b["campaigns"]) for b in listed] == [(SINH, 3, {"1": 3})]
    assert members(listed[0]) == {sinh(TORCH32).signature: 2, sinh(TORCH64).signature: 1, sinh(MODULE, "inherited").signature: 1}
    assert "members: torch-eager:cpu:float32 2, torch-eager:cpu:float64 1, torch-module:cpu:float32 (inherited) 1" in \
        fuzz("list", "--db", db).stdout
    for flag, value in (("--backend", "torch-module"), ("--backend", TORCH64), ("--verdict", "inherited")):
        assert [b["signature"] for b in json.loads(fuzz("list", "--db", db, flag, value, "--json").stdout)] == [SINH]
    shown = fuzz("show", third, "--db", db)
    assert f"bucket B1 '{SINH}' of 3 cases" in shown.stdout and "(inherited) 1" in shown.stdout

    triaged = fuzz("triage", third, "--db", db, "--status", "wontfix", "--note", "overflow, as documented")
    assert triaged.exit_code == 0 and triaged.stdout.startswith(f"Bucket B1 '{SINH}' is now wontfix (3 members: ")
    with Corpus(db) as corpus:
        for finding in (sinh(TORCH32), sinh(TORCH64), sinh(MODULE, "inherited")):
            assert corpus.bucket(finding.signature)["status"] == "wontfix"
        assert {row["status"] for row in corpus.list_cases()} == {"wontfix"}
        assert corpus.triage(first, "confirmed")["signature"] == SINH  # the inherited copy's case: the same bucket


def test_a_known_bug_entry_made_from_a_bucket_matches_each_of_its_dtypes(sinh_corpus):
    db, _ = sinh_corpus
    with Corpus(db) as corpus:
        entry = entry_for_bucket(corpus.bucket(SINH), "torch-sinh", "https://example.org/1", "open", None, None)
    assert entry["match"] == {"verdicts": ["nan-inf"], "ops": ["sinh"], "paths": ["torch/eager"], "devices": ["cpu"],
                              "dtypes": ["float32", "float64"]}


# -- triage travels ---------------------------------------------------------------------------------

def test_triage_travels_with_export_import_merge_and_regression_files(sinh_corpus, tmp_path):
    db, (first, _, third) = sinh_corpus
    assert fuzz("triage", first, "--db", db, "--status", "reported", "--note", "pytorch/pytorch#1").exit_code == 0
    exported = tmp_path / "sinh.json"  # with --expect: a regression file
    assert fuzz("export", third, "--db", db, "--format", "json", "--expect", "disagree", "-o", exported).exit_code == 0
    carried = json.loads(exported.read_text())["triage"]
    assert carried == [{"bucket": SINH, "findings": [sinh(TORCH64).signature], "status": "reported",
                        "note": "pytorch/pytorch#1", "known_bug": None}]

    fresh = tmp_path / "fresh.db"
    assert fuzz("import", "--db", fresh, exported).exit_code == 0
    with Corpus(fresh) as corpus:
        assert (corpus.bucket(SINH)["status"], corpus.bucket(SINH)["note"]) == ("reported", "pytorch/pytorch#1")
    assert load_regression_case(exported).expect == "disagree", "a regression file: `fuzz regress` reads it as it is"

    merged = tmp_path / "merged.db"
    for _ in range(2):  # merging again adds nothing
        assert fuzz("merge", "--db", merged, db).exit_code == 0
    with Corpus(merged) as corpus, Corpus(db) as original:
        assert [(b["status"], b["count"], members(b)) for b in corpus.buckets()] == \
            [(b["status"], b["count"], members(b)) for b in original.buckets()]

    settled = tmp_path / "settled.db"  # a bucket triaged here keeps its own triage
    assert fuzz("import", "--db", settled, exported).exit_code == 0
    with Corpus(settled) as corpus:
        corpus.triage(1, "wontfix", "ours")
    assert fuzz("import", "--db", settled, exported).exit_code == 0
    with Corpus(settled) as corpus:
        assert (corpus.bucket(SINH)["status"], corpus.bucket(SINH)["note"]) == ("wontfix", "ours")


def test_an_import_refuses_malformed_triage_in_one_sentence(sinh_corpus, tmp_path):
    db, (first, _, _) = sinh_corpus
    data = json.loads(fuzz("export", first, "--db", db, "--format", "json").stdout)
    data["triage"] = [{"bucket": SINH, "findings": [], "status": "solved"}]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    assert_user_error(fuzz("import", "--db", tmp_path / "fresh.db", path), "'triage' must be a list", "wontfix")


# -- a corpus of the previous release ------------------------------------------------------------------

def test_a_schema_5_corpus_opens_with_its_buckets_grouped_keeping_cases_triage_and_counts(tmp_path):
    db = tmp_path / "old.db"
    shutil.copy(SCHEMA5, db)
    conn = sqlite3.connect(db)
    cases_before = conn.execute("SELECT id, signature, findings FROM cases ORDER BY id").fetchall()
    conn.close()
    with Corpus(db) as corpus:
        assert corpus.schema_version() == SCHEMA_VERSION == 9
        buckets = {b["signature"]: b for b in corpus.buckets()}
        sdpa, sigmoid = buckets.pop("nan-inf | torch-eager:cpu | scaled_dot_product_attention"), buckets.pop(
            "nan-inf | jax-eager:cpu | sigmoid")
        assert buckets == {}, "ten version-5 buckets, two causes"
        # The person's `reported` wins over the registry's `known` (an open status wins), both said in the note.
        assert (sdpa["status"], sdpa["known_bug"], sdpa["count"], sdpa["campaigns"]) == ("reported", "torch-sdpa-causal-hidden-nan",
                                                                                          1, {"1": 1})
        assert sdpa["note"].startswith("pytorch/pytorch#0000; merged by the upgrade to corpus schema 6 from ")
        assert [(m["backend"], m["verdict"], m["count"]) for m in sdpa["members"]][:2] == [(TORCH32, "nan-inf", 1),
                                                                                          (TORCH64, "nan-inf", 1)]
        assert {m["verdict"] for m in sdpa["members"][2:]} == {"inherited"} and len(sdpa["members"]) == 8
        assert (sdpa["representative"], sdpa["first_case"], sdpa["latest_case"]) == (4, 3, 3)
        assert (sigmoid["status"], sigmoid["count"], sigmoid["representative"]) == ("wontfix", 1, 2)
        assert [(m["backend"], m["verdict"]) for m in sigmoid["members"]] == [("jax-eager:cpu:float32", "nan-inf"),
                                                                              ("jax-jit:cpu:float32", "inherited")]
        assert corpus.list_buckets(op="scaled_dot_product_attention")[1] == 1
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT id, signature, findings FROM cases ORDER BY id").fetchall() == cases_before
    conn.close()
    before = dump(db)
    assert json.loads(fuzz("rebucket", "--db", db, "--json").stdout)["changes"] == [], "already grouped"
    assert dump(db) == before


# -- a campaign -------------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_campaign_gives_one_line_for_a_bug_and_its_inherited_copy_and_wontfix_settles_its_other_dtypes(tmp_path):
    """torch.sign(nan) = 0, with no known-bug registry: torch eager's float32 finding and torch-module's
    inherited copy are one new bucket, one line. Triaged wontfix, the next campaign, which also runs
    float64, finds the bug there too: a member of the wontfix bucket, no line, exit 0."""
    db, empty = tmp_path / "sign.db", tmp_path / "no-known-bugs.json"
    empty.write_text("[]")
    run = ["--ops", "sign", "--regimes", "special-values", "--known-bugs", empty]
    code, summary, new = campaign(db, *run, "--backends", f"{TORCH32},{MODULE}", graphs=2)
    assert (code, new, summary["new_buckets"]) == (1, ["nan-inf | torch-eager:cpu:float32 | sign"], 1)
    listed = json.loads(fuzz("list", "--db", db, "--all", "--json").stdout)
    assert [(b["signature"], [m["backend"] for m in b["members"]]) for b in listed] == [
        ("nan-inf | torch-eager:cpu | sign", [TORCH32, MODULE])]
    assert fuzz("triage", listed[0]["representative"], "--db", db, "--status", "wontfix").exit_code == 0
    code, summary, new = campaign(db, *run, "--backends", f"{TORCH32},{TORCH64},{MODULE}", graphs=2)
    assert (code, new, summary["unknown_finding_cases"]) == (0, [], 0) and summary["triaged_findings"] >= 2
    listed = json.loads(fuzz("list", "--db", db, "--all", "--json").stdout)
    assert [(b["status"], [m["backend"] for m in b["members"]]) for b in listed] == [("wontfix", [TORCH32, TORCH64, MODULE])]


# -- bucket ids ------------------------------------------------------------------------------------

SCHEMA7 = Path(__file__).resolve().parent / "data" / "corpus-schema7.db"
SDPA_EAGER, SDPA_LAYOUT = (f"nan-inf | {path}:cpu | scaled_dot_product_attention" for path in ("torch-eager", "torch-layout"))


def test_a_landed_corpus_gets_bucket_ids_and_a_case_in_two_buckets_is_refused_naming_both(tmp_path):
    """tests/data/corpus-schema7.db, written by the release before schema 8 (its make script is in the
    commit message): case 1 is in torch-eager's and torch-layout's sdpa buckets, case 2 in torch-eager's
    only; `fuzz triage 1 --status reported` there reached torch-eager's bucket, and the layout one no ID could."""
    db = tmp_path / "old.db"
    shutil.copy(SCHEMA7, db)
    listed = json.loads(fuzz("list", "--db", db, "--json").stdout)
    assert {b["signature"]: (b["id"], b["status"]) for b in listed} == {SDPA_EAGER: (1, "reported"), SDPA_LAYOUT: (2, "new")}
    assert_user_error(fuzz("triage", "1", "--db", db, "--status", "confirmed"),
                      "Case 1 is in 2 buckets", f"B1 ('{SDPA_EAGER}')", f"B2 ('{SDPA_LAYOUT}')")
    assert fuzz("triage", "B2", "--db", db, "--status", "confirmed").stdout.startswith(f"Bucket B2 '{SDPA_LAYOUT}' is now confirmed")
    assert fuzz("triage", "2", "--db", db, "--status", "wontfix").exit_code == 0  # case 2 is in one bucket: B1
    with Corpus(db) as corpus:
        assert corpus.schema_version() == SCHEMA_VERSION == 9
        assert [(b["id"], b["status"]) for b in sorted(corpus.buckets(), key=lambda b: b["id"])] == [(1, "wontfix"), (2, "confirmed")]
    shown = fuzz("show", "1", "--db", db).stdout
    assert f"bucket B1 '{SDPA_EAGER}'" in shown and f"bucket B2 '{SDPA_LAYOUT}'" in shown
    assert json.loads(fuzz("show", "B2", "--db", db, "--json").stdout)["triage"]["bucket"] == SDPA_LAYOUT
    assert_user_error(fuzz("triage", "B9", "--db", db, "--status", "confirmed"), "No bucket B9")
    assert_user_error(fuzz("show", "C1", "--db", db), "'C1' is neither a case id (7) nor a bucket id (B7)")


def test_regrouping_keeps_bucket_ids_and_never_hands_out_a_freed_one(tmp_path):
    def cosh(backend):
        return Finding(backend, "nan-inf", "cosh", signature("nan-inf", backend, "cosh"), max_error=float("inf"))

    with Corpus(tmp_path / "ids.db") as corpus:
        store(corpus, 1, [sinh(TORCH32)])
        store(corpus, 2, [cosh(TORCH32)])
        store(corpus, 3, [sinh(TORCH64)])
        corpus.resign_findings(lambda finding: finding["signature"].replace("cosh", "sinh"))  # cosh's bucket merges into B1
        assert {b["signature"]: b["id"] for b in corpus.buckets()} == {SINH: 1}
        corpus.resign_findings(lambda finding: finding["signature"].replace("sinh", "tanh"))  # a rename keeps the id
        assert {b["signature"]: b["id"] for b in corpus.buckets()} == {SINH.replace("sinh", "tanh"): 1}
        store(corpus, 4, [cosh(TORCH32)])
        assert corpus.bucket(own_bucket({"signature": cosh(TORCH32).signature}))["id"] not in (1, 2)  # B2 named cosh once


def test_every_command_that_takes_a_case_takes_a_bucket_id_too(tmp_path):
    """replay, shrink and bisect read `B2` as the bucket's smallest case, as show, triage and export do
    (a case id names one case whatever its buckets: replaying it is not ambiguous)."""
    db = tmp_path / "old.db"
    shutil.copy(SCHEMA7, db)
    for command in (["replay", "B9"], ["shrink", "B9"], ["bisect", "B9", "--package", "torch", "--from", "1", "--to", "2"]):
        assert_user_error(fuzz(*command, "--db", db), "No bucket B9")
    replayed = json.loads(fuzz("replay", "B2", "--db", db, "--json").stdout)
    assert {v["backend"] for v in replayed["verdicts"]} == set(Corpus(db).get_case(1).backends)
