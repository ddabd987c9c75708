"""Typed records (fuzzer/records.py) and their JSON forms: stable keys, round-trips, and findings
another release wrote kept key for key through import and merge."""

from __future__ import annotations

import contextlib
import json
import pickle
import sqlite3
from dataclasses import replace

from fuzzer.corpus import Corpus
from fuzzer.drawing.generate import generate_case
from fuzzer.judging.check import Finding
from fuzzer.oracle import BackendVerdict
from fuzzer.records import CaseRecord, CaseReply, CheckReply, FoundCase, ShrinkReply

FINDING_KEYS = ["backend", "verdict", "culprit", "signature", "max_error", "allowed", "detail", "error"]
VERDICT_KEYS = ["backend", "verdict", "max_error", "allowed", "output", "detail"]


def through_json(data: dict) -> dict:
    return json.loads(json.dumps(data))


def a_finding(**changes) -> Finding:
    return replace(Finding("torch-eager:cpu:float32", "mismatch", "relu", "mismatch | torch-eager:cpu:float32 | relu",
                           max_error=0.5, allowed=1e-4, detail="d"), **changes)


def test_finding_and_verdict_json_keys_are_the_stored_ones():
    """The corpus's `findings` and `verdicts` columns and every --json output hold exactly these keys, in this order."""
    assert list(a_finding().to_dict()) == FINDING_KEYS
    assert list(a_finding(node={"hostname": "h", "ip": "1.2.3.4"}).to_dict()) == FINDING_KEYS + ["node"]
    assert list(BackendVerdict("jax-jit:cpu:float32", "agree").to_dict()) == VERDICT_KEYS
    for record in (a_finding(), a_finding(node={"hostname": "h"}), BackendVerdict("b", "mismatch", 1.0, 0.5, 0, "x")):
        assert type(record).from_dict(through_json(record.to_dict())) == record


def test_a_finding_read_from_json_is_written_back_as_it_was():
    """An older release's finding (no 'detail', 'error') or a newer one's (an unknown key), keys in any order."""
    older = {"signature": "s", "verdict": "mismatch", "backend": "b", "culprit": "relu", "max_error": 1, "allowed": 1e-4}
    newer = {**older, "detail": "", "error": "", "rank": [1, 2]}
    for data in (older, newer):
        read = Finding.from_dict(data)
        assert json.dumps(read.to_dict()) == json.dumps(data)
        assert json.dumps(pickle.loads(pickle.dumps(read)).to_dict()) == json.dumps(data)  # through a worker's pipe too
    changed = Finding.from_dict(older)
    changed.signature, changed.detail = "t", "now set"
    assert changed.to_dict() == {**older, "signature": "t", "detail": "now set"}
    assert list(replace(changed, node={"hostname": "h"}).to_dict()) == FINDING_KEYS + ["node"]  # made anew: this release's form
    partial = {"backend": "jax-jit:cpu:float32", "verdict": "agree", "max_error": 1e-7, "allowed": 1e-4}
    assert BackendVerdict.from_dict(partial).to_dict() == partial


def test_records_round_trip_through_their_json_form():
    case, small = generate_case(3), generate_case(4, ["relu"])
    verdict = BackendVerdict("torch-eager:cpu:float32", "mismatch", 0.5, 1e-4, 0, "d")
    shrunk = ShrinkReply(a_finding().signature, small, {"final_nodes": 1}, "mismatch", [a_finding()], [verdict],
                         ["torch-eager:cpu:float32"])
    found = FoundCase(case, "mismatch", [a_finding()], ["torch-eager:cpu:float32", "jax-jit:cpu:float32"],
                      [verdict, BackendVerdict("jax-jit:cpu:float32", "agree")], [shrunk])
    reply = CaseReply(7, case.graph.op_names(), "small", found.backends, checked=2, found=[found],
                      seconds={"torch-eager:cpu:float32": 0.1}, worker_seconds=0.3, peak_rss_mb=300, node={"hostname": "h"})
    record = found.record(campaign_id=1, node=reply.node)
    for item in (shrunk, found, reply, record, shrunk.record(campaign_id=1, shrunk_from=5),
                 CheckReply("mismatch", [a_finding()], [verdict]), CheckReply.died(a_finding(verdict="crash", culprit="-"))):
        data = item.to_dict()
        again = type(item).from_dict(through_json(data))
        assert again.to_dict() == through_json(data)
    assert CaseRecord.from_dict(through_json(record.to_dict())).case.content_hash() == case.content_hash()
    assert [f.node for f in record.findings] == [{"hostname": "h"}] and found.findings[0].node is None


def test_check_reply_json_is_what_fuzz_replay_prints():
    """`fuzz replay --json`: verdict, findings, verdicts; a dead worker's finding stands in its verdicts."""
    died = a_finding(verdict="crash", culprit="-", detail="worker process killed by signal SIGSEGV")
    assert CheckReply.died(died).to_dict() == {"verdict": "crash", "findings": [died.to_dict()], "verdicts": [died.to_dict()]}


def test_import_and_merge_store_findings_as_the_file_has_them(tmp_path):
    """A hand-written or older finding keeps its keys (none added, unknown ones kept) through import
    and merge; the stored bytes are the same."""
    written = {"signature": "mismatch | torch-eager:cpu:float32 | relu", "verdict": "mismatch",
               "backend": "torch-eager:cpu:float32", "culprit": "relu", "seen_by": "a person"}
    with Corpus(tmp_path / "scratch.db") as scratch:
        case_id = scratch.add_case(CaseRecord(generate_case(2, ["relu"]), verdict="mismatch", backends=["torch-eager:cpu:float32"],
                                              verdicts=[BackendVerdict.from_dict({"backend": "torch-eager:cpu:float32",
                                                                                  "verdict": "mismatch"})]))
        exported = {**scratch.export_case(case_id), "findings": [written]}
    with Corpus(tmp_path / "a.db") as first:
        imported = first.import_case(through_json(exported))
        assert first.get_case(imported).findings == [written]
    with Corpus(tmp_path / "b.db") as second, Corpus(tmp_path / "a.db") as first:
        second.merge_from(first)
    stored = []
    for name in ("a.db", "b.db"):
        with contextlib.closing(sqlite3.connect(tmp_path / name)) as conn:
            stored.append(conn.execute("SELECT findings, verdicts FROM cases").fetchall())
    assert stored[0] == stored[1] == [(json.dumps([written]), "[]")]
    with Corpus(tmp_path / "c.db") as third, Corpus(tmp_path / "scratch.db") as scratch:
        third.merge_from(scratch)
        assert third.get_case(1).verdicts == [{"backend": "torch-eager:cpu:float32", "verdict": "mismatch"}]
