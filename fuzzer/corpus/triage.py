"""Triage of a corpus's buckets: a status and note a person gives a bucket, the known bug it is, and
regrouping every stored finding under new signature rules (`fuzz rebucket`, the upgrade to
schema 6; fuzzer/triaging/buckets.py, plan_regroup) (Triage)."""

from __future__ import annotations

from typing import Callable

from fuzzer import jsonform
from fuzzer.corpus.connection import CorpusFile, stored_json
from fuzzer.corpus.schema import sorted_json
from fuzzer.corpus.store import primary_signature
from fuzzer.corpus.stored_rows import checked_case_row, checked_member_row
from fuzzer.errors import UserError
from fuzzer.triaging.buckets import check_status, own_bucket, pass_label, plan_regroup


class Triage(CorpusFile):
    """Setting a bucket's triage status, note and known bug, and regrouping buckets."""

    def triage(self, handle: str | int, status: str, note: str | None = None) -> dict:
        """Set the triage status (and note, if given) of the bucket `handle` names (B7, or case 7's
        one bucket: Queries.named_bucket), which all its members share; returns the bucket."""
        check_status(status)
        with self._write():
            bucket = self.named_bucket(handle)
            self.db.execute("UPDATE buckets SET status = ?, note = coalesce(?, note) WHERE signature = ?",
                            [status, note, bucket["signature"]])
        return self.bucket(bucket["signature"])

    def record_localization(self, signature: str, localization: dict) -> str:
        """Store what `fuzz localize` named (pass_bisect.PassVerdict.stored) for a case of bucket `signature`;
        returns the bucket it is kept on. The pass joins a compiler bucket's identity (fuzzer/triaging/buckets.py,
        "The pass"): where the bucket already names another pass, found on another case, this case's
        findings of the bucket (and those of the cases it was shrunk from) take the new pass and move to a
        bucket of their own, triaged afresh. Otherwise it replaces the bucket's older localization, unless
        it names nothing where the older one, of another case, named a pass."""
        with self._write():
            row = self._one("SELECT id, localization FROM buckets WHERE signature = ?", [signature])
            if row is None:
                raise UserError(f"No bucket '{signature}' in {self.path}; run `fuzz list` to see the buckets.")
            old = stored_json(row["localization"])
            new_label, old_label = pass_label(localization["passes"]), old and pass_label(old.get("passes", []))
            # A localization stored before they named their case was of the representative: not another case.
            other_case = old is not None and old.get("case") is not None and old["case"] != localization.get("case")
            if other_case and old_label and new_label and new_label != old_label and localization.get("case"):
                return self._split_by_pass(signature, row["id"], localization, new_label, old_label)
            if not (other_case and old_label and not new_label):
                self.db.execute("UPDATE buckets SET localization = ? WHERE signature = ?", [sorted_json(localization), signature])
            return signature

    def _split_by_pass(self, signature: str, bucket_id: int, localization: dict, label: str, old_label: str) -> str:
        """record_localization's split: the localized case and its origins give their findings of bucket
        `signature` the pass `label`, the buckets regroup (as `fuzz rebucket` does), and the new bucket
        keeps the localization, status new."""
        chain, case_id = [], localization["case"]
        while case_id is not None:
            row = self._one("SELECT id, findings, shrunk_from FROM cases WHERE id = ?", [case_id])
            if row is None:
                break
            chain.append(checked_case_row(row, self.path))
            case_id = row["shrunk_from"]
        moved = None
        for row in chain:
            findings = row["findings"]
            held = self._buckets_of(findings)
            marked = [{**finding, "compiler_pass": label} if bucket == signature else finding
                      for finding, bucket in zip(findings, held)]
            moved = moved or next((own_bucket(f) for f, bucket in zip(marked, held) if bucket == signature), None)
            self.db.execute("UPDATE cases SET findings = ? WHERE id = ?", [jsonform.dumps(marked), row["id"]])
        if moved is None:
            raise UserError(f"Case {localization['case']} has no finding in bucket B{bucket_id}; localize one of its cases.")
        self.resign_findings(lambda finding: finding["signature"], merged_by="`fuzz localize`")
        self.db.execute("UPDATE buckets SET localization = ?, status = 'new', known_bug = NULL, note = ? WHERE signature = ?",
                        [sorted_json(localization), f"split from B{bucket_id} by `fuzz localize`: pass {label}, not "
                         f"{old_label}", moved])
        return moved

    def mark_known(self, signature: str, bug_id: str, keep_triage: bool = True) -> None:
        """Record that a bucket is the known bug `bug_id`, with status `known` unless `keep_triage` and a
        person triaged it already (a campaign keeps their status; `fuzz known add` replaces it)."""
        with self._write():
            self.db.execute("UPDATE buckets SET known_bug = ?, status = CASE WHEN ? AND status != 'new' THEN status "
                            "ELSE 'known' END WHERE signature = ?", [bug_id, int(keep_triage), signature])

    def resign_findings(self, resign: Callable[[dict], str], dry_run: bool = False, merged_by: str = "`fuzz rebucket`") -> dict:
        """Give every stored finding the signature `resign(finding)` and regroup the buckets under this
        release's rules (fuzzer/triaging/buckets.py, plan_regroup): buckets whose findings now share one merge,
        keeping their triage, counts and release checks; the cases each keeps are chosen again from the
        stored cases, in the order they were stored, as add_case chose them. One transaction; with `dry_run`
        nothing is written."""
        with self._write():
            cases = self._rows("SELECT id, campaign_id, verdict, findings, node_count, element_count, created, shrunk_from "
                               "FROM cases ORDER BY id")
            cases = [checked_case_row(row, self.path) for row in cases]
            buckets = {row["signature"]: row for row in self._bucket_rows("SELECT * FROM buckets")}
            members = [checked_member_row(row, self.path) for row in self._rows("SELECT * FROM members ORDER BY rowid")]
            plan = plan_regroup(cases, buckets, members, resign, merged_by)
            summary = plan.summary(len(cases), len(buckets), dry_run)
            if dry_run or not (plan.changed or summary["changes"]):
                return summary
            for row in cases:
                if row["id"] in plan.changed:
                    findings = plan.findings[row["id"]]
                    self.db.execute("UPDATE cases SET findings = ?, signature = ? WHERE id = ?",
                                    [jsonform.dumps(findings), primary_signature(row["verdict"], findings), row["id"]])
            self.db.execute("DELETE FROM members")
            for signature in plan.old_buckets:
                self.db.execute("DELETE FROM buckets WHERE signature = ?", [signature])
            for row in cases:  # the kept cases and first/last seen, from the stored cases; the counts below
                self._file_findings(plan.findings[row["id"]], plan.keys[row["id"]], row, counts=False)
            for signature, bucket in plan.buckets.items():
                described = bucket["described"]
                if described is not None:  # a bucket with no stored case: its row as its members describe it
                    self.db.execute("INSERT OR IGNORE INTO buckets (signature, verdict, backend, culprit, first_seen, last_seen) "
                                    "VALUES (?, ?, ?, ?, ?, ?)", [signature, described["verdict"], described["backend"],
                                                                  described["culprit"], bucket["first_seen"], bucket["last_seen"]])
                self.db.execute("UPDATE buckets SET status = ?, note = ?, known_bug = ?, localization = ?, count = ?, campaigns = ?, "
                                "first_seen = min(first_seen, coalesce(?, first_seen)), "
                                "last_seen = max(last_seen, coalesce(?, last_seen)) WHERE signature = ?",
                                [bucket["status"], bucket["note"], bucket["known_bug"], bucket["localization"], bucket["tally"].count,
                                 sorted_json(bucket["tally"].campaigns), bucket["first_seen"], bucket["last_seen"], signature])
            for (signature, finding_signature), member in plan.members.items():
                if member["described"] is not None:
                    self._bump_member(signature, member["described"])
                self.db.execute("UPDATE members SET count = ?, campaigns = ? WHERE bucket = ? AND signature = ?",
                                [member["tally"].count, sorted_json(member["tally"].campaigns), signature, finding_signature])
            self._move_release_checks(plan.sources)
            self._keep_bucket_ids(plan.sources, {signature: buckets[signature]["id"] for signature in plan.old_buckets})
        return summary

    def _keep_bucket_ids(self, sources: dict[str, list[str]], old_ids: dict[str, int]) -> None:
        """After a regrouping, a bucket keeps its id (`fuzz triage B7` still names it), and a bucket
        made of old ones takes the smallest of their ids that no other took; one left without keeps
        the new id it was given. `old_ids`: the ids of the old buckets the regrouping replaced."""
        free = set(old_ids.values())
        for new in sorted(sources, key=lambda signature: signature not in old_ids):  # unchanged buckets first
            own = old_ids.get(new)
            ids = [own] if own in free else sorted(old_ids[old] for old in sources[new] if old_ids.get(old) in free)
            if ids:
                self.db.execute("UPDATE buckets SET id = ? WHERE signature = ?", [ids[0], new])
                free.discard(ids[0])
