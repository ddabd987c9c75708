"""Triage, one bug one bucket: `fuzz list` by bucket, `fuzz show`'s evidence, `fuzz rebucket` of a
corpus an older release made, plugin hints when a backend is missing, and `fuzz regress` checking
the recorded bucket. Corpora are real: a tiny campaign with a planted-fault plugin, or cases stored
through the corpus library with the signatures an older release wrote."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest

from fuzzer.backends import default_backends
from fuzzer.corpus import Corpus
from fuzzer.drawing.generate import generate_case
from fuzzer.judging.check import Finding
from fuzzer.oracle import BackendVerdict
from fuzzer.records import CaseRecord
from fuzzer.triaging.bug_location import locate
from test_cli_errors import assert_user_error, dump, fuzz

FUZZ = str(Path(sys.executable).with_name("fuzz"))
PLUGIN = str(Path(__file__).resolve().parent / "plugins" / "raise_relu.py")
REGRESSION = Path(__file__).resolve().parents[1] / "corpus" / "regression"
CRASH = "crash | plugin-raise-relu | relu | fuzzer_plugin_raise_relu.KernelBug: plugin relu kernel exploded"


def fuzz_process(*args) -> subprocess.CompletedProcess:
    """`fuzz` in a fresh process: a plugin loaded by an earlier in-process command must not register its backend here."""
    return subprocess.run([FUZZ, *map(str, args)], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def plugin_campaign(tmp_path_factory):
    """A real 3-graph campaign whose plugin relu raises: crash findings, one shrunk; (db, stderr and stdout of `fuzz run`)."""
    db = tmp_path_factory.mktemp("triage") / "plugin.db"
    run = fuzz_process("run", "--db", db, "--plugin", PLUGIN, "--backends", "torch-eager,plugin-raise-relu",
                       "--ops", "relu,add,tanh", "--max-cases", "3", "--workers", "1", "--shrink-time", "5")
    assert run.returncode == 1, run.stdout + run.stderr
    return db, run.stderr, run.stdout


@pytest.fixture(scope="module")
def shrunk_case(plugin_campaign) -> int:
    rows = json.loads(fuzz("list", "--db", plugin_campaign[0], "--cases", "--json").stdout)
    return min(row["id"] for row in rows if row["shrunk_from"])


# -- fuzz run and fuzz list ---------------------------------------------------------------------

def test_the_summary_counts_the_findings_as_campaigns_does_and_the_stored_cases_as_stats_does(plugin_campaign):
    db, _, summary = plugin_campaign
    found, stored, shrunk = map(int, re.search(r"(\d+) cases with findings \(stored: (\d+) of them and (\d+) shrunk "
                                               r"reproducers, as `fuzz stats` counts", summary).groups())
    assert json.loads(fuzz("campaigns", "--db", db, "--json").stdout)[0]["findings"] == found
    stats = json.loads(fuzz("stats", "--db", db, "--json").stdout)
    assert (stats["cases"], stats["shrunk_cases"]) == (stored + shrunk, shrunk) and shrunk >= 1
    assert fuzz("stats", "--db", db).stdout.startswith(f"{stored + shrunk} stored cases (")


def test_run_prints_a_header_at_once_and_a_line_per_new_bucket(plugin_campaign):
    lines = plugin_campaign[1].splitlines()
    assert lines[0].startswith("[campaign 1] started: 2 backends (torch-eager:cpu:float32, plugin-raise-relu), seed 0")
    new_buckets = [line for line in lines if " new bucket " in line]
    assert len(new_buckets) == 1 and new_buckets[0].endswith(f"{CRASH} (case 1)") and " new bucket B1 after " in new_buckets[0]


def test_list_shows_one_line_per_bucket_with_its_smallest_case(plugin_campaign, shrunk_case):
    db = plugin_campaign[0]
    cases = json.loads(fuzz("list", "--db", db, "--cases", "--json").stdout)
    buckets = json.loads(fuzz("list", "--db", db, "--json").stdout)
    assert [b["signature"] for b in buckets] == [CRASH]
    campaign = json.loads(fuzz("campaigns", "--db", db, "--json").stdout)[0]
    assert buckets[0]["count"] == campaign["findings"] > 2  # every finding counted, shrunk copies not
    generated = {c["id"] for c in cases if not c["shrunk_from"]}  # the bucket keeps its first and latest, counts the rest
    assert generated == {buckets[0]["first_case"], buckets[0]["latest_case"]} and buckets[0]["campaigns"] == {"1": campaign["findings"]}
    assert buckets[0]["representative"] == shrunk_case and buckets[0]["nodes"] == 1
    text = fuzz("list", "--db", db).stdout.splitlines()
    assert len(text) == 2 and text[1].split()[:4] == ["B1", str(shrunk_case), "new", str(buckets[0]["count"])]


def test_list_says_when_it_truncates(plugin_campaign):
    result = fuzz("list", "--db", plugin_campaign[0], "--cases", "--limit", "2")
    total = len(json.loads(fuzz("list", "--db", plugin_campaign[0], "--cases", "--json").stdout))
    assert result.exit_code == 0 and result.stderr == f"showing 2 of {total} cases; use --limit to see more\n"
    assert fuzz("list", "--db", plugin_campaign[0]).stderr == ""  # one bucket: nothing left out


@pytest.mark.parametrize("flag, value, needles", [
    ("--verdict", "bogus", ["'bogus'", "crash, hang, nondeterministic"]),
    ("--status", "bogus", ["'bogus'", "new, confirmed, reported"]),
    ("--backend", "torch-eagr", ["'torch-eagr'", "plugin-raise-relu, torch-eager:cpu:float32"]),
    ("--op", "relx", ["'relx'", "fuzz ops"]),
])
@pytest.mark.parametrize("view", [[], ["--cases"]], ids=["buckets", "cases"])
def test_list_refuses_a_filter_that_names_nothing(plugin_campaign, flag, value, needles, view):
    assert_user_error(fuzz("list", "--db", plugin_campaign[0], *view, flag, value), *needles)


def test_list_filters_by_backend_kind(plugin_campaign):
    db = plugin_campaign[0]
    assert len(json.loads(fuzz("list", "--db", db, "--backend", "plugin-raise-relu", "--json").stdout)) == 1
    assert json.loads(fuzz("list", "--db", db, "--backend", "torch-eager", "--json").stdout) == []  # it agreed
    assert json.loads(fuzz("list", "--db", db, "--verdict", "mismatch", "--json").stdout) == []


# -- fuzz show ----------------------------------------------------------------------------------

def test_show_says_triage_shrink_history_and_how_to_reproduce(plugin_campaign, shrunk_case, tmp_path):
    db = tmp_path / "copy.db"
    shutil.copy(plugin_campaign[0], db)
    fuzz("triage", "--db", db, shrunk_case, "--status", "confirmed", "--note", "upstream #7")
    text = fuzz("show", "--db", db, shrunk_case).stdout
    assert "Triage: confirmed, note: upstream #7" in text
    assert re.search(r"Shrunk from case 1: \d+ nodes to 1, [\d,]+ elements to 1, \d+ candidates tried in [\d.]+ s", text), text
    assert "{" not in text.split("Shrunk from")[1].splitlines()[0], "the shrink log is told in words, not as a dict"
    assert f"Reproduce: fuzz replay {shrunk_case} --db {db} --plugin {PLUGIN}" in text
    assert "Before shrinking, on case 1" in text and "torch-eager:cpu:float32      agree" in text


def test_show_rerun_runs_every_default_backend_and_says_where_the_bug_lives(plugin_campaign, shrunk_case):
    shown = json.loads(fuzz("show", "--db", plugin_campaign[0], shrunk_case, "--rerun", "--plugin", PLUGIN, "--json").stdout)
    assert len(shown["verdicts"]) == 1, "stored: only the backend it was shrunk on"
    ran = {v["backend"]: v["verdict"] for v in shown["rerun"]["verdicts"]}
    assert set(default_backends()) <= set(ran) | {why.split(":")[0] for why in shown["not_rerun"]}
    assert {name for name, verdict in ran.items() if verdict != "agree"} == {"plugin-raise-relu"}
    assert shown["where"]["wrong"] == ["plugin-raise-relu"] and "plugin-raise-relu only" in shown["where"]["summary"]


def verdicts_of(**by_backend) -> list[dict]:
    return [{"backend": name.replace("_", "-").replace("-cpu-", ":cpu:"), "verdict": verdict} for name, verdict in by_backend.items()]


@pytest.mark.parametrize("ran, place", [
    (verdicts_of(torch_eager_cpu_float32="agree", torch_compile_cpu_float32="agree", jax_jit_cpu_float32="agree"), "nowhere"),
    (verdicts_of(torch_eager_cpu_float32="nan-inf", torch_compile_cpu_float32="nan-inf", jax_eager_cpu_float32="nan-inf",
                 jax_jit_cpu_float32="nan-inf", torch_eager_cpu_float64="agree"), "every float32"),
    (verdicts_of(torch_eager_cpu_float32="nan-inf", torch_layout_cpu_float32="inherited", torch_compile_cpu_float32="agree",
                 jax_jit_cpu_float32="agree"), "eager only"),
    (verdicts_of(torch_eager_cpu_float32="agree", torch_compile_cpu_float32="mismatch", jax_jit_cpu_float32="agree"),
     "one compiler"),
    (verdicts_of(torch_eager_cpu_float32="mismatch", torch_compile_cpu_float32="mismatch", jax_jit_cpu_float32="agree"),
     "one framework"),
    (verdicts_of(torch_eager_cpu_float32="agree", torch_compile_cpu_float32="mismatch", jax_jit_cpu_float32="crash",
                 jax_eager_cpu_float32="agree"), "several"),
])
def test_where_a_bug_lives_follows_which_backends_are_wrong(ran, place):
    assert locate(ran)["place"] == place


# -- a missing plugin backend ------------------------------------------------------------------

def test_replay_names_the_plugin_the_campaign_loaded(plugin_campaign, shrunk_case):
    missing = fuzz_process("replay", "--db", plugin_campaign[0], shrunk_case)
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr == (f"Error: Backend 'plugin-raise-relu' is not registered; the campaign that stored case {shrunk_case} "
                              f"loaded plugin file '{PLUGIN}': pass --plugin {PLUGIN}\n")
    assert fuzz_process("replay", "--db", plugin_campaign[0], shrunk_case, "--plugin", PLUGIN).returncode == 1  # it reproduces


def test_report_takes_plugin_and_names_it_when_missing(plugin_campaign, tmp_path):
    db = plugin_campaign[0]
    without = fuzz_process("report", "--db", db, "-o", tmp_path / "without")
    assert without.returncode == 0 and without.stderr.startswith("Warning: Backend 'plugin-raise-relu' is not registered")
    assert f"pass --plugin {PLUGIN}" in without.stderr
    with_plugin = fuzz_process("report", "--db", db, "-o", tmp_path / "with", "--plugin", PLUGIN)
    assert with_plugin.returncode == 0 and with_plugin.stderr == ""
    assert "building a script for backend &#x27;plugin-raise-relu&#x27; failed" in (tmp_path / "without" / "report.html").read_text()
    assert "building a script" not in (tmp_path / "with" / "report.html").read_text()


# -- fuzz rebucket --------------------------------------------------------------------------------

def old_finding(verdict: str, signature: str, culprit: str = "relu", error: str = "") -> Finding:
    return Finding("torch-eager:cpu:float32", verdict, culprit, signature, max_error=1.0, allowed=1e-5, error=error)


@pytest.fixture
def old_corpus(tmp_path) -> Path:
    """Findings stored with an older release's rules: all-zeros had its own bucket, and a crash was
    bucketed by the last line of its error, addresses as 0x?."""
    db = tmp_path / "old.db"
    flat = old_finding("all-zeros", "all-zeros | torch-eager:cpu:float32 | relu")
    wrong = old_finding("mismatch", "mismatch | torch-eager:cpu:float32 | relu")
    error = "RuntimeError: bad stride at 0x7f3a\n  while running conv2d"
    crash = old_finding("crash", "crash | torch-eager:cpu:float32 | conv2d |   while running convNd", "conv2d", error)
    with Corpus(db) as corpus:
        backends = ["torch-eager:cpu:float32"]
        first = corpus.add_case(CaseRecord(generate_case(1, ["relu"]), verdict="all-zeros", backends=backends, findings=[flat]))
        corpus.add_case(CaseRecord(generate_case(2, ["relu"]), verdict="mismatch", backends=backends, findings=[wrong]))
        corpus.add_case(CaseRecord(generate_case(3, ["conv2d"]), verdict="crash", backends=backends, findings=[crash]))
        corpus.add_case(CaseRecord(generate_case(4, ["relu"]), verdict="all-zeros", backends=backends, findings=[flat],
                                   shrunk_from=first))
        corpus.triage(first, "fixed", "fixed in 2.5")
        corpus.triage(2, "reported", "pytorch#1")
    return db


def test_rebucket_merges_an_older_releases_buckets_keeping_triage(old_corpus):
    before = dump(old_corpus)
    dry = json.loads(fuzz("rebucket", "--db", old_corpus, "--dry-run", "--json").stdout)
    assert dump(old_corpus) == before, "--dry-run wrote"
    result = json.loads(fuzz("rebucket", "--db", old_corpus, "--json").stdout)
    assert {**dry, "dry_run": False} == result
    assert result["buckets_before"] == 3 and result["buckets_after"] == 2 and result["cases_changed"] == 3
    with Corpus(old_corpus) as corpus:
        buckets = {b["signature"]: b for b in corpus.buckets()}
        merged = buckets["mismatch | torch-eager:cpu | relu"]
        assert merged["status"] == "reported", "an open status wins over a closed one"
        assert merged["note"].startswith("fixed in 2.5; pytorch#1; merged by `fuzz rebucket` from ")
        assert merged["count"] == 2, "the shrunk copy is not counted"
        assert merged["representative"] == min((1, 2, 4), key=corpus.case_size)
        assert "crash | torch-eager:cpu | conv2d | RuntimeError: bad stride at <addr>" in buckets
        assert {corpus.get_case(i).signature for i in (1, 2, 4)} == {"mismatch | torch-eager:cpu:float32 | relu"}
    again = json.loads(fuzz("rebucket", "--db", old_corpus, "--json").stdout)
    assert again["cases_changed"] == 0 and again["changes"] == [], "a converged corpus stays as it is"


def test_a_corpus_of_this_release_is_already_converged(plugin_campaign):
    """current_signature recomputes exactly what check.py computed from the running backends."""
    result = json.loads(fuzz("rebucket", "--db", plugin_campaign[0], "--dry-run", "--json").stdout)
    assert result["cases_changed"] == 0 and result["buckets_before"] == result["buckets_after"] == 1


# -- fuzz regress ----------------------------------------------------------------------------------

def test_regress_checks_the_recorded_bucket_and_writes_junit(tmp_path):
    folder = tmp_path / "regression"
    folder.mkdir()
    data = json.loads((REGRESSION / "layout-layernorm.json").read_text())
    (folder / "same-bucket.json").write_text(json.dumps(data))
    del data["expect"]  # taken from the recorded verdict: a known bug, expected to disagree
    (folder / "no-expect.json").write_text(json.dumps(data))
    data["findings"][0]["culprit"] = "transpose"  # the same verdict, as another bucket
    data["findings"][0]["signature"] = "mismatch | canary-layout-layernorm | transpose"
    (folder / "other-bucket.json").write_text(json.dumps(data))
    junit = tmp_path / "regress.xml"
    result = fuzz("regress", folder, "--junit", junit, "--json")
    assert result.exit_code == 1, result.output
    by_file = {Path(r["path"]).name: r for r in json.loads(result.stdout)}
    assert not by_file["same-bucket.json"]["surprise"] and not by_file["no-expect.json"]["surprise"]
    assert by_file["no-expect.json"]["expect"] == "disagree"
    assert by_file["other-bucket.json"]["surprise"] and by_file["other-bucket.json"]["observed"] == "disagree"
    assert "not as recorded: expected mismatch | canary-layout-layernorm | transpose" in by_file["other-bucket.json"]["why"]
    suite = ElementTree.parse(junit).getroot()
    assert (suite.tag, suite.get("tests"), suite.get("failures")) == ("testsuite", "3", "1")
    failed = [case.get("name") for case in suite.iter("testcase") if case.find("failure") is not None]
    assert failed == ["other-bucket.json"]


@pytest.mark.slow
def test_a_fault_inside_compiled_graphs_is_one_bucket_naming_its_op_and_shrinks_to_it(tmp_path):
    """A tanh wrong only when jax.jit traces it (right op by op): over 50 graphs of 7 ops, fused in
    every way, it is one bucket whose culprit is tanh, and its smallest case is the lone tanh."""
    db = tmp_path / "jit.db"
    run = fuzz_process("run", "--db", db, "--plugin", Path(PLUGIN).with_name("jit_only_tanh.py"),
                       "--backends", "jax-jit,plugin-jit-tanh", "--ops", "tanh,add,relu,permute,mul,reshape,sigmoid",
                       "--regimes", "small", "--compiled-inputs", "2", "--max-cases", "50", "--workers", "2",
                       "--shrink-time", "10", "--seed", "3")
    assert run.returncode == 1, run.stdout + run.stderr
    buckets = json.loads(fuzz("list", "--db", db, "--json").stdout)
    assert [(b["signature"], b["nodes"]) for b in buckets] == [("mismatch | plugin-jit-tanh | tanh", 1)], buckets
    assert buckets[0]["count"] >= 5  # many graphs, fused differently, one bucket
    shown = json.loads(fuzz("show", buckets[0]["representative"], "--db", db, "--json").stdout)
    assert [node["op"] for node in shown["graph"]["nodes"]] == ["tanh"]


def test_an_inherited_copy_is_listed_with_its_base_and_one_without_its_base_is_left_out_as_no_bug(tmp_path):
    """A derived backend's `inherited` copy of its base's bug is stored (the evidence) as a member of
    its base's bucket. Stored without its base's finding (a case checked on the derived backend
    alone), it is a bucket of its own and no bug to triage: the bucket view counts it on stderr,
    and --all or --verdict lists it."""
    db = tmp_path / "derived.db"
    bug = Finding("torch-eager:cpu:float32", "nan-inf", "sinh", "nan-inf | torch-eager:cpu:float32 | sinh")
    copy = Finding("torch-module:cpu:float32", "inherited", "sinh", "inherited | torch-module:cpu:float32 | sinh")
    with Corpus(db) as corpus:
        corpus.add_case(CaseRecord(generate_case(1, ["sinh"]), verdict="nan-inf",
                                   backends=["torch-eager:cpu:float32", "torch-module:cpu:float32"], findings=[bug, copy]))
        corpus.add_case(CaseRecord(generate_case(2, ["sinh"]), verdict="inherited", backends=["torch-module:cpu:float32"],
                                   findings=[copy]))
    listed = fuzz("list", "--db", db)
    assert listed.stdout.splitlines()[1].endswith("  nan-inf | torch-eager:cpu | sinh")
    assert listed.stdout.splitlines()[2].strip() == "members: torch-eager:cpu:float32 1, torch-module:cpu:float32 (inherited) 1"
    assert listed.stderr.strip() == "not listed: 1 inherited bucket(s), which are not bugs; --all lists them"
    assert len(json.loads(fuzz("list", "--db", db, "--all", "--json").stdout)) == 2
    with_copies = json.loads(fuzz("list", "--db", db, "--verdict", "inherited", "--json").stdout)
    assert sorted(b["signature"] for b in with_copies) == ["inherited | torch-module:cpu | sinh", "nan-inf | torch-eager:cpu | sinh"]


def test_shrink_re_checks_a_case_an_older_release_stored_and_shrinks_it_under_todays_rules(tmp_path):
    """An older release bucketed a crash with culprit '-' and its error's last line; no smaller case
    can match that signature, so `fuzz shrink` checks the case again first and shrinks it for the
    finding as this release sees it: the lone relu, in today's bucket."""
    db = tmp_path / "old-crash.db"
    old = Finding("plugin-raise-relu", "crash", "-", "crash | plugin-raise-relu | - | KernelBug", error="KernelBug")
    with Corpus(db) as corpus:
        case_id = corpus.add_case(CaseRecord(generate_case(2, ["relu", "add", "tanh"]), verdict="crash",
                                             backends=["plugin-raise-relu"], findings=[old]))
    shrunk = fuzz_process("shrink", case_id, "--db", db, "--plugin", PLUGIN, "--shrink-time", "20", "--json")
    assert shrunk.returncode == 0, shrunk.stdout + shrunk.stderr
    result = json.loads(shrunk.stdout)
    assert result["ops"] == ["relu"], result
    shown = json.loads(fuzz("show", result["id"], "--db", db, "--json").stdout)
    assert shown["signature"] == CRASH


def test_show_gives_each_backend_one_verdict_with_every_finding_of_it_below(tmp_path):
    """A case stored again (the same graph and arrays) with another finding on a backend it ran on
    keeps its first verdict row; `fuzz show` says the worst of the two, once."""
    db, case = tmp_path / "twice.db", generate_case(4, ["sinh"])
    eager = "torch-eager:cpu:float32"
    with Corpus(db) as corpus:
        for verdict in ("mismatch", "nan-inf"):
            found = Finding(eager, verdict, "sinh", f"{verdict} | {eager} | sinh", max_error=1.0, allowed=1e-4)
            corpus.add_case(CaseRecord(case, verdict=verdict, backends=[eager], findings=[found],
                                       verdicts=[BackendVerdict(eager, verdict, 1.0, 1e-4)]))
    text = fuzz("show", "1", "--db", db).stdout
    rows = [line for line in text.splitlines() if line.startswith(f"  {eager}")]
    assert len(rows) == 1 and rows[0].split()[1] == "nan-inf"
    assert "finding: mismatch, culprit sinh" in text and "finding: nan-inf, culprit sinh" in text


def test_show_gives_a_small_cases_values_exactly_and_a_larger_ones_range(tmp_path):
    from fuzzer.ir import Case, Graph, Node, TensorSpec

    graph = Graph((TensorSpec("x0", (2,)), TensorSpec("x1", (20,))), (Node("n0", "add", ("x0", "x0")),
                                                                     Node("n1", "relu", ("x1",))), ("n0", "n1"))
    arrays = {"x0": np.array([0.1, -np.inf]), "x1": np.concatenate([np.linspace(-2, 3, 19), [np.nan]])}
    db = tmp_path / "fuzz.db"
    with Corpus(db) as corpus:
        corpus.add_case(CaseRecord(Case(graph, arrays), verdict="agree", backends=[]))
    text = fuzz("show", "1", "--db", db).stdout
    assert "  x0           [0.1, -inf]\n" in text  # every digit a float64 needs, as Python reads it back
    assert "  x1           20 values in [-2, 3], 1 not finite\n" in text
    shown = json.loads(fuzz("show", "1", "--db", db, "--json").stdout)["values"]
    assert shown == {"x0": [0.1, "-inf"]}
