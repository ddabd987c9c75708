"""Several processes on one corpus file: retrying while sqlite is locked, and the lease a running
campaign holds on its row (pid, host, heartbeat), so that a second `--resume` of it is refused while
the first lives."""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable

from fuzzer.errors import UserError

BUSY_TIMEOUT_S = 30.0
LEASE_STALE_S = 60.0  # a campaign checkpoints every few seconds; this long without one, it is dead


class CorpusLocked(UserError):
    """Another process held the corpus's write lock past the busy timeout (one sentence, exit 2)."""


def retry_while_locked(step: Callable[[], Any], timeout: float = BUSY_TIMEOUT_S) -> Any:
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
        except (sqlite3.OperationalError, CorpusLocked) as exc:
            message = str(exc).lower()
            if ("locked" not in message and "busy" not in message) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def live_holder(lease: dict) -> int | None:
    """The pid of the live process holding a campaign's lease, or None when it is free or stale
    (a dead pid on this host, or no heartbeat for LEASE_STALE_S)."""
    pid, host, heartbeat = lease["lease_pid"], lease["lease_host"], lease["lease_heartbeat"]
    if not isinstance(pid, int) or not isinstance(heartbeat, (int, float)) or time.time() - heartbeat > LEASE_STALE_S:
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
