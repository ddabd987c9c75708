"""`fuzz report`: a static HTML report and a Markdown summary, built from a real campaign with an injected bug."""

import html
import importlib.util
import json
import sys

import pytest
from click.testing import CliRunner

from fuzzer.cli import main
from fuzzer.corpus import Corpus
from fuzzer.drawing.generate import generate_case
from fuzzer.judging.check import Finding
from fuzzer.records import CaseRecord
from fuzzer.report import NO_PLOTS, write_report
from fuzzer.report.data import gather
from fuzzer.report.render import render_html
from fuzzer.running.campaign import CampaignOptions, run_campaign

SIGNATURE = "mismatch | canary-layout-layernorm | layer_norm"
NOTE = '<script>alert("x")</script> & <b>bold</b> | pipe'
HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """A real campaign that finds the layer_norm canary; its bucket triaged with an HTML-laden note."""
    root = tmp_path_factory.mktemp("report")
    db = root / "c.db"
    with Corpus(db) as corpus:
        progress = run_campaign(corpus, CampaignOptions(
            backends=["torch-eager:cpu:float32", "canary-layout-layernorm"], plugins=["layout-layernorm"],
            max_cases=20, workers=1, shrink_time=10,
        ))
        assert progress.status == "finished" and progress.finding_cases >= 1
        bucket = corpus.bucket(SIGNATURE)
        assert bucket is not None, "the campaign must find the injected layer_norm bug"
        corpus.triage(bucket["representative"], "confirmed", NOTE)
    return db


@pytest.fixture(scope="module")
def built(campaign, tmp_path_factory):
    """The report, written through the real command with --json."""
    out = tmp_path_factory.mktemp("out") / "nested" / "report"
    result = CliRunner().invoke(main, ["report", "--db", str(campaign), "-o", str(out), "--json"])
    assert result.exit_code == 0, result.output
    reply = json.loads(result.stdout)
    assert reply["buckets"] >= 1
    return reply, (out / "report.html").read_text(encoding="utf-8"), (out / "summary.md").read_text(encoding="utf-8")


def test_json_reply_names_the_two_files(built):
    reply, _, _ = built
    assert reply["html"].endswith("report.html") and reply["markdown"].endswith("summary.md")


def test_bucket_row_and_reproducer_in_html(built):
    _, page, _ = built
    assert SIGNATURE in page
    assert "<code>layer_norm</code>" in page and "canary-layout-layernorm" in page
    assert 'href="#repro-' in page and 'id="repro-' in page  # the row links to its reproducer
    assert "import torch" in page and "MISMATCH: " in page  # the minimal script, shown as code
    assert "<pre><code>" in page
    assert "Campaigns" in page and "torch-eager:cpu:float32" in page
    assert "http://" not in page and "https://" not in page  # self-contained: nothing to fetch


def test_plots_are_inline_pngs(built):
    _, page, _ = built
    if not HAS_MATPLOTLIB:
        assert html.escape(NO_PLOTS) in page
        pytest.skip("matplotlib is not installed: the report says how to get plots instead")
    assert page.count('<img alt="') >= 3
    assert '<img alt="Discovery curve" src="data:image/png;base64,' in page
    assert html.escape(NO_PLOTS) not in page


def test_summary_markdown_has_the_bucket(built):
    _, _, summary = built
    assert SIGNATURE.replace("|", "\\|") in summary
    assert "| 1 | finished |" in summary and "confirmed" in summary


def test_corpus_text_is_escaped(built):
    _, page, summary = built
    assert NOTE not in page and "<script>" not in page
    assert html.escape(NOTE) in page
    assert "<script>" not in summary and "&lt;script&gt;" in summary and "\\| pipe" in summary


def test_missing_corpus_fails_with_exit_2(tmp_path):
    result = CliRunner().invoke(main, ["report", "--db", str(tmp_path / "nope.db"), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "No corpus" in result.output and len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "nope.db").exists() and not (tmp_path / "out").exists()


def test_empty_corpus_fails_with_exit_2(tmp_path):
    Corpus(tmp_path / "empty.db").close()
    result = CliRunner().invoke(main, ["report", "--db", str(tmp_path / "empty.db"), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "no campaigns or cases" in result.output and len(result.output.strip().splitlines()) == 1


def _finding(verdict, backend, culprit="matmul"):
    return Finding(backend, verdict, culprit, f"{verdict} | {backend} | {culprit}", max_error=0.02, allowed=0.001)


def test_precision_policy_apart_and_script_fallback_without_matplotlib(tmp_path, monkeypatch):
    """Imported cases (no campaign): a precision-policy bucket goes to its own section; a backend no script
    can run shows the graph JSON and why; without matplotlib the report says how to get plots."""
    for name in ("matplotlib", "matplotlib.figure"):
        monkeypatch.setitem(sys.modules, name, None)  # makes `import matplotlib...` raise ImportError
    with Corpus(tmp_path / "c.db") as corpus:
        case = generate_case(3)
        corpus.add_case(CaseRecord(case, verdict="precision-policy", backends=["torch-eager:cuda:float32"],
                                   findings=[_finding("precision-policy", "torch-eager:cuda:float32")]))
        corpus.add_case(CaseRecord(case, verdict="mismatch", backends=["numpy-ref:cpu:float32"],
                                   findings=[_finding("mismatch", "numpy-ref:cpu:float32")]))
        reply = write_report(corpus, tmp_path / "out")
    page = (tmp_path / "out" / "report.html").read_text()
    assert reply["buckets"] == 2
    bugs, rest = page.split('<h2 id="precision">', 1)
    policy, _ = rest.split('<h2 id="plots">', 1)
    assert "precision-policy | torch-eager:cuda | matmul" in policy and "precision-policy |" not in bugs.split("<h2 id=\"bugs\"")[1]
    assert "mismatch | numpy-ref:cpu | matmul" in bugs
    assert "has no reproducer writer" in page and "&quot;nodes&quot;" in page  # the graph JSON instead
    assert html.escape(NO_PLOTS) in page and "<img" not in page
    assert "No campaigns" in page


def test_the_totals_and_the_discovery_curve_count_what_fuzz_stats_counts(tmp_path):
    """One bug found in float32 and float64 is one bucket with two member signatures; a derived backend's
    inherited copy of it is no precision-policy bucket. The page, the curve's legend and `fuzz stats` say so alike."""
    db = tmp_path / "c.db"
    with Corpus(db) as corpus:
        findings = [_finding("mismatch", "torch-eager:cpu:float32"), _finding("mismatch", "torch-eager:cpu:float64"),
                    _finding("inherited", "canary-layout-layernorm")]
        for seed in (3, 4):
            corpus.add_case(CaseRecord(generate_case(seed), verdict="mismatch", findings=findings,
                                       backends=[f.backend for f in findings]))
        data = gather(corpus)
    stats = json.loads(CliRunner().invoke(main, ["stats", "--db", str(db), "--json"]).stdout)
    bugs = [row for row in data.buckets if not row.precision_policy]
    policy = [row for row in data.buckets if row.precision_policy]
    assert len(data.buckets) == stats["buckets"] and data.stats["cases_with_findings"] == stats["cases_with_findings"]
    assert (len(data.discovery.bug_buckets), len(data.discovery.policy_buckets)) == (len(bugs), len(policy)), \
        "each bucket once on the curve, on the side of the page it is on"
    page = render_html(data, {}, None)
    assert f"<b>{stats['cases_with_findings']}</b><span>cases with findings" in page
    assert f"<b>{len(bugs)}</b><span>bug buckets" in page and f"<b>{len(policy)}</b><span>precision-policy buckets" in page


def test_the_coverage_is_a_table_of_numbers_and_the_reproducers_are_the_minimal_scripts(built):
    _, page, _ = built
    coverage = page.split('<h2 id="coverage">', 1)[1].split("<h2 ", 1)[0]
    assert "<th class=vertical><span>canary-layout-layernorm</span></th>" in coverage
    assert "<tr><td><code>layer_norm</code></td>" in coverage and "<b class=found>" in coverage, "its findings, in red"
    assert '<img alt="Coverage' not in page, "no unlabeled heatmap"
    reproducers = page.split('<h2 id="reproducers">', 1)[1]
    assert "MISMATCH: " in reproducers and "def check(outputs)" not in reproducers and "truncated" not in reproducers
