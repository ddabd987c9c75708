"""Running one backend on one case and capturing whatever happens as an Outcome.

In-process execution lives here; campaign workers (fuzzer/running/workers.py) call the same
function inside isolated processes, so failure capture is written once.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import Callable

import numpy as np

from fuzzer.backends import Backend
from fuzzer.errors import ForeignError, OpUnsupported
from fuzzer.ir import Case

OK, ERROR, CRASH, HANG, UNSUPPORTED = "ok", "error", "crash", "hang", "unsupported"


@dataclass
class Outcome:
    backend: str
    status: str  # ok | error (raised) | crash (process died) | hang (timed out) | unsupported (an op)
    outputs: list[np.ndarray] | None = None
    error: str = ""
    seconds: float = 0.0


# What runs a backend on a case: run_backend in this process, or a campaign worker's.
Runner = Callable[[Backend, Case], "Outcome"]


def run_backend(backend: Backend, case: Case) -> Outcome:
    start = time.perf_counter()
    try:
        outputs = backend.run(case)
    except OpUnsupported as exc:
        return Outcome(backend.name, UNSUPPORTED, error=str(exc), seconds=time.perf_counter() - start)
    except ForeignError as exc:
        return Outcome(backend.name, ERROR, error=str(exc), seconds=time.perf_counter() - start)
    except Exception as exc:  # noqa: BLE001 - any failure of the backend is data, not our crash
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return Outcome(backend.name, ERROR, error=text, seconds=time.perf_counter() - start)
    return Outcome(backend.name, OK, outputs=outputs, seconds=time.perf_counter() - start)
