"""External-process backends: a command in any language reads a case folder and writes .npy outputs.

The protocol is documented in docs/external-backends.md (and implemented in
fuzzer/running/case_folder.py). A plugin registers one with
`api.add_external_backend(name, command, ops=[...])`; it is not discovered by module
because each needs its command.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import numpy as np

from fuzzer.backends import Backend
from fuzzer.ir import Case
from fuzzer.ops import registry
from fuzzer.running import case_folder


class ExternalProcessError(RuntimeError):
    """The command failed: its exit status and the end of its stderr (a crash finding)."""


class ExternalBackend(Backend):
    family = "external"
    description = "an external command (docs/external-backends.md)"

    def __init__(self, name: str, command: list[str], ops: list[str] | None = None, dtype: str = "float32",
                 timeout: float = 60.0):
        super().__init__("cpu", dtype, name=name)
        self.command = list(command)
        self.timeout = timeout
        self.unsupported_ops = set(registry()) - set(ops) if ops else set()

    def unavailable_reason(self) -> str | None:
        executable = Path(self.command[0])
        if executable.is_absolute() and not executable.exists():
            return f"its command '{self.command[0]}' does not exist."
        return None

    def run(self, case: Case) -> list[np.ndarray]:
        with tempfile.TemporaryDirectory(prefix="fuzz-external-") as folder:
            root = Path(folder)
            case_folder.write_case(case, root, self.dtype)
            try:
                done = subprocess.run([*self.command, str(root)], capture_output=True, text=True, timeout=self.timeout)
            except subprocess.TimeoutExpired:
                raise TimeoutError(f"external backend '{self.name}' ran past {self.timeout:g} s") from None
            if done.returncode != 0:
                tail = " / ".join(done.stderr.strip().splitlines()[-3:])
                raise ExternalProcessError(f"external backend '{self.name}' exited with status {done.returncode}: {tail}")
            return case_folder.read_outputs(root, len(case.graph.outputs), f"external backend '{self.name}'")
