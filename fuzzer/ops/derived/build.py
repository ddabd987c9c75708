"""Building the derived-op table from torch's own op database (`op_db`), once per torch release.

`op_db` is an internal module (it needs `expecttest`, and takes ~10 s to import): it is imported
here only, guarded, and only by `fuzz ops --rebuild-derived` or when no table exists for the
installed release. Each entry is kept or skipped with a counted reason. A kept entry is a function
reachable by name from an allow-listed namespace that returns one float tensor of its input's
dtype, on float tensor operands and JSON-data arguments, that runs on random numbers, zeros and nans
(ops.probe_shape) and gives the same result twice. What is stored of it is data: its name, the
templates its CPU float32 samples show, the sizes each template dim takes (probed), its CPU dtypes,
its reference (a named numpy/scipy function that agrees with torch's float64 run, else that run)
and a jax twin that agrees with the reference on every template (table.py reads it back).
"""

from __future__ import annotations

import collections
import inspect
import math
import warnings

import numpy as np

from fuzzer.errors import OpUnsupported
from fuzzer.ops._common import DIMS
from fuzzer.ops.derived.ops import following, probe_shape, resolve
from fuzzer.ops.derived.table import JAX_NAMESPACES, NUMPY_MODULES, SCHEMA, TEMPLATES_PER_OP, check_call, save

# op_db name prefix -> where the function lives; fft only for real in, real out (checked on the samples).
NAMESPACES = {"nn.functional.": "torch.nn.functional.", "special.": "torch.special.", "linalg.": "torch.linalg.",
              "fft.": "torch.fft.", "": "torch."}
JAX_KEYWORDS = {"dim": "axis", "keepdim": "keepdims"}
# Arguments that change where the result goes or how it is computed, not what: never templated.
LEFT_OUT_KWARGS = {"out", "inplace"}
# How close a numpy ref or a jax twin must come to torch's float64 run on the samples to count as the same op.
AGREE_RTOL, AGREE_ATOL = 1e-6, 1e-9
EMPTY_FILL = 3


class Skip(Exception):
    """An entry left out; its message is the reason tallied."""


def import_op_db():
    """(op_db, None), or (None, one sentence) where this torch has no usable op database."""
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except Exception as exc:  # noqa: BLE001 - an internal module: any failure means no derived ops
        return None, (f"torch's op database cannot be imported ({type(exc).__name__}: {exc}); "
                      "install expecttest (pip install expecttest) to derive ops from it.")
    if not isinstance(op_db, list) or not all(hasattr(entry, "sample_inputs") for entry in op_db):
        return None, "torch's op database has changed shape (no list of OpInfo entries); no ops are derived from it."
    return op_db, None


def build_table(progress=lambda text: None) -> dict:
    """The derived-op table for the installed torch; raises Skip (one sentence) without an op database."""
    import torch

    op_db, why_not = import_op_db()
    if op_db is None:
        raise Skip(why_not)
    import jax

    jax.config.update("jax_enable_x64", True)  # the twins are checked in float64
    torch.manual_seed(0)
    by_call: dict[str, dict] = {}
    skipped = collections.Counter()
    for index, entry in enumerate(op_db):
        if index % 50 == 0:
            progress(f"{index}/{len(op_db)} entries")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecations of the ops it tries, a page each
                derived = _derive(entry)
        except Skip as reason:
            skipped[str(reason)] += 1
            continue
        except Exception as exc:  # noqa: BLE001 - an entry this release changed: counted, never fatal
            skipped[f"raised {type(exc).__name__} while deriving"] += 1
            continue
        _merge(by_call, derived)
    ops = []
    for op in by_call.values():
        op["templates"] = op["templates"][:TEMPLATES_PER_OP]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            op["reference"] = _reference(op)
            op["jax"] = _jax_twin(op)
        op.pop("refs")
        for template in op["templates"]:
            template.pop("values")  # the samples' numbers served the checks; the table keeps shapes
        ops.append(op)
    ops.sort(key=lambda op: op["name"])
    counts = {"entries": len(op_db), "usable": sum(len(op["entries"]) for op in ops), "ops": len(ops),
              "numpy_reference": sum(op["reference"]["kind"] == "numpy" for op in ops),
              "jax_twin": sum(op["jax"] is not None for op in ops), "skipped": dict(skipped.most_common())}
    return {"schema": SCHEMA, "torch": torch.__version__.split("+")[0], "counts": counts, "ops": ops}


def rebuild(path, progress=lambda text: None) -> dict:
    table = build_table(progress)
    save(table, path)
    return table


def _call_path(entry) -> str:
    import torch

    for prefix, namespace in NAMESPACES.items():
        if prefix and entry.name.startswith(prefix):
            return namespace + entry.name[len(prefix):]
    if "." in entry.name:
        raise Skip("namespace not allow-listed")
    if callable(getattr(torch, entry.name, None)):
        return "torch." + entry.name
    if callable(getattr(torch.Tensor, entry.name, None)):
        return "torch.Tensor." + entry.name
    raise Skip("no function of that name in torch or on Tensor")


def _resolve(call: str):
    try:
        return resolve(call)
    except OpUnsupported:
        raise Skip("no function of that name in torch or on Tensor") from None


def _derive(entry) -> dict:
    """One entry as {name, call, entries, dtypes, templates, refs}; Skip with the reason it cannot be."""
    import torch

    call = _call_path(entry)
    try:
        check_call(call)
    except ValueError:
        raise Skip("not a public function, or one that touches files or global state") from None
    function = _resolve(call)
    if torch.float32 not in entry.supported_dtypes("cpu"):
        raise Skip("no float32 on the CPU")
    templates, seen, why = [], set(), collections.Counter()
    for sample in entry.sample_inputs("cpu", torch.float32, requires_grad=False):
        if len(templates) == TEMPLATES_PER_OP:
            break
        try:
            template = _template(function, call, sample)
            if _template_key(template) not in seen:
                seen.add(_template_key(template))
                template["sizes"] = _free_sizes(call, template["shapes"], template["kwargs"])
                templates.append(template)
        except Skip as reason:
            why[str(reason)] += 1
    if not templates:
        raise Skip(why.most_common(1)[0][0] if why else "no samples")
    for template in templates:
        _check_deterministic(function, template)
    ref = entry.ref if callable(entry.ref) else None
    return {"name": call, "call": call, "entries": [entry.name + (f".{entry.variant_test_name}" * bool(entry.variant_test_name))],
            "dtypes": sorted(str(d).removeprefix("torch.") for d in entry.supported_dtypes("cpu")),
            "templates": templates, "refs": [ref] if ref else []}


def _merge(by_call: dict, derived: dict) -> None:
    """Entries calling one function (variants: `max.reduction_with_dim`) are one op with all their templates."""
    op = by_call.setdefault(derived["call"], {**derived, "templates": [], "entries": [], "refs": []})
    op["entries"] += derived["entries"]
    op["refs"] += derived["refs"]
    op["dtypes"] = sorted(set(op["dtypes"]) & set(derived["dtypes"]))
    seen = {_template_key(t) for t in op["templates"]}
    op["templates"] += [t for t in derived["templates"] if _template_key(t) not in seen]


def _template_key(template: dict):
    return repr((template["shapes"], sorted(template["kwargs"].items())))


def _is_json_data(value) -> bool:
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)  # JSON has no inf/nan
    if isinstance(value, (list, tuple)):
        return all(_is_json_data(v) and not isinstance(v, (list, tuple)) for v in value)
    return False


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def _template(function, call: str, sample) -> dict:
    """{shapes, kwargs, sizes} of one sample: its float tensor operands first, every other argument by keyword."""
    import torch

    operands = [sample.input, *[a for a in sample.args if isinstance(a, torch.Tensor)]]
    if not all(isinstance(t, torch.Tensor) and t.dtype == torch.float32 for t in operands):
        raise Skip("an operand that is not a float tensor")
    if not all(1 <= t.dim() <= 5 for t in operands):
        raise Skip("an operand of rank 0 or above 5")
    if any(t.numel() == 0 for t in operands):
        # An empty sample (edge-case testing) as the same call on size EMPTY_FILL in place of 0; kept only if it runs.
        operands = [torch.randn([d or EMPTY_FILL for d in t.shape]) for t in operands]
    positional = list(sample.args[len(operands) - 1:])
    if any(isinstance(a, torch.Tensor) for a in positional):
        raise Skip("a tensor argument after a non-tensor one")
    if not all(isinstance(a, torch.Tensor) for a in sample.args[:len(operands) - 1]):
        raise Skip("a tensor argument after a non-tensor one")
    kwargs = {key: _plain(value) for key, value in sample.kwargs.items()}
    if set(kwargs) & LEFT_OUT_KWARGS or not all(_is_json_data(v) for v in kwargs.values()):
        raise Skip("an argument that is not JSON data")
    if not all(_is_json_data(a) for a in positional):
        raise Skip("an argument that is not JSON data")
    expected = function(*operands, *positional, **sample.kwargs)
    kwargs.update(_by_keyword(function, call, operands, positional, kwargs, expected))
    result = function(*operands, **kwargs)
    if not isinstance(result, torch.Tensor) or result.dtype != torch.float32 or result.dim() == 0 or result.numel() == 0:
        raise Skip("not one non-empty float tensor of rank >= 1")
    if function(*[t.double() for t in operands], **kwargs).dtype != torch.float64:
        raise Skip("a result of another dtype than its operands'")  # Tensor.float: float64 in, float32 out
    shapes = [list(t.shape) for t in operands]
    return {"shapes": shapes, "kwargs": kwargs, "values": [t.detach().double().flatten().tolist() for t in operands]}


def _by_keyword(function, call, operands, positional, kwargs, expected) -> dict:
    """The positional non-tensor arguments by their names (a case stores attributes by name): from the
    Python signature or the aten schemas, kept only where the call by keyword gives the same result."""
    import torch

    if not positional:
        return {}
    for names in _parameter_names(function, call):
        rest = names[len(operands):len(operands) + len(positional)]
        if len(rest) != len(positional) or set(rest) & set(kwargs):
            continue
        named = {name: _plain(value) for name, value in zip(rest, positional)}
        try:
            again = function(*operands, **kwargs, **named)
        except Exception:  # noqa: BLE001 - the next overload's names may fit
            continue
        if isinstance(again, torch.Tensor) and isinstance(expected, torch.Tensor) and again.shape == expected.shape \
                and torch.equal(again.nan_to_num(), expected.nan_to_num()):
            return named
    raise Skip("a positional argument without a keyword name")


def _parameter_names(function, call: str) -> list[list[str]]:
    import torch

    found = []
    try:
        parameters = inspect.signature(function).parameters.values()
        if not any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
            found.append([p.name for p in parameters])
    except (TypeError, ValueError):
        pass  # a builtin: the aten schemas name its arguments
    name = call.rsplit(".", 1)[1]
    for aten in (name, f"special_{name}", f"linalg_{name}", f"fft_{name}"):
        try:
            schemas = torch._C._jit_get_schemas_for_operator(f"aten::{aten}")
        except RuntimeError:
            continue
        found += [["self", *(argument.name for argument in schema.arguments[1:])] for schema in schemas]
    return found


def _free_sizes(call: str, shapes, kwargs) -> list[list[int]]:
    """For each dim of the first operand, the sizes of DIMS it may take alone (with the dims that follow
    it, ops.following), probed; the template's own size always."""
    if isinstance(probe_shape(call, shapes, kwargs), str):
        raise Skip("refuses its own sample's shapes on random numbers, zeros or nans")
    sizes = []
    for dim, own in enumerate(shapes[0]):
        first = list(shapes[0])
        fits = {own}
        for size in DIMS:
            first[dim] = size
            if not isinstance(probe_shape(call, following(shapes, first), kwargs), str):
                fits.add(size)
        sizes.append(sorted(fits))
    return sizes


def _check_deterministic(function, template) -> None:
    import torch

    operands = [torch.tensor(v, dtype=torch.float32).reshape(s) for v, s in zip(template["values"], template["shapes"])]
    first, second = (function(*operands, **template["kwargs"]) for _ in range(2))
    if not torch.equal(first.nan_to_num(), second.nan_to_num()):
        raise Skip("random (two runs differ)")


def _float64_run(call: str, template: dict):
    import torch

    operands = [torch.tensor(v, dtype=torch.float64).reshape(s) for v, s in zip(template["values"], template["shapes"])]
    return _resolve(call)(*operands, **template["kwargs"]).numpy()


def _agrees(value, expected) -> bool:
    value = np.asarray(value)
    return value.shape == expected.shape and bool(np.allclose(value, expected, AGREE_RTOL, AGREE_ATOL, equal_nan=True))


def _named_numpy(ref) -> dict | None:
    """{module, name} where `ref` is a function of numpy or scipy.special under its own name."""
    import importlib

    name = getattr(ref, "__name__", "")
    for module_name in NUMPY_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if name and getattr(module, name, None) is ref:
            return {"module": module_name, "name": name}
    return None


def _reference(op: dict) -> dict:
    """A named numpy/scipy ref that agrees with torch's float64 run on every template, else that run."""
    for ref in op["refs"]:
        named = _named_numpy(ref)
        if named is None:
            continue
        try:
            if all(_agrees(ref(*[np.reshape(v, s) for v, s in zip(t["values"], t["shapes"])], **t["kwargs"]),
                           _float64_run(op["call"], t)) for t in op["templates"]):
                return {"kind": "numpy", **named}
        except Exception:  # noqa: BLE001 - a ref that does not take these arguments
            continue
    return {"kind": "torch-float64"}


def _jax_twin(op: dict) -> dict | None:
    """{path, keywords}: a jax function of the op's name that agrees with the float64 reference on every template."""
    import importlib

    name = op["call"].rsplit(".", 1)[1]
    for namespace in (prefix.rstrip(".") for prefix in JAX_NAMESPACES):
        function = getattr(importlib.import_module(namespace), name, None)
        if not callable(function):
            continue
        try:
            if all(_agrees(function(*[np.reshape(v, s) for v, s in zip(t["values"], t["shapes"])],
                                    **{JAX_KEYWORDS.get(k, k): v for k, v in t["kwargs"].items()}),
                           _float64_run(op["call"], t)) for t in op["templates"]):
                return {"path": f"{namespace}.{name}", "keywords": {k: v for k, v in JAX_KEYWORDS.items()
                                                                   if any(k in t["kwargs"] for t in op["templates"])}}
        except Exception:  # noqa: BLE001 - a twin that does not take these arguments
            continue
    return None
