"""The corpus file's layout (schema version 8) and the migrations that bring an older file up to it.

Each migration is one ordered step that produces the next version (MIGRATIONS); `Corpus.migrate`
runs the steps a file still needs, under the write lock. Append new steps; never edit old ones.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any, Callable

import sqlite_utils

from fuzzer import jsonform
from fuzzer.arrays import from_npy_bytes

SCHEMA_VERSION = 9
# Merged campaigns are recognized by uuid; older files get one derived from the row's content
# (with its original id), so a file and a copy of it migrated separately agree.
UUID_NAMESPACE = uuid.UUID("5d3c1a8e-6b0f-4d2a-9a57-3f0e2f4c8b11")
SQLITE_HEADER = b"SQLite format 3\x00"

# The full layout of the current schema version. Migrations bring older files up to it.
SCHEMA_SQL = {
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
    # `id` is the bucket's handle (`fuzz triage B7`): AUTOINCREMENT never hands out a deleted bucket's id again.
    "buckets": """CREATE TABLE IF NOT EXISTS buckets (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        signature TEXT NOT NULL UNIQUE,
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
        campaigns TEXT NOT NULL DEFAULT '{}',
        localization TEXT)""",
    "members": """CREATE TABLE IF NOT EXISTS members (
        bucket TEXT NOT NULL,
        signature TEXT NOT NULL,
        verdict TEXT NOT NULL,
        backend TEXT NOT NULL,
        culprit TEXT NOT NULL,
        count INTEGER NOT NULL DEFAULT 0,
        campaigns TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (bucket, signature))""",
    # One row per bucket, environment and set of versions: a check of the same release again replaces it.
    "release_checks": """CREATE TABLE IF NOT EXISTS release_checks (
        bucket TEXT NOT NULL,
        environment TEXT NOT NULL,
        versions TEXT NOT NULL,
        case_id INTEGER,
        outcome TEXT NOT NULL,
        detail TEXT NOT NULL DEFAULT '',
        checked_at TEXT NOT NULL,
        PRIMARY KEY (bucket, environment, versions))""",
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


def sorted_json(value: Any) -> str:
    """The stored JSON form of a config, tally or key list: keys sorted, so equal values store equal text."""
    return jsonform.dumps(value, sort_keys=True)


def case_key(content_hash: str) -> str:
    """What makes a stored case the same case: its graph and arrays (inputs and parameters), whatever
    backends ran it (a resumed campaign's compile budget runs it on others). Rows of older releases
    keep a key that also holds the backends; CaseStore finds a case by its content hash, so both count."""
    return hashlib.sha256(f"{content_hash}\n".encode()).hexdigest()[:32]


def _v3_case_key(content_hash: str, backends: list[str]) -> str:
    """The key version 3 gave a case: its content and the backends it ran on."""
    return hashlib.sha256(f"{content_hash}\n{sorted_json(sorted(backends))}".encode()).hexdigest()[:32]


def _derived_uuid(row: dict) -> str:
    """A version-2 campaign's uuid from its content; a merged copy (config.merged_from 'path#id') gets the original's."""
    config = json.loads(row["config"] or "{}")
    marker = config.pop("merged_from", None) if isinstance(config, dict) else None
    original_id = marker.rpartition("#")[2] if isinstance(marker, str) else str(row["id"])
    text = f"{original_id}|{row['seed']}|{sorted_json(config)}|{row['versions']}"
    return str(uuid.uuid5(UUID_NAMESPACE, text))


def _add_missing_columns(db: sqlite_utils.Database) -> None:
    """ALTER TABLE ADD COLUMN for every column of the current layout a table lacks."""
    model = sqlite_utils.Database(memory=True)
    for sql in SCHEMA_SQL.values():
        model.execute(sql)
    for table in SCHEMA_SQL:
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
    for sql in SCHEMA_SQL.values():
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
        key = _v3_case_key(content_hash, json.loads(backends or "[]"))
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
                   [bucket["first_case"], bucket["latest_case"], sorted_json(bucket["campaigns"]), signature])
    for case_id, findings, verdicts in db.execute(
            "SELECT id, findings, verdicts FROM cases WHERE findings LIKE '%NaN%' OR findings LIKE '%Infinity%' "
            "OR verdicts LIKE '%NaN%' OR verdicts LIKE '%Infinity%'").fetchall():
        db.execute("UPDATE cases SET findings = ?, verdicts = ? WHERE id = ?",
                   [jsonform.dumps(json.loads(findings)), jsonform.dumps(json.loads(verdicts or "[]")), case_id])


def _to_v6(db: sqlite_utils.Database) -> None:
    """Version 6 has one bucket per cause, with its members (fuzzer/triaging/buckets.py). Each version-5
    bucket (one finding signature) becomes a member of itself; Corpus.migrate then groups them
    as `fuzz rebucket` does, keeping every finding's signature."""
    db.execute(SCHEMA_SQL["members"])
    db.execute("CREATE INDEX IF NOT EXISTS idx_members_signature ON members (signature)")
    db.execute("INSERT OR IGNORE INTO members (bucket, signature, verdict, backend, culprit, count, campaigns) "
               "SELECT signature, signature, verdict, backend, culprit, count, campaigns FROM buckets")


def _to_v7(db: sqlite_utils.Database) -> None:
    """Version 7 adds release_checks: a bucket's case replayed in other releases (`fuzz replay --on`)."""
    db.execute(SCHEMA_SQL["release_checks"])


def _to_v8(db: sqlite_utils.Database) -> None:
    """Version 8 gives each bucket an integer id, its handle on the command line (`fuzz triage B7`),
    in the order the buckets were stored. sqlite cannot add a primary key to a table: the table is
    copied into the new layout."""
    if db["buckets"].pks == ["id"]:
        return  # a new file: _to_v1 created the current layout
    columns = ", ".join(f"[{column.name}]" for column in db["buckets"].columns if column.name != "id")
    db.execute("ALTER TABLE buckets RENAME TO buckets_v7")
    db.execute(SCHEMA_SQL["buckets"])
    db.execute(f"INSERT INTO buckets ({columns}) SELECT {columns} FROM buckets_v7 ORDER BY rowid")
    db.execute("DROP TABLE buckets_v7")
    db.execute("CREATE INDEX IF NOT EXISTS idx_buckets_status ON buckets (status)")


def _to_v9(db: sqlite_utils.Database) -> None:
    """Version 9 adds buckets.localization: the compiler pass `fuzz localize` named (fuzzer/triaging/pass_bisect.py)."""
    _add_missing_columns(db)


MIGRATIONS: list[tuple[int, Callable[[sqlite_utils.Database], None]]] = [
    (1, _to_v1),
    (2, _to_v2),
    (3, _to_v3),
    (4, _to_v4),
    (5, _to_v5),
    (6, _to_v6),
    (7, _to_v7),
    (8, _to_v8),
    (9, _to_v9),
]
GROUPED_BY_CAUSE = 6  # the version from which buckets group findings by cause (see _to_v6)
