"""`fuzz export --format issue`: a stored finding becomes a bug report whose own snippet reproduces it,
and whatever the corpus holds is shown as text, never as Markdown or HTML."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from fuzzer.corpus import Corpus
from fuzzer.reproducers.issue_report import IssueData, environment_report, fenced, inline, render_issue, worst_entries
from test_end_to_end import fuzz

CANARY = "canary-layout-layernorm"


@pytest.fixture(scope="module")
def canary_finding(tmp_path_factory):
    """(db, id of the smallest shrunk case) from a short real campaign against the layout-layernorm canary."""
    db = tmp_path_factory.mktemp("issue") / "fuzz.db"
    fuzz("run", "--db", db, "--max-cases", 40, "--workers", 1, "--shrink-time", 20, "--plugin", "layout-layernorm",
         "--backends", f"torch-eager,{CANARY}", check_exit=1)
    rows = json.loads(fuzz("list", "--cases", "--db", db, "--verdict", "mismatch", "--json", check_exit=0).stdout)
    shrunk = [row for row in rows if row["shrunk_from"]]
    assert shrunk, "the campaign stored a shrunk finding"
    return db, min(shrunk, key=lambda row: row["node_count"])["id"]


def test_the_issue_is_in_the_framework_s_words_and_its_snippet_reproduces(canary_finding, tmp_path):
    db, case_id = canary_finding
    readme = tmp_path / "README.md"
    fuzz("export", "--db", db, case_id, "--format", "issue", "--plugin", "layout-layernorm", "-o", readme, check_exit=0)
    text = readme.read_text()
    title = text.splitlines()[0]
    assert re.fullmatch(r"# layer\\_norm returns \S+ where \S+ is expected for a float32 input of shape \\\[[\d, ]+\\\] "
                        r"on the CPU \(.+\)", title), title
    body, how_found = text.split("<details><summary>How it was found</summary>")
    assert "## 🐛 Describe the bug" in body and "## Versions" in body and "## Expected vs actual" in body
    assert "Output of `python -m torch.utils.collect_env`" in body and re.search(r"PyTorch version: 2\.\d", body)
    for fuzzer_word in ("fuzz ", "regime", "case seed", CANARY, "x0_n", "x1_n", "x2_n"):
        assert fuzzer_word not in body, fuzzer_word
    assert f"fuzz replay {case_id} --backends {CANARY}" in how_found and str(db) not in text, "no path of this machine"
    table = body.split("| output | index | expected | actual |")[1]
    assert table.count("\n| 0 | \\[") >= 1, "the worst entries are listed"

    snippet = re.search(r"```python\n(.*?)\n```", text, re.S).group(1)
    assert "jax" not in snippet, "a torch bug's script needs only torch"
    script = tmp_path / "snippet.py"
    script.write_text(snippet)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("MISMATCH: "), result.stderr


# long (out of CI's 15 minutes): the issue export's refusals are in CI (test_a_backend_without_a_finding_on_the_case_is_refused_in_one_sentence), and the convention's own words are the registry's.
@pytest.mark.long
def test_a_bucket_the_registry_calls_a_convention_needs_force_and_then_warns(canary_finding, tmp_path):
    db, case_id = canary_finding
    with Corpus(db) as corpus:
        signature = corpus.get_case(case_id).signature
    copy = tmp_path / "fuzz.db"
    copy.write_bytes(db.read_bytes())
    with Corpus(copy) as corpus:
        corpus.mark_known(corpus.bucket(signature)["signature"], "layernorm-layout")
    registry = tmp_path / "known-bugs.json"
    registry.write_text(json.dumps([{"id": "layernorm-layout", "title": "layer_norm of a permuted input, as documented",
                                     "match": {"verdicts": ["mismatch"], "kinds": [CANARY]}, "status": "convention"}]))
    args = ("export", "--db", copy, case_id, "--format", "issue", "--plugin", "layout-layernorm", "--known-bugs", registry)
    refused = fuzz(*args, check_exit=2)
    assert refused.stdout == "" and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "entry 'layernorm-layout'" in refused.stderr and "status is convention" in refused.stderr and "--force" in refused.stderr
    forced = fuzz(*args, "--force", check_exit=0)
    assert "Warning: " in forced.stderr and "status is convention" in forced.stderr
    assert forced.stdout.splitlines()[2].startswith("> **Warning:** Case "), forced.stdout
    assert fuzz("export", "--db", copy, case_id, "--format", "minimal", "--plugin", "layout-layernorm", check_exit=0).stdout, \
        "a script is for us: no --force needed"


def test_the_environment_report_is_bounded_and_a_failure_falls_back_to_the_recorded_versions():
    output, why = environment_report("jax", sys.executable)
    assert output.startswith("jax:") and "jaxlib:" in output and why == ""
    assert "node='[hostname]'" in output, "the machine's name is not for an upstream issue"
    assert environment_report("torch", sys.executable, timeout=0.01) == ("", "did not finish within 0.01 s")
    data = _data(environment_failure="did not finish within 0.01 s",
                 campaign={"id": 1, "seed": 0, "versions": {"torch": "2.13.0+cpu", "python": "3.11.7"}})
    versions = render_issue(data).split("## Versions\n\n")[1]
    assert versions.startswith("`python -m torch.utils.collect_env` did not finish within 0.01 s.\n\n"
                               "The versions recorded with the run that found it:\n\n```\nPyTorch version: 2.13.0+cpu\n"
                               "Python version: 3.11.7\n```"), versions


def test_a_backend_without_a_finding_on_the_case_is_refused_in_one_sentence(canary_finding):
    db, case_id = canary_finding
    result = fuzz("export", "--db", db, case_id, "--format", "issue", "--backend", "jax-jit", check_exit=2)
    assert "no finding on backend 'jax-jit:cpu:float32'" in result.stderr and CANARY in result.stderr


def test_worst_entries_rank_a_wrong_non_finite_class_first_then_the_largest_gap():
    expected = [np.array([1.0, np.nan, 3.0, np.inf, 5.0])]
    actual = [np.array([1.5, 0.0, 3.0, np.inf, 4.0])]
    rows = worst_entries(expected, actual, [np.ones(5, bool)], [0.0], limit=3)
    assert [(row["index"], row["actual"]) for row in rows] == [([1], 0.0), ([4], 4.0), ([0], 1.5)]
    assert np.isnan(rows[0]["expected"]) and [row["expected"] for row in rows[1:]] == [5.0, 1.0]


def test_worst_entries_skip_what_the_reference_does_not_define():
    rows = worst_entries([np.array([1.0, 2.0])], [np.array([9.0, 2.5])], [np.array([False, True])], [0.0])
    assert [row["index"] for row in rows] == [[1]]


def test_worst_entries_list_only_entries_beyond_the_allowance():
    rows = worst_entries([np.array([1.0, 2.0, 3.0])], [np.array([1.5, 2.01, 3.0])], [np.ones(3, bool)], [0.1])
    assert [row["index"] for row in rows] == [[0]], "2.01 is within the allowance: not wrong, not listed"


def test_corpus_text_is_rendered_as_text():
    hostile = "x | y\n## injected <img src=x onerror=alert(1)> ``` [link](http://evil)"
    data = _data(regime=hostile, script="print('```')",
                 finding={"backend": "torch-eager:cpu:float32", "verdict": "mismatch", "culprit": hostile, "detail": hostile,
                          "max_error": 2.0, "allowed": 1e-4})
    text = render_issue(data)
    prose = re.sub(r"(`{3,})[^\n]*\n.*?\n\1(?!`)", "", text, flags=re.S)  # code blocks show text as it is
    assert "<img" not in prose and "&lt;img" in prose
    assert "\n## injected" not in text, "a line break in corpus text cannot start a heading"
    assert text.count("\n## ") == 4, "only our own sections are headings"
    assert "[link](" not in prose and "\\[link\\](http://evil)" in prose, "no link can be made from corpus text"
    assert "x \\| y" in prose, "a pipe cannot split a table cell"
    assert "````python\nprint('```')\n````" in text, "a script holding a fence gets a longer fence"


def test_inline_text_keeps_its_characters_but_loses_its_markup():
    assert inline("a_b *c* [d](e) <f>\n|") == "a\\_b \\*c\\* \\[d\\](e) &lt;f&gt; \\|"


def test_a_fence_is_longer_than_any_backtick_run_inside():
    assert fenced("a ```` b") == "`````\na ```` b\n`````"
    assert fenced("plain", "sh") == "```sh\nplain\n```"


def _data(**given) -> IssueData:
    """A report's data as gather_issue gives it: a relu finding on torch eager, one wrong entry."""
    return IssueData(**{
        "case_id": 7, "family": "torch", "regime": "small", "case_seed": 1, "campaign": None, "script": "print(1)",
        "finding": {"backend": "torch-eager:cpu:float32", "verdict": "nan-inf", "culprit": "relu"},
        "backend": {"description": "torch eager, op by op", "device": "cpu", "dtype": "float32"},
        "culprit_inputs": [[3]], "ops": ["relu"],
        "entries": [{"output": 0, "index": [1], "expected": 1.0, "actual": float("nan"), "gap": float("inf")}], **given})


def test_the_title_says_what_the_op_does_wrong_on_which_input():
    assert render_issue(_data()).splitlines()[0] == (
        "# relu returns nan where 1 is expected for a float32 input of shape \\[3\\] on the CPU (torch eager, op by op)")
    crash = _data(finding={"backend": "torch-compile:cpu:float32", "verdict": "crash", "culprit": "sin@grad",
                           "error": "RuntimeError: bad strides\nSet TORCH_LOGS=+dynamo"},
                  backend={"description": "torch.compile (inductor)", "device": "cuda", "dtype": "float16"},
                  culprit_inputs=[[2, 3], [3]], entries=[])
    assert render_issue(crash).splitlines()[0] == ("# the gradient of sin raises RuntimeError: bad strides for float16 inputs "
                                                   "of shapes \\[2, 3\\] and \\[3\\] on the CUDA GPU (torch.compile (inductor))")
