"""The corpus: one sqlite file holding campaigns, cases (with their arrays) and finding buckets.

Tables (schema version 6):

    meta         key -> value; `schema_version` says which layout the file has.
    campaigns    one row per `fuzz run`: a global uuid, config, library versions, progress,
                 checkpoint, and the lease of the process running it (pid, host, heartbeat).
    cases        one row per stored case: graph JSON, verdict, findings, provenance. A case is
                 stored once: `case_key` (graph + arrays + backends) is unique, so import,
                 merge, resume and shrink add nothing they find here already.
    case_arrays  the case's inputs and weights as .npy bytes (never pickled).
    buckets      one row per cause (fuzzer/buckets.py: "nan-inf | torch-eager:cpu | sinh"): its
                 triage status, which all its members share; how many generated cases have a
                 finding in it (count, first and last seen, and per campaign id: campaigns);
                 the cases it keeps (below); and the id of the known bug it is (fuzzer/known.py).
    members      one row per finding signature a bucket holds ("nan-inf |
                 torch-eager:cpu:float16 | sinh", an `inherited` copy on torch-module): its
                 verdict, backend and culprit, and how many findings it has (count, campaigns).

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

A running campaign holds a lease on its row (pid, host, heartbeat refreshed at every
checkpoint), so a second `--resume` of it is refused while the first lives, and one
killed with -9 (dead pid, or no heartbeat for LEASE_STALE_S) is taken over.

Every write is one short `BEGIN IMMEDIATE` transaction on a WAL-mode file with a
busy timeout, so several processes can write the same corpus: they queue for the
write lock instead of failing. Writes use plain parameterized SQL through
sqlite-utils' `Database.execute`, so they stay inside our transaction whatever the
sqlite-utils version; reads use `Database.query`.

A file we did not write (not sqlite, a foreign sqlite database, a newer schema) is
inspected through a read-only connection and refused with a UserError before
anything can touch it.

The package's parts, each importing only modules below the corpus (never one another: a part
importing a sibling would import this file, which imports the parts, a circle):

    schema.py      the layout, SCHEMA_VERSION and the migrations of older files
    locking.py     retrying while sqlite is locked, and campaign leases
    case_forms.py  a case outside the tables: the row read back (StoredCase) and the exported
                   case file, each checked before use
    __init__.py    the Corpus class, which uses them all: campaigns, storing cases and filing
                   their findings in buckets, queries, triage, merge, export and import
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
import sqlite3
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator

import sqlite_utils

from fuzzer import jsonform
from fuzzer import verdicts as verdict_table
from fuzzer.arrays import from_npy_bytes, to_base64, to_npy_bytes
from fuzzer.buckets import STATUSES, bucket_signatures, describing, plan_regroup, stored_buckets
from fuzzer.campaign_config import check_campaign_row, stored_plugins
from fuzzer.corpus.case_forms import (EXPORT_FORMAT, EXPORT_VERSION, StoredCase, case_from_export, file_kind,
                                     imported_case, is_finding, load_case_file, needed_arrays)
from fuzzer.corpus.locking import BUSY_TIMEOUT_S, LEASE_STALE_S, live_holder, retry_while_locked
from fuzzer.corpus.schema import (GROUPED_BY_CAUSE, MIGRATIONS, SCHEMA_SQL, SCHEMA_VERSION, SQLITE_HEADER, case_key,
                                  sorted_json)
from fuzzer.errors import InternalError, UserError
from fuzzer.ir import Case, Graph, parse_json
from fuzzer.ops import get_op
from fuzzer.records import BackendVerdict, CaseRecord, Finding

# What other modules import from here; the package's modules are its parts (module docstring).
__all__ = ["SCHEMA_VERSION", "STATUSES", "Corpus", "StoredCase", "case_from_export", "case_key", "file_kind",
           "is_finding", "load_case_file"]

CAMPAIGN_STATUSES = ("running", "finished", "interrupted")


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _loads(text: str | None) -> Any:
    return None if text is None else parse_json(text, "stored JSON")


def _loads_entries(text: str | None, record_type: type) -> Any:
    """A findings or verdicts column, each entry's numbers read as floats (fuzzer/jsonform.py)."""
    entries = _loads(text)
    return [jsonform.read_numbers(entry, record_type) for entry in entries] if isinstance(entries, list) else entries


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


def _primary_signature(verdict: str, findings: list[dict]) -> str | None:
    """The signature of the finding that gave the case its verdict (the first such), else the first finding's."""
    for finding in findings:
        if finding.get("verdict") == verdict:
            return finding["signature"]
    return findings[0]["signature"] if findings else None


class Corpus:
    """A corpus file. Open with `Corpus(path)`; use as a context manager or call close()."""

    db: sqlite_utils.Database

    def __init__(self, path: str | Path, create: bool = True):
        self.path = Path(path)
        self._closed = False
        self._write_depth = 0
        if self.path.is_dir():
            raise UserError(f"'{self.path}' is a directory, not a corpus file; pass --db with a file path.")
        new_file = not self.path.exists()
        if new_file:
            if not create:
                raise UserError(
                    f"No corpus at '{self.path}'; run `fuzz run` to create one or pass --db with an existing corpus."
                )
            self.path.parent.mkdir(parents=True, exist_ok=True)
        else:
            self._inspect_existing()
        try:
            conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S)
        except sqlite3.Error as exc:
            raise UserError(f"Cannot open corpus '{self.path}' ({exc}); check the path and its permissions.") from None
        self.db = sqlite_utils.Database(conn)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            if new_file:  # set before the first table: the pages of dropped cases can go back (_give_back_free_pages)
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            retry_while_locked(self._enable_wal)
            retry_while_locked(self.migrate)
        except BaseException:
            self.close()
            raise

    # ---- opening

    def _enable_wal(self) -> None:
        mode = self.db.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise sqlite3.OperationalError(f"database is locked (journal_mode stayed {mode})")

    def _refuse(self, why: str) -> UserError:
        return UserError(f"'{self.path}' is not a fuzzer corpus ({why}); pass --db with a corpus file or a new path.")

    def _inspect_existing(self) -> None:
        """Refuse anything that is not an (older, current or empty) corpus, touching nothing."""
        try:
            with open(self.path, "rb") as handle:
                header = handle.read(len(SQLITE_HEADER))
        except OSError as exc:
            raise UserError(f"Cannot read '{self.path}' ({exc.strerror}); check its permissions.") from None
        if not header:
            return  # an empty file: sqlite treats it as an empty database
        if header != SQLITE_HEADER:
            raise self._refuse("not a sqlite database")
        uri = self.path.resolve().as_uri() + "?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S)
        except sqlite3.Error as exc:
            raise UserError(f"Cannot open '{self.path}' ({exc}); check the path and its permissions.") from None
        try:
            self._check_layout(sqlite_utils.Database(conn, execute_plugins=False, recursive_triggers=False))
        except sqlite3.DatabaseError as exc:
            raise self._refuse(f"unreadable as sqlite: {exc}") from None
        finally:
            conn.close()

    def _check_layout(self, db: sqlite_utils.Database) -> int | None:
        """The file's schema version; None for an empty database. Raises UserError for a foreign one."""
        tables = set(db.table_names())
        if not tables:
            return None
        if "meta" not in tables:
            raise self._refuse("no meta table")
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.OperationalError:
            raise self._refuse("its meta table has no key/value columns") from None
        if row is None:
            raise self._refuse("no schema_version in its meta table")
        try:
            version = int(row[0])
        except (TypeError, ValueError):
            raise self._refuse(f"schema_version {row[0]!r} is not an integer") from None
        if version > SCHEMA_VERSION:
            raise UserError(
                f"'{self.path}' was written by a newer fuzzer (corpus schema {version}, this one reads up to "
                f"{SCHEMA_VERSION}); upgrade the fuzzer or pass --db with another corpus."
            )
        if version < 0:
            raise self._refuse(f"schema_version {version} is negative")
        return version

    def migrate(self) -> int:
        """Bring the file up to SCHEMA_VERSION (creating the layout in a new file); returns the version it had (0 if new)."""
        if self._check_layout(self.db) == SCHEMA_VERSION:
            return SCHEMA_VERSION  # the common case: no write lock taken
        with self._write():
            version = self._check_layout(self.db)  # again, under the lock: another process may have migrated
            if version is None:
                self.db.execute(SCHEMA_SQL["meta"])
                version = 0
            start = version
            for target, step in MIGRATIONS:
                if target > version:
                    step(self.db)
                    version = target
            if start < GROUPED_BY_CAUSE:
                self.resign_findings(lambda finding: finding["signature"], merged_by="the upgrade to corpus schema 6")
            self.db.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [str(version)],
            )
        return start

    def schema_version(self) -> int:
        return int(self._one("SELECT value FROM meta WHERE key = 'schema_version'")["value"])

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.db.close()

    def __enter__(self) -> "Corpus":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- plumbing

    @contextlib.contextmanager
    def _write(self) -> Iterator[None]:
        """One short write transaction; takes the write lock up front (waiting up to the busy timeout).

        Nested uses join the outer transaction, so a merge of many cases commits or rolls back as one.
        """
        if self._write_depth:
            self._write_depth += 1
            try:
                yield
            finally:
                self._write_depth -= 1
            return
        conn = self.db.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            self._write_depth = 1
            try:
                yield
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")
            finally:
                self._write_depth = 0
        except sqlite3.OperationalError as exc:
            if "readonly" not in str(exc):
                raise
            raise UserError(f"The corpus '{self.path}' is read-only ({exc}); pass --db with a corpus you may write, "
                            "or fix its permissions.") from None

    def _rows(self, sql: str, params: list | dict | None = None) -> list[dict]:
        return list(self.db.query(sql, params or []))

    def _one(self, sql: str, params: list | None = None) -> dict | None:
        rows = self._rows(sql, params)
        return rows[0] if rows else None

    def _exists(self, table: str, row_id: int) -> bool:
        return self.db.execute(f"SELECT 1 FROM [{table}] WHERE id = ?", [row_id]).fetchone() is not None

    def _no_case(self, case_id: int) -> UserError:
        return UserError(f"No case with id {case_id} in {self.path}; run `fuzz list` to see stored cases.")

    # ---- campaigns

    def start_campaign(self, config: dict, seed: int, versions: dict, lease: bool = True) -> int:
        """A new campaign row, leased to this process (unless `lease` is False: a merged, finished copy)."""
        with self._write():
            cursor = self.db.execute(
                "INSERT INTO campaigns (uuid, started, status, seed, config, versions) VALUES (?, ?, 'running', ?, ?, ?)",
                [str(uuid.uuid4()), _now(), seed, sorted_json(config), sorted_json(versions)],
            )
            if lease:
                self._set_lease(cursor.lastrowid)
            return cursor.lastrowid

    def take_lease(self, campaign_id: int) -> None:
        """Lease a campaign to this process (`--resume`): refused while another live process holds it."""
        with self._write():
            row = self._one("SELECT lease_pid, lease_host, lease_heartbeat FROM campaigns WHERE id = ?", [campaign_id])
            if row is None:
                raise self._no_campaign(campaign_id)
            holder = live_holder(row)
            if holder is not None:
                raise UserError(
                    f"Campaign {campaign_id} is running in process {holder} (last heartbeat "
                    f"{time.time() - row['lease_heartbeat']:.0f} s ago); wait for it to end or stop it before resuming."
                )
            self._set_lease(campaign_id)

    def _set_lease(self, campaign_id: int) -> None:
        self.db.execute(
            "UPDATE campaigns SET status = 'running', lease_pid = ?, lease_host = ?, lease_heartbeat = ? WHERE id = ?",
            [os.getpid(), socket.gethostname(), time.time(), campaign_id],
        )

    def checkpoint(self, campaign_id: int, state: dict, cases_run: int, findings: int) -> None:
        """Save progress and refresh this process's lease; a campaign whose lease was taken over stops here."""
        with self._write():
            if not self._exists("campaigns", campaign_id):
                raise self._no_campaign(campaign_id)
            cursor = self.db.execute(
                "UPDATE campaigns SET checkpoint = ?, cases_run = ?, findings = ?, lease_heartbeat = ? "
                "WHERE id = ? AND (lease_pid IS NULL OR (lease_pid = ? AND lease_host = ?))",
                [sorted_json(state), cases_run, findings, time.time(), campaign_id, os.getpid(), socket.gethostname()],
            )
            if cursor.rowcount == 0:
                raise UserError(f"Campaign {campaign_id} was taken over by another process (this one missed its "
                                f"heartbeat for {LEASE_STALE_S:g} s); this one stops.")
        self._give_back_free_pages()

    def finish_campaign(self, campaign_id: int, status: str = "finished") -> None:
        """Record how the campaign ended and give its lease back."""
        if status not in CAMPAIGN_STATUSES:
            raise InternalError(f"campaign status {status!r} is not one of {CAMPAIGN_STATUSES}")
        with self._write():
            cursor = self.db.execute(
                "UPDATE campaigns SET status = ?, ended = ?, lease_pid = NULL, lease_host = NULL, lease_heartbeat = NULL "
                "WHERE id = ?", [status, _now(), campaign_id]
            )
            if cursor.rowcount == 0:
                raise self._no_campaign(campaign_id)
        self._give_back_free_pages()

    def _give_back_free_pages(self) -> None:
        """Shrink the file by the pages of the cases a bounded campaign dropped. Only a file this release
        created can (auto_vacuum INCREMENTAL is set before its first table); an older one reuses them.
        Never inside a transaction: executescript (which runs the pragma to its end) commits first."""
        if self._write_depth == 0:
            retry_while_locked(lambda: self.db.conn.executescript("PRAGMA incremental_vacuum"))

    def campaign(self, campaign_id: int) -> dict:
        row = self._one("SELECT * FROM campaigns WHERE id = ?", [campaign_id])
        if row is None:
            raise self._no_campaign(campaign_id)
        return self._campaign_dict(row)

    def campaigns(self) -> list[dict]:
        return [self._campaign_dict(row) for row in self._rows("SELECT * FROM campaigns ORDER BY id")]

    def campaign_summaries(self) -> list[dict]:
        """One small dict per campaign, oldest first: what `fuzz campaigns` lists."""
        summaries = []
        for row in self.campaigns():
            checkpoint = row["checkpoint"] if isinstance(row["checkpoint"], dict) else {}
            summaries.append({
                "id": row["id"], "uuid": row["uuid"], "status": row["status"], "started": row["started"],
                "ended": row["ended"], "seconds": checkpoint.get("elapsed"), "graphs": row["cases_run"],
                "findings": row["findings"], "seed": row["seed"], "backends": (row["config"] or {}).get("backends"),
                "plugins": stored_plugins(row["config"]),
                "running_in_pid": row["lease_pid"] if live_holder(row) is not None else None,
            })
        return summaries

    def _no_campaign(self, campaign_id: int) -> UserError:
        return UserError(f"No campaign with id {campaign_id} in {self.path}; run `fuzz campaigns` to list them.")

    @staticmethod
    def _campaign_dict(row: dict) -> dict:
        return {**row, **{key: _loads(row[key]) for key in ("config", "versions", "checkpoint")}}

    # ---- cases

    def add_case(self, record: CaseRecord, bounded: bool = False) -> int:
        """Store the case, its arrays and its findings' buckets in one transaction; returns the case id.

        A case stored already (same graph, arrays and backends: `case_key`) is not stored again and
        counts no second time in its buckets: its existing id is returned. `bounded` (a campaign's
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
        key = case_key(content_hash, backends)
        arrays = {name: to_npy_bytes(value) for name, value in case.arrays.items()}
        element_count = int(sum(value.size for value in case.arrays.values()))
        node_count = len(case.graph.nodes)
        with self._write():
            if campaign_id is not None and not self._exists("campaigns", campaign_id):
                raise self._no_campaign(campaign_id)
            if shrunk_from is not None and not self._exists("cases", shrunk_from):
                raise self._no_case(shrunk_from)
            existing = self.db.execute("SELECT id FROM cases WHERE case_key = ?", [key]).fetchone()
            if existing is not None:
                return existing[0], False
            now = record.created or _now()  # `created` keeps a merged case's original time
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
                    _primary_signature(verdict, findings),
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

    def _file_findings(self, findings: list[dict], keys: list[str], case: dict, counts: bool) -> list[int]:
        """Put a stored case's findings in their buckets (`keys`, fuzzer/buckets.py): the case once
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
            campaigns = _add_campaign(_loads(row["campaigns"]) or {}, campaign_id)
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
        campaigns = _loads(row["campaigns"]) or {}
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

    def get_case(self, case_id: int) -> StoredCase:
        row = self._one("SELECT * FROM cases WHERE id = ?", [case_id])
        if row is None:
            raise self._no_case(case_id)
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
        return StoredCase(
            id=row["id"],
            case=case,
            campaign_id=row["campaign_id"],
            created=row["created"],
            verdict=row["verdict"],
            signature=row["signature"],
            findings=_loads_entries(row["findings"], Finding),
            backends=_loads(row["backends"]),
            shrunk_from=row["shrunk_from"],
            shrink_log=_loads(row["shrink_log"]),
            verdicts=_loads_entries(row.get("verdicts") or "[]", BackendVerdict),
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
        rows = self._rows(sql, params + [int(limit)])
        for row in rows:
            row["backends"] = json.loads(row["backends"])
            row["findings"] = _loads_entries(row["findings"], Finding)
        return rows

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
            where.append("(b.verdict = ? OR substr(b.signature, 1, length(?) + 3) = ? || ' | ' OR EXISTS "
                         "(SELECT 1 FROM members m WHERE m.bucket = b.signature AND m.verdict = ?))")
            params += [verdict] * 4
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
            _check_status(status)
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

    # ---- buckets and triage

    def buckets(self, status: str | None = None) -> list[dict]:
        """Most-hit first, each with its members."""
        if status is not None:
            _check_status(status)
            return self._bucket_rows("SELECT * FROM buckets WHERE status = ? ORDER BY count DESC, last_seen DESC", [status])
        return self._bucket_rows("SELECT * FROM buckets ORDER BY count DESC, last_seen DESC")

    def bucket(self, signature: str) -> dict | None:
        """The bucket with this signature, or the one a finding with this signature is a member of
        (a case's `signature` is its primary finding's); None if there is none."""
        rows = self._bucket_rows("SELECT * FROM buckets WHERE signature = coalesce((SELECT signature FROM buckets WHERE "
                                 "signature = ?), (SELECT bucket FROM members WHERE signature = ? ORDER BY rowid LIMIT 1))",
                                 [signature, signature])
        return rows[0] if rows else None

    def member_signatures(self) -> set[str]:
        """Every finding signature some bucket holds."""
        return {row["signature"] for row in self._rows("SELECT DISTINCT signature FROM members")}

    def _bucket_rows(self, sql: str, params: list | None = None) -> list[dict]:
        """Bucket rows, `campaigns` as a dict (campaign id, a string as JSON keys are -> its findings
        there), and `members`: a list of {signature, verdict, backend, culprit, count, campaigns},
        its own findings first, then most found first."""
        rows = self._rows(sql, params)
        members: dict[str, list[dict]] = {row["signature"]: [] for row in rows}
        if rows:
            for member in self._rows("SELECT * FROM members WHERE bucket IN (SELECT value FROM json_each(?)) "
                                     "ORDER BY verdict = 'inherited', count DESC, rowid", [json.dumps(list(members))]):
                members[member.pop("bucket")].append({**member, "campaigns": _loads(member["campaigns"])})
        for row in rows:
            row["campaigns"] = _loads(row["campaigns"])
            row["members"] = members[row["signature"]]
        return rows

    def triage(self, case_id: int, status: str, note: str | None = None) -> dict:
        """Set the triage status (and note, if given) of the bucket of the case's primary finding,
        which all its members share; returns the bucket."""
        _check_status(status)
        with self._write():
            row = self.db.execute("SELECT signature FROM cases WHERE id = ?", [case_id]).fetchone()
            if row is None:
                raise self._no_case(case_id)
            bucket = self.bucket(row[0]) if row[0] is not None else None
            if bucket is None:
                raise UserError(f"Case {case_id} has no finding, so it has no bucket to triage; pick a case with a finding.")
            self.db.execute("UPDATE buckets SET status = ?, note = coalesce(?, note) WHERE signature = ?",
                            [status, note, bucket["signature"]])
        return self.bucket(bucket["signature"])

    def mark_known(self, signature: str, bug_id: str, keep_triage: bool = True) -> None:
        """Record that a bucket is the known bug `bug_id`, with status `known` unless `keep_triage` and a
        person triaged it already (a campaign keeps their status; `fuzz known add` replaces it)."""
        with self._write():
            self.db.execute("UPDATE buckets SET known_bug = ?, status = CASE WHEN ? AND status != 'new' THEN status "
                            "ELSE 'known' END WHERE signature = ?", [bug_id, int(keep_triage), signature])

    def resign_findings(self, resign: Callable[[dict], str], dry_run: bool = False, merged_by: str = "`fuzz rebucket`") -> dict:
        """Give every stored finding the signature `resign(finding)` and regroup the buckets under this
        release's rules (fuzzer/buckets.py, plan_regroup): buckets whose findings now share one merge,
        keeping their triage and counts; the cases each keeps are chosen again from the stored cases,
        in the order they were stored, as add_case chose them. One transaction; with `dry_run`
        nothing is written."""
        with self._write():
            cases = self._rows("SELECT id, campaign_id, verdict, findings, node_count, element_count, created, shrunk_from "
                               "FROM cases ORDER BY id")
            for row in cases:
                row["findings"] = _loads_entries(row["findings"], Finding)
            buckets = {row["signature"]: row for row in self._bucket_rows("SELECT * FROM buckets")}
            members = [{**row, "campaigns": _loads(row["campaigns"])} for row in self._rows("SELECT * FROM members ORDER BY rowid")]
            plan = plan_regroup(cases, buckets, members, resign, merged_by)
            summary = plan.summary(len(cases), len(buckets), dry_run)
            if dry_run or not (plan.changed or summary["changes"]):
                return summary
            for row in cases:
                if row["id"] in plan.changed:
                    findings = plan.findings[row["id"]]
                    self.db.execute("UPDATE cases SET findings = ?, signature = ? WHERE id = ?",
                                    [jsonform.dumps(findings), _primary_signature(row["verdict"], findings), row["id"]])
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
                self.db.execute("UPDATE buckets SET status = ?, note = ?, known_bug = ?, count = ?, campaigns = ?, "
                                "first_seen = min(first_seen, coalesce(?, first_seen)), "
                                "last_seen = max(last_seen, coalesce(?, last_seen)) WHERE signature = ?",
                                [bucket["status"], bucket["note"], bucket["known_bug"], bucket["tally"].count,
                                 sorted_json(bucket["tally"].campaigns), bucket["first_seen"], bucket["last_seen"], signature])
            for (signature, finding_signature), member in plan.members.items():
                if member["described"] is not None:
                    self._bump_member(signature, member["described"])
                self.db.execute("UPDATE members SET count = ?, campaigns = ? WHERE bucket = ? AND signature = ?",
                                [member["tally"].count, sorted_json(member["tally"].campaigns), signature, finding_signature])
        return summary

    def stats(self) -> dict:
        def counts(sql: str) -> dict:
            return {row["key"]: row["n"] for row in self._rows(sql)}

        return {
            "cases": self.case_count(),
            "cases_with_findings": self._one("SELECT count(*) AS n FROM cases WHERE signature IS NOT NULL")["n"],
            "campaigns": self._one("SELECT count(*) AS n FROM campaigns")["n"],
            "buckets": self._one("SELECT count(*) AS n FROM buckets")["n"],
            "buckets_by_status": counts("SELECT status AS key, count(*) AS n FROM buckets GROUP BY status ORDER BY status"),
            "cases_by_verdict": counts("SELECT verdict AS key, count(*) AS n FROM cases GROUP BY verdict ORDER BY verdict"),
            # Generated cases with a finding (not shrunk copies), by the regime that drew them.
            "findings_by_regime": counts("SELECT coalesce(json_extract(graph, '$.regime'), 'small') AS key, count(*) AS n "
                                         "FROM cases WHERE signature IS NOT NULL AND shrunk_from IS NULL GROUP BY key ORDER BY key"),
            "graphs_by_regime": self.graphs_by_regime(),
        }

    def graphs_by_regime(self) -> dict[str, int]:
        """Graphs checked per regime, summed over every campaign's checkpoint."""
        totals: dict[str, int] = {}
        for row in self.campaigns():
            checkpoint = row.get("checkpoint") if isinstance(row.get("checkpoint"), dict) else {}
            counts = checkpoint.get("regime_counts")
            for regime, count in counts.items() if isinstance(counts, dict) else ():
                if isinstance(count, int):
                    totals[str(regime)] = totals.get(str(regime), 0) + count
        return dict(sorted(totals.items()))

    # ---- merging corpora from several machines

    def merge_all(self, others: list["Corpus"]) -> dict[str, dict]:
        """merge_from for each corpus, all in one transaction: one refused file leaves this corpus as it was."""
        with self._write():
            return {str(other.path): self.merge_from(other) for other in others}

    def check_campaign_rows(self) -> None:
        """Refuse, in one sentence, a campaign row whose config or checkpoint is not of the shape and bounds
        `fuzz run` writes (fuzzer/campaign_config.py): merged, it would reach every reader of the target."""
        for row in self.campaigns():
            try:
                check_campaign_row(row)
            except UserError as exc:
                raise UserError(f"Nothing merged: campaign {row['id']} of '{self.path}' is refused: {exc}.") from None

    def merge_from(self, other: "Corpus") -> dict:
        """Copy another corpus's campaigns, cases (with arrays and shrink links) and triage into this one.

        One transaction: a case refused half-way (a hostile or broken file) leaves this corpus as it
        was. Campaigns are matched by uuid and cases by content (`case_key`), so merging a file again,
        a renamed copy of it, or a corpus into itself adds nothing. A bucket still 'new' here takes
        the other's triage. Findings of the other's campaigns are counted from its buckets' counts per
        campaign (_merge_counts), which hold the findings it did not keep too; the cases it kept are
        all copied.
        """
        other.check_campaign_rows()
        with self._write():
            have = {row["uuid"]: row["id"] for row in self._rows("SELECT id, uuid FROM campaigns WHERE uuid IS NOT NULL")}
            campaigns, new_campaigns = {}, 0
            for row in other.campaigns():
                if row["uuid"] in have:
                    campaigns[row["id"]] = have[row["uuid"]]
                    continue
                new_id = self.start_campaign(row["config"], row["seed"], row["versions"], lease=False)
                self.db.execute("UPDATE campaigns SET uuid = coalesce(?, uuid), started = ? WHERE id = ?",
                                [row["uuid"], row["started"], new_id])
                self.checkpoint(new_id, row.get("checkpoint") or {}, row["cases_run"], row["findings"])
                self.finish_campaign(new_id, "finished" if row["status"] == "finished" else "interrupted")
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
        return {"campaigns_added": new_campaigns, "cases_added": added, "cases_already_here": len(cases) - added,
                "buckets_triaged": triaged}

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


# The bucket of a case: the one its primary finding is a member of.
_CASE_BUCKET = "(SELECT m.bucket FROM members m WHERE m.signature = c.signature ORDER BY m.rowid LIMIT 1)"
# A backend filter matches a full name or a kind: "jax-jit" finds "jax-jit:cpu:float32".
_BACKEND_MATCH = "({column} = ? OR substr({column}, 1, length(?) + 1) = ? || ':')"
_OP_MATCH = "instr('>' || {column} || '>', '>' || ? || '>') > 0"


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


def _check_status(status: str) -> None:
    if status not in STATUSES:
        raise UserError(f"Unknown triage status '{status}'; use one of: {', '.join(STATUSES)}.")
