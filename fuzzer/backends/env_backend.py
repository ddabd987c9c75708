"""Backends that run in another Python environment: `KIND[:DEVICE[:DTYPE]]@ENV`.

`jax-jit@jax-0.4.30` is the jax-jit backend, unchanged, running under the interpreter
of environment `jax-0.4.30` (fuzzer/running/envs.py) through a long-lived worker process
(fuzzer/running/env_worker.py), one per environment per fuzzer process. Cases cross over as
case folders (fuzzer/running/case_folder.py). The float64 reference and the oracle stay in the
fuzzer's own process, so both sides of a cross-version comparison are judged alike.

An op whose implementation calls an API the environment's release lacks, or raises
OpUnsupported there (an argument form the release rejects, a graph break), is reported
unsupported (an `unsupported` outcome, not a finding), as in-process; a worker that dies is
a crash finding, and the next case starts a fresh one.
"""

from __future__ import annotations

import copy
import json
import select
import signal
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from fuzzer.backend_names import BackendName
from fuzzer.backends import Backend, get_backend, table
from fuzzer.errors import ForeignError, OpUnsupported, UserError
from fuzzer.ir import Case
from fuzzer.running import case_folder, envs

REQUEST_TIMEOUT = 600.0  # seconds; campaigns detect hangs sooner through their worker heartbeat


class EnvWorkerError(ForeignError):
    """The backend raised in the other environment (its text as it was), or the worker died: a crash finding."""


class EnvWorker:
    """One worker process under an environment's interpreter, started on first use."""

    def __init__(self, env: envs.Environment):
        self.env = env
        self.process: subprocess.Popen | None = None
        self.log = None

    def start(self) -> None:
        command = envs.worker_command(self.env.python)
        if self.log is not None:
            self.log.close()
        self.log = tempfile.TemporaryFile(mode="w+", prefix="fuzz-env-worker-")
        try:
            self.process = subprocess.Popen(command.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                            text=True, env=command.variables, cwd=command.cwd)
        except OSError as exc:
            raise EnvWorkerError(f"cannot start Python '{self.env.python}' of environment '{self.env.name}' ({exc})") from None
        # What the interpreter has now, which findings record (it may have changed since registration).
        self.env.versions = self._read_answer("starting", envs.PROBE_TIMEOUT)["versions"]

    def ask(self, request: dict, timeout: float = REQUEST_TIMEOUT) -> dict:
        if self.process is None or self.process.poll() is not None:
            self.start()
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # it died since the last answer: reading says how
        return self._read_answer(request.get("backend") or request.get("check"), timeout)

    def _read_answer(self, doing: str, timeout: float) -> dict:
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else None
        if line:
            return json.loads(line)
        if line is None:
            self.close()
            raise TimeoutError(f"the worker of environment '{self.env.name}' ran past {timeout:g} s ({doing})")
        status = self.process.wait()
        self.process = None
        raise EnvWorkerError(f"the worker of environment '{self.env.name}' {_exit_text(status)} ({doing}); "
                             f"its stderr ends: {self._log_tail()}")

    def _log_tail(self) -> str:
        self.log.seek(0)
        lines = [line.strip() for line in self.log.read().splitlines() if line.strip()]
        self.log.seek(0, 2)
        return " / ".join(lines[-3:]) or "(nothing)"

    def versions_now(self) -> dict:
        """The versions the interpreter has now, as its worker reported them on starting (started here if need be)."""
        if self.process is None or self.process.poll() is not None:
            self.start()
        return dict(self.env.versions)

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


def _exit_text(status: int) -> str:
    if status < 0:
        return f"died of signal {signal.Signals(-status).name}"
    return f"exited with status {status}"


# One worker per environment per process: a campaign's shrinker and checker share it.
_WORKERS: dict[tuple[str, str], EnvWorker] = {}


def worker_for(env: envs.Environment) -> EnvWorker:
    key = (env.name, env.python)
    if key not in _WORKERS:
        _WORKERS[key] = EnvWorker(env)
    return _WORKERS[key]


class EnvBackend(Backend):
    """A backend of the table (`base`) running under another environment's interpreter."""

    def __init__(self, base: Backend, env: envs.Environment):
        super().__init__(base.device, base.dtype, name=f"{base.name}@{env.name}")
        self.base = base
        self.worker = worker_for(env)
        self.env = self.worker.env  # shared, so versions learnt when the worker starts reach every backend
        self.kind, self.family, self.expensive = f"{base.kind}@{env.name}", base.family, base.expensive
        # Its compiles cost there what they cost here: the same slice of the compile share, the same input sets.
        self.compile_weight, self.compiled_sets = base.compile_weight, base.compiled_sets
        self.description = f"{base.description}, in environment {env.name}"

    @classmethod
    def from_spec(cls, spec: str) -> "EnvBackend":
        """'jax-jit@old', 'torch-eager:cpu:float64@envs/torch-2.4' (a venv folder or interpreter path)."""
        name = BackendName.parse(spec)
        base_spec, env_spec = str(name.here), name.env
        if not base_spec or not env_spec:
            raise UserError(f"Backend '{spec}' should look like KIND[:DEVICE[:DTYPE]]@ENVIRONMENT, e.g. 'jax-jit@jax-0.4.30'.")
        base = get_backend(base_spec)
        # The other interpreter imports fuzzer and builds the backend by its name: any kind shipped
        # in fuzzer/backends can, a plugin's backend or a derived one (its ops live here) cannot.
        built_in = type(base).__module__.startswith("fuzzer.backends.") and base.name not in table().derived
        if base.overrides or isinstance(base, EnvBackend) or not built_in:
            raise UserError(f"Backend '{base_spec}' cannot run in another environment: only the backends shipped with "
                            f"fuzzer can (plugins and their derived backends live in this process).")
        return cls(base, envs.resolve(env_spec))

    def other_environment(self) -> tuple[str, dict]:
        return self.env.name, dict(self.env.versions)

    def runs_program_steps(self) -> bool:
        """Whether its base kind runs programs: a program then runs in the environment as it does here."""
        return self.base.runs_program_steps()

    def unavailable_reason(self) -> str | None:
        try:
            reason = self.worker.ask({"check": self.base.name}, envs.PROBE_TIMEOUT)["reason"]
        except (EnvWorkerError, TimeoutError) as exc:
            return str(exc)
        return f"in environment '{self.env.name}' ({self.env.python}): {reason}" if reason else None

    def has_precision_policy(self) -> bool:
        return self.base.has_precision_policy()

    def precision_policy_limit(self, graph) -> float:
        return self.base.precision_policy_limit(graph)

    def derive(self, name: str, overrides: dict) -> Backend:
        raise UserError(f"Backend '{self.name}' cannot be derived: its ops run in another interpreter.")

    def strict_variant(self) -> Backend:
        strict = copy.copy(self)
        strict.strict, strict.name = True, f"{self.name}+strict"
        return strict

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        """The base backend's program: written from the op declarations, it needs no tracing in the
        environment; the reproducer's header says which environment to run it in."""
        return self.base.reproducer_program(case)

    @property
    def versions_source(self) -> str:
        return self.base.versions_source

    def run(self, case: Case) -> list[np.ndarray]:
        with tempfile.TemporaryDirectory(prefix="fuzz-env-case-") as folder:
            root = Path(folder)
            case_folder.write_case(case, root)
            answer = self.worker.ask({"backend": self.base.name, "case": folder, "strict": self.strict})
            if "unsupported" in answer:
                op = answer["unsupported"]
                # The environment's versions, not its path: the text is stored and reaches bug reports.
                where = f"environment '{self.env.name}' ({self.env.versions_text()})"
                if op is None:  # this case, not the op everywhere (an argument form, a graph break)
                    raise OpUnsupported(f"this case is unsupported by {where}: {answer['reason']}")
                self.unsupported_ops.add(op)
                raise OpUnsupported(f"op '{op}' is unsupported by {where}: {answer['reason']}")
            if "error" in answer:
                raise EnvWorkerError(answer["error"])
            return case_folder.read_outputs(root, answer["outputs"], f"backend '{self.name}'")


# Names KIND[:DEVICE[:DTYPE]]@ENV resolve here (fuzzer.backends.get_backend).
SPEC_RESOLVERS = {"@": EnvBackend.from_spec}
