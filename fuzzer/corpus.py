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
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import socket
import sqlite3
import stat
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

import sqlite_utils

from fuzzer import jsonform
from fuzzer import verdicts as verdict_table
from fuzzer.arrays import from_base64, from_npy_bytes, to_base64, to_npy_bytes
from fuzzer.buckets import bucket_signatures, describing, plan_regroup, stored_buckets
from fuzzer.campaign_config import check_campaign_row, stored_plugins
from fuzzer.check import Finding
from fuzzer.errors import InternalError, UserError
from fuzzer.ir import MAX_JSON_DEPTH, Case, Graph, check_json_depth, infer_shapes, param_shapes, parse_json
from fuzzer.oracle import BackendVerdict
from fuzzer.ops import get_op
from fuzzer.records import CaseRecord

SCHEMA_VERSION = 6
BUSY_TIMEOUT_S = 30.0
LEASE_STALE_S = 60.0  # a campaign checkpoints every few seconds; this long without one, it is dead
# Merged campaigns are recognized by uuid; older files get one derived from the row's content
# (with its original id), so a file and a copy of it migrated separately agree.
UUID_NAMESPACE = uuid.UUID("5d3c1a8e-6b0f-4d2a-9a57-3f0e2f4c8b11")
SQLITE_HEADER = b"SQLite format 3\x00"

# `known`: a bug the known-bug registry lists (or one a person says is known); `fuzz run` does not fail for it.
STATUSES = ("new", "confirmed", "reported", "fixed", "wontfix", "flaky", "known")
CAMPAIGN_STATUSES = ("running", "finished", "interrupted")

EXPORT_FORMAT = "fuzzer-case"
EXPORT_VERSION = 1

# The full layout of the current schema version. Migrations bring older files up to it.
_SCHEMA_SQL = {
    "meta": """CREATE TABLE IF NOT EXISTS meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL)""",
    "campaigns": """CREATE TABLE IF NOT EXISTS campaigns (
        id INTEGER PRIMARY KEY,
        uuid TEXT,
        started TEXT NOT NULL,
        ended TEXT,
        status TEXT NOT NULL DEFAULT 'running',
        seed INTEGER NOT NULL,
        config TEXT NOT NULL DEFAULT '{}',
        versions TEXT NOT NULL DEFAULT '{}',
        cases_run INTEGER NOT NULL DEFAULT 0,
        findings INTEGER NOT NULL DEFAULT 0,
        checkpoint TEXT,
        lease_pid INTEGER,
        lease_host TEXT,
        lease_heartbeat REAL)""",
    "cases": """CREATE TABLE IF NOT EXISTS cases (
        id INTEGER PRIMARY KEY,
        campaign_id INTEGER REFERENCES campaigns(id),
        created TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        seed INTEGER NOT NULL,
        graph TEXT NOT NULL,
        op_sequence TEXT NOT NULL,
        node_count INTEGER NOT NULL,
        element_count INTEGER,
        backends TEXT NOT NULL DEFAULT '[]',
        verdict TEXT NOT NULL,
        signature TEXT,
        findings TEXT NOT NULL DEFAULT '[]',
        shrunk_from INTEGER REFERENCES cases(id),
        shrink_log TEXT,
        verdicts TEXT NOT NULL DEFAULT '[]',
        case_key TEXT)""",
    "case_arrays": """CREATE TABLE IF NOT EXISTS case_arrays (
        case_id INTEGER NOT NULL REFERENCES cases(id),
        name TEXT NOT NULL,
        npy BLOB NOT NULL,
        PRIMARY KEY (case_id, name))""",
    "buckets": """CREATE TABLE IF NOT EXISTS buckets (
        signature TEXT PRIMARY KEY,
        verdict TEXT NOT NULL,
        backend TEXT NOT NULL,
        culprit TEXT NOT NULL,
        first_seen TEXT NOT NULL,
        last_seen TEXT NOT NULL,
        count INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL DEFAULT 'new',
        note TEXT,
        representative INTEGER REFERENCES cases(id),
        known_bug TEXT,
        first_case INTEGER REFERENCES cases(id),
        latest_case INTEGER REFERENCES cases(id),
        campaigns TEXT NOT NULL DEFAULT '{}')""",
    "members": """CREATE TABLE IF NOT EXISTS members (
        bucket TEXT NOT NULL,
        signature TEXT NOT NULL,
        verdict TEXT NOT NULL,
        backend TEXT NOT NULL,
        culprit TEXT NOT NULL,
        count INTEGER NOT NULL DEFAULT 0,
        campaigns TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (bucket, signature))""",
}
_INDEXES_SQL = (
    "CREATE INDEX IF NOT EXISTS idx_cases_signature ON cases (signature)",
    "CREATE INDEX IF NOT EXISTS idx_cases_verdict ON cases (verdict)",
    "CREATE INDEX IF NOT EXISTS idx_cases_content_hash ON cases (content_hash)",
    "CREATE INDEX IF NOT EXISTS idx_cases_campaign ON cases (campaign_id)",
    "CREATE INDEX IF NOT EXISTS idx_buckets_status ON buckets (status)",
    "CREATE INDEX IF NOT EXISTS idx_cases_shrunk_from ON cases (shrunk_from)",
)
# Version 3: one row per case content and per campaign. Rows a version-2 file held twice keep a NULL key.
_UNIQUE_SQL = (
    "CREATE UNIQUE INDEX IF NOT EXISTS idx_cases_case_key ON cases (case_key) WHERE case_key IS NOT NULL",
    "CREATE UNIQUE INDEX IF NOT EXISTS idx_campaigns_uuid ON campaigns (uuid) WHERE uuid IS NOT NULL",
)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _dumps(value: Any) -> str:
    return jsonform.dumps(value, sort_keys=True)


def _loads(text: str | None) -> Any:
    return None if text is None else parse_json(text, "stored JSON")


def _loads_entries(text: str | None, record_type: type) -> Any:
    """A findings or verdicts column, each entry's numbers read as floats (fuzzer/jsonform.py)."""
    entries = _loads(text)
    return [jsonform.read_numbers(entry, record_type) for entry in entries] if isinstance(entries, list) else entries


def case_key(content_hash: str, backends: list[str]) -> str:
    """What makes a stored case the same case: its graph and arrays (the content hash) and the backends it ran on."""
    return hashlib.sha256(f"{content_hash}\n{_dumps(sorted(backends))}".encode()).hexdigest()[:32]


def _derived_uuid(row: dict) -> str:
    """A version-2 campaign's uuid from its content; a merged copy (config.merged_from 'path#id') gets the original's."""
    config = json.loads(row["config"] or "{}")
    marker = config.pop("merged_from", None) if isinstance(config, dict) else None
    original_id = marker.rpartition("#")[2] if isinstance(marker, str) else str(row["id"])
    text = f"{original_id}|{row['seed']}|{_dumps(config)}|{row['versions']}"
    return str(uuid.uuid5(UUID_NAMESPACE, text))

def _retry_while_locked(step: Callable[[], Any], timeout: float = BUSY_TIMEOUT_S) -> Any:
    """Run `step`, retrying while sqlite says locked/busy.

    Opening is the one place the busy timeout is not enough: switching a new file to
    WAL needs an exclusive lock, and sqlite reports SQLITE_BUSY at once (without the
    busy handler) when another process is opening the same new file.
    """
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            return step()
        except sqlite3.OperationalError as exc:
            message = str(exc).lower()
            if ("locked" not in message and "busy" not in message) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


# ---------------------------------------------------------------- migrations


def _add_missing_columns(db: sqlite_utils.Database) -> None:
    """ALTER TABLE ADD COLUMN for every column of the current layout a table lacks."""
    model = sqlite_utils.Database(memory=True)
    for sql in _SCHEMA_SQL.values():
        model.execute(sql)
    for table in _SCHEMA_SQL:
        if not db[table].exists():
            continue  # a table a later version adds: its own step creates it
        have = {column.name for column in db[table].columns}
        for column in model[table].columns:
            if column.name not in have:
                default = f" DEFAULT {column.default_value}" if column.default_value is not None else ""
                db.execute(f"ALTER TABLE [{table}] ADD COLUMN [{column.name}] {column.type}{default}")
    model.close()


def _backfill_element_counts(db: sqlite_utils.Database) -> None:
    rows = db.execute("SELECT id FROM cases WHERE element_count IS NULL").fetchall()
    for (case_id,) in rows:
        total = 0
        for name, blob in db.execute("SELECT name, npy FROM case_arrays WHERE case_id = ?", [case_id]).fetchall():
            total += from_npy_bytes(blob, f"array '{name}' of case {case_id}").size
        db.execute("UPDATE cases SET element_count = ? WHERE id = ?", [total, case_id])


def _to_v1(db: sqlite_utils.Database) -> None:
    """Version 0 (pre-release) lacked cases.element_count, cases.shrink_log and buckets.note.

    Also creates the whole layout in a new, empty file.
    """
    for sql in _SCHEMA_SQL.values():
        db.execute(sql)
    _add_missing_columns(db)
    _backfill_element_counts(db)
    for sql in _INDEXES_SQL:
        db.execute(sql)


# Ordered steps: (version the step produces, step). Append new ones; never edit old ones.
def _to_v2(db: sqlite_utils.Database) -> None:
    """Version 2 adds cases.verdicts: every backend's verdict and error, not only the findings."""
    _add_missing_columns(db)


def _to_v3(db: sqlite_utils.Database) -> None:
    """Version 3 identifies cases by content (cases.case_key) and campaigns by uuid, and adds the campaign lease."""
    _add_missing_columns(db)
    seen: set[str] = set()
    for case_id, content_hash, backends in db.execute("SELECT id, content_hash, backends FROM cases ORDER BY id").fetchall():
        key = case_key(content_hash, json.loads(backends or "[]"))
        if key not in seen:  # a duplicate the old version stored keeps a NULL key; nothing is deleted
            seen.add(key)
            db.execute("UPDATE cases SET case_key = ? WHERE id = ?", [key, case_id])
    columns = ["id", "seed", "config", "versions"]
    for row in db.execute(f"SELECT {', '.join(columns)} FROM campaigns ORDER BY id").fetchall():
        campaign_uuid = _derived_uuid(dict(zip(columns, row)))
        if db.execute("SELECT 1 FROM campaigns WHERE uuid = ?", [campaign_uuid]).fetchone() is None:
            db.execute("UPDATE campaigns SET uuid = ? WHERE id = ?", [campaign_uuid, row[0]])
    for sql in _UNIQUE_SQL:
        db.execute(sql)


def _to_v4(db: sqlite_utils.Database) -> None:
    """Version 4 adds buckets.known_bug: the id of the known-bug registry entry a bucket is."""
    _add_missing_columns(db)


def _to_v5(db: sqlite_utils.Database) -> None:
    """Version 5 bounds the corpus: buckets.first_case, latest_case and campaigns (findings per campaign
    id), taken from the stored cases (nothing is deleted); and rewrites findings and verdicts that hold
    NaN or Infinity tokens in the strict form (fuzzer/jsonform.py), which sqlite's JSON functions read."""
    _add_missing_columns(db)
    db.execute("CREATE INDEX IF NOT EXISTS idx_cases_shrunk_from ON cases (shrunk_from)")
    kept: dict[str, dict] = {}  # signature -> first_case, latest_case, campaigns
    rows = db.execute("SELECT id, campaign_id, findings, case_key FROM cases WHERE shrunk_from IS NULL ORDER BY id").fetchall()
    for case_id, campaign_id, findings, key in rows:
        entries = json.loads(findings or "[]")
        for signature in {f.get("signature") for f in entries if isinstance(f, dict)} - {None}:
            bucket = kept.setdefault(signature, {"first_case": case_id, "campaigns": {}})
            bucket["latest_case"] = case_id
            if campaign_id is not None and key is not None:  # a duplicate version 2 stored was never counted
                bucket["campaigns"][str(campaign_id)] = bucket["campaigns"].get(str(campaign_id), 0) + 1
    for signature, bucket in kept.items():
        db.execute("UPDATE buckets SET first_case = ?, latest_case = ?, campaigns = ? WHERE signature = ?",
                   [bucket["first_case"], bucket["latest_case"], _dumps(bucket["campaigns"]), signature])
    for case_id, findings, verdicts in db.execute(
            "SELECT id, findings, verdicts FROM cases WHERE findings LIKE '%NaN%' OR findings LIKE '%Infinity%' "
            "OR verdicts LIKE '%NaN%' OR verdicts LIKE '%Infinity%'").fetchall():
        db.execute("UPDATE cases SET findings = ?, verdicts = ? WHERE id = ?",
                   [jsonform.dumps(json.loads(findings)), jsonform.dumps(json.loads(verdicts or "[]")), case_id])


def _to_v6(db: sqlite_utils.Database) -> None:
    """Version 6 has one bucket per cause, with its members (fuzzer/buckets.py). Each version-5
    bucket (one finding signature) becomes a member of itself; Corpus.migrate then groups them
    as `fuzz rebucket` does, keeping every finding's signature."""
    db.execute(_SCHEMA_SQL["members"])
    db.execute("CREATE INDEX IF NOT EXISTS idx_members_signature ON members (signature)")
    db.execute("INSERT OR IGNORE INTO members (bucket, signature, verdict, backend, culprit, count, campaigns) "
               "SELECT signature, signature, verdict, backend, culprit, count, campaigns FROM buckets")


MIGRATIONS: list[tuple[int, Callable[[sqlite_utils.Database], None]]] = [
    (1, _to_v1),
    (2, _to_v2),
    (3, _to_v3),
    (4, _to_v4),
    (5, _to_v5),
    (6, _to_v6),
]
GROUPED_BY_CAUSE = 6  # the version from which buckets group findings by cause (see _to_v6)


# ---------------------------------------------------------------- stored rows


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
                            "'backend' and 'culprit')")
        if not isinstance(backend_verdicts, list) or not all(_is_verdict(v) for v in backend_verdicts):
            raise UserError(f"case {self.id} has malformed verdicts (each needs string 'backend' and 'verdict')")
        return CaseRecord(
            self.case, campaign_id=self.campaign_id, verdict=self.verdict, backends=self.backends,
            findings=[Finding.from_dict(f) for f in findings], verdicts=[BackendVerdict.from_dict(v) for v in backend_verdicts],
            shrunk_from=self.shrunk_from, shrink_log=self.shrink_log, created=self.created,
        )


def _live_holder(lease: dict) -> int | None:
    """The pid of the live process holding a campaign's lease, or None when it is free or stale
    (a dead pid on this host, or no heartbeat for LEASE_STALE_S)."""
    pid, host, heartbeat = lease["lease_pid"], lease["lease_host"], lease["lease_heartbeat"]
    if pid is None or heartbeat is None or time.time() - heartbeat > LEASE_STALE_S:
        return None
    if host == socket.gethostname():
        if pid == os.getpid():
            return None  # this process: its own earlier lease
        if not _process_alive(pid):
            return None
    return pid


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    try:  # a zombie (ended, not yet reaped) is gone
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return True


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


# ---------------------------------------------------------------- the corpus


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
            _retry_while_locked(self._enable_wal)
            _retry_while_locked(self.migrate)
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
                self.db.execute(_SCHEMA_SQL["meta"])
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
                [str(uuid.uuid4()), _now(), seed, _dumps(config), _dumps(versions)],
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
            holder = _live_holder(row)
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
                [_dumps(state), cases_run, findings, time.time(), campaign_id, os.getpid(), socket.gethostname()],
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
            _retry_while_locked(lambda: self.db.conn.executescript("PRAGMA incremental_vacuum"))

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
                "running_in_pid": row["lease_pid"] if _live_holder(row) is not None else None,
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
                            [_dumps(campaigns), bucket, finding["signature"]])

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
            [int(counts), case["created"], _dumps(campaigns), case["id"] if generated else None, int(newer), case["id"],
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
        needed = _needed_arrays(graph)  # the shape rules and resource bounds, before any array is read
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
                                 _dumps(bucket["tally"].campaigns), bucket["first_seen"], bucket["last_seen"], signature])
            for (signature, finding_signature), member in plan.members.items():
                if member["described"] is not None:
                    self._bump_member(signature, member["described"])
                self.db.execute("UPDATE members SET count = ?, campaigns = ? WHERE bucket = ? AND signature = ?",
                                [member["tally"].count, _dumps(member["tally"].campaigns), signature, finding_signature])
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
                            [added, _dumps(tallies), theirs["first_seen"], theirs["last_seen"], theirs["signature"]])
        our_members = {member["signature"]: member for member in ours["members"]}
        for member in theirs["members"]:
            if member["signature"] not in our_members:  # no finding of it came here with the cases: counted from theirs
                self._bump_member(ours["signature"], member)
            mine = our_members.get(member["signature"], {"campaigns": {}})
            added, tallies = _raised(mine["campaigns"], _checked_tallies(member, f"member '{member['signature']}'", path),
                                     campaigns)
            if added:
                self.db.execute("UPDATE members SET count = count + ?, campaigns = ? WHERE bucket = ? AND signature = ?",
                                [added, _dumps(tallies), ours["signature"], member["signature"]])

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
        checked = [self._imported_case(data) for data in exported]
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

    def _imported_case(self, data: dict) -> tuple[CaseRecord, list[dict]]:
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
                "and 'culprit'."
            )
        triage = data.get("triage", [])
        if not isinstance(triage, list) or not all(_is_triage(entry) for entry in triage):
            raise UserError(f"The case file's 'triage' must be a list of objects with a string 'bucket', a 'status' "
                            f"({', '.join(STATUSES)}), a list of finding signatures 'findings', and a string or null "
                            "'note' and 'known_bug'.")
        # Findings are kept as the file has them (fuzzer/jsonform.py): another release's keys included.
        record = CaseRecord(case, verdict=verdict, backends=backends, findings=[Finding.from_dict(f) for f in findings])
        return record, triage


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


def is_finding(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(value.get(key), str) for key in ("signature", "verdict", "backend", "culprit")
    )


def _is_triage(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("bucket"), str) and value.get("status") in STATUSES
            and isinstance(value.get("findings"), list) and all(isinstance(s, str) for s in value["findings"])
            and all(value.get(key) is None or isinstance(value[key], str) for key in ("note", "known_bug")))


def _is_verdict(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(value.get(key), str) for key in ("backend", "verdict"))


def _needed_arrays(graph: Graph) -> dict[str, tuple[int, ...]]:
    """Every array a case of `graph` needs, by name, with its shape (checking the shape rules and resource bounds)."""
    shapes = infer_shapes(graph)
    needed = {spec.name: spec.shape for spec in graph.inputs}
    needed.update(param_shapes(graph, shapes))
    return needed


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
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"Case file '{path}' is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            "pass a file written by `fuzz export`."
        ) from None
    except RecursionError:
        raise UserError(f"Case file '{path}' nests deeper than {MAX_JSON_DEPTH} levels; refusing to load it.") from None
    check_json_depth(data, f"case file '{path}'")
    if not isinstance(data, dict):
        raise UserError(
            f"Case file '{path}' holds a JSON {type(data).__name__}, not an object; pass a file written by `fuzz export`."
        )
    return data


def case_from_export(data: Any) -> Case:
    """The Case in an exported dict, fully validated (format, version, graph, arrays without pickles, shapes)."""
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
    graph = Graph.from_dict(data["graph"])
    needed = _needed_arrays(graph)  # the shape rules and resource bounds, before any array is decoded
    arrays_data = data.get("arrays")
    if not isinstance(arrays_data, dict) or not all(
        isinstance(name, str) and isinstance(text, str) for name, text in arrays_data.items()
    ):
        raise UserError("The exported case's 'arrays' must be an object mapping names to base64 .npy strings.")
    extra = sorted(set(arrays_data) - set(needed))
    if extra:
        raise UserError(f"The exported case carries arrays the graph does not use: {extra}.")
    arrays = {name: from_base64(text, f"array '{name}'", needed[name]) for name, text in arrays_data.items()}
    seed = data.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise UserError(f"The exported case's 'seed' must be an integer, not {seed!r}.")
    expect = data.get("expect")
    if expect is not None and not isinstance(expect, str):
        raise UserError(f"The exported case's 'expect' must be a string, not {expect!r}.")
    case = Case(graph, arrays, seed)
    case.validate()
    return case
