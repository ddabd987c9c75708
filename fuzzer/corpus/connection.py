"""The corpus file opened: refusing a file we did not write, migrating an older one, and the one
write transaction at a time that every other part of the Corpus writes in (CorpusFile).

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
import sqlite3
from pathlib import Path
from typing import Any, Iterator

import sqlite_utils

from fuzzer.corpus.integrity import (OpenedFile, new_corpus_id, open_read_only, refuse_a_log_not_its_own,
                                     storage_errors_explained, unwritable)
from fuzzer.corpus.locking import BUSY_TIMEOUT_S, retry_while_locked
from fuzzer.corpus.schema import GROUPED_BY_CAUSE, MIGRATIONS, SCHEMA_SQL, SCHEMA_VERSION, SQLITE_HEADER
from fuzzer.errors import UserError
from fuzzer.ir import parse_json


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def stored_json(text: str | None) -> Any:
    return None if text is None else parse_json(text, "stored JSON")


class CorpusFile:
    """The open sqlite file under every part of the Corpus: opening, migrating, closing, and the
    plumbing (one write transaction, reads, the errors for a missing case or campaign)."""

    db: sqlite_utils.Database

    def __init__(self, path: str | Path, create: bool = True):
        self.path = Path(path)
        self._closed = False
        self._write_depth = 0
        self.pages_checked = False  # sqlite's quick_check passed (merge.py)
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
        self.read_only = None if new_file else unwritable(self.path)  # why it cannot be written (integrity.py)
        try:
            conn = open_read_only(self.path) if self.read_only else sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S)
        except sqlite3.Error as exc:
            raise UserError(f"Cannot open corpus '{self.path}' ({exc}); check the path and its permissions.") from None
        self.db = sqlite_utils.Database(conn)
        self.opened = OpenedFile(self.path)  # a write to a file the path no longer names is refused (integrity.py)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            if new_file:  # set before the first table: the pages of dropped cases can go back (_give_back_free_pages)
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            if not self.read_only:
                retry_while_locked(self._enable_wal)
            retry_while_locked(self.migrate)
            if not self.read_only:
                retry_while_locked(self._stamp_id)
            self.opened.note_id(conn)
            self.opened.note_log()
        except BaseException:
            self.close()
            raise

    # ---- opening

    def _enable_wal(self) -> None:
        mode = self.db.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise sqlite3.OperationalError(f"database is locked (journal_mode stayed {mode})")

    def _stamp_id(self) -> None:
        """Give a corpus without one (new, or of an older release) its random id (integrity.py), and
        put it in the file itself at once, where a copy over the file is seen to change it."""
        if self.db.conn.execute("PRAGMA application_id").fetchone()[0]:
            return
        with self._write():
            if not self.db.conn.execute("PRAGMA application_id").fetchone()[0]:  # again, under the lock
                self.db.conn.execute(f"PRAGMA application_id = {new_corpus_id()}")
        with storage_errors_explained(self.path):
            self.db.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

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
        try:
            conn = open_read_only(self.path)
        except sqlite3.Error as exc:
            raise UserError(f"Cannot open '{self.path}' ({exc}); check the path and its permissions.") from None
        try:
            self._check_layout(sqlite_utils.Database(conn, execute_plugins=False, recursive_triggers=False))
            refuse_a_log_not_its_own(conn, self.path)
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
        trigger = db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name").fetchone()
        if trigger is not None:  # it would run at our writes: data in the file, acting as code
            raise UserError(f"The corpus '{self.path}' holds the SQL trigger '{trigger[0]}', which the fuzzer never writes "
                            "(it would change stored data at every write); drop it or pass --db with another corpus.")
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
            self.opened.release(self.db.conn)

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
        if self.read_only:
            raise UserError(f"The corpus '{self.path}' cannot be written: {self.read_only}; pass --db with a corpus you "
                            "may write, or fix its permissions.")
        if self.opened.lost:
            raise self.opened.error()
        conn = self.db.conn
        with storage_errors_explained(self.path):
            conn.execute("BEGIN IMMEDIATE")
            if self.opened.replaced():
                conn.execute("ROLLBACK")
                self.close()  # at once: our log at the path would be replayed over the new file
                raise self.opened.error()
            if self.opened.corpus_id is not None:  # the header page in every commit: a reader through our log after
                conn.execute(f"PRAGMA application_id = {self.opened.corpus_id}")  # a copy over the file sees its id
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

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads that see one state of the file, whatever other processes write meanwhile (a merge of a
        live corpus: its cases and its buckets' counts from the same moment). Joins a write transaction."""
        conn = self.db.conn
        if conn.in_transaction:
            yield
            return
        conn.execute("BEGIN DEFERRED")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        """One write transaction around several writes: all or none reach the file (a campaign stores a
        case index's findings and the checkpoint that marks it done in one, so a kill -9 loses or repeats nothing)."""
        return self._write()

    def _rows(self, sql: str, params: list | dict | None = None) -> list[dict]:
        return list(self.db.query(sql, params or []))

    def _one(self, sql: str, params: list | None = None) -> dict | None:
        rows = self._rows(sql, params)
        return rows[0] if rows else None

    def _exists(self, table: str, row_id: int) -> bool:
        return self.db.execute(f"SELECT 1 FROM [{table}] WHERE id = ?", [row_id]).fetchone() is not None

    def _no_case(self, case_id: int) -> UserError:
        return UserError(f"No case with id {case_id} in {self.path}; run `fuzz list` to see stored cases.")

    def _no_campaign(self, campaign_id: int) -> UserError:
        return UserError(f"No campaign with id {campaign_id} in {self.path}; run `fuzz campaigns` to list them.")
