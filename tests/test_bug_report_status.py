"""Every bug report says what it is in its first lines, in one form a triage bot can read, and a report
that claims `Status: new` records the upstream searches that decided it."""

import re
from pathlib import Path

import pytest

from fuzzer.reproducers.issue_report import NOT_RUN_YET

REPORTS = sorted(path for path in (Path(__file__).parent.parent / "reports" / "bugs").iterdir() if path.is_dir())
STATUS = re.compile(r"^Status: (new|known upstream \(https://\S+|fixed in \S+ \S+|not a bug)")
NEW = re.compile(r"^Status: new\b", re.M)
# Reports that say new and whose searches were never written down: each says "Searches not recorded."
# in its section. Strict: once the searches are run and recorded, the name comes off this list.
SEARCHES_NOT_RECORDED = {"ort-rnn-nan", "torch-compile-cuda-adaptive-pool-prologue", "torch-onnx-avg-pool-divisor-override",
                         "torch-sdpa-key-broadcast-mask-crash", "xla-gpu-x64-adaptive-pool-count"}


def _status_lines(folder: Path) -> list[str]:
    return (folder / "README.md").read_text().split("\n")[:5]


def upstream_searches(text: str) -> str | None:
    """The body of a report's '## Upstream searches' section, up to the next heading, or None."""
    match = re.search(r"^## Upstream searches[^\n]*\n(.*?)(?=^#{1,3} |\Z)", text, re.M | re.S)
    return match.group(1).strip() if match else None


def _new_reports():
    for folder in REPORTS:
        if any(NEW.match(line) for line in _status_lines(folder)):
            marks = [pytest.mark.xfail(strict=True, reason="searches not recorded")] if folder.name in SEARCHES_NOT_RECORDED else []
            yield pytest.param(folder, id=folder.name, marks=marks)


@pytest.mark.parametrize("folder", REPORTS, ids=lambda path: path.name)
def test_report_starts_with_a_status_line(folder):
    assert any(STATUS.match(line) for line in _status_lines(folder)), f"{folder.name}: no 'Status: ...' line in its first lines"


@pytest.mark.parametrize("folder", list(_new_reports()))
def test_a_new_report_lists_the_searches_that_decided_it(folder):
    section = upstream_searches((folder / "README.md").read_text())
    assert section, "no '## Upstream searches' section: list each query and what it returned before claiming new"
    assert re.search(r'"[^"]+"|`[^`\n]+`|\?q=', section), "the section quotes no query"
    assert NOT_RUN_YET not in section, f"a search the export listed is still '{NOT_RUN_YET}'"


def test_the_rule_reads_the_section_and_refuses_an_unrun_search():
    exported = f"# t\n\n## Upstream searches\n\n- by op, pytorch/pytorch: [var inductor](https://github.com/x?q=var): {NOT_RUN_YET}\n\n## Versions\n"
    assert upstream_searches(exported).endswith(NOT_RUN_YET), "the section ends at the next heading"
    assert upstream_searches("# t\n\n## Upstream\n\nsearched\n") is None
