"""Backends: how a graph is executed. One module per execution strategy, found by convention.

A backend is named "kind:device:dtype", e.g. "torch-eager:cpu:float32"; device
and dtype are parameters, not new classes. Each module in this package defines
`BACKENDS = [SomeBackend, ...]` (classes with a `kind`). Plugins add more (see
fuzzer/plugins.py) and may derive a backend from an existing one with some ops
overridden (`Backend.derive`).
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import math
import pkgutil
from dataclasses import dataclass
from typing import Callable, ClassVar

import numpy as np

from fuzzer.backend_names import BackendName
from fuzzer.complex_dtypes import is_complex
from fuzzer.errors import UserError
from fuzzer.exact_dtypes import is_exact
from fuzzer.ir import Case, Graph, split_arrays
from fuzzer.ops import get_op, registry


class CompiledCache:
    """Compiled callables by key, oldest evicted first; counts hits for the campaign's stats."""

    def __init__(self, limit: int):
        self.limit = limit
        self.entries: dict = {}
        self.hits = 0
        self.misses = 0

    def get(self, key, build: Callable):
        found = self.find(key)
        return found if found is not None else self.add(key, build())

    def find(self, key):
        """The entry for `key`, or None (a miss)."""
        found = self.entries.get(key)
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def add(self, key, value):
        if len(self.entries) >= self.limit:
            self.entries.pop(next(iter(self.entries)))
        self.entries[key] = value
        return value


class Backend:
    """Base class. Subclasses set `kind`, `family` ("numpy", "torch" or "jax") and
    implement `_execute(graph, inputs, params)` returning numpy float64 outputs."""

    kind: ClassVar[str] = ""
    family: ClassVar[str] = ""
    devices: ClassVar[tuple[str, ...]] = ("cpu",)
    dtypes: ClassVar[tuple[str, ...]] = ("float32", "float64")
    default_dtype: ClassVar[str] = "float32"
    description: ClassVar[str] = ""
    # Compiling backends cost seconds per new graph: campaigns run them on a compile budget.
    expensive: ClassVar[bool] = False
    # The kind whose kernels this one runs underneath (a compiler or a model transformation over
    # torch eager's ops): where it computes exactly that kind's wrong answer on the same device
    # and dtype, the finding is that kind's (one bug, one bucket; see check._inherited).
    derives_from_kind: ClassVar[str | None] = None
    # The compiler path whose code computes this kind's results ("torch/eager", "torch/inductor",
    # "jax/eager", "jax/xla", "onnx/ort"): a known-bug entry names a path to cover every kind on it,
    # its variants and subclasses included (fuzzer/triaging/known.py). Declared once, inherited.
    path: ClassVar[str | None] = None
    # A compiling backend's weight in the default split of the compile share (fuzzer/running/budget.py):
    # a kind whose structures cost more to compile gets a larger slice, so that it compiles a
    # useful number of them in a short campaign.
    compile_weight: ClassVar[float] = 1.0
    # Compiles with symbolic sizes (torch.compile(dynamic=True)): one compile serves the graph at
    # every size, so campaigns also run it on shape variants of the graphs it compiled.
    dynamic: ClassVar[bool] = False
    # Runs the graph node by node, so every node's value is there to judge (fuzzer/judging/unmasked.py): eager
    # kinds and the plugins derived from them; never a compiler (more outputs change what it fuses).
    computes_every_node: ClassVar[bool] = False
    # The script line that sets VERSIONS, which every reproducer prints first (fuzzer/reproducers/reproducer.py).
    versions_source: ClassVar[str] = "VERSIONS = 'versions not recorded by this backend'"
    # The named sets (`--backends cpu`, `gpu`, `model`) this kind joins, declared by the class
    # itself (not inherited): set name -> {position: "DEVICE:DTYPE"}. A campaign checks a set's
    # backends in the order of their positions, which are unique within a set (backend_sets()).
    in_sets: ClassVar[dict[str, dict[int, str]]] = {}
    # Runs programs (fuzzer/programs/program.py). Declared by the class itself, not inherited: a subclass that
    # transforms the graph (a module tree, a layout, vmap, gradients) has not learned to run one.
    runs_programs: ClassVar[bool] = False

    def __init__(self, device: str = "cpu", dtype: str | None = None, overrides: dict | None = None, name: str | None = None):
        self.device = device
        self.dtype = dtype or self.default_dtype
        self.overrides = dict(overrides or {})
        self.name = name or f"{self.kind}:{self.device}:{self.dtype}"
        self.unsupported_ops: set[str] = set()
        self.strict = False
        # The backend this one was derived from (Backend.derive, a plugin transformation, or
        # `derives_from_kind`): a finding the base shares is the base's (check.py: `inherited`).
        self.derived_from: str | None = f"{self.derives_from_kind}:{device}:{self.dtype}" if self.derives_from_kind else None

    # -- what it can run ---------------------------------------------------
    def unavailable_reason(self) -> str | None:
        """None when this backend can run here; otherwise one sentence why not."""
        return None

    def supports(self, op_name: str) -> bool:
        if self.dtype == "bfloat16" and get_op(op_name).numerics.exact:
            return False  # see Numerics.exact
        op = get_op(op_name)
        if is_complex(self.dtype):
            if not op.complex_dtypes:
                return False  # a complex backend runs the ops that declare complex semantics (complex-only ones too)
        elif (self.dtype not in op.exact_dtypes) if is_exact(self.dtype) else not op.float_dtypes:
            return False  # an integer or bool backend runs the ops that declare its semantics, and only it integer-only ops
        return op_name not in self.unsupported_ops

    @classmethod
    def runs_program_steps(cls) -> bool:
        """Does this kind run programs? Its class's own `runs_programs`, never an inherited one (see above)."""
        return vars(cls).get("runs_programs", False)

    def supports_graph(self, graph: Graph) -> bool:
        if graph.steps and not self.runs_program_steps():
            return False
        return all(self.supports(node.op) for node in graph.nodes)

    def other_environment(self) -> tuple[str, dict] | None:
        """(name, versions) of the Python environment this backend runs in, when it is not ours
        (see env_backend.py)."""
        return None

    # -- running -----------------------------------------------------------
    def impl_for(self, op_name: str) -> Callable:
        if op_name in self.overrides:
            return self.overrides[op_name]
        return get_op(op_name).impl(self.family)

    def run(self, case: Case) -> list[np.ndarray]:
        inputs, params = split_arrays(case)
        return self._execute(case.graph, inputs, params)

    def _execute(self, graph: Graph, inputs: dict, params: dict) -> list[np.ndarray]:
        raise NotImplementedError

    def reproducer_program(self, case: Case) -> tuple[list[str], str]:
        """(import lines, code) that run exactly this backend's computation on `case` in a standalone
        script, after the case's arrays are defined as numpy float32 variables named by
        `fuzzer.reproducers.program_source.variable_name`; the code leaves `outputs`, a list of float64 numpy arrays."""
        raise UserError(f"Backend '{self.name}' has no reproducer writer; `fuzz export --format json` "
                        "gives the case as data, and `fuzz replay` re-runs it.")

    # -- precision policy (TF32 and friends on GPUs) ----------------------------
    def has_precision_policy(self) -> bool:
        """Does this backend run with a reduced-precision default (TF32, fast reductions) it can turn off?"""
        return False

    def precision_context(self, graph: Graph):
        """The context `graph` runs in; strict variants turn reduced-precision defaults off."""
        return contextlib.nullcontext()

    def precision_policy_limit(self, graph: Graph) -> float:
        """How many times its allowance an error that the strict variant removes may be and still be
        the backend's precision policy rather than a bug (check.py)."""
        return math.inf

    def strict_variant(self) -> "Backend":
        """The same backend with every reduced-precision default off, for the oracle's precision re-run."""
        strict = copy.copy(self)
        strict.strict = True
        strict.name = f"{self.name}+strict"
        return strict

    def variant(self, suffix: str) -> "Backend":  # suffix: one of VARIANTS
        """The variant named NAME+SUFFIX ("strict": strict_variant), for a variant's name read back
        (a worker that died in a strict re-run names the variant it was running)."""
        if suffix == "strict":
            return self.strict_variant()
        raise UserError(f"Backend '{self.name}' has no variant '+{suffix}' (it has '+strict').")

    def same_kernels_strict_variant(self, graph: Graph) -> "Backend | None":
        """Where the strict variant runs `graph` on other kernels (torch on CUDA: an RNN off cuDNN),
        the strict variant on the default run's own kernels; None where it runs the same ones. It
        tells how much of an error past `precision_policy_limit` the precision makes (check.py)."""
        return None

    def derive(self, name: str, overrides: dict[str, Callable]) -> "Backend":
        """A backend like this one with some ops replaced (a plugin's kernel, a canary's bug)."""
        for op_name in overrides:
            get_op(op_name)
        derived = type(self)(self.device, self.dtype, {**self.overrides, **overrides}, name)
        derived.unsupported_ops = set(self.unsupported_ops)
        derived.derived_from = self.name
        return derived

    def __repr__(self) -> str:
        return f"<backend {self.name}>"


@dataclass
class BackendTable:
    """Backend classes by kind, named derived instances (from plugins), and resolvers of the names
    that are not KIND[:DEVICE[:DTYPE]] by the character that marks them (a module's `SPEC_RESOLVERS`:
    "@" is another Python environment's backend, env_backend.py)."""

    classes: dict[str, type[Backend]]
    derived: dict[str, Backend]
    resolvers: dict[str, Callable[[str], Backend]]

    def kinds(self) -> list[str]:
        return sorted(self.classes)


_TABLE: BackendTable | None = None


def table() -> BackendTable:
    global _TABLE
    if _TABLE is None:
        classes: dict[str, type[Backend]] = {}
        resolvers: dict[str, Callable[[str], Backend]] = {}
        for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
            if module_info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{__name__}.{module_info.name}")
            for cls in getattr(module, "BACKENDS", []):
                classes[cls.kind] = cls
            resolvers.update(getattr(module, "SPEC_RESOLVERS", {}))
        _TABLE = BackendTable(classes, {}, resolvers)
    return _TABLE


# The suffixes of variants' names (Backend.variant): "NAME+strict", and torch on CUDA's "NAME+strict-cudnn".
VARIANTS = ("strict", "strict-cudnn")


def register_derived(backend: Backend) -> None:
    table().derived[backend.name] = backend


def register_class(cls: type[Backend]) -> None:
    table().classes[cls.kind] = cls


def kind_path(name: BackendName) -> str | None:
    """The compiler path of a built-in kind ("torch/inductor", "jax/xla", `Backend.path`); None for a
    plugin's backend, whose findings differ from its base's, and for a kind nobody registered."""
    cls = table().classes.get(name.kind) if name.full else None
    return cls.path if cls is not None else None


def kind_family(name: BackendName) -> str | None:
    """The framework family of a built-in kind ("torch", "jax", "onnxruntime"); None for a plugin's backend."""
    cls = table().classes.get(name.kind) if name.full else None
    return cls.family if cls is not None else None


def get_backend(spec: str) -> Backend:
    """'torch-eager', 'torch-eager:cpu', 'torch-eager:cpu:float64', a plugin backend's name,
    or any of those in another Python environment: 'jax-jit@jax-0.4.30' (see fuzzer/running/envs.py);
    any of them + a variant's suffix: 'torch-eager:cuda:float32+strict'."""
    base, plus, suffix = spec.rpartition("+")
    if plus and suffix in VARIANTS:  # a variant's name (Backend.variant); an environment's name may hold a '+'
        return get_backend(base).variant(suffix)
    tab = table()
    if spec in tab.derived:
        return tab.derived[spec]
    for marker, resolve in tab.resolvers.items():
        if marker in spec:
            return resolve(spec)
    name = BackendName.parse(spec)
    kind, device, dtype = name.kind, name.device, name.dtype
    if kind not in tab.classes:
        raise UserError(f"Unknown backend '{spec}'; run `fuzz backends` to list them.")
    cls = tab.classes[kind]
    device = device or "cpu"
    if device not in cls.devices:
        raise UserError(f"Backend '{kind}' does not run on device '{device}' (it supports {', '.join(cls.devices)}).")
    dtype = dtype or cls.default_dtype
    if dtype not in cls.dtypes:
        raise UserError(f"Backend '{kind}' does not support dtype '{dtype}' (it supports {', '.join(cls.dtypes)}).")
    return cls(device, dtype)


def parse_backend_list(text: str | None) -> list[Backend]:
    """A comma-separated list of backend specs or set names (cpu, gpu); None -> the cpu set. Each must
    be available here (which imports its framework)."""
    return require_available(name_backend_list(text))


def name_backend_list(text: str | None) -> list[Backend]:
    """parse_backend_list without the availability check, so without importing any framework: a typo
    in a command's options is refused in a second, before torch or jax loads."""
    specs, sets = [], backend_sets()
    for spec in (s.strip() for s in (text or "cpu").split(",")):
        specs += list(sets.get(spec, [spec] if spec else []))
    return [get_backend(spec) for spec in dict.fromkeys(specs)]


def require_available(backends: list[Backend]) -> list[Backend]:
    for backend in backends:
        reason = backend.unavailable_reason()
        if reason:
            raise UserError(f"Backend '{backend.name}' is not available here: {reason}")
    return backends


def backend_sets() -> dict[str, tuple[str, ...]]:
    """The named backend sets, gathered from every registered kind's own `in_sets`: "cpu" (the
    default: every CPU backend the core engine compares), "gpu", "model" (the model-level
    transformations) and "grad" (the gradient backends)."""
    positions: dict[str, dict[int, str]] = {}
    for kind, cls in table().classes.items():
        for set_name, members in vars(cls).get("in_sets", {}).items():
            taken = positions.setdefault(set_name, {})
            for position, device_dtype in members.items():
                if position in taken:
                    raise ValueError(f"backend sets: {kind}:{device_dtype} and {taken[position]} both take "
                                     f"position {position} of set '{set_name}'")
                taken[position] = f"{kind}:{device_dtype}"
    return {name: tuple(members[p] for p in sorted(members)) for name, members in sorted(positions.items())}


def default_backends() -> tuple[str, ...]:
    return backend_sets()["cpu"]


def all_ops_supported_by(backends: list[Backend]) -> list[str]:
    return [name for name, op in sorted(registry().items()) if not op.named_only and all(b.supports(name) for b in backends)]
