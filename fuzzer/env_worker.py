"""The worker that runs backends inside another Python environment (see fuzzer/running/envs.py).

It needs only numpy and a framework: it imports the IR, the ops and the backends, none
of which import anything else at module level. Started as `python -s -m fuzzer.running.env_worker`,
it first writes {"versions": {...}}, then answers one JSON line per request:

  -> {"backend": "jax-jit:cpu:float32", "case": FOLDER, "strict": false}
  <- {"ok": true, "outputs": N}          N outputs written to FOLDER/outputs (fuzzer/running/case_folder.py): a
                                          program's every step and written inputs, a grad kind's gradients
  <- {"unsupported": OP, "reason": TEXT}  this release lacks an API that OP's implementation uses
  <- {"unsupported": null, "reason": TEXT}
                                          this release cannot take this case: OpUnsupported, raised
                                          by an op (a form older than its declared minimum release)
                                          or the backend (a graph break), or no op is known
  <- {"error": TEXT}                      the backend raised: a crash finding, as in-process
  -> {"check": "jax-jit:cpu:float32"}
  <- {"reason": null or TEXT}             can the backend run here (framework importable, device present)?

The protocol has stdout to itself; whatever the frameworks print goes to stderr. The
worker ends at EOF on stdin, and on Linux also when its parent dies.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import types
from pathlib import Path

FRAMEWORK_MODULES = ("torch", "jax", "jaxlib", "numpy")


def _die_with_parent() -> None:
    """A worker stuck in a kernel never reads EOF: ask Linux to kill it when its parent goes."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def missing_api(exc: BaseException) -> bool:
    """Is this the error of calling an API that the installed release does not have?"""
    if isinstance(exc, ImportError):
        return True
    if isinstance(exc, AttributeError):
        owner = getattr(exc, "obj", None)
        return isinstance(owner, types.ModuleType) and owner.__name__.split(".")[0] in FRAMEWORK_MODULES
    return isinstance(exc, TypeError) and "unexpected keyword argument" in str(exc)


class Worker:
    def __init__(self):
        self.backends: dict = {}
        self.current_op: str | None = None  # the op last called: names it when the release cannot run it

    def backend(self, spec: str, strict: bool):
        from fuzzer.backends import get_backend

        key = (spec, strict)
        if key not in self.backends:
            backend = get_backend(spec)
            backend = backend.strict_variant() if strict else backend
            backend.impl_for = self._tracking(backend.impl_for)
            self.backends[key] = backend
        return self.backends[key]

    def _tracking(self, impl_for):
        def tracking_impl_for(op_name):
            impl = impl_for(op_name)

            def run_op(*args):
                self.current_op = op_name
                return impl(*args)

            return run_op

        return tracking_impl_for

    def run(self, request: dict) -> dict:
        from fuzzer.errors import OpUnsupported
        from fuzzer.running import case_folder

        backend = self.backend(request["backend"], bool(request.get("strict")))
        root = Path(request["case"])
        case = case_folder.read_case(root)
        self.current_op = None
        try:
            outputs = backend.run(case)
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the fuzzer as data
            text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            if missing_api(exc):
                return {"unsupported": self.current_op, "reason": text}
            if isinstance(exc, OpUnsupported):  # as in-process: no verdict on this case, and no finding
                return {"unsupported": None, "reason": text}
            return {"error": text}
        case_folder.write_outputs(outputs, root)
        return {"ok": True, "outputs": len(outputs)}

    def check(self, request: dict) -> dict:
        from fuzzer.backends import get_backend

        try:
            return {"reason": get_backend(request["check"]).unavailable_reason()}
        except Exception as exc:  # noqa: BLE001 - an unknown kind or a broken import is the answer
            return {"reason": str(exc)}


def main() -> int:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # prints from the frameworks land on stderr
    sys.stdout = sys.stderr
    from fuzzer.running.environment import versions

    protocol.write(json.dumps({"versions": versions()}) + "\n")
    if "--probe" in sys.argv:
        return 0
    _die_with_parent()
    worker = Worker()
    for line in sys.stdin:
        request = json.loads(line)
        handler = worker.check if "check" in request else worker.run
        answer = handler(request)
        protocol.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
