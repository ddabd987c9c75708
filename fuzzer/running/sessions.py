"""A process and everything it starts end together: a worker (or a plugin's trial load) leads its own
session, and ending it kills the whole session. Kept apart from workers.py so that plugins.py, which
workers.py imports through pipeline.py, can use it without an import circle."""

from __future__ import annotations

import contextlib
import os
import signal


def end_session(pid: int | None) -> None:
    """SIGKILL what is left of the session led by process `pid` (a worker: _worker_main starts one):
    the processes it started, which would otherwise outlive the campaign and hold its stderr
    open (a plugin's 26 sleeping helpers kept a caller waiting 170 s for end of output)."""
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):  # none left (or the worker never started one)
        os.killpg(pid, signal.SIGKILL)
