"""What a stored case, bucket or member row may hold, checked where Queries reads it, so that a
tampered or damaged row is one sentence (exit 2) in every command, never a crash in one of them.

Each column has a kind (fuzzer/running/campaign_config.py's, as campaign rows are checked with); the JSON
columns are read first, a finding's and a verdict's numbers as floats (fuzzer/jsonform.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from fuzzer import jsonform
from fuzzer.corpus.case_forms import is_finding, is_verdict
from fuzzer.errors import UserError
from fuzzer.ir import parse_json
from fuzzer.records import BackendVerdict, Finding
from fuzzer.running.campaign_config import COUNT, INT64, TEXT, ListOf, MapOf, Nullable, Number, check_fields
from fuzzer.triaging.buckets import STATUSES


@dataclass(frozen=True)
class Shaped:
    """A JSON value that `test` accepts, described in words."""

    test: Callable[[Any], bool]
    description: str

    def accepts(self, value: Any) -> bool:
        return self.test(value)


ROW_ID = Number(whole=True, low=1, high=INT64)
STATUS = Shaped(lambda value: value in STATUSES, f"one of {', '.join(STATUSES)}")
FINDING = Shaped(is_finding, "an object with string 'signature', 'verdict', 'backend' and 'culprit' (and numbers "
                             "'max_error' and 'allowed', strings 'detail', 'error' and 'compiler_pass', where it has them)")
VERDICT = Shaped(is_verdict, "an object with string 'backend' and 'verdict' (and numbers 'max_error' and 'allowed', "
                             "a string 'detail', where it has them)")

CASE_COLUMNS = {
    "campaign_id": Nullable(ROW_ID), "created": TEXT, "content_hash": TEXT,
    "seed": Number(whole=True, low=0, high=INT64),  # a numpy seed
    "graph": TEXT, "op_sequence": TEXT, "node_count": COUNT, "element_count": Nullable(COUNT),
    "backends": ListOf(TEXT), "verdict": TEXT, "signature": Nullable(TEXT), "findings": ListOf(FINDING),
    "shrunk_from": Nullable(ROW_ID), "verdicts": ListOf(VERDICT), "case_key": Nullable(TEXT),  # shrink_log: any JSON
    "status": Nullable(STATUS),  # list_cases: its bucket's
}
MEMBER_COLUMNS = {**dict.fromkeys(("signature", "verdict", "backend", "culprit"), TEXT), "count": COUNT,
                  "campaigns": MapOf(COUNT)}
BUCKET_COLUMNS = {
    **MEMBER_COLUMNS, "first_seen": TEXT, "last_seen": TEXT, "status": STATUS, "note": Nullable(TEXT),
    "known_bug": Nullable(TEXT), **dict.fromkeys(("representative", "first_case", "latest_case"), Nullable(ROW_ID)),
    "nodes": Nullable(COUNT), "elements": Nullable(COUNT),  # list_buckets: its smallest case's
    "localization": Nullable(TEXT),  # JSON, read by pass_bisect.stored_localization
}
JSON_COLUMNS = ("backends", "findings", "shrink_log", "verdicts", "campaigns")
ENTRIES = {"findings": Finding, "verdicts": BackendVerdict}  # JSON columns of records, their numbers read as floats


def checked_case_row(row: dict, path: Path) -> dict:
    """A `cases` row (every column or some) with its JSON columns read, each column of its kind."""
    return _checked(row, CASE_COLUMNS, f"Case {row.get('id')} in {path}")


def checked_bucket_row(row: dict, path: Path) -> dict:
    return _checked(row, BUCKET_COLUMNS, f"Bucket {str(row.get('signature'))[:200]!r} in {path}")


def checked_member_row(row: dict, path: Path) -> dict:
    return _checked(row, MEMBER_COLUMNS, f"Member {str(row.get('signature'))[:200]!r} of bucket "
                                         f"{str(row.get('bucket'))[:200]!r} in {path}")


def _checked(row: dict, kinds: dict, what: str) -> dict:
    row = dict(row)
    try:
        for column in JSON_COLUMNS:
            if isinstance(row.get(column), str):
                row[column] = parse_json(row[column], f"JSON in its {column} column")
        check_fields(row, kinds, "row")
    except UserError as exc:
        reason = str(exc).rstrip(".")
        raise UserError(f"{what} is damaged ({reason[0].lower()}{reason[1:]}); the corpus was changed by something "
                        "other than the fuzzer, so restore the file from a copy.") from None
    for column, record_type in ENTRIES.items():
        if column in row:
            row[column] = [jsonform.read_numbers(entry, record_type) for entry in row[column]]
    return row
