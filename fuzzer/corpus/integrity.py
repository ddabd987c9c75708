"""The corpus stays the file that was opened, holds what was stored, and says plainly why it cannot
be written.

- OpenedFile: the file's (device, inode) at open, compared with what its path names now before
  every write transaction. A folder removed (`rm -r`) or a file replaced (`git checkout` of a
  tracked corpus) stops the writer with a UserError; it never writes into a file it did not
  open, and on close it empties its write-ahead log only while that log is still its own, so
  sqlite does not replay its old writes over the new file.
- verify_content: a case read back must have the content hash it was stored under (a flipped
  byte in an array is refused, not replayed or merged as a new case).
- Opening read-only where the file or its folder cannot be written (reading commands work;
  writing ones are refused in one sentence), and storage_error: a full disk, a lock held past
  the busy timeout or a read-only file as one sentence (exit 2), never a traceback.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from typing import Iterator

from fuzzer.corpus.locking import BUSY_TIMEOUT_S, CorpusLocked
from fuzzer.errors import UserError
from fuzzer.ir import Case, hash_content

# Connections to a replaced file whose write-ahead log path now names another file: never closed,
# since sqlite deletes the log by its path on close (OpenedFile.release).
_NEVER_CLOSED: list[sqlite3.Connection] = []


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return None
    return status.st_dev, status.st_ino


def _wal(path: Path) -> Path:
    return Path(f"{path}-wal")


class OpenedFile:
    """A corpus file as opened: is its path still naming it?"""

    def __init__(self, path: Path):
        self.path = path
        self.file = _identity(path)
        self.log: tuple[int, int] | None = None
        self.lost = False  # the path was found naming another file, or none

    def note_log(self) -> None:
        """Remember the write-ahead log sqlite opened beside the file (once the file is in WAL mode)."""
        self.log = _identity(_wal(self.path))

    def replaced(self) -> bool:
        """Whether the path no longer names the file that was opened (removed, or another file there)."""
        self.lost = self.lost or _identity(self.path) != self.file
        return self.lost

    def error(self) -> UserError:
        now = "is gone" if _identity(self.path) is None else "is another file now"
        return UserError(f"The corpus '{self.path}' {now}: it was removed or replaced (rm, git checkout, a copy) while "
                         "this process had it open, so nothing more was written; put the corpus back or pass --db with "
                         "another path.")

    def release(self, conn: sqlite3.Connection) -> None:
        """Close `conn`. If the file was replaced, its write-ahead log (still at the path, where the new
        file's readers would replay it) is first emptied into the old file, which only this connection
        still reads; and if that path names another log now, the connection is never closed, since
        sqlite deletes the log by its path on close."""
        if self.replaced() and self.log is not None:
            if _identity(_wal(self.path)) != self.log:
                _NEVER_CLOSED.append(conn)
                return
            with contextlib.suppress(sqlite3.Error):
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()


def verify_content(case_id: int, stored_hash: str, graph_json: str, case: Case, path: Path) -> None:
    """UserError unless the case read back hashes to the content hash it was stored under: from the
    graph text as stored, or as this release writes it (a graph an older release stored)."""
    hashes = (lambda: hash_content(graph_json, case.arrays), case.content_hash)
    if not any(stored_hash == content_hash() for content_hash in hashes):
        raise UserError(f"Case {case_id} in {path} does not match its content hash {stored_hash} (a changed byte in its "
                        "graph or arrays); the corpus was damaged or changed by something other than the fuzzer.")


def unwritable(path: Path) -> str | None:
    """Why this process cannot write the corpus at `path` (an existing file), or None if it can."""
    if not os.access(path, os.W_OK):
        return "the file is read-only"
    if not os.access(path.parent, os.W_OK):  # sqlite writes its log and shared index beside the file
        return "its folder is read-only"
    return None


def open_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection to the corpus at `path`. In a folder it cannot write, sqlite cannot make
    the shared index a WAL-mode file needs; then the file is read as immutable (nobody can write it
    there either), unless a write-ahead log beside it holds writes not yet in the file."""
    uri = path.resolve().as_uri()
    conn = sqlite3.connect(uri + "?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:
        if os.access(path.parent, os.W_OK):
            return conn  # not for want of the shared index (a lock, ...): the caller's first read says so
        conn.close()  # sqlite could not make the shared index in a folder it cannot write
    except sqlite3.DatabaseError:
        return conn  # not a database: the caller's first read says so
    log = _wal(path)
    if log.exists() and log.stat().st_size > 0:
        raise UserError(f"Cannot read the corpus '{path}': its folder is read-only and its write-ahead log '{log}' holds "
                        "writes not yet in the file; open it once where it can be written.")
    return sqlite3.connect(uri + "?immutable=1", uri=True)


def storage_error(exc: sqlite3.Error, path: Path) -> Exception:
    """The UserError a failed write is for the person running the command, or `exc` itself (our bug)."""
    message = str(exc).lower()
    if "disk is full" in message:
        return UserError(f"The corpus '{path}' could not be written: its disk is full ({exc}); free some space and run "
                         "the command again (`fuzz run --resume ID` continues a campaign).")
    if "locked" in message or "busy" in message:
        return CorpusLocked(f"The corpus '{path}' stayed locked by another process for {BUSY_TIMEOUT_S:g} s ({exc}); "
                            "wait for that process to finish or stop it, then run the command again.")
    if "readonly" in message:
        return UserError(f"The corpus '{path}' cannot be written ({exc}); pass --db with a corpus you may write, or "
                         "fix its permissions.")
    if "disk i/o error" in message:
        return UserError(f"The corpus '{path}' could not be written ({exc}: its disk failed or went away); check the disk "
                         "and run the command again.")
    return exc


@contextlib.contextmanager
def storage_errors_explained(path: Path) -> Iterator[None]:
    """Run a write; a full disk, a held lock or a read-only file comes out as one sentence (storage_error)."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        error = storage_error(exc, path)
        if error is exc:
            raise
        raise error from None
