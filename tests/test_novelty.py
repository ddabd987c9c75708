"""Is a finding new? `fuzz export --format issue` lists the upstream searches that decide it (by op, by
symptom, by the pass `fuzz localize` named) as links to the framework's trackers, and the nearest
entries of our known-bug registry (fuzzer/triaging/novelty.py); `fuzz show` prints the same lists."""

import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from click.testing import CliRunner

from fuzzer.cli import main
from fuzzer.corpus import Corpus
from fuzzer.reproducers.issue_report import NOT_RUN_YET
from fuzzer.triaging.known import load_registry
from fuzzer.triaging.novelty import nearest_entries, symptom_words, upstream_searches
from fuzzer.triaging.pass_bisect import PassVerdict

ROOT = Path(__file__).resolve().parent.parent
# A real bug: XLA:CPU's algebraic simplifier aborts on jax.grad of a strided conv2d (its known workaround
# is disabling `algsimp`, which `fuzz localize` finds: tests/test_pass_bisect.py).
CONV_ABORT = ROOT / "reports" / "bugs" / "xla-cpu-conv-lhs-dilation-abort" / "case.json"


def test_the_issue_lists_the_three_searches_and_the_nearest_known_bugs(tmp_path):
    db = str(tmp_path / "fuzz.db")
    runner = CliRunner()
    imported = runner.invoke(main, ["import", "--db", db, str(CONV_ABORT)])
    assert imported.exit_code == 0, imported.output
    with Corpus(db) as corpus:  # what `fuzz localize B1` stores for it (the trials themselves are a long test)
        signature = corpus.named_case("B1")[1]["signature"]
        corpus.record_localization(signature, PassVerdict(
            "jax-grad:cpu:float32", "xla", ["algsimp"], 40, 9,
            "Disabling the HLO pass 'algsimp' alone makes it agree (--xla_disable_hlo_passes=algsimp).").stored({"jax": "0.12.0.1"}))
    exported = runner.invoke(main, ["export", "B1", "--db", db, "--format", "issue"])
    assert exported.exit_code == 0, exported.output
    section = exported.output.split("## Upstream searches\n")[1].split("<details>")[0]
    assert "fuzz" not in section, "the searches are in the maintainers' terms; the fuzzer's notes are collapsed"
    how_found = exported.output.split("<details>")[1]

    searches = re.findall(r"^- by (\w+), (\S+): \[(.+?)\]\((\S+)\): " + NOT_RUN_YET + "$", section, re.M)
    assert [(by, tracker, query) for by, tracker, query, _ in searches] == [
        ("op", "jax-ml/jax", "conv2d jit"), ("symptom", "jax-ml/jax", "conv2d abort"),
        ("op", "openxla/xla", "conv2d jit"), ("symptom", "openxla/xla", "conv2d abort"),
        ("pass", "openxla/xla", "algsimp abort")]
    for _, tracker, query, url in searches:
        address = urlsplit(url)
        assert (address.netloc, address.path) == ("github.com", f"/{tracker}/issues")
        assert parse_qs(address.query) == {"q": [f"is:issue {query}"]}, "open and closed issues, the query exactly"
    nearest = re.findall(r"^- near known bug (\S+) \((\w[^;]*); same ([^)]+)\): .+; (https://\S+|not reported upstream)$",
                         how_found, re.M)
    assert nearest[0] == ("xla-cpu-conv-lhs-dilation-abort", "open", "op, backend, symptom", "not reported upstream")
    assert 1 < len(nearest) <= 3 and all("op" in shares or shares == "backend, symptom" for _, _, shares, _ in nearest)

    shown = runner.invoke(main, ["show", "B1", "--db", db]).output
    assert "  by pass, openxla/xla: algsimp abort\n" in shown and "Nearest known bug: xla-cpu-conv-lhs-dilation-abort (open" in shown


def test_a_crash_is_searched_by_its_own_words_and_an_eager_kind_has_no_pass_to_search():
    finding = {"backend": "torch-eager:cpu:float32", "verdict": "crash", "culprit": "local_response_norm",
               "error": "RuntimeError: view size is not compatible with input tensor's size and stride (at least one "
                        "dimension spans across two contiguous subspaces). Use .reshape(...) instead."}
    assert symptom_words(finding) == '"view size is not compatible with"'
    searches, no_pass_search = upstream_searches(finding, None)
    assert [(s.by, s.query) for s in searches] == [("op", "local_response_norm"), ("symptom", '"view size is not compatible with"')]
    assert no_pass_search == ""
    compiled = {**finding, "backend": "torch-compile:cuda:float32", "verdict": "nan-inf", "culprit": "var@fused"}
    searches, no_pass_search = upstream_searches(compiled, None)
    assert [s.query for s in searches] == ["var inductor cuda", "var nan"] and "named no pass" in no_pass_search
    assert nearest_entries(load_registry(), finding, None)[0].id == "torch-local-response-norm-5d-view"


def test_an_ort_level_is_searched_in_onnxruntime_s_tracker_unless_it_is_no_optimizer_pass():
    finding = {"backend": "ort:cpu:float32", "verdict": "mismatch", "culprit": "log_softmax"}
    localized = {"passes": ["ORT_ENABLE_EXTENDED"], "compiler": "ort", "summary": "Appears at ORT_ENABLE_EXTENDED: ..."}
    searches, _ = upstream_searches(finding, localized)
    assert (searches[-1].by, searches[-1].repository, searches[-1].query) == ("pass", "microsoft/onnxruntime",
                                                                             "ORT_ENABLE_EXTENDED wrong")
    kernel = {**localized, "passes": ["ORT_DISABLE_ALL"], "summary": "There even with every graph optimization off"}
    searches, no_pass_search = upstream_searches(finding, kernel)
    assert "pass" not in [s.by for s in searches] and no_pass_search.startswith("fuzz localize named no single pass (There even")
