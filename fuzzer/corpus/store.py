"""Storing a case: its row and arrays, its findings filed in their buckets (fuzzer/triaging/buckets.py), and
the bounded corpus's dropping of the cases nothing needs any more (CaseStore).

A bounded corpus. A campaign that hits one frequent bug for an hour stores a few of its cases,
not thousands. Each bucket keeps in full
    first_case       its first generated case: the one the campaign's new-bucket line named,
    latest_case      its newest generated case: the bug as this release still shows it,
    representative   its smallest case, shrunk ones included: the reproducer;
shrunk cases are kept, with the case each came from, and every other finding is only counted on
the bucket row (count, last_seen, campaigns). `add_case(record, bounded=True)` (a campaign's
findings) deletes a case that a newer one displaced as latest or representative once nothing
needs it: no bucket keeps it, no case was shrunk from it, it is not a shrunk case, and a campaign
stored it (an imported case is never dropped). So nothing ever refers to a dropped case. A file
this release created gives the dropped cases' pages back at every checkpoint; an older one reuses them.
"""

from __future__ import annotations

import json

from fuzzer import jsonform, verdicts
from fuzzer.arrays import to_npy_bytes
from fuzzer.corpus.connection import CorpusFile, stored_json, utc_now
from fuzzer.corpus.schema import case_key, sorted_json
from fuzzer.records import CaseRecord
from fuzzer.triaging.buckets import bucket_signatures, describing


def _one_per_signature(findings: list[dict]) -> list[dict]:
    """The first finding of each signature: a case is one finding in a bucket, however many outputs show it."""
    first: dict[str, dict] = {}
    for finding in findings:
        first.setdefault(finding["signature"], finding)
    return list(first.values())


def _add_campaign(campaigns: dict[str, int], campaign_id: int | None) -> dict[str, int]:
    """A row's findings per campaign with one more of `campaign_id` (an imported case has none)."""
    if campaign_id is None:
        return campaigns
    return {**campaigns, str(campaign_id): campaigns.get(str(campaign_id), 0) + 1}


def primary_signature(verdict: str, findings: list[dict]) -> str | None:
    """The signature of the finding that gave the case its verdict (the first such), else the first finding's."""
    for finding in findings:
        if finding.get("verdict") == verdict:
            return finding["signature"]
    return findings[0]["signature"] if findings else None


class CaseStore(CorpusFile):
    """Adding cases: each stored once, its findings counted in their buckets and members."""

    def add_case(self, record: CaseRecord, bounded: bool = False) -> int:
        """Store the case, its arrays and its findings' buckets in one transaction; returns the case id.

        A case stored already (same graph and arrays, on any backends: `case_key`) is not stored again
        and counts no second time in its buckets: its existing id is returned, and the backends and
        findings new to it join its row (`_join_runs`). `bounded` (a campaign's
        findings): the cases this one displaces in its buckets are deleted once nothing needs them
        (see the module docstring), so a frequent bug grows the corpus by its counts only.
        """
        return self._store_case(record, bounded=bounded)[0]

    def _store_case(self, record: CaseRecord, bounded: bool = False, counts: bool = True) -> tuple[int, bool]:
        """(case id, whether it was added now). `counts`: a generated case added now is one more
        finding in its buckets (a merge counts its campaigns' findings from the buckets instead)."""
        case, campaign_id, verdict, backends = record.case, record.campaign_id, record.verdict, record.backends
        shrunk_from, shrink_log = record.shrunk_from, record.shrink_log
        findings = [finding.to_dict() for finding in record.findings]  # the row's JSON form from here on
        content_hash = case.content_hash()
        key = case_key(content_hash)
        arrays = {name: to_npy_bytes(value) for name, value in case.arrays.items()}
        element_count = int(sum(value.size for value in case.arrays.values()))
        node_count = len(case.graph.nodes)
        with self._write():
            if campaign_id is not None and not self._exists("campaigns", campaign_id):
                raise self._no_campaign(campaign_id)
            if shrunk_from is not None and not self._exists("cases", shrunk_from):
                raise self._no_case(shrunk_from)
            # By content hash: a row of an older release has a key that also holds its backends.
            existing = self._one("SELECT id, campaign_id, created, node_count, element_count, shrunk_from, backends, verdict, "
                                 "findings, verdicts FROM cases WHERE content_hash = ? AND case_key IS NOT NULL ORDER BY id",
                                 [content_hash])
            if existing is not None:
                displaced = self._join_runs(existing, record, findings, counts)
                if bounded:
                    self._drop_unneeded(displaced)
                return existing["id"], False
            now = record.created or utc_now()  # `created` keeps a merged case's original time
            case_id = self.db.execute(
                "INSERT INTO cases (campaign_id, created, content_hash, seed, graph, op_sequence, node_count, "
                "element_count, backends, verdict, signature, findings, shrunk_from, shrink_log, verdicts, case_key) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    campaign_id,
                    now,
                    content_hash,
                    int(case.seed),
                    case.graph.to_json(),
                    ">".join(case.graph.op_names()),
                    node_count,
                    element_count,
                    json.dumps(list(backends)),
                    verdict,
                    primary_signature(verdict, findings),
                    jsonform.dumps(findings),
                    shrunk_from,
                    None if shrink_log is None else jsonform.dumps(shrink_log),
                    jsonform.dumps([v.to_dict() for v in record.verdicts]),
                    key,
                ],
            ).lastrowid
            for name, blob in arrays.items():
                self.db.execute("INSERT INTO case_arrays (case_id, name, npy) VALUES (?, ?, ?)", [case_id, name, blob])
            stored = {"id": case_id, "campaign_id": campaign_id, "created": now, "node_count": node_count,
                      "element_count": element_count, "shrunk_from": shrunk_from}
            displaced = self._file_findings(findings, bucket_signatures(findings), stored,
                                            counts=counts and shrunk_from is None)
            if bounded:
                self._drop_unneeded(displaced)
        return case_id, True

    def _join_runs(self, stored: dict, record: CaseRecord, findings: list[dict], counts: bool) -> list[int]:
        """A stored case (its row `stored`) ran again, on backends that may differ: the backends, verdicts and
        findings (by signature) it did not have join its row, and the new findings are filed and counted as
        add_case files a new case's. Returns the cases displaced."""
        backends = json.loads(stored["backends"])
        known = {finding["signature"] for finding in json.loads(stored["findings"])}
        new_findings = [finding for finding in findings if finding["signature"] not in known]
        new_backends = [name for name in record.backends if name not in backends]
        if not new_findings and not new_backends:
            return []
        all_findings = json.loads(stored["findings"]) + new_findings
        verdict = verdicts.worst([stored["verdict"], record.verdict])
        backend_verdicts = json.loads(stored["verdicts"] or "[]")
        backend_verdicts += [v.to_dict() for v in record.verdicts if v.backend in new_backends]
        self.db.execute("UPDATE cases SET backends = ?, verdict = ?, signature = ?, findings = ?, verdicts = ? WHERE id = ?",
                        [json.dumps(backends + new_backends), verdict, primary_signature(verdict, all_findings),
                         jsonform.dumps(all_findings), jsonform.dumps(backend_verdicts), stored["id"]])
        return self._file_findings(new_findings, bucket_signatures(new_findings), stored,
                                   counts=counts and stored["shrunk_from"] is None)

    def _file_findings(self, findings: list[dict], keys: list[str], case: dict, counts: bool) -> list[int]:
        """Put a stored case's findings in their buckets (`keys`, fuzzer/triaging/buckets.py): the case once
        in each bucket, each finding signature once among its members. Returns the cases displaced."""
        by_bucket: dict[str, list[dict]] = {}
        for finding, key in zip(findings, keys):
            by_bucket.setdefault(key, []).append(finding)
        displaced = []
        for key, held in by_bucket.items():
            displaced += self._bump_bucket(key, describing(held), case, counts)
            for finding in _one_per_signature(held):
                self._bump_member(key, finding, case["campaign_id"], counts)
        return displaced

    def _bump_member(self, bucket: str, finding: dict, campaign_id: int | None = None, counts: bool = False) -> None:
        """The finding's signature as a member of `bucket`, created if new: one more finding (of
        `campaign_id`) if `counts`."""
        self.db.execute("INSERT OR IGNORE INTO members (bucket, signature, verdict, backend, culprit) VALUES (?, ?, ?, ?, ?)",
                        [bucket, finding["signature"], finding["verdict"], finding["backend"], finding["culprit"]])
        if counts:
            row = self._one("SELECT campaigns FROM members WHERE bucket = ? AND signature = ?", [bucket, finding["signature"]])
            campaigns = _add_campaign(stored_json(row["campaigns"]) or {}, campaign_id)
            self.db.execute("UPDATE members SET count = count + 1, campaigns = ? WHERE bucket = ? AND signature = ?",
                            [sorted_json(campaigns), bucket, finding["signature"]])

    def _bump_bucket(self, signature: str, finding: dict, case: dict, counts: bool) -> list[int]:
        """Put a stored case (its `cases` row: id, campaign_id, created, node_count, element_count,
        shrunk_from) in bucket `signature`, creating it (showing `finding`'s verdict, backend and
        culprit): one more finding there if `counts`, and the cases the bucket keeps (module
        docstring) updated. Returns the cases it displaced."""
        generated = case["shrunk_from"] is None
        row = self._one(
            "SELECT b.latest_case, b.representative, b.campaigns, r.node_count AS nodes, "
            "r.element_count AS elements, l.created AS latest_created FROM buckets b "
            "LEFT JOIN cases r ON r.id = b.representative LEFT JOIN cases l ON l.id = b.latest_case WHERE b.signature = ?",
            [signature],
        )
        if row is None:  # a new bucket, keeping this case in every role it can take; counted below
            kept = case["id"] if generated else None
            self.db.execute(
                "INSERT INTO buckets (signature, verdict, backend, culprit, first_seen, last_seen, count, representative, "
                "first_case, latest_case) VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, ?)",
                [signature, finding["verdict"], finding["backend"], finding["culprit"], case["created"], case["created"],
                 case["id"], kept, kept],
            )
            row = {"latest_case": kept, "representative": case["id"], "campaigns": "{}", "nodes": case["node_count"],
                   "elements": case["element_count"], "latest_created": case["created"] if generated else None}
        size = (case["node_count"], case["element_count"] or 0)
        smaller = row["nodes"] is None or size < (row["nodes"], float("inf") if row["elements"] is None else row["elements"])
        newer = generated and (row["latest_created"] is None or case["created"] >= row["latest_created"])
        campaigns = stored_json(row["campaigns"]) or {}
        if counts:
            campaigns = _add_campaign(campaigns, case["campaign_id"])
        self.db.execute(
            "UPDATE buckets SET count = count + ?, last_seen = max(last_seen, ?), campaigns = ?, "
            "first_case = coalesce(first_case, ?), latest_case = CASE WHEN ? THEN ? ELSE latest_case END, "
            "representative = CASE WHEN ? THEN ? ELSE representative END WHERE signature = ?",
            [int(counts), case["created"], sorted_json(campaigns), case["id"] if generated else None, int(newer), case["id"],
             int(smaller), case["id"], signature],
        )
        return [old for old, taken in ((row["latest_case"], newer), (row["representative"], smaller))
                if taken and old not in (None, case["id"])]

    def _drop_unneeded(self, case_ids: list[int]) -> None:
        """Delete each of `case_ids` that nothing needs any more (module docstring): a case a campaign
        stored, not shrunk itself, with no case shrunk from it and kept by no bucket."""
        for case_id in dict.fromkeys(case_ids):
            needed = self.db.execute(
                "SELECT campaign_id IS NULL OR shrunk_from IS NOT NULL "
                "OR EXISTS (SELECT 1 FROM cases WHERE shrunk_from = :id) "
                "OR EXISTS (SELECT 1 FROM buckets WHERE :id IN (first_case, latest_case, representative)) "
                "FROM cases WHERE id = :id", {"id": case_id}).fetchone()
            if needed is not None and not needed[0]:
                self.db.execute("DELETE FROM case_arrays WHERE case_id = ?", [case_id])
                self.db.execute("DELETE FROM cases WHERE id = ?", [case_id])
