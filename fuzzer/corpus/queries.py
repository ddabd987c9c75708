"""Reading a corpus: a stored case, lists and counts of cases and buckets under `fuzz list`'s
filters, and the figures of `fuzz stats` (Queries)."""

from __future__ import annotations

import json
import re

from fuzzer import verdicts as verdict_table
from fuzzer.arrays import from_npy_bytes
from fuzzer.corpus.case_forms import StoredCase
from fuzzer.corpus.connection import CorpusFile
from fuzzer.corpus.integrity import verify_content
from fuzzer.corpus.stored_rows import checked_bucket_row, checked_case_row, checked_member_row
from fuzzer.errors import UserError
from fuzzer.ir import Case, Graph
from fuzzer.ops import get_op
from fuzzer.records import Signature, needed_arrays
from fuzzer.triaging.buckets import check_status

# The bucket of a case: the one its primary finding is a member of.
_CASE_BUCKET = "(SELECT m.bucket FROM members m WHERE m.signature = c.signature ORDER BY m.rowid LIMIT 1)"
# A backend filter matches a full name or a kind: "jax-jit" finds "jax-jit:cpu:float32".
_BACKEND_MATCH = "({column} = ? OR substr({column}, 1, length(?) + 1) = ? || ':')"
_OP_MATCH = "instr('>' || {column} || '>', '>' || ? || '>') > 0"


_BUCKET_HANDLE = re.compile(r"[Bb](\d+)")


def parse_handle(handle: str | int) -> tuple[str, int]:
    """What a command-line ID names: 'B7' -> ('bucket', 7), '7' -> ('case', 7). A bucket's handle
    carries a letter so that it can never be read as a case's id."""
    text = str(handle).strip()
    match = _BUCKET_HANDLE.fullmatch(text)
    if match:
        return "bucket", int(match.group(1))
    if text.isdigit():
        return "case", int(text)
    raise UserError(f"'{text}' is neither a case id (7) nor a bucket id (B7); `fuzz list` shows both.")


class Queries(CorpusFile):
    """Cases and buckets read back, listed, counted and summed up; never a write."""

    # ---- cases

    def get_case(self, case_id: int) -> StoredCase:
        row = self._one("SELECT * FROM cases WHERE id = ?", [case_id])
        if row is None:
            raise self._no_case(case_id)
        row = checked_case_row(row, self.path)
        graph = Graph.from_json(row["graph"])
        needed = needed_arrays(graph)  # the shape rules and resource bounds, before any array is read
        arrays = {}
        for item in self._rows("SELECT name, npy FROM case_arrays WHERE case_id = ? ORDER BY rowid", [case_id]):
            if item["name"] not in needed:
                raise UserError(f"Case {case_id} in {self.path} carries an array {item['name']!r} that its graph does "
                                "not use; the corpus was changed by something other than the fuzzer.")
            arrays[item["name"]] = from_npy_bytes(item["npy"], f"array '{item['name']}' of case {case_id}", needed[item["name"]])
        case = Case(graph, arrays, row["seed"])
        case.validate()
        verify_content(case_id, row["content_hash"], row["graph"], case, self.path)  # a changed byte is refused
        return StoredCase(
            id=row["id"],
            case=case,
            campaign_id=row["campaign_id"],
            created=row["created"],
            verdict=row["verdict"],
            signature=row["signature"],
            findings=row["findings"],
            backends=row["backends"],
            shrunk_from=row["shrunk_from"],
            shrink_log=row["shrink_log"],
            verdicts=row["verdicts"],
            content_hash=row["content_hash"],
            op_sequence=row["op_sequence"],
        )

    def list_cases(
        self,
        status: str | None = None,
        verdict: str | None = None,
        backend: str | None = None,
        op: str | None = None,
        limit: int = 100,
    ) -> list[dict]:
        """Newest first. Each dict: the case row without graph/shrink_log, JSON decoded, plus its bucket's `status`.

        `backend` is a stored backend's full name or its kind ("jax-jit"); every filter is checked
        (see check_filters) so a misspelt one is an error, not an empty answer.
        """
        condition, params = self._case_condition(status, verdict, backend, op)
        sql = (
            "SELECT c.id, c.campaign_id, c.created, c.content_hash, c.seed, c.op_sequence, c.node_count, "
            "c.element_count, c.backends, c.verdict, c.signature, c.findings, c.shrunk_from, b.status AS status "
            f"FROM cases c LEFT JOIN buckets b ON b.signature = {_CASE_BUCKET}{condition} ORDER BY c.id DESC LIMIT ?"
        )
        return [checked_case_row(row, self.path) for row in self._rows(sql, params + [int(limit)])]

    def stored_by_campaign(self, campaign_id: int) -> dict:
        """{"found": cases a campaign stored as it found them, "shrunk": their shrunk reproducers}: a
        bucket stores a few cases and counts the rest, so "found" is at most the campaign's finding count."""
        row = self._one("SELECT count(*) - count(shrunk_from) AS found, count(shrunk_from) AS shrunk FROM cases "
                        "WHERE campaign_id = ?", (campaign_id,))
        return {"found": row["found"], "shrunk": row["shrunk"]}

    def count_cases(self, status: str | None = None, verdict: str | None = None, backend: str | None = None,
                    op: str | None = None) -> int:
        """How many cases list_cases would return without a limit."""
        condition, params = self._case_condition(status, verdict, backend, op)
        return self._one(f"SELECT count(*) AS n FROM cases c LEFT JOIN buckets b ON b.signature = {_CASE_BUCKET}{condition}",
                         params)["n"]

    def _case_condition(self, status, verdict, backend, op) -> tuple[str, list]:
        """The WHERE clause of list_cases's filters, after checking them."""
        self.check_filters(status, verdict, backend, op)
        where, params = [], []
        if status is not None:
            where.append("b.status = ?")
            params.append(status)
        if verdict is not None:
            where.append("c.verdict = ?")
            params.append(verdict)
        if backend is not None:
            where.append(f"EXISTS (SELECT 1 FROM json_each(c.backends) WHERE {_BACKEND_MATCH.format(column='json_each.value')})")
            params += [backend] * 3
        if op is not None:
            where.append(_OP_MATCH.format(column="c.op_sequence"))
            params.append(op)
        return (" WHERE " + " AND ".join(where) if where else ""), params

    def list_buckets(
        self,
        status: str | None = None,
        verdict: str | None = None,
        backend: str | None = None,
        op: str | None = None,
        limit: int = 100,
        verdicts_in: tuple[str, ...] | None = None,
    ) -> tuple[list[dict], int]:
        """(buckets, how many match in all), last seen first. Each bucket row carries its smallest
        case's `nodes` and `elements`, and its members. `verdict` matches the bucket's verdict
        (all-zeros and constant findings are bucketed as mismatch, so both names find them) or a
        member's (`inherited` finds the buckets with inherited members); `backend`, buckets with a
        member on it; `op`, buckets with a case holding it; `verdicts_in`, buckets whose verdict
        is one of these."""
        self.check_filters(status, verdict, backend, op)
        where, params = [], []
        if verdicts_in is not None:
            where.append(f"b.verdict IN ({', '.join('?' * len(verdicts_in))})")
            params += list(verdicts_in)
        if status is not None:
            where.append("b.status = ?")
            params.append(status)
        if verdict is not None:
            where.append("(b.verdict = ? OR substr(b.signature, 1, length(?)) = ? OR EXISTS "
                         "(SELECT 1 FROM members m WHERE m.bucket = b.signature AND m.verdict = ?))")
            params += [verdict, verdict + Signature.SEPARATOR, verdict + Signature.SEPARATOR, verdict]
        if backend is not None:
            where.append("EXISTS (SELECT 1 FROM members m WHERE m.bucket = b.signature AND "
                         + _BACKEND_MATCH.format(column="m.backend") + ")")
            params += [backend] * 3
        if op is not None:
            where.append("EXISTS (SELECT 1 FROM cases c, json_each(c.findings) f, members m WHERE m.bucket = b.signature "
                         "AND m.signature = json_extract(f.value, '$.signature') AND " + _OP_MATCH.format(column="c.op_sequence") + ")")
            params.append(op)
        condition = " WHERE " + " AND ".join(where) if where else ""
        total = self._one(f"SELECT count(*) AS n FROM buckets b{condition}", params)["n"]
        rows = self._bucket_rows(
            "SELECT b.*, r.node_count AS nodes, r.element_count AS elements FROM buckets b "
            f"LEFT JOIN cases r ON r.id = b.representative{condition} ORDER BY b.last_seen DESC, b.count DESC LIMIT ?",
            params + [int(limit)],
        )
        return rows, total

    def bucket_verdict_counts(self) -> dict[str, int]:
        """How many buckets each verdict has."""
        return {row["verdict"]: row["n"] for row in self._rows("SELECT verdict, count(*) AS n FROM buckets GROUP BY verdict")}

    def backend_names(self) -> list[str]:
        """Every backend a stored case ran on or a bucket's member names."""
        rows = self._rows("SELECT DISTINCT json_each.value AS name FROM cases, json_each(cases.backends) "
                          "UNION SELECT backend AS name FROM members ORDER BY name")
        return [row["name"] for row in rows]

    def check_filters(self, status: str | None, verdict: str | None, backend: str | None, op: str | None) -> None:
        """UserError for a triage status, verdict or op that does not exist, or a backend no stored case ran on."""
        if op is not None:
            get_op(op)
        if status is not None:
            check_status(status)
        if verdict is not None and verdict not in verdict_table.BY_NAME:
            raise UserError(f"Unknown verdict '{verdict}'; use one of: {', '.join(verdict_table.BY_NAME)}.")
        if backend is not None:
            stored = self.backend_names()
            if not any(name == backend or name.startswith(backend + ":") for name in stored):
                known = f"use one of: {', '.join(stored)}" if stored else "it stores no case yet"
                raise UserError(f"No case in {self.path} ran on backend '{backend}'; {known}.")

    def case_size(self, case_id: int) -> tuple[int, int] | None:
        """(nodes, elements) of a stored case, without loading it; None if there is no such case."""
        row = self._one("SELECT node_count, element_count FROM cases WHERE id = ?", [case_id])
        return None if row is None else (row["node_count"], row["element_count"] or 0)

    def case_count(self) -> int:
        return self._one("SELECT count(*) AS n FROM cases")["n"]

    # ---- buckets

    def buckets(self, status: str | None = None) -> list[dict]:
        """Most-hit first, each with its members."""
        if status is not None:
            check_status(status)
            return self._bucket_rows("SELECT * FROM buckets WHERE status = ? ORDER BY count DESC, last_seen DESC", [status])
        return self._bucket_rows("SELECT * FROM buckets ORDER BY count DESC, last_seen DESC")

    def bucket(self, signature: str) -> dict | None:
        """The bucket with this signature, or the one a finding with this signature is a member of
        (a case's `signature` is its primary finding's); None if there is none."""
        rows = self._bucket_rows("SELECT * FROM buckets WHERE signature = coalesce((SELECT signature FROM buckets WHERE "
                                 "signature = ?), (SELECT bucket FROM members WHERE signature = ? ORDER BY rowid LIMIT 1))",
                                 [signature, signature])
        return rows[0] if rows else None

    def bucket_by_id(self, bucket_id: int) -> dict:
        rows = self._bucket_rows("SELECT * FROM buckets WHERE id = ?", [bucket_id])
        if not rows:
            raise UserError(f"No bucket B{bucket_id} in {self.path}; run `fuzz list` to see the buckets and their ids.")
        return rows[0]

    def case_buckets(self, case_id: int) -> list[dict]:
        """The buckets a stored case's findings are in, in the order of its findings."""
        row = self._one("SELECT id, findings FROM cases WHERE id = ?", [case_id])
        if row is None:
            raise self._no_case(case_id)
        findings = checked_case_row(row, self.path)["findings"]
        buckets = [self.bucket(key) for key in dict.fromkeys(self._buckets_of(findings))]
        return [bucket for bucket in buckets if bucket is not None]

    def named_bucket(self, handle: str | int) -> dict:
        """The bucket a command-line ID names (parse_handle): B7, or the one bucket of case 7. A case
        whose findings are in several buckets is refused, naming them: any one could be meant."""
        kind, number = parse_handle(handle)
        if kind == "bucket":
            return self.bucket_by_id(number)
        found = self.case_buckets(number)
        if not found:
            raise UserError(f"Case {number} has no finding, so it has no bucket; pick a case or bucket `fuzz list` shows.")
        if len(found) > 1:
            names = ", ".join(f"B{b['id']} ('{b['signature']}')" for b in found)
            raise UserError(f"Case {number} is in {len(found)} buckets: {names}; name the bucket, e.g. B{found[0]['id']}.")
        return found[0]

    def named_case(self, handle: str | int) -> tuple[int, dict | None]:
        """(case id, the bucket named) for a command-line ID: case 7 and None, or bucket B7's smallest case and B7."""
        kind, number = parse_handle(handle)
        if kind == "case":
            return number, None
        bucket = self.bucket_by_id(number)
        if bucket["representative"] is None:
            raise UserError(f"Bucket B{number} keeps no case (a merged count only); pick another with `fuzz list`.")
        return bucket["representative"], bucket

    def member_signatures(self) -> set[str]:
        """Every finding signature some bucket holds."""
        return {row["signature"] for row in self._rows("SELECT DISTINCT signature FROM members")}

    def _bucket_rows(self, sql: str, params: list | None = None) -> list[dict]:
        """Bucket rows, `campaigns` as a dict (campaign id, a string as JSON keys are -> its findings
        there), `members`: a list of {signature, verdict, backend, culprit, count, campaigns},
        its own findings first, then most found first, and `release_checks`, newest first (releases.py)."""
        rows = [checked_bucket_row(row, self.path) for row in self._rows(sql, params)]
        members: dict[str, list[dict]] = {row["signature"]: [] for row in rows}
        if rows:
            for member in self._rows("SELECT * FROM members WHERE bucket IN (SELECT value FROM json_each(?)) "
                                     "ORDER BY verdict = 'inherited', count DESC, rowid", [json.dumps(list(members))]):
                member = checked_member_row(member, self.path)
                members[member.pop("bucket")].append(member)
        checks = self._release_checks_of(list(members)) if rows else {}
        for row in rows:
            row["members"] = members[row["signature"]]
            row["release_checks"] = checks[row["signature"]]
        return rows

    # ---- figures

    def stats(self) -> dict:
        from fuzzer.drawing.motifs import PREFIX as MOTIF_PREFIX

        def counts(sql: str) -> dict:
            return {row["key"]: row["n"] for row in self._rows(sql)}

        return {
            "cases": self.case_count(),
            "cases_with_findings": self._one("SELECT count(*) AS n FROM cases WHERE signature IS NOT NULL")["n"],
            "shrunk_cases": self._one("SELECT count(*) AS n FROM cases WHERE shrunk_from IS NOT NULL")["n"],
            "campaigns": self._one("SELECT count(*) AS n FROM campaigns")["n"],
            "buckets": self._one("SELECT count(*) AS n FROM buckets")["n"],
            "buckets_by_status": counts("SELECT status AS key, count(*) AS n FROM buckets GROUP BY status ORDER BY status"),
            "cases_by_verdict": counts("SELECT verdict AS key, count(*) AS n FROM cases GROUP BY verdict ORDER BY verdict"),
            # Generated cases with a finding (not shrunk copies), by the regime that drew them.
            "findings_by_regime": counts("SELECT coalesce(json_extract(graph, '$.regime'), 'small') AS key, count(*) AS n "
                                         "FROM cases WHERE signature IS NOT NULL AND shrunk_from IS NULL GROUP BY key ORDER BY key"),
            "graphs_by_regime": self.graphs_by_regime(),
            "region_coverage": self.region_coverage(),
            "pair_coverage": self.region_coverage("pairs_declared", "pair_counts"),
            "motif_coverage": self.region_coverage(within=MOTIF_PREFIX),
            "judged_share": self.judged_share(),
        }

    def _checkpoints(self) -> list[tuple[int, dict]]:
        """(id, checkpoint) of every stored campaign, oldest first; a damaged checkpoint is an empty one."""
        return [(row["id"], row.get("checkpoint") if isinstance(row.get("checkpoint"), dict) else {}) for row in self.campaigns()]

    def region_coverage(self, declared_field: str = "regions_declared", counts_field: str = "region_counts",
                        within: str = "") -> dict[str, dict]:
        """Per campaign id (a string, as JSON keys are) whose checkpoint declares region keys: its
        region coverage (fuzzer/drawing/regions.py's coverage); of the pairs of keys with the pairs' fields
        (fuzzer/drawing/region_pairs.py); of the keys whose region starts with `within` only where given."""
        from fuzzer.drawing.regions import coverage

        found = {}
        for campaign_id, checkpoint in self._checkpoints():
            declared, counts = checkpoint.get(declared_field), checkpoint.get(counts_field)
            if isinstance(declared, list) and declared and isinstance(counts, dict):
                found[str(campaign_id)] = coverage([str(k) for k in counts], [str(k) for k in declared], within)
        return found

    def alone_op_counts(self) -> dict[str, dict[str, int]]:
        """Per backend, op -> one-op graphs of it the backend ran (a compiler's single-op tier), summed
        over every stored campaign's checkpoint (a damaged entry counts nothing)."""
        summed: dict[str, dict[str, int]] = {}
        for _, checkpoint in self._checkpoints():
            per_backend = checkpoint.get("alone_op_counts")
            for backend, counts in (per_backend.items() if isinstance(per_backend, dict) else ()):
                mine = summed.setdefault(str(backend), {})
                for op, count in (counts.items() if isinstance(counts, dict) else ()):
                    if isinstance(count, int) and count > 0:
                        mine[str(op)] = mine.get(str(op), 0) + count
        return summed

    def judged_share(self) -> list[dict]:
        """What the oracle judged, per (op, dtype, backend kind), summed over every campaign's
        checkpoint, least judged first (fuzzer/judging/judged_share.py's table)."""
        from fuzzer.judging import judged_share

        rows: dict = {}
        for campaign_id, checkpoint in self._checkpoints():
            if "judged_share" in checkpoint:
                judged_share.tally(rows, judged_share.checked_rows(checkpoint["judged_share"], f"Campaign {campaign_id}'s checkpoint"))
        return judged_share.table(rows)

    def graphs_by_regime(self) -> dict[str, int]:
        """Graphs checked per regime, summed over every campaign's checkpoint."""
        totals: dict[str, int] = {}
        for _, checkpoint in self._checkpoints():
            counts = checkpoint.get("regime_counts")
            for regime, count in counts.items() if isinstance(counts, dict) else ():
                if isinstance(count, int):
                    totals[str(regime)] = totals.get(str(regime), 0) + count
        return dict(sorted(totals.items()))
