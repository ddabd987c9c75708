"""Strict JSON everywhere: every `--json` output and every checked-in case file parses with a parser
that refuses NaN and Infinity, as JavaScript's and Go's do. A non-finite number is written as the
string "nan", "inf" or "-inf" (fuzzer/jsonform.py) and read back as the float; files an older
release wrote with the bare tokens still read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from fuzzer import jsonform
from fuzzer.corpus import case_from_export, load_case_file
from fuzzer.judging.check import Finding
from fuzzer.oracle import BackendVerdict
from test_cli_errors import fuzz

REPO = Path(__file__).resolve().parents[1]
FUZZ = str(Path(sys.executable).with_name("fuzz"))
PLUGIN = str(REPO / "tests" / "plugins" / "nan_relu.py")
CASE_FILES = sorted((REPO / "corpus" / "regression").glob("*.json")) + sorted((REPO / "corpus" / "known").glob("*.json")) + sorted((REPO / "reports" / "bugs").glob("*/*.json"))


def strict_loads(text: str):
    """json.loads as a strict parser reads: NaN, Infinity and -Infinity are errors."""
    def refuse(token: str):
        raise ValueError(f"{token} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_numbers_are_written_as_strings_and_read_back_as_floats():
    finding = Finding("b", "nan-inf", "relu", "nan-inf | b | relu", max_error=math.inf, allowed=math.nan)
    data = strict_loads(jsonform.dumps({"findings": [finding.to_dict()], "low": -math.inf, "p": "inf"}))
    assert data["findings"][0]["max_error"] == "inf" and data["findings"][0]["allowed"] == "nan" and data["low"] == "-inf"
    again = Finding.from_dict(data["findings"][0])
    assert again.max_error == math.inf and math.isnan(again.allowed)
    assert jsonform.dumps(again.to_dict()) == jsonform.dumps(finding.to_dict())
    assert BackendVerdict.from_dict({"backend": "b", "verdict": "mismatch", "max_error": "-inf"}).max_error == -math.inf
    assert data["p"] == "inf", "a string stays a string: a norm's p attribute is the text 'inf'"


def test_a_file_with_the_old_bare_tokens_still_reads():
    old = '{"backend": "b", "verdict": "nan-inf", "culprit": "relu", "signature": "s", "max_error": Infinity, "allowed": NaN}'
    finding = Finding.from_dict(json.loads(old))
    assert finding.max_error == math.inf and math.isnan(finding.allowed)
    assert strict_loads(jsonform.dumps(finding.to_dict()))["max_error"] == "inf"


def test_every_checked_in_case_file_is_strict_json_and_reads_its_infinite_errors():
    assert len(CASE_FILES) >= 25
    for path in CASE_FILES:
        strict_loads(path.read_text())
    data = load_case_file(REPO / "corpus" / "known" / "torch-sinh-overflow.json")
    case_from_export(data)
    assert [Finding.from_dict(f).max_error for f in data["findings"]] == [math.inf]


@pytest.mark.long  # ~15 s: the fast tests above cover each writer; CI's 15 minutes
def test_every_json_output_of_a_real_campaign_is_strict(tmp_path):
    """A 3-graph campaign whose plugin relu gives nan (findings with an infinite error), then every
    command's --json on its corpus, a replay and the exported case files."""
    db = tmp_path / "nan.db"
    run = subprocess.run([FUZZ, "run", "--db", db, "--plugin", PLUGIN, "--backends", "torch-eager,plugin-nan-relu",
                          "--ops", "relu,add", "--regimes", "small", "--max-cases", "3", "--workers", "1",
                          "--shrink-time", "5", "--json"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    outputs = {"run": run.stdout}
    outputs.update({f"run event {n}": line for n, line in enumerate(run.stderr.splitlines()) if line.startswith("{")})
    assert any('"event": "new-bucket"' in line for line in outputs.values())
    commands = [["list"], ["list", "--all"], ["list", "--cases"], ["stats"], ["campaigns"], ["known", "list"], ["ops"],
                ["regimes"]]
    cases = [row["id"] for row in strict_loads(fuzz("list", "--db", db, "--cases", "--json").stdout)]
    commands += [["show", case_id] for case_id in cases]
    for args in commands:
        result = fuzz(*args, *(["--db", db] if args[0] not in ("known", "ops", "regimes") else []), "--json")
        assert result.exit_code == 0, (args, result.output)
        outputs[" ".join(map(str, args))] = result.stdout
    for case_id in cases:
        exported = tmp_path / f"case{case_id}.json"
        assert fuzz("export", case_id, "--db", db, "--format", "json", "-o", exported).exit_code == 0
        outputs[f"export {case_id}"] = exported.read_text()
    replay = subprocess.run([FUZZ, "replay", str(cases[-1]), "--db", db, "--plugin", PLUGIN, "--json"],
                            capture_output=True, text=True, timeout=300)
    assert replay.returncode == 1, replay.stdout + replay.stderr
    outputs["replay"] = replay.stdout
    for name, text in outputs.items():
        try:
            strict_loads(text)
        except ValueError as exc:
            raise AssertionError(f"`fuzz {name}` is not strict JSON: {exc}") from None
    infinite = [name for name, text in outputs.items() if '"max_error": "inf"' in text]
    assert "replay" in infinite and f"show {cases[-1]}" in infinite, "the campaign's infinite errors were not in the outputs"
