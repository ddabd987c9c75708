"""The parts of a reproducer that backends share: the graph as a Python function of public
torch or jax calls, and the lines that turn the script's numpy arrays into framework inputs.

A backend's `reproducer_program(case)` (see `Backend`) builds on these and adds its own
transformation (torch.compile, jax.jit, a module tree, save/load, ...). Names of arrays in
the script come from `variable_name`, so every writer refers to the same variables; the finished
script gets readable ones that shadow nothing (`with_readable_names`).
"""

from __future__ import annotations

import ast
import base64
import builtins
import io
import keyword
import re
import tokenize
import zlib
from collections import Counter
from typing import Callable

import numpy as np

from fuzzer.arrays import to_npy_bytes
from fuzzer.drawing.layouts import layout_source
from fuzzer.errors import UserError
from fuzzer.ir import Case, infer_shapes
from fuzzer.programs.program import shared_reads
from fuzzer.programs.statements import ARITHMETIC, ELEMENT, ITEM, LIST_READ, STATEMENTS, arithmetic_of
from fuzzer.reproducers.op_source import Source, literal, write_call

# What each framework's reproducer prints first (maintainers ask for it); `Backend.versions_source`.
TORCH_VERSIONS = ("VERSIONS = (f'torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, '\n"
                  "            f'GPU {torch.cuda.get_device_name() if torch.cuda.is_available() else None}')")
JAX_X64 = 'jax.config.update("jax_enable_x64", True)  # float64 stays float64, as in the campaign'
JAX_VERSIONS = "VERSIONS = f'jax {jax.__version__}, jaxlib {jax.lib.__version__}, device {jax.devices()[0].device_kind}'"  # jax.lib's is jaxlib's (0.4.28 to 0.12)

LITERAL_LIMIT = 256  # elements; larger arrays are embedded as base64 .npy


def variable_name(name: str) -> str:
    """The script variable of a case array or node `name` while a script is written: a placeholder
    that no other name in a script can be, which `with_readable_names` turns into a readable one."""
    return f"_case_{name.encode().hex()}_"


PLACEHOLDER = re.compile(r"\b_case_([0-9a-f]+)_\b")


def with_readable_names(text: str, preferred: dict[str, str] | None = None) -> str:
    """A finished script `text` with each case name's placeholder replaced by a readable variable
    ("n0.weight" -> "n0_weight", or the name `preferred` gives it), unique, and shadowing nothing
    the script uses: an input named `np`, `print` or `n0_weight` (beside node n0's weight) gets a
    "_" more (`np_`, `n0_weight_`). Names are taken in order of first appearance, so `graph`'s
    arguments keep theirs first."""
    preferred = preferred or {}
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    taken = {token.string for token in tokens if token.type == tokenize.NAME}
    taken |= set(keyword.kwlist) | set(dir(builtins))
    readable = {}
    for match in PLACEHOLDER.finditer(text):
        if match.group(0) not in readable:
            original = bytes.fromhex(match.group(1)).decode()
            name = re.sub(r"\W", "_", preferred.get(original, original), flags=re.ASCII)
            while name in taken:
                name += "_"
            taken.add(name)
            readable[match.group(0)] = name
    return PLACEHOLDER.sub(lambda match: readable[match.group(0)], text)


def _float_text(value: float, dtype: str) -> str:
    """The shortest text that gives back the same value in `dtype` (numpy's repr of a `dtype`
    scalar: 88.98707, 1e+30); non-finite values as the script's `nan`, `inf` (from math)."""
    if np.isnan(value):
        return "nan"
    if np.isinf(value):
        return "inf" if value > 0 else "-inf"
    return str(np.dtype(dtype).type(value))


def _nested(array: np.ndarray, dtype: str):
    if array.ndim == 0:
        return _float_text(float(array), dtype)
    return "[" + ", ".join(_nested(sub, dtype) for sub in array) + "]"


def array_literal(array: np.ndarray, dtype: str) -> str:
    """Source for `array` in `dtype`; uses the script's `nan` and `inf` (from math)."""
    array = np.asarray(array)
    if array.dtype == bool:
        return f"np.array({array.astype(int).tolist()}, dtype=bool)"
    if array.size <= LITERAL_LIMIT:
        return f"np.array({_nested(array, dtype)}, dtype=np.{dtype}).reshape({tuple(array.shape)})"
    blob = base64.b64encode(to_npy_bytes(array.astype(dtype))).decode()
    return f"np.load(io.BytesIO(base64.b64decode('{blob}')), allow_pickle=False)"


# -- the minimal reproducer's inputs: the shape and the values, in the fewest characters ------

SPARSE_LIMIT = 3  # entries that differ from all the others, each written as one assignment
SHORT_LITERAL_LIMIT = 64  # elements written as a flat literal
SEEDED_LIMIT = 10**6  # elements; larger arrays are not matched against the generators
# The one-line draws of the campaign's generators (fuzzer/arrays.py: input profiles and weights),
# as script text and as the call it stands for. A large array is rebuilt from its seed only when
# one of them gives exactly its values; else it is embedded.
SEEDED_DRAWS = (
    ("standard_normal({shape})", lambda rng, shape: rng.standard_normal(shape)),
    ("standard_normal({shape}) * 0.5", lambda rng, shape: rng.standard_normal(shape) * 0.5),
    ("standard_normal({shape}) / np.sqrt({fan_in})", lambda rng, shape: rng.standard_normal(shape) / np.sqrt(_fan_in(shape))),
    ("uniform(-2.0, 2.0, {shape})", lambda rng, shape: rng.uniform(-2.0, 2.0, shape)),
    ("uniform(0.5, 2.0, {shape})", lambda rng, shape: rng.uniform(0.5, 2.0, shape)),
    ("uniform(0.5, 1.5, {shape})", lambda rng, shape: rng.uniform(0.5, 1.5, shape)),
    ("standard_normal({shape}) * 0.001", lambda rng, shape: rng.standard_normal(shape) * 1e-3),
    ("standard_normal({shape}) * 100.0", lambda rng, shape: rng.standard_normal(shape) * 1e2),
)


def _fan_in(shape: tuple[int, ...]) -> int:
    return max(int(np.prod(shape[1:])), 1) if len(shape) > 1 else 1


def values_dtype(case: Case) -> str:
    """float32 when every array holds float32 values (as the campaign draws them), else float64."""
    exact = all(np.array_equal(a, np.asarray(a, np.float32), equal_nan=True) for a in case.arrays.values())
    return "float32" if exact else "float64"


def compact_arrays(case: Case, family: str) -> list[str]:
    """Lines defining the case's arrays as the script variables `graph` takes, each in its shortest
    form: one value (`torch.full`), one value but for a few entries (then one assignment each), a
    short literal, a draw from the seed the campaign drew it with, or base64 `.npy` (`array_literal`).
    torch scripts get torch tensors, others numpy arrays."""
    dtype = values_dtype(case)
    lines = []
    for name in argument_names(case):
        lines += compact_array(variable_name(name), np.asarray(case.arrays[name]), dtype, family, _seeds(case, name))
    return lines


def _seeds(case: Case, name: str) -> list:
    """The seeds the campaign drew `name` from: the case's own (its first array), or the case's
    seed with the array's name (a shrunk case's new arrays, fuzzer/shrinking/shrink.py `rebuild`)."""
    return [case.seed, [case.seed, zlib.crc32(name.encode())]]


def _numpy_float_text(value: float, dtype: str) -> str:
    """`_float_text`, non-finite values as numpy's constants (np.nan): the script imports nothing more."""
    text = _float_text(value, dtype)
    return {"nan": "np.nan", "inf": "np.inf", "-inf": "-np.inf"}.get(text, text)


def _full(shape: tuple[int, ...], value: str, dtype: str, family: str) -> str:
    if family == "torch":
        return f"torch.full({shape}, {value}{', dtype=torch.float64' if dtype == 'float64' else ''})"
    return f"np.full({shape}, {value}{'' if dtype == 'bool' else f', np.{dtype}'})"


def compact_array(variable: str, array: np.ndarray, dtype: str, family: str, seeds: list = ()) -> list[str]:
    """Lines setting `variable` to `array` in `dtype` ("bool" for masks): see `compact_arrays`."""
    shape = tuple(int(size) for size in array.shape)
    texts = [str(bool(v)) if dtype == "bool" else _numpy_float_text(float(v), dtype) for v in array.reshape(-1)]
    counts = Counter(texts)
    common, count = counts.most_common(1)[0] if texts else ("0.0", 0)
    if array.size - count <= SPARSE_LIMIT and (count > 1 or array.size == 1):
        lines = [f"{variable} = {_full(shape, common, dtype, family)}"]
        for flat, text in enumerate(texts):
            if text != common:
                index = ", ".join(str(int(i)) for i in np.unravel_index(flat, shape))
                lines.append(f"{variable}[{index}] = {text}")
        return lines
    if array.size <= SHORT_LITERAL_LIMIT:
        values = f"[{', '.join(texts)}]"
        built = (f"torch.tensor({values}{', dtype=torch.float64' if dtype == 'float64' else ''})" if family == "torch"
                 else f"np.array({values}{'' if dtype == 'bool' else f', np.{dtype}'})")
        return [f"{variable} = {built}" + (f".reshape{shape}" if len(shape) != 1 else "")]
    return [f"{variable} = {_seeded(array, dtype, seeds) or array_literal(array, dtype)}"]


def _seeded(array: np.ndarray, dtype: str, seeds: list) -> str | None:
    """`(np.random.default_rng(SEED).DRAW).astype(...)` when that gives exactly `array`'s values."""
    if array.size > SEEDED_LIMIT:
        return None
    shape = tuple(int(size) for size in array.shape)
    for seed in seeds:
        for text, draw in SEEDED_DRAWS:
            values = draw(np.random.default_rng(seed), shape).astype(dtype)
            if np.array_equal(values.astype(np.float64), array, equal_nan=True):
                call = text.format(shape=shape, fan_in=_fan_in(shape))
                # In parentheses: a draw scaled afterwards (`* 0.001`) would take the .astype on its scale alone.
                return f"(np.random.default_rng({seed}).{call}).astype(np.{dtype})  # as the campaign drew it"
    return None


def device_guard(backend) -> list[str]:
    """Lines that exit 2, with one sentence, where the script's device is missing (a script that
    failed there would read as a bug, one that passed as a fix)."""
    if backend.family == "torch" and backend.device == "cuda":
        condition, device = "not torch.cuda.is_available()", "a CUDA GPU, and torch sees none"
    elif backend.family == "jax" and backend.device == "gpu":
        condition, device = "jax.default_backend() != 'gpu'", "a GPU, and jax sees none"
    else:
        return []
    return [f"if {condition}:", f"    print('This reproducer needs {device} here.', file=sys.stderr)", "    sys.exit(2)"]


def with_notes(source: Source, code: str) -> str:
    """`code` after a comment for each reason `source` had to use the fuzzer package."""
    return "\n".join([*(f"# Needs the fuzzer: {note}." for note in source.notes), code])


def _param_names(case: Case) -> list[str]:
    """The case's parameter arrays ("n0.weight"): every array that is not a graph input."""
    inputs = {spec.name for spec in case.graph.inputs}
    return [name for name in case.arrays if name not in inputs]


def argument_names(case: Case) -> list[str]:
    """The case's arrays in the graph function's order: graph inputs, then every node's params."""
    return [spec.name for spec in case.graph.inputs] + _param_names(case)


def graph_arguments(case: Case) -> list[str]:
    """The graph function's parameter names in the script."""
    return [variable_name(name) for name in argument_names(case)]


def graph_function(case: Case, impl_for: Callable, source: Source, name: str = "graph", fixed_shapes: bool = True,
                   symbolic: bool | None = None) -> str:
    """`def graph(x, n0_weight, ...)`: the case's nodes in order as calls of the implementations
    `impl_for(op name)` gives (a backend's own: fuzzer/reproducers/op_source.py), returning the graph outputs.
    `fixed_shapes`: shapes an implementation computes are written as the case's (not for a
    compiler that traces them symbolically, torch.compile(dynamic=True), nor for a script that calls
    `graph` at other sizes); where `symbolic` (default: not `fixed_shapes`), the integer attributes
    are `graph`'s keyword defaults (_symbolic_attributes), inlined implementations' too."""
    symbolic = not fixed_shapes if symbolic is None else symbolic
    params = [name.split(".", 1) for name in _param_names(case)]
    shapes = {}
    if fixed_shapes:
        shapes = {variable_name(name): shape for name, shape in infer_shapes(case.graph).items()}
        shapes |= {variable_name(name): np.shape(case.arrays[name]) for name in _param_names(case)}
    body, defaults = [], {}
    shared = shared_reads(case.graph, infer_shapes(case.graph)) if case.graph.steps else {}
    for node in case.graph.nodes:
        node_params = {p: variable_name(f"{owner}.{p}") for owner, p in params if owner == node.name}
        impl, attrs, inputs = impl_for(node.op), node.attrs, [variable_name(i) for i in node.inputs]
        if symbolic:
            attrs = _symbolic_attributes(node, defaults)
        temporary = lambda local, node=node: variable_name(f"{node.name}_{local}")  # noqa: E731
        if ITEM in attrs:  # a scalar read at run time (fuzzer/programs/program.py, scalar_reads), written as users write it
            statements, scalar = _scalar_source(node, inputs.pop(), shared, impl_for, source, shapes, temporary)
            body += [f"    {statement}" for statement in statements]
            attrs = {**{key: value for key, value in attrs.items() if key not in (ITEM, ARITHMETIC, ELEMENT)}, attrs[ITEM]: scalar}
        if impl is STATEMENTS["branch_"].torch:  # control flow on the value as users write it (a plugin's: its own)
            arms = [("then", f"if {attrs['condition']} > 0:"), ("otherwise", "else:")]
            for arm, line in arms:
                statements, call = write_call(impl_for(attrs[arm]), inputs, {}, {}, source, shapes, temporary)
                body += [f"    {line}", *(f"        {s}" for s in statements), f"        {variable_name(node.name)} = {call}"]
            continue
        statements, call = write_call(impl, inputs, node_params, attrs, source, shapes, temporary)
        body += [f"    {statement}" for statement in statements] + [f"    {variable_name(node.name)} = {call}"]
    keywords = [f"{default}={literal(value)}" for default, value in defaults.items()]
    lines = [f"def {name}({', '.join(graph_arguments(case) + keywords)}):"]
    if defaults:
        lines.append("    # Integers as defaults, not literals: dynamic=True traces them as symbols, as the campaign's compile did")
    lines += body
    returned = [variable_name(o) for o in case.graph.outputs]
    last = variable_name(case.graph.nodes[-1].name) if case.graph.nodes else None
    if returned.count(last) == 1 and lines[-1].startswith(f"    {last} = "):  # the last call into the return, by hand
        returned[returned.index(last)] = lines.pop().removeprefix(f"    {last} = ")
    lines.append(f"    return [{', '.join(returned)}]")
    return "\n".join(lines)


def _scalar_source(node, operand: str, shared: dict, impl_for: Callable, source: Source, shapes: dict,
                   temporary: Callable) -> tuple[list[str], "_AsWritten"]:
    """(statements, expression) of the scalar `node` reads from `operand`: `operand.item()` (or `operand.tolist()[k]`,
    the list as its implementation writes it), read once into a variable where several statements take that number
    (program.shared_reads), then its Python arithmetic written out."""
    element = node.attrs.get(ELEMENT)
    statements, read = ([], f"{operand}.item()") if element is None else \
        write_call(impl_for(LIST_READ), [operand], {}, {}, source, shapes, temporary)
    index = "" if element is None else f"[{element}]"
    if list(shared.values()).count(shared[node.name]) > 1:
        variable = variable_name(f"{shared[node.name]}_number{'s' if index else ''}")
        if shared[node.name] != node.name:
            statements = []  # read by the first statement that takes it
        else:
            statements.append(f"{variable} = {read}  # one {'list' if index else 'number'} for every statement that reads it")
        number = variable + index
    else:
        number = _indexable(read) + index
    arithmetic = arithmetic_of(node.attrs)
    if arithmetic is not None:
        form, constants = arithmetic
        computing, number = write_call(impl_for(form), [number], {}, constants, source, shapes, temporary)
        statements += computing
    return statements, _AsWritten(number)


def _indexable(expression: str) -> str:
    """`expression` as it can be subscripted: in parentheses unless a name, a call, an attribute or a subscript."""
    simple = isinstance(ast.parse(expression, mode="eval").body, (ast.Name, ast.Call, ast.Attribute, ast.Subscript))
    return expression if simple else f"({expression})"


class _AsWritten(str):
    """Source written bare where an attribute's value would be (literal() uses repr): a keyword default's
    name, a scalar's `.item()`."""

    def __repr__(self) -> str:
        return str(self)


def _symbolic_attributes(node, defaults: dict) -> dict:
    """The node's attributes with each integer, or list of integers, replaced by the name of a keyword
    default of `graph` holding it (added to `defaults`). torch.compile(dynamic=True) reads an integer
    from a function's defaults or closure as a symbol, and from a literal as a constant: the campaign's
    compiled program got its attributes the first way (a view size of 14 on a 2 x 7 input is a symbol
    there, which an unfold's strides then depend on), so the script must too."""
    written = {}
    for key, value in node.attrs.items():
        items = value if isinstance(value, (list, tuple)) else [value]
        if key != ELEMENT and items and all(isinstance(item, int) and not isinstance(item, bool) for item in items):
            # "n0:size", which no node, input or parameter ("n0.weight") is named: read as n0_size, or n0_size_
            # where a node of that name takes n0_size (with_readable_names)
            default = _AsWritten(variable_name(f"{node.name}:{key}"))
            defaults[default] = value
            value = default
        written[key] = value
    return written


def torch_tensors(case: Case, device: str, dtype: str, layouts: dict[int, str] | None = None) -> str:
    """`args = [...]`: the graph function's arguments as torch tensors on `device` in `dtype`, then
    re-stored in the memory layout the campaign ran them in (a layout bug needs it), each as the
    torch expression that makes it: `layouts` {argument index: layout}, by default the layouts
    stored with the graph inputs. Re-stored after the conversion, which keeps no strided view,
    and in `args` only: the script's float64 reference takes the contiguous variables."""
    if layouts is None:
        layouts = {index: spec.layout for index, spec in enumerate(case.graph.inputs)}
    names = argument_names(case)
    lines = [f"args = [torch.as_tensor(a).to({device!r}, torch.{dtype}) for a in ({', '.join(graph_arguments(case))},)]"]
    for index, layout in layouts.items():
        restored = layout_source(layout, np.shape(case.arrays[names[index]]), f"args[{index}]")
        if restored != f"args[{index}]":  # contiguous, or a layout the (shrunk) shape no longer allows
            lines.append(f"args[{index}] = {restored}  # {layout} layout, as the campaign ran it")
    return "\n".join(lines)


def _arguments_in_call(arguments: list[str], transform: list[str], call: str) -> tuple[list[str], str]:
    """(`arguments`, `call`), or where the program only calls the graph on `args` (no layouts
    to restore, no transformation using them), no lines and the list written into the call."""
    if len(arguments) == 1 and not transform and call.count("*args") == 1:
        return [], call.replace("*args", "*" + arguments[0].removeprefix("args = "))
    return arguments, call


def torch_outputs(expression: str) -> str:
    return f"outputs = [o.detach().to('cpu', torch.float64).numpy() for o in {expression}]"


def torch_steps(case: Case, call: str, marks: bool = False) -> list[str]:
    """A program's run (fuzzer/programs/program.py): `call` once a step on the same tensors `args`, each step's
    outputs copied as it returns them, then the inputs the program writes, as they are after the last step. A resized
    program's step takes its resized inputs' leading rows (ir.Resize), dim 0 marked as the campaign did where `marks`."""
    from fuzzer.programs.program import written_inputs

    written = [argument_names(case).index(name) for name in written_inputs(case.graph)]
    resize, resizing = case.graph.resized, []
    if resize is not None:
        call = call.replace("*args", "*step_args")
        resized = [argument_names(case).index(name) for name in resize.inputs]
        resizing = ["    step_args = list(args)",
                    f"    for i in {resized}:  # a view of the leading rows, a size of its own each step",
                    f"        step_args[i] = args[i][:{list(resize.rows)}[step]]",
                    *([f"        torch._dynamo.decorators.mark_{resize.mark}(step_args[i], 0)"] if marks else [])]
    return ["results = []",
            f"for step in range({case.graph.steps}):  # the same tensors every step: what one step writes, the next reads",
            *resizing,
            f"    results += [o.clone() for o in {call}]",
            *([f"results += [args[i] for i in {written}]  # the inputs it writes, after the last step"] if written else []),
            torch_outputs("results")]


def strict_precision(device: str) -> list[str]:
    """On CUDA the campaign judges with TF32 and reduced-precision reductions off; so does the script."""
    if device != "cuda":
        return []
    return ["torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False",
            "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False",
            "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False"]


def torch_program(case: Case, backend, transform: list[str], call: str, context: str | None = None,
                  layouts: dict[int, str] | None = None, source: Source | None = None) -> tuple[list[str], str]:
    """(imports, code) of a reproducer for a torch `backend`: the graph function (and what a writer
    put in `source` already), the tensors `args` (in `layouts`: see `torch_tensors`), then
    `transform` lines that build a program from `graph`, and `call` (an expression giving the
    outputs) run in `context`. None: no context, for eager calls on tensors that require no grad,
    which compute the same inside torch.no_grad() (where the campaign runs them) and outside."""
    source = source or Source(imports=["import torch"])
    dynamic = getattr(backend, "dynamic", False)
    graph = graph_function(case, backend.impl_for, source, symbolic=dynamic,
                           fixed_shapes=not (dynamic or getattr(backend, "reproducer_resizes_batch", False)))
    code = with_notes(source, "\n\n\n".join(part for part in (source.text(), graph) if part))
    device = [f"DEVICE = {backend.device!r}"] * any("DEVICE" in line for line in transform)  # e.g. torch.load's map_location
    tensors = torch_tensors(case, backend.device, backend.dtype, layouts).split("\n")
    if case.graph.steps:  # a program: `args` must stay one list, the state its steps write
        run = torch_steps(case, call, getattr(backend, "marks_resized_dims", False))
    else:
        tensors, call = _arguments_in_call(tensors, transform, call)
        run = [torch_outputs(call)]
    run = [f"with {context}:", *("    " + line for line in run)] if context else run
    body = [*device, *tensors, *strict_precision(backend.device), *transform, *run]
    return source.imports, code + "\n\n\n" + "\n".join(body)


def module_program(case: Case, backend, transform: list[str], context: str, buffers: frozenset[str],
                   source: Source | None = None) -> tuple[list[str], str]:
    """(imports, code) of a reproducer for a model-level torch `backend`: the graph as one flat
    `Model` (weights as parameters, those named in `buffers` ("n0.running_mean") as buffers),
    built from the case's weights, then `transform` lines that turn `model` into `program`,
    called on the graph inputs in `context` (`source`: imports and definitions the
    transformation needs).
    The campaign nests one module per node (fuzzer/running/model.py); the flat module keeps the
    transformation and the ops, not the nesting (say so when a bug needs it)."""
    weights = _param_names(case)
    model = [
        f"INPUTS = {len(case.graph.inputs)}",
        f"WEIGHTS = {[variable_name(name) for name in weights]!r}",
        f"BUFFERS = {sorted({variable_name(n) for n in weights if n in buffers})!r}",
        "",
        "",
        "class Model(torch.nn.Module):",
        '    """The graph as one module: its weights as parameters, running statistics and RNN states as buffers."""',
        "",
        "    def __init__(self, weights):",
        "        super().__init__()",
        "        for name, value in zip(WEIGHTS, weights):",
        "            if name in BUFFERS:",
        "                self.register_buffer(name, value)",
        "            else:",
        "                self.register_parameter(name, torch.nn.Parameter(value, requires_grad=False))",
        "",
        "    def forward(self, *inputs):",
        "        return graph(*inputs, *[getattr(self, name) for name in WEIGHTS])",
        "",
        "",
    ]
    setup = [*model, "inputs, weights = args[:INPUTS], args[INPUTS:]", "model = Model(weights).eval()", *transform]
    return torch_program(case, backend, setup, "program(*inputs)", context, source=source)


def jax_program(case: Case, backend, transform: list[str], call: str, helpers: tuple[Callable, ...] = ()) -> tuple[list[str], str]:
    """(imports, code) of a reproducer for a jax `backend`, as `torch_program`. x64 is on, as in
    the campaign (fuzzer/backends/jax_eager.py), so float64 stays float64."""
    if case.graph.steps:
        raise UserError("No script writer for a jax program yet (jax runs it translated: fuzzer/programs/program.py); "
                        "`fuzz export --format json` gives the case as data, and `fuzz replay` re-runs it.")
    source = Source(imports=["import jax"])
    for helper in helpers:
        source.add_function(helper)
    graph = graph_function(case, backend.impl_for, source)
    dtype = backend.dtype
    code = with_notes(source, "\n\n\n".join(part for part in (source.text(), graph) if part))
    arrays, call = _arguments_in_call([f"args = [jax.device_put(a.astype(jax.numpy.{dtype}), jax.devices({backend.device!r})[0]) "
                                       f"for a in ({', '.join(graph_arguments(case))},)]"], transform, call)
    body = [*arrays,
            f"jax.config.update('jax_default_device', jax.devices({backend.device!r})[0])  # where the campaign ran it, arguments or none",
            *(["jax.config.update('jax_default_matmul_precision', 'highest')  # strict, as the campaign judges"]
              if backend.device == "gpu" else []),
            *transform, f"outputs = [np.asarray(o, dtype=np.float64) for o in {call}]"]
    imports = source.imports + [JAX_X64]
    return imports, code + "\n\n\n" + "\n".join(body)
