"""Standalone reproducers: a short Python file that needs only numpy and torch or jax.

The backend's computation is captured by tracing it on the case itself:
torch backends with `make_fx` (readable aten ops, so a canary's or plugin's own
kernel is inlined too), jax backends with `jax.export` (serialized StableHLO, its
jaxpr shown as a comment). Inputs and weights are literals; the float64 numpy
reference output is a literal too ("expected"), with the oracle's allowed error.
The script prints the error and the versions and exits 1 while the bug is
present, 0 once fixed. `--format pytest` wraps the same lines in a test.

Text from a case (its title, which is a stored signature, and names) is data: it
reaches the script only through `repr`, an escaped docstring or a comment with its
line breaks removed, so a hostile corpus cannot put code into a reproducer.
"""

from __future__ import annotations

import base64
import keyword
import re
import textwrap

import numpy as np

from fuzzer.arrays import to_npy_bytes
from fuzzer.backends import Backend, interpret, split_arrays
from fuzzer.errors import UserError
from fuzzer.ir import Case
from fuzzer.layouts import CONTIGUOUS, layout_source
from fuzzer.oracle import allowed_error, compute_reference

LITERAL_LIMIT = 256  # elements; larger arrays are embedded as base64 .npy


def _identifier(name: str) -> str:
    """The script variable of an array ("n0.weight" -> "n0_weight"; a keyword such as "lambda" gets an underscore)."""
    identifier = re.sub(r"\W", "_", name, flags=re.ASCII)
    return identifier + "_" if keyword.iskeyword(identifier) else identifier


def docstring(text: str) -> str:
    """`text` as a triple-quoted literal that ends where we say: backslashes and quotes escaped."""
    return '"""' + text.replace("\\", "\\\\").replace('"', '\\"') + '"""'


def comment(text: str) -> str:
    """`text` as one comment line: a line break inside would start a line of code."""
    return "# " + " ".join(text.splitlines())


def _float_text(value: float, dtype: str) -> str:
    """The shortest text that gives back the same value in `dtype`."""
    if np.isnan(value):
        return "float('nan')"
    if np.isinf(value):
        return "float('inf')" if value > 0 else "-float('inf')"
    return np.format_float_positional(np.dtype(dtype).type(value), unique=True, trim="0")


def _nested(array: np.ndarray, dtype: str):
    if array.ndim == 0:
        return _float_text(float(array), dtype)
    return "[" + ", ".join(_nested(sub, dtype) for sub in array) + "]"


def array_literal(array: np.ndarray, dtype: str) -> str:
    if array.size <= LITERAL_LIMIT:
        return f"np.array({_nested(np.asarray(array), dtype)}, dtype=np.{dtype}).reshape({tuple(array.shape)})"
    blob = base64.b64encode(to_npy_bytes(array.astype(dtype))).decode()
    return f"np.load(io.BytesIO(base64.b64decode('{blob}')), allow_pickle=False)"


def _flat_names(case: Case) -> list[str]:
    inputs, params = split_arrays(case)
    return list(inputs) + [f"{node}.{p}" for node, ps in params.items() for p in ps]


def _graph_function(case: Case, backend: Backend, names: list[str]):
    inputs, params = split_arrays(case)

    def run(*values):
        env = dict(zip(names, values))
        return interpret(
            case.graph,
            {name: env[name] for name in inputs},
            {node: {p: env[f"{node}.{p}"] for p in ps} for node, ps in params.items()},
            backend.impl_for,
        )

    return run


def _torch_body(case: Case, backend: Backend, names: list[str]) -> tuple[list[str], str]:
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    if hasattr(backend, "prepared"):
        # A model-level backend (saveload, export, BN folding, ...): trace the transformed
        # program itself; its weights become literal constants. `names` are its inputs only.
        program, args = backend.prepared(case)
        module = make_fx(lambda *values: program(*values))(*args)
    else:
        dtype = getattr(torch, backend.dtype)
        args = [torch.from_numpy(case.arrays[n]).to(backend.device, dtype) for n in names]
        module = make_fx(_graph_function(case, backend, names))(*args)
    code = module.code.strip()
    code = re.sub(r";\s+[\w\s=,]+= None", "", code)  # drop fx's "x = None" memory hints
    placeholders = [node.name for node in module.graph.nodes if node.op == "placeholder"]
    for placeholder, name in zip(placeholders, names):
        code = re.sub(rf"\b{placeholder}\b", _identifier(name), code)
    code = code.replace("def forward(self, ", "def run(", 1)
    # Tensors the traced code created as constants become literals of their own.
    constants = []
    for node in module.graph.nodes:
        if node.op == "get_attr":
            value = getattr(module, node.target).detach().to("cpu", torch.float64).numpy()
            constants.append(f"CONSTANTS[{node.target!r}] = torch.tensor({array_literal(value, 'float64')}, dtype=DTYPE, device=DEVICE)")
            code = code.replace(f"self.{node.target}", f"CONSTANTS[{node.target!r}]")
    setup = [
        "import torch",
        "from torch import device  # fx prints devices as device(type='cpu')",
        "from math import inf, nan  # and non-finite numbers as inf / nan",
        "",
        f"DEVICE, DTYPE = {backend.device!r}, torch.{backend.dtype}",
    ]
    if constants:
        setup += ["CONSTANTS = {}", *constants]
    specs = {spec.name: spec for spec in case.graph.inputs}
    # Inputs the campaign stored in another memory layout get it back (a layout bug needs it).
    relayouts = "".join(
        f"args[{i}] = {layout_source(specs[n].layout, specs[n].shape, f'args[{i}]')}  # as the campaign stored it\n"
        for i, n in enumerate(names) if n in specs and specs[n].layout != CONTIGUOUS
    )
    call = (
        f"args = [torch.from_numpy(a).to(DEVICE, DTYPE) for a in ({', '.join(_identifier(n) for n in names)},)]\n"
        + relayouts
        + "outputs = run(*args)\n"
        "outputs = [o.detach().to('cpu', torch.float64).numpy() for o in outputs]\n"
        "VERSIONS = f'torch {torch.__version__}, cuda {torch.version.cuda}, numpy {np.__version__}'"
    )
    return setup, code + "\n\n\n" + call


def _jax_body(case: Case, backend: Backend, names: list[str]) -> tuple[list[str], str]:
    import jax
    from jax import export

    from fuzzer.backends.jax_eager import import_jax

    import_jax()
    dtype = getattr(jax.numpy, backend.dtype)
    args = [np.asarray(case.arrays[n]).astype(dtype) for n in names]
    fn = _graph_function(case, backend, names)
    jaxpr = str(jax.make_jaxpr(fn)(*args))
    exported = export.export(jax.jit(fn))(*args)
    blob = base64.b64encode(exported.serialize()).decode()
    setup = [
        "import jax",
        "from jax import export",
        "",
        'jax.config.update("jax_enable_x64", True)',
        f"DTYPE = jax.numpy.{backend.dtype}",
    ]
    traced = "\n".join(comment(line) for line in jaxpr.splitlines())
    body = (
        f"# The computation, as jax traced it:\n{traced}\n"
        f"COMPILED = export.deserialize(bytearray(base64.b64decode('{blob}')))\n\n\n"
        f"outputs = COMPILED.call(*[a.astype(DTYPE) for a in ({', '.join(_identifier(n) for n in names)},)])\n"
        "outputs = [np.asarray(o, dtype=np.float64) for o in outputs]\n"
        "VERSIONS = f'jax {jax.__version__}, numpy {np.__version__}'"
    )
    return setup, body


def build_script(case: Case, backend: Backend, title: str, pytest_style: bool = False) -> str:
    """The reproducer's source for `backend` on `case` (normally the shrunk case of a finding)."""
    if backend.other_environment() is not None:
        return backend.script_in_environment(case, title, pytest_style)
    if backend.family not in ("torch", "jax"):
        raise UserError(f"Backend '{backend.name}' is not a torch or jax backend; a standalone script cannot run it.")
    names = [spec.name for spec in case.graph.inputs] if hasattr(backend, "prepared") else _flat_names(case)
    reference = compute_reference(case, {backend.dtype})
    allowed = [allowed_error(reference, i, backend.dtype) for i in range(len(reference.outputs))]
    setup, body = (_torch_body if backend.family == "torch" else _jax_body)(case, backend, names)
    data = [f"{_identifier(n)} = {array_literal(case.arrays[n], 'float32')}" for n in names]
    expected = [array_literal(out, "float64") for out in reference.outputs]
    uses_blobs = "base64.b64decode" in "\n".join(data + expected + setup) + body
    imports = ["import sys"] + (["import base64", "import io"] if uses_blobs else []) + ["", "import numpy as np"] + setup
    check = textwrap.dedent(
        f"""\
        EXPECTED = [{', '.join(expected)}]  # float64 reference, computed from the math
        ALLOWED = {[float(f'{a:.3g}') for a in allowed]}  # max abs error a correct {backend.dtype} implementation may have

        errors = [float(np.max(np.abs(o - e))) if o.shape == e.shape else float('inf') for o, e in zip(outputs, EXPECTED)]
        print(VERSIONS)
        for i, (error, allowed) in enumerate(zip(errors, ALLOWED)):
            print(f'output {{i}}: max abs error {{error:.3g}} (allowed {{allowed:.3g}})')
        failed = not all(error <= allowed for error, allowed in zip(errors, ALLOWED))
        """
    )
    header = docstring(f"Reproducer: {title}\n\nGraph: {' > '.join(case.graph.op_names())}. Backend under test: "
                       f"{backend.name}.\nWritten by `fuzz export`; needs only numpy and {backend.family}. "
                       "Exit 1 while the bug is present.")
    if pytest_style:
        tail = "\n\ndef test_reproducer():\n    assert not failed, f'errors {errors} exceed {ALLOWED}'\n"
    else:
        tail = "\nsys.exit(1 if failed else 0)\n"
    return "\n".join([header, *imports, "", *data, "", "", body, "", check]) + tail
