"""Cases moving between corpora: merging another corpus file (`fuzz merge`), exporting a case as a
self-contained file and importing it back (`fuzz export`, `fuzz import`), each with the triage of
its buckets (Merge)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

from fuzzer.arrays import to_base64
from fuzzer.corpus.case_forms import EXPORT_FORMAT, EXPORT_VERSION, imported_case
from fuzzer.corpus.connection import CorpusFile
from fuzzer.corpus.schema import sorted_json
from fuzzer.errors import UserError
from fuzzer.running.campaign_config import check_campaign_row
from fuzzer.triaging.buckets import stored_buckets


def _checked_tallies(row: dict, what: str, path: Path) -> dict[str, int]:
    """A bucket's or member's findings per campaign as another corpus has them; refused if malformed."""
    tallies = row["campaigns"]
    if not isinstance(tallies, dict) or not all(isinstance(key, str) and key.isdigit() and isinstance(n, int) and n >= 0
                                                for key, n in tallies.items()):
        raise UserError(f"Nothing merged: {what} of '{path}' has malformed campaign counts "
                        f"({tallies!r:.80}); the corpus was changed by something other than the fuzzer.")
    return tallies


def _raised(ours: dict[str, int], theirs: dict[str, int], campaigns: dict[int, int]) -> tuple[int, dict[str, int]]:
    """(findings added, our findings per campaign) once each of their campaigns' counts (`campaigns`
    maps their ids to ours) is raised here to theirs."""
    raised, added = dict(ours), 0
    for their_id, findings in theirs.items():
        our_id = campaigns.get(int(their_id))
        if our_id is not None and findings > raised.get(str(our_id), 0):
            added += findings - raised.get(str(our_id), 0)
            raised[str(our_id)] = findings
    return added, raised


def _how_far(campaign: dict) -> tuple[int, bool]:
    """(cases run, finished) of a campaign row: a merged copy takes a row further along than itself."""
    cases_run = campaign["cases_run"]
    return cases_run if isinstance(cases_run, int) else 0, campaign["status"] == "finished"


class Merge(CorpusFile):
    """Another corpus merged in, and cases exported and imported, in one transaction each."""

    # ---- merging corpora from several machines

    def merge_all(self, others: list["Corpus"]) -> dict[str, dict]:
        """merge_from for each corpus, all in one transaction: one refused file leaves this corpus as it was."""
        self.check_pages()
        with self._write():
            return {str(other.path): self.merge_from(other) for other in others}

    def check_mergeable(self) -> None:
        """Refuse, in one sentence, a corpus to merge that is damaged or has a malformed campaign row."""
        self.check_pages()
        self.check_campaign_rows()

    def check_pages(self) -> None:
        """Refuse a file with a damaged page (a zeroed one reads back as no rows, or breaks the pointer map):
        a merge reads or writes all of it, so sqlite's quick_check is worth its one pass over the file (once:
        `fuzz merge` checks every file before it creates --db, then merges)."""
        if self.pages_checked:
            return
        try:
            problem = self.db.execute("PRAGMA quick_check(1)").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            problem = str(exc)
        if problem != "ok":
            raise UserError(f"Nothing merged: '{self.path}' is damaged (sqlite's quick_check: {problem.splitlines()[-1]}); "
                            f"restore it from a copy, or salvage what it holds with `sqlite3 {self.path} .recover`.")
        self.pages_checked = True

    def check_campaign_rows(self) -> None:
        """Refuse, in one sentence, a campaign row whose config or checkpoint is not of the shape and bounds
        `fuzz run` writes (fuzzer/running/campaign_config.py): merged, it would reach every reader of the target."""
        for row in self.campaigns():
            try:
                check_campaign_row(row)
            except UserError as exc:
                raise UserError(f"Nothing merged: campaign {row['id']} of '{self.path}' is refused: {exc}.") from None

    def merge_from(self, other: "Corpus") -> dict:
        """Copy another corpus's campaigns, cases (with arrays and shrink links), triage and release
        checks into this one.

        One transaction: a case refused half-way (a hostile or broken file) leaves this corpus as it
        was. Campaigns are matched by uuid and cases by content (`case_key`), so merging a file again,
        a renamed copy of it, or a corpus into itself adds nothing. A bucket still 'new' here takes
        the other's triage; every bucket takes its release checks, the newer of two checks of the
        same release winning. Findings of the other's campaigns are counted from its buckets' counts
        per campaign (_merge_counts), which hold the findings it did not keep too; the cases it kept
        are all copied.
        """
        other.check_mergeable()
        with self._write(), other.snapshot():
            have = {row["uuid"]: row["id"] for row in self._rows("SELECT id, uuid FROM campaigns WHERE uuid IS NOT NULL")}
            campaigns, new_campaigns = {}, 0
            for row in other.campaigns():
                if row["uuid"] in have:
                    campaigns[row["id"]] = have[row["uuid"]]
                    self._advance_copy(have[row["uuid"]], row)
                    continue
                new_id = self.start_campaign(row["config"], row["seed"], row["versions"], lease=False)
                self.db.execute("UPDATE campaigns SET uuid = coalesce(?, uuid), started = ? WHERE id = ?",
                                [row["uuid"], row["started"], new_id])
                self._take_progress(new_id, row)
                campaigns[row["id"]] = have[row["uuid"]] = new_id
                new_campaigns += 1
            cases, added = {}, 0
            for row in other._rows("SELECT id FROM cases ORDER BY id"):
                try:
                    stored = other.get_case(row["id"])
                    record = stored.record()
                except UserError as exc:
                    raise UserError(f"Nothing merged: case {row['id']} of '{other.path}' is refused: {exc}") from None
                campaign_id = campaigns.get(stored.campaign_id)
                cases[stored.id], is_new = self._store_case(
                    replace(record, campaign_id=campaign_id, shrunk_from=cases.get(stored.shrunk_from)), counts=campaign_id is None
                )
                added += is_new
            triaged = 0
            for bucket in other.buckets():
                self._merge_counts(bucket, campaigns, other.path)
                triaged += self._take_triage(bucket["signature"], bucket)
                ours = self.bucket(bucket["signature"])
                if ours is not None:  # its cases came here: so do its release checks, and a localization ours lacks
                    self._take_release_checks(ours["signature"], bucket["release_checks"], cases, other.path)
                    self.db.execute("UPDATE buckets SET localization = coalesce(localization, ?) WHERE signature = ?",
                                    [bucket.get("localization"), ours["signature"]])
        return {"campaigns_added": new_campaigns, "cases_added": added, "cases_already_here": len(cases) - added,
                "buckets_triaged": triaged}

    def _take_progress(self, our_id: int, theirs: dict) -> None:
        """Campaign `our_id` (a merged copy) takes another corpus's row's progress and how it ended; one
        still running there is `interrupted` here until a later merge brings it further (_advance_copy)."""
        self.checkpoint(our_id, theirs.get("checkpoint") or {}, theirs["cases_run"], theirs["findings"])
        self.finish_campaign(our_id, "finished" if theirs["status"] == "finished" else "interrupted")

    def _advance_copy(self, our_id: int, theirs: dict) -> None:
        """A campaign merged before, further along there now (it was running then): its copy here, unless
        a process here runs it, takes its progress: merging a live corpus must not freeze its campaign here."""
        ours = self.campaign(our_id)
        if _how_far(theirs) > _how_far(ours) and ours["lease_pid"] is None:
            self._take_progress(our_id, theirs)

    def _merge_counts(self, theirs: dict, campaigns: dict[int, int], path: Path) -> None:
        """Take another corpus's findings per campaign of one of its buckets and of each of its members
        (`campaigns` maps its campaign ids to ours): a campaign's count here rises to theirs, so
        merging the same file again adds nothing."""
        ours = self.bucket(theirs["signature"])
        if ours is None or ours["signature"] != theirs["signature"]:
            return  # none of its cases came here
        added, tallies = _raised(ours["campaigns"], _checked_tallies(theirs, f"bucket '{theirs['signature']}'", path), campaigns)
        if added:
            self.db.execute("UPDATE buckets SET count = count + ?, campaigns = ?, first_seen = min(first_seen, ?), "
                            "last_seen = max(last_seen, ?) WHERE signature = ?",
                            [added, sorted_json(tallies), theirs["first_seen"], theirs["last_seen"], theirs["signature"]])
        our_members = {member["signature"]: member for member in ours["members"]}
        for member in theirs["members"]:
            if member["signature"] not in our_members:  # no finding of it came here with the cases: counted from theirs
                self._bump_member(ours["signature"], member)
            mine = our_members.get(member["signature"], {"campaigns": {}})
            added, tallies = _raised(mine["campaigns"], _checked_tallies(member, f"member '{member['signature']}'", path),
                                     campaigns)
            if added:
                self.db.execute("UPDATE members SET count = count + ?, campaigns = ? WHERE bucket = ? AND signature = ?",
                                [added, sorted_json(tallies), ours["signature"], member["signature"]])

    # ---- export / import

    def export_case(self, case_id: int, expect: str | None = None) -> dict:
        """A JSON-able, self-contained description of the case (arrays as base64 .npy), with the
        triage of its buckets when a person or the registry settled it (`triage`, see case_triage)."""
        stored = self.get_case(case_id)
        data = {
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "graph": stored.case.graph.to_dict(),
            "arrays": {name: to_base64(value) for name, value in stored.case.arrays.items()},
            "seed": stored.case.seed,
            "verdict": stored.verdict,
            "findings": stored.findings,
            "backends": stored.backends,
        }
        triage = self.case_triage(stored.findings)
        if triage:
            data["triage"] = triage
        if expect is not None:
            data["expect"] = expect
        return data

    def case_triage(self, findings: list[dict]) -> list[dict]:
        """The triage of the buckets a case's findings are in, those not `new`: one {bucket, findings
        (the signatures of the case's findings in it), status, note, known_bug} each. An import takes
        it by the findings' signatures, whatever the buckets are called where it lands."""
        entries: dict[str, dict] = {}
        for finding, key in zip(findings, self._buckets_of(findings)):
            bucket = self.bucket(key)
            if bucket is not None and bucket["status"] != "new":
                entry = entries.setdefault(key, {"bucket": key, "findings": [], "status": bucket["status"],
                                                 "note": bucket["note"], "known_bug": bucket["known_bug"]})
                entry["findings"] = list(dict.fromkeys(entry["findings"] + [finding["signature"]]))
        return list(entries.values())

    def _buckets_of(self, findings: list[dict]) -> list[str]:
        """The bucket each of a stored case's findings is counted in here (buckets.stored_buckets)."""
        signatures = json.dumps([finding["signature"] for finding in findings])
        member_of: dict[str, list[str]] = {}
        for row in self._rows("SELECT signature, bucket FROM members WHERE signature IN (SELECT value FROM json_each(?)) "
                              "ORDER BY rowid", [signatures]):
            member_of.setdefault(row["signature"], []).append(row["bucket"])
        return stored_buckets(findings, member_of)

    def _take_triage(self, signature: str, triage: dict) -> int:
        """Give bucket `signature`, if it is still `new` here, another corpus's or file's triage (a
        status, note and known bug); returns 1 if it took it, else 0."""
        if triage["status"] == "new":
            return 0
        return self.db.execute("UPDATE buckets SET status = ?, note = coalesce(note, ?), known_bug = coalesce(known_bug, ?) "
                               "WHERE signature = ? AND status = 'new'",
                               [triage["status"], triage.get("note"), triage.get("known_bug"), signature]).rowcount

    def import_cases(self, exported: list[dict]) -> dict:
        """Store exported cases in one transaction: {"imported": ids, "already_here": ids}. A case's
        triage (export_case) goes to its findings' buckets that are still `new` here.

        Every case is validated before anything is written; a case stored already is not stored again.
        """
        checked = [imported_case(data) for data in exported]
        result: dict[str, list[int]] = {"imported": [], "already_here": []}
        with self._write():
            for record, triage in checked:
                case_id, is_new = self._store_case(record)
                result["imported" if is_new else "already_here"].append(case_id)
                findings = [finding.to_dict() for finding in record.findings]
                for finding, key in zip(findings, self._buckets_of(findings)):
                    for entry in triage:
                        if finding["signature"] in entry["findings"]:
                            self._take_triage(key, entry)
        return result

    def import_case(self, data: dict) -> int:
        """Validate an exported case completely, then store it (campaign None) with its triage; returns
        its id. Nothing is written on error."""
        result = self.import_cases([data])
        return (result["imported"] + result["already_here"])[0]
