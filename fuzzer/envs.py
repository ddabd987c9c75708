"""Python environments that backends can run in: another torch or jax release than the fuzzer's.

An environment is a Python interpreter with numpy and a framework. `fuzz env create`
makes a venv under the environment home and installs requirements with pip; `fuzz env
add` registers an interpreter that exists already. Either way the versions it has are
probed and recorded. A backend runs there as `KIND[:DEVICE[:DTYPE]]@ENV`
(fuzzer/backends/env_backend.py), where ENV is a registered name or the path of a venv
or an interpreter. A path is accepted only when it was given on the command line
(`trust_command_line`): a backend name read from a case, a corpus or a regression file
names a registered environment or nothing, so stored data can never start a program.

The worker side (fuzzer/running/env_worker.py) needs only numpy and the framework: the pure-numpy
core of this package (IR, ops, backends) is copied to a folder named by its content hash
and put on the interpreter's path, so the op declarations are shared, never duplicated,
and the fuzzer's own site-packages never shadow the environment's.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from fuzzer.backend_names import BackendName
from fuzzer.errors import UserError

REGISTRY_FILE = "envs.json"
# Environment paths named on this command line; spawned workers inherit them with the environment.
TRUSTED_PATHS_VARIABLE = "FUZZ_COMMAND_LINE_ENV_PATHS"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
PROBE_TIMEOUT = 300.0  # seconds: importing an old framework from a cold disk is slow

Progress = Callable[[str], None]


@dataclass
class Environment:
    name: str
    python: str  # never resolved: a venv's python is a symlink, and resolving it leaves the venv
    versions: dict = field(default_factory=dict)
    requirements: list[str] = field(default_factory=list)
    created: bool = False  # made by `fuzz env create`: `fuzz env remove` deletes its folder
    registered_at: str = ""

    def versions_text(self) -> str:
        """'Python 3.11.7, numpy 2.4.6, jax 0.4.28, jaxlib 0.4.28': what it has, not where it is (text
        that may reach a bug report)."""
        v = self.versions
        frameworks = ", ".join(f"{pkg} {v[pkg]}" for pkg in ("torch", "jax", "jaxlib") if v.get(pkg)) or "no framework"
        return f"Python {v.get('python', '?')}, numpy {v.get('numpy', '?')}, {frameworks}"

    def describe(self) -> str:
        return f"{self.name}: {self.versions_text()} ({self.python})"


def home() -> Path:
    """Where environments and the shipped worker live: $FUZZ_ENV_HOME or ~/.cache/fuzzer/envs."""
    return Path(os.environ.get("FUZZ_ENV_HOME") or Path.home() / ".cache" / "fuzzer" / "envs")


# -- the registry ------------------------------------------------------------------------

def _registry_path() -> Path:
    return home() / REGISTRY_FILE


def load_all() -> dict[str, Environment]:
    path = _registry_path()
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
        return {name: Environment(**fields) for name, fields in data["envs"].items()}
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"The environment registry {path} is unreadable ({exc}); fix or delete it.") from None


def _save_all(envs: dict[str, Environment]) -> None:
    path = _registry_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"version": 1, "envs": {name: asdict(env) for name, env in sorted(envs.items())}}
    temporary = path.with_suffix(f".tmp{os.getpid()}")
    temporary.write_text(json.dumps(data, indent=2, sort_keys=True))
    os.replace(temporary, path)  # readers never see half a file


def get(name: str) -> Environment:
    envs = load_all()
    if name not in envs:
        known = ", ".join(sorted(envs)) or "none yet"
        raise UserError(f"No environment named '{name}' (registered: {known}); create one with `fuzz env create {name} 'jax==0.4.30'`.")
    return envs[name]


def resolve(spec: str) -> Environment:
    """A registered name, or the path of a venv folder or a Python interpreter given on the command
    line (not registered: its versions are learnt when a worker starts there)."""
    if "/" not in spec and NAME_PATTERN.fullmatch(spec) and (spec in load_all() or not Path(spec).exists()):
        return get(spec)
    path = Path(spec).expanduser().absolute()
    python = path / "bin" / "python" if path.is_dir() else path
    if not python.exists():
        raise UserError(f"Environment '{spec}' is neither a registered name nor a venv folder or Python interpreter that exists.")
    if str(path) not in os.environ.get(TRUSTED_PATHS_VARIABLE, "").split(os.pathsep):
        raise UserError(f"Environment '{spec}' is a path that did not come from the command line (paths in stored cases "
                        f"are never run); register it with `fuzz env add NAME {spec}` or pass it with --backends.")
    return Environment(name=spec, python=str(python))


def trust_command_line(backend_names: list[str]) -> None:
    """Accept the environment paths in these backend names (KIND@PATH), which the user typed, in this
    process and the workers it starts."""
    paths = os.environ.get(TRUSTED_PATHS_VARIABLE, "").split(os.pathsep)
    for name in backend_names:
        env_spec = BackendName.parse(name).env or ""
        if env_spec and not (NAME_PATTERN.fullmatch(env_spec) and "/" not in env_spec):
            paths.append(str(Path(env_spec).expanduser().absolute()))
    os.environ[TRUSTED_PATHS_VARIABLE] = os.pathsep.join(p for p in dict.fromkeys(paths) if p)


def trusted_paths() -> str:
    """The environment paths this process accepts, for a worker it starts to take on (`adopt_trusted_paths`):
    a worker forked from the fork server, or a Ray actor, has that process's variables, which predate the
    command line's."""
    return os.environ.get(TRUSTED_PATHS_VARIABLE, "")


def adopt_trusted_paths(paths: str) -> None:
    """In a worker: accept exactly the paths its parent accepts (`trusted_paths`), no stale ones."""
    os.environ[TRUSTED_PATHS_VARIABLE] = paths


def _check_name(name: str) -> None:
    if not NAME_PATTERN.fullmatch(name):
        raise UserError(f"Environment name '{name}' must be letters, digits and . _ + - (it becomes part of backend names).")


def add(name: str, python: str) -> Environment:
    """Register an existing interpreter after checking that it runs the worker."""
    _check_name(name)
    envs = load_all()
    if name in envs:
        raise UserError(f"Environment '{name}' exists already ({envs[name].python}); remove it first or pick another name.")
    if "/" in python:  # the caller's folder, before anything else: the probe starts it from the shipped copy's
        python = str(Path(python).expanduser().absolute())
    interpreter = shutil.which(python) if "/" not in python else python
    if not interpreter or not Path(interpreter).exists():
        raise UserError(f"Python interpreter '{python}' does not exist.")
    env = Environment(name=name, python=str(Path(interpreter).absolute()), versions=probe(interpreter),
                      registered_at=time.strftime("%Y-%m-%dT%H:%M:%S"))
    envs[name] = env
    _save_all(envs)
    return env


def create(name: str, requirements: list[str], python: str = sys.executable, pip_args: list[str] | None = None,
           progress: Progress = lambda line: None) -> Environment:
    """A new venv under home()/venvs/NAME with numpy and `requirements` installed by pip, registered as NAME."""
    _check_name(name)
    if name in load_all():
        raise UserError(f"Environment '{name}' exists already; `fuzz env remove {name}` first, or pick another name.")
    if not requirements:
        raise UserError("Say what to install, e.g. `fuzz env create jax-0.4.30 'jax==0.4.30' 'jaxlib==0.4.30'`.")
    folder = home() / "venvs" / name
    if folder.exists():
        shutil.rmtree(folder)  # the remains of an interrupted create: nothing registered points at it
    folder.parent.mkdir(parents=True, exist_ok=True)
    progress(f"creating a venv in {folder} with {python}")
    _run_logged([python, "-m", "venv", str(folder)], progress, f"could not create a venv with '{python}'")
    venv_python = str(folder / "bin" / "python")
    # The worker needs numpy; the frameworks do not all require it (torch does not).
    wanted = requirements if any(re.match(r"numpy\b", r) for r in requirements) else [*requirements, "numpy"]
    progress(f"pip install {' '.join(wanted)}")
    try:
        _run_logged([venv_python, "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off",
                     *(pip_args or []), *wanted], progress, f"pip could not install {' '.join(wanted)}")
        versions = probe(venv_python)
    except UserError:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    env = Environment(name=name, python=venv_python, versions=versions, requirements=list(requirements), created=True,
                      registered_at=time.strftime("%Y-%m-%dT%H:%M:%S"))
    envs = load_all()
    envs[name] = env
    _save_all(envs)
    return env


def remove(name: str) -> Environment:
    envs = load_all()
    env = get(name)
    if env.created:
        shutil.rmtree(home() / "venvs" / name, ignore_errors=True)
    del envs[name]
    _save_all(envs)
    return env


def _run_logged(command: list[str], progress: Progress, failure: str) -> None:
    """Run a command, passing the lines that show progress (pip's Collecting/Downloading/...) on."""
    shown = ("Collecting", "Downloading", "Installing", "Successfully", "ERROR")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail: list[str] = []
    for line in process.stdout:
        line = line.rstrip()
        tail = (tail + [line])[-5:]
        if line.lstrip().startswith(shown):
            progress(line.strip())
    if process.wait() != 0:
        raise UserError(f"{failure} (exit status {process.returncode}): {' / '.join(tail)}")


# -- the worker side: shipping it and probing an interpreter -----------------------------

def runner_root() -> Path:
    """A folder holding a copy of this package for other interpreters' sys.path, named by its content."""
    source = Path(__file__).parent
    files = sorted(p for p in source.rglob("*.py") if "__pycache__" not in p.parts)
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(source)).encode())
        digest.update(path.read_bytes())
    root = home() / "runner" / digest.hexdigest()[:16]
    if not (root / "fuzzer").exists():
        root.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=root.parent))
        for path in files:
            target = staging / "fuzzer" / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        try:
            staging.rename(root)  # atomic: concurrent workers race here and one copy wins
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
    return root


@dataclass
class WorkerCommand:
    """How to start fuzzer/running/env_worker.py under an interpreter: the command, its variables and
    its folder, which must be the shipped copy's (`python -m` puts the current folder first on
    sys.path, and a checkout of the fuzzer there would shadow the copy)."""

    args: list[str]
    variables: dict
    cwd: str


def worker_command(python: str) -> WorkerCommand:
    root = runner_root()
    variables = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    variables.update(PYTHONPATH=str(root), PYTHONNOUSERSITE="1")
    return WorkerCommand([python, "-s", "-m", "fuzzer.running.env_worker"], variables, str(root))


def probe(python: str) -> dict:
    """The versions an interpreter has (python, numpy, torch, jax, ...), or one clear error."""
    command = worker_command(python)
    try:
        done = subprocess.run([*command.args, "--probe"], capture_output=True, text=True, timeout=PROBE_TIMEOUT,
                              env=command.variables, cwd=command.cwd)
    except FileNotFoundError:
        raise UserError(f"Python interpreter '{python}' does not exist.") from None
    except subprocess.TimeoutExpired:
        raise UserError(f"Python interpreter '{python}' did not answer within {PROBE_TIMEOUT:g} s.") from None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        reason = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise UserError(f"The fuzzer's worker cannot start under '{python}': {reason}")
    return json.loads(lines[-1])["versions"]
