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
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from importlib import metadata
from pathlib import Path
from typing import Callable

from fuzzer.backends import Backend, get_backend, register_class, register_derived
from fuzzer.errors import UserError
from fuzzer.ir import Case
from fuzzer.ops import get_op

CANARY_DIR = Path(__file__).parent / "canaries"
ENTRY_POINT_GROUP = "fuzzer.plugins"


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
        from fuzzer.op_source import Source
        from fuzzer.program_source import argument_names, variable_name, with_notes

        source = Source(imports=["from fuzzer.backends import get_backend", "from fuzzer.ir import Case, Graph"])
        transform = source.add_function(self.transform)
        arrays = ", ".join(f"{name!r}: np.asarray({variable_name(name)}, np.float64)" for name in argument_names(case))
        code = [f"# {self.name} transforms the fuzzer's own graph IR: this part needs the fuzzer package "
                "(pip install opdiff-fuzz).", with_notes(source, source.text()), "", "", f"case = Case(Graph.from_json({case.graph.to_json()!r}), {{{arrays}}}, {case.seed})",
                f"outputs = get_backend({self.base.name!r}).run({transform}(case))"]
        return source.imports, "\n".join(code)

    def has_precision_policy(self) -> bool:
        return self.base.has_precision_policy()

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


def _register(register: Callable, source: str) -> list[str]:
    api = PluginAPI(source)
    try:
        register(api)
    except UserError as exc:
        raise UserError(f"Plugin {source}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a plugin's bug is reported, never our crash
        where = traceback.extract_tb(exc.__traceback__)[-1]
        raise UserError(
            f"Plugin {source} raised {type(exc).__name__}: {exc} (at {Path(where.filename).name}:{where.lineno}); fix the plugin."
        ) from None
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
        module_spec.loader.exec_module(module)
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
                register = entry.load()
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



def canaries_for(backend_names: list[str]) -> list[str]:
    """Shipped canaries that define these backend names ("canary-gru-stale-hidden[-cuda]" -> "gru-stale-hidden").

    Only our own shipped canaries are loaded this way: a corpus file can name a
    backend, but never make us import a file it points to.
    """
    shipped = set(canary_names())
    wanted = {name.removeprefix("canary-").removesuffix("-cuda") for name in backend_names if name.startswith("canary-")}
    return sorted(wanted & shipped)
