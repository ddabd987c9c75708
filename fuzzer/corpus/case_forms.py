"""A stored case outside the sqlite tables: the row read back (StoredCase), and an exported case
file (`fuzz export` writes it, `fuzz import` and `fuzz replay` read it), each checked before use.

An exported case is {"format": EXPORT_FORMAT, "version", "graph", "arrays" (base64 .npy, never
pickled), "seed", "verdict", "findings", "backends"}, with the triage of its buckets ("triage")
and what a regression test expects of it ("expect") where there is one.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuzzer import jsonform
from fuzzer.backend_names import BackendName
from fuzzer.errors import UserError
from fuzzer.ir import MAX_JSON_DEPTH, Case, check_json_depth
from fuzzer.records import BackendVerdict, CaseRecord, Finding, case_from_dict
from fuzzer.triaging.buckets import STATUSES

EXPORT_FORMAT = "fuzzer-case"
EXPORT_VERSION = 1


@dataclass
class StoredCase:
    """A case as read from its row: findings and verdicts in their JSON form, as stored (what
    `fuzz show --json` and `fuzz export` give out; a corpus another release or a person wrote
    may hold keys this one does not know), their errors read as floats ("inf" is inf: fuzzer/jsonform.py).
    `record()` is the typed CaseRecord."""

    id: int
    case: Case
    campaign_id: int | None
    created: str
    verdict: str
    signature: str | None
    findings: list[dict]
    backends: list[str]
    shrunk_from: int | None
    shrink_log: Any
    verdicts: list[dict]
    content_hash: str
    op_sequence: str

    def record(self) -> CaseRecord:
        """The CaseRecord to store this case again (merge); UserError if its findings or verdicts are malformed."""
        findings, backend_verdicts = self.findings, self.verdicts
        if not isinstance(findings, list) or not all(is_finding(f) for f in findings):
            raise UserError(f"case {self.id} has malformed findings (each needs string 'signature', 'verdict', "
                            "'backend' and 'culprit', and numbers 'max_error' and 'allowed')")
        if not isinstance(backend_verdicts, list) or not all(is_verdict(v) for v in backend_verdicts):
            raise UserError(f"case {self.id} has malformed verdicts (each needs string 'backend' and 'verdict')")
        return CaseRecord(
            self.case, campaign_id=self.campaign_id, verdict=self.verdict, backends=self.backends,
            findings=[Finding.from_dict(f) for f in findings], verdicts=[BackendVerdict.from_dict(v) for v in backend_verdicts],
            shrunk_from=self.shrunk_from, shrink_log=self.shrink_log, created=self.created,
        )


def is_finding(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(value.get(key), str) for key in ("signature", "verdict", "backend", "culprit")
    ) and _has_optional_fields(value)


def _has_optional_fields(value: dict) -> bool:
    """A finding's or verdict's numbers and texts, where it has them, of their kind (`fuzz show` prints them)."""
    return (all(_is_number(value.get(key, 0.0)) for key in ("max_error", "allowed"))
            and all(isinstance(value.get(key, ""), str) for key in ("detail", "error", "compiler_pass")))


def _is_number(value: Any) -> bool:
    """A float field's JSON form: a number, or "nan", "inf", "-inf" (fuzzer/jsonform.py)."""
    return isinstance(jsonform.number(value), (int, float)) and not isinstance(value, bool)


def is_triage(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("bucket"), str) and value.get("status") in STATUSES
            and isinstance(value.get("findings"), list) and all(isinstance(s, str) for s in value["findings"])
            and all(value.get(key) is None or isinstance(value[key], str) for key in ("note", "known_bug")))


def is_verdict(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(value.get(key), str) for key in ("backend", "verdict")) and (
        _has_optional_fields(value))


def file_kind(mode: int) -> str:
    """'a FIFO', 'a character device', ... for a stat mode (what a file that is not a regular one is)."""
    kinds = [(stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISREG, "a regular file")]
    return next((name for test, name in kinds if test(mode)), "a special file")


def _read_regular_file(path: Path) -> str:
    """A regular file's text. Anything else is refused before it is opened: /dev/zero never ends, a FIFO
    blocks. The open descriptor is checked again, in case the file was swapped in between."""
    mode = os.stat(path).st_mode
    if stat.S_ISREG(mode):
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO swapped in does not block the open
        with open(descriptor, encoding="utf-8") as file:
            mode = os.fstat(descriptor).st_mode
            if stat.S_ISREG(mode):
                return file.read()
    raise UserError(f"Case file '{path}' is {file_kind(mode)}, not a regular file; pass a file written by `fuzz export`.")


def load_case_file(path: str | Path) -> dict:
    """Read an exported case's JSON; UserError naming the file if it cannot be read or parsed."""
    path = Path(path)
    try:
        text = _read_regular_file(path)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UserError(f"Cannot read case file '{path}' ({reason}); check the path.") from None
    try:
        data = json.loads(text, object_pairs_hook=jsonform.unique_keys)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"Case file '{path}' is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            "pass a file written by `fuzz export`."
        ) from None
    except jsonform.DuplicateKey as exc:
        raise UserError(f"Case file '{path}' is ambiguous: {exc}; pass a file written by `fuzz export`.") from None
    except RecursionError:
        raise UserError(f"Case file '{path}' nests deeper than {MAX_JSON_DEPTH} levels; refusing to load it.") from None
    except ValueError:  # Python's json refuses an integer of more than 4300 digits
        raise UserError(f"Case file '{path}' holds a number too long to read; pass a file written by `fuzz export`.") from None
    check_json_depth(data, f"case file '{path}'")
    if not isinstance(data, dict):
        raise UserError(
            f"Case file '{path}' holds a JSON {type(data).__name__}, not an object; pass a file written by `fuzz export`."
        )
    return data


def case_from_export(data: Any) -> Case:
    """The Case in an exported dict, fully validated: its format and version here, the rest by records.case_from_dict."""
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
        found = data.get("format") if isinstance(data, dict) else None
        raise UserError(
            f"Not an exported fuzzer case ('format' is {found!r}, expected '{EXPORT_FORMAT}'); "
            "pass a file written by `fuzz export`."
        )
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= EXPORT_VERSION:
        raise UserError(
            f"Exported case version {version!r} is not supported (this fuzzer reads 1..{EXPORT_VERSION}); upgrade the fuzzer."
        )
    if "graph" not in data:
        raise UserError("The exported case has no 'graph'; pass a file written by `fuzz export`.")
    case = case_from_dict(data, "The exported case")
    expect = data.get("expect")
    if expect is not None and not isinstance(expect, str):
        raise UserError(f"The exported case's 'expect' must be a string, not {expect!r}.")
    return case


def is_registered(backend: str) -> bool:
    """Whether `backend` names a backend this installation knows: "KIND:DEVICE:DTYPE" of a built-in
    kind on a device and dtype it supports (with "@ENV", whose environment replay checks), a canary's
    or a loaded plugin's."""
    from fuzzer.backends import get_backend, table
    from fuzzer.plugins import canary_names

    if backend in table().derived or backend.startswith("canary-") and backend[len("canary-"):] in canary_names():
        return True
    name = BackendName.parse(backend)
    if not name.full:  # a stored name is whole: get_backend would fill in a short one's device and dtype
        return False
    try:
        get_backend(str(name.here))  # its kind, device and dtype checked as everywhere else
    except UserError:
        return False
    return True


def imported_case(data: dict) -> tuple[CaseRecord, list[dict]]:
    """The record an exported case stores, and its triage entries; UserError if anything is malformed."""
    case = case_from_export(data)
    verdict = data.get("verdict", "unchecked")
    if not isinstance(verdict, str):
        raise UserError("The case file's 'verdict' must be a string.")
    backends = data.get("backends", [])
    if not isinstance(backends, list) or not all(isinstance(b, str) for b in backends):
        raise UserError("The case file's 'backends' must be a list of backend names.")
    findings = data.get("findings", [])
    if not isinstance(findings, list) or not all(is_finding(f) for f in findings):
        raise UserError(
            "The case file's 'findings' must be a list of objects with string 'signature', 'verdict', 'backend' "
            "and 'culprit', and numbers 'max_error' and 'allowed'."
        )
    unregistered = next((name for name in [*backends, *(f["backend"] for f in findings)] if not is_registered(name)), None)
    if unregistered is not None:
        raise UserError(f"The case file names backend '{unregistered}', which is not registered here; run `fuzz backends` "
                        "to list them (a plugin's findings stay in the corpus its campaign wrote: `fuzz merge` it).")
    triage = data.get("triage", [])
    if not isinstance(triage, list) or not all(is_triage(entry) for entry in triage):
        raise UserError(f"The case file's 'triage' must be a list of objects with a string 'bucket', a 'status' "
                        f"({', '.join(STATUSES)}), a list of finding signatures 'findings', and a string or null "
                        "'note' and 'known_bug'.")
    # Findings are kept as the file has them (fuzzer/jsonform.py): another release's keys included.
    record = CaseRecord(case, verdict=verdict, backends=backends, findings=[Finding.from_dict(f) for f in findings])
    return record, triage
