"""The corpus stays the file that was opened, holds what was stored, and says plainly why it cannot
be written.

- OpenedFile: the file's (device, inode) at open, compared with what its path names now before
  every write transaction. A folder removed (`rm -r`) or a file replaced (`git checkout` of a
  tracked corpus) stops the writer with a UserError; it never writes into a file it did not
  open, and on close it empties its write-ahead log only while that log is still its own, so
  sqlite does not replay its old writes over the new file.
- The corpus id: a random number each corpus carries in its sqlite header (application_id, bytes
  68-71), read from the file itself before every write transaction. `cp` of another corpus over an
  open one keeps the inode but brings another id: the writer stops with a UserError and drops its
  write-ahead log (its pages are the old content's; sqlite would copy them into the new one on
  close), and an opener that finds a log belonging to an overwritten file refuses to read through
  it. A copy of the same corpus (an old backup of it) carries the same id and is not caught.
- verify_content: a case read back must have the content hash it was stored under (a flipped
  byte in an array is refused, not replayed or merged as a new case).
- Opening read-only where the file or its folder cannot be written (reading commands work;
  writing ones are refused in one sentence), and storage_error: a full disk, a lock held past
  the busy timeout or a read-only file as one sentence (exit 2), never a traceback.
"""

from __future__ import annotations

import contextlib
import os
import secrets
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


_ID_BYTES = slice(68, 72)  # the sqlite header's application_id: the corpus id
_WAL_INDEX_HEADER = 136  # the -shm file's two header copies and checkpoint info: zeroed, sqlite rebuilds them


def header_id(path: Path) -> int | None:
    """The corpus id in the file at `path` itself, as its header has it (not through the write-ahead
    log); None if the file is gone or too short to hold one."""
    try:
        with open(path, "rb") as file:
            header = file.read(_ID_BYTES.stop)
    except OSError:
        return None
    return int.from_bytes(header[_ID_BYTES], "big", signed=True) if len(header) == _ID_BYTES.stop else None


def new_corpus_id() -> int:
    return secrets.randbelow(2**31 - 1) + 1  # application_id is a signed 32-bit number; 0 means none


class OpenedFile:
    """A corpus file as opened: is its path still naming it?"""

    def __init__(self, path: Path):
        self.path = path
        self.file = _identity(path)
        self.log: tuple[int, int] | None = None
        self.lost = False  # the path was found naming another file, or none
        self.corpus_id: int | None = None  # None: a file without one (read-only, of an older release)
        self.id_on_disk = False  # seen in the file itself (a new id reaches it at a checkpoint)
        self.overwritten = False  # other content was written over the file (cp): our log is not its

    def note_id(self, conn: sqlite3.Connection) -> None:
        """Remember the corpus id (through `conn`: the log's newest header)."""
        self.corpus_id = conn.execute("PRAGMA application_id").fetchone()[0] or None
        self.id_on_disk = self.corpus_id is not None and header_id(self.path) == self.corpus_id

    def note_log(self) -> None:
        """Remember the write-ahead log sqlite opened beside the file (once the file is in WAL mode)."""
        self.log = _identity(_wal(self.path))

    def replaced(self) -> bool:
        """Whether the path no longer names the file that was opened (removed, or another file there,
        or the same file with another corpus's content: header_id)."""
        self.lost = self.lost or _identity(self.path) != self.file or self._overwritten()
        return self.lost

    def _overwritten(self) -> bool:
        if self.corpus_id is None:
            return False
        on_disk = header_id(self.path)
        self.id_on_disk = self.id_on_disk or on_disk == self.corpus_id
        self.overwritten = on_disk != self.corpus_id and (self.id_on_disk or on_disk != 0)
        return self.overwritten

    def error(self) -> UserError:
        if self.overwritten:
            return UserError(f"The corpus '{self.path}' was overwritten with another corpus (a copy over it) while this "
                             "process had it open, so nothing more was written and its write-ahead log (writes to the file "
                             "that was there) was dropped; put the corpus back or pass --db with another path.")
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
            if self.overwritten:
                self._drop_log()
            else:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()

    def _drop_log(self) -> None:
        """Empty the write-ahead log of a file overwritten in place, and zero the header of its shared
        index so that sqlite rebuilds it from the empty log: the log's pages belong to the content that
        was overwritten, and closing would copy them into the new one."""
        with contextlib.suppress(OSError):
            os.truncate(_wal(self.path), 0)
            with open(f"{self.path}-shm", "r+b") as index:
                index.write(bytes(_WAL_INDEX_HEADER))


def refuse_a_log_not_its_own(conn: sqlite3.Connection, path: Path) -> None:
    """UserError if the file's own header has another corpus id than `conn` (a read-only connection)
    sees through the write-ahead log: the log is a live process's writes to a file that was overwritten."""
    seen, on_disk = conn.execute("PRAGMA application_id").fetchone()[0], header_id(path)
    if seen and on_disk not in (0, seen):
        raise UserError(f"The corpus '{path}' was overwritten (a copy over it?) while a process had it open: its "
                        f"write-ahead log '{_wal(path)}' holds that process's writes to the file that was there before; "
                        "stop that process (it then drops the log) and run the command again.")


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
