"""Loading user plugins: backends, derived backends (op overrides) and graph transformations.

A plugin is one Python file passed with `--plugin FILE`, the name of a shipped
canary (`--plugin layout-layernorm`, see fuzzer/canaries/), or a package exposing
an entry point in the group `fuzzer.plugins`. It defines

    def register(api):
        api.derive_backend("my-layernorm", base="torch-eager:cpu:float32",
                           overrides={"layer_norm": my_layer_norm})

where `api` is a PluginAPI: `add_backend` (a new Backend class), `derive_backend` (an
existing backend with some ops replaced), `add_transformation` (a model/graph
transformation that must keep agreeing) and `add_external_backend` (a command in any
language; docs/external-backends.md). Errors inside a plugin are reported naming the plugin.

A plugin is code a user gives us, so the command line loads it first in a child process, bounded in
time (`check_plugins_in_child`): one that kills its process (abort, segfault), exits, or does not
return within PLUGIN_LOAD_TIMEOUT_S is refused with one sentence (exit 2) before this process runs
it. Loading prints nothing on stdout (a command's stdout is its result, `--json`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import traceback
from importlib import metadata
from pathlib import Path
from typing import Callable

from fuzzer.backends import Backend, get_backend, register_class, register_derived
from fuzzer.errors import UserError
from fuzzer.ir import Case
from fuzzer.ops import OpDef, get_op, register_op
from fuzzer.running.sessions import end_session

CANARY_DIR = Path(__file__).parent / "canaries"
ENTRY_POINT_GROUP = "fuzzer.plugins"
# How long the child that tries the plugins may take (importing torch and jax on a busy machine: ~10 s).
PLUGIN_LOAD_TIMEOUT_S = float(os.environ.get("FUZZ_PLUGIN_LOAD_TIMEOUT", 120))
LOADED_MARK = "fuzzer: plugins loaded"  # the child's last line on stdout when every plugin loaded
# The child's first line on Linux: it gets SIGKILL when its parent ends (prctl(PR_SET_PDEATHSIG = 1,
# SIGKILL = 9)), since a parent killed with SIGKILL cannot end it; it exits if the parent ended before.
DIE_WITH_PARENT = "import ctypes, os, sys; ctypes.CDLL(None).prctl(1, 9); os.getppid() == {parent} or sys.exit(1); "


class TransformedBackend(Backend):
    """Runs `base` on transform(case): a model transformation whose output must stay equivalent."""

    def __init__(self, name: str, base: Backend, transform: Callable[[Case], Case]):
        super().__init__(base.device, base.dtype, name=name)
        self.base = base
        self.transform = transform
        self.derived_from = base.name
        self.family = base.family
        self.expensive = base.expensive
        self.description = f"{base.description}, after a plugin's graph transformation"
        self.versions_source = base.versions_source

    def unavailable_reason(self) -> str | None:
        return self.base.unavailable_reason()

    def supports(self, op_name: str) -> bool:
        return self.base.supports(op_name)

    def run(self, case: Case) -> list:
        return self.base.run(self.transform(case))

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        """A transformation works on the fuzzer's own graph IR, so its script runs through the fuzzer
        package: the transformation's code (op_source writes it, or brings its plugin file), then
        the base backend on what it returns."""
        from fuzzer.reproducers.op_source import Source
        from fuzzer.reproducers.program_source import argument_names, variable_name, with_notes

        source = Source(imports=["from fuzzer.backends import get_backend", "from fuzzer.ir import Case, Graph"])
        transform = source.add_function(self.transform)
        arrays = ", ".join(f"{name!r}: np.asarray({variable_name(name)}, np.float64)" for name in argument_names(case))
        code = [f"# {self.name} transforms the fuzzer's own graph IR: this part needs the fuzzer package "
                "(pip install opdiff-fuzz).", with_notes(source, source.text()), "", "", f"case = Case(Graph.from_json({case.graph.to_json()!r}), {{{arrays}}}, {case.seed})",
                f"outputs = get_backend({self.base.name!r}).run({transform}(case))"]
        return source.imports, "\n".join(code)

    def has_precision_policy(self) -> bool:
        return self.base.has_precision_policy()

    def precision_policy_limit(self, graph) -> float:
        return self.base.precision_policy_limit(graph)

    def strict_variant(self) -> "TransformedBackend":
        return TransformedBackend(f"{self.name}+strict", self.base.strict_variant(), self.transform)

    def derive(self, name, overrides):
        return TransformedBackend(name, self.base.derive(name, overrides), self.transform)


class PluginAPI:
    """What a plugin's `register(api)` may call."""

    def __init__(self, source: str):
        self.source = source
        self.backends: list[str] = []

    def add_backend(self, cls: type[Backend]) -> None:
        """A new execution strategy (another framework): a Backend subclass with `kind` and `family`."""
        if not (isinstance(cls, type) and issubclass(cls, Backend) and cls.kind):
            raise UserError(f"Plugin {self.source}: add_backend needs a Backend subclass with a `kind`.")
        register_class(cls)
        self.backends.append(cls.kind)

    def derive_backend(self, name: str, base: str, overrides: dict[str, Callable], unsupported: tuple[str, ...] = ()) -> Backend:
        """An existing backend with some ops' implementations replaced (your kernel, or a canary's bug)."""
        backend = get_backend(base).derive(name, overrides)
        backend.unsupported_ops |= set(unsupported)
        register_derived(backend)
        self.backends.append(name)
        return backend

    def add_op(self, op: OpDef) -> None:
        """A new op (an OpDef: shape rule, float64 reference, torch and jax implementations), drawn
        like the shipped ones; a jax implementation may raise OpUnsupported where jax lacks it."""
        if not isinstance(op, OpDef):
            raise UserError(f"Plugin {self.source}: add_op needs an OpDef (fuzzer.ops.OpDef).")
        register_op(op)

    def add_external_backend(self, name: str, command: list[str], ops: list[str] | None = None,
                             dtype: str = "float32", timeout: float = 60.0) -> Backend:
        """A command in any language that reads a case folder and writes .npy outputs
        (protocol: docs/external-backends.md). `ops`: what it can run (default: all)."""
        from fuzzer.backends.external import ExternalBackend

        if isinstance(command, str) or not command:
            raise UserError(f"Plugin {self.source}: add_external_backend needs the command as a non-empty list of strings.")
        for op_name in ops or []:
            get_op(op_name)
        backend = ExternalBackend(name, command, ops, dtype, timeout)
        register_derived(backend)
        self.backends.append(name)
        return backend

    def add_transformation(self, name: str, base: str, transform: Callable[[Case], Case]) -> Backend:
        """A graph/model transformation (BN folding, fusion, ...): `base` run on transform(case)
        must agree with the reference like any backend."""
        backend = TransformedBackend(name, get_backend(base), transform)
        register_derived(backend)
        self.backends.append(name)
        return backend


def canary_names() -> list[str]:
    return sorted(p.stem.replace("_", "-") for p in CANARY_DIR.glob("*.py") if not p.stem.startswith("_"))


def _resolve(spec: str) -> Path:
    path = Path(spec)
    if path.suffix == ".py" or path.exists():
        if not path.is_file():
            raise UserError(f"Plugin file '{spec}' does not exist.")
        return path
    canary = CANARY_DIR / f"{spec.replace('-', '_')}.py"
    if canary.is_file():
        return canary
    raise UserError(f"Plugin '{spec}' is neither a .py file nor a shipped canary ({', '.join(canary_names())}).")


@contextlib.contextmanager
def _plugin_code(source: str):
    """Around a plugin's own code: its prints go to stderr, and its sys.exit() is a refusal, never our exit."""
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    except SystemExit as exc:
        raise UserError(f"Plugin {source} called sys.exit({exc.code!r}) while loading; a plugin must return from "
                        "register(api), not exit.") from None


def _register(register: Callable, source: str) -> list[str]:
    api = PluginAPI(source)
    with _plugin_code(source):
        try:
            register(api)
        except UserError as exc:
            raise UserError(f"Plugin {source}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - a plugin's bug is reported, never our crash
            where = traceback.extract_tb(exc.__traceback__)[-1]
            raise UserError(f"Plugin {source} raised {type(exc).__name__}: {exc} (at {Path(where.filename).name}:"
                            f"{where.lineno}); fix the plugin.") from None
    return api.backends


# Plugins already registered in this process, so that the CLI's early check and the
# campaign's own loading do not run a user's plugin code (and its set-up) twice.
_LOADED: dict[Path, list[str]] = {}
_ENTRY_POINT_BACKENDS: list[str] | None = None


def load_plugin(spec: str) -> list[str]:
    """Import a plugin file (or shipped canary) and call its register(api); returns its backend names.

    Once per process: loading the same file again returns the names it registered."""
    path = _resolve(spec).resolve()
    if path in _LOADED:
        return list(_LOADED[path])
    module_name = f"fuzzer_plugin_{path.stem}"
    try:
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        with _plugin_code(f"'{spec}'"):
            module_spec.loader.exec_module(module)
    except UserError:
        sys.modules.pop(module_name, None)
        raise
    except Exception as exc:  # noqa: BLE001
        sys.modules.pop(module_name, None)
        raise UserError(f"Plugin '{spec}' failed to import: {type(exc).__name__}: {exc}.") from None
    register = getattr(module, "register", None)
    if not callable(register):
        raise UserError(f"Plugin '{spec}' defines no register(api) function; see README 'Plugins'.")
    _LOADED[path] = _register(register, f"'{spec}'")
    return list(_LOADED[path])


def load_entry_point_plugins() -> list[str]:
    """Plugins installed as packages (entry point group `fuzzer.plugins`), once per process."""
    global _ENTRY_POINT_BACKENDS
    if _ENTRY_POINT_BACKENDS is None:
        names = []
        for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                with _plugin_code(f"entry point '{entry.name}'"):
                    register = entry.load()
            except UserError:
                raise
            except Exception as exc:  # noqa: BLE001
                raise UserError(f"Plugin entry point '{entry.name}' failed to import: {type(exc).__name__}: {exc}.") from None
            names += _register(register, f"entry point '{entry.name}'")
        _ENTRY_POINT_BACKENDS = names
    return list(_ENTRY_POINT_BACKENDS)


def load_plugins(specs: list[str] | tuple[str, ...]) -> list[str]:
    names = load_entry_point_plugins()
    for spec in specs:
        names += load_plugin(spec)
    return names


def check_plugins_in_child(specs: list[str] | tuple[str, ...]) -> None:
    """Load the plugin files `specs` (and the installed entry points) in a child process first, so that
    one that aborts, segfaults, exits or hangs while loading is refused with one sentence (UserError)
    instead of ending or freezing this process. Shipped canaries are our code and are not tried."""
    files = [spec for spec in specs if _resolve(spec).parent != CANARY_DIR]
    if not files:
        return
    program = f"import sys; from fuzzer.plugins import load_plugins; load_plugins(sys.argv[1:]); print({LOADED_MARK!r})"
    if sys.platform.startswith("linux"):
        program = DIE_WITH_PARENT.format(parent=os.getpid()) + program
    named = ", ".join(f"'{spec}'" for spec in files)
    # Its own session, its output in files: a helper the plugin starts (a server) would hold pipes open
    # after the child ended, and the wait for their end was taken for a plugin that hangs.
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        child = subprocess.Popen([sys.executable, "-c", program, *files], stdin=subprocess.DEVNULL, stdout=stdout,
                                 stderr=stderr, start_new_session=True)
        try:
            returncode = child.wait(timeout=PLUGIN_LOAD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise UserError(f"Plugin {named} did not finish loading within {PLUGIN_LOAD_TIMEOUT_S:g} s (its import or "
                            "register(api) hangs); fix the plugin, or raise $FUZZ_PLUGIN_LOAD_TIMEOUT.") from None
        finally:
            end_session(child.pid)
            child.wait()
        output, errors = (_read_text(file) for file in (stdout, stderr))
    if returncode == 0 and output.rstrip().endswith(LOADED_MARK):
        return
    last = errors.strip().splitlines()[-1:] or [""]
    if last[0].startswith("fuzzer.errors.UserError: "):  # a refusal of ours, said in the child
        raise UserError(last[0].removeprefix("fuzzer.errors.UserError: "))
    how = f"was killed by {_signal_name(-returncode)}" if returncode < 0 else f"exited with code {returncode}"
    raise UserError(f"Loading plugin {named} {how} before register(api) returned ({last[0][:200] or 'no message'}); "
                    f"fix the plugin (run `python {files[0]}` to see its own messages).")


def _read_text(file) -> str:
    file.seek(0)
    return file.read().decode(errors="replace")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def canaries_for(backend_names: list[str]) -> list[str]:
    """Shipped canaries that define these backend names ("canary-gru-stale-hidden[-cuda]" -> "gru-stale-hidden").

    Only our own shipped canaries are loaded this way: a corpus file can name a
    backend, but never make us import a file it points to.
    """
    shipped = set(canary_names())
    wanted = {name.removeprefix("canary-").removesuffix("-cuda") for name in backend_names if name.startswith("canary-")}
    return sorted(wanted & shipped)
