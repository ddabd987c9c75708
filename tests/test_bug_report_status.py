"""Every bug report says what it is in its first lines, in one form a triage bot can read."""

import re
from pathlib import Path

import pytest

REPORTS = sorted(path for path in (Path(__file__).parent.parent / "reports" / "bugs").iterdir() if path.is_dir())
STATUS = re.compile(r"^Status: (new|known upstream \(https://\S+|fixed in \S+ \S+|not a bug)")


@pytest.mark.parametrize("folder", REPORTS, ids=lambda path: path.name)
def test_report_starts_with_a_status_line(folder):
    first_lines = (folder / "README.md").read_text().split("\n")[:5]
    assert any(STATUS.match(line) for line in first_lines), f"{folder.name}: no 'Status: ...' line in its first lines"
