"""The derived-op table as data: where it is cached, how it is written (atomically) and read back.

Reading validates every field, since a table names functions that will be called: a name must be
a public function of an allow-listed torch namespace (and none of those that touch files or global
state), a numpy reference a public name of numpy or scipy.special, a jax twin one of the allow-listed
jax namespaces, and every argument JSON data. A table that fails is refused in one sentence
(`TableError`), and the registry then has no derived ops.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from importlib import metadata
from pathlib import Path

from fuzzer.errors import UserError

SCHEMA = 1
TEMPLATES_PER_OP = 8
SHIPPED_DIR = Path(__file__).parent
CALL_NAMESPACES = ("torch.nn.functional.", "torch.special.", "torch.linalg.", "torch.fft.", "torch.Tensor.", "torch.")
JAX_NAMESPACES = ("jax.numpy.", "jax.lax.", "jax.nn.", "jax.scipy.special.")
NUMPY_MODULES = ("numpy", "scipy.special")
# torch functions that read or write files, or change the process's state: never callable from a table.
FORBIDDEN_CALLS = {"load", "save", "from_file", "compile", "export", "manual_seed", "seed", "initial_seed",
                   "use_deterministic_algorithms", "set_printoptions", "set_num_threads", "set_num_interop_threads",
                   "set_default_dtype", "set_default_device", "set_default_tensor_type", "set_grad_enabled",
                   "set_rng_state", "set_anomaly_enabled", "set_warn_always", "set_flush_denormal", "storage",
                   "tolist", "numpy", "share_memory_", "pin_memory", "register_hook", "backward", "data_ptr"}
# In-place methods (a trailing _) change a value other nodes read; these give uninitialized memory.
UNINITIALIZED = ("new_", "empty")
DTYPES = {"float16", "bfloat16", "float32", "float64", "complex32", "complex64", "complex128", "bool", "int8",
          "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2",
          "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2"}
IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
MAX_RANK = 5


class TableError(UserError):
    """A derived-op table that is not what `fuzz ops --rebuild-derived` writes."""


def torch_release() -> str | None:
    """The installed torch's release ("2.13.0"), read without importing torch; None without torch."""
    try:
        return metadata.version("torch").split("+")[0]
    except metadata.PackageNotFoundError:
        return None


def cache_dir() -> Path:
    return Path(os.environ.get("FUZZ_DERIVED_CACHE") or Path.home() / ".cache" / "fuzzer" / "derived")


def table_name(release: str) -> str:
    return f"torch-{release}.json"


def table_path(release: str) -> Path | None:
    """The table for `release`: the user's cache, else the one shipped in the package; None if neither has one."""
    for folder in (cache_dir(), SHIPPED_DIR):
        path = folder / table_name(release)
        if path.is_file():
            return path
    return None


def save(table: dict, path: Path) -> None:
    """Writes `table` atomically (a reader sees the old file or the new one, never half of one)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as handle:
        json.dump(table, handle, indent=1, sort_keys=True, allow_nan=False)
    os.replace(handle.name, path)


def load(path: Path) -> dict:
    """The table at `path`, validated field by field; TableError (one sentence) otherwise."""
    try:
        table = json.loads(Path(path).read_text(), parse_constant=_refuse_constant)
        _check_table(table)
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise TableError(f"The derived-op table {path} is invalid ({exc}); delete it and run "
                         "`fuzz ops --rebuild-derived` to build it again.") from None
    return table


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON data")


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise ValueError(what)


def _check_table(table) -> None:
    _require(isinstance(table, dict) and table.get("schema") == SCHEMA, f"not a schema-{SCHEMA} table")
    _require(isinstance(table.get("torch"), str) and isinstance(table.get("counts"), dict), "no torch release or counts")
    _require(isinstance(table.get("ops"), list), "no list of ops")
    names = set()
    for op in table["ops"]:
        _require(isinstance(op, dict), "an op that is not an object")
        _check_op(op)
        _require(op["name"] not in names, f"op {op['name']!r} twice")
        names.add(op["name"])


def check_call(path) -> None:
    _require(isinstance(path, str), "a call that is not a name")
    namespace = next((n for n in CALL_NAMESPACES if path.startswith(n)), None)
    last = path[len(namespace):] if namespace else ""
    _require(bool(IDENTIFIER.fullmatch(last)) and last not in FORBIDDEN_CALLS and not last.endswith("_")
             and not last.startswith(UNINITIALIZED),
             f"call {path!r} is not a public function of {', '.join(n.rstrip('.') for n in CALL_NAMESPACES)}")


def _check_op(op: dict) -> None:
    _require(set(op) == {"name", "call", "entries", "dtypes", "templates", "reference", "jax"}, "an op with other fields")
    check_call(op["call"])
    _require(op["name"] == op["call"], f"op {op['name']!r} named other than its call")
    _require(isinstance(op["entries"], list) and all(isinstance(e, str) for e in op["entries"]), "entries not names")
    _require(isinstance(op["dtypes"], list) and set(op["dtypes"]) <= DTYPES and "float32" in op["dtypes"],
             f"op {op['name']!r} has unknown dtypes or no float32")
    templates = op["templates"]
    _require(isinstance(templates, list) and 1 <= len(templates) <= TEMPLATES_PER_OP, f"op {op['name']!r} templates")
    for template in templates:
        _check_template(template, op["name"])
    reference = op["reference"]
    _require(reference in ({"kind": "torch-float64"},) or (
        isinstance(reference, dict) and set(reference) == {"kind", "module", "name"} and reference["kind"] == "numpy"
        and reference["module"] in NUMPY_MODULES and isinstance(reference["name"], str)
        and bool(IDENTIFIER.fullmatch(reference["name"]))), f"op {op['name']!r} reference")
    twin = op["jax"]
    _require(twin is None or (
        isinstance(twin, dict) and set(twin) == {"path", "keywords"} and isinstance(twin["path"], str)
        and any(twin["path"].startswith(n) and IDENTIFIER.fullmatch(twin["path"][len(n):]) for n in JAX_NAMESPACES)
        and isinstance(twin["keywords"], dict)
        and all(isinstance(k, str) and isinstance(v, str) and IDENTIFIER.fullmatch(v) for k, v in twin["keywords"].items())),
        f"op {op['name']!r} jax twin")


def _check_template(template, name: str) -> None:
    _require(isinstance(template, dict) and set(template) == {"shapes", "kwargs", "sizes"}, f"op {name!r} template fields")
    shapes, kwargs, sizes = template["shapes"], template["kwargs"], template["sizes"]
    _require(isinstance(shapes, list) and len(shapes) >= 1 and all(
        isinstance(s, list) and 1 <= len(s) <= MAX_RANK and all(_positive(d) for d in s) for s in shapes),
        f"op {name!r} operand shapes")
    _require(isinstance(kwargs, dict) and all(isinstance(k, str) and IDENTIFIER.fullmatch(k) and _is_data(v)
                                              for k, v in kwargs.items()), f"op {name!r} arguments")
    _require(isinstance(sizes, list) and len(sizes) == len(shapes[0]) and all(
        isinstance(s, list) and s and all(_positive(d) for d in s) for s in sizes), f"op {name!r} dim sizes")


def _positive(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 2**20


def _is_data(value) -> bool:
    """An argument value: a number, bool, string, None, or a flat list of them."""
    if value is None or isinstance(value, (bool, int, float)):
        return True
    if isinstance(value, str):
        return len(value) <= 64
    return isinstance(value, list) and len(value) <= 16 and all(
        v is None or isinstance(v, (bool, int, float)) or (isinstance(v, str) and len(v) <= 64) for v in value)
