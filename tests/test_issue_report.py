"""`fuzz export --format issue`: a stored finding becomes a bug report whose own snippet reproduces it,
and whatever the corpus holds is shown as text, never as Markdown or HTML."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from fuzzer.issue_report import IssueData, fenced, inline, render_issue, worst_entries
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


def test_the_issue_names_backend_op_and_versions_and_its_snippet_reproduces(canary_finding, tmp_path):
    db, case_id = canary_finding
    readme = tmp_path / "README.md"
    fuzz("export", "--db", db, case_id, "--format", "issue", "--plugin", "layout-layernorm", "-o", readme, check_exit=0)
    text = readme.read_text()
    assert text.startswith(f"# mismatch: layer\\_norm on {CANARY}")
    assert "## 🐛 Describe the bug" in text and "## Versions" in text and "## Expected vs actual" in text
    assert re.search(r"PyTorch version: 2\.\d", text) and "Python version: 3." in text
    assert f"fuzz replay {case_id} --backends {CANARY}" in text and str(db) not in text, "no path of this machine"
    table = text.split("| output | index | expected | actual |")[1]
    assert table.count("\n| 0 | \\[") >= 1, "the worst entries are listed"

    snippet = re.search(r"```python\n(.*?)\n```", text, re.S).group(1)
    script = tmp_path / "snippet.py"
    script.write_text(snippet)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("MISMATCH: "), result.stderr


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
    data = IssueData(
        case_id=7, family="torch", regime=hostile, case_seed=1, campaign=None,
        finding={"backend": "torch-eager:cpu:float32", "verdict": "mismatch", "culprit": hostile, "detail": hostile,
                 "max_error": 2.0, "allowed": 1e-4},
        graph_lines=[f"n0 = relu(x0) -> [2]  {json.dumps({'note': hostile})}"], script="print('```')",
        entries=[{"output": 0, "index": [1], "expected": 1.0, "actual": float("nan"), "gap": float("inf")}],
    )
    text = render_issue(data)
    prose = re.sub(r"(`{3,})[^\n]*\n.*?\n\1(?!`)", "", text, flags=re.S)  # code blocks show text as it is
    assert "<img" not in prose and "&lt;img" in prose
    assert "\n## injected" not in text, "a line break in corpus text cannot start a heading"
    assert text.count("\n## ") == 5, "only our own sections are headings"
    assert "[link](" not in prose and "\\[link\\](http://evil)" in prose, "no link can be made from corpus text"
    assert "x \\| y" in prose, "a pipe cannot split a table cell"
    assert "````python\nprint('```')\n````" in text, "a script holding a fence gets a longer fence"


def test_inline_text_keeps_its_characters_but_loses_its_markup():
    assert inline("a_b *c* [d](e) <f>\n|") == "a\\_b \\*c\\* \\[d\\](e) &lt;f&gt; \\|"


def test_a_fence_is_longer_than_any_backtick_run_inside():
    assert fenced("a ```` b") == "`````\na ```` b\n`````"
    assert fenced("plain", "sh") == "```sh\nplain\n```"
