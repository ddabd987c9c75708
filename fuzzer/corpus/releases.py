"""What a bucket's bug does in other releases: the outcomes of `fuzz replay ID --on ENV` (fuzzer/triaging/release_checks.py),
one row per bucket, environment and set of versions, the newest check of each kept (ReleaseChecks)."""

from __future__ import annotations

import json

from pathlib import Path

from fuzzer.corpus.connection import CorpusFile, stored_json, utc_now
from fuzzer.corpus.schema import sorted_json
from fuzzer.errors import UserError

PRESENT, FIXED, DIFFERS, CANNOT_RUN = "present", "fixed", "differs", "cannot-run"
OUTCOMES = (PRESENT, FIXED, DIFFERS, CANNOT_RUN)  # what fuzzer/triaging/release_checks.py decides

# The newest check of a release wins; the same check again (a merge repeated) changes nothing.
_PUT = ("INSERT INTO release_checks (bucket, environment, versions, case_id, outcome, detail, checked_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (bucket, environment, versions) DO UPDATE SET "
        "case_id = excluded.case_id, outcome = excluded.outcome, detail = excluded.detail, checked_at = excluded.checked_at "
        "WHERE excluded.checked_at > release_checks.checked_at OR (excluded.checked_at = release_checks.checked_at AND "
        "(excluded.outcome, excluded.detail) != (release_checks.outcome, release_checks.detail))")


class ReleaseChecks(CorpusFile):
    """Recording, reading and carrying (merge, rebucket) the release checks of buckets."""

    def record_release_checks(self, bucket: str, case_id: int, checks: list[dict]) -> None:
        """Store checks of bucket `bucket` made now on its case `case_id`, each {environment, versions
        (a dict), outcome, detail}, in one transaction; each replaces the row of the same environment
        and versions."""
        checked_at = utc_now()
        with self._write():
            for check in checks:
                self._put_release_check({**check, "bucket": bucket, "case_id": case_id, "checked_at": checked_at})

    def _put_release_check(self, row: dict) -> None:
        """Write one check (versions as a dict) unless the row of its bucket, environment and versions
        is newer or the same."""
        self.db.execute(_PUT, [row["bucket"], row["environment"], sorted_json(row["versions"]), row["case_id"],
                               row["outcome"], row["detail"], row["checked_at"]])

    def _release_checks_of(self, buckets: list[str]) -> dict[str, list[dict]]:
        """The checks of each of these buckets, newest first: {environment, versions, case_id, outcome, detail, checked_at}."""
        checks: dict[str, list[dict]] = {bucket: [] for bucket in buckets}
        for row in self._rows("SELECT * FROM release_checks WHERE bucket IN (SELECT value FROM json_each(?)) "
                              "ORDER BY checked_at DESC, environment, versions", [json.dumps(buckets)]):
            checks[row.pop("bucket")].append({**row, "versions": stored_json(row["versions"])})
        return checks

    def _take_release_checks(self, bucket: str, checks: list[dict], case_ids: dict[int, int], path: Path) -> None:
        """Another corpus's (at `path`) checks of one of its buckets, onto `bucket` here (`case_ids` maps
        its case ids to ours); refused in one sentence if one is not of the form `fuzz replay --on` writes."""
        for check in checks:
            versions = check["versions"]
            if not (check["outcome"] in OUTCOMES and isinstance(versions, dict) and isinstance(check["environment"], str)
                    and isinstance(check["detail"], str) and isinstance(check["checked_at"], str)
                    and all(isinstance(key, str) and isinstance(value, str) for key, value in versions.items())):
                raise UserError(f"Nothing merged: a release check of bucket '{bucket}' in '{path}' is malformed "
                                f"({check['outcome']!r:.40}, {versions!r:.80}); the corpus was changed by something other "
                                "than the fuzzer.")
            self._put_release_check({**check, "bucket": bucket, "case_id": case_ids.get(check["case_id"])})

    def _move_release_checks(self, sources: dict[str, list[str]]) -> None:
        """After a regrouping (Triage.resign_findings): each new bucket takes the checks of the old buckets
        it takes (`sources`: new bucket -> old ones), and the checks of buckets that are gone go."""
        checks = self._release_checks_of(sorted({old for olds in sources.values() for old in olds}))
        for new, olds in sources.items():
            for old in olds:
                if old != new:
                    for check in checks[old]:
                        self._put_release_check({**check, "bucket": new})
        self.db.execute("DELETE FROM release_checks WHERE bucket NOT IN (SELECT signature FROM buckets)")
